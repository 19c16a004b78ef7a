#!/usr/bin/env bash
# What watching costs the watched: `iolens run` on cached 8 KiB reads (pread64 served by the
# page cache: the most syscalls per second, the worst case for a syscall tracer), alone and
# with a whole-host watch running beside it; and the same with bpftrace running the equivalent
# one-liner (pread64 latency histogram from raw_syscalls tracepoints), and bcc's biolatency
# when it works here. The "floor" mode attaches programs that do nothing to the same raw
# tracepoints (bench/floor/, built here with clang and libbpf): the cost no tracer on these
# tracepoints can avoid. Modes alternate over ROUNDS on the same cached file; medians compared.
#
# Figures per mode: IOPS and its ratio to no tracing, and the added CPU per traced I/O:
#   (the run's own CPU µs per I/O − without tracing; the BPF programs run inside its
#    syscalls, so their cost lands there) + (the tracer process's CPU) / (traced I/Os).
#
# bpftrace and bcc attach through tracefs: if it is not mounted, it is mounted for the run and
# unmounted after. Needs root.
# Usage: bench/watch-overhead.sh [DIR] [SECONDS] [ROUNDS]
# Absolute figures drift on shared machines; compare the ratios of one run.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-bench-tmp}
SECS=${2:-4}
ROUNDS=${3:-3}
cargo build --release --quiet
BIN=$PWD/target/release/iolens
FLOOR=""
if command -v clang > /dev/null && [ -f /usr/include/bpf/libbpf.h ]; then
  FLOOR=$(mktemp -d "${TMPDIR:-/tmp}/iolens-floor.XXXXXX")
  clang -O2 -g -target bpf -D__TARGET_ARCH_x86 -Ibpf -c bench/floor/floor.bpf.c -o "$FLOOR/floor.bpf.o"
  gcc -O2 bench/floor/load.c -o "$FLOOR/load" -lbpf
fi
mkdir -p "$DIR"
FILE="$DIR/iolens-watch-bench.dat"
[ -f "$FILE" ] || head -c 256M /dev/urandom > "$FILE"

MOUNTED=""
if ! mountpoint -q /sys/kernel/tracing 2>/dev/null; then
  if mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null; then MOUNTED=1; fi
fi
cleanup() {
  if [ -n "$MOUNTED" ]; then umount /sys/kernel/tracing || true; fi
  if [ -n "$FLOOR" ]; then rm -rf "$FLOOR"; fi
}
trap cleanup EXIT

python3 - "$BIN" "$FILE" "$SECS" "$ROUNDS" "$FLOOR" <<'PY'
import json, os, shutil, signal, statistics, subprocess, sys, tempfile, time
bin_, file, secs, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
floor = sys.argv[5]
tmp = tempfile.mkdtemp()
tick = os.sysconf("SC_CLK_TCK")

def cpu_s(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / tick

def run(name):
    out = os.path.join(tmp, name + ".json")
    subprocess.run([bin_, "run", "--target", file, "--buffered", "--bs", "8k",
                    "--duration", f"{secs}s", "--verify", "none", "--no-progress", "-q",
                    "--json", out], check=True)
    r = json.load(open(out))["runs"][0]
    n = sum(o["count"] for o in r["ops"])
    return n / r["duration_s"], r["cpu"]["us_per_io"], n

def wait_for(proc, text, limit=30):
    t = time.time()
    buf = b""
    while text not in buf:
        if time.time() - t > limit or proc.poll() is not None:
            raise RuntimeError(f"tracer did not start: {buf.decode(errors='replace')}")
        c = os.read(proc.stderr.fileno(), 4096)
        buf += c
        if not c:
            time.sleep(0.05)

BPFTRACE = ("tracepoint:raw_syscalls:sys_enter /args->id == 17/ { @s[tid] = nsecs; } "
            "tracepoint:raw_syscalls:sys_exit /@s[tid]/ "
            "{ @us[comm] = hist((nsecs - @s[tid]) / 1000); delete(@s[tid]); } "
            "BEGIN { printf(\"attached\\n\"); }")

def tracer(mode):
    if mode == "iolens watch":
        p = subprocess.Popen([bin_, "watch", "--no-progress", "--json",
                              os.path.join(tmp, "w.json")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_for(p, b"tracepoints attached")
        return p
    if mode == "floor":
        p = subprocess.Popen([os.path.join(floor, "load"), os.path.join(floor, "floor.bpf.o")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_for(p, b"attached")
        return p
    if mode == "bpftrace":
        p = subprocess.Popen(["bpftrace", "-e", BPFTRACE], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
        p.stderr = p.stdout
        wait_for(p, b"attached")
        return p
    if mode == "bcc biolatency":
        p = subprocess.Popen(["biolatency-bpfcc"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
        p.stderr = p.stdout
        wait_for(p, b"Tracing block device I/O")
        return p
    return None

def stop(p):
    if p is None:
        return
    p.send_signal(signal.SIGINT)
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()

modes = ["none", "iolens watch"]
if floor:
    modes.append("floor")
else:
    print("floor: not run (needs clang and libbpf-dev)")
if shutil.which("bpftrace") and os.path.exists("/sys/kernel/tracing/events"):
    modes.append("bpftrace")
else:
    print("bpftrace: not run (not installed, or tracefs cannot be mounted)")
if shutil.which("biolatency-bpfcc"):
    try:
        stop(tracer("bcc biolatency"))
        modes.append("bcc biolatency")
    except Exception as e:
        print("bcc biolatency: not run: it fails to start here "
              f"({str(e).strip().splitlines()[-1][:120]})")
else:
    print("bcc biolatency: not run (bpfcc-tools not installed)")

run("warm")  # bring the file into the page cache
res = {m: [] for m in modes}
for r in range(rounds):
    for m in modes:
        p = tracer(m)
        c0 = cpu_s(p.pid) if p else 0.0
        iops, us, n = run(f"{m}-{r}".replace(" ", "_"))
        c1 = cpu_s(p.pid) if p else 0.0
        stop(p)
        res[m].append((iops, us, (c1 - c0) * 1e6 / n if n else 0.0))

base_iops = statistics.median(x[0] for x in res["none"])
base_us = statistics.median(x[1] for x in res["none"])
print(f"cached 8 KiB pread64, 1 session, {secs}s x {rounds} rounds, medians "
      f"({os.cpu_count()} CPUs)")
print(f"{'mode':16} {'IOPS':>10} {'ratio':>7} {'run µs/IO':>10} {'tracer µs/IO':>13} "
      f"{'added µs/IO':>12}")
for m in modes:
    iops = statistics.median(x[0] for x in res[m])
    us = statistics.median(x[1] for x in res[m])
    tr = statistics.median(x[2] for x in res[m])
    added = (us - base_us) + tr if m != "none" else 0.0
    print(f"{m:16} {iops:10.0f} {iops / base_iops:7.3f} {us:10.2f} {tr:13.2f} {added:12.2f}")
w = json.load(open(os.path.join(tmp, "w.json")))
# The budget is `watch` (older builds wrote it under `extra`).
lost = (w.get("watch") or w.get("extra", {}).get("watch", {})).get("lost", {})
print("iolens watch lost events:", lost if lost else "none")
PY
