#!/usr/bin/env bash
# Installs what building and testing Prefs needs beyond the Swift toolchain: libsodium, libpq (for PrefsPostgres)
# and pkg-config to find them, jq, and the PostgreSQL server that the PrefsPostgres tests and prefs-bench start.
set -euo pipefail
# jq reads the symbol graphs in scripts/docs.sh.
have_server() { ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; }
if command -v pkg-config >/dev/null 2>&1 && pkg-config --exists libsodium && pkg-config --exists libpq \
    && command -v jq >/dev/null 2>&1 && have_server; then
    exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "Installing libsodium-dev, libpq-dev, postgresql, pkg-config and jq with apt-get…"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq pkg-config libsodium-dev libpq-dev postgresql jq >/dev/null
