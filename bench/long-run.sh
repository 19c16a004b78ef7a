#!/usr/bin/env bash
# A 24-hour run at 1 s intervals (86,400 interval histograms for each of 3 ops: read, write,
# sync), as `iolens dev-synth` writes it from seeded latency mixtures: the size of the results
# file, then `iolens show` and `iolens report` on it, each with wall time, CPU time and peak
# RSS, beside the targets of issue 15 (file <= 250 MB, show <= 2 s, report <= 5 s, peak memory
# <= 1 GB). The charts of both merge intervals exactly into display columns.
#
#   bench/long-run.sh                 # 86,400 s, 2,000 read latencies per interval
#   SECONDS_RUN=3600 bench/long-run.sh
#   SAMPLES=500 bench/long-run.sh     # fewer distinct latencies per interval: smaller file
#   BEFORE=/path/to/older/iolens bench/long-run.sh   # also that build's show and report, same file
#
# The results file is written to a temporary directory (about 250 MB) and deleted on exit.
set -euo pipefail
SECONDS_RUN=${SECONDS_RUN:-86400}
SAMPLES=${SAMPLES:-2000}
cd "$(dirname "$0")/.."
cargo build --release --quiet
BIN=$PWD/target/release/iolens
TMP=$(mktemp -d "${TMPDIR:-/tmp}/iolens-long-run.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
command -v /usr/bin/time > /dev/null || { echo "needs /usr/bin/time (apt-get install time)"; exit 1; }

# wall s, CPU s, peak RSS KiB of one command
measure() {
  /usr/bin/time -f "%e %U %S %M" -o "$TMP/time" "$@" > /dev/null 2> "$TMP/err" \
    || { cat "$TMP/err"; exit 1; }
  read -r wall user sys rss < "$TMP/time"
  echo "$wall $(echo "$user + $sys" | bc -l) $rss"
}

read -r gen_wall _ gen_rss < <(measure "$BIN" dev-synth -o "$TMP/day.json" \
  --seconds "$SECONDS_RUN" --samples "$SAMPLES" --seed 1)
bytes=$(stat -c %s "$TMP/day.json")
read -r show_wall show_cpu show_rss < <(measure "$BIN" show "$TMP/day.json" --color never --width 120)
read -r rep_wall rep_cpu rep_rss < <(measure "$BIN" report "$TMP/day.json" -o "$TMP/day.html")
html=$(stat -c %s "$TMP/day.html")
if [ -n "${BEFORE:-}" ]; then
  read -r bshow_wall bshow_cpu bshow_rss < <(measure "$BEFORE" show "$TMP/day.json" --color never --width 120)
  read -r brep_wall brep_cpu brep_rss < <(measure "$BEFORE" report "$TMP/day.json" -o "$TMP/before.html")
  "$BEFORE" show "$TMP/day.json" --color never --width 120 > "$TMP/before.txt"
  "$BIN" show "$TMP/day.json" --color never --width 120 > "$TMP/after.txt"
  same=$(cmp -s "$TMP/before.txt" "$TMP/after.txt" && cmp -s "$TMP/before.html" "$TMP/day.html" \
    && echo "identical" || echo "DIFFERENT")
fi

mb() { echo "scale=1; $1 / 1000000" | bc -l; }
mib() { echo "$(( $1 / 1024 ))"; }
verdict() { [ "$(echo "$1 <= $2" | bc -l)" = 1 ] && echo "ok" || echo "OVER"; }
echo
echo "run model: $SECONDS_RUN intervals x 3 ops, $SAMPLES read latencies per interval"
echo "  (writing it took $gen_wall s, peak RSS $(mib "$gen_rss") MiB)"
printf '%-22s %10s %14s %16s   %s\n' "" "wall s" "CPU s" "peak RSS MiB" "target"
printf '%-22s %10s %14s %16s   %s\n' "results file" "$(mb "$bytes") MB" "" "" \
  "<= 250 MB: $(verdict "$bytes" 250000000)"
printf '%-22s %10s %14s %16s   %s\n' "iolens show" "$show_wall" "$show_cpu" "$(mib "$show_rss")" \
  "<= 2 s: $(verdict "$show_wall" 2), <= 1024 MiB: $(verdict "$(mib "$show_rss")" 1024)"
printf '%-22s %10s %14s %16s   %s\n' "iolens report" "$rep_wall" "$rep_cpu" "$(mib "$rep_rss")" \
  "<= 5 s: $(verdict "$rep_wall" 5), <= 1024 MiB: $(verdict "$(mib "$rep_rss")" 1024)"
if [ -n "${BEFORE:-}" ]; then
  printf '%-22s %10s %14s %16s\n' "before: iolens show" "$bshow_wall" "$bshow_cpu" "$(mib "$bshow_rss")"
  printf '%-22s %10s %14s %16s\n' "before: iolens report" "$brep_wall" "$brep_cpu" "$(mib "$brep_rss")"
  echo "  (show and report output of the two builds: $same)"
fi
echo "  (report HTML $(mb "$html") MB; $(nproc) CPUs, load average $(cut -d' ' -f1 /proc/loadavg))"
