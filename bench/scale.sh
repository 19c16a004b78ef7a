#!/usr/bin/env bash
# Scale at SLOB-sized session counts (issue 15, the session rows), in one run, each figure
# beside its reference:
#   1. `iolens run --sessions 480 --verify none` on the scratch file: peak RSS in all and per
#      session (against 1 session), and the measured duration against --duration;
#   2. 128 and 480 sessions of 8 KiB random O_DIRECT reads, sync engine, beside
#      `fio --thread --numjobs=N --ioengine=psync`: IOPS and CPU per I/O, as ratios, with iolens
#      on huge-page buffers (its default) and on small pages; FIO_HUGE=1 adds fio on huge pages;
#   3. `iolens db run --engine sqlite --sessions 160`: peak RSS per session, duration honoured;
#   6. the tool's own CPU per I/O on the null engine beside fio's null engine, and 480 null
#      sessions (threads that never block): duration honoured, peak RSS.
# Usage: [ROUNDS=N] [FIO_HUGE=1] bench/scale.sh [--big] [DIR]   (DIR holds the scratch file and
#        database; default ./bench-tmp). Default: 3 s per run, ROUNDS=2 mirrored rounds of row 2,
#        about four minutes on a 2-core VM; --big: 10 s runs on a larger file and database.
# CPU per I/O is the child's rusage (user+sys) over the I/Os it completed, for both tools; peak
# memory is the child's maximum resident set (rusage). Absolute figures drift on shared
# machines; compare the ratios of one run.
set -euo pipefail
cd "$(dirname "$0")/.."
BIG=0
if [ "${1:-}" = "--big" ]; then BIG=1; shift; fi
DIR=${1:-bench-tmp}
if [ "$BIG" = 1 ]; then SECS=10 SIZE=4G SCALE=256M; else SECS=3 SIZE=1G SCALE=32M; fi
if ! command -v fio >/dev/null; then
  echo "installing fio..." >&2
  (apt-get install -y fio >/dev/null 2>&1 || (apt-get update >/dev/null && apt-get install -y fio >/dev/null))
fi
cargo build --release --quiet
mkdir -p "$DIR"
FILE="$DIR/iolens-scale-$SIZE.dat"
DB="$DIR/iolens-scale-db-$SCALE"
IOLENS=./target/release/iolens
# Create (or reuse) the iolens scratch file (fio reads its data area) and the SLOB database.
$IOLENS run --target "$FILE" --size "$SIZE" --ios 1 --no-progress >/dev/null
$IOLENS db setup --engine sqlite --dir "$DB" --scale "$SCALE" -q
python3 - "$FILE" "$DB" "$SECS" <<'PY'
import json, os, sys, tempfile
sys.path.insert(0, "bench")
from rusage import child
file, db, secs = sys.argv[1], sys.argv[2], int(sys.argv[3])
size = os.path.getsize(file) - (1 << 20)
iolens = "./target/release/iolens"
tmp = tempfile.mkdtemp()

def fio(engine_args, jobs, thread=True):
    out = os.path.join(tmp, "fio.json")
    cmd = ["fio", "--name=scale", "--filename=" + file, "--offset=1M", f"--size={size}",
           "--rw=randread", "--bs=8k", "--time_based", f"--runtime={secs}",
           f"--numjobs={jobs}", "--group_reporting", "--randrepeat=0", "--norandommap",
           "--output-format=json", "--output=" + out] + (["--thread"] if thread else []) + engine_args
    cpu, rss = child(cmd)
    j = json.load(open(out))["jobs"][0]["read"]
    ios, rt = j["total_ios"], j["runtime"] / 1000.0
    return {"iops": ios / rt, "cpu_us_io": cpu * 1e6 / ios, "rss_kb": rss, "dur": rt}

def iol(args, sessions, sub=("run",)):
    out = os.path.join(tmp, "iolens.json")
    cmd = [iolens, *sub, "--sessions", str(sessions), "--duration", f"{secs}s", "--json", out,
           "-q"] + args
    cpu, rss = child(cmd)
    r = json.load(open(out))["runs"][0]
    ios, rt = sum(o["count"] for o in r["ops"]), r["duration_s"]
    return {"iops": ios / rt, "cpu_us_io": cpu * 1e6 / ios, "rss_kb": rss, "dur": rt,
            "interval": r["interval_s"]}

def reserve_huge(pages):
    """Set the hugetlb pool to `pages` 2 MiB pages; returns the size it had."""
    path = "/proc/sys/vm/nr_hugepages"
    before = int(open(path).read())
    with open(path, "w") as f:
        f.write(str(pages))
    return before

def mb(kb):
    return f"{kb / 1024:.1f} MB"

def memory_row(title, one, many, n):
    per = (many["rss_kb"] - one["rss_kb"]) / (n - 1)
    print(f"{title}: peak RSS {mb(many['rss_kb'])} at {n} sessions ({mb(one['rss_kb'])} at 1): "
          f"{per:.0f} KB per session")
    print(f"{'':4}vs target: {many['rss_kb'] / (128 * 1024):.2f}× of 128 MB in all, "
          f"{per / 200:.2f}× of 200 KB per session (want ≤ 1)")

def duration_row(title, m):
    off = m["dur"] - secs
    print(f"{title}: measured {m['dur']:.3f} s for --duration {secs}s "
          f"({off:+.3f} s, {abs(off) / m['interval']:.2f} interval; want ≤ 1)")

run_args = ["--target", file, "--pattern", "randread", "--bs", "8k", "--verify", "none"]

print("== 1. 480 sessions, sync engine, O_DIRECT 8 KiB random reads: memory and duration")
one = iol(run_args, 1)
many = iol(run_args, 480)
memory_row("iolens run", one, many, 480)
duration_row("iolens run --sessions 480", many)

print("== 2. 8 KiB random O_DIRECT reads, sync engine vs fio --thread --ioengine=psync")
# iolens keeps every session's buffers in one pool on transparent huge pages (as a database's
# buffer cache on huge pages; `--huge-pages off` keeps them on small pages); fio's buffers are
# per-job heap memory. With FIO_HUGE=1 (root) fio also runs on huge pages: --iomem=shmhuge,
# which needs processes (it fails with --thread) and hugetlb pages, reserved for the run and
# given back after it.
fio_huge = os.environ.get("FIO_HUGE") == "1"
rounds = int(os.environ.get("ROUNDS", "2"))
variants = {
    "fio": lambda n: fio(["--direct=1", "--ioengine=psync"], n),
    "iolens": lambda n: iol(run_args + ["--engine", "sync"], n),
    "iolens-small": lambda n: iol(run_args + ["--engine", "sync", "--huge-pages", "off"], n),
}
if fio_huge:
    variants["fio-huge"] = lambda n: fio(["--direct=1", "--ioengine=psync", "--iomem=shmhuge"],
                                         n, thread=False)
print(f"{'sessions':>8} {'tool':13} {'IOPS':>10} {'CPU µs/IO':>10} {'peak RSS':>10}")
for n in (128, 480):
    reserved = reserve_huge(3 * n + 16) if fio_huge else None
    # Mirrored order (a, b, c, c, b, a), ROUNDS times, so drift does not favour any tool.
    order = (list(variants) + list(reversed(variants))) * rounds
    runs = {t: [] for t in variants}
    try:
        for tool in order:
            runs[tool].append(variants[tool](n))
    finally:
        if reserved is not None:
            reserve_huge(reserved)
    mean = {t: {k: sum(r[k] for r in v) / len(v) for k in ("iops", "cpu_us_io", "rss_kb")}
            for t, v in runs.items()}
    for t in variants:
        m = mean[t]
        print(f"{n:>8} {t:13} {m['iops']:>10.0f} {m['cpu_us_io']:>10.2f} {mb(m['rss_kb']):>10}")
    f = mean["fio"]
    for t, ref in (("iolens", "fio"), ("iolens-small", "fio"), ("iolens", "fio-huge")):
        if ref not in mean:
            continue
        i, f = mean[t], mean[ref]
        print(f"{'':>8} {'ratio':13} {i['iops'] / f['iops']:>10.3f} "
              f"{i['cpu_us_io'] / f['cpu_us_io']:>10.3f} {i['rss_kb'] / f['rss_kb']:>10.2f}"
              f"   ({t}/{ref}; want IOPS ≥ 1, CPU/IO ≤ 1)")

print("== 3. iolens db run --engine sqlite --sessions 160")
db_args = ["--engine", "sqlite", "--dir", db]
one = iol(db_args, 1, ("db", "run"))
many = iol(db_args, 160, ("db", "run"))
per = (many["rss_kb"] - one["rss_kb"]) / 159
print(f"sqlite: peak RSS {mb(many['rss_kb'])} at 160 sessions ({mb(one['rss_kb'])} at 1): "
      f"{per:.0f} KB per session (of which 512 KB is each session's SQLite page cache, "
      "--cache-size)")
duration_row("iolens db run --sessions 160", many)

print("== 6. the tool's own cost per I/O: null engine")
f = fio(["--ioengine=null"], 1)
i = iol(["--target", file, "--engine", "null"], 1)
print(f"null engine, 1 session: iolens {i['cpu_us_io']:.3f} µs CPU per I/O, fio "
      f"{f['cpu_us_io']:.3f} µs: {i['cpu_us_io'] / f['cpu_us_io']:.2f}× fio, "
      f"{i['cpu_us_io'] / 0.1:.2f}× the 0.100 µs target (want ≤ 1)")
one = i
many = iol(["--target", file, "--engine", "null"], 480)
print(f"null engine, 480 sessions: {many['cpu_us_io']:.3f} µs CPU per I/O")
memory_row("null engine", one, many, 480)
duration_row("null engine --sessions 480", many)
PY
