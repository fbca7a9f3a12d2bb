#!/usr/bin/env bash
# Line coverage of the Prefs library: runs the whole test suite with coverage instrumentation (in its own build
# folder, so it does not invalidate the normal build), then prints llvm-cov's per-file summary for Sources/Prefs
# only and fails when the library's line coverage is below the bar.
#
#   scripts/coverage.sh             # summary, fails below 90%
#   MIN_LINE_COVERAGE=85 scripts/coverage.sh
#   scripts/coverage.sh --show-uncovered   # also prints every uncovered line of the library
set -euo pipefail
cd "$(dirname "$0")/.."

minimum="${MIN_LINE_COVERAGE:-90}"
show_uncovered=false
[[ "${1:-}" == "--show-uncovered" ]] && show_uncovered=true

scratch_path=".build/coverage"
toolchain_bin="$(dirname "$(command -v swift)")"
llvm_cov="$toolchain_bin/llvm-cov"
[[ -x "$llvm_cov" ]] || llvm_cov="$(command -v llvm-cov)"

# The tests run straight from the test binary rather than through `swift test --enable-code-coverage`, so that
# this script, not SwiftPM, merges the raw profiles. Every process writes one at exit: the test binary and each child
# it starts (the test helper, `prefs`, a copy of itself). A child that a test kills while it is writing that file at
# exit leaves a truncated profile; SwiftPM's merge gives up on the whole run at the first such file, where this one
# skips it (its counts are lost, as a killed child's always are) and says how many it skipped.
xdg="$(mktemp -d)"
trap 'rm -rf "$xdg"' EXIT
swift build --build-tests --enable-code-coverage --scratch-path "$scratch_path"
bin_path="$(swift build --scratch-path "$scratch_path" --show-bin-path)"
profiles="$xdg/profiles"
mkdir -p "$profiles" "$bin_path/codecov"
# Private XDG folders, as in scripts/test.sh, so no test touches the real ~/.config or ~/.local/share. `%p` gives
# each process a file of its own; `%m` makes a process that reuses an earlier one's pid add to that file.
XDG_CONFIG_HOME="$xdg/config" XDG_DATA_HOME="$xdg/data" XDG_STATE_HOME="$xdg/state" \
    LLVM_PROFILE_FILE="$profiles/%p-%m.profraw" \
    "$bin_path/PrefsPackageTests.xctest" --testing-library swift-testing --parallel

llvm_profdata="$toolchain_bin/llvm-profdata"
[[ -x "$llvm_profdata" ]] || llvm_profdata="$(command -v llvm-profdata)"
profdata="$bin_path/codecov/default.profdata"
raw=("$profiles"/*.profraw)
merge_log="$xdg/merge.log"
"$llvm_profdata" merge -sparse --failure-mode=all -o "$profdata" "${raw[@]}" 2> "$merge_log" \
    || { cat "$merge_log" >&2; echo "coverage: no profile could be merged" >&2; exit 1; }
skipped="$(grep -c 'warning: .*profraw' "$merge_log" || true)"
echo "coverage: merged ${#raw[@]} raw profiles; skipped ${skipped} unreadable (a child killed while writing it)"
[[ "$skipped" -eq 0 ]] || grep 'warning: .*profraw' "$merge_log" | sed 's|^|    |'

# The test bundle holds the library as the tests run it; the child-process helper runs the same library code in
# other processes (cross-process, crash and locking tests), so its counters count too.
objects=()
for candidate in "$bin_path"/PrefsPackageTests.xctest "$bin_path"/PrefsTestHelper; do
    [[ -f "$candidate" ]] && objects+=("$candidate")
done
[[ ${#objects[@]} -gt 0 ]] || { echo "coverage: no test binary in $bin_path" >&2; exit 1; }
object_args=("${objects[0]}")
for extra in "${objects[@]:1}"; do object_args+=(-object "$extra"); done

sources="$PWD/Sources/Prefs"
echo
echo "Line coverage of Sources/Prefs (tests, helpers and other targets excluded):"
"$llvm_cov" report "${object_args[@]}" -instr-profile "$profdata" "$sources" | sed "s|$sources/||"

if $show_uncovered; then
    "$llvm_cov" show "${object_args[@]}" -instr-profile "$profdata" "$sources" \
        -show-line-counts-or-regions -use-color=false | grep -E '^ *[0-9]+\| *0\||^/' || true
fi

# The TOTAL row: columns are regions, missed, cover, functions, missed, executed, lines, missed, cover, …
total="$("$llvm_cov" report "${object_args[@]}" -instr-profile "$profdata" "$sources" | awk '/^TOTAL/ {print $10}')"
line_coverage="${total%\%}"
echo
echo "Prefs library line coverage: ${line_coverage}% (minimum ${minimum}%)"
if awk -v got="$line_coverage" -v min="$minimum" 'BEGIN { exit !(got + 0 < min + 0) }'; then
    echo "coverage: below the ${minimum}% bar; see docs/COVERAGE.md for what is deliberately uncovered" >&2
    exit 1
fi
