"""Locator Updates, the mobility control messages and handoffs, as captured at the MN and
the CN; what the MN dropped.

Delivered, not captured: the MN's capture is taken before its tc ingress program, so a
packet ilnpd drops is on it too. With hard handoff the MN accepts only the locators its
latest Locator Update advertised (the previous ones are aged when a new one takes over);
a data packet captured at the MN addressed to any other locator after that LU is counted
as dropped (`stale_dropped`), never as an arrival (`accepted_locators`, `stale_drops`).
"""

from __future__ import annotations

import ipaddress
import math
import struct
from bisect import bisect_right
from collections import Counter
from typing import Iterable, Sequence

from ..addr import groups64, nid_value
from ..pcap import iter_ipv6
from ..wire import ICMPV6, TCP, UDP, upper_layer
from .events import _event_kind, between_events
from .packets import (LU_ACK, LU_ADVERT, LU_TYPE, MPTCP_ADD_ADDR, MPTCP_MP_JOIN, MPTCP_OPT, MPTCP_REMOVE_ADDR,
                      _ACK, _FIN, _RST, _SYN, _TCP_HDR, _addr, _as_list, _l4, _l64_bytes, _loc_str, _lu_op,
                      _tcp_options)
from .stats import _r, summary

MH, IPV6_IN_IPV6 = 135, 41  # RFC 6275's Mobility Header; ip6ip6 (MIPv6's tunnel through the home agent)
MH_KINDS = {1: "hoti", 2: "coti", 3: "hot", 4: "cot", 5: "bu", 6: "ba"}  # RFC 6275 §6.1.2-6.1.8


def _inner(pkt: bytes, off: int) -> tuple[bytes, int, int] | None:
    """An ip6ip6 packet's inner packet at `off`: (inner, its upper-layer proto, its offset)."""
    inner = bytes(pkt[off:])
    ul = upper_layer(inner) if len(inner) >= 40 else None
    return None if ul is None else (inner, *ul)


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
    DSS are not control messages of a handoff. Plain IPv6 has none. Mobile IPv6 (RFC 6275):
    `bu`, `ba`, `hoti`, `coti`, `hot`, `cot`; HoTI/HoT travel only inside the ip6ip6 tunnel
    to and from the home agent (§5.2.5) and count there (the outer packet's bytes), not again
    as the tunnel device's decapsulated copy."""
    out = []
    awaiting: dict[tuple, tuple] = {}  # subflow (responder side first) -> initiator's side, after mp_join_ack
    for ts, pkt, nh, off, l4len in _l4(_as_list(mn_pcaps), (TCP, ICMPV6, MH, IPV6_IN_IPV6)):
        kind = None
        if nh == IPV6_IN_IPV6:
            inner = _inner(pkt, off)
            if inner and inner[1] == MH and inner[2] + 3 <= len(inner[0]):
                kind = MH_KINDS.get(inner[0][inner[2] + 2])
        elif nh == MH and off + 3 <= len(pkt) and pkt[off + 2] not in (1, 3):
            kind = MH_KINDS.get(pkt[off + 2])  # a bare HoTI/HoT at the MN: the tunnel device's copy
        elif nh == ICMPV6:
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
    [after_s, before_s); a segment in an ip6ip6 tunnel (MIPv6 through its home agent) counts
    by the outer packet's destination (the care-of address)."""
    nets = [ipaddress.IPv6Network(p).network_address.packed[:8] for p in prefixes]
    best = None
    for ts, pkt, nh, off, l4len in _l4(mn_paths, (TCP, IPV6_IN_IPV6)):
        t = ts - t0
        if not after_s <= t < before_s or (best is not None and t >= best):
            continue
        seg, soff = pkt, off
        if nh == IPV6_IN_IPV6:
            inner = _inner(pkt, off)
            if inner is None or inner[1] != TCP:
                continue
            seg, soff = inner[0], inner[2]
            l4len = ((seg[4] << 8) | seg[5]) + 40 - soff
        if soff + 14 > len(seg):
            continue
        sport, dport, _seq, _ack, doff_b, _flags = _TCP_HDR.unpack_from(seg, soff)
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
