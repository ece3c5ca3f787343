#!/usr/bin/env python3
"""Writes fuzz/seeds/core_session/: operation sequences for the stateful core target
(fuzz_targets/core_session.rs documents the format) built from the golden packets in
fuzz/seeds/core_inbound (ilnp-wire's tests/garbage.rs `seeds()`: the core is LB:NB, the
correspondent LA:NA). Deterministic; run again after those seeds change:
    python3 fuzz/make-session-seeds.py"""
import struct
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE / "seeds" / "core_inbound"
DEST = HERE / "seeds" / "core_session"

g = [(SRC / f"seed-{i:02}").read_bytes() for i in range(14)]
ID, W32, W96, LU = g[0], g[1], g[2], g[3]


def swapped(p: bytes) -> bytes:
    """The identifier packet P:NA -> P:NB turned into our own P:NB -> P:NA (the pseudo-header
    sum is symmetric, the checksum stays valid)."""
    return p[:8] + p[24:40] + p[8:24] + p[40:]


def renonced(w: bytes) -> bytes:
    """The wire packet with another nonce (a restarted correspondent); the RFC 6741
    checksum does not cover it."""
    n = 4 if w[43] == 4 else 12
    return w[:44] + bytes(0xA5 ^ b for b in w[44:44 + n]) + w[44 + n:]


def IN(p): return b"\x00" + struct.pack(">H", len(p)) + p
def IN4(p, src): return bytes([8 | (src << 4)]) + struct.pack(">H", len(p)) + p  # src: index into FROM
def OUT(p, hint=False): return bytes([1 | (8 if hint else 0)]) + struct.pack(">H", len(p)) + p
def STEP(ms): return b"\x02" + struct.pack(">H", ms)
DUE, SNAP = b"\x03", b"\x06"
def ACT(stranger=False): return bytes([4 | (8 if stranger else 0)])
def LOCS(bits): return bytes([5 | (bits << 3)])
def STAMP(lc=False): return bytes([7 | (8 if lc else 0)])


LV4 = bytes.fromhex("00040a0000021a54")   # our v4 path, 10.0.0.2:6740
LAV4 = bytes.fromhex("0004c000020a1a54")  # the correspondent's, 192.0.2.10:6740


def over_v4(w: bytes) -> bytes:
    """The data packet between the v4 paths (the RFC 6741 checksum leaves locators out)."""
    return w[:8] + LAV4 + w[16:24] + LV4 + w[32:]


def sessions(w):
    me = swapped(ID)
    v = over_v4(w)
    return {
        "responder": IN(w) + OUT(me, True) + STEP(50) + IN(w) + IN(LU) + DUE + SNAP + IN(w) + DUE * 6,
        "initiator-move": OUT(me) + STEP(10) + IN(w) + OUT(me) + LOCS(3) + DUE * 3 + IN(LU) + LOCS(2) + DUE + SNAP + DUE * 2,
        "peer-restart": OUT(me) + IN(w) + STEP(20) + IN(renonced(w)) + STEP(1) + IN(w) + STEP(1500) + IN(renonced(w)) + DUE + IN(renonced(w)) + OUT(me),
        "fast-path-only": OUT(me) + IN(w) + (ACT() + STEP(60000)) * 12 + ACT(True) + STAMP() + DUE * 2 + SNAP + DUE,
        "quiet-period": LOCS(3) + OUT(me) + IN(w) + LOCS(3 | 4) + STAMP(True) + STEP(3500) + DUE * 3 + LOCS(1) + DUE,
        # issue #26: onto a v4 path behind a NAT, a rebinding, a stranger's datagram, keepalives
        "v4-nat": LOCS(1 | 16) + OUT(me) + IN(w) + LOCS(16) + DUE + IN4(v, 1) + OUT(me) + STEP(10) + IN4(v, 2)
                  + OUT(me) + STEP(1100) + DUE + IN4(v, 3) + IN4(renonced(v), 3) + STEP(30000) + DUE * 2 + SNAP + DUE
                  + LOCS(1) + IN(w) + DUE,
    }


def main():
    DEST.mkdir(parents=True, exist_ok=True)
    for f in DEST.iterdir():
        f.unlink()
    files = {}
    for i, p in enumerate(g):  # every golden packet, in then the timers
        files[f"packet-{i:02}"] = b"\x01" + IN(p) + STEP(100) + DUE
    # cfg: 1 = production (configured peer, soft, 32-bit, own nonce, socket); 0 = a stranger;
    # 3 = hard handoff; 5 = 96-bit; 9 = adopt; 17 = admission open; 33 = the peer has a v4 path
    for cfg in (1, 0, 3, 5, 9, 17, 33):
        for name, ops in sessions(W96 if cfg & 4 else W32).items():
            if cfg != 1 and name in ("quiet-period",) and cfg not in (3,):
                continue
            # the v4 session with and without the peer's v4 path on record; cfg 33 only that
            if (name == "v4-nat" and cfg not in (1, 33)) or (cfg == 33 and name != "v4-nat"):
                continue
            files[f"{name}-cfg{cfg:02}"] = bytes([cfg]) + ops
    for name, b in sorted(files.items()):
        (DEST / name).write_bytes(b)
    print(f"{len(files)} seeds in {DEST}")


if __name__ == "__main__":
    main()
