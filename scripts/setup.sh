#!/usr/bin/env bash
# Installs everything ilnp needs on a fresh Debian 12 machine and builds it.
# Idempotent; run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ]; then echo "setup.sh: run as root (namespaces, BPF, apt-get)" >&2; exit 1; fi

export DEBIAN_FRONTEND=noninteractive
need_apt=0
for b in clang llc bpftool tshark tcpdump radvd iperf3 socat nc ethtool curl ping mptcpize unshare named dig tsig-keygen debootstrap systemd-nspawn prometheus qemu-system-x86_64 cpio conntrack charon-systemd swanctl pki wg wireguard-go; do
  command -v "$b" >/dev/null 2>&1 || need_apt=1
done
[ -f /usr/include/bpf/bpf_helpers.h ] || need_apt=1
[ -f /usr/lib/ipsec/plugins/libstrongswan-kernel-libipsec.so ] && [ -f /usr/lib/ipsec/plugins/libstrongswan-openssl.so ] || need_apt=1
[ -f /usr/include/libelf.h ] && [ -f /usr/include/zlib.h ] || need_apt=1
if [ "$need_apt" = 1 ]; then
  echo "== apt-get install"
  apt-get update -q
  # tshark asks about non-root capture on install; answer no
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  # packages with a service (bind9, prometheus) must not start one on this host: the tests
  # run their own, in namespaces (policy-rc.d 101 = "not now", Debian policy §9.3.3)
  policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    policy=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\nexit 101\n' > "$policy"; chmod +x "$policy"
    trap 'rm -f "$policy"' EXIT
  fi
  # libelf-dev, zlib1g-dev: the libbpf that libbpf-rs builds into ilnpd (the lwt program's loader)
  apt-get install -y -q clang llvm libbpf-dev libelf-dev zlib1g-dev bpftool linux-libc-dev gcc-multilib \
    tshark tcpdump radvd iperf3 socat netcat-openbsd ethtool nftables curl python3-venv iputils-ping \
    mptcpize util-linux bind9 bind9-utils bind9-dnsutils debootstrap systemd-container conntrack
  # the metrics test's scraper (tests/test_metrics.py); its web UI's JS packages are not needed;
  # qemu and cpio boot Debian 12's own kernel (scripts/qemu-debian12.sh)
  apt-get install -y -q --no-install-recommends prometheus qemu-system-x86 cpio
  # IKEv2 + ESP over ILNPv6 (tests/test_ipsec.py, bench/ipsec.py): strongSwan with its
  # user-space ESP (kernel-libipsec, libcharon-extra-plugins) for kernels without esp6, and
  # WireGuard's tools with its user-space implementation for kernels without the module
  apt-get install -y -q --no-install-recommends strongswan-swanctl charon-systemd strongswan-pki \
    libcharon-extra-plugins libstrongswan-standard-plugins wireguard-tools wireguard-go
  if [ -n "$policy" ]; then rm -f "$policy"; fi
fi

if ! command -v cargo >/dev/null 2>&1; then
  [ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "== apt-get install cargo (no rustup toolchain found)"
  apt-get install -y -q cargo rustc
fi

# cargo-fuzz: the README's test command runs the bounded fuzz step (fuzz/run-all.sh)
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "== cargo install cargo-fuzz"
  cargo install cargo-fuzz --locked --quiet
fi

# cargo-deb: scripts/package.sh builds the Debian package with it (scripts/test.sh --system)
if ! cargo deb --version >/dev/null 2>&1; then
  echo "== cargo install cargo-deb"
  cargo install cargo-deb --locked --quiet
fi

echo "== python venv (.venv) with the lab package"
if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
.venv/bin/pip install -q --upgrade pip >/dev/null
.venv/bin/pip install -q -e 'lab[test]'

echo "== cargo build --release"
cargo build --release --workspace --quiet
echo "setup done: binaries in target/release"
