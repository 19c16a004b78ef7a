#!/usr/bin/env bash
# What block verification costs.
#  1. In process, one core: ns to stamp and to verify one block (header / full), with the block
#     in CPU cache (as right after a buffered read copied it) and from DRAM (random blocks of a
#     256 MiB region: cache and TLB misses, the worst case). Target: full < 1 µs at 8 KiB.
#  2. IOPS ratio verify/no-verify of `iolens run --buffered` 8 KiB random reads, 2 sessions, on
#     a fully cached file: the workload where verification weighs most (no device time).
#     Modes alternate over several rounds on the same file; medians are compared.
#  3. `iolens verify` (offline whole-target check) against a plain sequential read of the same
#     file, O_DIRECT, single stream, 4 MiB reads.
# Usage: bench/verify-speed.sh [DIR] [SECONDS] [ROUNDS]   (DIR holds the scratch file)
# Absolute figures drift on shared machines; compare the ratios of one run.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-bench-tmp}
SECS=${2:-5}
ROUNDS=${3:-3}
SIZE=${IOLENS_BENCH_SIZE:-256M}
cargo build --release --quiet
BIN=./target/release/iolens
mkdir -p "$DIR"
FILE="$DIR/iolens-verify-bench.dat"
"$BIN" run --target "$FILE" --size "$SIZE" --ios 1 --no-progress >/dev/null

echo "== 1. stamping and verification, in process, one core (ns per block)"
for bs in 8k 512 64k; do
  "$BIN" verify --bench --bench-bs "$bs"
done

python3 - "$BIN" "$FILE" "$SECS" "$ROUNDS" <<'PY'
import json, os, statistics, subprocess, sys, tempfile
bin_, file, secs, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
tmp = tempfile.mkdtemp()

def run(args, name):
    out = os.path.join(tmp, name + ".json")
    subprocess.run([bin_] + args + ["--no-progress", "--json", out], check=False,
                   stdout=subprocess.DEVNULL)
    return json.load(open(out))["runs"][0]

# Warm the page cache with the file's data area, then check it is resident.
with open(file, "rb") as f:
    while f.read(1 << 22):
        pass
print(f"\n== 2. buffered 8 KiB random reads, 2 sessions, cached file, {secs} s x {rounds} rounds per mode")
res = {m: [] for m in ("none", "header", "full")}
for i in range(rounds):
    for m in res:
        r = run(["run", "--target", file, "--buffered", "--sessions", "2",
                 "--duration", f"{secs}s", "--verify", m], f"{m}-{i}")
        v = r.get("verify") or {}
        res[m].append({"iops": r["ops"][0]["count"] / r["duration_s"],
                       "cpu": r["cpu"]["us_per_io"],
                       "ns": v.get("ns_per_read", 0.0),
                       "resident": (r.get("page_cache") or {}).get("resident_before", 0.0)})
med = {m: {k: statistics.median(x[k] for x in rs) for k in rs[0]} for m, rs in res.items()}
print(f"{'verify':<8}{'IOPS':>12}{'CPU µs/IO':>12}{'verify ns/read':>16}{'cached':>9}")
for m, x in med.items():
    print(f"{m:<8}{x['iops']:>12,.0f}{x['cpu']:>12.2f}{x['ns']:>16.0f}{x['resident']*100:>8.0f}%")
for m in ("header", "full"):
    print(f"IOPS ratio {m}/none: {med[m]['iops'] / med['none']['iops']:.3f}   "
          f"CPU per I/O +{med[m]['cpu'] - med['none']['cpu']:.2f} µs")

print("\n== 3. offline check vs sequential read, O_DIRECT, 4 MiB reads, one stream")
size = os.path.getsize(file) - (1 << 20)
ios = size // (4 << 20)
seq = []
chk = []
for i in range(rounds):
    r = run(["run", "--target", file, "--pattern", "read", "--bs", "4M", "--ios", str(ios),
             "--verify", "none"], f"seq-{i}")
    seq.append(r["ops"][0]["bytes"] / r["duration_s"] / 1e6)
    r = run(["verify", "--target", file, "--bs", "4M"], f"chk-{i}")
    chk.append(r["ops"][0]["bytes"] / r["duration_s"] / 1e6)
s, c = statistics.median(seq), statistics.median(chk)
print(f"sequential read {s:,.0f} MB/s, iolens verify (full) {c:,.0f} MB/s: ratio {c / s:.2f}")
PY
