"""A correspondent that speaks ILNPv6 the way the protocol authors' FreeBSD 14 ILNP6
does (github.com/ilnp/ilnp-freebsd14, commit cd3ca6af1), for the lab and the tests.
Written by us from reading that code (file:line below); no code of it is copied.

What it reproduces (docs/interop.md has the matrix):
  * one nonce per correspondent, both directions (`ilnp6.h:320-323`: `n_lnonce` and
    `n_rnonce` are the same field `n_nonce`): an initiator draws it at random
    (`ilnp6.c:1366-1369`) and overwrites it with the first nonce it receives
    (`ilnp6.c:1713-1724`); a responder takes the initiator's (`ilnp6.c:1614-1633`);
  * a connected socket keeps the nonce copied at connect time (`ip6_setpktopts_ilnp_nonce`,
    `ip6_output.c:2536-2541`): its data carry that one, whatever the entry holds later;
  * data are never dropped for a wrong or unknown nonce (`ilnp6.c:1700-1740`); only
    LUs are authenticated, against the entry's nonce (`foreignnid_lookup_nonce`,
    `ilnp6.c:1441-1458`);
  * ICMPv6 replies (Echo Reply, LU ack) reflect the nonce of the packet they answer,
    in a header built with `ip6d_len = 0` (`ilnp6_nonce_output_mbuf`, `ilnp6.c:2152-2178`,
    called from `icmp6_reflect`, `icmp6.c:2222-2231`): with a 12-byte nonce only the
    first 8 bytes of the 16-byte option header reach the wire;
  * its own headers are unpadded: 8 bytes for a 4-byte nonce, 16 for 12
    (`ilnp6.c:2196-2200`), in the final-destination position `ip6po_dest2`, i.e.
    after a Fragment header when the datagram is fragmented (`ip6_output.c:546-548`);
  * TCP/UDP checksum with locators zeroed (`ilnp6.c:3309-3429`), ICMPv6 over full
    addresses; Locator Update: type 156, code 0, byte 4 = number of L64s, byte 5 =
    operation (1 advertisement, 2 ack), entries {L64, pref u16, lifetime u16}, every
    local L64 listed with preference 10 (`nd6_rtr.c:528-531`) and lifetime 300 s; retransmitted
    up to 7 times at n x 1 s (`ilnp6.c:2792-2968`); the ack is the advertisement reflected
    with operation 2 (`icmp6.c:878-926`);
  * the listener bug: a listening socket looked up for one ILNP host is connected to
    that host's entry (`in6_pcb.c:1344-1360`), and every socket accepted later copies
    its options (`tcp_syncache.c:912-927`): a second host's connection is sent the
    first host's nonce. Here: a UDP service port replies from one listener socket
    whose nonce is set by the first peer it hears.

Run in a network namespace (`FreeBsdPeer.start`), controlled over a Unix datagram
socket with JSON commands: connect, send, ping, lu, frag, listen, state, log, quit.
Sockets, control loop and test side: `peermodel` (shared with the Linux 4.9 model).
"""

from __future__ import annotations

import argparse
import secrets
import struct
import threading
import time
from dataclasses import dataclass, field

from .addr import groups64, nid_value, upper64
from .peermodel import ModelNode, ModelPeer, serve
from .wire import (DSTOPTS, ECHO_REPLY, ECHO_REQUEST, FRAGMENT, ICMPV6, LOCATOR_UPDATE, LU_ACK, LU_ADVERT, LU_ENTRY,
                   LU_HDR, NO_NEXT, NONCE_OPT, UDP, icmp6, ip6, lu_body, udp, walk)

LU_TTL = 300  # net.inet6.ilnp6.luttl
LU_MAX_RETRANS = 7  # net.inet6.ilnp6.lumaxretrans
LOCAL_PREF = 10  # every RA prefix (nd6_rtr.c)


def nonce_header(nxt: int, nonce: bytes, reflected: bool = False) -> bytes:
    """FreeBSD's DestOpts header: the option alone, unpadded; a reflected one says
    ip6d_len = 0 whatever the nonce's size, and only 8 bytes are sent."""
    opt = bytes([nxt, 0, NONCE_OPT, len(nonce)]) + nonce
    if reflected:
        return opt[:8]
    return bytes([nxt, len(opt) // 8 - 1]) + opt[2:]


@dataclass
class Entry:
    """`struct foreignnid`: one per correspondent."""
    nid: int
    l64s: list[int]
    nonce: bytes
    nonce_set: bool = False
    lu_pending: dict | None = None
    lnid: int | None = None  # `n_lnid`: the local NID it uses (None: the node's NID)


@dataclass
class Parsed:
    src: bytes
    dst: bytes
    nonce: bytes | None = None
    nonce_truncated: bool = False
    frag: tuple[int, bool, int] | None = None  # (offset, more, id)
    proto: int = 0
    body: bytes = b""


_WALKED = frozenset({DSTOPTS, FRAGMENT})


def parse(pkt: bytes) -> Parsed | None:
    """Through Destination Options and Fragment headers (the last nonce found counts), up to
    the upper layer or a fragment that is not the first."""
    if len(pkt) < 40 or pkt[0] >> 4 != 6:
        return None
    plen = struct.unpack("!H", pkt[4:6])[0]
    h = walk(pkt, through=_WALKED)
    return Parsed(src=pkt[8:24], dst=pkt[24:40], nonce=h.nonces[-1] if h.nonces else None, nonce_truncated=h.nonce_cut,
                  frag=h.frag, proto=h.proto, body=bytes(pkt[h.off:40 + plen]))


@dataclass
class FreeBsdNode(ModelNode):
    iface: str
    nid: int
    l64s: list[int]
    nonce_size: int = 4
    entries: dict[int, Entry] = field(default_factory=dict)
    sockets: dict[tuple[int, int], bytes] = field(default_factory=dict)  # (peer nid, port) -> socket nonce
    listeners: dict[int, bytes | None] = field(default_factory=dict)  # port -> listener's nonce
    log: list[dict] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    ephemeral: set[int] = field(default_factory=set)  # ILNP6_LOCAL_EPHEMERAL NIDs drawn

    def __post_init__(self):
        self.open_sockets(self.iface)

    # addresses
    def addr(self, l64: int | None = None, nid: int | None = None) -> bytes:
        return ((l64 if l64 is not None else self.l64s[0]) << 64 | (nid or self.nid)).to_bytes(16, "big")

    # ephemeral NIDs (`localnid_add_ephemeral`, `ilnp6.c`; the pool refilled by `ilcc_purge`)
    def draw_ephemeral(self) -> int:
        """8 random bytes (arc4random_buf): not zero, not in the reserved subnet-anycast
        range (first 32 bits FDFFFFFF, next >= FFFFFF80), not a local NID; no u/g rule (the
        g bit may be set). Its L64:NID goes on the interface of every local L64, so Neighbour
        Discovery answers for it (`localnid_update_locked`)."""
        while True:
            n = int.from_bytes(secrets.token_bytes(8), "big")
            if n and not (n >> 32 == 0xFDFFFFFF and n & 0xFFFFFFFF >= 0xFFFFFF80) and n != self.nid \
                    and n not in self.ephemeral:
                break
        return self.adopt_ephemeral(n)

    def adopt_ephemeral(self, n: int) -> int:
        """`n` as a local ephemeral NID, its L64:NID on the interface."""
        import subprocess
        self.ephemeral.add(n)
        for l in self.l64s:
            a = ":".join(f"{(l << 64 | n) >> (112 - 16 * i) & 0xFFFF:x}" for i in range(8))
            subprocess.run(["ip", "-6", "addr", "add", f"{a}/64", "dev", self.iface, "nodad"], check=False)
        self.note(kind="ephemeral_nid", nid=n)
        return n

    def is_local(self, nid: int) -> bool:
        return nid == self.nid or nid in self.ephemeral

    def peer_addr(self, e: Entry) -> bytes:
        return (e.l64s[0] << 64 | e.nid).to_bytes(16, "big")

    # the initiator's side
    def connect(self, nid: int, l64s: list[int], port: int, ephemeral: bool = False, lnid: int | None = None) -> Entry:
        """`ilnp6_pcbconnect`: an entry from the hosts line (random nonce) unless one
        exists; the socket copies the entry's nonce now. `ephemeral`: from a NID of the
        ephemeral pool (`lnid`: that one, drawn by the caller)."""
        e = self.entries.get(nid)
        if e is None:
            e = Entry(nid, list(l64s), secrets.token_bytes(self.nonce_size))
            if lnid is not None:
                e.lnid = self.adopt_ephemeral(lnid)
            elif ephemeral:
                e.lnid = self.draw_ephemeral()
            self.entries[nid] = e
        self.sockets[(nid, port)] = e.nonce
        return e

    def send_udp(self, nid: int, sport: int, dport: int, payload: bytes, nonce: bytes | None = None) -> None:
        e = self.entries[nid]
        n = nonce or self.sockets.get((nid, sport)) or e.nonce
        src, dst = self.addr(nid=e.lnid), self.peer_addr(e)
        self.send(ip6(src, dst, DSTOPTS, nonce_header(UDP, n) + udp(src, dst, sport, dport, payload)))

    def send_frag(self, nid: int, sport: int, dport: int, payload: bytes, mtu: int = 1280) -> int:
        """One UDP datagram in fragments: IPv6 | Fragment | DestOpts(nonce) | UDP... in the
        first, IPv6 | Fragment | data in the others (the nonce is `ip6po_dest2`)."""
        e = self.entries[nid]
        n = self.sockets.get((nid, sport)) or e.nonce
        src, dst = self.addr(nid=e.lnid), self.peer_addr(e)
        part = nonce_header(UDP, n) + udp(src, dst, sport, dport, payload)
        ident, chunk, off, count = secrets.randbits(32), (mtu - 48) // 8 * 8, 0, 0
        while off < len(part):
            data = part[off:off + chunk]
            more = off + chunk < len(part)
            fh = struct.pack("!BBHI", DSTOPTS, 0, (off // 8) << 3 | int(more), ident)
            self.send(ip6(src, dst, FRAGMENT, fh + data))
            off, count = off + chunk, count + 1
        return count

    def ping(self, nid: int, ident: int, seq: int) -> None:
        e = self.entries[nid]
        src, dst = self.addr(nid=e.lnid), self.peer_addr(e)
        m = icmp6(src, dst, ECHO_REQUEST, 0, struct.pack("!HH", ident, seq) + b"freebsd-ping")
        self.send(ip6(src, dst, DSTOPTS, nonce_header(ICMPV6, e.nonce) + m))

    # Locator Updates
    def lu_body(self, op: int, l64s: list[int]) -> bytes:
        return lu_body(op, [(l, LOCAL_PREF, LU_TTL) for l in l64s])

    def send_lu(self, nid: int, attempt: int = 1) -> None:
        e = self.entries[nid]
        src, dst = self.addr(nid=e.lnid), self.peer_addr(e)
        m = icmp6(src, dst, LOCATOR_UPDATE, 0, self.lu_body(LU_ADVERT, self.l64s))
        self.send(ip6(src, dst, DSTOPTS, nonce_header(ICMPV6, e.nonce) + m))
        e.lu_pending = {"attempt": attempt, "next": time.monotonic() + attempt * 1.0}
        self.note(kind="lu_sent", nid=nid, nonce=e.nonce.hex(), attempt=attempt)

    def move(self, l64s: list[int]) -> None:
        """New local L64s (an RA): an LU to every correspondent; every ephemeral NID's
        L64:NID on the interface too (`locall64_update` adds each local NID's)."""
        self.l64s = list(l64s)
        for n in self.ephemeral:
            self.adopt_ephemeral(n)
        for nid in list(self.entries):
            self.send_lu(nid)

    def tick(self) -> None:
        now = time.monotonic()
        for e in self.entries.values():
            p = e.lu_pending
            if p and now >= p["next"]:
                if p["attempt"] >= LU_MAX_RETRANS:
                    e.lu_pending = None
                    self.note(kind="lu_failed", nid=e.nid)
                else:
                    self.send_lu(e.nid, p["attempt"] + 1)

    # input
    def nonce_input(self, src_nid: int, src_l64: int, nonce: bytes, dst_nid: int | None = None) -> Entry:
        """`ilnp6_nonce_input`: store the nonce; never a reason to drop."""
        e = self.entries.get(src_nid)
        if e is None:  # a responder: the initiator's nonce both ways
            e = Entry(src_nid, [src_l64], nonce, nonce_set=True,
                      lnid=dst_nid if dst_nid != self.nid else None)
            self.entries[src_nid] = e
        elif not e.nonce_set:  # an initiator: the first nonce it receives
            e.nonce, e.nonce_set = nonce, True
        if src_l64 not in e.l64s:
            e.l64s.append(src_l64)
        return e

    def reflect(self, p: Parsed, typ: int, rest: bytes) -> None:
        """`icmp6_reflect`: back to the source, the received nonce in a header of
        `ip6d_len = 0`."""
        src, dst = p.dst, p.src
        m = icmp6(src, dst, typ, 0, rest)
        self.send(ip6(src, dst, DSTOPTS, nonce_header(ICMPV6, p.nonce, reflected=True) + m))

    def input(self, pkt: bytes) -> None:
        p = parse(pkt)
        if p is None or not self.is_local(int.from_bytes(p.dst[8:], "big")):
            return
        src_l64, src_nid = int.from_bytes(p.src[:8], "big"), int.from_bytes(p.src[8:], "big")
        if p.frag and p.frag[0] > 0:
            self.note(kind="fragment", nid=src_nid)
            return
        if p.nonce is None:
            self.note(kind="plain", nid=src_nid, proto=p.proto)
            return
        e = self.nonce_input(src_nid, src_l64, p.nonce, int.from_bytes(p.dst[8:], "big"))
        nonce = p.nonce.hex()
        if p.proto == UDP and len(p.body) >= 8:
            sport, dport = struct.unpack("!HH", p.body[:4])
            payload = p.body[8:]
            self.note(kind="udp", nid=src_nid, nonce=nonce, sport=sport, dport=dport, payload=payload.decode(errors="replace"))
            if dport in self.listeners:  # the echo service, from one listener socket
                if self.listeners[dport] is None:
                    self.listeners[dport] = p.nonce  # connected to the first host's entry
                self.send_udp(src_nid, dport, sport, payload, nonce=self.listeners[dport])
        elif p.proto == ICMPV6 and p.body:
            t = p.body[0]
            if t == ECHO_REQUEST:
                self.note(kind="echo_request", nid=src_nid, nonce=nonce)
                self.reflect(p, ECHO_REPLY, p.body[4:])
            elif t == ECHO_REPLY:
                self.note(kind="echo_reply", nid=src_nid, nonce=nonce)
            elif t == LOCATOR_UPDATE and len(p.body) >= 8:
                num, op = p.body[4], p.body[5]
                if num == 0 or len(p.body) < LU_HDR + LU_ENTRY.size * num:
                    return
                # authenticated: <NID, nonce> must match the entry (foreignnid_lookup_nonce)
                ok = e.nonce_set and p.nonce == e.nonce
                l64s = [LU_ENTRY.unpack_from(p.body, LU_HDR + LU_ENTRY.size * i)[0] for i in range(num)]
                self.note(kind="lu" if op == LU_ADVERT else "lu_ack", nid=src_nid, nonce=nonce, accepted=ok,
                          l64s=[groups64(l) for l in l64s])
                if not ok:
                    return
                if op == LU_ADVERT:
                    e.l64s = l64s  # the whole list replaced
                    self.reflect(p, LOCATOR_UPDATE, bytes([num, LU_ACK]) + p.body[6:])
                elif op == LU_ACK:
                    e.lu_pending = None
        elif p.proto == NO_NEXT:
            self.note(kind="nonce_only", nid=src_nid, nonce=nonce)

    def state(self) -> dict:
        return {
            "l64s": [groups64(l) for l in self.l64s],
            "entries": {groups64(n): {"l64s": [groups64(l) for l in e.l64s], "nonce": e.nonce.hex(),
                                      "nonce_set": e.nonce_set, "lu_pending": e.lu_pending is not None}
                        for n, e in self.entries.items()},
            "sockets": {f"{groups64(n)}/{port}": v.hex() for (n, port), v in self.sockets.items()},
            "listeners": {str(k): (v.hex() if v else None) for k, v in self.listeners.items()},
            "ephemeral": [groups64(n) for n in sorted(self.ephemeral)],
        }

    def command(self, c: dict) -> dict:
        op = c["op"]
        if op == "connect":
            lnid = nid_value(c["lnid"]) if c.get("lnid") else None
            e = self.connect(nid_value(c["nid"]), [upper64(l) for l in c["l64s"]], c["sport"],
                             ephemeral=c.get("ephemeral", False), lnid=lnid)
            return {"nonce": e.nonce.hex(), "lnid": groups64(e.lnid or self.nid)}
        if op == "send":
            self.send_udp(nid_value(c["nid"]), c["sport"], c["dport"], c["payload"].encode())
            return {}
        if op == "frag":
            payload = (c["payload"] * (c["size"] // len(c["payload"]) + 1))[:c["size"]].encode()
            return {"fragments": self.send_frag(nid_value(c["nid"]), c["sport"], c["dport"], payload)}
        if op == "ping":
            self.ping(nid_value(c["nid"]), c.get("ident", 0x4242), c.get("seq", 1))
            return {}
        if op == "move":
            self.move([upper64(l) for l in c["l64s"]])
            return {}
        if op == "listen":
            self.listeners[c["port"]] = None
            return {}
        raise ValueError(f"unknown op {op!r}")


class FreeBsdPeer(ModelPeer):
    """The test side: the FreeBSD-behaviour node in `node` (a lab Node), at `l64:nid` on
    `iface`, driven over its control socket."""

    module, tag = "ilnp_lab.freebsd", "fbsd"

    def __init__(self, node, iface: str, nid: str, l64: str, nonce_bits: int = 32):
        super().__init__(node, iface, nid, l64, ["--nonce-bits", str(nonce_bits)])
        self.nonce_bits = nonce_bits


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iface", required=True)
    ap.add_argument("--nid", required=True)
    ap.add_argument("--l64", required=True, action="append")
    ap.add_argument("--nonce-bits", type=int, default=32, choices=(32, 96))
    ap.add_argument("--control", required=True)
    a = ap.parse_args()
    node = FreeBsdNode(a.iface, nid_value(a.nid), [upper64(l) for l in a.l64], a.nonce_bits // 8)
    serve(node, a.control)


if __name__ == "__main__":
    main()
