#!/usr/bin/env bash
# libFuzzer over the three store decoders (JSON file, UserDefaults property list, encrypted vault), with
# AddressSanitizer. Builds the Prefs sources together with Fuzz/FuzzEntry.swift, seeds the corpus with files the
# stores wrote and two hostile ones (a binary plist of shared references, 30 000 nested JSON arrays), then fuzzes
# for PREFS_FUZZ_SECONDS (default 60). Extra arguments go to libFuzzer.
# Leak detection is off by default because Foundation's own property-list parser leaks on malformed input (see
# docs/RELIABILITY.md); PREFS_FUZZ_DETECT_LEAKS=1 ASAN_OPTIONS=detect_leaks=1 turns it on.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${PREFS_FUZZ_SECONDS:-60}"
work=".build/fuzz"
mkdir -p "$work/corpus" "$work/seeds" "$work/artifacts"

swift build --product PrefsTestHelper
helper="$(swift build --show-bin-path)/PrefsTestHelper"
rm -rf "$work/seeds"/*
"$helper" write-fixtures "json:$work/seeds/store.json" >/dev/null
"$helper" write-fixtures "plist:$work/seeds:suite" >/dev/null
"$helper" write-fixtures "vault:$work/seeds/secrets.vault:$work/seeds/secrets.key" >/dev/null
"$helper" write-hostile-files "$work/seeds" >/dev/null
cp "$work/seeds/store.json" "$work/seeds/suite.plist" "$work/seeds/secrets.vault" "$work/seeds/shared.plist" \
    "$work/seeds/deep.json" "$work/corpus/"

swiftc -sanitize=fuzzer,address -parse-as-library -O -module-name Prefs -package-name prefs -swift-version 6 \
    -enable-upcoming-feature ExistentialAny -enable-upcoming-feature MemberImportVisibility \
    -enable-upcoming-feature InternalImportsByDefault \
    -I Sources/CSodium $(find Sources/Prefs -name '*.swift' | sort) Fuzz/FuzzEntry.swift -lsodium \
    -o "$work/prefs-fuzz"

ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}" PREFS_FUZZ_KEY="$work/seeds/secrets.key" "$work/prefs-fuzz" -max_total_time="$seconds" -max_len=65536 \
    -artifact_prefix="$work/artifacts/" -print_final_stats=1 -detect_leaks="${PREFS_FUZZ_DETECT_LEAKS:-0}" "$@" "$work/corpus"
