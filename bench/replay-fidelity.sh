#!/usr/bin/env bash
# How faithfully `iolens replay` keeps a recorded schedule, beside fio's read_iolog on the same
# stream (issue 28).
#
# A stream is generated here at RATE IOPS for SECONDS (default 10000 and 50000, 3 s): one
# session (pid), 4 KiB reads at evenly spaced issue times, random 4 KiB-aligned offsets in a
# 64 MiB region, written as bcc biosnoop output. iolens replays it (`--timing recorded
# --realtime --buffered`) on a scratch file it creates; fio replays the very same reads at the
# very same file offsets from a version-3 iolog (its timestamps are whole milliseconds, the
# format's resolution) on the same file, buffered, one job. Printed per rate: iolens' issue-time
# error p50/p99/max and its issue span against the schedule's (both on a target whose blocks
# are in the page cache, see below); fio's runtime and IOPS against
# the stream's; and the ratio of each one's achieved IOPS to the recorded IOPS.
#
# Usage: bench/replay-fidelity.sh [RATE...]     (env SECONDS_PER_RATE=3, IOLENS=path, BUSY=0)
# BUSY=N runs N busy loops (`while :; do :; done`, one per CPU to fill them) during each rate's
# replays, as a host whose CPUs other work keeps busy; each rate's line is followed by iolens'
# pauses (see README: a session thread never holds its CPU), its largest lateness and the
# 1-minute load average after the replay.
# Needs root for --realtime (SCHED_FIFO); fio is installed with apt-get when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
IOLENS=${IOLENS:-target/release/iolens}
if [ ! -x "$IOLENS" ]; then
  cargo build --release
fi
RATES=("$@")
[ ${#RATES[@]} -gt 0 ] || RATES=(10000 50000)
SECS=${SECONDS_PER_RATE:-3}
if ! command -v fio >/dev/null; then
  echo "fio is missing: installing the Debian package" >&2
  apt-get install -y fio >/dev/null || { echo "cannot install fio" >&2; exit 1; }
fi
BUSY=${BUSY:-0}
busy=()
start_busy() {
  for ((i = 0; i < BUSY; i++)); do
    (while :; do :; done) &
    busy+=($!)
  done
}
stop_busy() {
  for p in "${busy[@]}"; do kill "$p" 2>/dev/null || true; done
  busy=()
}
dir=$(mktemp -d /var/tmp/replay-fidelity.XXXXXX)
trap 'stop_busy; rm -rf "$dir"' EXIT
target="$dir/t.dat"
printf '%-8s %-22s %-14s %-14s %-14s %-12s %-10s\n' rate tool "issue p50" "issue p99" "issue max" "span err %" "IOPS ratio"
for rate in "${RATES[@]}"; do
  n=$((rate * SECS))
  # The stream: issue i at i/rate s, latency 10 us, completion TIME = issue + latency.
  python3 - "$rate" "$n" "$dir/stream.txt" "$dir/fio.iolog" "$target" <<'EOF'
import random, sys
rate, n, out, iolog, target = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
random.seed(28)
blocks = (64 << 20) // 4096
with open(out, "w") as f, open(iolog, "w") as g:
    f.write("TIME(s)     COMM           PID    DISK    T SECTOR     BYTES   LAT(ms)\n")
    g.write("fio version 3 iolog\n0 %s add\n0 %s open\n" % (target, target))
    # Block 0 and the last block are read once each, so the region is the whole 64 MiB.
    for i in range(n):
        b = 0 if i == 0 else (blocks - 1 if i == 1 else random.randrange(blocks))
        t = i / rate
        f.write("%.6f    gen            1000   vdx     R %d  4096    0.01\n" % (t + 0.00001, b * 8))
        # iolens lays the disk's 64 MiB from byte 0 after the scratch file's 1 MiB header.
        g.write("%d %s read %d 4096\n" % (int(t * 1000), target, (1 << 20) + b * 4096))
    g.write("%d %s close\n" % (int(n / rate * 1000), target))
EOF
  rm -f "$target" "$dir/r.json"
  # The target is created (and its blocks read once, into the page cache) by a first replay
  # at `fast` timing: the measured replays then read cached blocks, as the stream's 10 us
  # latencies say. Without it the first half second reads a cold 64 MiB at this VM's disk
  # latency (about 100 us), which a faithful replay of one synchronous session must wait for
  # (it did: 50k IOPS fell 312 ms behind, catching up once the cache was warm).
  "$IOLENS" -q replay "$dir/stream.txt" --format biosnoop --target "$target" --buffered \
    --timing fast >/dev/null
  start_busy
  "$IOLENS" -q replay "$dir/stream.txt" --format biosnoop --target "$target" --buffered \
    --realtime --timing recorded --json "$dir/r.json"
  load=$(cut -d' ' -f1 /proc/loadavg)
  python3 - "$dir/r.json" "$rate" "$n" "$load" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))["replay"]
rate, n = int(sys.argv[2]), int(sys.argv[3])
e = r["issue_error"]
us = lambda ns: "%.1f us" % (ns / 1000)
achieved = r["replayed_ios"] / r["replayed_span_s"] * (n - 1) / n
print("%-8d %-22s %-14s %-14s %-14s %-12.3f %-10.4f" % (rate, "iolens replay", us(e["p50_ns"]), us(e["p99_ns"]), us(e["max_ns"]), r["span_error_pct"], achieved / rate))
print("         (iolens: %d pauses, at most %.3f ms behind, load %s)" % (r["pauses"], r["behind_s"] * 1000, sys.argv[4]))
EOF
  fio --name=replay --read_iolog="$dir/fio.iolog" --ioengine=psync --direct=0 \
    --output-format=json --output="$dir/fio.json" >/dev/null 2>&1 || { echo "fio failed" >&2; cat "$dir/fio.json" >&2; exit 1; }
  stop_busy
  python3 - "$dir/fio.json" "$rate" "$n" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]["read"]
rate, n = int(sys.argv[2]), int(sys.argv[3])
span_ms = (n - 1) / rate * 1000
runtime = j["runtime"]
print("%-8d %-22s %-14s %-14s %-14s %-12.3f %-10.4f" % (rate, "fio read_iolog v3", "-", "-", "-", (runtime - span_ms) / span_ms * 100, j["iops"] / rate))
EOF
done
