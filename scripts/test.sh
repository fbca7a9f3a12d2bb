#!/usr/bin/env bash
# The whole test job: build with warnings as errors, format lint, then the test suite with private XDG folders
# so no test can touch the real ~/.config, ~/.local/share or ~/.local/state (vault rollback records).
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --build-tests -Xswiftc -warnings-as-errors
swift format lint --strict -r Sources Tests Package.swift Benchmarks/Package.swift Benchmarks/Sources/PrefsBench
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
XDG_CONFIG_HOME="$scratch/config" XDG_DATA_HOME="$scratch/data" XDG_STATE_HOME="$scratch/state" \
    swift test --skip-build --disable-xctest "$@"
