#!/usr/bin/env bash
# Where a run of the watch's scheduler programs goes, by ablation: builds of bpf/watch.bpf.c
# with one step each left out (the PostgreSQL wait-event read from the process's memory, the
# parts' accounting `observe`, the per-CPU batch record `emit_cpu`; "filter" stops after both
# sides' verdicts), loaded side by side with the full program by a small libbpf loader
# (bench/watch-bpf-parts/loader.c; its filter and PostgreSQL pointers filled as `iolens watch
# --comm postgres` fills them) while pgbench runs, each program's ns a run from the kernel's
# counters (kernel.bpf_stats_enabled, set for the measurement, then set back). A step's cost is
# the full build's ns a run minus the build without it.
#
# Every build attached to a tracepoint pays for what the ones before it left warm in the
# caches (the backend's memory, the clock) only once: the first build is a warm-up, not
# reported, and a second round runs the builds in the reverse order; the figure is the mean of
# the two positions. BASE=<git ref>: that commit's bpf/watch.bpf.c as one more build ("base").
#
# Needs root, clang, gcc, libbpf-dev, pgbench, a running PostgreSQL. Usage:
#   bench/watch-bpf-parts.sh HOST PORT [SECONDS] [CLIENTS] [SCALE]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/pg-server.sh
pg_server_args "usage: bench/watch-bpf-parts.sh HOST PORT [SECONDS] [CLIENTS] [SCALE]" \
  "SECS=12 CLIENTS=4 SCALE=10" "$@"
need_root BPF
TMP=$(mktemp -d)
bpf_stats_keep
cleanup() {
  bpf_stats_back
  pg_sql postgres -qc 'DROP DATABASE IF EXISTS iolens_parts WITH (FORCE)' > /dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
PGBIN=$(pg_sql postgres -qAtc "SELECT setting FROM pg_config WHERE name = 'BINDIR'")/postgres
MAJOR=$(pg_sql postgres -qAtc 'SHOW server_version_num')
MAJOR=$((MAJOR / 10000))
sym() { nm -D "$PGBIN" | awk -v s="$1" '$3 == s { print $1 }'; }
WAIT=$(sym my_wait_event_info)
STATUS=$(sym MyBEEntry)
STATE_OFF=$(grep -oE "^ *\($MAJOR, [0-9]+" src/watch/pg_backend_state.rs | grep -oE '[0-9]+$')
[ -n "$WAIT" ] && [ -n "$STATUS" ] && [ -n "$STATE_OFF" ] || { echo "no symbols or state offset for $PGBIN ($MAJOR)" >&2; exit 2; }

gcc -O2 -Wall bench/watch-bpf-parts/loader.c -o "$TMP/loader" -lbpf
python3 - "$TMP" bpf/watch.bpf.c << 'PY'
import sys
tmp, src = sys.argv[1], open(sys.argv[2]).read()
def cut(s, anchor, add):
    # Insert `add` right after `anchor` (which must be there once): an early return.
    assert s.count(anchor) == 1, anchor
    return s.replace(anchor, anchor + add)
s = cut(src, "thread_wait_event(struct task_state *st, __u32 tgid, __u32 *held)\n{\n\t*held = 0;\n",
        "#ifdef NO_WAIT_READ\n\treturn 0;\n#endif\n")
s = cut(s, "__u64 b, __u64 now, __u32 wev)\n{\n", "#ifdef NO_EMIT\n\treturn;\n#endif\n")
s = cut(s, "__u32 next_wev, __u32 held)\n{\n", "#ifdef NO_OBSERVE\n\treturn;\n#endif\n")
s = cut(s, "int next_watched = task_watched(next, &next_tgid, &next_tid, btf);\n",
        "#ifdef FILTER_ONLY\n\tif (prev_watched || next_watched)\n\t\tparts_sink = 1;\n\treturn;\n#endif\n")
s = s.replace('#include "common.h"\n', '#include "common.h"\nvolatile __u32 parts_sink;\n', 1)
open(tmp + "/parts.bpf.c", "w").write(s)
PY
build() { clang -O2 -g -target bpf -D__TARGET_ARCH_x86 -Ibpf "$@"; }
build -c "$TMP/parts.bpf.c" -o "$TMP/warm.o"
build -c "$TMP/parts.bpf.c" -o "$TMP/full.o"
build -DNO_WAIT_READ -c "$TMP/parts.bpf.c" -o "$TMP/no-wait-read.o"
build -DNO_OBSERVE -c "$TMP/parts.bpf.c" -o "$TMP/no-observe.o"
build -DNO_EMIT -c "$TMP/parts.bpf.c" -o "$TMP/no-emit.o"
build -DFILTER_ONLY -c "$TMP/parts.bpf.c" -o "$TMP/filter.o"
BUILDS="full no-wait-read no-observe no-emit filter"
if [ -n "${BASE:-}" ]; then
  git show "$BASE:bpf/watch.bpf.c" > "$TMP/base.bpf.c"
  build -c "$TMP/base.bpf.c" -o "$TMP/base.o"
  BUILDS="$BUILDS base"
fi

pg_sql postgres -qc 'DROP DATABASE IF EXISTS iolens_parts WITH (FORCE)' > /dev/null 2>&1
as_pg createdb -h "$HOST" -p "$PORT" iolens_parts
as_pg pgbench -h "$HOST" -p "$PORT" -i -q -s "$SCALE" iolens_parts > /dev/null 2>&1
echo 1 > /proc/sys/kernel/bpf_stats_enabled
: > "$TMP/runs"
for order in forward reverse; do
  objs=""
  for b in $BUILDS; do objs="$objs $TMP/$b.o"; done
  [ "$order" = reverse ] && objs=$(echo "$objs" | tr ' ' '\n' | tac | tr '\n' ' ')
  as_pg pgbench -h "$HOST" -p "$PORT" -c "$CLIENTS" -j 2 -T $((SECS + 3)) iolens_parts > "$TMP/pgbench" 2>&1 &
  sleep 1
  "$TMP/loader" "$SECS" "$PGBIN" "$WAIT" "$STATUS" "$STATE_OFF" "$TMP/warm.o" $objs >> "$TMP/runs"
  wait
  echo "$order: $(grep -oE 'tps = [0-9.]+' "$TMP/pgbench"), load $(cut -d' ' -f1-3 /proc/loadavg)"
done
python3 - "$TMP/runs" << 'PY'
import collections, os, sys
ns, runs = collections.defaultdict(list), {}
for line in open(sys.argv[1]):
    pos, obj, prog, n, per = line.split()
    name = os.path.basename(obj)[:-2]
    if name == "warm":
        continue
    ns[(name, prog)].append(float(per))
    runs[prog] = int(n)
print(f"{'build':<14}{'sched_switch ns/run':>22}{'sched_wakeup ns/run':>22}")
for name in dict.fromkeys(k[0] for k in ns):
    sw, wk = ns[(name, "sched_switch")], ns[(name, "sched_wakeup")]
    print(f"{name:<14}{sum(sw)/len(sw):>22.0f}{sum(wk)/len(wk):>22.0f}")
print(f"runs per round: {runs}")
PY
