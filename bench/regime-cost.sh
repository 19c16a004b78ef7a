#!/usr/bin/env bash
# What the regime (change-point) analysis adds to a calibration (issue 24: ≤ 1 % of calibrate's
# time, reading only the results file). A real `iolens calibrate` writes its results file; then
# `iolens show` is timed on that file as written (its analysis stored: show only renders it)
# and on a copy with the stored analysis removed (as a file from before the analysis was stored:
# show computes the whole analysis from the per-interval series, regimes included). The
# difference of the medians is the analysis' time, an upper bound for the change points alone
# (it also finds modes and verdicts); its ratio to calibrate's wall time is printed. The same on
# the results files of older versions in tests/fixtures (their calibrate's time is not known:
# the ratio is to the time their runs measured). Last, `strace` lists every file the analysing
# `show` opened: only the results file (and the binary's own libraries, /proc, /sys/devices/system
# for CPU facts and the terminal's locale files, which show opens with or without analysis).
#   BIN=target/release/iolens bench/regime-cost.sh [DIR]
# Defaults: BUDGET=2m (calibrate's default), SUSTAIN=0s, SIZE=1G, REPS=21. OLDER="FILE…": more
# results files written by older versions (e.g. a calibrate by a build from before regimes).
set -euo pipefail
BIN="${BIN:-target/release/iolens}"
BUDGET="${BUDGET:-2m}" SUSTAIN="${SUSTAIN:-0s}" SIZE="${SIZE:-1G}" REPS="${REPS:-21}"
DIR="${1:-$(mktemp -d)}"
mkdir -p "$DIR"
SCRATCH="$DIR/regime-cost.dat"
trap 'rm -f "$SCRATCH" "$DIR"/regime-cost-*.json' EXIT
here="$(cd "$(dirname "$0")/.." && pwd)"
# The scratch file first (its fill is not calibrate's measuring time).
"$BIN" -q run --engine null --size "$SIZE" --duration 1s --no-progress --target "$SCRATCH" \
    >/dev/null
python3 - "$BIN" "$DIR" "$SCRATCH" "$BUDGET" "$SUSTAIN" "$REPS" "$here" <<'PY'
import json, os, statistics, subprocess, sys, time
binary, d, scratch, budget, sustain, reps, here = sys.argv[1:8]
reps = int(reps)

def stripped(src, dst):
    doc = json.load(open(src))
    doc.pop("analysis", None)
    json.dump(doc, open(dst, "w"))

def show_time(path):
    t = time.perf_counter()
    subprocess.run([binary, "show", path], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t

def cost(name, stored, bare, base_s, base_what):
    # Interleaved, so that the host's load falls on both alike; medians.
    a, b = [], []
    for _ in range(reps):
        a.append(show_time(stored))
        b.append(show_time(bare))
    ma, mb = statistics.median(a), statistics.median(b)
    added = max(mb - ma, 0.0)
    doc = json.load(open(bare))
    ivs = sum(len(o.get("intervals", [])) for r in doc.get("runs", []) for o in r.get("ops", []))
    print(f"{name}: {len(doc.get('runs', []))} runs, {ivs} op intervals; show with the analysis "
          f"stored {ma*1e3:.1f} ms, computing it {mb*1e3:.1f} ms (medians of {reps}): the "
          f"analysis takes {added*1e3:.1f} ms = {100*added/base_s:.3f} % of {base_what} "
          f"({base_s:.1f} s)")
    return added / base_s

cal = os.path.join(d, "regime-cost-cal.json")
cmd = [binary, "-q", "calibrate", "--target", scratch, "--budget", budget, "--sustain", sustain,
       "--no-progress", "--json", cal]
t = time.perf_counter()
subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
wall = time.perf_counter() - t
print(f"calibrate: {wall:.1f} s wall ({' '.join(cmd[1:])})")
bare = os.path.join(d, "regime-cost-cal-bare.json")
stripped(cal, bare)
ratios = [cost("this calibration", cal, bare, wall, "calibrate's wall time")]
fixtures = os.path.join(here, "tests", "fixtures", "results")
older = [os.path.join(fixtures, f) for f in sorted(os.listdir(fixtures))]
older += [f for f in os.environ.get("OLDER", "").split() if f]
for src in older:
    f = os.path.basename(src)
    doc = json.load(open(src))
    measured = sum(r.get("duration_s", 0) + r.get("warmup_s", 0) for r in doc.get("runs", []))
    b = os.path.join(d, "regime-cost-old-" + f)
    stripped(src, b)
    cost(f"older file {f}", src, b, measured, "the time its runs measured")
# Reads only the results file: every file the analysing show opened.
out = subprocess.run(["strace", "-f", "-e", "trace=open,openat", "-o", os.path.join(d, "regime-cost-strace.txt"),
                      binary, "show", bare], stdout=subprocess.DEVNULL, check=True)
opened = set()
for line in open(os.path.join(d, "regime-cost-strace.txt")):
    if '"' in line and "= -1" not in line:
        opened.add(line.split('"')[1])
os.remove(os.path.join(d, "regime-cost-strace.txt"))
other = sorted(p for p in opened if p != bare and not p.startswith(("/proc/", "/sys/", "/lib", "/usr/lib", "/etc/ld.so")))
print(f"files the analysing show opened besides its libraries, /proc and /sys: {other or 'none'}"
      f" (the results file: {bare in opened})")
print(f"RESULT: the analysis adds {100*ratios[0]:.3f} % to calibrate's time (bound 1 %)")
PY
