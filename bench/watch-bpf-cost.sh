#!/usr/bin/env bash
# What each of `iolens watch`'s BPF programs costs per run, for processes it does not watch and
# for those it does: the kernel's own counters (run_cnt, run_time_ns, kept while
# kernel.bpf_stats_enabled is 1; set for the measurement, then set back), per program.
#
# One watch (`--comm postgres`) runs for SECONDS while two loads run beside it:
#   unwatched  a `dd` copying /dev/zero to /dev/null in 64-byte blocks (read and write are
#              traced syscalls: every one reaches the programs, which must find it is not watched);
#   watched    pgbench (the default mix, CLIENTS clients) on the PostgreSQL server at DSN's socket.
# plus whatever else the host runs. Printed per program: runs, runs per second and ns per run;
# then the total. Compare two builds (IOLENS_BIN) run back to back: the load beside it drifts.
#
# Needs root and pgbench. Usage: bench/watch-bpf-cost.sh HOST PORT [SECONDS] [CLIENTS]
#   HOST, PORT: the server's socket directory and port (a database iolens_bench is created with
#   `pgbench -i -s 5` in it the first time, and kept).
# Env: IOLENS_BIN (default target/debug/iolens).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/pg-server.sh
pg_server_args "usage: bench/watch-bpf-cost.sh HOST PORT [SECONDS] [CLIENTS]" "SECS=10 CLIENTS=4" "$@"
BIN=${IOLENS_BIN:-$PWD/target/debug/iolens}
need_root BPF
need_cmd pgbench
need_cmd bpftool "(linux-bpf-dev / bpftool)"
if ! pg_sql iolens_bench -qAtc 'SELECT 1' > /dev/null 2>&1; then
  as_pg createdb -h "$HOST" -p "$PORT" iolens_bench
  as_pg pgbench -h "$HOST" -p "$PORT" -i -q -s 5 iolens_bench > /dev/null 2>&1
fi
TMP=$(mktemp -d)
bpf_stats_keep
cleanup() {
  bpf_stats_back
  [ -n "${DD:-}" ] && kill "$DD" 2> /dev/null || true
  [ -n "${W:-}" ] && kill -INT "$W" 2> /dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
echo 1 > /proc/sys/kernel/bpf_stats_enabled
"$BIN" watch --comm postgres --duration "$((SECS + 30))s" --json "$TMP/w.json" > /dev/null 2> "$TMP/w.err" &
W=$!
# Attached once it says so on stderr.
for _ in $(seq 300); do
  grep -q "tracepoints attached" "$TMP/w.err" 2> /dev/null && break
  sleep 0.1
done
sleep 1
# The watcher's programs' counters, from the fdinfo of the descriptors it holds.
snap() {
  python3 - "$W" > "$1" << 'PY'
import json, os, sys
pid, out = sys.argv[1], {}
for fd in os.listdir(f"/proc/{pid}/fdinfo"):
    try:
        info = dict(l.split(":\t", 1) for l in open(f"/proc/{pid}/fdinfo/{fd}").read().splitlines() if ":\t" in l)
    except OSError:
        continue
    if "prog_id" in info and "run_cnt" in info:
        out[info["prog_id"].strip()] = [int(info["run_cnt"]), int(info["run_time_ns"])]
json.dump(out, sys.stdout)
PY
}
snap "$TMP/a.json"
dd if=/dev/zero of=/dev/null bs=64 count=100000000000 2> /dev/null &
DD=$!
as_pg pgbench -h "$HOST" -p "$PORT" -c "$CLIENTS" -j 2 -T "$SECS" iolens_bench > "$TMP/pgbench.out" 2>&1 || true
snap "$TMP/b.json"
kill "$DD"
DD=""
bpftool prog show --json > "$TMP/names.json"
python3 - "$TMP/a.json" "$TMP/b.json" "$TMP/names.json" "$SECS" << 'PY'
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
names = {str(p["id"]): p.get("name", "?") for p in json.load(open(sys.argv[3]))}
secs = float(sys.argv[4])
rows = []
for i, (cnt, ns) in b.items():
    cnt -= a.get(i, [0, 0])[0]
    ns -= a.get(i, [0, 0])[1]
    if cnt:
        rows.append((ns, cnt, names.get(i, i)))
rows.sort(reverse=True)
print(f"{'program':<24} {'runs':>12} {'runs/s':>10} {'ns/run':>8} {'ms CPU':>8}")
for ns, cnt, name in rows:
    print(f"{name:<24} {cnt:>12} {cnt / secs:>10.0f} {ns / cnt:>8.0f} {ns / 1e6:>8.1f}")
tn, tc = sum(r[0] for r in rows), sum(r[1] for r in rows)
print(f"{'total':<24} {tc:>12} {tc / secs:>10.0f} {tn / max(tc, 1):>8.0f} {tn / 1e6:>8.1f}")
PY
grep -E "^tps" "$TMP/pgbench.out" || true
