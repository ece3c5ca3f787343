"""The captures' packets as the analysis reads them: the upper-layer header of every IPv6
packet, TCP options, Locator Updates, addresses, and the protocol numbers they need.


The inputs are captures taken with `tcpdump -s 160 -w` on the CN's uplink(s) and on every
uplink of the MN; all namespaces share the host clock, so captures of one side are
merged by timestamp. Every length comes from the IPv6 Payload Length field minus the
extension headers (captures are snaplen-truncated), never from the captured bytes.
"""

from __future__ import annotations

import ipaddress
import os
import struct
from typing import Iterable, Iterator, Sequence

from ..addr import groups64
from ..pcap import iter_ipv6
from ..wire import EXT_HDRS, LU_ACK, LU_ADVERT, LU_TYPE, upper_layer


_SYN, _ACK = 0x02, 0x10


_FIN, _RST = 0x01, 0x04


_TCP_HDR = struct.Struct("!HHIIBB")


MPTCP_OPT = 30


# MPTCP option subtypes (RFC 8684 §3) that manage paths: a handoff's signalling
MPTCP_MP_JOIN, MPTCP_ADD_ADDR, MPTCP_REMOVE_ADDR = 1, 3, 4


def _as_list(paths: str | os.PathLike | Iterable[str | os.PathLike]) -> list[str]:
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    return [os.fspath(p) for p in paths]


def _l4(paths: Sequence[str], protos: tuple[int, ...]) -> Iterator[tuple[float, bytes, int, int, int]]:
    """(ts, packet, upper-layer proto, its offset, its full length) of every IPv6 packet
    carrying one of `protos`, over all `paths`, in file order (not merged)."""
    for path in paths:
        for ts, pkt in iter_ipv6(path):
            if len(pkt) < 40 or pkt[0] >> 4 != 6:
                continue
            nh = pkt[6]
            if nh in EXT_HDRS:
                ul = upper_layer(pkt)
                if ul is None:
                    continue
                nh, off = ul
            else:
                off = 40
            if nh not in protos:
                continue
            plen = (pkt[4] << 8) | pkt[5]
            if plen == 0:  # jumbogram / BIG TCP: the length is not in the header
                plen = len(pkt) - 40
            yield ts, pkt, nh, off, plen + 40 - off


def _tcp_options(pkt: bytes, off: int, doff: int) -> Iterator[tuple[int, bytes]]:
    i, end = off + 20, min(off + doff, len(pkt))
    while i < end:
        kind = pkt[i]
        if kind == 0:
            return
        if kind == 1:
            i += 1
            continue
        if i + 1 >= end:
            return
        ln = pkt[i + 1]
        if ln < 2:
            return
        yield kind, pkt[i + 2 : i + ln]
        i += ln


def _lu_op(pkt: bytes, off: int) -> int | None:
    """LU_ADVERT / LU_ACK of an ICMPv6 Locator Update at `off` (either wire variant), else None."""
    if off + 8 > len(pkt) or pkt[off] != LU_TYPE:
        return None
    code, op = pkt[off + 1], pkt[off + 5]
    if op == 0 and code in (LU_ADVERT, LU_ACK):  # the Code 1/2 variant (wire-facts §2.1)
        op = code
    return op if op in (LU_ADVERT, LU_ACK) else None


def _addr(b: bytes) -> str:
    return str(ipaddress.IPv6Address(bytes(b)))


def _loc_str(b: bytes) -> str:
    return groups64(int.from_bytes(b[:8], "big"))


def _l64_bytes(prefix: str) -> bytes:
    """The 8-byte L64 of a /64 written as text ("2001:db8:3::/64")."""
    return ipaddress.IPv6Network(prefix, strict=False).network_address.packed[:8]
