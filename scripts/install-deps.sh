#!/usr/bin/env bash
# Installs what building Prefs needs beyond the Swift toolchain: libsodium (and pkg-config to find it).
set -euo pipefail
# jq reads the symbol graphs in scripts/docs.sh.
if command -v pkg-config >/dev/null 2>&1 && pkg-config --exists libsodium && command -v jq >/dev/null 2>&1; then
    exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "Installing libsodium-dev, pkg-config and jq with apt-get…"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq pkg-config libsodium-dev jq >/dev/null
