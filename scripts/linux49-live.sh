#!/bin/bash
# The seven checks of tests/test_linux49_interop.py against the authors' real Linux 4.9.52
# ILNPv6 kernel (github.com/ilnp/ilnp-public-1 at 068701b8), by hand: not in CI (CI has no
# copy of that source and no KVM). docs/interop.md § The Linux 4.9 prototype.
#
#   sudo scripts/linux49-live.sh            # clone, build, boot, run the checks
#   WORK=/var/tmp/l49 SRC=/path/to/ilnp-public-1 sudo -E scripts/linux49-live.sh
#
# What it does: builds the kernel (tinyconfig + virtio/IPv6 + what its ILNP hooks need,
# Debian 12's gcc), a busybox initramfs with a small static helper (`l49tool`: feeds the
# ILNP hosts table over NETLINK_ILNP = 22 as its patched glibc does, include/uapi/linux/
# netlink.h:36, ilnp6.c:348-372, payload `struct ilnp_cache_entry` {u64 l64, u64 nid, u32
# l64_prec, unsigned long timestamp}, L64 and NID as the address's bytes; and turns GRO off,
# README-ilnp_configure 1.0), boots it under qemu on a tap in namespace l49cn, where ilnpd
# runs (the VM marked linux49 and shared), and runs the checks. The VM runs its side from its
# init script (printing "CHECK <name> PASS|FAIL" on its console); this script runs ilnpd's
# side and prints both. Needs: git, build-essential, flex, bison, bc, libelf-dev, libssl-dev,
# qemu-system-x86, busybox-static, cpio, radvd, curl, and target/release/{ilnpd,ilnpctl}.
set -euo pipefail

REV=068701b8
WORK=${WORK:-/var/tmp/ilnp-linux49}
SRC=${SRC:-$WORK/ilnp-public-1}
BIN=${ILNP_BIN_DIR:-$(cd "$(dirname "$0")/.." && pwd)/target/release}
NS=l49cn
VM_NID=0211:22ff:fe33:4449 VM_NIDP=0211+22ff+fe33+4449
CN_NID=0200:00ff:fe00:000c
VM_L64=2001:db8:b:0 VM_L64_2=2001:db8:f:0 CN_L64=2001:db8:a:0 CN_L64_2=2001:db8:a1:0
IDP=fd69:6c6e:7000:0  # ilnpd's identifier prefix (DEFAULT_IDENTIFIER_PREFIX)
mkdir -p "$WORK"

# 1. the source
if [ ! -d "$SRC/.git" ]; then git clone https://github.com/ilnp/ilnp-public-1 "$SRC"; fi
git -C "$SRC" checkout -q "$REV"

# 2. the kernel: tinyconfig plus what a virtio guest with IPv6, packet sockets and the
#    ILNP hooks (ilnp6.o is always built into ipv6.o: net/ipv6/Makefile:13) needs
if [ ! -f "$SRC/arch/x86/boot/bzImage" ]; then
  make -C "$SRC" ARCH=x86_64 tinyconfig
  "$SRC/scripts/config" --file "$SRC/.config" \
    -e 64BIT -e PRINTK -e TTY -e SERIAL_8250 -e SERIAL_8250_CONSOLE -e BLK_DEV_INITRD -e RD_GZIP \
    -e BINFMT_ELF -e BINFMT_SCRIPT -e PROC_FS -e SYSFS -e DEVTMPFS -e DEVTMPFS_MOUNT -e MULTIUSER \
    -e PCI -e VIRTIO -e VIRTIO_PCI -e VIRTIO_NET -e NETDEVICES -e NET_CORE -e ETHERNET \
    -e NET -e INET -e IPV6 -e PACKET -e UNIX -e SYSCTL -e PROC_SYSCTL -e FUTEX -e EPOLL -e POSIX_TIMERS \
    -e SHMEM -e TMPFS -e FILE_LOCKING -e ETHTOOL_NETLINK
  make -C "$SRC" ARCH=x86_64 olddefconfig
  make -C "$SRC" ARCH=x86_64 -j"$(nproc)" bzImage
fi

# 3. the initramfs: busybox, l49tool, the VM's side of the checks
R="$WORK/root"
rm -rf "$R" && mkdir -p "$R"/{bin,proc,sys,dev,tmp,www}
cp /bin/busybox "$R/bin/" && for a in sh ip ping ping6 nc httpd wget sleep cat echo mount seq head dd wc; do
  ln -sf busybox "$R/bin/$a"; done
dd if=/dev/zero of="$R/www/bulk" bs=1000 count=300 status=none
cat > "$WORK/l49tool.c" <<'EOF'
/* l49tool hosts L64 NID...: one NETLINK_ILNP message per host (ilnp6.c:348-372);
 * l49tool gro-off IFACE: ETHTOOL_SGRO 0 (README-ilnp_configure 1.0). */
#include <arpa/inet.h>
#include <linux/ethtool.h>
#include <linux/netlink.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
struct ilnp_cache_entry { uint64_t l64, nid; uint32_t l64_prec; unsigned long timestamp; };
int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "gro-off")) {
    struct ethtool_value v = { ETHTOOL_SGRO, 0 }; struct ifreq r; int s = socket(AF_INET, SOCK_DGRAM, 0);
    memset(&r, 0, sizeof r); strncpy(r.ifr_name, argv[2], IFNAMSIZ - 1); r.ifr_data = (void *)&v;
    return ioctl(s, SIOCETHTOOL, &r) ? (perror("SIOCETHTOOL"), 1) : 0;
  }
  int s = socket(AF_NETLINK, SOCK_RAW, 22);
  struct sockaddr_nl k = { .nl_family = AF_NETLINK };
  for (int i = 2; i + 1 < argc; i += 2) {
    struct { struct nlmsghdr h; struct ilnp_cache_entry e; } m;
    struct in6_addr l, n;
    memset(&m, 0, sizeof m);
    if (inet_pton(AF_INET6, argv[i], &l) != 1 || inet_pton(AF_INET6, argv[i + 1], &n) != 1) return 2;
    memcpy(&m.e.l64, l.s6_addr, 8); memcpy(&m.e.nid, n.s6_addr + 8, 8); m.e.l64_prec = 10;
    m.h.nlmsg_len = sizeof m; m.h.nlmsg_pid = getpid();
    if (sendto(s, &m, sizeof m, 0, (struct sockaddr *)&k, sizeof k) < 0) { perror("NETLINK_ILNP"); return 1; }
  }
  return 0;
}
EOF
gcc -static -O2 -o "$R/bin/l49tool" "$WORK/l49tool.c"
VM_WIRE=$VM_L64:${VM_NID} CN_WIRE=$CN_L64:${CN_NID}
cat > "$R/init" <<EOF
#!/bin/sh
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
check() { if "\$@" >/dev/null 2>&1; then echo "CHECK \$NAME PASS"; else echo "CHECK \$NAME FAIL"; fi; }
ip link set lo up; ip link set eth0 up; l49tool gro-off eth0
ip -6 addr add $VM_WIRE/64 dev eth0
ip -6 route add $CN_L64::/64 dev eth0; ip -6 route add $CN_L64_2::/64 dev eth0
# an I-LV as its glibc finds it in /etc/hosts: the CN (the hosts form "2001-db8-a-0.200+ff+fe00+c")
l49tool hosts $CN_L64:: ::$CN_NID
cd /www && httpd -p 8080 -h /www
nc -lk -p 7001 -e /bin/cat & nc -u -lk -p 7000 -e /bin/cat &
sleep 8
# 7. a closed port on the ilnpd host first
echo x | nc -u -w1 $CN_WIRE 7999
echo VM-READY
for round in first vm-moved cn-moved idle; do
  read go  # the host types the round's name on the console when its side is ready
  NAME="\$round ping from vm"; check ping -c 3 -W 1 $CN_WIRE
  NAME="\$round udp from vm"; check sh -c "echo ping | nc -u -w2 $CN_WIRE 7000 | grep -q ping"
  NAME="\$round tcp echo from vm"; check sh -c "echo echo-tcp | nc -w3 $CN_WIRE 7001 | grep -q echo-tcp"
  NAME="\$round bulk to vm"; check sh -c "wget -q -O - http://[$CN_WIRE]:8080/bulk | wc -c | grep -q 300000"
  echo "ROUND-DONE \$round"
done
echo VM-DONE
while true; do sleep 60; done
EOF
chmod +x "$R/init"
(cd "$R" && find . | cpio -o -H newc --quiet | gzip > "$WORK/initramfs.gz")

# 4. the host side: namespace, tap, ilnpd, radvd for the VM's move
cleanup() { set +e; [ -n "${QPID:-}" ] && kill "$QPID"; [ -n "${DPID:-}" ] && kill "$DPID"
  [ -n "${RPID:-}" ] && kill "$RPID"; ip netns pids $NS 2>/dev/null | xargs -r kill; ip netns del $NS 2>/dev/null; }
trap cleanup EXIT
ip netns add $NS
ip tuntap add dev l49tap mode tap && ip link set l49tap netns $NS
X() { ip netns exec $NS "$@"; }
X ip link set lo up; X ip link set l49tap up; X ethtool -K l49tap gro off 2>/dev/null || true
X ip -6 addr add $CN_L64::c/64 dev l49tap nodad
X ip -6 route add $VM_L64::/64 dev l49tap; X ip -6 route add $VM_L64_2::/64 dev l49tap
cat > "$WORK/ilnpd.toml" <<EOF
uplinks = ["l49tap"]
nid = "$CN_NID"
control_socket = "$WORK/ilnpd.sock"
state_dir = "$WORK/state"
[peer_interop]
vm = "linux49"
[peer_nonce]
vm = "shared"
[[peer]]
name = "vm"
nid = "$VM_NID"
locators = [{ l64 = "$VM_L64::/64" }]
EOF
# the VM: console on a FIFO pair (its init reads a line per round: we type it)
rm -f "$WORK/con.in" "$WORK/con.out"; mkfifo "$WORK/con.in" "$WORK/con.out"
# its MAC's EUI-64 is its NID, so SLAAC on the RA's new prefix gives VM_L64_2:VM_NID
X qemu-system-x86_64 -m 256 -display none -vga none -no-reboot -kernel "$SRC/arch/x86/boot/bzImage" \
  -initrd "$WORK/initramfs.gz" -append "console=ttyS0 panic=-1 quiet" \
  -netdev tap,id=n0,ifname=l49tap,script=no,downscript=no -device virtio-net-pci,netdev=n0,mac=00:11:22:33:44:49 \
  -serial pipe:"$WORK/con" -monitor none > /dev/null 2>&1 & QPID=$!
# qemu opens the FIFOs before it attaches the tap: open our ends now
exec 3> "$WORK/con.in"; : > "$WORK/console.log"
cat "$WORK/con.out" >> "$WORK/console.log" &
sleep 2
# ilnpd once the tap has its carrier (qemu holds it); the VM's first packet is 8 s after boot
X "$BIN/ilnpd" --config "$WORK/ilnpd.toml" > "$WORK/ilnpd.log" 2>&1 & DPID=$!
sleep 2
# ilnpd's host's servers (on every address: the VM reaches them at our identifier address)
mkdir -p "$WORK/www" && dd if=/dev/zero of="$WORK/www/bulk" bs=1000 count=300 status=none
X python3 -m http.server 8080 --bind :: --directory "$WORK/www" > /dev/null 2>&1 &
X python3 -c '
import socket, threading
u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); u.bind(("::", 7000))
t = socket.socket(socket.AF_INET6, socket.SOCK_STREAM); t.bind(("::", 7001)); t.listen(8)
def udp():
    while True:
        d, a = u.recvfrom(65535); u.sendto(d, a)
threading.Thread(target=udp, daemon=True).start()
while True:
    c, _ = t.accept(); c.sendall(c.recv(100)); c.close()
' &
waitfor() { for _ in $(seq 240); do grep -q "$1" "$WORK/console.log" && return 0; sleep 0.5; done; return 1; }
go() { echo "$1" >&3; waitfor "ROUND-DONE $1"; }
VM_ID=$IDP:$(echo $VM_NID | tr -d ' ')  # the VM's identifier address, what applications here use
ours() {  # ilnpd's side: ping, UDP, TCP echo, bulk from the VM's httpd
  for c in "ping -6 -c 3 -W 1 $VM_ID" "sh -c 'echo ping | nc -6 -u -w2 $VM_ID 7000 | grep -q ping'" \
           "sh -c 'echo echo-tcp | nc -6 -w3 $VM_ID 7001 | grep -q echo-tcp'" \
           "sh -c 'curl -s -g http://[$VM_ID]:8080/bulk | wc -c | grep -q 300000'"; do
    if X sh -c "$c" >/dev/null 2>&1; then echo "CHECK $1 $c PASS"; else echo "CHECK $1 $c FAIL"; fi
  done; }
waitfor VM-READY
go first; ours first
# 4. the VM moves: an RA for a new prefix (its ilnp6_rcv_ra sends LUs; only after a socket
#    sent, or it panics, ilnp6.c:1382)
X ip -6 addr add $VM_L64_2::1/64 dev l49tap nodad
printf 'interface l49tap { AdvSendAdvert on; MinRtrAdvInterval 3; MaxRtrAdvInterval 4; prefix %s::/64 { }; };\n' \
  "$VM_L64_2" > "$WORK/radvd.conf"
X radvd -n -C "$WORK/radvd.conf" -p "$WORK/radvd.pid" & RPID=$!
sleep 6; go vm-moved; ours vm-moved
# 5. ilnpd's host moves
X ip -6 addr add $CN_L64_2::c/64 dev l49tap nodad; sleep 3; go cn-moved; ours cn-moved
# 6. idle past ILNP_SESSION_TIMEOUT (30 s)
sleep 35; go idle; ours idle
grep "^CHECK" "$WORK/console.log"
X "$BIN/ilnpctl" --socket "$WORK/ilnpd.sock" stats | grep -E "bad_nonce|lu_|malformed" || true
