"""ILNPv6 addresses in the lab: a 64-bit Locator (L64) and a 64-bit Node Identifier (NID)
make one IPv6 address (RFC 6741 §3). The one place the lab, the tests and the benchmarks
compose, split and write them.

Written forms, as ilnpd's config and `ilnpctl --json` use them:
  L64: four 4-digit groups, "2001:0db8:000b:0000";
  NID: four 4-digit groups, "0200:00ff:fe00:000d";
  a /64: any IPv6 prefix ("2001:db8:b::/64", "2001:db8:b::") or an L64.
"""

from __future__ import annotations

import ipaddress

# the identifier prefix the lab configures ilnpd with (its default): applications see
# identifier addresses ID_PREFIX + NID
ID_PREFIX = "fd69:6c6e:7000::"
ID_NET = f"{ID_PREFIX}/64"


def lab_nid(k: int) -> str:
    """The lab's NIDs: EUI-64 style (universal/local bit set), numbered by `k`."""
    return f"0200:00ff:fe00:{k:04x}"


CN_NID = lab_nid(0x0C)
MN_NID = lab_nid(0x0D)


def upper64(l64_or_prefix: str) -> int:
    """The upper 64 bits of a /64 written as an L64 ("2001:0db8:000b:0000"), a prefix
    ("2001:db8:b::/64") or an address in it ("2001:db8:b::")."""
    if "/" in l64_or_prefix:
        return int(ipaddress.IPv6Network(l64_or_prefix, strict=False).network_address) >> 64
    if "::" in l64_or_prefix or l64_or_prefix.count(":") != 3:
        return int(ipaddress.IPv6Address(l64_or_prefix)) >> 64
    return int(l64_or_prefix.replace(":", ""), 16)


def groups64(v: int) -> str:
    """A 64-bit value as four 4-digit groups (the L64/NID form)."""
    return ":".join(f"{(v >> s) & 0xFFFF:04x}" for s in (48, 32, 16, 0))


def l64(prefix: str) -> str:
    """The L64 of a /64: "2001:db8:b::/64" -> "2001:0db8:000b:0000"."""
    return groups64(upper64(prefix))


def nid_value(nid: str | int) -> int:
    """A NID as an integer, from its four groups ("200:ff:fe00:d" too: groups are
    zero-filled) or 16 hex digits; ValueError naming the value otherwise."""
    if isinstance(nid, int):
        return nid
    s = nid.strip().lower()
    if ":" in s:
        parts = s.split(":")
        if len(parts) != 4 or any(not p or len(p) > 4 for p in parts):
            raise ValueError(f"NID {nid!r}: expected xxxx:xxxx:xxxx:xxxx")
        return int("".join(p.zfill(4) for p in parts), 16)
    if len(s) != 16:
        raise ValueError(f"NID {nid!r}: expected 16 hex digits")
    return int(s, 16)


def address(l64_or_prefix: str, nid: str) -> str:
    """The IPv6 address of a /64 (L64 or prefix) and a NID: a wire address (locator) or an
    identifier address (ID_PREFIX)."""
    return str(ipaddress.IPv6Address((upper64(l64_or_prefix) << 64) | nid_value(nid)))


def identifier_address(nid: str) -> str:
    """What applications see: ID_PREFIX + NID."""
    return address(ID_PREFIX, nid)
