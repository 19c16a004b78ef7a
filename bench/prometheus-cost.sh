#!/usr/bin/env bash
# What the Prometheus exporter costs the watch (issue 29: scraping every 1 s adds <= 1 % CPU at
# 100k traced I/Os a second). `iolens run` on cached 8 KiB reads (pread64 served by the page
# cache: the most syscalls per second) watched by `iolens watch --comm` in three modes,
# alternating over ROUNDS: without --prometheus; with it, never scraped; with it, scraped every
# second (curl, as Prometheus does). Per mode: the watch's CPU seconds (utime + stime from
# /proc/PID/stat) per million traced syscalls, and its ratio to the watch without the exporter.
# Usage: bench/prometheus-cost.sh [DIR] [SECONDS] [ROUNDS]   (BIN=path/to/iolens to skip the
# release build; LOADARGS="--sessions 2" adds arguments to the load's `iolens run`, to reach
# the issue's 100k traced syscalls a second). Needs root. Absolute figures drift on shared
# machines; compare the ratios. Per mode it also prints the watch's CPU ns per traced event and
# the traced syscalls per second reached.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-bench-tmp}
SECS=${2:-10}
ROUNDS=${3:-3}
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet
  BIN=$PWD/target/release/iolens
fi
mkdir -p "$DIR"
FILE="$DIR/iolens-prom-bench.dat"
[ -f "$FILE" ] || head -c 256M /dev/urandom > "$FILE"
cat "$FILE" > /dev/null
LOAD="$DIR/iolensbench"
ln -sf "$BIN" "$LOAD"
PORT=$((20000 + RANDOM % 20000))
cpu_s() { awk '{print ($14 + $15) / 100}' "/proc/$1/stat"; }

one() {
  local mode=$1 args=() scraper=""
  [ "$mode" != none ] && args=(--prometheus "127.0.0.1:$PORT")
  "$BIN" -q watch --comm iolensbench --wait --no-progress --interval 1s "${args[@]}" \
    --json "$DIR/prom-bench-watch.json" > /dev/null 2> "$DIR/prom-bench-watch.err" &
  local w=$!
  sleep 2
  if [ "$mode" = scraped ]; then
    (while :; do curl -s -o /dev/null "http://127.0.0.1:$PORT/metrics"; sleep 1; done) &
    scraper=$!
  fi
  local c0; c0=$(cpu_s $w)
  # shellcheck disable=SC2086
  "$LOAD" -q run --target "$FILE" --buffered --bs 8k --duration "${SECS}s" \
    --verify none --no-progress ${LOADARGS:-} > /dev/null
  local c1; c1=$(cpu_s $w)
  [ -n "$scraper" ] && kill "$scraper"
  kill -TERM $w; wait $w || true
  local n
  n=$(python3 -c "
import json,sys
r=json.load(open('$DIR/prom-bench-watch.json'))
print(sum(o['count'] for run in r['runs'] if run['name']=='syscalls' for o in run['ops']))")
  echo "$mode $(echo "$c1 - $c0" | bc -l) $n"
}

declare -A cpu ios
for r in $(seq "$ROUNDS"); do
  for mode in none unscraped scraped; do
    read -r m c n < <(one $mode)
    cpu[$m]="${cpu[$m]:-} $c"; ios[$m]="${ios[$m]:-} $n"
    echo "round $r $m: watch CPU ${c} s, ${n} syscalls traced" >&2
  done
done
python3 - "$SECS" "${cpu[none]}" "${ios[none]}" "${cpu[unscraped]}" "${ios[unscraped]}" \
  "${cpu[scraped]}" "${ios[scraped]}" <<'PY'
import statistics, sys
secs = float(sys.argv[1])
a = [list(map(float, x.split())) for x in sys.argv[2:]]
per = lambda c, n: statistics.median(ci / ni * 1e6 for ci, ni in zip(c, n) if ni)
base = per(a[0], a[1])
for name, c, n in (("none", a[0], a[1]), ("unscraped", a[2], a[3]), ("scraped 1 s", a[4], a[5])):
    v = per(c, n)
    rate = statistics.median(n) / secs / 1e3
    share = statistics.median(ci / secs * 100 for ci in c)
    print(f"{name:12} watch CPU {v:7.2f} s per million syscalls ({v * 1e3:.0f} ns an event; "
          f"{rate:.0f}k traced/s; {share:.1f} % of a CPU), x{v / base:.3f}")
PY
rm -f "$LOAD"
