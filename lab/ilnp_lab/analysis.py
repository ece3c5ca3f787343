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

All results are plain dicts of JSON types; times are seconds relative to the caller's t0.
"""

from __future__ import annotations

import hashlib
import math
import os
import statistics
import struct
from bisect import bisect_right
from collections import Counter, defaultdict
from typing import Iterable, Iterator, Sequence

from .pcap import EXT_HDRS, ICMPV6, TCP, UDP, iter_ipv6, upper_layer

LU_TYPE = 156
LU_ADVERT, LU_ACK = 1, 2
_M32 = 0xFFFFFFFF
_SYN, _ACK = 0x02, 0x10
_TCP_HDR = struct.Struct("!HHIIBB")
MPTCP_OPT = 30
IPERF_COOKIE = 37  # iperf3's per-connection cookie (COOKIE_SIZE)

__all__ = ["tcp_flow", "udp_flow", "lu_handshakes", "summary"]


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


def _gap(times: list[float], end_s: float | None) -> tuple[float | None, float | None, float]:
    """Longest gap between consecutive arrivals from the first one until end_s (the tail
    counts: a flow that stops early shows as a gap to end_s). Returns (gap, start, end)."""
    if not times:
        if end_s is None:
            return None, None, 0.0
        return float(end_s), 0.0, float(end_s)
    end = times[-1] if end_s is None else float(end_s)
    best, at = 0.0, times[0]
    prev = times[0]
    for t in times[1:]:
        if t > end:
            break
        if t - prev > best:
            best, at = t - prev, prev
        prev = t
    if end - prev > best:
        best, at = end - prev, prev
    return best, at, end


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


def _arrival_metrics(arrivals: list[tuple[float, int]], end_s: float | None, bin_s: float) -> dict:
    """First/last arrival, the longest gap and the rate timeline of (time, bytes) arrivals."""
    times = [t for t, _ in arrivals]
    gap, gap_at, end = _gap(times, end_s)
    return {
        "first_data_at_s": _r(times[0]) if times else None,
        "last_data_at_s": _r(times[-1]) if times else None,
        "interruption_s": _r(gap),
        "interruption_at_s": _r(gap_at),
        "end_s": _r(end),
        "bin_s": bin_s,
        "timeline": _timeline(arrivals, end, bin_s),
    }


def _r(x: float | None, nd: int = 6) -> float | None:
    return None if x is None else round(x, nd)


# --------------------------------------------------------------------------- TCP


class _Seg:
    __slots__ = ("ts", "key", "seq", "ln")

    def __init__(self, ts: float, key: tuple[int, int], seq: int, ln: int):
        self.ts, self.key, self.seq, self.ln = ts, key, seq, ln


def _scan_tcp(paths: Sequence[str], port: int, t0: float, conns: dict, segs: list[_Seg], mss_opts: dict) -> None:
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
        if dport != port:
            continue
        ln = l4len - doff
        if ln > 0:
            segs.append(_Seg(t, key, seq, ln))


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
    stale_drops: int = 0,
    bin_s: float = 0.5,
    end_s: float | None = None,
    control: bool = True,
) -> dict:
    """Metrics of an iperf3 TCP flow CN → MN whose server listens on `port` on the MN.

    iperf3's control connection (the earliest SYN to `port`, or the earliest connection
    seen if no SYN was captured, and any MPTCP subflow joined to it) is left out; every
    other connection to `port` is the data connection or one of its MPTCP subflows.
    iperf3 starts every connection with a 37-byte cookie; with `control=True` that cookie
    (bytes 0-36 of a connection whose SYN was seen and that is not an MPTCP join) is not
    counted as data, so `bytes_received` matches iperf3's own byte count.
    `control=False` is for traffic without a control connection: everything counts.
    """
    cn_paths, mn_paths = _as_list(cn_pcaps), _as_list(mn_pcaps)
    conns: dict[tuple[int, int], dict] = {}
    mss_opts: dict = {}
    cn_segs: list[_Seg] = []
    mn_segs: list[_Seg] = []
    _scan_tcp(cn_paths, port, t0, conns, cn_segs, mss_opts)
    _scan_tcp(mn_paths, port, t0, conns, mn_segs, mss_opts)
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
    if control:
        for k in data_keys:
            c = conns[k]
            if c["isn"] is not None and c["join_token"] is None:
                cookie[k] = (c["isn"] + 1) & _M32

    def is_cookie(s: _Seg) -> bool:
        start = cookie.get(s.key)
        return start is not None and ((s.seq - start) & _M32) + s.ln <= IPERF_COOKIE

    cn_segs = [s for s in cn_segs if s.key in data_keys and not is_cookie(s)]
    mn_segs = [s for s in mn_segs if s.key in data_keys and not is_cookie(s)]
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

    return {
        "port": port,
        "connections": [list(k) for k in sorted(data_keys, key=lambda k: conns[k]["first"])],
        "control_connections": [list(k) for k in sorted(excluded, key=lambda k: conns[k]["first"])],
        "mss": mss,
        "bytes_received": sum(_union_len(r) for r in recv_ranges.values()),
        "bytes_sent": sum(_union_len(r) for r in sent_ranges.values()),
        "data_packets_sent": data_units,
        "data_segments_captured": len(cn_segs),
        "data_packets_received": sum(units(s.ln) for s in mn_segs),
        "retransmissions": retrans_units,
        "retransmitted_segments_captured": retrans_segs,
        "retransmitted_bytes": retrans_bytes,
        "lost_retransmitted": lost_units,
        "lost_bytes": lost_bytes,
        "stale_drops": int(stale_drops),
        "lost": lost_units + int(stale_drops),
        **_arrival_metrics(arrivals, end_s, bin_s),
    }


# --------------------------------------------------------------------------- UDP


def udp_flow(
    mn_pcaps: str | Iterable[str],
    port: int,
    t0: float,
    *,
    bin_s: float = 0.5,
    end_s: float | None = None,
) -> dict:
    """UDP datagrams to `port` in the given captures: the MN's (received) or the CN's (sent);
    the runner's loss is the difference."""
    arrivals: list[tuple[float, int]] = []
    for ts, pkt, _nh, off, l4len in _l4(_as_list(mn_pcaps), (UDP,)):
        if off + 4 > len(pkt) or ((pkt[off + 2] << 8) | pkt[off + 3]) != port:
            continue
        arrivals.append((ts - t0, max(0, l4len - 8)))
    arrivals.sort()
    return {
        "port": port,
        "packets_received": len(arrivals),
        "bytes_received": sum(b for _, b in arrivals),
        **_arrival_metrics(arrivals, end_s, bin_s),
    }


# --------------------------------------------------------------------------- Locator Updates


def _groups(v: int) -> str:
    return f"{(v >> 48) & 0xFFFF:04x}:{(v >> 32) & 0xFFFF:04x}:{(v >> 16) & 0xFFFF:04x}:{v & 0xFFFF:04x}"


def _parse_nid(nid: str | int) -> int:
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
    want = None if mn_nid is None else _parse_nid(mn_nid)
    lus = []
    for ts, pkt, _nh, off, l4len in _l4(_as_list(mn_pcaps), (ICMPV6,)):
        if off + 8 > len(pkt) or pkt[off] != LU_TYPE:
            continue
        code, op = pkt[off + 1], pkt[off + 5]
        if op == 0 and code in (LU_ADVERT, LU_ACK):  # the Code 1/2 variant (wire-facts §2.1)
            op = code
        if op not in (LU_ADVERT, LU_ACK):
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
                a["_last"] = t
                continue
            locs = []
            for i in range(min(nlocs, len(body) // 12)):
                locs.append(_groups(int.from_bytes(body[12 * i : 12 * i + 8], "big")))
            a = {
                "src_nid": _groups(src),
                "dst_nid": _groups(dst),
                "t_sent_s": t,
                "copies": 1,
                "attempts": 1,
                "t_ack_s": None,
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


# --------------------------------------------------------------------------- summary


def summary(values: Iterable[float | None]) -> dict:
    """n, median, quartiles, min, max of the values that are not None (all None if none)."""
    v = sorted(float(x) for x in values if x is not None and not (isinstance(x, float) and math.isnan(x)))
    if not v:
        return {"n": 0, "median": None, "p25": None, "p75": None, "min": None, "max": None}

    def q(p: float) -> float:  # linear interpolation between closest ranks (numpy's default)
        pos = (len(v) - 1) * p
        lo = math.floor(pos)
        hi = min(lo + 1, len(v) - 1)
        return v[lo] + (v[hi] - v[lo]) * (pos - lo)

    return {"n": len(v), "median": statistics.median(v), "p25": q(0.25), "p75": q(0.75), "min": v[0], "max": v[-1]}
