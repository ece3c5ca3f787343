"""RFC 6275 Mobility Header messages, byte-exact, and the IPv6 packets that carry them.

The MH (IPv6 next header 135, §6.1): Payload Proto (59), Header Len (8-octet units not
counting the first 8), MH Type, Reserved, Checksum (the ICMPv6 pseudo-header sum, §6.1.1: the
source is the home address of a Home Address option, the destination the home address of a
type 2 routing header), then the message data and mobility options (§6.2), each option at the
alignment its section gives (PadN / Pad1 before it), the whole padded to 8 octets.

`Packet` builds the IPv6 packets as they go on the wire (a Home Address option in a
destination options header, a type 2 routing header, an ip6ip6 encapsulation), so the sizes
can be checked against the thesis's tcpdump table (seed 001 §6.4: BU 110, BAck 94, HoTI 110,
HoT 118, CoTI 70, CoT 78 bytes: Ethernet frames, 14 + IPv6 packet) and tshark can decode them.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass, field

IPPROTO_MH = 135
IPPROTO_NONE = 59
IPPROTO_DSTOPTS = 60
IPPROTO_ROUTING = 43
IPPROTO_IPV6 = 41
ETH_HLEN = 14
IPV6_HLEN = 40

# MH types (§6.1.2 ... §6.1.9)
BRR, HOTI, COTI, HOT, COT, BU, BA, BE = range(8)
TYPE_NAMES = {BRR: "BRR", HOTI: "HoTI", COTI: "CoTI", HOT: "HoT", COT: "CoT", BU: "BU", BA: "BA", BE: "BE"}

# mobility options (§6.2): type -> (alignment n, offset k: the option starts at n*x + k)
OPT_PAD1, OPT_PADN, OPT_BRA, OPT_ALT_COA, OPT_NONCE_IDX, OPT_AUTH = 0, 1, 2, 3, 4, 5
ALIGN = {OPT_BRA: (2, 0), OPT_ALT_COA: (8, 6), OPT_NONCE_IDX: (2, 0), OPT_AUTH: (8, 2)}
OPT_LEN = {OPT_BRA: 2, OPT_ALT_COA: 16, OPT_NONCE_IDX: 4, OPT_AUTH: 12}

# BU flags (§6.1.7), BA's K flag (§6.1.8)
BU_A, BU_H, BU_L, BU_K = 0x8000, 0x4000, 0x2000, 0x1000
BA_K = 0x80

# BA status (§6.1.8), BE status (§6.1.9)
BA_ACCEPTED = 0
BA_REASON_UNSPECIFIED = 128
BA_ADMIN_PROHIBITED = 129
BA_NOT_HOME_SUBNET = 132
BA_NOT_HA_FOR_MN = 133
BA_DAD_FAILED = 134
BA_SEQ_OUT_OF_WINDOW = 135
BA_EXPIRED_HOME_NONCE = 136
BA_EXPIRED_COA_NONCE = 137
BA_EXPIRED_NONCES = 138
BE_UNKNOWN_BINDING_HAO = 1
BE_UNKNOWN_MH_TYPE = 2

HAO_TYPE = 201  # Home Address destination option (§6.3), alignment 8n+6


class MHError(ValueError):
    pass


def a16(addr) -> bytes:
    return ipaddress.IPv6Address(addr).packed


def a_str(b: bytes) -> str:
    return str(ipaddress.IPv6Address(bytes(b)))


def csum16(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def mh_checksum(src, dst, mh: bytes) -> int:
    """§6.1.1: the ICMPv6 checksum over the pseudo-header (src, dst, length, 135) and the MH
    with its checksum field taken as zero."""
    mh = mh[:4] + b"\0\0" + mh[6:]
    pseudo = a16(src) + a16(dst) + struct.pack("!IxxxB", len(mh), IPPROTO_MH)
    c = (~csum16(pseudo + mh)) & 0xFFFF
    return c or 0xFFFF


@dataclass
class Option:
    type: int
    data: bytes

    def value(self) -> dict:
        d = self.data
        if self.type == OPT_BRA:
            return {"refresh_interval": struct.unpack("!H", d)[0]}
        if self.type == OPT_ALT_COA:
            return {"coa": a_str(d)}
        if self.type == OPT_NONCE_IDX:
            h, c = struct.unpack("!HH", d)
            return {"home_nonce_index": h, "careof_nonce_index": c}
        if self.type == OPT_AUTH:
            return {"authenticator": d}
        return {}


def alt_coa(coa) -> Option:
    return Option(OPT_ALT_COA, a16(coa))


def nonce_indices(home: int, careof: int) -> Option:
    return Option(OPT_NONCE_IDX, struct.pack("!HH", home, careof))


def auth_data(authenticator: bytes) -> Option:
    if len(authenticator) != 12:
        raise MHError("the Binding Authorization Data option carries a 96-bit authenticator")
    return Option(OPT_AUTH, authenticator)


def _pad(n: int) -> bytes:
    if n == 0:
        return b""
    if n == 1:
        return b"\0"
    return bytes([OPT_PADN, n - 2]) + b"\0" * (n - 2)


def encode_options(start: int, options: list[Option]) -> bytes:
    """The options placed from MH offset `start`, each at its alignment, then the MH padded to
    a multiple of 8 octets (§6.2.1)."""
    out = b""
    off = start
    for o in options:
        if o.type in ALIGN:
            n, k = ALIGN[o.type]
            gap = (k - off) % n
            out += _pad(gap)
            off += gap
            if len(o.data) != OPT_LEN[o.type]:
                raise MHError(f"option {o.type}: length {len(o.data)}, RFC 6275 says {OPT_LEN[o.type]}")
        out += bytes([o.type, len(o.data)]) + o.data
        off += 2 + len(o.data)
    return out + _pad((-off) % 8)


def decode_options(b: bytes) -> list[Option]:
    opts, i = [], 0
    while i < len(b):
        t = b[i]
        if t == OPT_PAD1:
            i += 1
            continue
        if i + 2 > len(b) or i + 2 + b[i + 1] > len(b):
            raise MHError("mobility option runs past the header")
        ln = b[i + 1]
        if t != OPT_PADN:
            if t in OPT_LEN and ln != OPT_LEN[t]:
                raise MHError(f"option {t}: length {ln}, RFC 6275 says {OPT_LEN[t]}")
            opts.append(Option(t, bytes(b[i + 2:i + 2 + ln])))
        i += 2 + ln
    return opts


# the fixed part of each message after the 6-octet MH header: struct format and field names
FIXED = {
    BRR: ("!H", ("reserved",)),
    HOTI: ("!H8s", ("reserved", "cookie")),
    COTI: ("!H8s", ("reserved", "cookie")),
    HOT: ("!H8s8s", ("nonce_index", "cookie", "token")),
    COT: ("!H8s8s", ("nonce_index", "cookie", "token")),
    BU: ("!HHH", ("seq", "flags", "lifetime")),
    BA: ("!BBHH", ("status", "flags", "seq", "lifetime")),
    BE: ("!BB16s", ("status", "reserved", "home")),
}


@dataclass
class Message:
    """One MH message: `type`, its fixed fields (as FIXED names them) and options. Lifetimes
    are in 4-second units, as on the wire (§6.1.7)."""
    type: int
    fields: dict = field(default_factory=dict)
    options: list[Option] = field(default_factory=list)
    checksum: int = 0

    @property
    def name(self) -> str:
        return TYPE_NAMES.get(self.type, str(self.type))

    def __getattr__(self, k):
        f = self.__dict__.get("fields", {})
        if k in f:
            return f[k]
        raise AttributeError(k)

    def option(self, t: int) -> Option | None:
        return next((o for o in self.options if o.type == t), None)

    def encode(self, src=None, dst=None) -> bytes:
        """The MH bytes; with src and dst (the pseudo-header's: home addresses, §6.1.1) the
        checksum is filled in, else left zero (a raw IPPROTO_MH socket fills it)."""
        fmt, names = FIXED[self.type]
        vals = []
        for n in names:
            v = self.fields.get(n, 0)
            if n == "home":
                v = a16(v) if v else bytes(16)
            vals.append(v)
        body = struct.pack(fmt, *vals)
        opts = encode_options(6 + len(body), self.options)
        total = 6 + len(body) + len(opts)
        mh = struct.pack("!BBBBH", IPPROTO_NONE, total // 8 - 1, self.type, 0, 0) + body + opts
        if src is not None and dst is not None:
            c = mh_checksum(src, dst, mh)
            mh = mh[:4] + struct.pack("!H", c) + mh[6:]
        return mh

    @classmethod
    def decode(cls, b: bytes) -> "Message":
        if len(b) < 8:
            raise MHError("MH shorter than 8 octets")
        proto, hlen, mtype, _res, cs = struct.unpack("!BBBBH", b[:6])
        if proto != IPPROTO_NONE:
            raise MHError(f"MH payload proto {proto}, must be 59 (§6.1.1)")
        if (hlen + 1) * 8 != len(b):
            raise MHError(f"MH header length {(hlen + 1) * 8} != {len(b)} octets received")
        if mtype not in FIXED:
            raise MHError(f"unknown MH type {mtype}")
        fmt, names = FIXED[mtype]
        n = struct.calcsize(fmt)
        if 6 + n > len(b):
            raise MHError(f"{TYPE_NAMES[mtype]} shorter than its fixed part")
        vals = struct.unpack(fmt, b[6:6 + n])
        f = dict(zip(names, vals))
        if "home" in f:
            f["home"] = a_str(f["home"])
        return cls(mtype, f, decode_options(b[6 + n:]), cs)


def verify_checksum(src, dst, mh: bytes) -> bool:
    return struct.unpack("!H", mh[4:6])[0] == mh_checksum(src, dst, mh)


# constructors, RFC 6275 names
def hoti(cookie: bytes) -> Message:
    return Message(HOTI, {"cookie": cookie})


def coti(cookie: bytes) -> Message:
    return Message(COTI, {"cookie": cookie})


def hot(index: int, cookie: bytes, token: bytes) -> Message:
    return Message(HOT, {"nonce_index": index, "cookie": cookie, "token": token})


def cot(index: int, cookie: bytes, token: bytes) -> Message:
    return Message(COT, {"nonce_index": index, "cookie": cookie, "token": token})


def bu(seq: int, lifetime_s: float, flags: int, options=()) -> Message:
    return Message(BU, {"seq": seq, "flags": flags, "lifetime": int(lifetime_s) // 4}, list(options))


def ba(status: int, seq: int, lifetime_s: float, flags: int = 0, options=()) -> Message:
    return Message(BA, {"status": status, "flags": flags, "seq": seq, "lifetime": int(lifetime_s) // 4},
                   list(options))


def be(status: int, home) -> Message:
    return Message(BE, {"status": status, "home": home})


# ---- the IPv6 packet around it -------------------------------------------------------------

def hao_dstopts(home, next_header: int = IPPROTO_MH) -> bytes:
    """A destination options header holding only the Home Address option (§6.3): PadN(4) puts
    the option at 8n+6; 24 octets."""
    body = _pad(4) + bytes([HAO_TYPE, 16]) + a16(home)
    return bytes([next_header, (2 + len(body)) // 8 - 1]) + body


def rh2(home, next_header: int = IPPROTO_MH) -> bytes:
    """A type 2 routing header (§6.4): one address, segments left 1; 24 octets."""
    return struct.pack("!BBBB4x", next_header, 2, 2, 1) + a16(home)


def ipv6_header(src, dst, next_header: int, payload_len: int, hlim: int = 64) -> bytes:
    return struct.pack("!IHBB", 6 << 28, payload_len, next_header, hlim) + a16(src) + a16(dst)


@dataclass
class Packet:
    """An MH message as an IPv6 packet: `src`/`dst` the IPv6 header's, `hao` a home address
    carried in a Home Address option (src is then the care-of address), `rh2` a home address in a
    type 2 routing header (dst is then the care-of address), `tunnel` (outer src, outer dst) an
    ip6ip6 encapsulation around it (HoTI/HoT through the home agent)."""
    msg: Message
    src: str
    dst: str
    hao: str | None = None
    rh2: str | None = None
    tunnel: tuple[str, str] | None = None

    def pseudo(self) -> tuple[str, str]:
        return (self.hao or self.src, self.rh2 or self.dst)

    def mh(self) -> bytes:
        return self.msg.encode(*self.pseudo())

    def extension_headers(self) -> bytes:
        """The headers between the IPv6 header and the MH, as the kernel is given them."""
        ext = b""
        if self.rh2:
            ext += rh2(self.rh2, IPPROTO_DSTOPTS if self.hao else IPPROTO_MH)
        if self.hao:
            ext += hao_dstopts(self.hao)
        return ext

    def bytes(self) -> bytes:
        ext = self.extension_headers()
        first = IPPROTO_ROUTING if self.rh2 else IPPROTO_DSTOPTS if self.hao else IPPROTO_MH
        payload = ext + self.mh()
        pkt = ipv6_header(self.src, self.dst, first, len(payload)) + payload
        if self.tunnel:
            pkt = ipv6_header(*self.tunnel, IPPROTO_IPV6, len(pkt)) + pkt
        return pkt

    def frame_len(self) -> int:
        """On an Ethernet link, as tcpdump reports it (the thesis's sizes)."""
        return ETH_HLEN + len(self.bytes())


def ethernet(pkt: bytes, dst_mac=b"\x02\0\0\0\0\x02", src_mac=b"\x02\0\0\0\0\x01") -> bytes:
    return dst_mac + src_mac + b"\x86\xdd" + pkt
