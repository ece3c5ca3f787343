"""Reads ILNPv6 packets out of pcaps, independently of the Rust code.

The parsing here (and the packet vocabulary it reads with, `wire`) is written from the
RFC text, not from ilnp-wire, so the tests compare two implementations (three with tshark).
"""

from __future__ import annotations

import ipaddress
import os
import struct
from dataclasses import dataclass
from typing import Iterator

from scapy.utils import RawPcapReader

from .wire import ICMPV6, TCP, UDP, ones_sum, walk

# the vocabulary lives in `wire`; these names stay importable here for the tests and callers
__all__ = ["ICMPV6", "TCP", "UDP", "V4_PATH_PORT", "WirePacket", "icmpv6_checksum_ok", "iter_ipv6", "ones_sum",
           "parse_ipv6", "read", "transport_checksum_ok", "v4_path_inner"]


@dataclass
class WirePacket:
    ts: float
    src: ipaddress.IPv6Address
    dst: ipaddress.IPv6Address
    nonces: list[bytes]  # every 0x8B option found in the Destination Options header
    proto: int  # upper-layer protocol
    l4: bytes  # upper-layer bytes (as captured)
    payload_len: int
    raw: bytes  # the IPv6 packet
    truncated: bool

    @property
    def src_loc(self) -> int:
        return int(self.src) >> 64

    @property
    def dst_loc(self) -> int:
        return int(self.dst) >> 64

    @property
    def src_nid(self) -> int:
        return int(self.src) & ((1 << 64) - 1)

    @property
    def dst_nid(self) -> int:
        return int(self.dst) & ((1 << 64) - 1)

    @property
    def ports(self) -> tuple[int, int] | None:
        if self.proc_has_ports and len(self.l4) >= 4:
            return struct.unpack("!HH", self.l4[:4])
        return None

    @property
    def proc_has_ports(self) -> bool:
        return self.proto in (TCP, UDP)


V4_PATH_PORT = 6740  # ilnp_wire::v4path::DEFAULT_PORT


def v4_path_inner(ip4: bytes, port: int = V4_PATH_PORT) -> bytes | None:
    """The IPv6 packet a v4 path carries (docs/architecture.md § IPv4 and NAT): the
    payload of a UDP/IPv4 datagram (whole, not a fragment) from or to `port` that
    starts like an IPv6 packet; None for any other IPv4 packet."""
    if len(ip4) < 28 or ip4[0] >> 4 != 4 or ip4[9] != UDP:
        return None
    ihl = (ip4[0] & 0xF) * 4
    if struct.unpack("!H", ip4[6:8])[0] & 0x3FFF or len(ip4) < ihl + 8:
        return None
    sport, dport, ulen = struct.unpack("!HHH", ip4[ihl : ihl + 6])
    if port not in (sport, dport):
        return None
    inner = ip4[ihl + 8 : ihl + max(ulen, 8)]
    return inner if len(inner) >= 40 and inner[0] >> 4 == 6 else None


def _l3(et: int, l3: bytes) -> bytes | None:
    if et == 0x86DD:
        return l3
    return v4_path_inner(l3) if et == 0x0800 else None


def _ipv6_from_frame(linktype: int, frame: bytes) -> bytes | None:
    """The IPv6 packet in a frame: plain, or carried by a v4 path."""
    if linktype == 1:  # Ethernet
        if len(frame) < 14:
            return None
        return _l3(struct.unpack("!H", frame[12:14])[0], frame[14:])
    if linktype in (101, 229):  # raw / raw IPv6
        return frame if frame and frame[0] >> 4 == 6 else v4_path_inner(frame)
    if linktype == 113:  # Linux cooked
        return _l3(struct.unpack("!H", frame[14:16])[0], frame[16:])
    if linktype == 276:  # Linux cooked v2
        return _l3(struct.unpack("!H", frame[0:2])[0], frame[20:])
    return None


def parse_ipv6(ts: float, pkt: bytes) -> WirePacket | None:
    if len(pkt) < 40 or pkt[0] >> 4 != 6:
        return None
    plen = struct.unpack("!H", pkt[4:6])[0]
    src = ipaddress.IPv6Address(pkt[8:24])
    dst = ipaddress.IPv6Address(pkt[24:40])
    h = walk(pkt)  # through EXT_HDRS: every 0x8B nonce in a Destination Options header
    return WirePacket(ts, src, dst, h.nonces, h.proto, bytes(pkt[h.off:]), plen, bytes(pkt), h.truncated)


_PCAP_MAGIC = {
    b"\xd4\xc3\xb2\xa1": ("<", 1e-6),
    b"\xa1\xb2\xc3\xd4": (">", 1e-6),
    b"\x4d\x3c\xb2\xa1": ("<", 1e-9),
    b"\xa1\xb2\x3c\x4d": (">", 1e-9),
}


# the last captures read, by (path, size, mtime): a run's analysis walks each of its two
# captures about seven times (flows, LUs, events, latencies, control messages, ...)
_CACHE: dict[tuple[str, int, int], list[tuple[float, bytes]]] = {}
_CACHE_FILES = 2


def iter_ipv6(path: str) -> Iterator[tuple[float, bytes]]:
    """(epoch timestamp, IPv6 packet as captured) for every IPv6 frame in a capture,
    and every IPv6 packet a v4 path carries (UDP/IPv4 to or from port 6740).

    The packets of the last two captures read are kept (a file changed since is read again)."""
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
    pkts = _CACHE.pop(key, None)
    if pkts is None:
        pkts = list(_iter_file(path))
    _CACHE[key] = pkts  # the newest last
    while len(_CACHE) > _CACHE_FILES:
        del _CACHE[next(iter(_CACHE))]
    return iter(pkts)


def _iter_file(path: str) -> Iterator[tuple[float, bytes]]:
    """iter_ipv6's reading.

    Classic pcap (what `tcpdump -w` writes) is read in one go with struct, which is
    several times faster than RawPcapReader on 100k+ packet captures; anything else
    (pcapng) goes through scapy's RawPcapReader.
    """
    with open(path, "rb") as f:
        data = f.read()
    fmt = _PCAP_MAGIC.get(data[:4])
    if fmt is None:
        reader = RawPcapReader(path)
        linktype = reader.linktype
        try:
            for frame, meta in reader:
                if hasattr(meta, "sec"):
                    ts = meta.sec + meta.usec / 1e6
                else:  # pcapng metadata
                    ts = ((meta.tshigh << 32) + meta.tslow) / (meta.tsresol or 1_000_000)
                pkt = _ipv6_from_frame(linktype, frame)
                if pkt is not None:
                    yield ts, pkt
        finally:
            reader.close()
        return
    endian, scale = fmt
    linktype = struct.unpack(endian + "I", data[20:24])[0] & 0x0FFFFFFF
    rec = struct.Struct(endian + "IIII")
    off, n = 24, len(data)
    mv = memoryview(data)
    while off + 16 <= n:
        sec, frac, incl, _orig = rec.unpack_from(data, off)
        off += 16
        frame = mv[off : off + incl]
        off += incl
        if linktype == 1:
            et = data[off - incl + 12 : off - incl + 14] if incl >= 54 else b""
            if et == b"\x86\xdd":
                pkt = bytes(frame[14:])
            elif et == b"\x08\x00" and (pkt := v4_path_inner(bytes(frame[14:]))) is not None:
                pass
            else:
                continue
        else:
            pkt = _ipv6_from_frame(linktype, bytes(frame))
            if pkt is None:
                continue
        yield sec + frac * scale, pkt


def read(path: str) -> list[WirePacket]:
    out = []
    for ts, pkt in iter_ipv6(path):
        p = parse_ipv6(ts, pkt)
        if p:
            out.append(p)
    return out


def transport_checksum_ok(p: WirePacket, full_address: bool = False) -> bool:
    """RFC 6744 §3: pseudo-header with the upper 64 bits (locators) of both addresses zeroed;
    `full_address`: the whole addresses (draft-bhatti-ilnp-tcp-udp-checksums, ilnpd's
    `transport_checksum = "full-address"`).

    Only meaningful for packets captured whole (the L4 length equals the IPv6 payload
    minus extension headers).
    """
    keep = 0 if full_address else 8
    src = b"\0" * keep + p.src.packed[keep:]
    dst = b"\0" * keep + p.dst.packed[keep:]
    pseudo = src + dst + struct.pack("!IxxxB", len(p.l4), p.proto)
    return ones_sum(pseudo + p.l4) == 0xFFFF


def icmpv6_checksum_ok(p: WirePacket) -> bool:
    """ICMPv6 (RFC 6741 §4.3): the ordinary full-address pseudo-header."""
    pseudo = p.src.packed + p.dst.packed + struct.pack("!IxxxB", len(p.l4), ICMPV6)
    return ones_sum(pseudo + p.l4) == 0xFFFF
