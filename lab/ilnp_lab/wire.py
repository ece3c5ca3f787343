"""The lab's packet vocabulary: ILNPv6 on the wire, one home for what every reader and
writer of packets in the lab says the same way.

Protocol numbers, Destination Options option types, ICMPv6 types, the Locator Update's
layout, the extension-header walk (`walk`, `upper_layer`, `options`), the Internet checksum
and small packet builders (`ip6`, `icmp6`, `udp`). Used by `pcap` (reading captures),
`analysis.packets`, the correspondent models (`freebsd`) and `attacks`.

Written from the RFC text (RFC 8200, RFC 6743, RFC 6744, wire-facts §2), not from
ilnp-wire, so the tests compare two implementations.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass, field

# protocol numbers (IANA): upper layers and the extension headers the lab walks
HOPOPTS, TCP, UDP, ROUTING, FRAGMENT, ICMPV6, NO_NEXT, DSTOPTS = 0, 6, 17, 43, 44, 58, 59, 60
EXT_HDRS = {HOPOPTS, ROUTING, DSTOPTS}  # walked by length; a Fragment header ends `pcap`'s walk

# Destination Options option types (RFC 8200 §4.2, RFC 6744 §2, RFC 4727 §7)
OPT_PAD1, OPT_PADN = 0, 1
NONCE_OPT = 0x8B  # ILNP Nonce (act 10: an unknown-to-it node drops and answers Parameter Problem)
OPT_EXPERIMENT = 0x1E  # RFC 4727's experimental type with act 00 (skip if unknown)

# ICMPv6 types (RFC 4443, RFC 4861, RFC 6743)
DEST_UNREACH, PACKET_TOO_BIG, TIME_EXCEEDED, PARAM_PROBLEM = 1, 2, 3, 4
ECHO_REQUEST, ECHO_REPLY = 128, 129
ROUTER_ADVERT = 134
LOCATOR_UPDATE = LU_TYPE = 156

# the Locator Update (RFC 6743 §2; wire-facts §2.1): type, code, checksum, then byte 4 the
# number of locators, byte 5 the operation, 2 reserved; then per locator {L64, preference,
# lifetime}. Some senders put the operation in the Code (1/2) with byte 5 zero.
LU_ADVERT, LU_ACK = 1, 2
LU_HDR = 8
LU_ENTRY = struct.Struct("!QHH")  # L64, preference, lifetime (s): 12 bytes


def lu_body(op: int, entries: list[tuple[int, int, int]]) -> bytes:
    """An LU's bytes after the ICMPv6 checksum: count, operation, reserved, the entries
    (L64 as an int, preference, lifetime)."""
    return struct.pack("!BBH", len(entries), op, 0) + b"".join(LU_ENTRY.pack(*e) for e in entries)


def options(pkt: bytes, off: int, hlen: int) -> tuple[list[tuple[int, int, int]], bool]:
    """The options of the Destination Options header of `hlen` bytes at `off`: ([(type,
    offset of its data, its length as the option says)], cut). Pad1 is skipped, every other
    type (PadN, the nonce, RFC 4727's experimental ones, anything unknown) is listed by its
    length; `cut` if the last option's type and length bytes do not both fit in the header.
    An option's length may run past the header (FreeBSD's reflected 12-byte nonce)."""
    out: list[tuple[int, int, int]] = []
    i, end = off + 2, off + hlen
    while i < end:
        t = pkt[i]
        if t == OPT_PAD1:
            i += 1
            continue
        if i + 2 > end:
            return out, True
        ln = pkt[i + 1]
        out.append((t, i + 2, ln))
        i += 2 + ln
    return out, False


@dataclass
class Headers:
    """What `walk` found between the IPv6 header and the upper layer."""
    proto: int  # the first header not walked through: the upper-layer protocol, mostly
    off: int  # its offset
    nonces: list[bytes] = field(default_factory=list)  # every nonce option's data, in order
    nonce_cut: bool = False  # the last nonce's length runs past its header's end
    frag: tuple[int, bool, int] | None = None  # a Fragment header's (offset in 8 bytes, more, id)
    truncated: bool = False  # the capture ends inside the headers (or an option's type/length)


def walk(pkt: bytes, through: set[int] | frozenset[int] = frozenset(EXT_HDRS)) -> Headers:
    """Walks the extension headers of an IPv6 packet (at least 40 bytes) whose type is in
    `through` (a Fragment header among them: its 8 bytes, and the walk stops after one that
    is not the first fragment). Offsets come from the headers themselves, so the upper
    layer's length is `payload_len + 40 - off` even in a snaplen-cut capture."""
    nh, off, n = pkt[6], 40, len(pkt)
    h = Headers(nh, off)
    while nh in through:
        if nh == FRAGMENT:
            if off + 8 > n:
                h.truncated = True
                break
            fo, ident = struct.unpack("!HI", pkt[off + 2 : off + 8])
            h.frag = (fo >> 3, bool(fo & 1), ident)
            nh, off = pkt[off], off + 8
            if fo >> 3:
                break
            continue
        if off + 2 > n:
            h.truncated = True
            break
        hlen = (pkt[off + 1] + 1) * 8
        if off + hlen > n:
            h.truncated = True
            break
        if nh == DSTOPTS:
            opts, cut = options(pkt, off, hlen)
            for t, at, ln in opts:
                if t == NONCE_OPT:
                    h.nonces.append(bytes(pkt[at : at + ln]))
                    h.nonce_cut = at + ln > off + hlen
            h.truncated |= cut
        nh = pkt[off]
        off += hlen
    h.proto, h.off = nh, off
    return h


def upper_layer(pkt: bytes) -> tuple[int, int] | None:
    """(upper-layer protocol, its offset) of an IPv6 packet, skipping extension headers
    without looking inside them (the fast path of `walk`); None if the headers were
    cut off by the snaplen."""
    nh, off, n = pkt[6], 40, len(pkt)
    while nh in EXT_HDRS:
        if off + 2 > n:
            return None
        nh, off = pkt[off], off + (pkt[off + 1] + 1) * 8
    if off > n:
        return None
    return nh, off


def ones_sum(data: bytes) -> int:
    """The 16-bit one's complement sum of `data` (RFC 1071), folded."""
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def l4_checksum(src: bytes, dst: bytes, proto: int, body: bytes) -> int:
    """The checksum of `body` over the pseudo-header of `src`, `dst` (pass them with the
    locators zeroed for RFC 6744's TCP/UDP rule); a UDP zero is sent as 0xFFFF."""
    pseudo = src + dst + struct.pack("!IxxxB", len(body), proto)
    c = 0xFFFF - ones_sum(pseudo + body)
    return 0xFFFF if (c == 0 and proto == UDP) else c


def nid_only(a: bytes) -> bytes:
    """An address with its upper 64 bits (the locator) zeroed: RFC 6744 §3's pseudo-header."""
    return b"\0" * 8 + a[8:]


def a16(s: str) -> bytes:
    return ipaddress.IPv6Address(s).packed


def ip6(src: bytes, dst: bytes, nh: int, payload: bytes, hlim: int = 64) -> bytes:
    return struct.pack("!IHBB", 0x60000000, len(payload), nh, hlim) + src + dst + payload


def icmp6(src: bytes, dst: bytes, typ: int, code: int, rest: bytes) -> bytes:
    """An ICMPv6 message, checksummed over the full addresses (RFC 6741 §4.3)."""
    m = bytes([typ, code, 0, 0]) + rest
    c = l4_checksum(src, dst, ICMPV6, m)
    return m[:2] + struct.pack("!H", c) + m[4:]


def udp(src: bytes, dst: bytes, sport: int, dport: int, payload: bytes) -> bytes:
    """A UDP datagram, checksummed with the locators zeroed (RFC 6740/6741's rule)."""
    u = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    c = l4_checksum(nid_only(src), nid_only(dst), UDP, u)
    return u[:6] + struct.pack("!H", c) + u[8:]

