#!/usr/bin/env bash
# The README's first command (`make demo`): builds `prefs` and the demo in the debug build `make test` makes
# (scripts/suite.sh; after `make test` this compiles nothing), then runs the demo, which ends with `prefs describe`
# of its own keys (it finds the tool beside itself).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/suite.sh
build_products prefs prefs-demo
# The build is instrumented for coverage: every process writes a profile at exit, here into a folder removed after.
profiles="$(mktemp -d)"
trap 'rm -rf "$profiles"' EXIT
LLVM_PROFILE_FILE="$profiles/%p.profraw" "$bin_path/prefs-demo"
