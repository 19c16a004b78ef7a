#!/usr/bin/env bash
# Installs what the tests need on a fresh Debian machine (PostgreSQL, Chromium, loop-device and
# filesystem tools), starts a throwaway PostgreSQL cluster, then checks formatting and lints and
# runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
need=()
command -v pg_ctlcluster >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
# pg_wait_sampling: the server-side wait-event sampler the wait-event tests compare with.
dpkg -s postgresql-15-pg-wait-sampling >/dev/null 2>&1 || need+=(postgresql-15-pg-wait-sampling)
# PostgreSQL 18 (scripts/pg18-test-server.sh) comes from an npm package, and (io_uring) is built
# from source against liburing-dev (bison, flex: its parsers).
command -v npm >/dev/null 2>&1 || need+=(npm)
[ -f /usr/include/liburing.h ] || need+=(liburing-dev)
command -v bison >/dev/null 2>&1 || need+=(bison)
command -v flex >/dev/null 2>&1 || need+=(flex)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# Root-only safety tests build loop devices, ext4, swap and a pseudo-terminal.
command -v losetup >/dev/null 2>&1 || need+=(mount)
command -v mkfs.ext4 >/dev/null 2>&1 || need+=(e2fsprogs)
command -v mkswap >/dev/null 2>&1 || need+=(util-linux)
command -v script >/dev/null 2>&1 || need+=(bsdutils)
# Multi-host tests run real launchers: a one-node Slurm cluster (srun) and Open MPI (mpirun).
command -v slurmctld >/dev/null 2>&1 || need+=(slurmctld slurmd slurm-client munge)
command -v mpirun >/dev/null 2>&1 || need+=(openmpi-bin)
python3 -c 'import ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
# tests/replay.rs captures a loop device's requests (the kernel's blk tracer) and reads them with blkparse.
command -v blktrace >/dev/null 2>&1 || need+=(blktrace)
command -v strace >/dev/null 2>&1 || need+=(strace)
# tests/replay.rs records fio over io_uring with watch --record.
command -v fio >/dev/null 2>&1 || need+=(fio)
# The BPF objects (src/bpf/obj) are rebuilt from bpf/*.bpf.c to check they are not stale.
command -v clang >/dev/null 2>&1 || need+=(clang)
command -v llvm-strip >/dev/null 2>&1 || need+=(llvm)
[ -f /usr/include/bpf/bpf_helpers.h ] || need+=(libbpf-dev)
# tests/common/slowdev.rs builds a FUSE program (a device slow by construction) against libfuse3.
command -v fusermount3 >/dev/null 2>&1 || need+=(fuse3)
[ -f /usr/include/fuse3/fuse.h ] || need+=(libfuse3-dev)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
# tests/profile.rs builds its test programs with gcc and compares with `perf record`.
command -v gcc >/dev/null 2>&1 || need+=(gcc)
command -v perf >/dev/null 2>&1 || need+=(linux-perf)
# tests/metrics.rs has a real Prometheus server scrape `iolens watch --prometheus`.
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get install -y -q "${need[@]}" >/dev/null 2>&1 || {
    $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q "${need[@]}" >/dev/null
  }
fi

if [ -x scripts/pg-test-server.sh ]; then
  eval "$(scripts/pg-test-server.sh)"
  export IOLENS_PG_TESTS=1
fi
if [ -x scripts/pg18-test-server.sh ]; then
  eval "$(scripts/pg18-test-server.sh)"
fi
export IOLENS_BROWSER_TESTS=1
if [ -x scripts/slurm-test-cluster.sh ]; then
  eval "$(scripts/slurm-test-cluster.sh)"
fi
# The Kubernetes recipe is validated offline against the Kubernetes API schema by
# kubernetes-validate (PyPI, Apache-2.0), installed in a virtual environment under target/.
if [ ! -x target/k8s-validate/bin/kubernetes-validate ]; then
  python3 -m venv target/k8s-validate >/dev/null
  target/k8s-validate/bin/pip install -q kubernetes-validate >/dev/null
fi

# The BPF objects in src/bpf/obj must be what bpf/*.bpf.c compiles to (built aside, compared).
bpf_fresh=$(mktemp -d)
scripts/build-bpf.sh "$bpf_fresh"
if ! diff -r "$bpf_fresh" src/bpf/obj >&2; then
  echo "the BPF objects in src/bpf/obj are stale: run scripts/build-bpf.sh and commit them" >&2
  rm -rf "$bpf_fresh"
  exit 1
fi
rm -rf "$bpf_fresh"

cargo fmt --all -- --check
cargo clippy --all-targets -- -D warnings
# Every test binary runs even after one fails, so that one run names every failing test.
cargo test --all-targets --no-fail-fast -- --test-threads=2
