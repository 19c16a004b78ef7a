#!/usr/bin/env bash
# Parsing speed of `iolens trace` on a large generated Oracle 10046 trace, measured side by side
# with `wc -l` on the same file (both from the page cache), plus peak memory on a quarter of the
# file and on the whole file to show that memory does not grow with trace size.
#
#   bench/trace-speed.sh            # 600 MB trace
#   SIZE=2G bench/trace-speed.sh
#   RUNS=5 bench/trace-speed.sh     # best of 5 (default 3)
#
# Prints MB/s (10^6 bytes per second of wall time, and per second of iolens CPU time), the same
# run confined to one CPU with taskset, the ratio to wc -l, and peak RSS. The generated file
# lives in a temporary directory and is deleted on exit.
set -euo pipefail
SIZE=${SIZE:-600M}
RUNS=${RUNS:-3}
cd "$(dirname "$0")/.."
cargo build --release --quiet
BIN=$PWD/target/release/iolens
TMP=$(mktemp -d "${TMPDIR:-/tmp}/iolens-trace-speed.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
TRC=$TMP/orcl_ora_12345.trc
"$BIN" gen-trace "$TRC" --size "$SIZE"
BYTES=$(stat -c %s "$TRC")
head -c $((BYTES / 4)) "$TRC" > "$TMP/quarter.trc"
cat "$TRC" > /dev/null # warm the page cache: both tools read from memory

have_time=0
[ -x /usr/bin/time ] && have_time=1

# best wall seconds of RUNS runs of a command; also leaves user+sys and max RSS of that run
best() {
  local best_wall="" best_cpu="" best_rss=""
  for _ in $(seq "$RUNS"); do
    if [ $have_time = 1 ]; then
      /usr/bin/time -f "%e %U %S %M" -o "$TMP/time" "$@" > /dev/null
      read -r wall user sys rss < "$TMP/time"
    else
      local t0 t1
      t0=$(date +%s.%N); "$@" > /dev/null; t1=$(date +%s.%N)
      wall=$(echo "$t1 - $t0" | bc -l); user=0; sys=0; rss=0
    fi
    if [ -z "$best_wall" ] || [ "$(echo "$wall < $best_wall" | bc -l)" = 1 ]; then
      best_wall=$wall; best_cpu=$(echo "$user + $sys" | bc -l); best_rss=$rss
    fi
  done
  echo "$best_wall $best_cpu $best_rss"
}

read -r wc_wall _ _ < <(best wc -l "$TRC")
read -r io_wall io_cpu io_rss < <(best "$BIN" trace -q "$TRC")
read -r _ _ q_rss < <(best "$BIN" trace -q "$TMP/quarter.trc")
one_wall=""
if command -v taskset > /dev/null; then
  # Everything (parser and interval encoder thread) confined to one CPU.
  read -r one_wall _ _ < <(best taskset -c 0 "$BIN" trace -q "$TRC")
fi
lines=$(wc -l < "$TRC")

mbs() { echo "scale=1; $BYTES / 1000000 / $1" | bc -l; }
echo
echo "trace: $(echo "scale=1; $BYTES / 1000000" | bc -l) MB, $lines lines ($TRC)"
printf '%-28s %8s s  %8s MB/s\n' "wc -l" "$wc_wall" "$(mbs "$wc_wall")"
printf '%-28s %8s s  %8s MB/s  (CPU %s s: %s MB/s per CPU-second)\n' \
  "iolens trace" "$io_wall" "$(mbs "$io_wall")" "$io_cpu" "$(mbs "$io_cpu")"
if [ -n "$one_wall" ]; then
  printf '%-28s %8s s  %8s MB/s\n' "iolens trace, one CPU" "$one_wall" "$(mbs "$one_wall")"
fi
echo "ratio iolens/wc -l throughput: $(echo "scale=3; $wc_wall / $io_wall" | bc -l)"
if [ $have_time = 1 ]; then
  echo "peak RSS: quarter of the trace $((q_rss / 1024)) MiB, whole trace $((io_rss / 1024)) MiB"
fi
echo "target (issue 15): >= 1000 MB/s on one core (the \"one CPU\" line), memory flat"
