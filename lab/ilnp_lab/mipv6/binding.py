"""The binding cache (HA, CN) and binding update list (MN), RFC 6275 §9.1 / §11.1, with the
sequence-number rule (§9.5.1: a BU's sequence number must be greater, modulo 2**16, than the
last accepted one, else BA status 135 carrying the last accepted number) and the timers RFC
6275 §12 / §13 and UMIP use.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .mh import BA_ACCEPTED, BA_SEQ_OUT_OF_WINDOW

# RFC 6275 §12-13 and UMIP's defaults
INITIAL_BINDACK_TIMEOUT = 1.0
INITIAL_BINDACK_TIMEOUT_FIRST_REG = 1.5   # InitialBindackTimeoutFirstReg (§13)
MAX_BINDACK_TIMEOUT = 32.0
MAX_UPDATE_RATE = 3                       # BUs per second to one peer
HOME_REG_LIFETIME = 60.0                  # UMIP's MnHomeLinkLifetime default is larger; lab runs are short
DAD_RETRANS_TIMER = 1.0                   # RetransTimer (RFC 4861), DupAddrDetectTransmits 1 (RFC 4862)


def seq_newer(a: int, b: int) -> bool:
    """a > b modulo 2**16 (RFC 1982 style, as §9.5.1 intends)."""
    return a != b and ((a - b) & 0xFFFF) < 0x8000


@dataclass
class Binding:
    home: str
    coa: str
    seq: int
    lifetime: float
    home_reg: bool
    created: float
    updated: float

    def expires(self) -> float:
        return self.updated + self.lifetime


class BindingCache:
    """home address -> Binding; `update` applies §9.5.1's checks and returns a BA status."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.entries: dict[str, Binding] = {}

    def lookup(self, home: str) -> Binding | None:
        b = self.entries.get(home)
        if b and self.clock() >= b.expires():
            del self.entries[home]
            return None
        return b

    def last_seq(self, home: str) -> int | None:
        b = self.lookup(home)
        return b.seq if b else None

    def check_seq(self, home: str, seq: int) -> bool:
        last = self.last_seq(home)
        return last is None or seq_newer(seq, last)

    def update(self, home: str, coa: str, seq: int, lifetime: float, home_reg: bool) -> int:
        """Status 0 (accepted, the entry updated or, for lifetime 0 / coa == home, deleted) or
        135 (sequence number out of window: the caller answers with the last accepted one)."""
        if not self.check_seq(home, seq):
            return BA_SEQ_OUT_OF_WINDOW
        now = self.clock()
        if lifetime == 0 or coa == home:
            self.entries.pop(home, None)
            return BA_ACCEPTED
        old = self.entries.get(home)
        self.entries[home] = Binding(home, coa, seq, lifetime, home_reg, old.created if old else now, now)
        return BA_ACCEPTED


@dataclass
class BulEntry:
    """One binding update list entry (§11.1): to whom, what was sent, its retransmission state."""
    peer: str
    home: str
    coa: str
    seq: int
    lifetime: float
    home_reg: bool
    sent: float
    timeout: float
    acked: bool = False
    tries: int = 1
    rr: dict = field(default_factory=dict)  # HoT/CoT tokens and nonce indices (RO)


class BindingUpdateList:
    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.entries: dict[str, BulEntry] = {}
        self.seq: dict[str, int] = {}

    def next_seq(self, peer: str) -> int:
        s = (self.seq.get(peer, -1) + 1) & 0xFFFF
        self.seq[peer] = s
        return s

    def sent(self, peer: str, home: str, coa: str, lifetime: float, home_reg: bool, first_reg: bool) -> BulEntry:
        seq = self.next_seq(peer)
        t0 = INITIAL_BINDACK_TIMEOUT_FIRST_REG if (home_reg and first_reg) else INITIAL_BINDACK_TIMEOUT
        e = BulEntry(peer, home, coa, seq, lifetime, home_reg, self.clock(), t0)
        self.entries[peer] = e
        return e

    def due(self, peer: str) -> bool:
        """Retransmit now? (unacknowledged and its timeout passed)."""
        e = self.entries.get(peer)
        return bool(e and not e.acked and self.clock() - e.sent >= e.timeout)

    def retransmitted(self, peer: str) -> BulEntry:
        """§11.8: the timeout doubles up to MAX_BINDACK_TIMEOUT; a new sequence number."""
        e = self.entries[peer]
        e.seq = self.next_seq(peer)
        e.timeout = min(e.timeout * 2, MAX_BINDACK_TIMEOUT)
        e.sent = self.clock()
        e.tries += 1
        return e

    def acked(self, peer: str, seq: int, status: int, lifetime: float) -> bool:
        """A BA for `peer`: True if it acknowledges the outstanding BU. Status 135 resyncs the
        sequence number to the one the BA carries (§11.7.3)."""
        e = self.entries.get(peer)
        if e is None:
            return False
        if status == BA_SEQ_OUT_OF_WINDOW:
            self.seq[peer] = seq
            return False
        if seq != e.seq:
            return False
        e.acked = status < 128
        e.lifetime = min(e.lifetime, lifetime)
        return e.acked
