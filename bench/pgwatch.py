"""What the PostgreSQL watch benches share (bench/pg-watch-tps.sh, bench/watch-cost-per-tx.sh):
a cluster's CPU time, a watch started and attached, and the counters of its BPF programs."""
import os
import subprocess

TICK = os.sysconf("SC_CLK_TCK")


def stat_cpu(pid, children=False):
    """CPU seconds (user + system) of process `pid`, with its reaped children's if asked."""
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in f[11:15 if children else 13]) / TICK


def server_cpu(data):
    """CPU seconds of the cluster in directory `data`: the postmaster's own and its reaped
    children's (backends that exited), plus its live children's."""
    pm = int(open(f"{data}/postmaster.pid").readline())
    total = stat_cpu(pm, children=True)
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                g = open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(g[1]) == pm:
                total += (int(g[11]) + int(g[12])) / TICK
    return total


def start_watch(binary, out):
    """`binary watch --comm postgres` writing its JSON to `out`, once its probes are attached."""
    w = subprocess.Popen([binary, "watch", "--comm", "postgres", "--no-progress", "--json", out],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    buf = b""
    while b"tracepoints attached" not in buf:
        c = os.read(w.stderr.fileno(), 4096)
        if not c:
            raise RuntimeError(f"iolens watch did not start: {buf.decode(errors='replace')}")
        buf += c
    return w


def bpf_progs(pid):
    """prog id -> (run count, run time ns) of the BPF programs process `pid` holds (their
    fdinfo carries the kernel's counters while kernel.bpf_stats_enabled is 1)."""
    out = {}
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            info = dict(l.split(":", 1) for l in open(f"/proc/{pid}/fdinfo/{fd}") if ":" in l)
        except OSError:
            continue
        if "prog_id" in info and "run_cnt" in info:
            out[info["prog_id"].strip()] = (int(info["run_cnt"]), int(info["run_time_ns"]))
    return out
