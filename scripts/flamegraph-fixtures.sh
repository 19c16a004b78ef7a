#!/usr/bin/env bash
# Copy the `perf script` files of Brendan Gregg's FlameGraph test suite into
# tests/fixtures/real/flamegraph/ and write, for each, what stackcollapse-perf.pl itself folds it
# to in sample counts (tests/profile.rs compares iolens' folded stacks with these).
#   scripts/flamegraph-fixtures.sh FLAMEGRAPH_CHECKOUT [COMMIT]
# FLAMEGRAPH_CHECKOUT is a git directory of github.com/brendangregg/FlameGraph (tested at
# 41fee1f99f9276008b7cd112fca19dc3ea84ac32). For each test/NAME.txt:
#   NAME.txt              the file as published (byte for byte)
#   NAME.counts.folded    `perl stackcollapse-perf.pl --kernel` of a copy whose sample headers
#                         have their period number removed (`…: 10101010 cpu-clock:` →
#                         `…: cpu-clock:`, so the script counts 1 per sample, as it does for
#                         headers without a period) and that ends with a blank line (the script
#                         drops a last sample not followed by one; iolens keeps it).
# The script also checks that the stacks it found are those of the published
# test/results/NAME-collapsed-kernel.txt (plus the last sample where the file lacks a final
# blank line), so the copy changed only the weights.
set -euo pipefail
SRC="${1:?FlameGraph git directory}"
COMMIT="${2:-41fee1f99f9276008b7cd112fca19dc3ea84ac32}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$ROOT/tests/fixtures/real/flamegraph"
mkdir -p "$OUT"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
git -C "$SRC" show "$COMMIT:stackcollapse-perf.pl" >"$TMP/stackcollapse-perf.pl"
for f in $(git -C "$SRC" ls-tree --name-only "$COMMIT" test/ | grep '\.txt$'); do
    name="$(basename "$f" .txt)"
    git -C "$SRC" show "$COMMIT:$f" >"$OUT/$name.txt"
    { perl -pe 'if (/^(\S.+?)\s+(\d+)\/*(\d+)*\s+/) { s/:\s*\d+\s+(\S+):[ \t]*$/: $1:/ }' \
        "$OUT/$name.txt"; echo; } >"$TMP/$name.txt"
    perl "$TMP/stackcollapse-perf.pl" --kernel "$TMP/$name.txt" 2>/dev/null \
        >"$OUT/$name.counts.folded"
    git -C "$SRC" show "$COMMIT:test/results/$name-collapsed-kernel.txt" |
        sed 's/ [0-9]*$//' | sort >"$TMP/published"
    sed 's/ [0-9]*$//' "$OUT/$name.counts.folded" | sort >"$TMP/ours"
    extra="$(comm -13 "$TMP/published" "$TMP/ours" | wc -l)"
    missing="$(comm -23 "$TMP/published" "$TMP/ours" | wc -l)"
    echo "$name: $(wc -l <"$OUT/$name.counts.folded") stacks," \
        "$(awk '{s+=$NF} END {print s}' "$OUT/$name.counts.folded") samples;" \
        "vs published: $missing missing, $extra more"
done
