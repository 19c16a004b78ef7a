#!/usr/bin/env bash
# Speed of reading a year of hourly AWR snapshots (issue 26: ≤ 2 s): DBA_HIST_EVENT_HISTOGRAM
# joined with DBA_HIST_SNAPSHOT as SQL*Plus `set markup csv on` spools it
#   "END_INTERVAL_TIME","INSTANCE_NUMBER","EVENT_NAME","WAIT_TIME_MILLI","WAIT_COUNT"
# SNAPS hourly snapshots × EVENTS events × BUCKETS buckets (1, 2, 4 … ms), generated here
# (synthetic cumulative counts that grow every hour; the instance restarts once, halfway, so
# counts go back), then `iolens ingest --format event-histogram` is timed (wall, CPU = user +
# system, peak RSS).
#   BIN=target/release/iolens bench/awr-year.sh [DIR]
# BIN may name several binaries, space-separated (a build before and after a change): each run
# times each of them in turn on the same CSV, so that they are compared under the same load;
# then the median wall and CPU of each are printed with their ratio to the first's, and each
# results file is compared with the first's (byte for byte, but for the creation time and the
# command line, which name the binary and the output).
# Defaults: SNAPS=8760 EVENTS=100 BUCKETS=12 (10.5 million rows, ~0.6 GB), RUNS=3. Deletes its CSV.
# DELTAS=steady (default): each bucket grows by the same 1..11 waits every hour, so an event's
# hourly histogram repeats (the figures of earlier stops); DELTAS=varying: each bucket grows by
# a pseudo-random 0..63 waits an hour, so nearly every hourly histogram differs, as in a busy
# real AWR history. CSV=<file> times that spool instead (made by an earlier run; kept).
set -euo pipefail
BIN="${BIN:-target/release/iolens}"
SNAPS="${SNAPS:-8760}" EVENTS="${EVENTS:-100}" BUCKETS="${BUCKETS:-12}"
DIR="${1:-$(mktemp -d)}"
DELTAS="${DELTAS:-steady}"
trap 'rm -f ${MADE:+"$MADE"} "$DIR/awr-year.json" "$DIR/awr-year.time" "$DIR"/awr-year.first.*' EXIT
if [ -n "${CSV:-}" ]; then
    echo "$(wc -l <"$CSV") lines, $(du -h "$CSV" | cut -f1): $CSV"
else
CSV="$DIR/awr-year.csv" MADE="$DIR/awr-year.csv"
python3 - "$CSV" "$SNAPS" "$EVENTS" "$BUCKETS" "$DELTAS" <<'PY'
import sys, datetime
path, snaps, events, buckets = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
varying = sys.argv[5] == "varying"
t0 = datetime.datetime(2025, 1, 1)
with open(path, "w") as f:
    f.write('"END_INTERVAL_TIME","INSTANCE_NUMBER","EVENT_NAME","WAIT_TIME_MILLI","WAIT_COUNT"\n')
    names = [f"event number {e}" for e in range(events)]
    rows = []
    cum = [0] * (events * buckets)
    seed = 0x9E3779B97F4A7C15
    for s in range(snaps):
        ts = (t0 + datetime.timedelta(hours=s)).strftime("%d-%b-%y %I.%M.%S.000 %p").upper()
        k = s + 1 if s < snaps // 2 else s - snaps // 2 + 1  # the restart halfway
        if varying and s == snaps // 2:
            cum = [0] * (events * buckets)
        for e in range(events):
            for b in range(buckets):
                if varying:
                    seed = (seed * 6364136223846793005 + 1442695040888963407) % (1 << 64)
                    cum[e * buckets + b] += seed >> 58
                    n = cum[e * buckets + b]
                else:
                    n = k * ((e * 7 + b * 3) % 11 + 1)
                rows.append(f'"{ts}","1","{names[e]}","{1 << b}","{n}"\n')
        if len(rows) > 200000:
            f.writelines(rows); rows = []
    f.writelines(rows)
PY
echo "$(wc -l <"$CSV") lines, $(du -h "$CSV" | cut -f1), $SNAPS snapshots x $EVENTS events x $BUCKETS buckets, $DELTAS deltas"
fi
read -r -a bins <<<"$BIN"
declare -A walls cpus
for i in $(seq "${RUNS:-3}"); do
    for b in "${!bins[@]}"; do
        bin="${bins[$b]}"
        /usr/bin/time -o "$DIR/awr-year.time" -f "%e %U %S %M" \
            "$bin" -q ingest --format event-histogram "$CSV" --json "$DIR/awr-year.json"
        read -r wall user sys peak <"$DIR/awr-year.time"
        cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN {printf "%.2f", u + s}')
        echo "run $i${bins[1]:+ $bin}: CPU $cpu s ($user s user, $sys s sys), $wall s wall, $peak KB peak, load $(cut -d' ' -f1 /proc/loadavg)"
        walls[$b]+="$wall " cpus[$b]+="$cpu "
        if [ "$i" = 1 ] && [ -n "${bins[1]:-}" ]; then
            # The document but for its creation time and command line.
            sed -e '/^  "created": /d' -e '/^  "command_line": \[/,/^  \],/d' "$DIR/awr-year.json" \
                >"$DIR/awr-year.first.$b"
        fi
        rm -f "$DIR/awr-year.json" "$DIR/awr-year.time"
    done
done
if [ -n "${bins[1]:-}" ]; then
    median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
    ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "-"}'; }
    w0=$(median <<<"${walls[0]}") c0=$(median <<<"${cpus[0]}")
    for b in "${!bins[@]}"; do
        w=$(median <<<"${walls[$b]}") c=$(median <<<"${cpus[$b]}")
        same=""
        if [ "$b" != 0 ]; then
            if cmp -s "$DIR/awr-year.first.0" "$DIR/awr-year.first.$b"; then
                same=", results identical to the first's"
            else
                same=", RESULTS DIFFER from the first's"
            fi
        fi
        echo "${bins[$b]}: median $w s wall ($(ratio "$w" "$w0") of the first's), $c s CPU ($(ratio "$c" "$c0"))$same"
    done
fi
