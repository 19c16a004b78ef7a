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
# own TPS between rounds (max − min over median). For the watch: the
# traced events per second (I/O syscalls, context switches) and the bytes they move through the
# ring buffers (syscall 64 B, switch 136 B), and the watcher's own CPU.
#
# Needs root (BPF; the server runs as `postgres`), PostgreSQL's server binaries and pgbench.
# Usage: bench/pg-watch-tps.sh [SECONDS] [ROUNDS] [CLIENTS] [SCALE]
# Env: IOLENS_BIN (default: the release build, built here), IOLENS_BENCH_PG_PORT (default 54339),
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

python3 - "$IOLENS_BIN" "$PGBIN" "$DATA" "$SOCK" "$PORT" "$SECS" "$ROUNDS" "$CLIENTS" "$SCALE" "$SAMPLING" << 'PY'
import json, os, re, signal, statistics, subprocess, sys, tempfile, time
bin_, pgbin, data, sock, port = sys.argv[1:6]
secs, rounds, clients, scale, sampling = (int(x) for x in sys.argv[6:11])
dsn = ["-h", sock, "-p", port, "-U", "postgres"]
tmp = tempfile.mkdtemp()
tick = os.sysconf("SC_CLK_TCK")

def as_pg(*args, **kw):
    return subprocess.run(["runuser", "-u", "postgres", "--", *args], check=True, **kw)

def server(preload):
    if os.path.exists(f"{data}/postmaster.pid"):
        as_pg(f"{pgbin}/pg_ctl", "-D", data, "-m", "fast", "-w", "stop",
              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    opts = f"-c shared_preload_libraries={'pg_wait_sampling' if preload else ''}"
    as_pg(f"{pgbin}/pg_ctl", "-D", data, "-l", f"{data}/../server.log", "-w", "-t", "60",
          "-o", opts, "start", stdout=subprocess.DEVNULL)

def pgbench(t):
    o = subprocess.run(["pgbench", *dsn, "-c", str(clients), "-j", "2", "-T", str(t),
                        "postgres"], check=True, capture_output=True, text=True).stdout
    return float(re.search(r"tps = ([0-9.]+) \(without initial", o).group(1))

def cpu_s(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / tick

def watched(t):
    out = os.path.join(tmp, "w.json")
    w = subprocess.Popen([bin_, "watch", "--comm", "postgres", "--no-progress",
                          "--json", out], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    buf = b""
    while b"tracepoints attached" not in buf:
        c = os.read(w.stderr.fileno(), 4096)
        if not c:
            raise RuntimeError(f"iolens watch did not start: {buf.decode(errors='replace')}")
        buf += c
    c0, t0 = cpu_s(w.pid), time.time()
    tps = pgbench(t)
    c1, t1 = cpu_s(w.pid), time.time()
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
                 "watcher_cpu": (c1 - c0) / (t1 - t0), "lost": lost}

server(False)
subprocess.run(["pgbench", *dsn, "-i", "-s", str(scale), "-q", "postgres"], check=True,
               capture_output=True)
modes = ["none", "watch"] + (["sampling"] if sampling else [])
tps = {m: [] for m in modes}
extra = []
print(f"pgbench -c {clients} -j 2 -T {secs} (default mix, scale {scale}); {rounds} rounds; "
      f"{os.cpu_count()} CPUs; iolens {bin_}")
if not sampling:
    print("pg_wait_sampling is not installed: its mode is left out")
for k in range(rounds):
    order = modes[k % len(modes):] + modes[:k % len(modes)]
    for m in order:
        server(m == "sampling")
        pgbench(2)
        if m == "watch":
            v, e = watched(secs)
            extra.append(e)
        else:
            v = pgbench(secs)
        tps[m].append(v)
        print(f"round {k + 1} {m:>8}: {v:9.1f} TPS", flush=True)
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
spread = (max(tps["none"]) - min(tps["none"])) / base
print(f"noise: none's TPS varies {spread * 100:.1f}% between rounds (max − min over median)")
if extra:
    g = lambda k: statistics.median(e[k] for e in extra)
    sps, wps = g("syscalls_per_s"), g("switches_per_s")
    print(f"watch: {sps:.0f} I/O syscalls/s, {wps:.0f} context switches/s traced; "
          f"ring-buffer bytes ≈ {(sps * 64 + wps * 136) / 1e6:.2f} MB/s (64 B a syscall, "
          f"136 B a switch); watcher CPU {g('watcher_cpu') * 100:.1f}% of one CPU; "
          f"events lost {sum(e['lost'] for e in extra)}")
PY
