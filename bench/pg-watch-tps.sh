#!/usr/bin/env bash
# What watching a live PostgreSQL costs it: pgbench TPS (the default TPC-B-like mix) on a
# throwaway cluster, side by side in one run, in three modes:
#   none     the server alone;
#   watch    `iolens watch --comm postgres` beside it (every syscall entry and switch-out of
#            every server process probed, its wait event read from the process's memory and
#            joined to the OS layers);
#   sampling the server with pg_wait_sampling preloaded (Debian's postgresql-NN-pg-wait-sampling;
#            its collector samples every backend's wait event at the default 10 ms period).
# The modes alternate over ROUNDS rounds (order rotated each round); the server is restarted
# before every measurement (pg_wait_sampling must be preloaded) and warmed by a short pgbench
# run first. Printed: each measurement's TPS; per mode the median TPS and its loss against none
# ((none − mode) / none, from the medians), the paired loss (the median of each round's loss
# against that round's none, measured minutes apart at most: the figure to quote on a machine
# whose load drifts) and the noise: the spread of the per-round losses (min..max) and of none's
# own TPS between rounds (max − min over median). Then the CPU each transaction cost (the
# cluster's processes, pgbench and the watcher: CPU seconds over transactions), the cost that
# becomes TPS on a CPU-bound host and is far less sensitive than TPS to other load on a shared
# machine, with its change against none. For the watch: the
# traced events per second (I/O syscalls, context switches) and the bytes they move through the
# ring buffers (syscall 64 B, switch 136 B), the watcher's own CPU, and the time its BPF
# programs ran in the kernel (kernel.bpf_stats_enabled is set to 1 while the watch is measured,
# then set back; the counters are read from the programs' fdinfo), per run and per transaction.
#
# Needs root (BPF; the server runs as `postgres`), PostgreSQL's server binaries and pgbench.
# Usage: bench/pg-watch-tps.sh [SECONDS] [ROUNDS] [CLIENTS] [SCALE]
# Env: IOLENS_BIN (default: the release build, built here), IOLENS_BENCH_PG_PORT (default 54339),
#      IOLENS_BIN_BASE (another build of iolens, e.g. main's: adds a mode `base`, its watch, in
#      the same rounds, so that two builds' costs are compared side by side),
#      IOLENS_BENCH_DIR (the cluster's directory, default a new temporary one, removed after).
# Absolute TPS drifts on shared machines; compare the ratios of one run.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-10}
ROUNDS=${2:-3}
CLIENTS=${3:-4}
SCALE=${4:-10}
PORT=${IOLENS_BENCH_PG_PORT:-54339}
if [ "$(id -u)" -ne 0 ]; then
  echo "needs root (BPF probes; the server runs as postgres)" >&2
  exit 2
fi
if [ -z "${IOLENS_BIN:-}" ]; then
  cargo build --release --quiet
  IOLENS_BIN=$PWD/target/release/iolens
fi
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
[ -n "$PGBIN" ] && [ -x "$PGBIN/initdb" ] || { echo "PostgreSQL server binaries not found" >&2; exit 2; }
command -v pgbench > /dev/null || { echo "pgbench not found" >&2; exit 2; }
SAMPLING=1
[ -f "$PGBIN/../lib/pg_wait_sampling.so" ] || SAMPLING=0
OWN_DIR=""
DIR=${IOLENS_BENCH_DIR:-}
if [ -z "$DIR" ]; then
  DIR=$(mktemp -d "${TMPDIR:-/tmp}/iolens-pgbench.XXXXXX")
  OWN_DIR=1
fi
DATA=$DIR/data
SOCK=$DIR/sock
as_pg() { runuser -u postgres -- "$@"; }
cleanup() {
  as_pg "$PGBIN/pg_ctl" -D "$DATA" -m immediate stop > /dev/null 2>&1 || true
  if [ -n "$OWN_DIR" ]; then rm -rf "$DIR"; fi
}
trap cleanup EXIT
mkdir -p "$DATA" "$SOCK"
chown -R postgres: "$DIR"
chmod 755 "$DIR"
if [ ! -f "$DATA/PG_VERSION" ]; then
  as_pg "$PGBIN/initdb" -D "$DATA" -U postgres --auth=trust --no-sync > /dev/null
  cat >> "$DATA/postgresql.conf" << EOF
listen_addresses = ''
port = $PORT
unix_socket_directories = '$SOCK'
EOF
fi

IOLENS_BIN_BASE=${IOLENS_BIN_BASE:-} python3 - "$IOLENS_BIN" "$PGBIN" "$DATA" "$SOCK" "$PORT" "$SECS" "$ROUNDS" "$CLIENTS" "$SCALE" "$SAMPLING" << 'PY'
import json, os, re, resource, signal, statistics, subprocess, sys, tempfile, time
sys.dont_write_bytecode = True  # no __pycache__ in the checkout
sys.path.insert(0, "bench")
from pgwatch import bpf_progs, server_cpu, start_watch, stat_cpu
bin_, pgbin, data, sock, port = sys.argv[1:6]
secs, rounds, clients, scale, sampling = (int(x) for x in sys.argv[6:11])
dsn = ["-h", sock, "-p", port, "-U", "postgres"]
tmp = tempfile.mkdtemp()

def as_pg(*args, **kw):
    return subprocess.run(["runuser", "-u", "postgres", "--", *args], check=True, **kw)

def server(preload):
    if os.path.exists(f"{data}/postmaster.pid"):
        as_pg(f"{pgbin}/pg_ctl", "-D", data, "-m", "fast", "-w", "stop",
              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    opts = f"-c shared_preload_libraries={'pg_wait_sampling' if preload else ''}"
    as_pg(f"{pgbin}/pg_ctl", "-D", data, "-l", f"{data}/../server.log", "-w", "-t", "60",
          "-o", opts, "start", stdout=subprocess.DEVNULL)

last = {}
STATS = "/proc/sys/kernel/bpf_stats_enabled"

def bpf_runs(pid):
    """(run count, run time ns) summed over the BPF programs process `pid` holds."""
    runs = bpf_progs(pid).values()
    return sum(c for c, _ in runs), sum(ns for _, ns in runs)

def pgbench(t):
    ru0, s0 = resource.getrusage(resource.RUSAGE_CHILDREN), server_cpu(data)
    o = subprocess.run(["pgbench", *dsn, "-c", str(clients), "-j", "2", "-T", str(t),
                        "postgres"], check=True, capture_output=True, text=True).stdout
    time.sleep(0.3)  # the backends exit and are reaped
    ru1, s1 = resource.getrusage(resource.RUSAGE_CHILDREN), server_cpu(data)
    n = int(re.search(r"number of transactions actually processed: (\d+)", o).group(1))
    client = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    last["cpu_us_per_tx"] = ((s1 - s0) + client) / max(n, 1) * 1e6
    return float(re.search(r"tps = ([0-9.]+) \(without initial", o).group(1))

def watched(t, binary):
    out = os.path.join(tmp, "w.json")
    w = start_watch(binary, out)
    stats = open(STATS).read().strip()
    open(STATS, "w").write("1")
    try:
        (n0, b0), c0, t0 = bpf_runs(w.pid), stat_cpu(w.pid), time.time()
        tps = pgbench(t)
        (n1, b1), c1, t1 = bpf_runs(w.pid), stat_cpu(w.pid), time.time()
    finally:
        open(STATS, "w").write(stats)
    watcher_us_per_tx = (c1 - c0) / max(tps * t, 1) * 1e6
    w.send_signal(signal.SIGINT)
    w.communicate(timeout=60)
    r = json.load(open(out))
    runs = {x["name"]: x for x in r["runs"]}
    count = lambda run, op: sum(o["count"] for o in runs.get(run, {}).get("ops", [])
                                if o["op"] == op)
    dur = r["watch"]["intervals"] and sum(s["duration_s"] for s in r["watch"]["intervals"])
    sys_n = sum(s["syscalls"] for s in r["watch"]["intervals"])
    sw_n = count("cpu", "cpu:off")
    lost = sum(r["watch"].get("lost", {}).values())
    os.unlink(out)
    return tps, {"watch_s": dur, "syscalls_per_s": sys_n / dur, "switches_per_s": sw_n / dur,
                 "watcher_cpu": (c1 - c0) / (t1 - t0), "lost": lost,
                 "watcher_us_per_tx": watcher_us_per_tx,
                 "bpf_runs_per_s": (n1 - n0) / (t1 - t0),
                 "bpf_ns_per_run": (b1 - b0) / max(n1 - n0, 1),
                 "bpf_us_per_tx": (b1 - b0) / 1e3 / max(tps * t, 1)}

server(False)
subprocess.run(["pgbench", *dsn, "-i", "-s", str(scale), "-q", "postgres"], check=True,
               capture_output=True)
base_bin = os.environ.get("IOLENS_BIN_BASE", "")
watchers = {"watch": bin_, **({"base": base_bin} if base_bin else {})}
modes = ["none", *watchers] + (["sampling"] if sampling else [])
tps = {m: [] for m in modes}
cpu = {m: [] for m in modes}
extra = {m: [] for m in watchers}
print(f"pgbench -c {clients} -j 2 -T {secs} (default mix, scale {scale}); {rounds} rounds; "
      f"{os.cpu_count()} CPUs; iolens {bin_}" + (f"; base {base_bin}" if base_bin else ""))
if not sampling:
    print("pg_wait_sampling is not installed: its mode is left out")
for k in range(rounds):
    order = modes[k % len(modes):] + modes[:k % len(modes)]
    for m in order:
        server(m == "sampling")
        pgbench(2)
        if m in watchers:
            v, e = watched(secs, watchers[m])
            extra[m].append(e)
        else:
            v = pgbench(secs)
        # The BPF programs run inside the processes they probe: their time is already in the
        # server's and pgbench's CPU.
        c = last["cpu_us_per_tx"] + (extra[m][-1]["watcher_us_per_tx"] if m in watchers else 0.0)
        tps[m].append(v)
        cpu[m].append(c)
        print(f"round {k + 1} {m:>8}: {v:9.1f} TPS, {c:7.0f} CPU µs per transaction", flush=True)
server(False)
med = {m: statistics.median(v) for m, v in tps.items()}
base = med["none"]
print()
print(f"{'mode':>8} {'median TPS':>11} {'loss':>7}  {'paired loss':>11}  per-round loss (min..max)")
for m in modes:
    losses = [(n - x) / n for n, x in zip(tps["none"], tps[m])]
    loss = (base - med[m]) / base
    print(f"{m:>8} {med[m]:11.1f} {loss * 100:6.1f}%  {statistics.median(losses) * 100:10.1f}%  "
          f"{min(losses) * 100:.1f}%..{max(losses) * 100:.1f}%")
print()
print("CPU per transaction (server processes + pgbench + the watcher): what a mode costs on a")
print("CPU-bound host, less sensitive than TPS to other load on the machine")
cbase = statistics.median(cpu["none"])
for m in modes:
    cm = statistics.median(cpu[m])
    paired = [x / n - 1 for n, x in zip(cpu["none"], cpu[m])]
    print(f"{m:>8} {cm:8.0f} µs  {(cm / cbase - 1) * 100:+6.1f}%  paired {statistics.median(paired) * 100:+6.1f}% "
          f"({min(paired) * 100:+.1f}%..{max(paired) * 100:+.1f}%)")
spread = (max(tps["none"]) - min(tps["none"])) / base
print(f"noise: none's TPS varies {spread * 100:.1f}% between rounds (max − min over median)")
for m, ex in extra.items():
    g = lambda k: statistics.median(e[k] for e in ex)
    sps, wps = g("syscalls_per_s"), g("switches_per_s")
    print(f"{m}: {sps:.0f} I/O syscalls/s, {wps:.0f} context switches/s traced; "
          f"watcher CPU {g('watcher_cpu') * 100:.1f}% of one CPU; "
          f"events lost {sum(e['lost'] for e in ex)}")
    bpf = g("bpf_us_per_tx")
    print(f"{m}: its BPF programs ran {g('bpf_runs_per_s'):.0f} times/s (every process's "
          f"syscalls and switches on the host: the tracepoints fire for all, the filter is "
          f"inside), {g('bpf_ns_per_run'):.0f} ns a run: {bpf:.0f} µs per transaction "
          f"({bpf / cbase * 100:.1f}% of none's {cbase:.0f} µs); the watcher "
          f"{g('watcher_us_per_tx'):.0f} µs per transaction "
          f"({g('watcher_us_per_tx') / cbase * 100:.1f}%)")
PY
