#!/usr/bin/env bash
# What striping over several targets costs per I/O: the null engine (no I/O: the tool's own
# cost) with 1 target and with 4 targets (`--stripe unit`, 1 MiB units) in the same session,
# alternating over ROUNDS rounds in mirrored order. Prints, per layout, the session time per
# I/O (sessions × measured seconds / I/Os) and the CPU per I/O the run measured, their medians
# and the ratios 4 targets / 1 target.
# Usage: bench/stripe-cost.sh [DIR] [SECONDS] [ROUNDS] [SESSIONS]   (BIN=path to use another build)
# Absolute figures drift on shared machines; compare the ratio of one run.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-bench-tmp}
SECS=${2:-3}
ROUNDS=${3:-5}
SESSIONS=${4:-1}
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet
  BIN=./target/release/iolens
fi
mkdir -p "$DIR"
python3 - "$BIN" "$DIR" "$SECS" "$ROUNDS" "$SESSIONS" <<'PY'
import json, os, statistics, subprocess, sys, tempfile
bin_, d, secs, rounds, sessions = sys.argv[1:6]
tmp = tempfile.mkdtemp()
files = [os.path.join(d, f"iolens-stripe-bench-{i}.dat") for i in range(4)]
layouts = {"1 target": files[:1], "4 targets": files}
per_io = {k: [] for k in layouts}
cpu = {k: [] for k in layouts}
try:
    for r in range(int(rounds)):
        for k in (list(layouts) if r % 2 == 0 else list(layouts)[::-1]):
            out = os.path.join(tmp, "r.json")
            cmd = [bin_, "run", "--engine", "null", "--size", "8M", "--sessions", sessions,
                   "--duration", secs + "s", "--no-progress", "--json", out]
            for f in layouts[k]:
                cmd += ["--target", f]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            run = json.load(open(out))["runs"][0]
            n = sum(o["count"] for o in run["ops"])
            if k == "4 targets":
                per = [sum(o["count"] for o in t["ops"]) for t in run["targets"]]
                assert sum(per) == n, (per, n)
            per_io[k].append(int(sessions) * run["duration_s"] / n * 1e9)
            cpu[k].append(run["cpu"]["us_per_io"] * 1e3)
finally:
    for f in files:
        for p in (f, f + ".iolens-journal"):
            if os.path.exists(p):
                os.remove(p)
for k in layouts:
    print(f"{k:>10}: session ns/IO " + " ".join(f"{x:.1f}" for x in per_io[k])
          + f"  median {statistics.median(per_io[k]):.1f}; CPU ns/IO median {statistics.median(cpu[k]):.1f}")
m = lambda v, k: statistics.median(v[k])
print(f"ratio 4 targets / 1 target: session time per I/O {m(per_io, '4 targets') / m(per_io, '1 target'):.3f}, "
      f"CPU per I/O {m(cpu, '4 targets') / m(cpu, '1 target'):.3f}")
PY
