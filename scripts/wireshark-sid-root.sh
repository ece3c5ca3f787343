#!/usr/bin/env bash
# Builds the Debian sid root with Wireshark's tshark 4.6 that tests/test_wireshark_lua.py's
# test_sid_tshark_46_as_documented runs (what docs/wireshark.md says of Wireshark >= 4.6's own
# ILNP dissector), and prints its path:
#   ${ILNP_TEST_CACHE:-/var/cache/ilnp-test}/sid-tshark/
# A check by hand, not part of scripts/test.sh or CI (docs/wireshark.md § "Wireshark ≥ 4.6's own
# ILNP dissector" says why and how):
#   sudo scripts/wireshark-sid-root.sh && sudo .venv/bin/python -m pytest -q tests/test_wireshark_lua.py -k sid
# debootstrap --variant=minbase sid, then `apt-get install --no-install-recommends tshark`
# inside (systemd-nspawn, the host's network). sid moves on: if its tshark is no longer 4.6
# the build stops and says so; ILNP_SID_MIRROR=http://snapshot.debian.org/archive/debian/<date>/
# takes sid as it was on that date (Release files' Valid-Until is not checked: a snapshot's
# has passed). Built in a temporary directory beside it and renamed into
# place when complete; `--rebuild` replaces a root built before.
set -euo pipefail
CACHE=${ILNP_TEST_CACHE:-/var/cache/ilnp-test}
MIRROR=${ILNP_SID_MIRROR:-http://deb.debian.org/debian}
root="$CACHE/sid-tshark"
if [ "${1:-}" != --rebuild ] && [ -x "$root/usr/bin/tshark" ]; then echo "$root"; exit 0; fi
[ "$(id -u)" = 0 ] || { echo "wireshark-sid-root.sh: run as root (debootstrap)" >&2; exit 1; }
command -v debootstrap >/dev/null && command -v systemd-nspawn >/dev/null || {
  echo "wireshark-sid-root.sh: needs debootstrap and systemd-nspawn (scripts/setup.sh installs them)" >&2; exit 1; }
mkdir -p "$CACHE"
tmp=$(mktemp -d "$CACHE/.build-sid.XXXXXX")
trap 'rm -rf --one-file-system "$tmp"' EXIT
t0=$SECONDS
debootstrap --variant=minbase sid "$tmp/root" "$MIRROR" >"$tmp/debootstrap.log" 2>&1 || {
  tail -30 "$tmp/debootstrap.log" >&2; exit 1; }
systemd-nspawn -q --register=no --keep-unit --as-pid2 -D "$tmp/root" --setenv=DEBIAN_FRONTEND=noninteractive sh -c '
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get -o Acquire::Check-Valid-Until=false update -q && apt-get install -y -q --no-install-recommends tshark' >"$tmp/apt.log" 2>&1 || {
  tail -30 "$tmp/apt.log" >&2; exit 1; }
version=$(chroot "$tmp/root" dpkg-query -W -f '${Version}' tshark)
case "$version" in
  4.6.*) ;;
  *) echo "wireshark-sid-root.sh: sid's tshark is $version, not 4.6 (what the test and docs/wireshark.md pin):" \
          "ILNP_SID_MIRROR=http://snapshot.debian.org/archive/debian/<a date when sid had 4.6>/" >&2; exit 1 ;;
esac
rm -rf "$tmp/root/var/lib/apt/lists/"* "$tmp/root/var/cache/apt/archives/"*.deb
[ "${1:-}" = --rebuild ] && rm -rf --one-file-system "$root"
mv "$tmp/root" "$root"
echo "wireshark-sid-root.sh: tshark $version, built in $((SECONDS - t0)) s" >&2
echo "$root"
