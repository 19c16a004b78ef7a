#!/usr/bin/env bash
# What `iolens profile` costs (issue 14, Speed).
#  1. Overhead on the profiled process: IOPS of `iolens run --buffered` 8 KiB random reads, one
#     session, on a fully cached file (every I/O is CPU work, the worst case for sampling), not
#     profiled vs profiled at 99 Hz and at 999 Hz (on CPU, and at 999 Hz with --off-cpu).
#     Modes alternate over ROUNDS rounds on the same file; medians are compared.
#  2. Time to render the flame graph of 1,000,000 samples (20,000 distinct stacks, 40 frames
#     deep at most) from a results file, beside the time to read the same folded stacks back.
# Usage: bench/profile-overhead.sh [DIR] [SECONDS] [ROUNDS]   (needs root: BPF)
# IOLENS_BIN picks another binary (default: the release build). Absolute figures drift on
# shared machines; compare the ratios of one run.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-bench-tmp}
SECS=${2:-5}
ROUNDS=${3:-3}
if [ -z "${IOLENS_BIN:-}" ]; then
  cargo build --release --quiet
  IOLENS_BIN=./target/release/iolens
fi
mkdir -p "$DIR"
FILE="$DIR/iolens-profile-bench.dat"
"$IOLENS_BIN" run --target "$FILE" --size 64M --ios 1 --no-progress >/dev/null

python3 - "$IOLENS_BIN" "$FILE" "$SECS" "$ROUNDS" <<'PY'
import json, os, random, statistics, subprocess, sys, tempfile, time
bin_, file, secs, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
tmp = tempfile.mkdtemp()

def run(profile_args, name):
    out = os.path.join(tmp, name + ".json")
    run = subprocess.Popen([bin_, "run", "--target", file, "--buffered", "--pattern", "randread",
                            "--bs", "8k", "--sessions", "1", "--duration", f"{secs}s",
                            "--no-progress", "--json", out], stdout=subprocess.DEVNULL)
    prof = None
    if profile_args is not None:
        prof = subprocess.Popen([bin_, "-q", "profile", "--pid", str(run.pid),
                                 "--duration", f"{secs + 2}s", "--no-progress"] + profile_args,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run.wait()
    if prof:
        prof.send_signal(2)
        prof.wait()
    r = json.load(open(out))["runs"][0]
    return sum(o["count"] for o in r["ops"]) / r["duration_s"]

modes = {"none": None, "99 Hz": ["--frequency", "99"], "999 Hz": ["--frequency", "999"],
         "999 Hz + off-CPU": ["--frequency", "999", "--off-cpu"]}
iops = {m: [] for m in modes}
for k in range(rounds):
    for m, a in modes.items():
        iops[m].append(run(a, f"{m.replace(' ', '_')}-{k}"))
base = statistics.median(iops["none"])
print(f"== 1. overhead on a profiled `iolens run` (buffered 8 KiB random reads, cached, 1 session,"
      f" {secs} s x {rounds} rounds, medians)")
for m in modes:
    med = statistics.median(iops[m])
    print(f"  {m:18} {med:12,.0f} IOPS   ratio to unprofiled {med / base:.3f}")

# 2. Rendering 1 M samples.
random.seed(14)
names = [f"fn_{i:04d}" for i in range(2000)]
lines = {}
for _ in range(20000):
    depth = random.randint(5, 40)
    stack = "db;main;" + ";".join(random.choice(names) for _ in range(depth))
    lines[stack] = lines.get(stack, 0) + 1
total = 1_000_000
keys = list(lines)
weights = [random.random() for _ in keys]
s = sum(weights)
counts = [max(1, int(w / s * total)) for w in weights]
counts[0] += total - sum(counts)
folded = os.path.join(tmp, "big.folded")
with open(folded, "w") as f:
    for k, c in zip(keys, counts):
        f.write(f"{k} {c}\n")
res = os.path.join(tmp, "big.json")
t = time.time()
subprocess.run([bin_, "-q", "ingest", "--format", "folded", folded, "--json", res], check=True)
t_ingest = time.time() - t
svg = os.path.join(tmp, "big.svg")
t = time.time()
subprocess.run([bin_, "export", res, "--flame", svg], check=True)
t_render = time.time() - t
t = time.time()
subprocess.run([bin_, "export", res, "--folded", os.path.join(tmp, "again.folded")], check=True)
t_folded = time.time() - t
print(f"== 2. flame graph of {total:,} samples ({len(keys):,} distinct stacks)")
print(f"  ingest folded -> results   {t_ingest:6.2f} s")
print(f"  results -> flame SVG       {t_render:6.2f} s   ({os.path.getsize(svg) / 1e6:.1f} MB)")
print(f"  results -> folded text     {t_folded:6.2f} s   (render / folded export = {t_render / t_folded:.2f})")
PY
