# shellcheck shell=bash
# The shared start of the bench scripts that run against a PostgreSQL server given as HOST PORT
# (watch-bpf-cost.sh, watch-bpf-parts.sh, watch-cost-per-tx.sh): sourced from the checkout's
# root, after `set -euo pipefail`. Not a script of its own.
#   pg_server_args USAGE "NAME=DEFAULT ..." "$@"
#                              HOST and PORT from the first two arguments (one missing: USAGE on
#                              standard error, exit 1), then each NAME from the next argument, or
#                              DEFAULT where that is missing or empty
#   need_root WHY              exit 2 with "needs root (WHY)" unless run as root
#   need_cmd CMD WHERE         exit 2 with "CMD not found WHERE" unless CMD is on the PATH
#   as_pg CMD...               CMD run as the postgres user
#   pg_sql DB ARGS...          psql on database DB of the server, as postgres
#   bpf_stats_keep             remember kernel.bpf_stats_enabled (the counters of every BPF
#                              program's runs, set for a measurement) ...
#   bpf_stats_back             ... and set it back to what it was
#   pgbench_db SCALE           a fresh database iolens_bench (`pgbench -i -s SCALE`), dropped at
#                              exit, where kernel.bpf_stats_enabled is also set back

pg_server_args() {
  local usage=$1 names=$2 kv
  shift 2
  if [ $# -lt 2 ] || [ -z "$1" ] || [ -z "$2" ]; then
    echo "$usage" >&2
    exit 1
  fi
  HOST=$1
  PORT=$2
  shift 2
  for kv in $names; do
    printf -v "${kv%%=*}" '%s' "${1:-${kv#*=}}"
    [ $# -eq 0 ] || shift
  done
}

need_root() {
  [ "$(id -u)" -eq 0 ] || { echo "needs root ($1)" >&2; exit 2; }
}

need_cmd() {
  command -v "$1" > /dev/null || { echo "$1 not found${2:+ $2}" >&2; exit 2; }
}

as_pg() { runuser -u postgres -- "$@"; }

pg_sql() {
  local db=$1
  shift
  as_pg psql -h "$HOST" -p "$PORT" -d "$db" "$@"
}

bpf_stats_keep() { BPF_STATS_WAS=$(cat /proc/sys/kernel/bpf_stats_enabled); }

bpf_stats_back() { echo "$BPF_STATS_WAS" > /proc/sys/kernel/bpf_stats_enabled; }

drop_bench_db() {
  pg_sql postgres -qc 'DROP DATABASE IF EXISTS iolens_bench WITH (FORCE)' > /dev/null
}

pgbench_db() {
  drop_bench_db
  as_pg createdb -h "$HOST" -p "$PORT" iolens_bench
  bpf_stats_keep
  trap 'bpf_stats_back; drop_bench_db' EXIT
  as_pg pgbench -h "$HOST" -p "$PORT" -i -q -s "$1" iolens_bench > /dev/null 2>&1
}
