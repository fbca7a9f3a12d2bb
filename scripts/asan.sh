#!/usr/bin/env bash
# AddressSanitizer, with LeakSanitizer, over the library's own code: the in-process library tests, the tests that
# run it in child processes (each child is instrumented too), the PostgreSQL store and the test trait.
# PREFS_SANITIZER_SCOPE=address keeps the build to those targets (see Package.swift); CI's leg passes
# PREFS_ASAN_SCOPE=address-ci, which leaves out the PostgreSQL store and its tests (docs/RELIABILITY.md says why).
# Memory errors and leaks fail the run. Own build folder, so the normal build is not invalidated.
set -euo pipefail
cd "$(dirname "$0")/.."
export PREFS_SANITIZER_SCOPE="${PREFS_ASAN_SCOPE:-address}"
echo "asan: PREFS_SANITIZER_SCOPE=$PREFS_SANITIZER_SCOPE"
flags=(--sanitize=address --scratch-path .build/asan -Xswiftc -index-ignore-system-modules)
swift build --build-tests "${flags[@]}"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
export ASAN_OPTIONS="detect_leaks=1 ${ASAN_OPTIONS:-}"
# Child processes built the same way print their own reports: no suppression statistics on their stderr, which
# some tests read.
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp print_suppressions=0 ${LSAN_OPTIONS:-}"
XDG_CONFIG_HOME="$scratch/config" XDG_DATA_HOME="$scratch/data" XDG_STATE_HOME="$scratch/state" \
    swift test --skip-build --disable-xctest "${flags[@]}" --skip BrokenStoreTests "$@"
