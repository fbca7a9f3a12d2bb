#!/usr/bin/env bash
# Builds the DocC documentation of every library product (Prefs, PrefsTesting, PrefsPostgres) into one archive with
# the toolchain's docc over symbol graphs read from `make test`'s build (the swift-docc-plugin is not needed), and
# fails on any documentation warning or on any public symbol of the three without a doc comment.
#
#   scripts/docs.sh                 # writes .build/docs (a static-hostable DocC archive)
#   DOCS_OUTPUT=/tmp/site scripts/docs.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/suite.sh

catalog="Sources/Prefs/Prefs.docc"
graphs=".build/symbol-graphs"
output="${DOCS_OUTPUT:-.build/docs}"
docc="$toolchain_bin/docc"
[[ -x "$docc" ]] || docc="$(command -v docc)"

# The modules of the library products, each documented from the public declarations written in Sources/<module>.
modules=(Prefs PrefsTesting PrefsPostgres)

# 1. Symbol graphs of the public API, read from the modules of the debug build `make test` makes (scripts/suite.sh;
#    after it, this compiles nothing), as swift-docc-plugin does: swift-symbolgraph-extract reads a module's
#    declarations, doc comments and source locations from its .swiftmodule, .swiftdoc and .swiftsourceinfo, so the
#    graphs are always those of the module as it is now built. Building PrefsTesting builds Prefs too.
for target in PrefsTesting PrefsPostgres; do
    swift build "${build_flags[@]}" --target "$target"
done
rm -rf "$graphs"
mkdir -p "$graphs"
# The C modules the libraries import, and the headers their module maps include.
includes=(-I "$bin_path/Modules" -I Sources/CSodium -I Sources/CLibPQ)
for flag in $(pkg-config --cflags-only-I libpq); do includes+=(-I "${flag#-I}"); done
for module in "${modules[@]}"; do
    "$toolchain_bin/swift-symbolgraph-extract" -module-name "$module" "${includes[@]}" \
        -target "$(uname -m)-unknown-linux-gnu" -minimum-access-level public -output-dir "$graphs" \
        -module-cache-path "$PWD/.build/docs-module-cache" \
        || { echo "docs: swift-symbolgraph-extract could not read module $module" >&2; exit 1; }
done
# Only the three modules are documented: the graphs of the C modules and test support, if any, are left out.
for file in "$graphs"/*.symbols.json; do
    name="$(basename "$file" .symbols.json)"
    [[ " ${modules[*]} " == *" ${name%%@*} "* ]] || rm "$file"
done

# 2. Every public declaration written in Sources/<module> has its own doc comment (not one inherited from a
#    protocol). Symbols without a source location are synthesised by the compiler (hashValue, Equatable's ==, …);
#    members a module inherits from another one's protocol extensions are documented where they are written.
undocumented=""
for module in "${modules[@]}"; do
    undocumented+="$(jq -r --arg module "$module" '.symbols[]
        | select(.location != null)
        | select(.location.uri | contains("/Sources/\($module)/"))
        | select(.docComment == null or (.docComment.module // $module) != $module)
        | "\(.location.uri | sub("^file://"; "") ):\(.location.position.line + 1): \(.pathComponents | join("."))"' \
        "$graphs/$module".symbols.json "$graphs/$module"@*.symbols.json 2>/dev/null || true)"
done
if [[ -n "$undocumented" ]]; then
    echo "docs: public symbols without a doc comment:" >&2
    echo "$undocumented" >&2
    exit 1
fi

# 3. The catalog and the doc comments of the three modules, in one archive (so that PrefsTesting's and
#    PrefsPostgres's comments link to Prefs' symbols), with warnings as errors. docc's exit status covers that; the log is also
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

for module in "${modules[@]}"; do
    page="$output/documentation/$(tr '[:upper:]' '[:lower:]' <<<"$module")/index.html"
    [[ -f "$page" ]] || { echo "docs: no reference pages for $module ($page is missing)" >&2; exit 1; }
done
symbols="$(jq -s '[.[].symbols[] | select(.location != null)] | length' "$graphs"/*.symbols.json)"
echo "docs: no warnings; ${symbols} public symbols of ${modules[*]}, all documented"
echo "docs: output in $(cd "$output" && pwd) (open index.html through a web server, e.g."
echo "      python3 -m http.server --directory $output, then http://localhost:8000/documentation/prefs, /prefstesting, /prefspostgres)"
