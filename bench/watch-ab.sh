#!/usr/bin/env bash
# Two builds of `iolens watch --comm postgres` side by side on the SAME pgbench run: both watch
# every switch, syscall and block request of the same transactions, so the difference between
# them is the builds' and not the load's (on a shared VM the load moves TPS and the per-round
# costs of bench/watch-cost-per-tx.sh by more than a change to one build). Each round starts
# both watches (the order alternated), runs pgbench, and reads for each watcher its own CPU
# (utime + stime from /proc) and its BPF programs' runs and run time (kernel.bpf_stats_enabled,
# set for the measurement, then set back), per transaction. Printed: per round and as medians,
# each build's watcher CPU and BPF time per transaction, and the ratios B / A per round with
# their geometric mean (see below: use an even ROUNDS). Both watches share the CPUs, so
# absolute figures are above a lone watch's; the ratio is what holds.
#
# Needs root, pgbench, bpftool and a running server. Usage:
#   bench/watch-ab.sh HOST PORT BIN_A BIN_B [SECONDS] [ROUNDS] [CLIENTS] [SCALE]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/pg-server.sh
usage="usage: bench/watch-ab.sh HOST PORT BIN_A BIN_B [SECONDS] [ROUNDS] [CLIENTS] [SCALE]"
pg_server_args "$usage" "BIN_A= BIN_B= SECS=15 ROUNDS=6 CLIENTS=4 SCALE=10" "$@"
[ -x "$BIN_A" ] && [ -x "$BIN_B" ] || { echo "$usage" >&2; exit 1; }
need_root "BPF; the server runs as postgres"
need_cmd pgbench
pgbench_db "$SCALE"

python3 - "$BIN_A" "$BIN_B" "$HOST" "$PORT" "$SECS" "$ROUNDS" "$CLIENTS" << 'PY'
import os, re, signal, statistics, subprocess, sys, tempfile
sys.dont_write_bytecode = True  # no __pycache__ in the checkout
sys.path.insert(0, "bench")
from pgwatch import bpf_progs, start_watch, stat_cpu
bins = sys.argv[1:3]
host, port = sys.argv[3:5]
secs, rounds, clients = (int(x) for x in sys.argv[5:8])
tmp = tempfile.mkdtemp()
open("/proc/sys/kernel/bpf_stats_enabled", "w").write("1")
rows = {0: [], 1: []}
for r in range(rounds):
    order = [0, 1] if r % 2 == 0 else [1, 0]
    w = {}
    for i in order:
        w[i] = start_watch(bins[i], f"{tmp}/w{i}.json")
    c0 = {i: stat_cpu(w[i].pid) for i in w}
    b0 = {i: bpf_progs(w[i].pid) for i in w}
    out = subprocess.run(["runuser", "-u", "postgres", "--", "pgbench", "-h", host, "-p", port,
                          "-c", str(clients), "-j", "2", "-T", str(secs), "iolens_bench"],
                         capture_output=True, text=True, check=True).stdout
    c1 = {i: stat_cpu(w[i].pid) for i in w}
    b1 = {i: bpf_progs(w[i].pid) for i in w}
    for i in w:
        w[i].send_signal(signal.SIGINT)
    for i in w:
        w[i].wait(timeout=120)
    tx = int(re.search(r"number of transactions actually processed: (\d+)", out).group(1))
    line = f"round {r + 1}: {tx / secs:7.1f} TPS"
    for i in (0, 1):
        bpf = sum(b1[i][p][1] - b0[i].get(p, (0, 0))[1] for p in b1[i])
        cpu = (c1[i] - c0[i]) * 1e9
        rows[i].append((cpu / tx, bpf / tx))
        line += f"; {'AB'[i]}: watcher {cpu / tx / 1e3:6.1f} µs/tx, BPF {bpf / tx / 1e3:6.1f} µs/tx"
    print(line, flush=True)
med = {i: [statistics.median(x[j] for x in rows[i]) for j in (0, 1)] for i in (0, 1)}
for i in (0, 1):
    print(f"{'AB'[i]} ({bins[i]}): medians watcher {med[i][0] / 1e3:.1f} µs/tx, "
          f"BPF {med[i][1] / 1e3:.1f} µs/tx, total {(med[i][0] + med[i][1]) / 1e3:.1f} µs/tx")
# The programs attached first to a tracepoint run first and meet the cold cache lines (the
# thread's state, the backend's memory) that the second then finds warm: the order of the two
# watches moves each round's BPF ratio by up to ±25 %. It alternates, so the geometric mean of
# the rounds' ratios (an even number of rounds) cancels it.
def gmean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))
import math
ratios = [(b[0] + b[1]) / (a[0] + a[1]) for a, b in zip(rows[0], rows[1])]
wr = [b[0] / a[0] for a, b in zip(rows[0], rows[1])]
br = [b[1] / a[1] for a, b in zip(rows[0], rows[1])]
for name, xs in (("total", ratios), ("watcher", wr), ("BPF", br)):
    print(f"B / A {name}: rounds {', '.join(f'{x:.3f}' for x in xs)}; geometric mean "
          f"{gmean(xs):.3f}")
if rounds % 2:
    print("(an odd number of rounds: A was attached first once more than B)")
PY
