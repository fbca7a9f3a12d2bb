#!/usr/bin/env bash
# The public API check: the public interface of each library product, as the compiler sees it in the debug build's
# modules, against the baseline kept in api/<Module>.txt (one line per public declaration, sorted; see
# scripts/api-surface.py). `make test` runs `check` after its build, so a change to the public API fails until the
# baseline is updated in the same commit, deliberately: `make api-baseline`.
#
#   scripts/api.sh check [BIN_PATH]        # compares every product with its baseline; prints the diff, exits 1
#   scripts/api.sh baseline [BIN_PATH]     # rewrites api/*.txt from the build (make api-baseline builds first)
#   scripts/api.sh surface MODULES_DIR MODULE   # prints one module's interface
#   scripts/api.sh compare BASELINE CURRENT      # the comparison `check` makes, for one pair of files
#   scripts/api.sh count [BIN_PATH]        # public declarations per product (the implicit ones left out), with and
#                                          # without the deprecated ones
#
# BIN_PATH is the build's products folder (`swift build --show-bin-path`); its Modules/ holds the .swiftmodule files.
set -euo pipefail
cd "$(dirname "$0")/.."

modules=(Prefs PrefsTesting PrefsPostgres PrefsKeyring)
baselines=api
# The Clang modules the digester builds (Foundation's, the C libraries'), kept beside the build between runs.
module_cache="$PWD/.build/api-module-cache"

# The C modules the products import, and the headers their module maps include.
include_flags() {
    local flags=(-I Sources/CSodium -I Sources/CLibPQ -I Sources/CLibSecret) flag
    for flag in $(pkg-config --cflags-only-I libpq libsecret-1 2>/dev/null); do flags+=(-I "${flag#-I}"); done
    printf '%s\n' "${flags[@]}"
}

# surface MODULES_DIR MODULE: the module's public declarations, one a line.
surface() {
    local dir="$1" module="$2" scratch
    scratch="$(mktemp -d)"
    local -a includes
    mapfile -t includes < <(include_flags)
    if ! swift-api-digester -dump-sdk -module "$module" -I "$dir" "${includes[@]}" -avoid-location \
        -avoid-tool-args -module-cache-path "$module_cache" -o "$scratch/$module.json" > "$scratch/log" 2>&1; then
        cat "$scratch/log" >&2
        rm -rf "$scratch"
        echo "api: swift-api-digester could not read module $module in $dir" >&2
        return 1
    fi
    python3 scripts/api-surface.py "$scratch/$module.json"
    rm -rf "$scratch"
}

# compare BASELINE CURRENT: silent when they are the same; else the diff, lines removed from the API first (-).
compare() {
    diff -u --label "$1 (baseline)" --label "$2 (this build)" "$1" "$2"
}

bin_path() { echo "${1:-$(swift build --show-bin-path)}"; }

# Writes every product's interface into folder $2, from the build in $1, the four at once.
dump_all() {
    local dir="$1/Modules" out="$2" module pids=() failed=0
    [[ -d "$dir" ]] || dir="$1"
    for module in "${modules[@]}"; do
        surface "$dir" "$module" > "$out/$module.txt" &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
    return "$failed"
}

case "${1:-}" in
    surface) surface "$2" "$3" ;;
    compare) compare "$2" "$3" ;;
    baseline)
        mkdir -p "$baselines"
        dump_all "$(bin_path "${2:-}")" "$baselines"
        echo "api: wrote $(printf "$baselines/%s.txt " "${modules[@]}")"
        ;;
    count)
        current="$(mktemp -d)"
        trap 'rm -rf "$current"' EXIT
        dump_all "$(bin_path "${2:-}")" "$current"
        for module in "${modules[@]}"; do
            printf '%-14s %4d  (%d without the deprecated names)\n' "$module" \
                "$(grep -vc '\[implicit\]$' "$current/$module.txt")" \
                "$(grep -v '\[implicit\]$' "$current/$module.txt" | grep -vc '\[@Available\]')"
        done
        ;;
    check)
        current="$(mktemp -d)"
        trap 'rm -rf "$current"' EXIT
        dump_all "$(bin_path "${2:-}")" "$current"
        changed=()
        for module in "${modules[@]}"; do
            if ! compare "$baselines/$module.txt" "$current/$module.txt"; then changed+=("$module"); fi
        done
        if [[ ${#changed[@]} -gt 0 ]]; then
            echo "api: the public API of ${changed[*]} is not its baseline (above: - the baseline, + this build)." >&2
            echo "api: if the change is meant, run \`make api-baseline\` and commit api/ with it (and a line in" >&2
            echo "api: CHANGELOG.md for a change that breaks users' code); if not, put the declaration back." >&2
            exit 1
        fi
        echo "api: the public API of ${modules[*]} matches api/"
        ;;
    *)
        sed -n '2,14p' "$0" >&2
        exit 2
        ;;
esac
