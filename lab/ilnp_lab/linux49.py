"""A correspondent that speaks ILNPv6 the way the protocol authors' Linux 4.9.52 kernel
does (github.com/ilnp/ilnp-public-1 at 068701b8: net/ipv6/ilnp6.c, include/net/ilnp6.h,
the ILNP hooks in net/ipv6/{ip6_input,exthdrs,icmp,ip6_checksum,tcp_ipv6}.c), for the
lab and the tests. Written by us from reading that code (file:line below, ilnp6.c unless
named); no code of it is copied.

Its applications are real: the model's namespace keeps its Linux stack, whose sockets
use the host's home address (the first L64:NID, `l64_home`, :1390-1394) and its
correspondents' L64:NID addresses as its hosts table gives them (`is_ilnp6`, :492-559;
fed by the `hosts` command as the patched glibc feeds the netlink socket, :348-372).
Between that stack and the wire sits this process, doing what the kernel's ILNP hooks
do: the stack's packets to a correspondent come out of a TUN device (routes to the
correspondents' L64s point there), leave with the nonce header and the prototype's
checksums on a raw socket (SO_MARK 0x49 routes it out of `iface`); what arrives on
`iface` for our NID is checked as the prototype checks it, and what it accepts goes to
the stack through the TUN with the addresses its sockets know.

What it reproduces (docs/interop.md has the matrix):
  * the padding rule (net/ipv6/exthdrs.c:103-172, ip6_parse_tlv): a run of Pad1/PadN
    longer than 7 bytes, or PadN with a non-zero byte, drops the packet; options are
    read in order, so a nonce option before such padding is still looked at first;
  * `ilnp6_rcv` first (ip6_input.c:265-296, when the first option byte is 0x8B): an
    unknown correspondent gets an entry (:400-457, its locator ACTIVE); a known one's
    source L64 must be in its entry (:757-797: "Invalid L64", dropped before the nonce
    or an LU is read); a local L64 of ours whose 30 s lifetime ran out (`ilcc_expired`,
    :375-384; refreshed only when we send, :866-901) drops what arrives for it (:713-735);
  * one nonce per direction when it initiates (`nonce_local` drawn in `ilnp6_send`,
    :922-926), the correspondent's first nonce kept (`nonce_cn`, :635-650) and every
    later different one dropped ("Invalid nonce"); as responder it sends back the
    initiator's nonce (:661-664); only the first 4 bytes are compared (`uint32_t nonce`,
    ilnp6.h:205-209) and it always sends a 4-byte nonce in an 8-byte header (:928-937);
  * `ILNP_SESSION_TIMEOUT` (30 s, ilnp6.h:85; `session_timeout` here) without a packet
    either way forgets both nonces (:387-397);
  * TCP/UDP checksums over the NIDs only, both ways (ip6_checksum.h:89-123,
    ip6_checksum.c:81-121, tcp_ipv6.c:1463-1490); ICMPv6 over the full addresses
    (icmp.c:823, 068701b8); TCP resets leave from the stack's control socket, without a
    nonce and with a full-address checksum (tcp_ipv6.c:818-900);
  * its Locator Update (`send_lu`, :989-1086): one 16-byte entry (L64, prec and lifetime
    as little-endian uint32), checksum over the NIDs only, sent from its newest locator
    to the correspondent's active one, 6 times 1 s apart (`ilnp6_ret`, :1089-1157) until
    acked; on an LU (`rcv_lu`, :1160-1275) it reads the first entry only, in its own
    layout whatever the message is (an RFC 6743 LU's lifetime is read from bytes 20-23:
    past the end of a one-locator LU, here zeros), makes that L64 ACTIVE and every other
    EXPIRED, and acks in its layout with its own nonce; it sends to the ACTIVE L64
    (:944-966).

Not modelled: the Router Advertisement panic (:1382, `cur_dev` before any socket sent),
the alternating LUs between a deprecated and a new prefix on every RA, soft/hard handoff
sysctls (soft), the 1800 s hosts-table expiry. Commands: hosts, move, state, log, quit.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import secrets
import struct
import subprocess
import time
from dataclasses import dataclass, field

from .addr import groups64, nid_value, upper64
from .peermodel import ModelNode, ModelPeer, serve
from .wire import (DSTOPTS, ICMPV6, LOCATOR_UPDATE, LU_ACK, LU_ADVERT, NONCE_OPT, OPT_PAD1, OPT_PADN, TCP, UDP,
                   l4_checksum)

VALID, ACTIVE, AGED, EXPIRED = 1, 2, 3, 4  # ilnp6.h:72-75
L64_DEFAULT_PREC, L64_DEFAULT_LIFETIME = 10, 30  # ilnp6.h:81-82
SESSION_TIMEOUT = 30  # ilnp6.h:85
LU_SENDS = 6  # ilnp6_ret sends while counter <= 6 (:1128)
MARK, TABLE = 0x49, 149
TUN = "l49tun"


def nid_only(a: bytes) -> bytes:
    return bytes(8) + a[8:]


def l64_of(a: bytes) -> int:
    return int.from_bytes(a[:8], "big")


def nid_of(a: bytes) -> int:
    return int.from_bytes(a[8:], "big")


def addr(l64: int, nid: int) -> bytes:
    return (l64 << 64 | nid).to_bytes(16, "big")


def lu_message(src: bytes, dst: bytes, op: int, l64: int) -> bytes:
    """`send_lu`'s ICMPv6 message (:1006-1043): 1 locator, op, its 16-byte `lu_data`, the
    checksum over the NIDs only (0 sent as 0xffff)."""
    m = struct.pack("!BBHBBH", LOCATOR_UPDATE, 0, 0, 1, op, 0) + l64.to_bytes(8, "big") + \
        struct.pack("<II", L64_DEFAULT_PREC, L64_DEFAULT_LIFETIME)
    c = l4_checksum(nid_only(src), nid_only(dst), ICMPV6, m)
    return m[:2] + struct.pack("!H", c or 0xFFFF) + m[4:]


def verifies(src: bytes, dst: bytes, proto: int, body: bytes) -> bool:
    off = {TCP: 16, UDP: 6, ICMPV6: 2}[proto]
    if len(body) < off + 2:
        return False
    got = struct.unpack_from("!H", body, off)[0]
    zeroed = body[:off] + b"\0\0" + body[off + 2:]
    want = l4_checksum(src, dst, proto, zeroed)
    return got == want or (proto != UDP and {got, want} == {0, 0xFFFF})


def with_csum(src: bytes, dst: bytes, proto: int, body: bytes) -> bytes:
    off = {TCP: 16, UDP: 6, ICMPV6: 2}.get(proto)
    if off is None or len(body) < off + 2:
        return body
    zeroed = body[:off] + b"\0\0" + body[off + 2:]
    return zeroed[:off] + struct.pack("!H", l4_checksum(src, dst, proto, zeroed)) + zeroed[off + 2:]


def ip6(src: bytes, dst: bytes, nh: int, payload: bytes, hlim: int = 64) -> bytes:
    return struct.pack("!IHBB", 0x60000000, len(payload), nh, hlim) + src + dst + payload


@dataclass
class L64:
    """`struct l64_info` (ilnp6.h:113-123)."""
    l64: int
    flag: int = ACTIVE
    lifetime: float = L64_DEFAULT_LIFETIME
    expires: float = 0.0


@dataclass
class Ilcc:
    """`struct ilnp_ilcc` (ilnp6.h:125-136): one per correspondent."""
    nid: int
    remote: list[L64]
    local: list[L64] = field(default_factory=list)
    nonce_local: bytes | None = None  # 4 bytes; None is its 0
    nonce_cn: bytes | None = None
    session_expires: float = 0.0
    stack_l64: int = 0  # the L64 the stack's sockets use for it (lookups are by NID)


class Linux49Node(ModelNode):
    def __init__(self, iface: str, nid: int, l64: int, gateway: str, session_timeout: float):
        self.iface, self.nid, self.home, self.l64s = iface, nid, l64, [l64]
        self.session_timeout = session_timeout
        self.hosts: set[tuple[int, int]] = set()  # the address cache (:175-206)
        self.ilcc: dict[int, Ilcc] = {}
        self.lu_pending: dict[int, dict] = {}  # cn nid -> lu_info (ilnp6.h:169-180)
        self.log: list[dict] = []
        self.counts: dict[str, int] = {}  # packets in and out, by kind
        self.gateway = gateway
        self.open_sockets(iface, mark=MARK)
        self.rx.setsockopt(263, 8, 1)  # SOL_PACKET, PACKET_AUXDATA: tp_status says a checksum is not filled yet
        self.csum_partial = False
        self.tun = self.open_tun()

    # setup
    def open_tun(self) -> int:
        fd = os.open("/dev/net/tun", os.O_RDWR)
        fcntl.ioctl(fd, 0x400454CA, struct.pack("16sH22x", TUN.encode(), 0x0001 | 0x1000))  # TUNSETIFF, TUN|NO_PI
        # the stack's segments leave 8 bytes shorter: room for the nonce header (tcp_output.c:1479-1482)
        for c in (f"ip link set {TUN} mtu 1492 up", f"ip -6 rule add fwmark {MARK} lookup {TABLE}",
                  f"ip -6 route add default via {self.gateway} dev {self.iface} table {TABLE}",
                  f"ethtool -K {self.iface} gro off"):
            subprocess.run(c, shell=True, check=False, capture_output=True)
        return fd

    def route(self, l64: int) -> None:
        """The stack reaches the L64 through the TUN, from the home address."""
        p = f"{groups64(l64).replace(':', '')}"
        prefix = ":".join(p[i:i + 4] for i in range(0, 16, 4)) + "::/64"
        home = str(__import__("ipaddress").IPv6Address(addr(self.home, self.nid)))
        subprocess.run(f"ip -6 route replace {prefix} dev {TUN} src {home}", shell=True, check=False,
                       capture_output=True)

    def recv(self) -> tuple[bytes, tuple]:
        """A packet and whether its checksum is still to be filled (a veth peer's
        CHECKSUM_PARTIAL: the kernel trusts it, skb_checksum_init; so does the model)."""
        pkt, anc, _, info = self.rx.recvmsg(65535, 64)
        self.csum_partial = any(lvl == 263 and t == 8 and struct.unpack_from("I", d)[0] & 8 for lvl, t, d in anc)
        return pkt, info

    def fds(self) -> list:
        return [self.tun]

    def now(self) -> float:
        return time.monotonic()

    def touch(self, e: Ilcc) -> None:
        e.session_expires = self.now() + self.session_timeout

    def l64_entry(self, l64: int, prec: int = L64_DEFAULT_PREC, lifetime: float | None = None) -> L64:
        lt = self.session_timeout if lifetime is None else lifetime  # L64_DEFAULT_LIFETIME, scaled with the session
        return L64(l64, ACTIVE, lt, self.now() + lt)

    # egress: the stack's packet to the wire (`ilnp6_send`, :825-986)
    def readable(self, fd) -> None:
        pkt = os.read(self.tun, 65535)
        if len(pkt) < 40 or pkt[0] >> 4 != 6:
            return
        src, dst, nh, body = pkt[8:24], pkt[24:40], pkt[6], pkt[40:]
        nid = nid_of(dst)
        rst = nh == TCP and len(body) >= 14 and body[13] & 0x04
        e = self.ilcc.get(nid)
        if e is None and (l64_of(dst), nid) in self.hosts and not rst:
            e = self.add_ilcc(l64_of(dst), nid, 30)  # :975-983
        if e is None or rst:
            # not an ILNP host, or a reset from the control socket: plain IPv6 as the stack made it
            self.send(pkt)
            self.count("out_rst_plain" if rst else "out_plain")
            return
        self.touch(e)
        # local L64: a newer ACTIVE one replaces the socket's (:862-901)
        lsrc = self.l64s[-1] if self.l64s else l64_of(src)
        if not any(x.l64 == lsrc for x in e.local):
            e.local.append(self.l64_entry(lsrc))
        for x in e.local:
            if x.l64 == lsrc and x.flag != ACTIVE:
                x.flag, x.expires = ACTIVE, self.now() + x.lifetime
        if e.nonce_local is None:
            e.nonce_local = secrets.token_bytes(4)  # :922-926
        # destination: the ACTIVE L64 (:944-966)
        active = next((x.l64 for x in e.remote if x.flag == ACTIVE), None)
        if active is None:
            for x in e.remote:
                if x.l64 == l64_of(dst):
                    x.flag = ACTIVE
            active = l64_of(dst)
        s, d = addr(lsrc, self.nid), addr(active, nid)
        if nh in (TCP, UDP):
            body = with_csum(nid_only(s), nid_only(d), nh, body)
        elif nh == ICMPV6:
            body = with_csum(s, d, nh, body)
        hdr = bytes([nh, 0, NONCE_OPT, 4]) + e.nonce_local  # :928-937: 4 bytes, 8-byte header
        self.send(ip6(s, d, DSTOPTS, hdr + body, pkt[7]))
        self.count("out_ilnp")

    def count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    # ingress (`ip6_input_finish` -> `ilnp6_rcv`, then the option walk)
    def add_ilcc(self, l64: int, nid: int, prec: int) -> Ilcc:
        e = Ilcc(nid, [self.l64_entry(l64, prec)], stack_l64=l64)
        self.touch(e)
        self.ilcc[nid] = e
        self.note(kind="ilcc_added", nid=nid, l64=groups64(l64))
        return e

    def ilnp6_rcv(self, src: bytes, dst: bytes) -> str | None:
        """:674-822: None to go on, else why it drops."""
        nid, l64 = nid_of(src), l64_of(src)
        e = self.ilcc.get(nid)
        if e is None:
            e = self.add_ilcc(l64, nid, 1000)  # :815-819 ("we cheat here")
        self.touch(e)
        ll = l64_of(dst)
        x = next((x for x in e.local if x.l64 == ll), None)
        if x is None:
            e.local.append(self.l64_entry(ll))
        elif x.flag in (EXPIRED, AGED):
            return "expired_local_l64"  # :722-727
        r = next((r for r in e.remote if r.l64 == l64), None)
        if r is None:
            return "invalid_l64"  # :792-796
        if r.flag == EXPIRED:
            r.flag = ACTIVE  # :769-779
        r.expires = self.now() + r.lifetime
        return None

    def check_nonce(self, src: bytes, nonce: bytes) -> bool:
        """`ilnp6_check_nonce` (:622-671): the first 4 bytes; the first one kept."""
        e = self.ilcc.get(nid_of(src))
        if e is None:
            return True
        n = nonce[:4]
        if e.nonce_cn is None:
            e.nonce_cn = n
        elif e.nonce_cn != n:
            return False
        if e.nonce_local is None:
            e.nonce_local = n  # one nonce both ways as responder (:652-664)
        return True

    def drop(self, why: str, src: bytes, **kw) -> None:
        self.count(f"drop_{why}")
        if self.counts[f"drop_{why}"] > 20:  # the first 20 of each kind in the log
            return
        self.note(kind="drop", why=why, nid=nid_of(src), l64=groups64(l64_of(src)), **kw)

    def input(self, pkt: bytes) -> None:
        if len(pkt) < 40 or pkt[0] >> 4 != 6:
            return
        plen = struct.unpack("!H", pkt[4:6])[0]
        pkt = pkt[:40 + plen]
        src, dst, nh = pkt[8:24], pkt[24:40], pkt[6]
        if nid_of(dst) != self.nid:
            return
        is_ilnp, has_nonce, off = False, None, 40
        if nh == DSTOPTS and len(pkt) >= 48 and pkt[42] == NONCE_OPT:
            why = self.ilnp6_rcv(src, dst)
            if why:
                return self.drop(why, src)
            is_ilnp = True
        if nh == DSTOPTS:
            if len(pkt) < 48:
                return
            hlen = (pkt[41] + 1) * 8
            i, end, pad = 42, 40 + hlen, 0
            while i < end:  # ip6_parse_tlv (exthdrs.c:103-172)
                t = pkt[i]
                if t == OPT_PAD1:
                    pad += 1
                    i += 1
                    if pad > 7:
                        return self.drop("pad_run", src, run=pad)
                    continue
                ln = pkt[i + 1] if i + 1 < end else 255
                if i + 2 + ln > end:
                    return self.drop("bad_option_length", src)
                if t == OPT_PADN:
                    pad += ln + 2
                    if pad > 7:
                        return self.drop("pad_run", src, run=pad)
                    if any(pkt[i + 2:i + 2 + ln]):
                        return self.drop("padn_not_zero", src)
                elif t == NONCE_OPT:  # ilnp6_nonce (exthdrs.c:249-273)
                    if not is_ilnp:
                        is_ilnp = True
                        self.ilnp6_rcv(src, dst)  # its verdict ignored here (exthdrs.c:258-262)
                    if not self.check_nonce(src, pkt[i + 2:i + 2 + ln]):
                        return self.drop("invalid_nonce", src, nonce=pkt[i + 2:i + 2 + ln].hex())
                    has_nonce = pkt[i + 2:i + 2 + ln]
                    pad = 0
                elif t >> 6:  # ip6_tlvopt_unknown: act != 00 drops
                    return self.drop("unknown_option", src, type=t)
                else:
                    pad = 0
                i += 2 + ln
            nh, off = pkt[40], end
        body = pkt[off:]
        if nh == ICMPV6:
            if not self.csum_partial and not verifies(src, dst, ICMPV6, body):  # icmp.c:823
                return self.drop("icmp_checksum", src)
            if body[0] == LOCATOR_UPDATE:
                return self.rcv_lu(src, dst, body, has_nonce)
        elif nh in (TCP, UDP) and is_ilnp and not self.csum_partial:
            if not verifies(nid_only(src), nid_only(dst), nh, body):
                return self.drop("l4_checksum", src, proto=nh)
        self.deliver(src, dst, nh, body, is_ilnp, has_nonce)

    def deliver(self, src: bytes, dst: bytes, nh: int, body: bytes, is_ilnp: bool, nonce: bytes | None) -> None:
        """To the stack, with the addresses its sockets know (sockets are looked up by NID:
        inet6_hashtables.c:100-190)."""
        e = self.ilcc.get(nid_of(src)) if is_ilnp else None
        if e is not None:
            src, dst = addr(e.stack_l64, nid_of(src)), addr(self.home, self.nid)
            body = with_csum(src, dst, nh, body)
        kind = {TCP: "tcp", UDP: "udp", ICMPV6: "icmp"}.get(nh, str(nh))
        self.count(f"in_{kind}")
        os.write(self.tun, ip6(src, dst, nh, body))

    # Locator Updates
    def rcv_lu(self, src: bytes, dst: bytes, m: bytes, nonce: bytes | None) -> None:
        """`rcv_lu` (:1160-1360): its own layout, the first entry only."""
        if nonce is None:
            return self.drop("lu_without_nonce", src)  # :1177-1180
        m = m + bytes(max(0, 24 - len(m)))  # what lies past a short message: zeros here
        op, l64 = m[5], int.from_bytes(m[8:16], "big")
        prec, lifetime = struct.unpack_from("<II", m, 16)
        nid = nid_of(src)
        e = self.ilcc.get(nid)
        self.note(kind="lu" if op == LU_ADVERT else "lu_ack", nid=nid, l64=groups64(l64), lifetime=lifetime,
                  accepted=e is not None)
        if e is None:
            return
        if op == LU_ADVERT:
            found = False
            for x in e.remote:
                if x.l64 == l64:
                    found, x.flag, x.lifetime = True, ACTIVE, lifetime
                    x.expires = self.now() + lifetime
                else:
                    x.flag = EXPIRED  # :1232-1235
            if not found:
                e.remote.insert(0, L64(l64, ACTIVE, lifetime, self.now() + lifetime))
            ack_dst = addr(l64, nid)
            self.send(ip6(dst, ack_dst, DSTOPTS, bytes([ICMPV6, 0, NONCE_OPT, 4]) + (e.nonce_local or bytes(4)) +
                          lu_message(dst, ack_dst, LU_ACK, l64)))
        elif op == LU_ACK:
            p = self.lu_pending.get(nid)
            if p and p["l64"] == l64:
                del self.lu_pending[nid]

    def move(self, l64s: list[int]) -> None:
        """A new prefix (`ilnp6_rcv_ra`, :1363-1527): an LU to every correspondent, from the
        new locator to its active one, the previous local L64 VALID (soft handoff)."""
        self.l64s = list(l64s)
        new = self.l64s[-1]
        for e in self.ilcc.values():
            for x in e.local:
                if x.l64 != new and x.flag == ACTIVE:
                    x.flag = VALID
            if not any(x.l64 == new for x in e.local):
                e.local.append(self.l64_entry(new))
            active = next((x.l64 for x in e.remote if x.flag == ACTIVE), e.remote[0].l64)
            self.lu_pending[e.nid] = {"l64": new, "dst": addr(active, e.nid), "counter": 1, "next": 0.0,
                                      "nonce": e.nonce_local or bytes(4)}
        self.tick()

    def tick(self) -> None:
        now = self.now()
        for nid, p in list(self.lu_pending.items()):
            if now < p["next"]:
                continue
            if p["counter"] > LU_SENDS:
                del self.lu_pending[nid]
                self.note(kind="lu_failed", nid=nid)
                continue
            src = addr(p["l64"], self.nid)
            self.send(ip6(src, p["dst"], DSTOPTS, bytes([ICMPV6, 0, NONCE_OPT, 4]) + p["nonce"] +
                          lu_message(src, p["dst"], LU_ADVERT, p["l64"])))
            self.note(kind="lu_sent", nid=nid, attempt=p["counter"])
            p["counter"] += 1
            p["next"] = now + 1.0
        for e in self.ilcc.values():
            if e.session_expires and now >= e.session_expires and (e.nonce_cn or e.nonce_local):
                e.nonce_cn = e.nonce_local = None  # ilnp6_session_timeout (:387-397)
                self.note(kind="session_timeout", nid=e.nid)
            for x in (*e.remote, *e.local):
                if x.expires and now >= x.expires and x.flag in (ACTIVE, VALID):
                    x.flag = EXPIRED  # ilcc_expired (:375-384)

    def state(self) -> dict:
        def l64s(xs):
            return {groups64(x.l64): x.flag for x in xs}
        return {"l64s": [groups64(x) for x in self.l64s],
                "ilcc": {groups64(n): {"remote": l64s(e.remote), "local": l64s(e.local),
                                       "nonce_local": e.nonce_local.hex() if e.nonce_local else None,
                                       "nonce_cn": e.nonce_cn.hex() if e.nonce_cn else None}
                         for n, e in self.ilcc.items()},
                "lu_pending": [groups64(n) for n in self.lu_pending], "counts": self.counts}

    def command(self, c: dict) -> dict:
        op = c["op"]
        if op == "hosts":  # the netlink messages its glibc sends (:348-372)
            for l, n in c["hosts"]:
                self.hosts.add((upper64(l), nid_value(n)))
                self.route(upper64(l))
            return {}
        if op == "move":
            self.move([upper64(l) for l in c["l64s"]])
            return {}
        raise ValueError(f"unknown op {op!r}")


class Linux49Peer(ModelPeer):
    """The test side: the Linux 4.9 model in `node`, at `l64:nid` on `iface`."""

    module, tag = "ilnp_lab.linux49", "l49"

    def __init__(self, node, iface: str, nid: str, l64: str, gateway: str, session_timeout: float = SESSION_TIMEOUT):
        super().__init__(node, iface, nid, l64, ["--gateway", gateway, "--session-timeout", str(session_timeout)])
        self.session_timeout = session_timeout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iface", required=True)
    ap.add_argument("--nid", required=True)
    ap.add_argument("--l64", required=True)
    ap.add_argument("--gateway", required=True)
    ap.add_argument("--session-timeout", type=float, default=SESSION_TIMEOUT,
                    help="ILNP_SESSION_TIMEOUT and L64_DEFAULT_LIFETIME, seconds (the kernel's: 30)")
    ap.add_argument("--control", required=True)
    a = ap.parse_args()
    serve(Linux49Node(a.iface, nid_value(a.nid), upper64(a.l64), a.gateway, a.session_timeout), a.control)


if __name__ == "__main__":
    main()
