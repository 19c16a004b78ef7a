#!/bin/bash
# iolens on many hosts with plain ssh (parallel-ssh, pdsh or a loop): no launcher sets a rank,
# so each host is given --rank and --ranks; one start time is resolved once here.
set -euo pipefail
HOSTS=(db1 db2 db3 db4)
START="$(date -u -d '+30 sec' +%Y-%m-%dT%H:%M:%S.%NZ)"
for i in "${!HOSTS[@]}"; do
    ssh "${HOSTS[$i]}" iolens -q run --rank "$i" --ranks "${#HOSTS[@]}" \
        --target /u02/iolens-scratch.dat --sessions 16 --duration 5m \
        --start-at "$START" --json "/tmp/iolens-{host}-{rank}.json" &
done
wait
for h in "${HOSTS[@]}"; do scp "$h:/tmp/iolens-$h-*.json" .; done
iolens merge iolens-*.json -o merged.json
# The same with parallel-ssh, each host finding its index in the list:
#   parallel-ssh -h hosts.txt -i 'iolens -q run --rank $(grep -nx "$(hostname -s)" hosts.txt | cut -d: -f1 | xargs -I{} expr {} - 1) --ranks 4 ...'
