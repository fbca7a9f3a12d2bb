#!/usr/bin/env bash
# The reliability suite (Tests/PrefsReliabilityTests): crash loops, multi-process load, threads, hostile files,
# bad input, leaks. `PREFS_SOAK=1` runs every loop ten times longer; `PREFS_SEED=N` replays a run's random choices.
# Prints the figure lines (RELIABILITY …) at the end and keeps the whole log in .build/reliability.log.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --build-tests -Xswiftc -warnings-as-errors
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
log=".build/reliability.log"
started=$(date +%s)
status=0
PREFS_RELIABILITY=1 XDG_CONFIG_HOME="$scratch/config" XDG_DATA_HOME="$scratch/data" XDG_STATE_HOME="$scratch/state" \
    swift test --skip-build --filter PrefsReliabilityTests "$@" 2>&1 | tee "$log" || status=$?
# The decoders' own mutation fuzzers, which `make test` runs briefly, at full length.
fuzz_iterations=$((${PREFS_SOAK:-0} == 1 ? 400000 : 40000))
PREFS_FUZZ_ITERATIONS=$fuzz_iterations swift test --skip-build --filter 'MutationFuzzNeverCrashes' 2>&1 \
    | tee -a "$log" || status=$?
echo
echo "== Reliability figures (PREFS_SOAK=${PREFS_SOAK:-0}, $(($(date +%s) - started)) s) =="
grep '^RELIABILITY ' "$log" | sort || true
exit "$status"
