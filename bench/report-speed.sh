#!/usr/bin/env bash
# Report speed and size for a 1-hour run at 1 s intervals (3,600 interval histograms for each
# of 3 ops). Target: under 2 s and under 5 MB of HTML. Prints the measured figures.
# Run from the repository root: bash bench/report-speed.sh [samples-per-interval]
set -euo pipefail
cd "$(dirname "$0")/.."
samples="${1:-2000}"
cargo build --release --quiet
bin=target/release/iolens
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"$bin" dev-synth -o "$work/hour.json" --seconds 3600 --samples "$samples" --seed 1
json_bytes=$(stat -c %s "$work/hour.json")

best=""
for i in 1 2 3; do
    start=$(date +%s.%N)
    "$bin" report "$work/hour.json" -o "$work/hour.html" 2>/dev/null
    end=$(date +%s.%N)
    t=$(echo "$end - $start" | bc -l)
    echo "report run $i: $(printf '%.3f' "$t") s"
    if [ -z "$best" ] || [ "$(echo "$t < $best" | bc -l)" = 1 ]; then best=$t; fi
done
html_bytes=$(stat -c %s "$work/hour.html")

start=$(date +%s.%N)
"$bin" show "$work/hour.json" --color never --width 120 >/dev/null
show_t=$(echo "$(date +%s.%N) - $start" | bc -l)

printf 'input: 3600 intervals x 3 ops, %d samples per read interval, results file %.1f MB\n' \
    "$samples" "$(echo "$json_bytes / 1000000" | bc -l)"
printf 'report: best of 3 %.3f s (target < 2 s), HTML %.2f MB (target < 5 MB)\n' \
    "$best" "$(echo "$html_bytes / 1000000" | bc -l)"
printf 'show:   %.3f s\n' "$show_t"
ok=1
[ "$(echo "$best < 2" | bc -l)" = 1 ] || { echo "FAIL: report slower than 2 s"; ok=0; }
[ "$html_bytes" -lt 5000000 ] || { echo "FAIL: report larger than 5 MB"; ok=0; }
[ $ok = 1 ] && echo "PASS"
