"""Flow metrics from tcpdump captures, with seed 000 §5.4 / §6.1's definitions.

Inputs are captures taken with `tcpdump -s 160 -w` on the CN's uplink(s) and on every
uplink of the MN; all namespaces share the host clock, so captures of one side are
merged by timestamp. Every length comes from the IPv6 Payload Length field minus the
extension headers (captures are snaplen-truncated), never from the captured bytes.

Flows are never keyed on addresses: an ILNPv6 MN's locators change mid-flow. A TCP
connection is its (source port, destination port); an MPTCP connection is several of
them.

Sequence numbers are compared as byte ranges (unwrapped from the connection's ISN), so
a retransmission that the sender re-segmented, or a GSO/TSO super-segment that tcpdump
saw before segmentation, is still matched. Packet counts are given in MSS-sized units
(`ceil(payload / mss)`), which equals the number of captured segments when nothing was
aggregated, and the number of wire packets when something was.

Delivered, not captured: the MN's capture is taken before its tc ingress program, so a
packet ilnpd drops is on it too. With hard handoff the MN accepts only the locators its
latest Locator Update advertised (the previous ones are aged when a new one takes over);
a data packet captured at the MN addressed to any other locator after that LU is counted
as dropped (`stale_dropped`), never as an arrival (`accepted_locators`, `stale_drops`).

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

All results are plain dicts of JSON types; times are seconds relative to the caller's t0.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import math
import os
import statistics
import struct
from bisect import bisect_right
from collections import Counter, defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator, Sequence

from .addr import groups64, nid_value
from . import pcap
from .pcap import EXT_HDRS, ICMPV6, TCP, UDP, iter_ipv6, upper_layer

if TYPE_CHECKING:
    from .topology import Experiment

LU_TYPE = 156
LU_ADVERT, LU_ACK = 1, 2
_M32 = 0xFFFFFFFF
_SYN, _ACK = 0x02, 0x10
_TCP_HDR = struct.Struct("!HHIIBB")
MPTCP_OPT = 30
IPERF_COOKIE = 37  # iperf3's per-connection cookie (COOKIE_SIZE)

__all__ = ["tcp_flow", "udp_flow", "udp_transfer", "lu_handshakes", "accepted_locators", "stale_drops",
           "attribute_drops", "lu_by_event", "udp_reverse", "handoffs", "handoff_summary", "iperf_receiver", "summary",
           "event_window", "control_messages", "control_totals", "handoff_latencies"]

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


# --------------------------------------------------------------------------- packets


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


def _tokens(key: bytes) -> set[bytes]:
    """MPTCP token of a key: SHA-256 (RFC 8684, v1) or SHA-1 (RFC 6824, v0), top 32 bits."""
    return {hashlib.sha256(key).digest()[:4], hashlib.sha1(key).digest()[:4]}


def _unwrap(base: int):
    """Maps 32-bit sequence numbers, in time order, to offsets from `base` without wrap."""
    last = 0

    def f(seq: int) -> int:
        nonlocal last
        d = (seq - base - last) & _M32
        if d >= 1 << 31:
            d -= 1 << 32
        last += d
        return last

    return f


def _union_len(ranges: list[tuple[int, int]]) -> int:
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(ranges):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        elif e > cur_e:
            cur_e = e
    if cur_e is not None:
        total += cur_e - cur_s
    return total


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


def _percentile(v: Sequence[float], p: float) -> float | None:
    """p-th percentile of sorted `v`, linear between closest ranks (numpy's default)."""
    if not v:
        return None
    pos = (len(v) - 1) * p
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


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


# --------------------------------------------------------------------------- dropped at the MN


def _loc_str(b: bytes) -> str:
    return groups64(int.from_bytes(b[:8], "big"))


def accepted_locators(lus: Sequence[dict], handoff: str | None) -> list[tuple[float, frozenset[str]]]:
    """(from t, locators the MN accepts) after each of its Locator Updates, for hard
    handoff (the MN accepts exactly what it advertises: a locator is aged when a newer one
    takes over, and ilnpd drops packets to it as `aged_local_locator`). Before the first LU,
    and with soft handoff (a retired locator still accepts late packets), every locator is
    accepted: empty list."""
    if handoff != "hard":
        return []
    return sorted((float(a["t_sent_s"]), frozenset(a["locators"])) for a in lus)


def _stale(accepted: Sequence[tuple[float, frozenset[str]]], t: float, dst: bytes) -> bool:
    """Is a packet to the MN's address `dst` at time t dropped for its locator?"""
    if not accepted:
        return False
    j = bisect_right([a[0] for a in accepted], t) - 1
    return j >= 0 and _loc_str(dst) not in accepted[j][1]


def stale_drops(mn_pcaps: str | Iterable[str], t0: float, mn_nid: str | int,
                accepted: Sequence[tuple[float, frozenset[str]]]) -> list[dict]:
    """Packets captured at the MN that its ilnpd dropped for a stale locator, per flow:
    [{"proto", "src_port", "dst_port", "packets"}] (TCP/UDP; other protocols with ports 0),
    most first. Locator Updates are never dropped this way (ilnpd handles them first)."""
    nid = nid_value(mn_nid)
    count: Counter = Counter()
    for ts, pkt, nh, off, _l4len in _l4(_as_list(mn_pcaps), (TCP, UDP, ICMPV6)):
        if int.from_bytes(pkt[32:40], "big") != nid or not _stale(accepted, ts - t0, pkt[24:32]):
            continue
        if nh == ICMPV6:
            if off < len(pkt) and pkt[off] == LU_TYPE:
                continue
            count[(nh, 0, 0)] += 1
        elif off + 4 <= len(pkt):
            count[(nh, *struct.unpack_from("!HH", pkt, off))] += 1
    return [{"proto": k[0], "src_port": k[1], "dst_port": k[2], "packets": n}
            for k, n in sorted(count.items(), key=lambda kv: (-kv[1], kv[0]))]


def attribute_drops(drops: Sequence[dict], ports: dict[str, int], daemon_counter: int | None = None) -> dict:
    """Sums `stale_drops` per named flow (by its destination port at the MN; a TCP flow's
    drops include its control connection's), the rest as "other", beside the MN daemon's
    own `aged_local_locator` counter (`unattributed` = counter minus what the capture shows)."""
    out = {name: 0 for name in ports}
    out["other"] = 0
    for d in drops:
        name = next((n for n, p in ports.items() if d["dst_port"] == p), "other")
        out[name] += d["packets"]
    if daemon_counter is not None:
        out["daemon_counter"] = int(daemon_counter)
        out["unattributed"] = int(daemon_counter) - sum(out[n] for n in (*ports, "other"))
    return out


def _r(x: float | None, nd: int = 6) -> float | None:
    return None if x is None else round(x, nd)


# --------------------------------------------------------------------------- TCP


class _Seg:
    __slots__ = ("ts", "key", "seq", "ln")

    def __init__(self, ts: float, key: tuple[int, int], seq: int, ln: int):
        self.ts, self.key, self.seq, self.ln = ts, key, seq, ln


def _scan_tcp(paths: Sequence[str], port: int, t0: float, conns: dict, segs: list[_Seg], mss_opts: dict,
              accepted: Sequence = (), dropped: list[_Seg] | None = None, reverse: bool = False) -> None:
    """Connections to the server `port` (keyed (client port, server port)) and their data
    segments: to `port`, or with `reverse` (iperf3 -R) from it, whose ISN is then the
    server's (its SYN-ACK); with `accepted`, data segments to a stale locator of the MN go to
    `dropped` instead of `segs`."""
    for ts, pkt, _nh, off, l4len in _l4(paths, (TCP,)):
        if off + 14 > len(pkt):
            continue
        sport, dport, seq, _ack, doff_b, flags = _TCP_HDR.unpack_from(pkt, off)
        if dport == port:
            key = (sport, dport)
        elif sport == port:
            key = (dport, sport)
        else:
            continue
        t = ts - t0
        c = conns.get(key)
        if c is None:
            c = conns[key] = {"first": t, "syn": None, "isn": None, "join_token": None, "keys": [], "ts_opt": 0}
        elif t < c["first"]:
            c["first"] = t
        doff = (doff_b >> 4) * 4
        if flags & _SYN:
            fwd = dport == port
            if fwd and not flags & _ACK:
                if c["syn"] is None or t < c["syn"]:
                    c["syn"] = t
                if not reverse:
                    c["isn"] = seq
            elif reverse and not fwd and flags & _ACK:
                c["isn"] = seq
            for kind, val in _tcp_options(pkt, off, doff):
                if kind == 2 and len(val) == 2:  # MSS
                    mss_opts.setdefault(key, {})["cn" if fwd else "mn"] = struct.unpack("!H", val)[0]
                elif kind == 8:  # timestamps: 12 bytes of every segment
                    c["ts_opt"] |= 1 if fwd else 2
                elif kind == MPTCP_OPT and val:
                    sub = val[0] >> 4
                    if sub == 1 and fwd and len(val) >= 6:  # MP_JOIN SYN: the receiver's token
                        c["join_token"] = bytes(val[2:6])
                    elif sub == 0 and len(val) >= 10:  # MP_CAPABLE with the sender's key
                        c["keys"].append(bytes(val[2:10]))
            continue
        if (sport if reverse else dport) != port:
            continue
        ln = l4len - doff
        if ln > 0:
            stale = dropped is not None and _stale(accepted, t, pkt[24:32])
            (dropped if stale else segs).append(_Seg(t, key, seq, ln))


def _mss(data_keys: set, mss_opts: dict, conns: dict, cn: list[_Seg], mn: list[_Seg]) -> int:
    for k in sorted(data_keys, key=lambda k: conns[k]["first"]):
        o = mss_opts.get(k, {})
        vals = [v for v in (o.get("cn"), o.get("mn")) if v]
        if vals:
            return max(1, min(vals) - (12 if conns[k]["ts_opt"] == 3 else 0))
    for segs in (mn, cn):
        lens = Counter(s.ln for s in segs)
        if lens:
            return lens.most_common(1)[0][0]
    return 1


def tcp_flow(
    cn_pcaps: str | Iterable[str],
    mn_pcaps: str | Iterable[str],
    port: int,
    t0: float,
    *,
    accepted: Sequence[tuple[float, frozenset[str]]] = (),
    events: Sequence[dict] = (),
    startup_s: float = STARTUP_S,
    bin_s: float = 0.5,
    end_s: float | None = None,
    control: bool = True,
    reverse: bool = False,
) -> dict:
    """Metrics of an iperf3 TCP flow CN → MN whose server listens on `port` on the MN.

    iperf3's control connection (the earliest SYN to `port`, or the earliest connection
    seen if no SYN was captured, and any MPTCP subflow joined to it) is left out; every
    other connection to `port` is the data connection or one of its MPTCP subflows.
    iperf3 starts every connection with a 37-byte cookie; with `control=True` that cookie
    (bytes 0-36 of a connection whose SYN was seen and that is not an MPTCP join) is not
    counted as data, so `bytes_received` matches iperf3's own byte count.
    `control=False` is for traffic without a control connection: everything counts.
    `reverse=True` (iperf3 -R): the server listens on `port` on the CN and the MN is the
    client; the data still flows CN -> MN, from `port`, and carries no cookie.

    Segments captured at the MN to a locator that `accepted` (see `accepted_locators`)
    excludes were dropped by its ilnpd: `stale_dropped`, not received. `lost` = data
    packets the CN retransmitted whose sequence range was not delivered twice (a dropped
    or lost original, or a lost retransmission), counted once; None for a broken session,
    which reports `broken_at_s` and `undelivered_after_break` (data packets the CN sent
    that never reached the MN's TCP) instead. `events` (the mobility run's timeline) give the
    per-event interruptions.
    """
    cn_paths, mn_paths = _as_list(cn_pcaps), _as_list(mn_pcaps)
    conns: dict[tuple[int, int], dict] = {}
    mss_opts: dict = {}
    cn_segs: list[_Seg] = []
    mn_segs: list[_Seg] = []
    dropped: list[_Seg] = []
    _scan_tcp(cn_paths, port, t0, conns, cn_segs, mss_opts, reverse=reverse)
    _scan_tcp(mn_paths, port, t0, conns, mn_segs, mss_opts, accepted, dropped, reverse=reverse)
    cn_segs.sort(key=lambda s: s.ts)
    mn_segs.sort(key=lambda s: s.ts)

    # control connection: earliest SYN to the port (earliest packet if no SYN was captured)
    ctrl = None
    with_syn = [k for k, c in conns.items() if c["syn"] is not None]
    if not control or not conns:
        pass
    elif with_syn:
        ctrl = min(with_syn, key=lambda k: conns[k]["syn"])
    else:
        ctrl = min(conns, key=lambda k: conns[k]["first"])
    excluded = set()
    if ctrl is not None:
        excluded.add(ctrl)
        tokens: set[bytes] = set()
        for key in conns[ctrl]["keys"]:
            tokens |= _tokens(key)
        for k, c in conns.items():
            if c["join_token"] is not None and c["join_token"] in tokens:
                excluded.add(k)  # an MPTCP subflow of the control connection
    data_keys = {k for k in conns if k not in excluded}
    cookie = {}
    if control and not reverse:  # iperf3's client sends the cookie: with -R, not in the data's direction
        for k in data_keys:
            c = conns[k]
            if c["isn"] is not None and c["join_token"] is None:
                cookie[k] = (c["isn"] + 1) & _M32

    def is_cookie(s: _Seg) -> bool:
        start = cookie.get(s.key)
        return start is not None and ((s.seq - start) & _M32) + s.ln <= IPERF_COOKIE

    cn_segs = [s for s in cn_segs if s.key in data_keys and not is_cookie(s)]
    mn_segs = [s for s in mn_segs if s.key in data_keys and not is_cookie(s)]
    dropped = [s for s in dropped if s.key in data_keys and not is_cookie(s)]
    mss = _mss(data_keys, mss_opts, conns, cn_segs, mn_segs)

    def units(ln: int) -> int:
        return -(-ln // mss)

    # per connection, sequence numbers as offsets from the ISN (or the first data seen)
    unwrap = {}
    for k in data_keys:
        isn = conns[k]["isn"]
        if isn is not None:
            base = (isn + 1) & _M32
        else:
            firsts = [s for s in (next((x for x in cn_segs if x.key == k), None), next((x for x in mn_segs if x.key == k), None)) if s]
            base = min(firsts, key=lambda s: s.ts).seq if firsts else 0
        unwrap[k] = base
    cn_unwrap = {k: _unwrap(b) for k, b in unwrap.items()}
    mn_unwrap = {k: _unwrap(b) for k, b in unwrap.items()}

    # CN: a segment starting below the highest byte already sent repeats sequence numbers
    max_end: dict = defaultdict(int)
    started: set = set()
    retrans: dict[tuple, int] = {}  # (conn, start) -> longest end among its retransmissions
    sent_ranges: dict = defaultdict(list)
    data_units = retrans_units = retrans_segs = retrans_bytes = 0
    for s in cn_segs:
        a = cn_unwrap[s.key](s.seq)
        e = a + s.ln
        data_units += units(s.ln)
        sent_ranges[s.key].append((a, e))
        if s.key in started and a < max_end[s.key]:
            retrans_segs += 1
            retrans_units += units(s.ln)
            retrans_bytes += min(e, max_end[s.key]) - a
            rk = (s.key, a)
            retrans[rk] = max(retrans.get(rk, 0), e)
        started.add(s.key)
        if e > max_end[s.key]:
            max_end[s.key] = e

    # MN: arrivals, unique bytes, how often each retransmitted start was received
    recv_ranges: dict = defaultdict(list)
    arrivals: list[tuple[float, int]] = []
    for s in mn_segs:
        a = mn_unwrap[s.key](s.seq)
        recv_ranges[s.key].append((a, a + s.ln))
        arrivals.append((s.ts, s.ln))
    index = {}
    for k, rs in recv_ranges.items():
        rs.sort()
        index[k] = ([r[0] for r in rs], rs, max(r[1] - r[0] for r in rs))

    def received(k, pos: int) -> int:
        if k not in index:
            return 0
        starts, rs, maxlen = index[k]
        n, j = 0, bisect_right(starts, pos) - 1
        while j >= 0 and starts[j] > pos - maxlen:
            if rs[j][1] > pos:
                n += 1
            j -= 1
        return n

    lost_units = lost_bytes = 0
    for (k, a), e in retrans.items():
        if received(k, a) < 2:
            lost_units += units(e - a)
            lost_bytes += e - a

    bytes_received = sum(_union_len(r) for r in recv_ranges.values())
    bytes_sent = sum(_union_len(r) for r in sent_ranges.values())
    # sequence space the CN sent that never reached the MN's TCP
    undelivered = sum(_union_len(sent_ranges[k] + recv_ranges.get(k, [])) - _union_len(recv_ranges.get(k, []))
                      for k in sent_ranges)
    gaps = _arrival_metrics(arrivals, end_s, bin_s, events, startup_s)
    broken = gaps["broken_at_s"] is not None
    return {
        "port": port,
        "connections": [list(k) for k in sorted(data_keys, key=lambda k: conns[k]["first"])],
        "control_connections": [list(k) for k in sorted(excluded, key=lambda k: conns[k]["first"])],
        "mss": mss,
        "bytes_received": bytes_received,
        "bytes_sent": bytes_sent,
        "data_packets_sent": data_units,
        "data_segments_captured": len(cn_segs),
        "data_packets_received": sum(units(s.ln) for s in mn_segs),
        "retransmissions": retrans_units,
        "retransmitted_segments_captured": retrans_segs,
        "retransmitted_bytes": retrans_bytes,
        "stale_dropped": sum(units(s.ln) for s in dropped),
        "stale_dropped_segments": len(dropped),
        "lost_retransmitted": lost_units,
        "lost_bytes": lost_bytes,
        "lost": None if broken else lost_units,
        "undelivered_after_break": -(-undelivered // mss) if broken else None,
        "undelivered_bytes_after_break": undelivered if broken else None,
        **gaps,
    }


# --------------------------------------------------------------------------- UDP


_UDP_KEY = 16  # payload bytes identifying a datagram (iperf3: its send time and sequence number)


def _udp_datagrams(paths: Sequence[str], port: int, t0: float, accepted: Sequence = (),
                   from_port: bool = False) -> tuple[list, list]:
    """(kept, stale) lists of (t, payload length, identity) of UDP datagrams to `port`
    (`from_port`: from it)."""
    kept, stale = [], []
    at = 0 if from_port else 2
    for ts, pkt, _nh, off, l4len in _l4(paths, (UDP,)):
        if off + 4 > len(pkt) or ((pkt[off + at] << 8) | pkt[off + at + 1]) != port:
            continue
        d = (ts - t0, max(0, l4len - 8), bytes(pkt[off + 8 : off + 8 + _UDP_KEY]))
        (stale if _stale(accepted, d[0], pkt[24:32]) else kept).append(d)
    kept.sort(key=lambda d: d[0])
    stale.sort(key=lambda d: d[0])
    return kept, stale


def udp_flow(
    mn_pcaps: str | Iterable[str],
    port: int,
    t0: float,
    *,
    accepted: Sequence[tuple[float, frozenset[str]]] = (),
    events: Sequence[dict] = (),
    startup_s: float = STARTUP_S,
    bin_s: float = 0.5,
    end_s: float | None = None,
) -> dict:
    """UDP datagrams to `port` in the given captures: the MN's (delivered: captured less
    those to a stale locator, see `accepted_locators`) or the CN's (sent)."""
    kept, stale = _udp_datagrams(_as_list(mn_pcaps), port, t0, accepted)
    arrivals = [(t, b) for t, b, _ in kept]
    return {
        "port": port,
        "packets_delivered": len(kept),
        "packets_captured": len(kept) + len(stale),
        "stale_dropped": len(stale),
        "bytes_received": sum(b for _, b in arrivals),
        **_arrival_metrics(arrivals, end_s, bin_s, events, startup_s),
    }


def udp_transfer(
    cn_pcaps: str | Iterable[str],
    mn_pcaps: str | Iterable[str],
    port: int,
    t0: float,
    **kw,
) -> dict:
    """`udp_flow` at the MN plus what the CN sent: `lost` = sent and never delivered; for
    a broken session `lost` is None and `undelivered_after_break` = datagrams sent after
    the last delivered one was sent, none of them delivered (matched by their first 16
    payload bytes: iperf3's timestamp and sequence number)."""
    flow = udp_flow(mn_pcaps, port, t0, **kw)
    sent, _ = _udp_datagrams(_as_list(cn_pcaps), port, t0)
    arrived: dict[bytes, float] = {}
    for t, _, k in _udp_datagrams(_as_list(mn_pcaps), port, t0, kw.get("accepted", ()))[0]:
        arrived.setdefault(k, t)
    got = set(arrived)
    flow["packets_sent"] = len(sent)
    # one-way delay of the delivered datagrams: sent on the CN's capture -> first delivery on the
    # MN's (one host clock); the wire's delay, without the applications' processing
    owd = [(arrived[k] - t) * 1000 for t, _, k in sent if k in arrived]
    flow["one_way_delay_ms"] = None if not owd else {"mean": round(statistics.fmean(owd), 3),
                                                     **{k: _r(v, 3) for k, v in summary(owd).items() if k != "n"},
                                                     "n": len(owd)}
    undelivered = [t for t, _, k in sent if k not in got]
    if flow["broken_at_s"] is None:
        flow["lost"] = len(undelivered)
        flow["undelivered_after_break"] = None
    else:
        last_sent = max((t for t, _, k in sent if k in got), default=-math.inf)
        flow["lost"] = None
        flow["undelivered_after_break"] = sum(1 for t in undelivered if t > last_sent)
    flow["lost_before_break"] = len(undelivered) - (flow["undelivered_after_break"] or 0)
    flow["lost_pct"] = None if flow["lost"] is None or not sent else round(100 * flow["lost"] / len(sent), 4)
    return flow


def udp_reverse(cn_pcaps: str | Iterable[str], mn_pcaps: str | Iterable[str], port: int, t0: float) -> dict:
    """The MN -> CN half of a bidirectional UDP flow (iperf3 --bidir with the server on the MN:
    datagrams from `port`): sent = captured at the MN, delivered = captured at the CN (matched
    by their first 16 payload bytes), lost = sent and never delivered."""
    sent, _ = _udp_datagrams(_as_list(mn_pcaps), port, t0, from_port=True)
    got, _ = _udp_datagrams(_as_list(cn_pcaps), port, t0, from_port=True)
    keys = {k for _, _, k in got}
    return {"packets_sent": len(sent), "packets_delivered": len(got),
            "lost": sum(1 for _, _, k in sent if k not in keys)}


# --------------------------------------------------------------------------- Locator Updates


# copies of an advertisement sent within this time after its ack reached the MN
# crossed that ack on the wire (the daemon had not processed it yet)
_ACK_RACE_S = 0.010


def lu_handshakes(mn_pcaps: str | Iterable[str], t0: float, mn_nid: str | int | None = None) -> list[dict]:
    """Locator Update advertisements sent by the MN and their acknowledgements.

    An advertisement is identified by (source NID, destination NID, LU body after the
    8-byte header); consecutive copies with the same identity are retransmissions of it,
    until it is acked. `copies` counts packets (a retry sent to two locators of the
    correspondent is two copies), `attempts` counts send instants (copies less than 1 ms
    apart are one attempt).
    """
    want = None if mn_nid is None else nid_value(mn_nid)
    lus = []
    for ts, pkt, _nh, off, l4len in _l4(_as_list(mn_pcaps), (ICMPV6,)):
        op = _lu_op(pkt, off)
        if op is None:
            continue
        src_nid = int.from_bytes(pkt[16:24], "big")
        dst_nid = int.from_bytes(pkt[32:40], "big")
        body_end = min(len(pkt), off + l4len)
        body = bytes(pkt[off + 8 : body_end])
        lus.append((ts - t0, op, src_nid, dst_nid, body, pkt[off + 4]))
    lus.sort(key=lambda x: x[0])

    adverts: list[dict] = []
    current: dict[tuple, dict] = {}  # (src, dst) -> latest advertisement between them
    for t, op, src, dst, body, nlocs in lus:
        if op == LU_ADVERT:
            if want is not None and src != want:
                continue
            a = current.get((src, dst))
            if a is not None and a["_body"] == body and (a["t_ack_s"] is None or t <= a["t_ack_s"] + _ACK_RACE_S):
                a["copies"] += 1
                if t - a["_last"] >= 0.001:
                    a["attempts"] += 1
                    if a["t_retry_s"] is None:
                        a["t_retry_s"] = round(t, 6)
                a["_last"] = t
                continue
            locs = []
            for i in range(min(nlocs, len(body) // 12)):
                locs.append(groups64(int.from_bytes(body[12 * i : 12 * i + 8], "big")))
            a = {
                "src_nid": groups64(src),
                "dst_nid": groups64(dst),
                "t_sent_s": t,
                "copies": 1,
                "attempts": 1,
                "t_ack_s": None,
                "t_retry_s": None,
                "delay_ms": None,
                "acks": 0,
                "locators": locs,
                "_body": body,
                "_last": t,
            }
            adverts.append(a)
            current[(src, dst)] = a
        else:
            if want is not None and dst != want:
                continue
            a = current.get((dst, src))
            if a is None or a["_body"] != body or t < a["t_sent_s"]:
                continue
            a["acks"] += 1
            if a["t_ack_s"] is None:
                a["t_ack_s"] = t
    out = []
    for a in adverts:
        a.pop("_body")
        a.pop("_last")
        if a["t_ack_s"] is not None:
            a["delay_ms"] = round((a["t_ack_s"] - a["t_sent_s"]) * 1000, 3)
            a["t_ack_s"] = round(a["t_ack_s"], 6)
        a["t_sent_s"] = round(a["t_sent_s"], 6)
        out.append(a)
    return out


def between_events(events: Sequence[dict], items: Sequence[dict], event_t: str, item_t: str) -> list[list[dict]]:
    """For each event (in the given order, by time), the items whose time falls from it up to
    the next event: what each move event caused (its LUs, handshakes)."""
    out = []
    for i, e in enumerate(events):
        nxt = events[i + 1][event_t] if i + 1 < len(events) else math.inf
        out.append([x for x in items if e[event_t] <= x[item_t] < nxt])
    return out


def lu_by_event(lus: Sequence[dict], events: Sequence[dict]) -> list[dict]:
    """The MN's first Locator Update after each move event (before the next one): when it
    was sent, LU -> ack at the MN, and the LU packets sent in that period."""
    evs = sorted(events, key=lambda e: e["t_s"])
    out, seen = [], Counter()
    for e, mine in zip(evs, between_events(evs, lus, "t_s", "t_sent_s")):
        kind = _event_kind(e)
        seen[kind] += 1
        out.append({"key": kind if seen[kind] == 1 else f"{kind}{seen[kind]}", "label": e.get("label"),
                    "t_s": e["t_s"], "lu_sent_s": mine[0]["t_sent_s"] if mine else None,
                    "handoff_delay_ms": mine[0]["delay_ms"] if mine else None,
                    "lu_copies": sum(a["copies"] for a in mine)})
    return out


# --------------------------------------------------------------------------- control messages


# MPTCP option subtypes (RFC 8684 §3) that manage paths: a handoff's signalling
MPTCP_MP_JOIN, MPTCP_ADD_ADDR, MPTCP_REMOVE_ADDR = 1, 3, 4
_FIN, _RST = 0x01, 0x04


def _lu_op(pkt: bytes, off: int) -> int | None:
    """LU_ADVERT / LU_ACK of an ICMPv6 Locator Update at `off` (either wire variant), else None."""
    if off + 8 > len(pkt) or pkt[off] != LU_TYPE:
        return None
    code, op = pkt[off + 1], pkt[off + 5]
    if op == 0 and code in (LU_ADVERT, LU_ACK):  # the Code 1/2 variant (wire-facts §2.1)
        op = code
    return op if op in (LU_ADVERT, LU_ACK) else None


def control_messages(mn_pcaps: str | Iterable[str], t0: float) -> list[dict]:
    """The mobility control messages captured at the MN (both directions), in time order:
    {t_s, kind, bytes, src, dst}; `bytes` = the IPv6 packet (40 + Payload Length: header,
    extension headers, upper layer), so an Ethernet frame is 14 more.

    Kinds: ILNPv6 `lu` (a Locator Update advertisement) and `lu_ack`; MPTCP (RFC 8684) the
    path-management handshakes: `mp_join_syn`, `mp_join_synack`, `mp_join_ack` (the three
    segments carrying an MP_JOIN option) and `mp_join_ack4` (the responder's ACK of that
    third ACK, the handshake's fourth message, which carries no MP_JOIN: the first segment
    without payload the responder sends on that subflow after it), `add_addr`,
    `add_addr_echo` (its acknowledgement), `remove_addr`. Every copy on the wire counts
    (a retransmitted SYN is two messages). Data packets, MP_CAPABLE (connection set-up) and
    DSS are not control messages of a handoff. Plain IPv6 has none."""
    out = []
    awaiting: dict[tuple, tuple] = {}  # subflow (responder side first) -> initiator's side, after mp_join_ack
    for ts, pkt, nh, off, l4len in _l4(_as_list(mn_pcaps), (TCP, ICMPV6)):
        kind = None
        if nh == ICMPV6:
            op = _lu_op(pkt, off)
            kind = {LU_ADVERT: "lu", LU_ACK: "lu_ack"}.get(op)
        elif off + 14 <= len(pkt):
            sport, dport, _seq, _ack, doff_b, flags = _TCP_HDR.unpack_from(pkt, off)
            doff = (doff_b >> 4) * 4
            me, peer = (bytes(pkt[8:24]), sport), (bytes(pkt[24:40]), dport)
            subs = [(val[0] >> 4, val[0]) for k, val in _tcp_options(pkt, off, doff) if k == MPTCP_OPT and val]
            for sub, first in subs:
                if sub == MPTCP_MP_JOIN:
                    kind = ("mp_join_synack" if flags & _ACK else "mp_join_syn") if flags & _SYN else "mp_join_ack"
                    if kind == "mp_join_ack":
                        awaiting[(peer, me)] = me
                elif sub == MPTCP_ADD_ADDR:
                    kind = "add_addr_echo" if first & 1 else "add_addr"
                elif sub == MPTCP_REMOVE_ADDR:
                    kind = "remove_addr"
                if kind:
                    break
            if kind is None and (me, peer) in awaiting and not flags & (_SYN | _FIN | _RST):
                del awaiting[(me, peer)]
                if l4len - doff == 0:
                    kind = "mp_join_ack4"
        if kind:
            out.append({"t_s": round(ts - t0, 6), "kind": kind, "bytes": off + l4len,
                        "src": _addr(pkt[8:24]), "dst": _addr(pkt[24:40])})
    out.sort(key=lambda m: m["t_s"])
    return out


def _addr(b: bytes) -> str:
    return str(ipaddress.IPv6Address(bytes(b)))


def control_totals(msgs: Sequence[dict], from_s: float = -math.inf, to_s: float = math.inf) -> dict:
    """Messages and bytes of `control_messages` in [from_s, to_s): total and per kind."""
    mine = [m for m in msgs if from_s <= m["t_s"] < to_s]
    kinds: dict[str, dict] = {}
    for m in mine:
        k = kinds.setdefault(m["kind"], {"messages": 0, "bytes": 0})
        k["messages"] += 1
        k["bytes"] += m["bytes"]
    return {"messages": len(mine), "bytes": sum(m["bytes"] for m in mine), "by_kind": kinds}


def _first_data_to(mn_paths: Sequence[str], port: int, t0: float, prefixes: Sequence[str], after_s: float,
                   before_s: float, reverse: bool) -> float | None:
    """When the first TCP segment with payload of the flow on `port` (CN -> MN: to the port,
    or with `reverse` from it) reached the MN at an address in one of `prefixes` (/64s), in
    [after_s, before_s)."""
    nets = [ipaddress.IPv6Network(p).network_address.packed[:8] for p in prefixes]
    best = None
    for ts, pkt, _nh, off, l4len in _l4(mn_paths, (TCP,)):
        t = ts - t0
        if not after_s <= t < before_s or (best is not None and t >= best) or off + 14 > len(pkt):
            continue
        sport, dport, _seq, _ack, doff_b, _flags = _TCP_HDR.unpack_from(pkt, off)
        if (sport if reverse else dport) != port or l4len - (doff_b >> 4) * 4 <= 0:
            continue
        if bytes(pkt[24:32]) in nets:
            best = t
    return best


def handoff_latencies(mn_pcaps: str | Iterable[str], t0: float, events: Sequence[dict], port: int,
                      reverse: bool = False, end_s: float = math.inf) -> list[dict]:
    """Seed 003 §VI-B's two handoff latencies per move event, from the MN's captures:

    * control latency: the network event -> the first control message (`control_messages`,
      either direction) captured at the MN after it, before the next event. The network
      event is the seed's address event: for a join the new address usable (the event's
      `usable_s`: its first Router Advertisement at the MN, plus DAD unless optimistic; the
      wait for that RA, radvd's interval or the host's solicitation delay of up to 1 s,
      comes before it and is no mobility protocol's),
      for a leave the link going (`t_s`); `event_to_control_ms` is from the link event itself;
    * data-plane latency: that message -> the first data packet of the flow (a TCP segment
      with payload, CN -> MN on `port`) to one of the event's `new_prefixes` (a join: the
      joined network's; a leave: the networks still up), before the next event;
    * `event_to_new_path_ms`: the event -> that first data packet on the new path, whatever
      the signalling (for plain IPv6, which has no control message).

    `events`: the mobility run's timeline with `new_prefixes` added; only what happens before the
    flow's end `end_s` counts; times in ms, None where there was no such message or packet."""
    paths = _as_list(mn_pcaps)
    ctrl = control_messages(paths, t0)
    evs = sorted(events, key=lambda e: e["t_s"])
    out, seen = [], Counter()
    for i, e in enumerate(evs):
        t, nxt = float(e["t_s"]), min(float(evs[i + 1]["t_s"]) if i + 1 < len(evs) else math.inf, end_s)
        usable = e.get("usable_s") if e.get("action") == "up" else t
        kind = _event_kind(e)
        seen[kind] += 1
        first = next((m for m in ctrl if t <= m["t_s"] < nxt), None)
        prefixes = e.get("new_prefixes") or []
        data = _first_data_to(paths, port, t0, prefixes, t, nxt, reverse) if prefixes else None
        data_after_ctrl = (None if first is None or not prefixes
                           else _first_data_to(paths, port, t0, prefixes, first["t_s"], nxt, reverse))
        out.append({"key": kind if seen[kind] == 1 else f"{kind}{seen[kind]}", "label": e.get("label"), "t_s": t,
                    "new_prefixes": prefixes, "first_control": first,
                    "usable_s": usable,
                    "control_latency_ms": (None if first is None or usable is None
                                           else _r((first["t_s"] - usable) * 1000, 3)),
                    "event_to_control_ms": None if first is None else _r((first["t_s"] - t) * 1000, 3),
                    "dataplane_latency_ms": (None if data_after_ctrl is None
                                             else _r((data_after_ctrl - first["t_s"]) * 1000, 3)),
                    "event_to_new_path_ms": None if data is None else _r((data - t) * 1000, 3)})
    return out


def _first_to_locators(cn_pcaps: Sequence[str], t0: float, mn_nid: int, wanted: set[bytes]) -> dict[bytes, list[float]]:
    """For each wanted L64 (8 bytes), the sorted times (relative to t0) of the packets the CN
    sent to the MN's NID at that locator (captured at the CN: what it sent, not what arrived),
    Locator Updates and their acks left out: the ack always goes to the new locator."""
    nid = mn_nid.to_bytes(8, "big")
    out: dict[bytes, list[float]] = {w: [] for w in wanted}
    for path in cn_pcaps:
        for ts, pkt in iter_ipv6(path):
            if len(pkt) >= 40 and pkt[32:40] == nid and pkt[24:32] in out:
                ul = upper_layer(pkt)
                if ul and ul[0] == ICMPV6 and ul[1] < len(pkt) and pkt[ul[1]] == LU_TYPE:
                    continue
                out[pkt[24:32]].append(ts - t0)
    for v in out.values():
        v.sort()
    return out


def handoffs(lus: Sequence[dict], events: Sequence[dict], cn_pcaps: str | Iterable[str], t0: float,
             mn_nid: str | int, end_s: float) -> list[dict]:
    """One entry per handoff: each event where the MN joins a network (`action` "up" on the MN,
    with `prefix`, the joined network's /64, set by the caller), in time order.

    The handoff's LU is the first Locator Update advertisement the MN sent at or after the
    event and before the next event (none: `attempts` 0):

    * `attempts`: send instants of that LU until its ack, on the wire at the MN (LUs per handoff);
    * `no_retransmission`: acked with one attempt, i.e. the ack reached the MN before the
      retransmission timer fired. Without jitter that is the thesis's single-shot success (the
      first LU and its ack both arrived, Table 6.2); with jitter a late ack is a retry too;
    * `lu_reached_cn`: the CN captured the LU before the MN's second attempt (any copy captured
      at the CN before that instant is the first one): P(LU) of eq. 3 on its own;
    * `delay_ms`: first LU sent -> first ack, at the MN, whichever copy was acked (with a
      retransmission it includes the timer);
    * `success`: the handoff completed, i.e. the CN sent a packet (not an LU ack) to the MN at
      the joined network's locator after the event and before the next join (or the flow's end);
      `cn_switch_s` = when it first did (captured at the CN).
    """
    want = nid_value(mn_nid)
    evs = sorted(events, key=lambda e: e["t_s"])
    joins = [e for e in evs if e.get("prefix") and e["action"] == "up"]
    locs = {_l64_bytes(e["prefix"]) for e in joins}
    sent_to = _first_to_locators(_as_list(cn_pcaps), t0, want, locs)
    at_cn = lu_handshakes(cn_pcaps, t0, mn_nid=mn_nid)  # as captured at the CN: t_sent_s = arrival
    out = []
    for e in joins:
        t = e["t_s"]
        nxt_event = min((x["t_s"] for x in evs if x["t_s"] > t), default=math.inf)
        nxt_join = min((x["t_s"] for x in joins if x["t_s"] > t), default=end_s)
        first = next((a for a in lus if t <= a["t_sent_s"] < nxt_event), None)
        times = sent_to[_l64_bytes(e["prefix"])]
        k = bisect_right(times, t)
        switch = times[k] if k < len(times) and times[k] < nxt_join else None
        arrived = None
        if first:
            until = first["t_retry_s"] if first["t_retry_s"] is not None else nxt_event
            arrived = next((c["t_sent_s"] for c in at_cn if c["locators"] == first["locators"]
                            and first["t_sent_s"] <= c["t_sent_s"] < until), None)
        out.append({
            "t_s": t, "label": e.get("label"), "prefix": e["prefix"],
            "lu_sent_s": first["t_sent_s"] if first else None,
            "attempts": first["attempts"] if first else 0,
            "copies": first["copies"] if first else 0,
            "acked": bool(first and first["t_ack_s"] is not None),
            "no_retransmission": bool(first and first["t_ack_s"] is not None and first["attempts"] == 1),
            "lu_reached_cn": arrived is not None,
            "lu_at_cn_s": arrived,
            "delay_ms": first["delay_ms"] if first else None,
            "success": switch is not None,
            "cn_switch_s": _r(switch),
        })
    return out


def handoff_summary(hs: Sequence[dict]) -> dict:
    """Over the handoffs of one or more runs: how many, the fractions that succeeded, that
    completed with no retransmission and whose first LU reached the CN, LUs per handoff (mean
    attempts of those that sent one), and the LU -> ack delay of the handoffs with no
    retransmission and of those with one (the first LU or its ack lost, or the ack late)."""
    n = len(hs)
    sent = [h for h in hs if h["attempts"]]
    return {
        "n": n,
        "success": sum(h["success"] for h in hs) / n if n else None,
        "no_retransmission": sum(h["no_retransmission"] for h in hs) / n if n else None,
        "lu_reached_cn": sum(h["lu_reached_cn"] for h in hs) / n if n else None,
        "lus_per_handoff": sum(h["attempts"] for h in sent) / len(sent) if sent else None,
        "delay_ms": summary(h["delay_ms"] for h in hs if h["acked"]),
        "delay_single_ms": summary(h["delay_ms"] for h in hs if h["no_retransmission"]),
        "delay_retried_ms": summary(h["delay_ms"] for h in hs if h["acked"] and h["attempts"] > 1),
    }


def _l64_bytes(prefix: str) -> bytes:
    """The 8-byte L64 of a /64 written as text ("2001:db8:3::/64")."""
    return ipaddress.IPv6Network(prefix, strict=False).network_address.packed[:8]


def iperf_receiver(path: str | os.PathLike, kind: str) -> dict | None:
    """iperf3's own receiver counters from the server's `-J` output: TCP bytes received;
    UDP datagrams delivered (packets - lost_packets). None if the file has no end report
    (a broken session: iperf3 never finished)."""
    import json

    try:
        end = json.loads(open(path).read() or "{}").get("end") or {}
    except (OSError, ValueError):
        return None
    if kind == "tcp":
        b = (end.get("sum_received") or {}).get("bytes")
        return None if b is None else {"bytes_received": int(b)}
    u = end.get("sum") or {}
    if "packets" not in u:
        return None
    return {"packets": int(u["packets"]), "lost_packets": int(u.get("lost_packets", 0)),
            "packets_delivered": int(u["packets"]) - int(u.get("lost_packets", 0)), "bytes_received": u.get("bytes")}


# --------------------------------------------------------------------------- summary


# Student's t, two-sided 95 %, by degrees of freedom (df 1-30, then conservative steps; 1.96 beyond 120)
T95 = dict(zip(range(1, 31), (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
                              2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
                              2.060, 2.056, 2.052, 2.048, 2.045, 2.042))) | {40: 2.021, 60: 2.000, 120: 1.980}


def ci95(xs: list[float]) -> tuple[float, float | None]:
    """Mean and half-width of its 95 % confidence interval (Student t), None for one sample."""
    m = statistics.fmean(xs)
    if len(xs) < 2:
        return m, None
    df = len(xs) - 1
    t = T95[max(k for k in T95 if k <= df)] if df <= 120 else 1.96
    return m, t * statistics.stdev(xs) / math.sqrt(len(xs))


def summary(values: Iterable[float | None]) -> dict:
    """n, median, quartiles, min, max of the values that are not None (all None if none)."""
    v = sorted(float(x) for x in values if x is not None and not (isinstance(x, float) and math.isnan(x)))
    if not v:
        return {"n": 0, "median": None, "p25": None, "p75": None, "min": None, "max": None}
    return {"n": len(v), "median": statistics.median(v), "p25": _percentile(v, 0.25), "p75": _percentile(v, 0.75),
            "min": v[0], "max": v[-1]}


def median(values: Iterable[float | None]) -> float | None:
    """The median of the values that are not None (None if none)."""
    return summary(values)["median"]


# ---------------------------------------------------------------- a mobility run's events
# What the timeline's events need from the captures and the experiment file (`mobility.Run.analyse`).

def probe_loss(d: Path, ex: Experiment) -> dict | None:
    if not ex.probe_pps:
        return None
    try:
        a = json.loads((d / f"probe-{ex.cn}.json").read_text())
        b = json.loads((d / f"probe-{ex.mn}.json").read_text())
    except (OSError, ValueError) as e:
        return {"error": f"probe output missing: {e}"}
    return {"cn_to_mn_sent": a["sent"], "cn_to_mn_lost": a["sent"] - len(b["got"]),
            "mn_to_cn_sent": b["sent"], "mn_to_cn_lost": b["sent"] - len(a["got"])}


# RetransTimer (RFC 4861 default; radvd advertises 0, unspecified): one DAD probe's wait
DAD_RETRANS_S = 1.0


def first_ra_s(mn_pcap: str, t0: float, after_s: float, prefix: str) -> float | None:
    """The first Router Advertisement carrying `prefix` captured at the MN at or after
    `after_s` (relative to t0), or None."""
    want = ipaddress.IPv6Network(prefix).network_address.packed[:8]
    for p in pcap.read(mn_pcap):
        if p.proto == pcap.ICMPV6 and p.l4[:1] == b"\x86" and p.ts - t0 >= after_s and want in p.l4[16:]:
            return p.ts - t0
    return None


def event_context(ex: Experiment, move: str, mn_pcap: str, t0: float, timeline: list[dict]) -> list[dict]:
    """The timeline's events with what their interruption window needs (analysis.event_window):
    `rtt_s` = the larger configured round trip of the MN's paths up just before and just after
    the event; `usable_s` = for the MN joining a network, when its new locator is usable (the
    first RA with its prefix, plus dad_transmits x RetransTimer unless DAD is optimistic or
    off), None if no RA was captured; otherwise the event's own time."""
    up = {iface for iface, link in ex.host_ifaces(ex.mn) if link.up}
    rtt = {iface: ex.path_rtt_s(move, ex.mn, iface) for iface, _ in ex.host_ifaces(ex.mn)}
    out = []
    for e in sorted(timeline, key=lambda e: e["t_s"]):
        before = set(up)
        if e["node"] == ex.mn:
            (up.add if e["action"] == "up" else up.discard)(e["iface"])
        paths = before | up or set(rtt)
        usable = e["t_s"]
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
