#!/usr/bin/env bash
# iolens vs fio, side by side on the same file and workloads, in one run; prints ratios.
# Usage: bench/vs-fio.sh [DIR] [SECONDS]   (DIR holds the scratch file; default ./bench-tmp)
# CPU per I/O is measured the same way for both tools: the child's rusage (user+sys) divided
# by the I/Os it completed. Absolute figures drift on shared machines; ratios from one run hold.
# Figures are the mean of two runs per tool, in mirrored order.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-bench-tmp}
SECS=${2:-10}
if ! command -v fio >/dev/null; then
  echo "installing fio..." >&2
  (apt-get install -y fio >/dev/null 2>&1 || (apt-get update >/dev/null && apt-get install -y fio >/dev/null))
fi
cargo build --release --quiet
mkdir -p "$DIR"
FILE="$DIR/iolens-bench.dat"
SIZE=${IOLENS_BENCH_SIZE:-2G}
# Create (or reuse) the iolens scratch file; fio reads the same file's data area.
./target/release/iolens run --target "$FILE" --size "$SIZE" --ios 1 --no-progress >/dev/null
python3 - "$FILE" "$SECS" <<'PY'
import json, os, subprocess, sys, tempfile
sys.path.insert(0, "bench")
from rusage import child
file, secs = sys.argv[1], int(sys.argv[2])
size = os.path.getsize(file) - (1 << 20)
iolens = "./target/release/iolens"
tmp = tempfile.mkdtemp()

def run_with_rusage(cmd):
    return child(cmd)[0]

def fio(name, args):
    out = os.path.join(tmp, name + ".json")
    cmd = ["fio", "--name=" + name, "--filename=" + file, "--offset=1M", f"--size={size}",
           "--rw=randread", "--bs=8k", "--time_based", f"--runtime={secs}", "--group_reporting",
           "--lat_percentiles=1", "--randrepeat=0", "--norandommap", "--output-format=json",
           "--output=" + out] + args
    cpu = run_with_rusage(cmd)
    j = json.load(open(out))["jobs"][0]["read"]
    ios = j["total_ios"]
    rt = j["runtime"] / 1000.0
    p99 = j["lat_ns"]["percentile"]["99.000000"]
    return {"iops": ios / rt, "p99_us": p99 / 1e3, "cpu_us_io": cpu * 1e6 / ios}

def iol(name, args):
    out = os.path.join(tmp, name + "-iolens.json")
    cmd = [iolens, "run", "--target", file, "--pattern", "randread", "--bs", "8k",
           "--duration", f"{secs}s", "--no-progress", "--json", out,
           "--verify", "none"] + args  # fio does not look at the data either
    cpu = run_with_rusage(cmd)
    r = json.load(open(out))["runs"][0]
    ios = sum(o["count"] for o in r["ops"])
    rt = r["duration_s"]
    p99 = r["ops"][0]["summary"]["p99_ns"]
    return {"iops": ios / rt, "p99_us": p99 / 1e3, "cpu_us_io": cpu * 1e6 / ios}

def warm():
    subprocess.run(["dd", f"if={file}", "of=/dev/null", "bs=4M", "status=none"], check=True)

cases = [
    ("8k randread sync O_DIRECT 4 sessions", ["--direct=1", "--ioengine=psync", "--numjobs=4"],
     ["--engine", "sync", "--sessions", "4"], None, "iops>=1.0, p99 within 10%"),
    ("8k randread io_uring QD32 O_DIRECT", ["--direct=1", "--ioengine=io_uring", "--iodepth=32"],
     ["--engine", "uring", "--qd", "32"], None, "iops>=1.0"),
    ("8k randread buffered, cached, 2 sessions",
     ["--direct=0", "--ioengine=psync", "--numjobs=2", "--invalidate=0", "--fadvise_hint=0"],
     ["--buffered", "--sessions", "2"], warm, "iops>=1.0, cpu/io<=1.0"),
    ("null engine (tool overhead)", ["--ioengine=null"], ["--engine", "null"], None,
     "iolens cpu/io <= 0.100 us"),
]
print(f"{'workload':42} {'tool':7} {'IOPS':>10} {'p99 µs':>9} {'CPU µs/IO':>10}")
def mean(a, b):
    return {k: (a[k] + b[k]) / 2 for k in a}

# Each pair runs twice in mirrored order (fio, iolens, iolens, fio) so that drift in the
# machine or the device's caches does not favour whichever tool runs first.
for title, fargs, iargs, prep, target in cases:
    runs = {}
    for tool in ("fio", "iolens", "iolens", "fio"):
        if prep: prep()
        m = fio("bench", fargs) if tool == "fio" else iol("bench", iargs)
        runs.setdefault(tool, []).append(m)
    f = mean(*runs["fio"])
    i = mean(*runs["iolens"])
    for tool, m in (("fio", f), ("iolens", i)):
        print(f"{title:42} {tool:7} {m['iops']:>10.0f} {m['p99_us']:>9.1f} {m['cpu_us_io']:>10.3f}")
    print(f"{'':42} {'ratio':7} {i['iops']/f['iops']:>10.3f} {i['p99_us']/f['p99_us']:>9.3f} "
          f"{i['cpu_us_io']/f['cpu_us_io']:>10.3f}   (iolens/fio; want {target})")
PY
