"""What the roles ask of the kernel: the sockets (raw MH in, raw IPv6 out, ICMPv6 for RAs and
DAD, netlink for link state), the wildcard-receive xfrm states (`ip xfrm`, once at start) and
the route-optimisation states and policies of a binding (xfrm.py, by netlink). Needs
CONFIG_IPV6_MIP6 (the kernel processes HAO and RH2 only through xfrm states: a
wildcard-receive state lets a first BU's HAO in, as UMIP's `xfrm_cn_init` does).
"""

from __future__ import annotations

import functools
import json
import os
import select
import socket
import struct
import subprocess
import sys
import time

from .mh import IPPROTO_MH, a16, csum16
from .xfrm import XFRM_POLICY_IN, XFRM_POLICY_OUT

IPV6_RECVPKTINFO, IPV6_PKTINFO = 49, 50
IPV6_RECVRTHDR, IPV6_RECVDSTOPTS, IPV6_DSTOPTS = 56, 58, 59
ICMP6_FILTER = 1
RTMGRP_LINK = 1
IFF_UP, IFF_RUNNING, IFF_LOWER_UP = 0x1, 0x40, 0x10000


def has_mip6() -> bool:
    """Does this kernel process the Home Address option (CONFIG_IPV6_MIP6)? It accepts an xfrm
    state with `proto hao` only then (a throwaway one on ::1, removed at once)."""
    r = subprocess.run(["ip", "xfrm", "state", "add", "src", "::1", "dst", "::1", "proto", "hao",
                        "mode", "ro", "coa", "::1"], capture_output=True, text=True)
    if r.returncode == 0:
        subprocess.run(["ip", "xfrm", "state", "delete", "src", "::1", "dst", "::1", "proto", "hao"],
                       capture_output=True)
        return True
    return False


def has_ip6tnl() -> bool:
    """Can this kernel make ip6ip6 tunnels (ip6_tunnel, built in or as a module)? Loads the
    module if there is one."""
    try:
        subprocess.run(["modprobe", "-q", "ip6_tunnel"], capture_output=True)
    except FileNotFoundError:  # no kmod: only a built-in one counts
        pass
    return os.path.isdir("/sys/module/ip6_tunnel")


@functools.cache
def missing() -> list[str]:
    """The kernel features Mobile IPv6's roles need that this kernel lacks (empty: it runs)."""
    return [f for f, ok in (("CONFIG_IPV6_MIP6", has_mip6), ("ip6_tunnel", has_ip6tnl)) if not ok()]


VM_ROUTE = ("scripts/qemu-debian12.sh --guest tests/system/mipv6_guest.py --lab seed000-tcp --quick "
            "--scheme mipv6 --scheme mipv6-ro ...")


def refusal() -> str | None:
    """Why the lab's `--scheme mipv6 / mipv6-ro` does not run here, and where it does (None: it
    runs here)."""
    lack = missing()
    if not lack:
        return None
    return (f"--scheme mipv6/mipv6-ro: this kernel ({os.uname().release}) lacks {', '.join(lack)} (Mobile IPv6 "
            f"needs CONFIG_IPV6_MIP6 for the Home Address option and type 2 routing header, ip6_tunnel for the "
            f"home agent's tunnel): it runs in Debian 12's kernel under qemu: {VM_ROUTE} (docs/mipv6.md)")


class Log:
    """JSON event lines with wall-clock time (one clock for every namespace in the VM)."""

    def __init__(self, role: str, out=sys.stdout):
        self.role, self.out = role, out

    def __call__(self, ev: str, **kw) -> float:
        t = time.time()
        self.out.write(json.dumps({"t": round(t, 6), "role": self.role, "ev": ev, **kw}) + "\n")
        self.out.flush()
        return t


def sh(*args: str, check: bool = True) -> str:
    r = subprocess.run(list(args), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


def ip(*args: str, check: bool = True) -> str:
    return sh("ip", *args, check=check)


def sysctl(key: str, value) -> None:
    with open("/proc/sys/" + key.replace(".", "/"), "w") as f:
        f.write(str(value))


# ---- sockets ---------------------------------------------------------------------------------

def mh_socket() -> socket.socket:
    """Receives every MH message after the kernel's HAO / RH2 processing (the source is then the
    home address), with the destination options (the HAO now holding the care-of address) and
    the routing header as ancillary data. The kernel checks the MH checksum (offset 4)."""
    s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, IPPROTO_MH)
    for opt in (IPV6_RECVPKTINFO, IPV6_RECVDSTOPTS, IPV6_RECVRTHDR):
        s.setsockopt(socket.IPPROTO_IPV6, opt, 1)
    return s


def recv_mh(s: socket.socket) -> tuple[bytes, str, str, str | None]:
    """(MH bytes, source, destination, care-of address from the HAO or None)."""
    data, anc, _flags, addr = s.recvmsg(2048, 512)
    dst, coa = "", None
    for level, typ, d in anc:
        if level == socket.IPPROTO_IPV6 and typ == IPV6_PKTINFO:
            dst = socket.inet_ntop(socket.AF_INET6, d[:16])
        elif level == socket.IPPROTO_IPV6 and typ == IPV6_DSTOPTS:
            i = 2
            while i < len(d):
                if d[i] == 0:
                    i += 1
                    continue
                if d[i] == 201 and d[i + 1] == 16:
                    coa = socket.inet_ntop(socket.AF_INET6, d[i + 2:i + 18])
                i += 2 + d[i + 1]
    return data, addr[0].split("%")[0], dst, coa


IPV6_XFRM_POLICY = 35


def raw_sender() -> socket.socket:
    """IPPROTO_RAW: the packet is sent as built (IPv6 header, HAO, RH2 and MH checksum ours), past
    every xfrm policy (a socket policy that allows without a template, as IKE daemons bypass
    IPsec): else a binding's ro policy would add its RH2 or HAO to packets that carry their own
    or must not have one (the CN's HoT goes to the home address through the HA, §5.2.5, even
    while the CN holds a binding for it)."""
    from .xfrm import XFRM_POLICY_OUT, lifetime_cfg, selector
    s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
    pol = selector("::", "::", 0) + lifetime_cfg() + bytes(32) + struct.pack("=IIBBBB4x", 0, 0, XFRM_POLICY_OUT, 0, 0, 0)
    try:
        s.setsockopt(socket.IPPROTO_IPV6, IPV6_XFRM_POLICY, pol)
    except OSError:
        pass  # a kernel without xfrm: nothing to bypass
    return s


def send_raw(s: socket.socket, pkt: bytes, ifindex: int = 0) -> None:
    dst = socket.inet_ntop(socket.AF_INET6, pkt[24:40])
    s.sendto(pkt, (dst, 0, 0, ifindex))


def icmp6_socket(types: list[int]) -> socket.socket:
    s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
    filt = [0xFFFFFFFF] * 8  # block all, then pass `types`
    for t in types:
        filt[t >> 5] &= ~(1 << (t & 31))
    s.setsockopt(socket.IPPROTO_ICMPV6, ICMP6_FILTER, struct.pack("8I", *filt))
    s.setsockopt(socket.IPPROTO_IPV6, IPV6_RECVPKTINFO, 1)
    return s


def recv_icmp6(s: socket.socket) -> tuple[bytes, str, int]:
    data, anc, _f, addr = s.recvmsg(2048, 256)
    ifindex = 0
    for level, typ, d in anc:
        if level == socket.IPPROTO_IPV6 and typ == IPV6_PKTINFO:
            ifindex = struct.unpack("I", d[16:20])[0]
    return data, addr[0].split("%")[0], ifindex


def parse_ra(b: bytes) -> dict:
    """RFC 4861 §4.2 with RFC 6275 §7.1's H flag and §7.2's R flag (router address)."""
    flags = b[5]
    out = {"home_agent": bool(flags & 0x20), "lifetime": struct.unpack("!H", b[6:8])[0], "prefixes": [], "lladdr": None}
    i = 16
    while i + 2 <= len(b) and b[i + 1]:
        t, ln = b[i], b[i + 1] * 8
        if t == 1 and ln == 8:  # Source Link-layer Address (Ethernet)
            out["lladdr"] = b[i + 2:i + 8]
        if t == 3 and ln == 32:
            plen, pf = b[i + 2], b[i + 3]
            out["prefixes"].append({"prefix": f"{socket.inet_ntop(socket.AF_INET6, b[i + 16:i + 32])}/{plen}",
                                    "router_address": bool(pf & 0x20)})
        i += ln
    return out


def solicited_node(addr: str) -> str:
    return "ff02::1:ff" + a16(addr)[13:].hex()[:2] + ":" + a16(addr)[14:].hex()


def dad_start(home_if: str, target: str) -> socket.socket:
    """RFC 4862 §5.4 for another node's address, as RFC 6275 §10.3.1 asks of a home agent: one
    Neighbor Solicitation from :: to the solicited-node group; returns the socket `dad_wait`
    listens on for a Neighbor Advertisement (or another node's DAD) naming `target`."""
    ifindex = socket.if_nametoindex(home_if)
    group = solicited_node(target)
    icmp = struct.pack("!BBHI", 135, 0, 0, 0) + a16(target)
    pseudo = bytes(16) + a16(group) + struct.pack("!IxxxB", len(icmp), 58)
    c = (~csum16(pseudo + icmp)) & 0xFFFF
    icmp = icmp[:2] + struct.pack("!H", c) + icmp[4:]
    pkt = struct.pack("!IHBB", 6 << 28, len(icmp), 58, 255) + bytes(16) + a16(group) + icmp
    lis = icmp6_socket([135, 136])
    lis.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, home_if.encode())
    s = raw_sender()
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_LOOP, 0)
    try:
        send_raw(s, pkt, ifindex)
    except OSError:
        pass  # the home link without carrier (the MN just left it): nobody to answer either
    s.close()
    return lis


def dad_wait(lis: socket.socket, target: str, until: float) -> bool:
    """Until `until` (monotonic: the NS's time + RetransTimer): True if the address stayed free."""
    try:
        while (left := until - time.monotonic()) > 0:
            if not select.select([lis], [], [], left)[0]:
                break
            data, src, _ = recv_icmp6(lis)
            # an advertisement for it, or another node's DAD for it (ours is not looped back)
            if len(data) >= 24 and data[8:24] == a16(target) and (data[0] == 136 or src == "::"):
                return False
    finally:
        lis.close()
    return True


def link_socket() -> socket.socket:
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
    s.bind((0, RTMGRP_LINK))
    return s


def link_events(s: socket.socket) -> list[tuple[int, bool]]:
    """(ifindex, carrier up) for each RTM_NEWLINK in one netlink read."""
    data = s.recv(65536)
    out, i = [], 0
    while i + 16 <= len(data):
        ln, typ = struct.unpack("IH", data[i:i + 6])
        if typ == 16 and ln >= 32:  # RTM_NEWLINK
            _fam, _pad, _type, idx, flags, _chg = struct.unpack("BBHiII", data[i + 16:i + 32])
            out.append((idx, bool(flags & IFF_UP) and bool(flags & IFF_LOWER_UP)))
        i += (ln + 3) & ~3
        if ln == 0:
            break
    return out


# ---- data plane ------------------------------------------------------------------------------

def xfrm_wildrecv(proto: str, mh_type: int | None) -> None:
    """The wildcard-receive state and optional inbound policy that let HAO (proto hao) or RH2
    (proto route2) packets in before any binding exists (a BU at the HA or CN, a BA at the MN).
    Without the policy the kernel drops what a ro-mode state processed (secpath check)."""
    ip("xfrm", "state", "add", "src", "::", "dst", "::", "proto", proto, "mode", "ro", "coa", "::",
       "flag", "wildrecv", check=False)
    sel = ["proto", "135"] + (["type", str(mh_type)] if mh_type is not None else [])
    ip("xfrm", "policy", "add", "src", "::/0", "dst", "::/0", *sel, "dir", "in", "ptype", "sub",
       "tmpl", "proto", proto, "mode", "ro", "level", "use")


def ro_binding(x, local: str, peer_home: str, peer_coa: str, role: str) -> None:
    """Route optimisation's data plane for one binding (`x`: an xfrm.Xfrm). At the CN (`role`
    "cn"): out, a type 2 routing header (dst peer_coa, RH2 peer_home); in, the HAO. At the MN
    ("mn"; local is its home address, peer_home the CN, peer_coa its own care-of address): out,
    the HAO; in, RH2."""
    out_proto, in_proto = ("route2", "hao") if role == "cn" else ("hao", "route2")
    x.ro_state(local, peer_home, out_proto, peer_coa)
    x.ro_state(peer_home, local, in_proto, peer_coa)
    x.ro_policy(local, peer_home, XFRM_POLICY_OUT, out_proto, optional=False)
    x.ro_policy(peer_home, local, XFRM_POLICY_IN, in_proto, optional=True)


def ro_unbind(x, local: str, peer_home: str, role: str) -> None:
    """Removes what `ro_binding` installed (the binding deleted: the MN back home, §11.5.5; the
    CN's binding cache entry deleted, §9.5.3): the two policies, then the two states."""
    out_proto, in_proto = ("route2", "hao") if role == "cn" else ("hao", "route2")
    x.del_policy(local, peer_home, XFRM_POLICY_OUT)
    x.del_policy(peer_home, local, XFRM_POLICY_IN)
    x.del_state(local, peer_home, out_proto)
    x.del_state(peer_home, local, in_proto)


def unsolicited_na(ifname: str, addr: str) -> None:
    """RFC 6275 §11.5.5's Neighbor Advertisement once the HA acknowledged the deregistration: to
    all-nodes (ff02::1) from the home address, target the home address, S clear, O set, with the
    Target Link-layer Address option (RFC 4861 §4.4, §7.2.6); hop limit 255, the kernel's
    ICMPv6 checksum."""
    with open(f"/sys/class/net/{ifname}/address") as f:
        mac = bytes.fromhex(f.read().strip().replace(":", ""))
    na = struct.pack("!BBHI", 136, 0, 0, 0x20000000) + a16(addr) + bytes([2, 1]) + mac  # O flag, TLLA
    s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, ifname.encode())
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_HOPS, 255)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_IF, socket.if_nametoindex(ifname))
        s.bind((addr, 0))
        s.sendto(na, ("ff02::1", 0, 0, socket.if_nametoindex(ifname)))
    finally:
        s.close()
