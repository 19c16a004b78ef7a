#!/bin/bash
# iolens on many hosts with Slurm: one rank per node, all measuring from the same instant,
# then one exact merge. Submit with:  sbatch recipes/slurm-batch.sh
#
# Each rank reads its own LUN ({rank} in --target) and writes its own results file to a shared
# directory ({host} and {rank} in --json). The start time is resolved ONCE here, in the batch
# step, and handed to every rank, so their measurements start together (to within the nodes'
# clock agreement: run chrony or ntpd; each result records the clock's adjtimex state, and
# `iolens merge` warns when a clock is unsynchronised or the starts disagree).
#SBATCH --job-name=iolens
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=1
#SBATCH --time=00:10:00
#SBATCH --output=iolens-%j.out
set -euo pipefail

OUT="${OUT:-$PWD/iolens-$SLURM_JOB_ID}"   # a directory every node can write (NFS, Lustre…)
mkdir -p "$OUT"
# 30 s for srun to start iolens on every node and for each to open its target.
START="$(date -u -d '+30 sec' +%Y-%m-%dT%H:%M:%S.%NZ)"

srun iolens -q run \
    --target '/dev/mapper/lun{rank}' \
    --pattern randread --bs 8k --sessions 16 --duration 5m --interval 1s \
    --start-at "$START" \
    --json "$OUT/{host}-{rank}.json"

# A rank that failed leaves no file: merge names it as missing and merges the others.
iolens merge "$OUT"/*-*.json -o "$OUT/merged.json"
iolens report "$OUT/merged.json" -o "$OUT/report.html"
