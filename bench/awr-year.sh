#!/usr/bin/env bash
# Speed of reading a year of hourly AWR snapshots (issue 26: ≤ 2 s): DBA_HIST_EVENT_HISTOGRAM
# joined with DBA_HIST_SNAPSHOT as SQL*Plus `set markup csv on` spools it
#   "END_INTERVAL_TIME","INSTANCE_NUMBER","EVENT_NAME","WAIT_TIME_MILLI","WAIT_COUNT"
# SNAPS hourly snapshots × EVENTS events × BUCKETS buckets (1, 2, 4 … ms), generated here
# (synthetic cumulative counts that grow every hour; the instance restarts once, halfway, so
# counts go back), then `iolens ingest --format event-histogram` is timed (wall, CPU, peak RSS).
#   BIN=target/release/iolens bench/awr-year.sh [DIR]
# Defaults: SNAPS=8760 EVENTS=100 BUCKETS=12 (10.5 million rows, ~0.6 GB), RUNS=3. Deletes its CSV.
set -euo pipefail
BIN="${BIN:-target/release/iolens}"
SNAPS="${SNAPS:-8760}" EVENTS="${EVENTS:-100}" BUCKETS="${BUCKETS:-12}"
DIR="${1:-$(mktemp -d)}"
CSV="$DIR/awr-year.csv"
trap 'rm -f "$CSV" "$DIR/awr-year.json"' EXIT
python3 - "$CSV" "$SNAPS" "$EVENTS" "$BUCKETS" <<'PY'
import sys, datetime
path, snaps, events, buckets = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
t0 = datetime.datetime(2025, 1, 1)
with open(path, "w") as f:
    f.write('"END_INTERVAL_TIME","INSTANCE_NUMBER","EVENT_NAME","WAIT_TIME_MILLI","WAIT_COUNT"\n')
    names = [f"event number {e}" for e in range(events)]
    rows = []
    for s in range(snaps):
        ts = (t0 + datetime.timedelta(hours=s)).strftime("%d-%b-%y %I.%M.%S.000 %p").upper()
        k = s + 1 if s < snaps // 2 else s - snaps // 2 + 1  # the restart halfway
        for e in range(events):
            for b in range(buckets):
                rows.append(f'"{ts}","1","{names[e]}","{1 << b}","{k * ((e * 7 + b * 3) % 11 + 1)}"\n')
        if len(rows) > 200000:
            f.writelines(rows); rows = []
    f.writelines(rows)
PY
echo "$(wc -l <"$CSV") lines, $(du -h "$CSV" | cut -f1), $SNAPS snapshots x $EVENTS events x $BUCKETS buckets"
for i in $(seq "${RUNS:-3}"); do
    /usr/bin/time -f "run $i: %e s wall, %U s user, %S s sys, %M KB peak" \
        "$BIN" -q ingest --format event-histogram "$CSV" --json "$DIR/awr-year.json"
    rm -f "$DIR/awr-year.json"
done
