#!/usr/bin/env bash
# The reliability suite (Tests/PrefsReliabilityTests): crash loops, multi-process load, threads, hostile files,
# bad input, leaks, two once-intermittent checks twenty times, then the decoders' own mutation fuzzers at full
# length. `PREFS_SOAK=1` (`make soak`) runs every loop ten times longer; `PREFS_SEED=N` replays a run's random
# choices. Uses the build `make test` made (no second compilation). Prints the figure lines (RELIABILITY …) at the
# end and keeps the whole log in .build/reliability.log.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/suite.sh
build_suite
log=".build/reliability.log"
started=$(date +%s)
status=0
PREFS_RELIABILITY=1 run_suite --filter PrefsReliabilityTests "$@" 2>&1 | tee "$log" || status=$?
# The two checks that once recorded their own failure as known (issue 49), twenty times over: a write's descriptor
# and lock released, and processes racing to move the default vault's key into the keyring.
run_suite --filter 'aClosedStoreRefusesEveryOperationAndReleasesItsFiles|processesOpeningTheDefaultVaultAtOnceMoveItOnce' \
    --repetitions 20 2>&1 | tee -a "$log" || status=$?
fuzz_iterations=$((${PREFS_SOAK:-0} == 1 ? 400000 : 10000))
PREFS_FUZZ_ITERATIONS=$fuzz_iterations run_suite --filter 'MutationFuzzNeverCrashes' 2>&1 | tee -a "$log" \
    || status=$?
echo
echo "== Reliability figures (PREFS_SOAK=${PREFS_SOAK:-0}, $(($(date +%s) - started)) s) =="
grep '^RELIABILITY ' "$log" | sort || true
exit "$status"
