#!/usr/bin/env bash
# Peak memory of every reader on inputs that are not what they claim (issue 22): /dev/zero and
# /dev/urandom given to every command that reads results and to every `ingest` format and
# `trace`, 20,000 one-line bpftrace keys, and a results file whose every histogram declares
# 1 ns .. 2^62 at 5 significant digits; merges of the largest world and of ranks a year apart;
# then `compare` of two 24-hour runs and an .hlog of
# 20,000 lines, which are read, not refused. Each command runs for at most LIMIT seconds (default
# 10; an endless input such as /dev/urandom read as text is stopped there with SIGTERM, which
# is expected) and its peak RSS (its own VmHWM after exec, bench/peak.py) is printed beside the 256 MiB
# budget.
# Usage: [LIMIT=s] [IOLENS=path] bench/reader-memory.sh
set -uo pipefail
cd "$(dirname "$0")/.."
LIMIT=${LIMIT:-10}
if [ -z "${IOLENS:-}" ]; then
  cargo build --release --quiet || exit 1
  IOLENS=target/release/iolens
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
budget=$((256 * 1024))
over=0
# The reader's own peak (VmHWM after exec, bench/peak.py; wait4's ru_maxrss would carry the
# Python parent's high-water mark); past LIMIT the reader is killed (an endless input: "killed").
measure() { # label, command...
  local label=$1; shift
  local res
  res=$(python3 bench/peak.py "$LIMIT" "$tmp/err" "$@")
  local kb=${res%% *}
  local verdict=ok
  if [ "${kb:-0}" -ge "$budget" ]; then verdict=OVER; over=1; fi
  printf '%-50s %8s KiB  %-4s %-22s %s\n' "$label" "$kb" "$verdict" "${res#* }" \
    "$(head -c 70 "$tmp/err" | tr '\n' ' ')"
}
# Every format `ingest --format` takes, as clap lists them (a new reader is measured without
# editing this script).
formats=$("$IOLENS" ingest --format '?' x 2>&1 | sed -n 's/.*possible values: \(.*\)\]/\1/p' | tr -d ',')
[ -n "$formats" ] || { echo "could not list ingest's formats" >&2; exit 1; }
printf '%-50s %12s  %-4s %-22s %s\n' "reader and input" "peak RSS" "<256" "time, outcome" "stderr"
for dev in /dev/zero /dev/urandom; do
  measure "show $dev" "$IOLENS" show "$dev"
  measure "report $dev" "$IOLENS" report "$dev" -o "$tmp/r.html"
  measure "compare $dev $dev" "$IOLENS" compare "$dev" "$dev"
  measure "export $dev --csv" "$IOLENS" export "$dev" --csv "$tmp/r.csv"
  measure "merge $dev" "$IOLENS" merge "$dev" -o "$tmp/m.json"
  measure "trace $dev" "$IOLENS" trace -q "$dev" --json "$tmp/t.json"
  for f in $formats; do
    measure "ingest --format $f $dev" "$IOLENS" ingest -q --format "$f" "$dev" --json "$tmp/i.json"
  done
done
python3 -c "import sys; sys.stdout.write(''.join('@k%d:\n[1, 2) 1 |@|\n' % i for i in range(20000)))" \
  > "$tmp/keys.bt"
measure "ingest --format bpftrace (20,000 one-line keys)" \
  "$IOLENS" ingest -q --format bpftrace "$tmp/keys.bt" --json "$tmp/i.json"
"$IOLENS" -q dev-synth --seconds 600 --samples 5 --rank 0 --ranks 1 -o "$tmp/synth.json"
python3 - "$tmp/synth.json" "$tmp/wide.json" <<'PY'
# Every histogram re-declared as 1 ns .. 2^62 at 5 digits, its values all at 1 us: a V2 header
# and a payload of a zero run and one count (what any HdrHistogram writer emits).
import base64, json, struct, sys, zlib
def leb(n):
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = n & 0x7f; n >>= 7
        if n: out.append(b | 0x80)
        else: out.append(b); return bytes(out)
def wide(n):
    payload = leb(-1000) + leb(n)
    raw = struct.pack('>IIIIQQd', 0x1c849313, len(payload), 0, 5, 1, 1 << 62, 1.0) + payload
    z = zlib.compress(raw)
    return base64.b64encode(struct.pack('>II', 0x1c849314, len(z)) + z).decode()
doc = json.load(open(sys.argv[1]))
for run in doc['runs']:
    for op in run['ops']:
        for iv in op['intervals']:
            iv['hist'] = wide(iv['count'])
        op['hist'] = wide(op['count'])
json.dump(doc, open(sys.argv[2], 'w'))
PY
measure "show (5-digit 1..2^62 histograms, $(($(stat -c %s "$tmp/wide.json") / 1024)) KB)" \
  "$IOLENS" show "$tmp/wide.json"
measure "report (5-digit 1..2^62 histograms)" "$IOLENS" report "$tmp/wide.json" -o "$tmp/r.html"
measure "export --csv (5-digit 1..2^62 histograms)" "$IOLENS" export "$tmp/wide.json" --csv "$tmp/r.csv"
# Merge of the two ends of the largest world (rank 0 and rank 999,999 of 1,000,000: the issue's
# --ranks 4294967295 merged took 16.9 GB) and of two ranks a year apart (a grid of 31.5 million
# one-second slots): refused or bounded, never allocated.
python3 - "$tmp/synth.json" "$tmp" <<'PY'
import json, sys, datetime
doc = json.load(open(sys.argv[1]))
d = sys.argv[2]
def write(name, rank, ranks, shift_days=0):
    x = json.loads(json.dumps(doc))
    x["placement"].update(rank=rank, ranks=ranks, host="synth-%d" % rank)
    if shift_days:
        t = datetime.datetime.fromisoformat(x["runs"][0]["started"].replace("Z", "+00:00"))
        x["runs"][0]["started"] = (t + datetime.timedelta(days=shift_days)).isoformat().replace("+00:00", "Z")
    json.dump(x, open("%s/%s" % (d, name), "w"))
write("w0.json", 0, 1000000)
write("w1.json", 999999, 1000000)
write("y0.json", 0, 2)
write("y1.json", 1, 2, 365)
PY
measure "merge ranks 0 and 999,999 of a world of 1,000,000" \
  "$IOLENS" -q merge "$tmp/w0.json" "$tmp/w1.json" -o "$tmp/m.json"
rm -f "$tmp/m.json"
measure "merge --force of two ranks a year apart" \
  "$IOLENS" -q merge --force "$tmp/y0.json" "$tmp/y1.json" -o "$tmp/m.json"
# Two 24-hour runs of one-second intervals (issue 22: compare took 22.9 GB, about 265 KB an
# interval) and an .hlog of 20,000 one-value lines (about 270 KB a line). Not refused: given
# 20 minutes each, their peak and time are what follows from what they hold.
"$IOLENS" -q dev-synth --seconds 86400 --samples 200 --seed 1 -o "$tmp/day1.json"
"$IOLENS" -q dev-synth --seconds 86400 --samples 200 --seed 2 -o "$tmp/day2.json"
LIMIT=1200 measure "compare of two 24-h runs ($(($(stat -c %s "$tmp/day1.json") >> 20)) MB each)" \
  "$IOLENS" compare "$tmp/day1.json" "$tmp/day2.json"
rm -f "$tmp/day1.json" "$tmp/day2.json"
python3 - "$tmp/long.hlog" <<'PY'
import base64, struct, sys, zlib
def leb(n):
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = n & 0x7f; n >>= 7
        if n: out.append(b | 0x80)
        else: out.append(b); return bytes(out)
payload = leb(-1000) + leb(1)
raw = struct.pack('>IIIIQQd', 0x1c849313, len(payload), 0, 3, 1, 3600 * 10**9, 1.0) + payload
z = zlib.compress(raw)
h = base64.b64encode(struct.pack('>II', 0x1c849314, len(z)) + z).decode()
with open(sys.argv[1], 'w') as f:
    for i in range(20000):
        f.write('%d.000,1.000,1.000,%s\n' % (i, h))
PY
LIMIT=300 measure "ingest --format hlog (20,000 one-value lines)" \
  "$IOLENS" ingest -q --format hlog "$tmp/long.hlog" --json "$tmp/i.json"
exit $over
