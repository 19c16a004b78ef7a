#!/usr/bin/env bash
# What `iolens watch --comm postgres` costs a pgbench transaction, measured exactly rather than
# read from TPS (which a shared or small machine cannot resolve to 5 %): the kernel's own
# counters of each BPF program (run_cnt and run_time_ns, kept while kernel.bpf_stats_enabled is
# 1; set for the measurement, then set back; read from the fdinfo of the watcher's program
# descriptors) and the watcher's own CPU (utime + stime from /proc), both per transaction, set
# against the CPU a transaction costs without a watch (the server's processes and pgbench,
# measured in the same rounds). That share is the TPS a watch takes on a CPU-saturated host.
#
# Each round runs pgbench (default TPC-B-like mix, CLIENTS clients, 2 threads, SECONDS s) once
# without a watch and once under each build (IOLENS_BIN, and IOLENS_BIN_BASE if set: e.g.
# main's, for a before/after in the same rounds), the order rotated each round. Under a watch,
# an idle window of IDLE s (the watch attached, no pgbench) comes first: what the programs cost
# for the rest of the host (other processes' syscalls and switches reach them too), subtracted
# at its rate from the pgbench window to give the cost the transactions themselves caused
# ("net"). Printed, per build, medians over rounds: per program its runs, ns a run, ns per
# transaction (all, and net); the BPF total; the watcher's user-space CPU per transaction; the
# sum as a share of none's CPU per transaction; and the measured CPU per transaction change
# (all processes' CPU, the noisier cross-check).
#
# The programs' time is counted inside the CPU of whoever they ran in (a backend, pgbench, an
# interrupted task), so it is not added twice: the watch-mode CPU per transaction already holds
# it. kernel.bpf_stats_enabled itself adds two clock reads to every run (~20-40 ns).
#
# Needs root, pgbench and a running server: Usage:
#   bench/watch-cost-per-tx.sh HOST PORT [SECONDS] [ROUNDS] [CLIENTS] [SCALE] [IDLE]
#   HOST, PORT: the server's socket directory and port (e.g. from scripts/pg-test-server.sh);
#   a database iolens_bench is made with `pgbench -i -s SCALE` (default 10) and dropped at the
#   end (not left in a server that tests share).
# Env: IOLENS_BIN (default target/debug/iolens), IOLENS_BIN_BASE (optional second build).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/pg-server.sh
pg_server_args "usage: bench/watch-cost-per-tx.sh HOST PORT [SECONDS] [ROUNDS] [CLIENTS] [SCALE] [IDLE]" \
  "SECS=20 ROUNDS=3 CLIENTS=4 SCALE=10 IDLE=5" "$@"
BIN=${IOLENS_BIN:-$PWD/target/debug/iolens}
need_root "BPF; the server runs as postgres"
need_cmd pgbench
need_cmd bpftool "(Debian package bpftool)"
pgbench_db "$SCALE"
DATA=$(pg_sql iolens_bench -qAtc 'SHOW data_directory')

IOLENS_BIN_BASE=${IOLENS_BIN_BASE:-} python3 - "$BIN" "$HOST" "$PORT" "$DATA" "$SECS" "$ROUNDS" "$CLIENTS" "$IDLE" << 'PY'
import json, os, re, resource, signal, statistics, subprocess, sys, tempfile, time
sys.dont_write_bytecode = True  # no __pycache__ in the checkout
sys.path.insert(0, "bench")
from pgwatch import bpf_progs, server_cpu, start_watch, stat_cpu
bin_, host, port, data = sys.argv[1:5]
secs, rounds, clients, idle = (int(x) for x in sys.argv[5:9])
STATS = "/proc/sys/kernel/bpf_stats_enabled"
tmp = tempfile.mkdtemp()

def names():
    o = subprocess.run(["bpftool", "prog", "show", "--json"], check=True, capture_output=True,
                       text=True).stdout
    return {str(p["id"]): p.get("name", "?") for p in json.loads(o)}

def pgbench(t):
    """(transactions, TPS, CPU seconds of the server and pgbench) of one pgbench run."""
    ru0, s0 = resource.getrusage(resource.RUSAGE_CHILDREN), server_cpu(data)
    o = subprocess.run(["runuser", "-u", "postgres", "--", "pgbench", "-h", host, "-p", port,
                        "-c", str(clients), "-j", "2", "-T", str(t), "iolens_bench"],
                       check=True, capture_output=True, text=True).stdout
    time.sleep(0.3)  # the backends exit and are reaped
    ru1, s1 = resource.getrusage(resource.RUSAGE_CHILDREN), server_cpu(data)
    n = int(re.search(r"number of transactions actually processed: (\d+)", o).group(1))
    tps = float(re.search(r"tps = ([0-9.]+) \(without initial", o).group(1))
    client = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    return n, tps, (s1 - s0) + client

def delta(b, a):
    return {i: (c - a.get(i, (0, 0))[0], ns - a.get(i, (0, 0))[1]) for i, (c, ns) in b.items()}

def watched(binary):
    out = os.path.join(tmp, "w.json")
    w = start_watch(binary, out)
    old = open(STATS).read().strip()
    open(STATS, "w").write("1")
    try:
        p0, t0 = bpf_progs(w.pid), time.monotonic()
        time.sleep(idle)
        p1, t1, c1 = bpf_progs(w.pid), time.monotonic(), stat_cpu(w.pid)
        n, tps, cpu = pgbench(secs)
        p2, t2, c2 = bpf_progs(w.pid), time.monotonic(), stat_cpu(w.pid)
    finally:
        open(STATS, "w").write(old)
    nm = names()
    w.send_signal(signal.SIGINT)
    w.communicate(timeout=120)
    os.unlink(out)
    bg, run = delta(p1, p0), delta(p2, p1)
    scale = (t2 - t1) / max(t1 - t0, 1e-9)
    per = {}
    for i, (cnt, ns) in run.items():
        name = nm.get(i, i)
        bc, bns = bg.get(i, (0, 0))
        per[name] = {"runs_tx": cnt / max(n, 1), "ns_run": ns / max(cnt, 1), "ns_tx": ns / max(n, 1),
                     "net_tx": (ns - bns * scale) / max(n, 1)}
    return n, tps, cpu, per, (c2 - c1) / max(n, 1) * 1e9, (c2 - c1) / max(t2 - t1, 1e-9)

base_bin = os.environ.get("IOLENS_BIN_BASE", "")
builds = {"watch": bin_, **({"base": base_bin} if base_bin else {})}
modes = ["none", *builds]
res = {m: [] for m in modes}
print(f"pgbench -c {clients} -j 2 -T {secs} (default mix); {rounds} rounds; idle window {idle} s; "
      f"{os.cpu_count()} CPUs; load {os.getloadavg()[0]:.1f}; watch {bin_}"
      + (f"; base {base_bin}" if base_bin else ""), flush=True)
for k in range(rounds):
    for m in modes[k % len(modes):] + modes[:k % len(modes)]:
        pgbench(2)  # warm
        if m == "none":
            n, tps, cpu = pgbench(secs)
            r = {"tps": tps, "cpu_tx": cpu / max(n, 1) * 1e9}
        else:
            n, tps, cpu, per, user, frac = watched(builds[m])
            r = {"tps": tps, "cpu_tx": cpu / max(n, 1) * 1e9 + user, "per": per, "user_tx": user,
                 "user_frac": frac}
        res[m].append(r)
        print(f"round {k + 1} {m:>5}: {r['tps']:8.1f} TPS, {r['cpu_tx'] / 1e3:6.0f} CPU µs per "
              f"transaction; load {os.getloadavg()[0]:.1f}", flush=True)

med = statistics.median
none_tx = med(r["cpu_tx"] for r in res["none"])
print(f"\nnone: {med(r['tps'] for r in res['none']):.1f} TPS, {none_tx / 1e3:.0f} CPU µs per "
      f"transaction (server + pgbench; rounds {', '.join('%.0f' % (r['cpu_tx'] / 1e3) for r in res['none'])})")
for m in builds:
    rs = res[m]
    progs_ = sorted({p for r in rs for p in r["per"]},
                    key=lambda p: -med(r["per"].get(p, {"ns_tx": 0})["ns_tx"] for r in rs))
    print(f"\n{m} ({builds[m]}): per BPF program, medians over {len(rs)} rounds")
    print(f"{'program':<18} {'runs/tx':>9} {'ns/run':>8} {'ns/tx':>9} {'net ns/tx':>10}")
    g = lambda p, k: med(r["per"].get(p, {k: 0})[k] for r in rs)
    for p in progs_:
        if g(p, "runs_tx") == 0:
            continue
        print(f"{p:<18} {g(p, 'runs_tx'):9.1f} {g(p, 'ns_run'):8.0f} {g(p, 'ns_tx'):9.0f} "
              f"{g(p, 'net_tx'):10.0f}")
    bpf = med(sum(x["ns_tx"] for x in r["per"].values()) for r in rs)
    net = med(sum(x["net_tx"] for x in r["per"].values()) for r in rs)
    user = med(r["user_tx"] for r in rs)
    print(f"{'BPF total':<18} {'':>9} {'':>8} {bpf:9.0f} {net:10.0f}")
    print(f"{'watcher process':<18} {'':>9} {'':>8} {user:9.0f} {user:10.0f}   "
          f"({med(r['user_frac'] for r in rs) * 100:.1f}% of one CPU: partly a fixed cost per "
          f"second, spread over fewer transactions on a slow host)")
    print(f"{'total':<18} {'':>9} {'':>8} {bpf + user:9.0f} {net + user:10.0f}")
    print(f"{m}: cost per transaction {(bpf + user) / 1e3:.1f} µs ({(bpf + user) / none_tx * 100:.1f}% "
          f"of none's {none_tx / 1e3:.0f} µs; net of the rest of the host "
          f"{(net + user) / none_tx * 100:.1f}%): the TPS loss to expect on a CPU-saturated host")
    paired = [w["cpu_tx"] / n["cpu_tx"] - 1 for n, w in zip(res["none"], rs)]
    loss = [1 - w["tps"] / n["tps"] for n, w in zip(res["none"], rs)]
    print(f"{m}: measured CPU per transaction {med(r['cpu_tx'] for r in rs) / 1e3:.0f} µs, paired "
          f"change {med(paired) * 100:+.1f}% (rounds {min(paired) * 100:+.1f}..{max(paired) * 100:+.1f}%); "
          f"TPS {med(r['tps'] for r in rs):.1f}, paired loss {med(loss) * 100:.1f}% "
          f"(rounds {min(loss) * 100:.1f}..{max(loss) * 100:.1f}%: TPS noise on this host)")
PY
