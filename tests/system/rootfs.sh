#!/usr/bin/env bash
# Prints the path of a cached minimal Debian 12 (bookworm) root with systemd for
# tests/system/test_systemd.py, building it first if it is not cached yet.
#   /var/cache/ilnp-test/bookworm-<hash of the package list and this script>/
# Built in a temporary directory beside it and renamed into place when complete, so an
# interrupted build never leaves a half root behind. The cached root is never booted
# itself: the test boots a throw-away copy (cp --reflink=auto) of it.
set -euo pipefail
CACHE=${ILNP_TEST_CACHE:-/var/cache/ilnp-test}
caller=rootfs.sh
. "$(dirname "$0")/debian-mirror.sh"
# what the test needs inside: systemd as PID 1, apt (minbase), ip, dig, socat, a user
PACKAGES="systemd,systemd-sysv,dbus,iproute2,bind9-dnsutils,socat,procps,kmod"
key=$( (echo "$PACKAGES $MIRROR"; cat "$0") | sha256sum | cut -c1-12)
root="$CACHE/bookworm-$key"
if [ -x "$root/lib/systemd/systemd" ]; then echo "$root"; exit 0; fi
command -v debootstrap >/dev/null && command -v systemd-nspawn >/dev/null || {
  echo "rootfs.sh: needs debootstrap and systemd-nspawn (apt-get install debootstrap systemd-container)" >&2; exit 1; }
mkdir -p "$CACHE"
tmp=$(mktemp -d "$CACHE/.build.XXXXXX")
trap 'rm -rf --one-file-system "$tmp"' EXIT
debootstrap --variant=minbase --include="$PACKAGES" bookworm "$tmp/root" "$MIRROR" >"$tmp/debootstrap.log" 2>&1 || {
  tail -30 "$tmp/debootstrap.log" >&2; exit 1; }
# a throw-away machine: no apt lists needed (the test installs a local .deb), a fixed
# hostname, root without password (console unused), no getty on the console
echo ilnp-test >"$tmp/root/etc/hostname"
rm -rf "$tmp/root/var/lib/apt/lists/"* "$tmp/root/var/cache/apt/archives/"*.deb
ln -sf /dev/null "$tmp/root/etc/systemd/system/console-getty.service"
ln -sf /dev/null "$tmp/root/etc/systemd/system/getty@.service"
mv "$tmp/root" "$root"
echo "$root"
