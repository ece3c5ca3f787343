"""One handoff split into its phases, from the roles' event lines (one wall clock for every
namespace of the VM) and the MH frames the MN's capture saw; message sizes beside the thesis's.

    movement detection   the home link's carrier down (link-layer trigger) -> a care-of address chosen
    home address move    the tunnel to the HA up, the home address on it (before the BU)
    BU -> BA (HA)        the BU to the HA -> its BA at the MN; inside it the HA's DAD (RetransTimer)
                         and the HA's own processing (tunnel, route, proxy NDP)
    tunnel / route       the BA -> the MN's default route into the tunnel
    return routability   HoTI/CoTI sent -> both HoT and CoT in (RO)
    BU -> BA (CN)        the authenticated BU to the CN -> its BA (RO)
    RO route change      the CN's BA -> the MN's xfrm ro states and direct route (RO)
    handoff delay        the first BU -> the last BA (the HA's; the CN's with RO): the seeds' definition
"""

from __future__ import annotations

# seed 001 §6.4, "from the tcpdump log": Ethernet frame sizes
THESIS_BYTES = {"BU_HA": 110, "BAck_HA": 94, "HoTI": 110, "HoT": 118, "CoTI": 70, "CoT": 78,
                "BU_CN": 110, "BAck_CN": 110}


def _first(events, role, ev, after=0.0, **match):
    for e in sorted(events, key=lambda e: e["t"]):
        if e["role"] == role and e["ev"] == ev and e["t"] >= after and all(e.get(k) == v for k, v in match.items()):
            return e
    return None


def split(events: list[dict], ha: str, cn: str | None = None) -> dict:
    ms = lambda a, b: round((b["t"] - a["t"]) * 1e3, 1) if a and b else None  # noqa: E731
    down = _first(events, "mn", "link_down")
    t = down["t"] if down else 0.0
    md = _first(events, "mn", "movement_detected", t)
    moved = _first(events, "mn", "home_address_moved", t)
    bu = _first(events, "mn", "bu_tx", t, peer=ha)
    ba = _first(events, "mn", "ba_rx", t, peer=ha, accepted=True)
    dad = _first(events, "ha", "dad_done", t)
    ha_ba = _first(events, "ha", "ba_tx", t, status=0)
    tun = _first(events, "mn", "tunnel", t)
    out = {"movement_detection_ms": ms(down, md), "home_address_move_ms": ms(md, moved),
           "bu_ba_ha_ms": ms(bu, ba), "ha_dad_ms": dad["ms"] if dad else None,
           "ha_processing_ms": round(ha_ba["ms"] - (dad["ms"] if dad else 0), 1) if ha_ba else None,
           "bu_retransmissions": sum(1 for e in events if e["role"] == "mn" and e["ev"] == "bu_tx"
                                     and e.get("retransmit") and e.get("peer") == ha),
           "tunnel_route_ms": ms(ba, tun)}
    last = ba
    if cn:
        rr0 = _first(events, "mn", "rr_start", t)
        hot, cot = _first(events, "mn", "hot_rx", t), _first(events, "mn", "cot_rx", t)
        rr1 = max((x for x in (hot, cot) if x), key=lambda x: x["t"], default=None) if hot and cot else None
        bucn = _first(events, "mn", "bu_tx", t, peer=cn)
        bacn = _first(events, "mn", "ba_rx", t, peer=cn, accepted=True)
        roa = _first(events, "mn", "ro_active", t)
        out.update({"return_routability_ms": ms(rr0, rr1), "bu_ba_cn_ms": ms(bucn, bacn), "ro_route_ms": ms(bacn, roa)})
        last = bacn
    out["handoff_delay_ms"] = ms(bu, last)
    return out


def sizes(frames: list[dict], ha: str, cn: str | None) -> dict:
    """The first frame of each kind the MN's link carried, its length on the wire."""
    kinds = {}
    for f in frames:
        k = None
        if f["type"] == "BU":
            k = "BU_HA" if f["dst"] == ha else "BU_CN"
        elif f["type"] == "BA":
            k = "BAck_HA" if f["src"] == ha else "BAck_CN"
        elif f["type"] in ("HoTI", "HoT", "CoTI", "CoT"):
            k = f["type"]
        if k and k not in kinds:
            kinds[k] = f["len"]
    return kinds


def table(result: dict, ha: str, cn: str | None, thesis_ms: float | None = None) -> list[str]:
    """Markdown lines: the phases, then the sizes against the thesis's."""
    s = split(result["events"], ha, cn)
    lines = [f"| phase ({result['scheme']}, {result['traffic']}) | ms |", "|---|---|"]
    lines += [f"| {k.removesuffix('_ms').replace('_', ' ')} | {v} |" for k, v in s.items()]
    if thesis_ms is not None:
        lines.append(f"| thesis handoff delay | {thesis_ms} |")
    got = sizes(result.get("mh_frames", []), ha, cn)
    lines += ["", "| message | ours (bytes) | thesis |", "|---|---|---|"]
    lines += [f"| {k} | {got.get(k, '—')} | {v} |" for k, v in THESIS_BYTES.items() if k in got or not cn is None]
    return lines
