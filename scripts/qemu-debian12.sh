#!/usr/bin/env bash
# Boots Debian 12's own kernel (linux-image-amd64, 6.1.x: no tcx, so ilnpd attaches with a
# clsact qdisc + netlink filter) under qemu and runs tests/system/debian12_guest.py inside:
# two namespaces with ilnpd on both ends, an ILNP session, a move (LU acked), `kill -9` of
# ilnpd mid-session and a restart (UDP loss, filters per hook), a clean stop leaving plain
# IPv6 as it was; then kernel ESP over ILNPv6 (strongSwan, esp6: tests/system/esp_guest.py).
# docs/debian12-kernel.md. Run as root; exits 0 if the guest test passed.
#
#   scripts/qemu-debian12.sh            build what is not cached, boot, test
#   scripts/qemu-debian12.sh --build    only build the cache
#   scripts/qemu-debian12.sh --guest tests/system/mipv6_guest.py [ARGS...]
#                                       run another guest script (ARGS passed on to it), e.g.
#                                       the Mobile IPv6 handoffs (lab/ilnp_lab/mipv6, issue #43)
#
# Cached under ${ILNP_TEST_CACHE:-/var/cache/ilnp-test}/debian12-vm-<key>/ (key: the kernel
# package's version, the package list, the mirror, RECIPE below): vmlinuz and base.cpio, a
# debootstrapped bookworm root (iproute2, python3, iperf3, socat) with the few kernel modules
# the test needs, used as the initramfs (no disk). Built in a temporary directory and renamed
# into place when complete. Each run packs a small second cpio (/init, the guest test,
# target/release/ilnpd and ilnpctl) in a temporary directory, removed at the end, and the VM
# (serial console, no network device) is killed by its pid if it outlives the timeout.
#
# Environment: ILNP_QEMU_ACCEL (tcg; kvm if the host really has it), ILNP_QEMU_CPU (kvm's -cpu,
# default host), ILNP_QEMU_TIMEOUT (s,
# default 900), ILNP_TEST_MIRROR, ILNP_BIN_DIR (default target/release), ILNP_VM_LOG (keep the
# serial log there), ILNP_VM_OUT (a directory: the files a guest prints as an ILNP-OUT block,
# e.g. mipv6_guest.py --lab's run folder, are unpacked there).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
CACHE=${ILNP_TEST_CACHE:-/var/cache/ilnp-test}
RECIPE=4   # bump when the build below changes
# libelf1 and zlib1g: ilnpd's libbpf (the lwt program's loader) links them (iproute2 pulls them too);
# radvd, tcpdump, iputils-ping and the tunnel/xfrm/netem modules: the Mobile IPv6 guest (issue #43);
# strongSwan (charon-systemd, swanctl, the openssl/gcm plugins), python3-pyroute2 (the lab's
# testbed module), esp6, the AES-GCM and authenc modules and drbg (the RNG seqiv's IVs take; a
# module here, so without it every SA is refused) with what its self-tests use: kernel ESP over
# ILNPv6 (issue #44 item 4)
PACKAGES="iproute2,python3,iperf3,socat,procps,kmod,libelf1,zlib1g,radvd,tcpdump,iputils-ping"
PACKAGES="$PACKAGES,charon-systemd,strongswan-swanctl,libstrongswan-standard-plugins,python3-pyroute2"
MODULES="veth tun sch_ingress cls_bpf ip6_tunnel tunnel6 xfrm_user sch_netem sch_tbf"
MODULES="$MODULES esp6 gcm ghash_generic ctr seqiv echainiv aesni_intel authenc drbg jitterentropy_rng sha512_generic sha3_generic"
ACCEL=${ILNP_QEMU_ACCEL:-tcg}
TIMEOUT=${ILNP_QEMU_TIMEOUT:-900}
BIN=${ILNP_BIN_DIR:-$REPO/target/release}

caller=qemu-debian12.sh
. "$REPO/tests/system/debian-mirror.sh"
for c in qemu-system-x86_64 debootstrap cpio; do
  command -v $c >/dev/null || { echo "qemu-debian12.sh: needs $c (apt-get install qemu-system-x86 debootstrap cpio)" >&2; exit 1; }
done

# the kernel package linux-image-amd64 points at (bookworm's, from the host's apt lists)
KPKG=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/{print $2; exit}')
[ -n "$KPKG" ] || { echo "qemu-debian12.sh: apt knows no linux-image-amd64 (apt-get update?)" >&2; exit 1; }
KVER_PKG=$(apt-cache policy "$KPKG" | awk '/Candidate:/{print $2}')
key=$(echo "$RECIPE $KPKG $KVER_PKG $PACKAGES $MODULES $MIRROR" | sha256sum | cut -c1-12)
vm="$CACHE/debian12-vm-$key"

build() {
  mkdir -p "$CACHE"
  local tmp; tmp=$(mktemp -d "$CACHE/.build-vm.XXXXXX")
  trap 'rm -rf --one-file-system "$tmp"' RETURN
  local t0=$SECONDS
  echo "== building $vm ($KPKG $KVER_PKG, bookworm from $MIRROR)" >&2
  (cd "$tmp" && apt-get download "$KPKG" >/dev/null 2>&1) || { echo "apt-get download $KPKG failed" >&2; return 1; }
  dpkg-deb -x "$tmp"/"$KPKG"_*.deb "$tmp/k"
  local kver; kver=$(ls "$tmp/k/lib/modules")
  debootstrap --variant=minbase --include="$PACKAGES" bookworm "$tmp/root" "$MIRROR" >"$tmp/debootstrap.log" 2>&1 || {
    tail -30 "$tmp/debootstrap.log" >&2; return 1; }
  local r=$tmp/root
  rm -rf "$r"/usr/share/{doc,man,info,locale}/* "$r"/var/lib/apt/lists/* "$r"/var/cache/apt/*.bin \
    "$r"/var/cache/apt/archives/*.deb "$r"/var/cache/debconf/*-old
  # the modules the test loads and what they depend on (kmod of the root resolves them), then their index
  mkdir -p "$tmp/mods" "$r/lib/modules" && mv "$tmp/k/lib/modules/$kver" "$r/lib/modules/$kver"
  chroot "$r" depmod "$kver"
  for m in $MODULES; do chroot "$r" modprobe -S "$kver" --show-depends "$m"; done |
    awk '$1 == "insmod" {print $2}' | sort -u >"$tmp/mods.list"
  (cd "$r" && sed 's|^/||' "$tmp/mods.list" | xargs cp --parents -t "$tmp/mods")
  for f in modules.order modules.builtin modules.builtin.modinfo; do cp "$r/lib/modules/$kver/$f" "$tmp/mods/"; done
  rm -rf "$r/lib/modules/$kver" && mkdir -p "$r/lib/modules/$kver"
  cp "$tmp/mods"/modules.* "$r/lib/modules/$kver/" && cp -a "$tmp/mods/lib/modules/$kver/kernel" "$r/lib/modules/$kver/"
  chroot "$r" depmod "$kver"
  echo ilnp-d12 >"$r/etc/hostname"
  (cd "$r" && find . -xdev | LC_ALL=C sort | cpio --quiet -o -H newc >"$tmp/base.cpio")
  cp "$tmp/k/boot/vmlinuz-$kver" "$tmp/vmlinuz"
  echo "$kver" >"$tmp/kver"
  mkdir "$tmp/out" && mv "$tmp/vmlinuz" "$tmp/base.cpio" "$tmp/kver" "$tmp/out/"
  mv "$tmp/out" "$vm"
  echo "== built in $((SECONDS - t0)) s: $(du -sh "$vm/base.cpio" | cut -f1) root" >&2
}

[ -s "$vm/base.cpio" ] || build
[ "${1:-}" = --build ] && { echo "$vm"; exit 0; }
GUEST=$REPO/tests/system/debian12_guest.py
GUEST_ARGS=
if [ "${1:-}" = --guest ]; then
  GUEST=$(realpath "$2"); shift 2
  [ $# -gt 0 ] && GUEST_ARGS=$(printf ' %q' "$@")
fi
[ -f "$GUEST" ] || { echo "qemu-debian12.sh: no guest script $GUEST" >&2; exit 1; }

for b in ilnpd ilnpctl; do
  [ -x "$BIN/$b" ] || { echo "qemu-debian12.sh: no $BIN/$b (cargo build --release)" >&2; exit 1; }
done
work=$(mktemp -d /tmp/ilnp-d12.XXXXXX)
qpid=
cleanup() {
  if [ -n "$qpid" ] && kill -0 "$qpid" 2>/dev/null; then kill "$qpid"; sleep 1; kill -9 "$qpid" 2>/dev/null || true; fi
  [ -n "${ILNP_VM_LOG:-}" ] && cp "$work/serial.log" "$ILNP_VM_LOG" 2>/dev/null || true
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT

# the run's own files, a second cpio appended to the base (later entries win)
mkdir -p "$work/o/usr/local/bin" "$work/o/ilnp"
strip -o "$work/o/usr/local/bin/ilnpd" "$BIN/ilnpd"
strip -o "$work/o/usr/local/bin/ilnpctl" "$BIN/ilnpctl"
cp "$GUEST" "$work/o/ilnp/guest.py"
# the lab's stdlib-only Mobile IPv6 component, importable in the guest as ilnp_lab.mipv6
mkdir -p "$work/o/ilnp/ilnp_lab/mipv6"
cp "$REPO/lab/ilnp_lab/__init__.py" "$work/o/ilnp/ilnp_lab/"
cp "$REPO"/lab/ilnp_lab/mipv6/*.py "$work/o/ilnp/ilnp_lab/mipv6/"
# a guest run with --lab (mipv6_guest.py: `ilnp-lab run ...` inside the VM, issue #43 item 2) gets
# the whole lab, the Python packages it imports from this checkout's .venv under /ilnp/site (the
# host is bookworm too: the guest's Python 3.11 and glibc), ilnp-delayline, and the host's
# ethtool and mptcpize (bookworm binaries; the image has neither)
if [[ " $GUEST_ARGS " == *" --lab "* ]]; then
  # cp -a: the sources keep their mtimes, so the compiled __pycache__ stays valid (recompiling
  # the lab, numpy and matplotlib under TCG costs ~30 s)
  rm -rf "$work/o/ilnp/ilnp_lab" && cp -a "$REPO/lab/ilnp_lab" "$work/o/ilnp/"
  site=$(ls -d "$REPO"/.venv/lib/python3*/site-packages | head -1)
  mkdir -p "$work/o/ilnp/site"
  for p in pyroute2 tqdm scapy matplotlib mpl_toolkits numpy numpy.libs PIL pillow.libs contourpy cycler \
           dateutil fontTools kiwisolver packaging pyparsing six.py; do
    [ -e "$site/$p" ] && cp -a "$site/$p" "$work/o/ilnp/site/"
  done
  find "$work/o/ilnp/site" -depth -type d -name tests -exec rm -rf {} +
  # which code: the lab's own provenance record, taken here (the VM has no git), plus the VM's facts
  PYTHONPATH="$REPO/lab" ILNP_BIN_DIR="$BIN" "$REPO/.venv/bin/python" - "$ACCEL" "$KPKG $KVER_PKG" \
    "$(qemu-system-x86_64 --version | head -1)" >"$work/o/ilnp/host-provenance.json" <<'PY'
import json, sys
from ilnp_lab import provenance
print(json.dumps(provenance.provenance() | {"vm": dict(zip(("accel", "kernel_package", "qemu"), sys.argv[1:]))}))
PY
  strip -o "$work/o/usr/local/bin/ilnp-delayline" "$BIN/ilnp-delayline"
  for f in /usr/sbin/ethtool /usr/bin/mptcpize /usr/lib/x86_64-linux-gnu/mptcpize/libmptcpwrap.so.0*; do
    [ -e "$f" ] && install -D "$f" "$work/o$f" || echo "qemu-debian12.sh: no $f on this host: the lab in the VM runs without it" >&2
  done
fi
# kernel ESP (issue #44 item 4): its stage beside the guest test, the lab's testbed and ipsec
# modules (ilnp_lab.testbed, ilnp_lab.ipsec) and the guide whose swanctl.conf they read (/docs)
cp "$REPO/tests/system/esp_guest.py" "$work/o/ilnp/"
cp "$REPO/lab/ilnp_lab/testbed.py" "$REPO/lab/ilnp_lab/ipsec.py" "$work/o/ilnp/ilnp_lab/"
mkdir -p "$work/o/docs" && cp "$REPO/docs/guide.md" "$work/o/docs/"
cat >"$work/o/init" <<EOF
#!/bin/sh
# PID 1 of the test VM: mounts, runs the guest test, powers off. The verdict goes to the
# serial console as "ILNP-GUEST-RESULT <status>".
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs dev /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm /run /tmp; mount -t devpts devpts /dev/pts; mount -t tmpfs tmpfs /run; mount -t tmpfs tmpfs /tmp
mount -t cgroup2 cgroup2 /sys/fs/cgroup; mount -t bpf bpf /sys/fs/bpf
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
ip link set lo up
echo "ILNP-GUEST-BOOTED \$(cut -d' ' -f1 /proc/uptime) s, kernel \$(uname -r)"
cd /ilnp; PYTHONPATH=/ilnp ILNP_D12_SLOW=1 python3 -u /ilnp/guest.py$GUEST_ARGS; rc=\$?
echo "ILNP-GUEST-RESULT \$rc"
sync; echo o >/proc/sysrq-trigger; sleep 10
EOF
chmod +x "$work/o/init"
(cd "$work/o" && find . | LC_ALL=C sort | cpio --quiet -o -H newc >"$work/run.cpio")
cat "$vm/base.cpio" "$work/run.cpio" >"$work/initrd"

accel=(-accel tcg,thread=multi -cpu max)
# ILNP_QEMU_CPU: e.g. host,-arch-capabilities where a nested KVM refuses that MSR (issue #43's host)
[ "$ACCEL" = kvm ] && accel=(-accel kvm -cpu "${ILNP_QEMU_CPU:-host}")
echo "== booting Debian 12's kernel $(cat "$vm/kver") under qemu ($ACCEL)"
t0=$(date +%s.%N)
qemu-system-x86_64 "${accel[@]}" -smp 2 -m 2048 -display none -no-reboot -nic none \
  -kernel "$vm/vmlinuz" -initrd "$work/initrd" \
  -append "console=ttyS0 rdinit=/init panic=-1 loglevel=6 net.ifnames=0" \
  -serial "file:$work/serial.log" -monitor none &
qpid=$!
# the console without the guest's ILNP-OUT block (files leaving the VM, base64: ILNP_VM_OUT below)
tail -F --pid=$qpid "$work/serial.log" 2>/dev/null | sed -u '/^ILNP-OUT-BEGIN/,/^ILNP-OUT-END/d' &
deadline=$((SECONDS + TIMEOUT))
while kill -0 $qpid 2>/dev/null; do
  if [ $SECONDS -ge $deadline ]; then echo "qemu-debian12.sh: the VM ran past ${TIMEOUT}s: killed" >&2; break; fi
  sleep 1
done
wait "$qpid" 2>/dev/null || true
qpid=
sleep 0.5
t1=$(date +%s.%N)
echo "== VM ran $(echo "$t1 - $t0" | bc) s (wall)"
# ILNP_VM_OUT: the files the guest printed as a base64 tar.gz between ILNP-OUT-BEGIN and -END
if [ -n "${ILNP_VM_OUT:-}" ] && grep -q '^ILNP-OUT-END' "$work/serial.log"; then
  mkdir -p "$ILNP_VM_OUT"
  tr -d '\r' <"$work/serial.log" | sed -n '/^ILNP-OUT-BEGIN/,/^ILNP-OUT-END/{/^ILNP-OUT-/d;p}' | base64 -d | tar xz -C "$ILNP_VM_OUT"
  echo "== the guest's files in $ILNP_VM_OUT"
fi
rc=$(sed -n 's/^ILNP-GUEST-RESULT \([0-9]*\).*/\1/p' "$work/serial.log" | tr -d '\r' | tail -1)
[ "$rc" = 0 ] || { echo "qemu-debian12.sh: guest test failed (status ${rc:-none})" >&2; exit 1; }
echo "== guest test passed"
