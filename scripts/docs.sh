#!/usr/bin/env bash
# Builds the DocC documentation of Prefs with the toolchain's docc over symbol graphs (the swift-docc-plugin is not
# needed) and fails on any documentation warning or on any public symbol without a doc comment.
#
#   scripts/docs.sh                 # writes .build/docs (a static-hostable DocC archive)
#   DOCS_OUTPUT=/tmp/site scripts/docs.sh
set -euo pipefail
cd "$(dirname "$0")/.."

catalog="Sources/Prefs/Prefs.docc"
graphs=".build/symbol-graphs"
output="${DOCS_OUTPUT:-.build/docs}"
toolchain_bin="$(dirname "$(command -v swift)")"
docc="$toolchain_bin/docc"
[[ -x "$docc" ]] || docc="$(command -v docc)"

# 1. Symbol graphs of the public API, emitted while compiling the library. The compiler writes them only when it
#    re-emits the module, which an incremental build may skip, so the library is compiled from scratch in a build
#    folder of its own (about 10 s; the normal .build is left alone).
scratch=".build/docs-build"
rm -rf "$graphs" "$scratch"
mkdir -p "$graphs"
swift build --scratch-path "$scratch" --target Prefs \
    -Xswiftc -emit-symbol-graph -Xswiftc -emit-symbol-graph-dir -Xswiftc "$PWD/$graphs"
[[ -f "$graphs/Prefs.symbols.json" ]] || { echo "docs: the compiler emitted no symbol graph in $graphs" >&2; exit 1; }

# 2. Every public declaration written in Sources/Prefs has its own doc comment (not one inherited from a protocol).
#    Symbols without a source location are synthesised by the compiler (hashValue, Equatable's ==, …).
undocumented="$(jq -r '.symbols[]
    | select(.location != null)
    | select(.docComment == null or (.docComment.module // "Prefs") != "Prefs")
    | "\(.location.uri | sub("^file://"; "") ):\(.location.position.line + 1): \(.pathComponents | join("."))"' \
    "$graphs"/*.symbols.json)"
if [[ -n "$undocumented" ]]; then
    echo "docs: public symbols without a doc comment:" >&2
    echo "$undocumented" >&2
    exit 1
fi

# 3. The catalog and the doc comments, with warnings as errors. docc's exit status covers that; the log is also
#    checked, so a warning can never slip through a docc that does not honour the flag.
rm -rf "$output"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
"$docc" convert "$catalog" \
    --additional-symbol-graph-dir "$graphs" \
    --output-path "$output" \
    --fallback-display-name Prefs \
    --fallback-bundle-identifier org.prefs.Prefs \
    --fallback-default-module-kind "Swift Package" \
    --transform-for-static-hosting \
    --warnings-as-errors \
    2>&1 | tee "$log" || status=$?
if [[ $status -ne 0 ]] || grep -qiE '^(warning|error)|: (warning|error):' "$log"; then
    echo "docs: documentation has warnings or errors (see above)" >&2
    exit 1
fi

symbols="$(jq -s '[.[].symbols[] | select(.location != null)] | length' "$graphs"/*.symbols.json)"
echo "docs: no warnings; ${symbols} public symbols, all documented"
echo "docs: output in $(cd "$output" && pwd) (open index.html through a web server, e.g."
echo "      python3 -m http.server --directory $output, then http://localhost:8000/documentation/prefs)"
