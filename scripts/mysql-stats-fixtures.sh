#!/usr/bin/env bash
# Write the real MySQL/MariaDB file-I/O snapshots of tests/fixtures/real/mariadb_*.txt (see
# tests/fixtures/README.md) from a throwaway MariaDB server (Debian's mariadb-server) started
# here with performance_schema on, its data in target/mytest (created, then deleted at the end).
# Between snapshots it reads a table larger than the buffer pool, writes to it, and restarts
# the server once (performance_schema's counters start again from zero: the reader must say so).
#   apt-get install mariadb-server mariadb-client
#   scripts/mysql-stats-fixtures.sh OUTDIR
# Outputs (each several snapshots appended, as a DBA's loop would write them):
#   mariadb_file_summary_by_instance.tsv  `mariadb -B` (tab-separated) of
#       SELECT NOW(6) AS ts, f.* FROM performance_schema.file_summary_by_instance f …
#   mariadb_io_global_by_file_by_latency.txt  `mariadb -t` (boxed) of
#       SELECT NOW(6) AS ts, s.* FROM sys.io_global_by_file_by_latency s … (formatted times)
#   mariadb_x_io_global_by_file_by_latency.txt  `mariadb -t` of sys.x$io_global_by_file_by_latency
#       (picoseconds), no time column: one boxed table per snapshot
set -euo pipefail
OUT="${1:?output directory}"
mkdir -p "$OUT"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
D="$ROOT/target/mytest"
rm -rf "$D"
mkdir -p "$D"
export LC_ALL=C TZ=UTC
SOCK="$D/sock"
start() {
    /usr/sbin/mariadbd --no-defaults --user=root --datadir="$D/data" --socket="$SOCK" \
        --skip-networking --pid-file="$D/pid" --performance-schema=ON \
        --innodb-buffer-pool-size=8M --innodb-flush-method=O_DIRECT \
        --innodb-log-file-size=16M >"$D/log" 2>&1 &
    for _ in $(seq 100); do
        [ -S "$SOCK" ] && mariadb --no-defaults -S "$SOCK" -u root -e 'SELECT 1' >/dev/null 2>&1 && return
        sleep 0.2
    done
    cat "$D/log"; exit 1
}
stop() { mariadb-admin --no-defaults -S "$SOCK" -u root shutdown; wait; }
trap 'mariadb-admin --no-defaults -S "$SOCK" -u root shutdown 2>/dev/null || true; rm -rf "$D"' EXIT
mariadb-install-db --no-defaults --user=root --datadir="$D/data" --auth-root-authentication-method=normal >/dev/null
start
M() { mariadb --no-defaults -S "$SOCK" -u root "$@"; }
M -e "CREATE DATABASE g; CREATE TABLE g.big (i INT PRIMARY KEY, pad VARCHAR(600)) ENGINE=InnoDB;
      INSERT INTO g.big SELECT seq, REPEAT('x', 600) FROM g.seq_1_to_60000;"
# innodb files and the big table only (the rest is the server's own small files)
W="WHERE EVENT_NAME LIKE 'wait/io/file/innodb/%' ORDER BY FILE_NAME"
WS="WHERE file LIKE '%ib%' OR file LIKE '%big%' ORDER BY file"
load() { M -e "SELECT count(*) FROM g.big WHERE pad <> ''; UPDATE g.big SET i = i + 100000 WHERE i % 50 = 0;" >/dev/null; }
snap() {
    M -B -e "SELECT NOW(6) AS ts, f.* FROM performance_schema.file_summary_by_instance f $W" \
        >>"$OUT/mariadb_file_summary_by_instance.tsv"
    M -t -e "SELECT NOW(6) AS ts, s.* FROM sys.io_global_by_file_by_latency s $WS" \
        >>"$OUT/mariadb_io_global_by_file_by_latency.txt"
    M -t -e "SELECT * FROM sys.x\$io_global_by_file_by_latency $WS" \
        >>"$OUT/mariadb_x_io_global_by_file_by_latency.txt"
}
rm -f "$OUT"/mariadb_*
snap; load; sleep 1; snap; load; sleep 1; snap
stop; start   # a restart: counters start again
load; sleep 1; snap; load; sleep 1; snap
