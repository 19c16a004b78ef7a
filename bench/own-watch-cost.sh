#!/usr/bin/env bash
# What `--watch` costs per I/O on a run striped over 4 targets: random 8 KiB reads (SESSIONS
# sessions, SECONDS each run) over four loop devices backed by files in DIR, traced with
# `--watch`, by BIN and (with BASE=another iolens) by that build too, in the same rounds, in an
# order shuffled per round (seeded). Per run it reads two costs per I/O: the iolens process's
# CPU (getrusage of the child, user + system: the sessions' submissions with the block
# probes' start programs run in their context, and the watch's drain thread) and the BPF
# programs' own run time (their `run_time_ns` in /proc/PID/fdinfo, kept while
# kernel.bpf_stats_enabled is 1, set for the measurement and then set back; read every 100 ms,
# each program's last read before it is detached), with the BPF programs the process held at
# once (the count seen most often).
# Prints per build the median over the rounds and, with BASE, the median of the rounds' paired
# ratios BIN ÷ BASE with their range. Absolute figures drift on shared machines; compare the
# ratios of one run.
# Needs root (loop devices, BPF). Usage: bench/own-watch-cost.sh [DIR] [SECONDS] [ROUNDS] [SESSIONS]
#   BIN=path: the build to measure (default target/debug/iolens)
#   BASE=path: another build measured in the same rounds
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-bench-tmp}
SECS=${2:-5}
ROUNDS=${3:-5}
SESSIONS=${4:-4}
BIN=${BIN:-target/debug/iolens}
[ "$(id -u)" = 0 ] || { echo "needs root (loop devices, BPF)" >&2; exit 1; }
mkdir -p "$DIR"
LOOPS=()
STATS_WAS=$(cat /proc/sys/kernel/bpf_stats_enabled)
cleanup() {
  echo "$STATS_WAS" > /proc/sys/kernel/bpf_stats_enabled
  for l in "${LOOPS[@]}"; do losetup -d "$l" 2> /dev/null || true; done
  rm -f "$DIR"/iolens-watch-bench-*.dat
}
trap cleanup EXIT
for i in 0 1 2 3; do
  f="$DIR/iolens-watch-bench-$i.dat"
  dd if=/dev/urandom of="$f" bs=1M count=64 status=none
  LOOPS+=("$(losetup -f --show "$f")")
done
udevadm settle 2> /dev/null || true
echo 1 > /proc/sys/kernel/bpf_stats_enabled
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); targets ${LOOPS[*]}"
python3 - "$BIN" "${BASE:-}" "$SECS" "$ROUNDS" "$SESSIONS" "${LOOPS[@]}" <<'PY'
import json, os, random, statistics, sys, tempfile, time
bin_, base, secs, rounds, sessions = sys.argv[1:6]
loops = sys.argv[6:]
builds = {"BIN": bin_}
if base:
    builds["BASE"] = base
tmp = tempfile.mkdtemp()
rng = random.Random(27)


def progs(pid):
    """The BPF programs `pid` holds now: their ids and run times (ns)."""
    out = {}
    try:
        fds = os.listdir(f"/proc/{pid}/fdinfo")
    except OSError:
        return out
    for fd in fds:
        try:
            info = dict(l.split(":", 1) for l in open(f"/proc/{pid}/fdinfo/{fd}")
                        if ":" in l)
        except OSError:
            continue
        if "prog_type" in info:
            out[int(info["prog_id"])] = int(info.get("run_time_ns", "0"))
    return out


def one(b):
    out = os.path.join(tmp, "r.json")
    cmd = [builds[b], "run", "--pattern", "randread", "--sessions", sessions, "--duration",
           secs + "s", "--watch", "--no-progress", "--json", out]
    for l in loops:
        cmd += ["--target", l]
    pid = os.fork()
    if pid == 0:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.execvp(cmd[0], cmd)
    # Each program's run time when last seen (a build that detaches its programs one watch at
    # a time is still read whole), and how many it held at once, most often.
    run_ns, held = {}, {}
    while True:
        done, status, ru = os.wait4(pid, os.WNOHANG)
        if done:
            break
        p = progs(pid)
        run_ns.update(p)
        if p:
            held[len(p)] = held.get(len(p), 0) + 1
        time.sleep(0.1)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"command failed: {' '.join(cmd)}")
    run = json.load(open(out))["runs"][0]
    ios = sum(o["count"] for o in run["ops"])
    blk = sum(o["count"] for t in run["targets"] for o in (t.get("block") or {}).get("ops", [])
              if o["op"] == "blk:read:device")
    cpu = ru.ru_utime + ru.ru_stime
    most = max(held, key=held.get) if held else 0
    return {"cpu_us": cpu / ios * 1e6, "bpf_ns": sum(run_ns.values()) / ios, "progs": most,
            "ios": ios, "traced": blk}


vals = {b: [] for b in builds}
for r in range(int(rounds)):
    order = list(builds)
    rng.shuffle(order)
    for b in order:
        v = one(b)
        vals[b].append(v)
        print(f"round {r + 1} {b}: {v['ios']} I/Os ({v['traced']} traced), process CPU "
              f"{v['cpu_us']:.2f} us/IO, BPF {v['bpf_ns']:.0f} ns/IO, {v['progs']} programs",
              flush=True)
for b in builds:
    med = lambda k: statistics.median(v[k] for v in vals[b])
    print(f"{b}: median process CPU {med('cpu_us'):.3f} us/IO, BPF programs {med('bpf_ns'):.0f} "
          f"ns/IO, {statistics.median(v['progs'] for v in vals[b]):.0f} programs")
if base:
    for k, name in (("cpu_us", "process CPU"), ("bpf_ns", "BPF run time")):
        ratios = [a[k] / b[k] for a, b in zip(vals["BIN"], vals["BASE"]) if b[k] > 0]
        if ratios:
            print(f"BIN/BASE {name} per I/O: median {statistics.median(ratios):.3f} "
                  f"(rounds {min(ratios):.3f}-{max(ratios):.3f})")
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
