#!/usr/bin/env bash
# `make mutants`: the mutation check of the promises table. Each entry of Tests/Mutants/mutations.txt breaks one
# promise of docs/PROMISES.md with a one-line change; in a scratch copy of this checkout (kept between runs, with its
# own build, in $PREFS_MUTANTS_DIR or a folder under /tmp), each is made in turn, the package built, and only the
# tests the entry names run. A mutation they do not catch survives and fails the check, naming its row.
#
#   scripts/mutants.sh                         # every entry
#   scripts/mutants.sh --section vault         # one section of the table (repeatable)
#   scripts/mutants.sh --id ID --id ID         # entries by id (or --tag T, --skip-tag T); --list prints them
#
# PREFS_MUTANT_TIMEOUT (seconds, default 900) bounds each run of the named tests; a run past it counts as killed
# (the mutation hung a test). Figures of the last run: docs/RELIABILITY.md, "Mutation check".
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 scripts/mutants.py "$@"
