#!/usr/bin/env bash
# Write the real pg_stat_io / pg_stat_database / pg_stat_statements snapshots of
# tests/fixtures/real/pg*_stat_*.{txt,csv} (see tests/fixtures/README.md) from the throwaway test
# servers: PostgreSQL 15 (scripts/pg-test-server.sh) and 18 (scripts/pg18-test-server.sh).
# It turns on track_io_timing, track_wal_io_timing and pg_stat_statements on those clusters
# (restarting them), makes a table larger than shared_buffers, reads it between snapshots,
# and resets pg_stat_io once between two snapshots (the reset the reader must handle).
#   eval "$(scripts/pg-test-server.sh)"; eval "$(scripts/pg18-test-server.sh)"
#   scripts/pg-stats-fixtures.sh OUTDIR
set -euo pipefail
OUT="${1:?output directory}"
mkdir -p "$OUT"
: "${IOLENS_PG_DSN:?run scripts/pg-test-server.sh first}" "${IOLENS_PG18_DSN:?run scripts/pg18-test-server.sh first}"
export LC_ALL=C TZ=UTC PGTZ=UTC
PSQL="$(ls -d /usr/lib/postgresql/*/bin/psql | sort -V | tail -1)"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"

restart() { # dsn pg_ctl datadir
    "$PSQL" "$1" -qXc "ALTER SYSTEM SET track_io_timing = on" \
        -c "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'" >/dev/null
    "$PSQL" "$1" -qXc "ALTER SYSTEM SET track_wal_io_timing = on" >/dev/null 2>&1 || true
    runuser -u postgres -- "$2" -D "$3" -m fast -w restart >/dev/null
    "$PSQL" "$1" -qXc "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" \
        -c "DROP TABLE IF EXISTS g_big" \
        -c "CREATE TABLE g_big AS SELECT i, repeat('x', 600) AS pad FROM generate_series(1, 60000) i" \
        -c "CHECKPOINT" >/dev/null
}
load() { "$PSQL" "$1" -qXc "SELECT count(*) FROM g_big WHERE pad <> ''" -c "UPDATE g_big SET i = i + 1 WHERE i % 50 = 0" >/dev/null; }

PG18BIN="$(ls -d "$ROOT"/target/pg18/*/package/native/bin | tail -1)"
restart "$IOLENS_PG18_DSN" "$PG18BIN/pg_ctl" "$ROOT/target/pg18/worker/data"
restart "$IOLENS_PG_DSN" /usr/lib/postgresql/15/bin/pg_ctl "$ROOT/target/pgtest/data"

# 1. pg_stat_io of PostgreSQL 18 under psql's \watch (aligned), reset between snapshots 2 and 3.
Q18="SELECT * FROM pg_stat_io WHERE backend_type IN ('client backend', 'checkpointer', 'io worker') ORDER BY 1, 2, 3"
{
    for k in 1 2 3 4; do
        echo "$Q18 \\watch 1" | "$PSQL" "$IOLENS_PG18_DSN" -X &
        sleep 1.5; kill -INT $! 2>/dev/null || true; wait $! 2>/dev/null || true
        load "$IOLENS_PG18_DSN"
        [ $k = 2 ] && "$PSQL" "$IOLENS_PG18_DSN" -qXc "SELECT pg_stat_reset_shared('io')" >/dev/null
    done
} >"$OUT/pg18_stat_io_watch.txt" 2>/dev/null
# 2. The same view as CSV with a time column, snapshots appended (psql --csv repeats the header).
for k in 1 2 3; do
    "$PSQL" "$IOLENS_PG18_DSN" -X --csv -c "SELECT now() AS ts, * FROM pg_stat_io ORDER BY 2, 3, 4"
    load "$IOLENS_PG18_DSN"
done >"$OUT/pg18_stat_io.csv"
# 3. pg_stat_database of PostgreSQL 15, unaligned (psql -A) with a time column.
for k in 1 2 3; do
    "$PSQL" "$IOLENS_PG_DSN" -X -A -c "SELECT now() AS ts, datname, blks_read, blks_hit, blk_read_time, blk_write_time, stats_reset FROM pg_stat_database ORDER BY datname"
    load "$IOLENS_PG_DSN"
done >"$OUT/pg15_stat_database_unaligned.txt"
# 4. pg_stat_statements: 15 (blk_read_time) and 18 (shared_blk_read_time), CSV.
for v in 15 18; do
    dsn="$IOLENS_PG_DSN"; [ $v = 18 ] && dsn="$IOLENS_PG18_DSN"
    "$PSQL" "$dsn" -qXc "SELECT pg_stat_statements_reset()" >/dev/null
    for k in 1 2 3; do
        "$PSQL" "$dsn" -X --csv -c "SELECT now() AS ts, * FROM pg_stat_statements WHERE query LIKE '%g_big%' AND query NOT LIKE '%pg_stat_statements%' ORDER BY queryid"
        load "$dsn"
    done >"$OUT/pg${v}_stat_statements.csv"
done
ls -l "$OUT"
