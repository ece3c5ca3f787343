"""A mobility run's events and the gaps in what a flow delivered around them.

Gaps (seed 000 §5.4 at the event): each gap between consecutive delivered arrivals is
attributed to one period. A move event's window runs from `EVENT_PRE_S` before to
`EVENT_RTTS` round trips plus `EVENT_MARGIN_S` after the moment the change can act on the
flow: the event itself for a leave, the new locator becoming usable for a join (the first
Router Advertisement with its prefix, plus DAD when it is not optimistic; before that the
joined link carries nothing the flow uses), given by the caller as the event's `usable_s`;
the round trip is the event's `rtt_s`, the larger
configured RTT of the MN's paths before and after the event (a handoff pause begins within
one RTT of the locator change: the LU reaches the CN, the old path drains, TCP reacts to
loss or reordering within one more round trip). A gap that overlaps the window (in progress
at its start, or starting in it) is the event's, up to the next event's window; the
event's interruption is the longest of them. Gaps starting within `startup_s` of the first
delivered data (and before the first event's window) are the start-up (TCP's first round
trips, iperf3's start); the rest are the steady state, whose level is reported as its
longest gap (`steady_gap_ms`) and its 99th percentile (`steady_gap_p99_ms`). An
interruption no longer than the longest steady-state gap is not distinguishable from the
flow's ordinary pacing: it is still reported, marked `is_steady`. The time from the last
arrival to the flow's end is the tail. A flow whose tail is longer than `BROKEN_S` is broken
at its last delivered arrival: its loss is then "N not delivered after", not a count of
lost packets, and every event up to the next one's window after the break has no
interruption (`broken`).


What the timeline's events need from the captures and the experiment file (`mobility.Run.analyse`):
the first Router Advertisement of a prefix, each event's usable time, the MN's new prefixes, RA -> LU.
"""

from __future__ import annotations

import ipaddress
import math
from collections import Counter
from typing import TYPE_CHECKING, Sequence

from .. import pcap
from ..wire import ICMPV6, ROUTER_ADVERT
from .stats import _percentile, _r

if TYPE_CHECKING:
    from ..topology import Experiment


# a move event's window: [act - EVENT_PRE_S, act + EVENT_RTTS * rtt + EVENT_MARGIN_S], act = when the
# change can act on the flow (the event for a leave, the new locator usable for a join; module doc)
# the event's time is read just before the link changes, the captures' times by the kernel: a
# few ms of tolerance for the order of the two clocks' readings
EVENT_PRE_S = 0.005


# round trips after the change: one for the LU to reach the CN and its packets to come back
# on the new path (or the old one to drain), one for TCP's reaction to loss or reordering
EVENT_RTTS = 2


# scheduling on a shared 2-core machine, daemon processing, the delay lines' timer (measured
# LU processing and RA -> LU are under 1 ms; this covers tens of ms of CPU contention)
EVENT_MARGIN_S = 0.05


# gaps starting this long after the first delivered data are start-up, not handoff
STARTUP_S = 2.0


# no data delivered for this long before the flow's end: the session is broken
BROKEN_S = 1.0


def _timeline(arrivals: list[tuple[float, int]], end: float, bin_s: float) -> list[list[float]]:
    if bin_s <= 0:
        raise ValueError(f"bin_s must be positive, got {bin_s}")
    n = max(1, math.ceil(end / bin_s - 1e-9))
    acc = [0] * n
    for t, b in arrivals:
        if t < 0:
            continue
        if t <= end:
            acc[min(int(t / bin_s), n - 1)] += b
    out = []
    for i, b in enumerate(acc):
        start = i * bin_s
        width = min(bin_s, end - start) if end > start else bin_s
        out.append([round(start, 9), b / width])
    return out


def _event_kind(e: dict) -> str:
    return {"up": "join", "down": "leave"}.get(e.get("action"), str(e.get("action")))


def event_window(e: dict) -> tuple[float, float]:
    """[start, end] of a move event's window (module doc), before clipping at the next one's:
    around the moment the change can act on the flow, `usable_s` (default: the event's time).
    Without `rtt_s` the round trip is 0."""
    t = float(e["t_s"])
    act = max(t, float(e.get("usable_s") if e.get("usable_s") is not None else t))
    rtt = float(e.get("rtt_s") or 0.0)
    return act - EVENT_PRE_S, act + EVENT_RTTS * rtt + EVENT_MARGIN_S


def _gap_metrics(times: list[float], end_s: float | None, events: Sequence[dict], startup_s: float) -> dict:
    """Gaps between the sorted delivered arrival `times`, attributed to start-up, each move
    event, the steady state and the tail (see the module doc); all durations in ms."""
    out: dict = {"event_window": {"pre_s": EVENT_PRE_S, "rtts": EVENT_RTTS, "margin_s": EVENT_MARGIN_S},
                 "startup_s": startup_s}
    end = (times[-1] if times else 0.0) if end_s is None else float(end_s)
    upto = [t for t in times if t <= end]
    last = times[-1] if times else None
    broken_at = None
    if end_s is not None and (last is None or (last <= end and end - last > BROKEN_S)):
        broken_at = 0.0 if last is None else last
    gaps = list(zip(upto, upto[1:]))
    evs = sorted((dict(e) for e in events), key=lambda e: e["t_s"])
    wins = [event_window(e) for e in evs]
    starts = [w[0] for w in wins]
    ends = [min(w[1], end, starts[i + 1] if i + 1 < len(evs) else math.inf) for i, w in enumerate(wins)]
    first = upto[0] if upto else None
    su_end = None if first is None else min(first + startup_s, starts[0] if evs else math.inf, end)

    def longest(gs):
        g = max(gs, key=lambda g: g[1] - g[0], default=None)
        return (None, None, None) if g is None else (_r((g[1] - g[0]) * 1000, 3), _r(g[0]), _r(g[1]))

    claimed = set()
    mine_by_event = []
    for ws, we in zip(starts, ends):
        mine = [g for g in gaps if g[0] < we and g[1] > ws and g not in claimed]  # in progress at ws, or starting in it
        claimed.update(mine)
        mine_by_event.append(mine)
    startup = [g for g in gaps if su_end is not None and g[0] < su_end and g not in claimed]
    claimed.update(startup)
    steady = [g for g in gaps if g not in claimed]
    out["startup_gap_ms"], out["startup_gap_at_s"], _ = longest(startup)
    out["steady_gap_ms"], out["steady_gap_at_s"], _ = longest(steady)
    p99 = _percentile(sorted(b - a for a, b in steady), 0.99)
    out["steady_gap_p99_ms"] = None if p99 is None else _r(p99 * 1000, 3)
    level = out["steady_gap_ms"]

    per_event, seen_kind = [], Counter()
    for i, (e, ws, we, mine) in enumerate(zip(evs, starts, ends, mine_by_event)):
        kind = _event_kind(e)
        seen_kind[kind] += 1
        key = kind if seen_kind[kind] == 1 else f"{kind}{seen_kind[kind]}"
        # broken before the next event's window: this event has no interruption to measure
        broken = broken_at is not None and broken_at < (starts[i + 1] if i + 1 < len(evs) else math.inf)
        ms, a, b = (None, None, None) if broken else longest(mine)
        steady_like = None if ms is None or level is None else ms <= level
        per_event.append({"key": key, "label": e.get("label"), "t_s": e["t_s"], "usable_s": e.get("usable_s"),
                          "rtt_s": e.get("rtt_s"), "window_s": [_r(ws), _r(we)], "interruption_ms": ms,
                          "gap_from_s": a, "gap_to_s": b, "is_steady": steady_like, "broken": broken})
        out.setdefault(f"interruption_{key}_ms", ms)
        out.setdefault(f"interruption_{key}_at_s", a)
        out.setdefault(f"interruption_{key}_is_steady", steady_like)
    out["tail_ms"] = None if broken_at is not None or not upto else _r(max(0.0, end - upto[-1]) * 1000, 3)
    out["longest_gap_ms"], out["longest_gap_at_s"], _ = longest(gaps)  # whole flow, start-up included
    out["broken_at_s"] = _r(broken_at)
    out["events"] = per_event
    return out


def _arrival_metrics(arrivals: list[tuple[float, int]], end_s: float | None, bin_s: float,
                     events: Sequence[dict] = (), startup_s: float = STARTUP_S) -> dict:
    """First/last delivered arrival, the gaps and the rate timeline of (time, bytes) arrivals."""
    times = sorted(t for t, _ in arrivals)
    g = _gap_metrics(times, end_s, events, startup_s)
    end = (times[-1] if times else 0.0) if end_s is None else float(end_s)
    return {
        "first_data_at_s": _r(times[0]) if times else None,
        "last_data_at_s": _r(times[-1]) if times else None,
        **g,
        "end_s": _r(end),
        "bin_s": bin_s,
        "timeline": _timeline(arrivals, end, bin_s),
    }


def delivered(arrivals: list[tuple[float, int]], end_s: float | None, events: Sequence[dict] = (),
              bin_s: float = 0.1, startup_s: float = STARTUP_S) -> dict:
    """The metrics of `_arrival_metrics` for what a receiving application logged itself:
    (seconds from the flow's start, bytes) per record it read. The same definitions as for
    the captures (`tcp_flow`, `udp_flow`), applied to what reached the application."""
    return _arrival_metrics(arrivals, end_s, bin_s, events, startup_s)


def between_events(events: Sequence[dict], items: Sequence[dict], event_t: str, item_t: str) -> list[list[dict]]:
    """For each event (in the given order, by time), the items whose time falls from it up to
    the next event: what each move event caused (its LUs, handshakes)."""
    out = []
    for i, e in enumerate(events):
        nxt = events[i + 1][event_t] if i + 1 < len(events) else math.inf
        out.append([x for x in items if e[event_t] <= x[item_t] < nxt])
    return out


# RetransTimer (RFC 4861 default; radvd advertises 0, unspecified): one DAD probe's wait
DAD_RETRANS_S = 1.0


def first_ra_s(mn_pcap: str, t0: float, after_s: float, prefix: str) -> float | None:
    """The first Router Advertisement carrying `prefix` captured at the MN at or after
    `after_s` (relative to t0), or None."""
    want = ipaddress.IPv6Network(prefix).network_address.packed[:8]
    for p in pcap.read(mn_pcap):
        if p.proto == ICMPV6 and p.l4[:1] == bytes([ROUTER_ADVERT]) and p.ts - t0 >= after_s and want in p.l4[16:]:
            return p.ts - t0
    return None


def event_context(ex: Experiment, move: str, mn_pcap: str, t0: float, timeline: list[dict]) -> list[dict]:
    """The timeline's events with what their interruption window needs (analysis.event_window):
    `rtt_s` = the larger configured round trip of the MN's paths up just before and just after
    the event; `usable_s` = for the MN joining a network, when its new locator is usable (the
    first RA with its prefix, plus dad_transmits x RetransTimer unless DAD is optimistic or
    off), None if no RA was captured; otherwise when the link change had been made (`changed_s`,
    the timeline's record of it; the event's own time in runs from before it was recorded)."""
    up = {iface for iface, link in ex.host_ifaces(ex.mn) if link.up}
    rtt = {iface: ex.path_rtt_s(move, ex.mn, iface) for iface, _ in ex.host_ifaces(ex.mn)}
    out = []
    for e in sorted(timeline, key=lambda e: e["t_s"]):
        before = set(up)
        if e["node"] == ex.mn:
            (up.add if e["action"] == "up" else up.discard)(e["iface"])
        paths = before | up or set(rtt)
        usable = e.get("changed_s", e["t_s"])
        if e["node"] == ex.mn and e["action"] == "up":
            ra = ex.radvd_facing(ex.mn, e["iface"])
            t_ra = first_ra_s(mn_pcap, t0, e["t_s"], ra.prefix) if ra else None
            dad = ex.dad_transmits * DAD_RETRANS_S if ex.dad == "standard" else 0.0
            usable = None if t_ra is None else round(t_ra + dad, 6)
        out.append(dict(e, rtt_s=max(rtt[i] for i in paths), usable_s=usable))
    return out


def mn_prefix(ex: Experiment, iface: str) -> str | None:
    """The /64 the MN has on `iface`: its static address's network or what is advertised there."""
    for i, link in ex.host_ifaces(ex.mn):
        if i == iface:
            addr = link.a_addr if (link.a, link.a_if) == (ex.mn, iface) else link.b_addr
            if addr:
                return str(ipaddress.IPv6Interface(addr).network)
    ra = ex.radvd_facing(ex.mn, iface)
    return ra.prefix if ra else None


def with_new_prefixes(ex: Experiment, timeline: list[dict]) -> list[dict]:
    """The timeline with each event's `new_prefixes`: the MN's path after it (a join: the
    joined network; a leave: the networks still up; another node's event: none)."""
    up = {iface for iface, link in ex.host_ifaces(ex.mn) if link.up}
    out = []
    for e in sorted(timeline, key=lambda e: e["t_s"]):
        new = []
        if e["node"] == ex.mn:
            (up.add if e["action"] == "up" else up.discard)(e["iface"])
            ifaces = [e["iface"]] if e["action"] == "up" else sorted(up)
            new = [p for p in (mn_prefix(ex, i) for i in ifaces) if p]
        out.append(dict(e, new_prefixes=new))
    return out


def ra_to_lu_ms(mn_pcap: str, t0: float, timeline: list[dict], ex: Experiment, lus: list[dict]) -> float | None:
    """Locator usable -> LU on the wire: from the first Router Advertisement carrying the
    joined network's prefix (with optimistic DAD the address is usable on receipt) to
    the first LU the MN sends after it."""
    join = next((e for e in timeline if e["action"] == "up" and e["node"] == ex.mn), None)
    ra = ex.radvd_facing(ex.mn, join["iface"]) if join else None
    if not ra or not lus:
        return None
    t_ra = first_ra_s(mn_pcap, t0, join["t_s"], ra.prefix)
    if t_ra is None:
        return None
    after = [l["t_sent_s"] for l in lus if l["t_sent_s"] >= t_ra]
    return round((after[0] - t_ra) * 1000, 3) if after else None
