#!/usr/bin/env bash
# Installs what building and testing Prefs needs beyond the Swift toolchain: libsodium, libpq (for PrefsPostgres),
# libsecret (for PrefsKeyring) and pkg-config to find them, jq, the PostgreSQL server that the PrefsPostgres tests and
# prefs-bench start, PgBouncer, which they start in front of it, the D-Bus daemon, GNOME Keyring and secret-tool that the keyring tests start and query, and
# Python's jsonschema, which checks that `prefs schema --json-schema` validates what `prefs export` writes (Debian's
# python3-jsonschema; Debian's Python refuses `pip install` into the system, PEP 668).
#
# Another apt or dpkg holding its lock (an unattended upgrade at boot, another build) is waited for, at most
# PREFS_APT_WAIT_SECONDS (600), trying again every PREFS_APT_RETRY_SECONDS (5), with a message saying so.
set -euo pipefail
# jq reads the symbol graphs in scripts/docs.sh.
have_server() { ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && [ -x /usr/sbin/pgbouncer ]; }
have_keyring() {
    command -v dbus-daemon && command -v dbus-send && command -v gnome-keyring-daemon && command -v secret-tool
} >/dev/null 2>&1
have_jsonschema() { python3 -c 'import jsonschema.validators' >/dev/null 2>&1; }
if command -v pkg-config >/dev/null 2>&1 && pkg-config --exists libsodium && pkg-config --exists libpq \
    && pkg-config --exists libsecret-1 && command -v jq >/dev/null 2>&1 && have_server && have_keyring && have_jsonschema; then
    exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
wait_limit="${PREFS_APT_WAIT_SECONDS:-600}"
retry_pause="${PREFS_APT_RETRY_SECONDS:-5}"

# Runs apt-get with these arguments; while it fails because another apt or dpkg holds the lock, waits and tries again,
# until the limit. Any other failure, or the lock still held at the limit, ends the script with apt-get's message.
apt_get() {
    local deadline=$((SECONDS + wait_limit)) said="" output status
    while true; do
        status=0
        output="$(DEBIAN_FRONTEND=noninteractive $sudo apt-get "$@" 2>&1)" || status=$?
        if [ "$status" -eq 0 ]; then return 0; fi
        local holder
        holder="$(grep -m1 -E 'Could not get lock|Unable to acquire the dpkg frontend lock|Unable to lock' <<<"$output" || true)"
        if [ -z "$holder" ]; then
            echo "$output" >&2
            return "$status"
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            echo "install-deps: another apt or dpkg still holds its lock after ${wait_limit} s; let it finish, then run make deps again:" >&2
            echo "$output" >&2
            return "$status"
        fi
        if [ -z "$said" ]; then
            echo "install-deps: another apt or dpkg is running; waiting for it (at most ${wait_limit} s): ${holder#E: }" >&2
            said=1
        fi
        sleep "$retry_pause"
    done
}

echo "Installing libsodium-dev, libpq-dev, libsecret-1-dev, postgresql, pgbouncer, pkg-config, jq, dbus-daemon, dbus-bin," \
    "gnome-keyring, libsecret-tools and python3-jsonschema with apt-get…"
apt_get update -qq
apt_get install -y -qq pkg-config libsodium-dev libpq-dev libsecret-1-dev postgresql pgbouncer jq dbus-daemon dbus-bin \
    gnome-keyring libsecret-tools python3-jsonschema
