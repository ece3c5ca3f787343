"""Route optimisation's xfrm states and policies by netlink (NETLINK_XFRM), as UMIP installs
them: `ip xfrm` costs ~0.3 s a process under the VM's TCG emulation and exits after its first
command even in `ip -batch` mode, so four of them would be the emulator's time in the handoff.
Layouts from linux/xfrm.h (x86-64): xfrm_usersa_info 224 bytes, xfrm_userpolicy_info 168,
xfrm_user_tmpl 64, xfrm_selector 56."""

from __future__ import annotations

import os
import socket
import struct

from .mh import a16

NETLINK_XFRM = 6
XFRM_MSG_NEWSA, XFRM_MSG_DELSA, XFRM_MSG_DELPOLICY, XFRM_MSG_UPDPOLICY = 0x10, 0x11, 0x14, 0x19
XFRMA_TMPL, XFRMA_SRCADDR, XFRMA_COADDR, XFRMA_POLICY_TYPE = 5, 13, 14, 16
XFRM_MODE_ROUTEOPTIMIZATION = 2
XFRM_POLICY_IN, XFRM_POLICY_OUT = 0, 1
XFRM_POLICY_TYPE_SUB = 1
XFRM_INF = (1 << 64) - 1
PROTO = {"route2": socket.IPPROTO_ROUTING, "hao": socket.IPPROTO_DSTOPTS}
NLM_F_REQUEST, NLM_F_ACK, NLM_F_CREATE = 1, 4, 0x400


def _attr(t: int, data: bytes) -> bytes:
    a = struct.pack("HH", 4 + len(data), t) + data
    return a + b"\0" * ((-len(a)) % 4)


def selector(src: str, dst: str, plen: int = 128) -> bytes:
    # daddr, saddr, dport, dport_mask, sport, sport_mask, family, prefixlen_d, prefixlen_s, proto, ifindex, user
    return struct.pack("=16s16sHHHHHBBBxxxiI", a16(dst), a16(src), 0, 0, 0, 0, socket.AF_INET6, plen, plen, 0, 0, 0)


def lifetime_cfg() -> bytes:
    return struct.pack("=8Q", XFRM_INF, XFRM_INF, XFRM_INF, XFRM_INF, 0, 0, 0, 0)


class Xfrm:
    def __init__(self):
        self.s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_XFRM)
        self.s.bind((0, 0))
        self.seq = 0

    def _req(self, typ: int, flags: int, body: bytes, ok=()) -> None:
        self.seq += 1
        self.s.send(struct.pack("IHHII", 16 + len(body), typ, NLM_F_REQUEST | NLM_F_ACK | flags, self.seq, 0) + body)
        while True:
            data = self.s.recv(65536)
            ln, t, _f, seq, _p = struct.unpack("IHHII", data[:16])
            if t == 2 and seq == self.seq:
                err = -struct.unpack("i", data[16:20])[0]
                if err and err not in ok:
                    raise OSError(err, f"xfrm netlink {typ:#x}: {os.strerror(err)}")
                return

    def ro_state(self, src: str, dst: str, proto: str, coa: str) -> None:
        """`ip xfrm state add src S dst D proto P mode ro coa C sel src S/128 dst D/128`, after
        removing one with the same (src, dst, proto)."""
        p = PROTO[proto]
        self.del_state(src, dst, proto)
        xid = struct.pack("=16sIB3x", a16(dst), 0, p)
        info = (selector(src, dst) + xid + a16(src) + lifetime_cfg() + bytes(32) + bytes(12)
                + struct.pack("=IIHBBB7x", 0, 0, socket.AF_INET6, XFRM_MODE_ROUTEOPTIMIZATION, 0, 0))
        assert len(info) == 224
        self._req(XFRM_MSG_NEWSA, NLM_F_CREATE, info + _attr(XFRMA_COADDR, a16(coa)))

    def del_state(self, src: str, dst: str, proto: str) -> None:
        """`ip xfrm state delete src S dst D proto P` (none there: no error)."""
        self._req(XFRM_MSG_DELSA, 0, struct.pack("=16sIHBx", a16(dst), 0, socket.AF_INET6, PROTO[proto])
                  + _attr(XFRMA_SRCADDR, a16(src)), ok=(2, 3))  # ENOENT, ESRCH: none there

    def del_policy(self, src: str, dst: str, direction: int) -> None:
        """`ip xfrm policy delete src S/128 dst D/128 dir in|out ptype sub` (none there: no error);
        xfrm_userpolicy_id is the selector, an index (0: by selector) and the direction."""
        pid = selector(src, dst) + struct.pack("=IB3x", 0, direction)
        assert len(pid) == 64
        ptype = struct.pack("=BxHBx", XFRM_POLICY_TYPE_SUB, 0, 0)
        self._req(XFRM_MSG_DELPOLICY, 0, pid + _attr(XFRMA_POLICY_TYPE, ptype), ok=(2, 3))

    def ro_policy(self, src: str, dst: str, direction: int, proto: str, optional: bool) -> None:
        """`ip xfrm policy update src S/128 dst D/128 dir in|out ptype sub tmpl [src S dst D]
        proto P mode ro [level use]`."""
        pol = selector(src, dst) + lifetime_cfg() + bytes(32) + struct.pack("=IIBBBB4x", 0, 0, direction, 0, 0, 0)
        assert len(pol) == 168
        t_src, t_dst = ("::", "::") if optional else (src, dst)
        tmpl = (struct.pack("=16sIB3x", a16(t_dst), 0, PROTO[proto]) + struct.pack("=H2x", socket.AF_INET6) + a16(t_src)
                + struct.pack("=IBBBxIII", 0, XFRM_MODE_ROUTEOPTIMIZATION, 0, 1 if optional else 0,
                              0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF))
        assert len(tmpl) == 64
        ptype = struct.pack("=BxHBx", XFRM_POLICY_TYPE_SUB, 0, 0)
        self._req(XFRM_MSG_UPDPOLICY, NLM_F_CREATE, pol + _attr(XFRMA_TMPL, tmpl) + _attr(XFRMA_POLICY_TYPE, ptype))
