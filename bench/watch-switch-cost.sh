#!/usr/bin/env bash
# What `iolens watch` costs per context switch of a watched thread, by construction: two
# processes pass a token through a pipe (`perf bench sched pipe`, both pinned to one CPU), so
# every round trip is two context switches and two wakeups of watched threads and nothing
# else. Measured: the round trip's time (µs per op, perf's own figure) without a watch and
# under each build given, alternated over ROUNDS rounds, and each BPF program's runs and ns a
# run from the kernel's counters (kernel.bpf_stats_enabled set for the measurement, then set
# back), and the watcher's own CPU (utime + stime) per round trip. The difference of the
# medians over none is the watch's cost per round trip.
#
# Needs root and perf. Usage: bench/watch-switch-cost.sh LOOPS ROUNDS BIN [BIN...]
set -euo pipefail
LOOPS=${1:?usage: LOOPS ROUNDS BIN [BIN...]}
ROUNDS=${2:?usage: LOOPS ROUNDS BIN [BIN...]}
shift 2
[ "$(id -u)" -eq 0 ] || { echo "needs root (BPF)" >&2; exit 2; }
command -v perf > /dev/null || { echo "perf not found" >&2; exit 2; }
CPU=${CPU:-1}
TMP=$(mktemp -d)
old_stats=$(cat /proc/sys/kernel/bpf_stats_enabled)
cleanup() {
  echo "$old_stats" > /proc/sys/kernel/bpf_stats_enabled
  [ -n "${W:-}" ] && kill -INT "$W" 2> /dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
echo 1 > /proc/sys/kernel/bpf_stats_enabled
progs() {
  python3 - "$1" << 'PY'
import os, sys
pid, tot = sys.argv[1], {}
for fd in os.listdir(f"/proc/{pid}/fdinfo"):
    try:
        info = dict(l.split(":\t", 1) for l in open(f"/proc/{pid}/fdinfo/{fd}").read().splitlines() if ":\t" in l)
    except OSError:
        continue
    if "prog_id" in info and "run_cnt" in info:
        print(info["prog_id"].strip(), info["run_cnt"].strip(), info["run_time_ns"].strip())
PY
}
bench() { taskset -c "$CPU" perf bench sched pipe -l "$LOOPS" 2>&1 | awk '/usecs\/op/ {print $1}'; }
for r in $(seq "$ROUNDS"); do
  echo "round $r none $(bench)"
  i=0
  for bin in "$@"; do
    i=$((i + 1))
    "$bin" watch --comm perf --wait --no-progress --duration 600s --json "$TMP/w.json" > /dev/null 2> "$TMP/w.err" &
    W=$!
    for _ in $(seq 300); do grep -q "tracepoints attached" "$TMP/w.err" 2> /dev/null && break; sleep 0.1; done
    progs "$W" > "$TMP/a"
    t0=$(awk '{print $14 + $15}' "/proc/$W/stat")
    us=$(bench)
    t1=$(awk '{print $14 + $15}' "/proc/$W/stat")
    progs "$W" > "$TMP/b"
    kill -INT "$W"; wait "$W" || true; W=""
    # ns a run of sched_switch and sched_wakeup, and the total ns of all programs per op.
    extra=$(python3 - "$TMP/a" "$TMP/b" "$LOOPS" << 'PY'
import subprocess, json, sys
a = {l.split()[0]: list(map(int, l.split()[1:])) for l in open(sys.argv[1])}
b = {l.split()[0]: list(map(int, l.split()[1:])) for l in open(sys.argv[2])}
names = {str(p["id"]): p.get("name", "?") for p in json.loads(subprocess.run(["bpftool", "prog", "show", "--json"], capture_output=True, text=True).stdout or "[]")}
out, tot = [], 0
ops = int(sys.argv[3])
for i, (c, n) in b.items():
    c -= a.get(i, [0, 0])[0]; n -= a.get(i, [0, 0])[1]
    tot += n
    nm = names.get(i, i)
    if c >= ops // 2:
        out.append(f"{nm.split('_', 1)[-1]} {c / ops:.1f}/op {n / c:.0f} ns")
print(", ".join(sorted(out)) + f"; all programs {tot / ops / 1e3:.2f} µs/op")
PY
)
    # The watcher's own CPU (utime + stime, clock ticks) per op.
    wus=$(python3 -c "import os; print(f'{($t1 - $t0) / os.sysconf(\"SC_CLK_TCK\") * 1e6 / $LOOPS:.2f}')")
    echo "round $r bin$i $us ($extra; watcher $wus µs/op)"
  done
done
