#!/usr/bin/env bash
# Soak of `iolens watch --prometheus` (issue 29: runs for days without growing, scrape time
# flat): a watch with a short interval over a load that forks short-lived readers without end
# (each names itself `soakreader`, reads READS 8 KiB blocks of a cached file with pread64 and
# exits; a steady reader beside them keeps the event rate up), scraped every second as
# Prometheus would. Every SAMPLE seconds it records the watch's RSS (VmRSS, and RssAnon: its
# heap, without the 16 MiB ring buffer's mapping, resident once the ring has wrapped), CPU
# seconds (utime + stime) and the last scrape's time and size; at the end the watch is stopped with SIGTERM and
# its results are checked against the load's own counts (reads done = reads counted).
# Usage: bench/watch-soak.sh [DIR] [MINUTES] [INTERVAL] [KEEP] [SAMPLE]
#   (BIN=path/to/iolens to skip the release build; PACE_US=N sleeps N µs between forks, to soak
#   for hours at a lower, steady event rate instead of one CPU's worth of forking; DEVICE=vda
#   watches the block layer of that disk only, so that devices other work makes and removes on a
#   shared machine do not add series while it runs). Needs root.
# Output: DIR/soak.csv (t_s, rss_kib, anon_kib, cpu_s, scrape_ms, scrape_bytes) and a summary.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-bench-tmp}
MINUTES=${2:-120}
INTERVAL=${3:-100ms}
KEEP=${4:-256}
SAMPLE=${5:-10}
READS=${READS:-16}
PACE_US=${PACE_US:-0}
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet
  BIN=$PWD/target/release/iolens
fi
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
FILE="$DIR/soak.dat"
[ -f "$FILE" ] || head -c 64M /dev/urandom > "$FILE"
cat "$FILE" > /dev/null
cat > "$DIR/soakload.c" <<'C'
/* Fork short-lived readers until SIGTERM; print readers and reads done. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
static volatile sig_atomic_t stop;
static void on_term(int s) { (void)s; stop = 1; }
int main(int argc, char **argv) {
  int fd = open(argv[1], O_RDONLY);
  long reads = atol(argv[2]);
  long pace = argc > 3 ? atol(argv[3]) : 0;
  if (fd < 0) { perror("open"); return 2; }
  signal(SIGTERM, on_term);
  unsigned long long readers = 0, done = 0;
  char buf[8192];
  while (!stop) {
    pid_t c = fork();
    if (c == 0) {
      prctl(PR_SET_NAME, "soakreader", 0, 0, 0);
      int ok = 1;
      for (long i = 0; i < reads; i++)
        ok &= pread(fd, buf, sizeof buf, ((readers * 7 + i) % 8192) * 8192) == sizeof buf;
      _exit(ok ? 0 : 1);
    }
    if (c < 0) { perror("fork"); return 2; }
    int st;
    while (waitpid(c, &st, 0) < 0) {}
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) { fprintf(stderr, "reader failed\n"); return 2; }
    readers++;
    done += reads;
    if (pace > 0) usleep(pace);
  }
  printf("%llu %llu\n", readers, done);
  return 0;
}
C
gcc -O2 -o "$DIR/soakload" "$DIR/soakload.c"
PORT=$((20000 + RANDOM % 20000))
"$BIN" -q watch --comm soakreader --wait --no-progress --interval "$INTERVAL" \
  ${DEVICE:+--device "$DEVICE"} \
  --keep-intervals "$KEEP" --prometheus "127.0.0.1:$PORT" --json "$DIR/soak-watch.json" \
  > /dev/null 2> "$DIR/soak-watch.err" &
W=$!
sleep 2
"$DIR/soakload" "$FILE" "$READS" "$PACE_US" > "$DIR/soak-load.out" &
L=$!
cpu_s() { awk '{print ($14 + $15) / 100}' "/proc/$1/stat"; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
anon_kib() { awk '/^RssAnon:/ {print $2}' "/proc/$1/status"; }
echo "t_s,rss_kib,anon_kib,cpu_s,scrape_ms,scrape_bytes" > "$DIR/soak.csv"
T0=$(date +%s)
END=$((T0 + MINUTES * 60))
last=0
while [ "$(date +%s)" -lt "$END" ]; do
  read -r ms bytes < <(curl -s -o /dev/null -w '%{time_total} %{size_download}\n' \
    "http://127.0.0.1:$PORT/metrics" | awk '{print $1 * 1000, $2}')
  now=$(date +%s)
  if [ $((now - last)) -ge "$SAMPLE" ]; then
    echo "$((now - T0)),$(rss_kib $W),$(anon_kib $W),$(cpu_s $W),$ms,$bytes" >> "$DIR/soak.csv"
    last=$now
  fi
  sleep 1
done
kill -TERM $L; wait $L
sleep 1
kill -TERM $W; wait $W || true
python3 - "$DIR" "$MINUTES" <<'PY'
import csv, json, statistics, sys
d, minutes = sys.argv[1], float(sys.argv[2])
rows = list(csv.DictReader(open(f"{d}/soak.csv")))
readers, done = map(int, open(f"{d}/soak-load.out").read().split())
r = json.load(open(f"{d}/soak-watch.json"))
sysrun = next(x for x in r["runs"] if x["name"] == "syscalls")
op = next(o for o in sysrun["ops"] if o["op"] == "pread64")
b = r["watch"]
rss = [int(x["rss_kib"]) for x in rows]
anon = [int(x["anon_kib"]) for x in rows]
cpu = [float(x["cpu_s"]) for x in rows]
ms = [float(x["scrape_ms"]) for x in rows]
t = [int(x["t_s"]) for x in rows]
warm = len(rows) // 6
def third(v, k):
    n = len(v) - warm
    return v[warm + k * n // 3: warm + (k + 1) * n // 3]
print(f"{minutes:.0f} min soak: {readers} readers forked and exited, {done} reads; "
      f"{sysrun['duration_s']:.0f} s watched")
print(f"counted: pread64 {op['count']} (load: {done}; {op['count'] - done:+d}), "
      f"lost {b.get('lost', {})}")
print(f"kept: {len(op['intervals'])} intervals of the op, {len(b['intervals'])} spans, "
      f"{len(b['processes'])} process rows, {len(b['threads'])} thread rows")
print("RSS MiB after warm-up, by thirds (median): " +
      " / ".join(f"{statistics.median(third(rss, k)) / 1024:.1f}" for k in range(3)) +
      f"; min {min(rss[warm:]) / 1024:.1f}, max {max(rss[warm:]) / 1024:.1f}, "
      f"spread {(max(rss[warm:]) - min(rss[warm:])) / min(rss[warm:]) * 100:.1f} %")
print("heap (RssAnon) MiB after warm-up, by thirds (median): " +
      " / ".join(f"{statistics.median(third(anon, k)) / 1024:.1f}" for k in range(3)) +
      f"; min {min(anon[warm:]) / 1024:.1f}, max {max(anon[warm:]) / 1024:.1f}, "
      f"spread {(max(anon[warm:]) - min(anon[warm:])) / min(anon[warm:]) * 100:.1f} %")
print("scrape ms by thirds (median): " +
      " / ".join(f"{statistics.median(third(ms, k)):.2f}" for k in range(3)))
print("watch CPU (share of one CPU) by thirds: " + " / ".join(
    f"{(third(cpu, k)[-1] - third(cpu, k)[0]) / max(1, third(t, k)[-1] - third(t, k)[0]) * 100:.1f} %"
    for k in range(3)))
print(f"events: {done / sysrun['duration_s']:.0f} reads/s, "
      f"{readers / sysrun['duration_s']:.0f} processes/s")
PY
