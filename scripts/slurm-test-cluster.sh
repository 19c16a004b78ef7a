#!/usr/bin/env bash
# Start (or reuse) a throwaway one-node Slurm cluster for iolens's multi-host tests.
#
#   scripts/slurm-test-cluster.sh          install if missing, start, print `export SLURM_CONF=...`
#   scripts/slurm-test-cluster.sh stop     stop the daemons it started (by pid)
#
# Installs Slurm (slurmctld, slurmd, srun), munge and Open MPI from Debian's packages when they
# are missing (needs root), writes a minimal slurm.conf in target/slurmtest (override with
# IOLENS_SLURM_DIR) for this host alone, and starts munged, `slurmctld -D` and `slurmd -D` in the
# background (no systemd needed). The node declares 16 CPUs whatever the machine has
# (SlurmdParameters=config_overrides), so `srun -n 4` runs on a 2-core machine.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BASE="${IOLENS_SLURM_DIR:-$ROOT/target/slurmtest}"
CONF="$BASE/slurm.conf"
HOST="$(hostname -s)"

stop() {
    for p in slurmd slurmctld munged; do
        if [ -f "$BASE/$p.pid" ]; then
            pid="$(cat "$BASE/$p.pid")"
            if kill -0 "$pid" 2>/dev/null; then kill "$pid" 2>/dev/null || true; fi
            rm -f "$BASE/$p.pid"
        fi
    done
}

case "${1:-start}" in
stop)
    stop
    exit 0
    ;;
start) ;;
*)
    echo "usage: $0 [start|stop]" >&2
    exit 2
    ;;
esac

need=()
command -v slurmctld >/dev/null 2>&1 || need+=(slurmctld)
command -v slurmd >/dev/null 2>&1 || need+=(slurmd)
command -v srun >/dev/null 2>&1 || need+=(slurm-client)
command -v munged >/dev/null 2>&1 || need+=(munge)
command -v mpirun >/dev/null 2>&1 || need+=(openmpi-bin)
if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "missing ${need[*]}; installing them needs root" >&2
        exit 1
    fi
    echo "installing ${need[*]} from Debian's packages..." >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq "${need[@]}" >&2 || {
        apt-get update -qq >&2 && apt-get install -y -qq "${need[@]}" >&2
    }
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "the test cluster runs its daemons as root" >&2
    exit 1
fi

mkdir -p "$BASE/state" "$BASE/spool" "$BASE/munge"
# munge: a key (the package makes one; make it if not), its socket directory, then the daemon.
if [ ! -s /etc/munge/munge.key ]; then
    mkdir -p /etc/munge
    if command -v mungekey >/dev/null 2>&1; then
        mungekey --create --force >&2
    else
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    fi
fi
id munge >/dev/null 2>&1 && chown munge: /etc/munge/munge.key 2>/dev/null || true
chmod 400 /etc/munge/munge.key
SOCK="$BASE/munge/munge.socket"
if ! { [ -f "$BASE/munged.pid" ] && kill -0 "$(cat "$BASE/munged.pid")" 2>/dev/null; }; then
    rm -f "$SOCK" "$SOCK.lock"
    munged --force --socket="$SOCK" --pid-file="$BASE/munged.pid" \
        --log-file="$BASE/munged.log" --seed-file="$BASE/munge/seed" >&2
fi

CPUS=16
cat >"$CONF.new" <<EOF
ClusterName=iolenstest
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$SOCK
CredType=cred/munge
StateSaveLocation=$BASE/state
SlurmdSpoolDir=$BASE/spool
SlurmctldPidFile=$BASE/slurmctld.pid.conf
SlurmdPidFile=$BASE/slurmd.pid.conf
SlurmctldLogFile=$BASE/slurmctld.log
SlurmdLogFile=$BASE/slurmd.log
SlurmctldPort=${IOLENS_SLURM_PORT:-6817}
SlurmdPort=$((${IOLENS_SLURM_PORT:-6817} + 1))
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
mv "$CONF.new" "$CONF"
export SLURM_CONF="$CONF"

alive() { [ -f "$BASE/$1.pid" ] && kill -0 "$(cat "$BASE/$1.pid")" 2>/dev/null; }
if ! alive slurmctld; then
    nohup slurmctld -D -f "$CONF" >>"$BASE/slurmctld.out" 2>&1 &
    echo $! >"$BASE/slurmctld.pid"
fi
if ! alive slurmd; then
    nohup slurmd -D -f "$CONF" >>"$BASE/slurmd.out" 2>&1 &
    echo $! >"$BASE/slurmd.pid"
fi
# Wait until the node takes work.
for _ in $(seq 1 60); do
    if sinfo -h -o '%T' 2>/dev/null | grep -Eq '^(idle|mixed|allocated)'; then
        echo "export SLURM_CONF=$CONF"
        exit 0
    fi
    scontrol update nodename="$HOST" state=resume >/dev/null 2>&1 || true
    sleep 0.5
done
echo "the Slurm test cluster did not come up; see $BASE/slurmctld.log and $BASE/slurmd.log" >&2
sinfo >&2 || true
exit 1
