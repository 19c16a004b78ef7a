# Sourced (not run) by scripts/pg-test-server.sh and scripts/pg18-test-server.sh: the server
# user, and making, starting, stopping and filling one throwaway cluster on a unix socket.

# Server-side commands run as `postgres` when we are root (the server refuses to run as root).
if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql postgres
    as_pg() { runuser -u postgres -- "$@"; }
    SUPER=postgres
else
    as_pg() { "$@"; }
    SUPER="$(id -un)"
fi

# pg_cluster_init BIN DIR PORT [LINE...]: make a cluster in DIR/data once (owned by `postgres`
# under root), listening only on a socket in DIR/sock, with a small shared_buffers (16MB) so
# test data is much larger than the cache; the LINEs are added to its postgresql.conf.
pg_cluster_init() {
    local bin=$1 dir=$2 port=$3
    shift 3
    local data="$dir/data" sock="$dir/sock"
    mkdir -p "$dir"
    [ -f "$data/PG_VERSION" ] && return 0
    rm -rf "$data" "$sock"
    mkdir -p "$data" "$sock"
    if [ "$(id -u)" -eq 0 ]; then chown -R postgres: "$dir"; fi
    as_pg "$bin/initdb" -D "$data" -U "$SUPER" --auth=trust -E UTF8 --no-sync >/dev/null
    {
        echo "# iolens test cluster"
        echo "listen_addresses = ''"
        echo "port = $port"
        echo "unix_socket_directories = '$sock'"
        echo "shared_buffers = 16MB"
        echo "max_connections = 60"
        echo "fsync = on"
        printf '%s\n' "$@"
    } >>"$data/postgresql.conf"
}

# pg_cluster_start BIN DIR: start the cluster in DIR/data unless it runs (log: DIR/server.log);
# when it does not start, says so with the log's last lines and returns 1.
pg_cluster_start() {
    local bin=$1 data="$2/data" log="$2/server.log"
    as_pg "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1 && return 0
    as_pg "$bin/pg_ctl" -D "$data" -l "$log" -w -t 60 start >/dev/null 2>&1 && return 0
    echo "PostgreSQL ($data) did not start:" >&2
    tail -3 "$log" >&2 || true
    return 1
}

# pg_cluster_stop BIN DIR: stop the cluster in DIR/data, if there is one.
pg_cluster_stop() {
    local bin=$1 data="$2/data"
    if [ -d "$data" ] && [ -x "$bin/pg_ctl" ]; then
        as_pg "$bin/pg_ctl" -D "$data" -m fast stop >/dev/null 2>&1 || true
    fi
}

# pg_create_db DB PSQL...: create database DB unless it exists (PSQL...: the psql command line,
# without -d).
pg_create_db() {
    local db=$1
    shift
    if [ "$(as_pg "$@" -d postgres -c "SELECT count(*) FROM pg_database WHERE datname='$db'")" = 0 ]; then
        as_pg "$@" -d postgres -c "CREATE DATABASE $db" >/dev/null
    fi
}
