#!/usr/bin/env bash
# ThreadSanitizer over the library's own code and its concurrency: the in-process library tests (PrefsTests), the
# PostgreSQL store's threads (PrefsPostgresTests), the test trait (PrefsTestingTests), then the reliability suite's
# thread test. PREFS_SANITIZER_SCOPE=thread keeps the build to those targets (see Package.swift). libsodium is not
# instrumented. Own build folder, so the normal build is not invalidated. Fails on any TSan report.
# -D PREFS_TSAN makes Prefs annotate its Mutex for TSan (Sources/Prefs/Platform/TSanMutex.swift).
set -euo pipefail
cd "$(dirname "$0")/.."
export PREFS_SANITIZER_SCOPE=thread
flags=(--sanitize=thread --scratch-path .build/tsan -Xswiftc -DPREFS_TSAN -Xswiftc -index-ignore-system-modules)
swift build --build-tests "${flags[@]}"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
export TSAN_OPTIONS="halt_on_error=0 exitcode=66 suppressions=$PWD/scripts/tsan.supp ${TSAN_OPTIONS:-}"
export XDG_CONFIG_HOME="$scratch/config" XDG_DATA_HOME="$scratch/data" XDG_STATE_HOME="$scratch/state"
swift test --skip-build --disable-xctest "${flags[@]}" --skip BrokenStoreTests "$@"
PREFS_RELIABILITY=1 swift test --skip-build --disable-xctest "${flags[@]}" --filter 'LoadTests/tasksShareWrappers'
