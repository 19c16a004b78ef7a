#!/usr/bin/env bash
# What the generation journal (offline lost-write detection) costs a write run.
# IOPS of `iolens run --pattern randwrite` (8 KiB, O_DIRECT, 2 sessions) on two fresh scratch
# files of the same size, one journaled (the default) and one with IOLENS_JOURNAL=off,
# alternating over ROUNDS rounds, side by side; medians and their ratio are printed.
# Usage: bench/journal-cost.sh [DIR] [SECONDS] [ROUNDS]   (BIN=path to use another build)
# Absolute figures drift on shared machines; compare the ratio of one run.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-bench-tmp}
SECS=${2:-4}
ROUNDS=${3:-3}
SIZE=${IOLENS_BENCH_SIZE:-256M}
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet
  BIN=./target/release/iolens
fi
mkdir -p "$DIR"
rm -f "$DIR"/iolens-journal-bench-*.dat "$DIR"/iolens-journal-bench-*.dat.iolens-journal
python3 - "$BIN" "$DIR" "$SECS" "$ROUNDS" "$SIZE" <<'PY'
import json, os, statistics, subprocess, sys, tempfile
bin_, d, secs, rounds, size = sys.argv[1:6]
tmp = tempfile.mkdtemp()
files = {"journal": os.path.join(d, "iolens-journal-bench-on.dat"),
         "no journal": os.path.join(d, "iolens-journal-bench-off.dat")}
env = {"journal": dict(os.environ), "no journal": dict(os.environ, IOLENS_JOURNAL="off")}
iops = {k: [] for k in files}
for r in range(int(rounds)):
    for k in (list(files) if r % 2 == 0 else list(files)[::-1]):
        out = os.path.join(tmp, "r.json")
        subprocess.run([bin_, "run", "--target", files[k], "--size", size, "--pattern",
                        "randwrite", "--sessions", "2", "--duration", secs + "s",
                        "--no-progress", "--json", out] + os.environ.get("EXTRA", "").split(), check=True, env=env[k],
                       stdout=subprocess.DEVNULL)
        run = json.load(open(out))["runs"][0]
        n = sum(o["count"] for o in run["ops"])
        iops[k].append(n / run["duration_s"])
for k, v in iops.items():
    print(f"{k:>10}: " + " ".join(f"{x:,.0f}" for x in v) + f"  median {statistics.median(v):,.0f} IOPS")
print(f"ratio journal / no journal: {statistics.median(iops['journal']) / statistics.median(iops['no journal']):.3f}")
jp = files["journal"] + ".iolens-journal"
print(f"journal size for {size}: {os.path.getsize(jp):,} bytes")
PY
