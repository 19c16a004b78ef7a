#!/usr/bin/env bash
# Overhead of the SQLite per-I/O timing shim: the same SLOB run with and without it,
# alternated ROUNDS times side by side, on a layout much larger than SQLite's cache.
#
#   bench/sqlite-shim.sh [ROUNDS] [SECONDS] [SESSIONS] [SCALE]
#
# By default the database's pages stay in the OS page cache (--keep-os-cache): physical reads
# are then the cheapest they can be, which is the worst case for the shim's relative cost.
# Set FROM_DEVICE=1 to drop the file's pages before each run instead.
# The order of the two modes alternates between rounds so drift does not favour either.
# Prints operations/s and physical reads/s per mode, the throughput ratio, and the shim's
# cost per physical read (target: under 2 % of throughput).
set -euo pipefail
ROUNDS="${1:-3}"
SECS="${2:-10}"
SESSIONS="${3:-2}"
SCALE="${4:-256M}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
cargo build --release --quiet
BIN="$ROOT/target/release/iolens"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/iolens-shim-bench.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
"$BIN" db setup --dir "$WORK/slob" --scale "$SCALE" --quiet
CACHE_FLAG=--keep-os-cache
[ "${FROM_DEVICE:-0}" = 1 ] && CACHE_FLAG=
# One discarded run warms the file system and the CPU caches for both modes alike.
"$BIN" db run --dir "$WORK/slob" --sessions "$SESSIONS" --duration 3s --quiet $CACHE_FLAG >/dev/null
for r in $(seq 1 "$ROUNDS"); do
    order="timed plain"
    [ $((r % 2)) = 0 ] && order="plain timed"
    for mode in $order; do
        extra=()
        [ "$mode" = plain ] && extra=(--no-timing)
        "$BIN" db run --dir "$WORK/slob" --sessions "$SESSIONS" --duration "${SECS}s" \
            --seed "$r" --quiet $CACHE_FLAG "${extra[@]}" --json "$WORK/$mode-$r.json"
    done
done
python3 - "$WORK" "$ROUNDS" "$SESSIONS" <<'EOF'
import json, sys
work, rounds, sessions = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def load(mode):
    out = []
    for r in range(1, rounds + 1):
        c = json.load(open(f"{work}/{mode}-{r}.json"))["runs"][0]["counters"]
        out.append((c["ops_per_s"], c["physical_reads_per_s"], c["cpu_us_per_physical_read"]))
    return out
t, p = load("timed"), load("plain")
mean = lambda xs: sum(xs) / len(xs)
for name, v in (("with shim", t), ("without shim", p)):
    print(f"{name:>13}: ops/s {mean([x[0] for x in v]):10.1f}   physical reads/s {mean([x[1] for x in v]):10.0f}"
          f"   CPU/physical read {mean([x[2] for x in v]):6.2f} us   (rounds: {', '.join(f'{x[0]:.0f}' for x in v)})")
ratio = mean([x[0] for x in t]) / mean([x[0] for x in p])
pr_t, pr_p = mean([x[1] for x in t]), mean([x[1] for x in p])
per_io_ns = sessions * (1 / pr_t - 1 / pr_p) * 1e9
cpu_ns = (mean([x[2] for x in t]) - mean([x[2] for x in p])) * 1e3
print(f"throughput with shim / without: {ratio:.4f}  (overhead {(1 - ratio) * 100:+.2f} %, target < 2 %)")
print(f"shim cost per physical read: {per_io_ns:+.0f} ns of session time, {cpu_ns:+.0f} ns CPU")
EOF
