#!/bin/bash
# iolens on many hosts with MPI (Open MPI's mpirun or MPICH's mpiexec): one rank per host from
# a hostfile, all measuring from one start time resolved once here. iolens does not use MPI
# itself; it reads its rank from OMPI_COMM_WORLD_RANK (Open MPI) or PMI_RANK (MPICH).
set -euo pipefail
START="$(date -u -d '+30 sec' +%Y-%m-%dT%H:%M:%S.%NZ)"
mpirun --hostfile hosts.txt --map-by node -np 4 \
    iolens -q run --target '/dev/mapper/lun{rank}' --sessions 16 --duration 5m \
    --start-at "$START" --json "/shared/iolens/{host}-{rank}.json"
# (as root, Open MPI also needs --allow-run-as-root; on one machine, --oversubscribe)
iolens merge /shared/iolens/*.json -o merged.json
