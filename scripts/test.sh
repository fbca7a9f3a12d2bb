#!/usr/bin/env bash
# The README's test command (`make test`): one build with coverage instrumentation and warnings as errors, the
# format lint, the mutation list's targets, the public API against its baseline in api/ (scripts/api.sh), one run of the whole suite, then the
# library's line coverage, which fails the run below 90%.
#
#   scripts/test.sh                           # everything, with the coverage bar
#   scripts/test.sh --filter StoreTests       # part of the suite: arguments go to the runner; no coverage bar
#   COVERAGE_SHOW_UNCOVERED=1 scripts/test.sh # also prints every uncovered line of the library
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/suite.sh
build_suite
swift format lint --strict -r Sources Tests Package.swift Benchmarks/Package.swift Benchmarks/Sources/PrefsBench
# Every entry of the mutation check still finds its text and its tests (the check itself is `make mutants`).
python3 scripts/mutants.py --check > /dev/null
scripts/api.sh check "$bin_path"
run_suite "$@"
if [[ $# -eq 0 ]]; then report_coverage; fi
