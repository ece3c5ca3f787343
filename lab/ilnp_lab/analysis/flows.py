"""Flow metrics (TCP, MPTCP, UDP) from the CN's and the MN's captures.

Flows are never keyed on addresses: an ILNPv6 MN's locators change mid-flow. A TCP
connection is its (source port, destination port); an MPTCP connection is several of
them.

Sequence numbers are compared as byte ranges (unwrapped from the connection's ISN), so
a retransmission that the sender re-segmented, or a GSO/TSO super-segment that tcpdump
saw before segmentation, is still matched. Packet counts are given in MSS-sized units
(`ceil(payload / mss)`), which equals the number of captured segments when nothing was
aggregated, and the number of wire packets when something was.

A packet the MN dropped is not delivered (`handoffs.accepted_locators`); the gaps in what was
delivered are `events`'.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import statistics
import struct
from bisect import bisect_right
from collections import Counter, defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

from ..wire import TCP, UDP
from .events import STARTUP_S, _arrival_metrics
from .handoffs import _stale
from .packets import _ACK, _SYN, _TCP_HDR, MPTCP_OPT, _as_list, _l4, _tcp_options
from .stats import _r, summary

if TYPE_CHECKING:
    from ..topology import Experiment


_M32 = 0xFFFFFFFF


IPERF_COOKIE = 37  # iperf3's per-connection cookie (COOKIE_SIZE)


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
