#!/usr/bin/env bash
# Installs what building and testing Prefs needs beyond the Swift toolchain: libsodium, libpq (for PrefsPostgres),
# libsecret (for PrefsKeyring) and pkg-config to find them, jq, the PostgreSQL server that the PrefsPostgres tests and
# prefs-bench start, and the D-Bus daemon, GNOME Keyring and secret-tool that the keyring tests start and query.
set -euo pipefail
# jq reads the symbol graphs in scripts/docs.sh.
have_server() { ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; }
have_keyring() {
    command -v dbus-daemon && command -v dbus-send && command -v gnome-keyring-daemon && command -v secret-tool
} >/dev/null 2>&1
if command -v pkg-config >/dev/null 2>&1 && pkg-config --exists libsodium && pkg-config --exists libpq \
    && pkg-config --exists libsecret-1 && command -v jq >/dev/null 2>&1 && have_server && have_keyring; then
    exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "Installing libsodium-dev, libpq-dev, libsecret-1-dev, postgresql, pkg-config, jq, dbus-daemon, dbus-bin," \
    "gnome-keyring and libsecret-tools with apt-get…"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq pkg-config libsodium-dev libpq-dev libsecret-1-dev \
    postgresql jq dbus-daemon dbus-bin gnome-keyring libsecret-tools >/dev/null
