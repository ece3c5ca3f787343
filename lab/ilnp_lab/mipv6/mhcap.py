"""Mobility Header frames in a pcap (tcpdump -w, Ethernet): time, on-the-wire length, MH type,
whether it was tunnelled (ip6ip6) and what it carried (HAO / RH2): the sizes the thesis read
from its tcpdump logs and the timestamps a handoff's phases are split by."""

from __future__ import annotations

import struct

from .mh import IPPROTO_DSTOPTS, IPPROTO_IPV6, IPPROTO_MH, IPPROTO_ROUTING, TYPE_NAMES, a_str


def frames(path: str):
    with open(path, "rb") as f:
        hdr = f.read(24)
        if len(hdr) < 24:
            return
        magic = struct.unpack("<I", hdr[:4])[0]
        endian, nano = ("<", magic == 0xA1B23C4D) if magic in (0xA1B2C3D4, 0xA1B23C4D) else (">", False)
        while True:
            h = f.read(16)
            if len(h) < 16:
                return
            sec, frac, incl, orig = struct.unpack(endian + "IIII", h)
            yield sec + frac / (1e9 if nano else 1e6), orig, f.read(incl)


def mh_frames(path: str, data: list | None = None) -> list[dict]:
    """The MH frames; with `data` a list, every other IPv6 frame is appended to it as
    (time, "tunnelled" | "rh2" | "hao" | "plain", src, dst): the path data took."""
    out = []
    for t, orig, fr in frames(path):
        if len(fr) < 54 or fr[12:14] != b"\x86\xdd":
            continue
        off, nh, tunnelled, hao, rh2 = 14, fr[20], False, None, None
        src, dst = a_str(fr[22:38]), a_str(fr[38:54])
        off += 40
        while off < len(fr):
            if nh == IPPROTO_IPV6 and off + 40 <= len(fr):
                tunnelled, nh = True, fr[off + 6]
                src, dst = a_str(fr[off + 8:off + 24]), a_str(fr[off + 24:off + 40])
                off += 40
            elif nh in (IPPROTO_DSTOPTS, IPPROTO_ROUTING) and off + 2 <= len(fr):
                ln = (fr[off + 1] + 1) * 8
                if nh == IPPROTO_ROUTING and fr[off + 2] == 2:
                    rh2 = a_str(fr[off + 8:off + 24])
                elif nh == IPPROTO_DSTOPTS and fr[off + 6:off + 8] == bytes([201, 16]):
                    hao = a_str(fr[off + 8:off + 24])
                nh = fr[off]
                off += ln
            else:
                break
        if nh != IPPROTO_MH and data is not None and nh not in (58,):
            kind = "tunnelled" if tunnelled else "rh2" if rh2 else "hao" if hao else "plain"
            data.append((t, kind, src, dst))
        if nh == IPPROTO_MH and off + 3 <= len(fr):
            out.append({"t": t, "len": orig, "type": TYPE_NAMES.get(fr[off + 2], str(fr[off + 2])),
                        "src": src, "dst": dst, "tunnelled": tunnelled, "hao": hao, "rh2": rh2})
    return out
