#!/usr/bin/env bash
# Start (or reuse) a throwaway PostgreSQL cluster for iolens's database tests.
#
#   scripts/pg-test-server.sh          install if missing, start, print the DSN
#   scripts/pg-test-server.sh stop     stop the cluster
#   scripts/pg-test-server.sh destroy  stop it and delete its directory
#
# Installs PostgreSQL from Debian's packages when no initdb is found (needs root), creates a
# cluster in target/pgtest (override with IOLENS_PG_DIR) owned by the `postgres` user when run
# as root, with a small shared_buffers (16MB) so test data is much larger than the cache,
# listening only on a unix socket in that directory. track_io_timing stays at its default (off)
# in postgresql.conf: iolens enables it per session as superuser. A non-superuser role
# `iolens_plain` exists for permission tests, `iolens_pw` (password s3cr:t\x, SCRAM) for
# password-file tests and `iolens_pw_sp` (password `abc SECRET`, SCRAM) for redaction tests.
# With Debian's postgresql-NN-pg-wait-sampling installed, pg_wait_sampling is preloaded and
# created in the test database. The DSN is written to target/pgtest/dsn and printed as
# `export IOLENS_PG_DSN=...`.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BASE="${IOLENS_PG_DIR:-$ROOT/target/pgtest}"
PORT="${IOLENS_PG_PORT:-54329}"
DATA="$BASE/data"
SOCK="$BASE/sock"
DB=iolens_test
# shellcheck source=scripts/pg-cluster-lib.sh
. "$ROOT/scripts/pg-cluster-lib.sh"

find_bin() {
    local d
    d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
    if [ -n "$d" ] && [ -x "$d/initdb" ]; then
        echo "$d"
    elif command -v initdb >/dev/null 2>&1; then
        dirname "$(command -v initdb)"
    fi
}

PGBIN="$(find_bin)"
if [ -z "$PGBIN" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "PostgreSQL is not installed and installing it needs root (apt-get install postgresql)" >&2
        exit 1
    fi
    echo "installing PostgreSQL from Debian's packages..." >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq postgresql >&2
    PGBIN="$(find_bin)"
    [ -n "$PGBIN" ] || { echo "PostgreSQL installed but initdb not found" >&2; exit 1; }
fi

case "${1:-start}" in
stop)
    pg_cluster_stop "$PGBIN" "$BASE"
    echo "stopped" >&2
    exit 0
    ;;
destroy)
    pg_cluster_stop "$PGBIN" "$BASE"
    rm -rf "$BASE"
    echo "destroyed $BASE" >&2
    exit 0
    ;;
start) ;;
*)
    echo "usage: $0 [start|stop|destroy]" >&2
    exit 2
    ;;
esac

pg_cluster_init "$PGBIN" "$BASE" "$PORT" "track_io_timing = off"
# pg_wait_sampling (Debian's postgresql-NN-pg-wait-sampling), when installed, samples every
# backend's wait event in the server (10 ms period): the reference the wait-event tests compare
# with. It must be preloaded; a cluster made before it was installed is restarted once.
WAIT_SAMPLING=0
if [ -f "$PGBIN/../lib/pg_wait_sampling.so" ]; then
    WAIT_SAMPLING=1
    if ! grep -q "^shared_preload_libraries = 'pg_wait_sampling'" "$DATA/postgresql.conf"; then
        echo "shared_preload_libraries = 'pg_wait_sampling'" | as_pg tee -a "$DATA/postgresql.conf" >/dev/null
        if as_pg "$PGBIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
            as_pg "$PGBIN/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null
        fi
    fi
fi
pg_cluster_start "$PGBIN" "$BASE" || exit 1
PSQL=("$PGBIN/psql" -h "$SOCK" -p "$PORT" -U "$SUPER" -v ON_ERROR_STOP=1 -qAt)
pg_create_db "$DB" "${PSQL[@]}"
if [ "$WAIT_SAMPLING" = 1 ]; then
    as_pg "${PSQL[@]}" -d "$DB" -c "CREATE EXTENSION IF NOT EXISTS pg_wait_sampling" >/dev/null
fi
as_pg "${PSQL[@]}" -d postgres -c \
    "DO \$\$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname='iolens_plain') THEN CREATE ROLE iolens_plain LOGIN; END IF; END\$\$" >/dev/null
# A role that must authenticate with a password (SCRAM), for the libpq password-file tests:
# its pg_hba line comes before initdb's trust lines.
as_pg "${PSQL[@]}" -d postgres -c \
    "DO \$\$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname='iolens_pw') THEN CREATE ROLE iolens_pw LOGIN; END IF; END\$\$" >/dev/null
as_pg "${PSQL[@]}" -d postgres -c "SET password_encryption = 'scram-sha-256'; ALTER ROLE iolens_pw PASSWORD 's3cr:t\\x'" >/dev/null
if ! grep -q '^local all iolens_pw scram-sha-256' "$DATA/pg_hba.conf"; then
    as_pg sed -i '1i local all iolens_pw scram-sha-256' "$DATA/pg_hba.conf"
    as_pg "$PGBIN/pg_ctl" -D "$DATA" reload >/dev/null
fi
# A second password role, `iolens_pw_sp` (password `abc SECRET`, with a space), for the
# redaction tests: every DSN form that carries it must connect, and none may show it.
as_pg "${PSQL[@]}" -d postgres -c \
    "DO \$\$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname='iolens_pw_sp') THEN CREATE ROLE iolens_pw_sp LOGIN; END IF; END\$\$" >/dev/null
as_pg "${PSQL[@]}" -d postgres -c "SET password_encryption = 'scram-sha-256'; ALTER ROLE iolens_pw_sp PASSWORD 'abc SECRET'" >/dev/null
if ! grep -q '^local all iolens_pw_sp scram-sha-256' "$DATA/pg_hba.conf"; then
    as_pg sed -i '1i local all iolens_pw_sp scram-sha-256' "$DATA/pg_hba.conf"
    as_pg "$PGBIN/pg_ctl" -D "$DATA" reload >/dev/null
fi

DSN="host=$SOCK port=$PORT user=$SUPER dbname=$DB"
echo "$DSN" >"$BASE/dsn"
echo "export IOLENS_PG_DSN='$DSN'"
