#!/usr/bin/env bash
# The main test suite, then the reliability suite's thread tests, under ThreadSanitizer (libsodium is not
# instrumented). Separate build folder so the normal build is not invalidated. Fails on any TSan report.
# -D PREFS_TSAN makes Prefs annotate its Mutex for TSan (Sources/Prefs/Internal/TSanMutex.swift).
set -euo pipefail
cd "$(dirname "$0")/.."
scratch_path=".build/tsan"
swift build --build-tests --sanitize=thread --scratch-path "$scratch_path" -Xswiftc -DPREFS_TSAN
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
export TSAN_OPTIONS="halt_on_error=0 exitcode=66 suppressions=$PWD/scripts/tsan.supp ${TSAN_OPTIONS:-}"
export XDG_CONFIG_HOME="$scratch/config" XDG_DATA_HOME="$scratch/data" XDG_STATE_HOME="$scratch/state"
# The CLI's PostgreSQL tests drive several instrumented `prefs` processes against a server; under ThreadSanitizer
# they outrun their time limits on 2 cores, and the store's own threads are checked by PrefsPostgresTests here.
swift test --skip-build --sanitize=thread --scratch-path "$scratch_path" -Xswiftc -DPREFS_TSAN \
    --skip PostgresCommandTests "$@"
PREFS_RELIABILITY=1 swift test --skip-build --sanitize=thread --scratch-path "$scratch_path" -Xswiftc -DPREFS_TSAN \
    --filter 'LoadTests/tasksShareWrappers'
