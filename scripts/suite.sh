# Sourced by test.sh, reliability.sh, demo.sh and docs.sh: the one debug build of the package, instrumented for
# coverage, and runs of its test binary. The demo, the documentation's symbol graphs and the reliability suite use
# the build `make test` made, so after it they compile nothing.
#
# The suite runs straight from the test binary rather than through `swift test`, so that these scripts, not
# SwiftPM, merge the raw coverage profiles. Every process writes one at exit: the test binary and each child it
# starts (the test helpers, `prefs`, a copy of itself). A child that a test kills while it writes that file leaves a
# truncated profile; SwiftPM's merge gives up on the whole run at the first such file, where report_coverage skips it
# (its counts are lost, as a killed child's always are) and says how many it skipped.

toolchain_bin="$(dirname "$(command -v swift)")"

# The one debug build's flags: coverage instrumentation, warnings as errors, and an index of this package's modules
# only (SwiftPM finds the tests through it; indexing Foundation's and the C libraries' modules as well cost a tenth of
# a fresh build's compilation).
build_flags=(--enable-code-coverage -Xswiftc -warnings-as-errors -Xswiftc -index-ignore-system-modules)
bin_path="$(swift build "${build_flags[@]}" --show-bin-path)"

# Builds the library, the tools and every test target once, with those flags.
build_suite() {
    swift build --build-tests "${build_flags[@]}"
}

# build_products NAME…: only these products (or executable targets) of the same build.
build_products() {
    local name
    for name in "$@"; do swift build "${build_flags[@]}" --product "$name" || return; done
}

# Runs the test binary with private XDG folders (no test may touch the real ~/.config, ~/.local/share or
# ~/.local/state) and a folder of raw profiles, both under $suite_scratch, removed at exit. Arguments go to the
# Swift Testing runner (`--filter NAME`, `--skip NAME`).
run_suite() {
    suite_scratch="$(mktemp -d)"
    trap 'rm -rf "$suite_scratch"' EXIT
    profiles="$suite_scratch/profiles"
    mkdir -p "$profiles"
    # `%p` gives each process a file of its own; `%m` makes a process that reuses an earlier pid add to that file.
    XDG_CONFIG_HOME="$suite_scratch/config" XDG_DATA_HOME="$suite_scratch/data" \
        XDG_STATE_HOME="$suite_scratch/state" LLVM_PROFILE_FILE="$profiles/%p-%m.profraw" \
        "$bin_path/PrefsPackageTests.xctest" --testing-library swift-testing --parallel "$@"
}

# Merges the profiles of the last run, prints llvm-cov's per-file summary of Sources/Prefs and fails below
# $MIN_LINE_COVERAGE (90 by default); COVERAGE_SHOW_UNCOVERED=1 also prints every uncovered line of the library.
report_coverage() {
    local minimum="${MIN_LINE_COVERAGE:-90}"
    local llvm_cov="$toolchain_bin/llvm-cov" llvm_profdata="$toolchain_bin/llvm-profdata"
    [[ -x "$llvm_cov" ]] || llvm_cov="$(command -v llvm-cov)"
    [[ -x "$llvm_profdata" ]] || llvm_profdata="$(command -v llvm-profdata)"
    local profdata="$suite_scratch/default.profdata" merge_log="$suite_scratch/merge.log"
    local raw=("$profiles"/*.profraw)
    "$llvm_profdata" merge -sparse --failure-mode=all -o "$profdata" "${raw[@]}" 2> "$merge_log" \
        || { cat "$merge_log" >&2; echo "coverage: no profile could be merged" >&2; return 1; }
    local skipped
    skipped="$(grep -c 'warning: .*profraw' "$merge_log" || true)"
    echo "coverage: merged ${#raw[@]} raw profiles; skipped ${skipped} unreadable (a child killed while writing it)"
    [[ "$skipped" -eq 0 ]] || grep 'warning: .*profraw' "$merge_log" | sed 's|^|    |'

    # The test bundle holds the library as the tests run it; the child-process helpers run the same library code in
    # other processes (cross-process, crash and locking tests; the keyring tests), so their counters count too.
    local objects=("$bin_path/PrefsPackageTests.xctest" -object "$bin_path/PrefsTestHelper"
        -object "$bin_path/PrefsKeyringTestHelper")
    local sources="$PWD/Sources/Prefs" summary="$suite_scratch/summary.txt"
    "$llvm_cov" report "${objects[@]}" -instr-profile "$profdata" "$sources" | sed "s|$sources/||" > "$summary"
    echo
    echo "Line coverage of Sources/Prefs (tests, helpers and other targets excluded):"
    cat "$summary"
    if [[ "${COVERAGE_SHOW_UNCOVERED:-0}" == 1 ]]; then
        "$llvm_cov" show "${objects[@]}" -instr-profile "$profdata" "$sources" \
            -show-line-counts-or-regions -use-color=false | grep -E '^ *[0-9]+\| *0\||^/' || true
    fi
    # The TOTAL row: regions, missed, cover, functions, missed, executed, lines, missed, cover, …
    local line_coverage
    line_coverage="$(awk '/^TOTAL/ {print $10}' "$summary")"
    line_coverage="${line_coverage%\%}"
    echo
    echo "Prefs library line coverage: ${line_coverage}% (minimum ${minimum}%)"
    if awk -v got="$line_coverage" -v min="$minimum" 'BEGIN { exit !(got + 0 < min + 0) }'; then
        echo "coverage: below the ${minimum}% bar; see docs/COVERAGE.md for what is deliberately uncovered" >&2
        return 1
    fi
}
