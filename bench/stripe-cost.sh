#!/usr/bin/env bash
# What striping over several targets costs per I/O: the null engine (no I/O: the tool's own
# cost) on 1 target and striped over 4 (`--stripe unit`, 1 MiB units), in the same session.
# Each round runs, in an order shuffled per round (seeded), every layout of every build:
# "1 target", "1 target" again (an A/A pair: what two identical runs differ by) and
# "4 targets"; with BASE=<another iolens> that build's three too. Per run it reads three costs
# per I/O: the session threads' own CPU (their schedstat run time over the measured window, the
# session loop alone), the process's CPU (getrusage: collector and sampler threads too), and
# the session time (sessions × measured seconds ÷ I/Os, which a busy host's preemption inflates).
# It prints, per build, the median of each round's paired ratios (4 targets ÷ 1 target, and
# the A/A pair) with a 95 % bootstrap interval of that median, and BASE's ÷ BIN's per layout.
# The A/A interval is the resolution: a striping cost inside it is not told from noise.
# Where valgrind is installed (CG=0 skips it) it then counts, per build and layout, the
# instructions and simulated first-level data-cache misses per I/O under cachegrind: the
# difference of two runs of 0.5 and 2.5 million I/Os (one interval, so that only per-I/O work
# differs), which no other load on the host changes (the A/A pair shows what is left).
# Usage: bench/stripe-cost.sh [DIR] [SECONDS] [ROUNDS] [SESSIONS]
#   BIN=path: the build to measure (default: cargo build --release, target/release/iolens)
#   BASE=path: another build measured in the same rounds (e.g. main's release)
# Absolute figures drift on shared machines; compare the ratios of one run.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-bench-tmp}
SECS=${2:-3}
ROUNDS=${3:-9}
SESSIONS=${4:-1}
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet
  BIN=./target/release/iolens
fi
mkdir -p "$DIR"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
CG=${CG:-1}
command -v valgrind >/dev/null || CG=0
python3 - "$BIN" "${BASE:-}" "$DIR" "$SECS" "$ROUNDS" "$SESSIONS" "$CG" <<'PY'
import json, os, random, statistics, subprocess, sys, tempfile
bin_, base, d, secs, rounds, sessions, cg = sys.argv[1:8]
builds = {"BIN": bin_}
if base:
    builds["BASE"] = base
tmp = tempfile.mkdtemp()
files = [os.path.join(d, f"iolens-stripe-bench-{i}.dat") for i in range(4)]
layouts = {"1 target": files[:1], "1 target again": files[:1], "4 targets": files}
metrics = ("session CPU", "process CPU", "session time")
runs = [(b, k) for b in builds for k in layouts]
vals = {(b, k): {m: [] for m in metrics} for (b, k) in runs}
rng = random.Random(27)
loads = []


def one(b, k):
    out = os.path.join(tmp, "r.json")
    cmd = [builds[b], "run", "--engine", "null", "--size", "8M", "--sessions", sessions,
           "--duration", secs + "s", "--no-progress", "--json", out]
    for f in layouts[k]:
        cmd += ["--target", f]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    run = json.load(open(out))["runs"][0]
    n = sum(o["count"] for o in run["ops"])
    if k == "4 targets":
        per = [sum(o["count"] for o in t["ops"]) for t in run["targets"]]
        assert sum(per) == n and min(per) > 0, (per, n)
    run_ns = sum(i["run_ns"] for i in run.get("sched_intervals", []))
    v = vals[(b, k)]
    v["session CPU"].append(run_ns / n if run_ns else float("nan"))
    v["process CPU"].append(run["cpu"]["us_per_io"] * 1e3)
    v["session time"].append(int(sessions) * run["duration_s"] / n * 1e9)


def cachegrind(b, k, ios):
    """Instructions and first-level data-cache misses of a whole run of `ios` I/Os."""
    out = os.path.join(tmp, "cg.out")
    cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=yes", f"--cachegrind-out-file={out}",
           builds[b], "run", "--engine", "null", "--size", "8M", "--sessions", "1",
           "--ios", str(ios), "--interval", "3600s", "--no-progress",
           "--json", os.path.join(tmp, "cg.json")]
    for f in layouts[k]:
        cmd += ["--target", f]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ev = summ = None
    for line in open(out):
        if line.startswith("events:"):
            ev = line.split()[1:]
        elif line.startswith("summary:"):
            summ = [int(x) for x in line.split()[1:]]
    c = dict(zip(ev, summ))
    return c["Ir"], c["D1mr"] + c["D1mw"]


cg_per_io = {}
try:
    for r in range(int(rounds)):
        order = runs[:]
        rng.shuffle(order)
        for b, k in order:
            one(b, k)
        loads.append(os.getloadavg()[0])
    if cg == "1":
        lo, hi = 500_000, 2_500_000
        for b, k in runs:
            (i1, m1), (i2, m2) = cachegrind(b, k, lo), cachegrind(b, k, hi)
            cg_per_io[(b, k)] = ((i2 - i1) / (hi - lo), (m2 - m1) / (hi - lo))
finally:
    for f in files:
        for p in (f, f + ".iolens-journal"):
            if os.path.exists(p):
                os.remove(p)


def median_ci(x):
    """Median and a 95 % bootstrap interval of it (percentile, 4000 resamples, seeded)."""
    x = [v for v in x if v == v]
    if not x:
        return float("nan"), float("nan"), float("nan")
    g = random.Random(1)
    ms = sorted(statistics.median(g.choices(x, k=len(x))) for _ in range(4000))
    return statistics.median(x), ms[int(0.025 * len(ms))], ms[int(0.975 * len(ms)) - 1]


def ratios(a, b, m):
    # A run too short to have read the session threads' schedstat has no session CPU (NaN).
    return [x / y for x, y in zip(vals[a][m], vals[b][m]) if x == x and y == y]


def fmt(name, x):
    if not x:
        return f"  {name:<34} (no runs with this figure)"
    med, lo, hi = median_ci(x)
    return (f"  {name:<34} median {med:.4f}  95 % CI [{lo:.4f}, {hi:.4f}]  "
            f"range {min(x):.4f}-{max(x):.4f}")


print(f"{rounds} rounds of {secs} s, {sessions} session(s); load (1 min) after each round: "
      + " ".join(f"{l:.1f}" for l in loads))
for b in builds:
    print(f"{b} = {builds[b]}")
    for k in layouts:
        print(f"  {k:<15} " + "; ".join(
            f"{m} ns/IO median {statistics.median([v for v in vals[(b, k)][m] if v == v] or [float('nan')]):.2f}"
            for m in metrics))
    for m in metrics:
        print(f" {m} per I/O, paired within each round:")
        print(fmt("4 targets / 1 target", ratios((b, "4 targets"), (b, "1 target"), m)))
        print(fmt("A/A: 1 target again / 1 target", ratios((b, "1 target again"), (b, "1 target"), m)))
if base:
    for m in metrics:
        print(f"BASE / BIN, {m} per I/O, paired within each round:")
        for k in ("1 target", "4 targets"):
            print(fmt(k, ratios(("BASE", k), ("BIN", k), m)))
for b in builds if cg_per_io else []:
    i1 = cg_per_io[(b, "1 target")][0]
    print(f"{b}, cachegrind, per I/O (2.5 M minus 0.5 M I/Os, 1 session):")
    for k in layouts:
        i, m = cg_per_io[(b, k)]
        print(f"  {k:<15} {i:8.1f} instructions ({i / i1:.4f} x 1 target), "
              f"{m:.3f} D1 misses")
PY
