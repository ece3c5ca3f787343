"""The attacker's packets, built byte by byte with the lab's packet vocabulary (`wire`): a
datagram, a Locator Update, an Echo Request, each behind our Destination Options header with a
chosen nonce, and a Packet Too Big quoting a datagram with a guessed nonce.
"""

from __future__ import annotations

import secrets
import struct

from ..wire import (DSTOPTS, ECHO_REQUEST, ICMPV6, LOCATOR_UPDATE, LU_ADVERT, LU_ENTRY, NONCE_OPT, PACKET_TOO_BIG, UDP, a16,
                    icmp6, ip6, udp)
from .bed import PORT


def nonce_opt(nxt: int, nonce: bytes) -> bytes:
    """Our Destination Options header: the nonce option, padded to 8 bytes (PadN)."""
    body = bytes([NONCE_OPT, len(nonce)]) + nonce
    pad = (-(2 + len(body))) % 8
    if pad == 1:
        body += b"\0"
    elif pad:
        body += bytes([1, pad - 2]) + b"\0" * (pad - 2)
    return bytes([nxt, (2 + len(body)) // 8 - 1]) + body


def forged_udp(src: str, dst: str, nonce: bytes, payload: bytes) -> bytes:
    s, d = a16(src), a16(dst)
    return ip6(s, d, DSTOPTS, nonce_opt(UDP, nonce) + udp(s, d, 40000, PORT, payload))


def forged_lu(src: str, dst: str, nonce: bytes, l64s: list[str]) -> bytes:
    s, d = a16(src), a16(dst)
    body = bytes([len(l64s), LU_ADVERT, 0, 0]) + b"".join(
        LU_ENTRY.pack(int(l.replace(":", ""), 16), 10, 300) for l in l64s)
    return ip6(s, d, DSTOPTS, nonce_opt(ICMPV6, nonce) + icmp6(s, d, LOCATOR_UPDATE, 0, body))


def forged_echo(src: str, dst: str, nonce: bytes, seq: int) -> bytes:
    """An Echo Request claiming `src`, with a guessed nonce: a reply would go to the claimed peer."""
    s, d = a16(src), a16(dst)
    return ip6(s, d, DSTOPTS, nonce_opt(ICMPV6, nonce) + icmp6(s, d, ECHO_REQUEST, 0, struct.pack("!HH", 7, seq)))


def forged_icmp(src: str, cn_wire: str, mn_wire: str) -> bytes:
    """Packet Too Big from a 'router' at `src`, quoting a CN -> MN datagram with a guessed nonce."""
    quoted = forged_udp(cn_wire, mn_wire, secrets.token_bytes(4), b"q" * 32)
    s, d = a16(src), a16(cn_wire)
    return ip6(s, d, ICMPV6, icmp6(s, d, PACKET_TOO_BIG, 0, struct.pack("!I", 1280) + quoted))
