# Sourced by tests/system/rootfs.sh and scripts/qemu-debian12.sh (with `caller` set to the
# script's name): sets MIRROR to ILNP_TEST_MIRROR, else to the Debian mirror this host's apt
# uses (a deb822 `URIs:` line or a one-line `deb` entry; not the security archive).
host_mirror() {
  { grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' || true
    grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | awk '{print $2}' || true; } |
    grep -v security | head -1 || true
}
MIRROR=${ILNP_TEST_MIRROR:-$(host_mirror)}
[ -n "$MIRROR" ] || { echo "$caller: no Debian mirror in /etc/apt (set ILNP_TEST_MIRROR)" >&2; exit 1; }
