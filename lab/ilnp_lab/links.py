"""A link between two nodes of a testbed, as an experiment file describes it: its ends,
addresses and the parameters a move may change (delay, loss, rate, jitter). Its own
module because both the topology (which builds links) and the mobility model (which
changes them over a run) use it, and neither imports the other's way round."""

from __future__ import annotations

from dataclasses import dataclass

LINK_PARAMS = {"delay_ms", "loss_pct", "rate_mbit", "jitter_ms", "jitter_dist", "jitter_order"}  # what a move may change on a link


@dataclass(frozen=True)
class LinkSpec:
    name: str
    a: str
    a_if: str
    b: str
    b_if: str
    a_addr: str | None = None
    b_addr: str | None = None
    delay_ms: float = 0.0
    loss_pct: float = 0.0
    rate_mbit: float | None = None
    mtu: int | None = None
    up: bool = True
    jitter_ms: float = 0.0
    jitter_dist: str = "normal"
    jitter_order: str = "fifo"
