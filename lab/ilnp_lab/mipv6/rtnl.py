"""A few rtnetlink requests made directly (as UMIP does), not through `ip`: under the VM's
TCG emulation each `ip` process costs ~0.3 s, which would land in the handoff being measured.
Routes, addresses (with IFA_F_HOMEADDRESS), proxy neighbour entries, link up, ip6ip6 tunnels
(IFLA_INFO_KIND "ip6tnl", created or given new endpoints). Each request waits for its ACK."""

from __future__ import annotations

import os
import socket
import struct

from .mh import a16

NLM_F_REQUEST, NLM_F_ACK, NLM_F_REPLACE, NLM_F_EXCL, NLM_F_CREATE = 1, 4, 0x100, 0x200, 0x400
NLMSG_ERROR = 2
RTM_NEWLINK, RTM_NEWADDR, RTM_DELADDR, RTM_NEWROUTE, RTM_DELROUTE, RTM_NEWNEIGH, RTM_DELNEIGH = 16, 20, 21, 24, 25, 28, 29
IFLA_IFNAME, IFLA_LINKINFO, IFLA_INFO_KIND, IFLA_INFO_DATA = 3, 18, 1, 2
IFLA_IPTUN_LOCAL, IFLA_IPTUN_REMOTE, IFLA_IPTUN_ENCAP_LIMIT, IFLA_IPTUN_FLAGS, IFLA_IPTUN_PROTO = 2, 3, 6, 8, 9
IP6_TNL_F_IGN_ENCAP_LIMIT = 0x1
IFA_ADDRESS, IFA_LOCAL, IFA_FLAGS = 1, 2, 8
IFA_F_NODAD, IFA_F_HOMEADDRESS = 0x02, 0x10
RTA_DST, RTA_OIF, RTA_GATEWAY, RTA_PRIORITY, RTA_PREFSRC, RTA_TABLE = 1, 4, 5, 6, 7, 15
NDA_DST, NDA_LLADDR = 1, 2
NUD_STALE, NUD_PERMANENT, NTF_PROXY = 0x04, 0x80, 0x08
IFF_UP = 1


def attr(t: int, data: bytes) -> bytes:
    a = struct.pack("HH", 4 + len(data), t) + data
    return a + b"\0" * ((-len(a)) % 4)


class Rtnl:
    def __init__(self):
        self.s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        self.s.bind((0, 0))
        self.seq = 0

    def request(self, typ: int, flags: int, body: bytes, ok_errnos=()) -> None:
        self.seq += 1
        msg = struct.pack("IHHII", 16 + len(body), typ, NLM_F_REQUEST | NLM_F_ACK | flags, self.seq, 0) + body
        self.s.send(msg)
        while True:
            data = self.s.recv(65536)
            i = 0
            while i + 16 <= len(data):
                ln, t, _f, seq, _pid = struct.unpack("IHHII", data[i:i + 16])
                if t == NLMSG_ERROR and seq == self.seq:
                    err = -struct.unpack("i", data[i + 16:i + 20])[0]
                    if err and err not in ok_errnos:
                        raise OSError(err, f"rtnetlink {typ}: {os.strerror(err)}")
                    return
                i += (ln + 3) & ~3

    def link_up(self, ifindex: int, up: bool = True) -> None:
        self.request(RTM_NEWLINK, 0, struct.pack("BxHiII", socket.AF_UNSPEC, 0, ifindex, IFF_UP if up else 0, IFF_UP))

    def tunnel(self, name: str, local: str, remote: str, up: bool = True) -> int:
        """An ip6ip6 tunnel without the encapsulation limit option (UMIP sets IGN_ENCAP_LIMIT:
        the thesis's tunnelled HoTI is 110 bytes); created, or its endpoints changed."""
        data = (attr(IFLA_IPTUN_LOCAL, a16(local)) + attr(IFLA_IPTUN_REMOTE, a16(remote))
                + attr(IFLA_IPTUN_PROTO, bytes([socket.IPPROTO_IPV6]))
                + attr(IFLA_IPTUN_FLAGS, struct.pack("I", IP6_TNL_F_IGN_ENCAP_LIMIT)))
        info = attr(IFLA_INFO_KIND, b"ip6tnl\0") + attr(IFLA_INFO_DATA, data)
        try:
            idx = socket.if_nametoindex(name)
        except OSError:
            idx = 0
        hdr = struct.pack("BxHiII", socket.AF_UNSPEC, 0, idx, 0, 0)
        if idx:  # no IFLA_IFNAME: renaming an up device, even to its own name, is EBUSY
            self.request(RTM_NEWLINK, 0, hdr + attr(IFLA_LINKINFO, info))
        else:
            self.request(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL,
                         hdr + attr(IFLA_IFNAME, name.encode() + b"\0") + attr(IFLA_LINKINFO, info))
            idx = socket.if_nametoindex(name)
        if up:
            self.link_up(idx)
        return idx

    def addr(self, add: bool, ifindex: int, address: str, plen: int, flags: int = 0) -> None:
        body = struct.pack("BBBBi", socket.AF_INET6, plen, flags & 0xFF, 0, ifindex) \
            + attr(IFA_LOCAL, a16(address)) + attr(IFA_ADDRESS, a16(address)) + attr(IFA_FLAGS, struct.pack("I", flags))
        if add:
            self.request(RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE, body)
        else:
            self.request(RTM_DELADDR, 0, body, ok_errnos=(99,))  # EADDRNOTAVAIL: already gone

    def route(self, dst: str, plen: int, oif: int, via: str | None = None, src: str | None = None,
              metric: int | None = None, table: int = 254, delete: bool = False) -> None:
        """Adds (replaces) a route, or with `delete` removes it (gone already: no error)."""
        body = struct.pack("BBBBBBBBI", socket.AF_INET6, plen, 0, 0, min(table, 255), 3, 0, 1, 0)
        # family, dst_len, src_len, tos, table, protocol (boot), scope (universe), type (unicast), flags
        body += attr(RTA_OIF, struct.pack("i", oif)) + attr(RTA_TABLE, struct.pack("I", table))
        if plen:
            body += attr(RTA_DST, a16(dst))
        if via:
            body += attr(RTA_GATEWAY, a16(via))
        if src:
            body += attr(RTA_PREFSRC, a16(src))
        if metric is not None:
            body += attr(RTA_PRIORITY, struct.pack("I", metric))
        if delete:
            self.request(RTM_DELROUTE, 0, body, ok_errnos=(3,))  # ESRCH: no such route
        else:
            self.request(RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE, body)

    def proxy(self, ifindex: int, address: str, delete: bool = False) -> None:
        """A proxy neighbour entry (the HA defending a home address, §10.4.1), or its removal."""
        body = struct.pack("BxxxiHBB", socket.AF_INET6, ifindex, NUD_PERMANENT, NTF_PROXY, 0) + attr(NDA_DST, a16(address))
        if delete:
            self.request(RTM_DELNEIGH, 0, body, ok_errnos=(2,))  # ENOENT: none there
        else:
            self.request(RTM_NEWNEIGH, NLM_F_CREATE | NLM_F_REPLACE, body)


    def neigh(self, ifindex: int, address: str, lladdr: bytes) -> None:
        """A neighbour entry (STALE: the kernel confirms it on use) for `address` at `lladdr`."""
        body = struct.pack("BxxxiHBB", socket.AF_INET6, ifindex, NUD_STALE, 0, 0) + attr(NDA_DST, a16(address)) \
            + attr(NDA_LLADDR, lladdr)
        self.request(RTM_NEWNEIGH, NLM_F_CREATE | NLM_F_REPLACE, body)


def addresses() -> list[tuple[str, int, int, int]]:
    """(address, ifindex, scope (0: global), flags) from /proc/net/if_inet6 (no process, no netlink dump)."""
    out = []
    with open("/proc/net/if_inet6") as f:
        for line in f:
            a, idx, _plen, scope, flags, _name = line.split()
            out.append((socket.inet_ntop(socket.AF_INET6, bytes.fromhex(a)), int(idx, 16), int(scope, 16), int(flags, 16)))
    return out
