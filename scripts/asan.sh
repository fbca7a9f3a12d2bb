#!/usr/bin/env bash
# The main test suite under AddressSanitizer, which on Linux includes LeakSanitizer: memory errors and leaks
# fail the run. Separate build folder so the normal build is not invalidated.
set -euo pipefail
cd "$(dirname "$0")/.."
scratch_path=".build/asan"
swift build --build-tests --sanitize=address --scratch-path "$scratch_path"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
# As under ThreadSanitizer, the CLI's PostgreSQL tests (several instrumented `prefs` processes against a server)
# outrun their time limits on 2 cores; they run in `make test`, and PrefsPostgresTests covers the store here.
export ASAN_OPTIONS="detect_leaks=1 ${ASAN_OPTIONS:-}"
# Child processes built the same way print their own reports: no suppression statistics on their stderr, which
# the CLI tests read.
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp print_suppressions=0 ${LSAN_OPTIONS:-}"
XDG_CONFIG_HOME="$scratch/config" XDG_DATA_HOME="$scratch/data" XDG_STATE_HOME="$scratch/state" \
    swift test --skip-build --sanitize=address --scratch-path "$scratch_path" --skip PostgresCommandTests "$@"
