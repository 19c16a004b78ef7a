#!/usr/bin/env bash
# Fuzz every reader (`ingest --format X` for every format, `trace`) and everything that loads
# results (`show`, `report`, `compare`, `export`) for a fixed budget, in-process through the
# library (tests/fuzz.rs). Prints the seed count, the case count and rate, and every finding
# (a panic's input is written under target/fuzz-findings/; a hang stops the run).
# CI runs the same harness for 20 s with `cargo test --test fuzz`.
# Usage, from anywhere: bash bench/fuzz.sh [seconds (default 600)] [seed (default: time)]
# PROFILE=dev uses the test build CI already has (opt-level 1) instead of building --release.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-600}"
seed="${2:-$(date +%s)}"
profile=(--release)
if [ "${PROFILE:-release}" = dev ]; then profile=(); fi
IOLENS_FUZZ_SECS="$secs" IOLENS_FUZZ_SEED="$seed" \
    cargo test "${profile[@]}" --test fuzz -- --nocapture 2>&1 | grep -E '^fuzz|panicked|test result'
