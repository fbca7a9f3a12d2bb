#!/usr/bin/env bash
# Coverage is measured by every `make test` (scripts/test.sh), which runs the suite once, instrumented. This
# script is that run with every uncovered line of the library printed as well.
set -euo pipefail
cd "$(dirname "$0")/.."
COVERAGE_SHOW_UNCOVERED=1 exec scripts/test.sh
