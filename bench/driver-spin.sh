#!/bin/bash
# The CPU a run burns while its last read is still in flight after the deadline: a loop device
# over a FUSE file whose every read sleeps DELAY_US (tests/common/slowfuse.c), a 1 s run of one
# session, so the run waits ~DELAY_US for that read. A driver that waits costs ~0 s of CPU; one
# that polls with a zero timeout spins a CPU for the whole wait (the defect fixed in 7a1f6f6).
# Each build given runs twice, alternating, in one invocation.
#   bench/driver-spin.sh BINARY... (root; gcc, pkg-config, fuse3, libfuse3-dev)
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: bench/driver-spin.sh BINARY..." >&2; exit 2; }
DELAY_US=${DELAY_US:-3000000}
D=$(mktemp -d /tmp/iolens-spin.XXXX)
gcc -O2 -o "$D/slowfuse" "$(dirname "$0")/../tests/common/slowfuse.c" \
    $(pkg-config --cflags --libs fuse3)
truncate -s 64M "$D/backing"
mkdir "$D/mnt"
"$D/slowfuse" "$D/backing" "$D/mnt" "$DELAY_US" 2>/dev/null &
FP=$!
for _ in $(seq 50); do [ -e "$D/mnt/disk" ] && break; sleep 0.1; done
DEV=$(losetup --find --show --direct-io=on "$D/mnt/disk")
cleanup() {
    losetup -d "$DEV" || true
    for _ in $(seq 20); do umount "$D/mnt" 2>/dev/null && break; sleep 0.2; done
    kill "$FP" 2>/dev/null || true
    rm -rf "$D"
}
trap cleanup EXIT
echo "each read sleeps $((DELAY_US / 1000)) ms; load: $(cut -d' ' -f1-3 /proc/loadavg)"
for _ in 1 2; do
    for b in "$@"; do
        /usr/bin/time -f "$b: wall %e s, CPU user %U s sys %S s" \
            "$b" run --target "$DEV" --duration 1s --sessions 1 --bs 4k --warmup 0s \
            --no-progress -q 2>&1 | tail -1
    done
done
