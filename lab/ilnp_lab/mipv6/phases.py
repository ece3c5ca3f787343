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


def _first(events, role, ev, after=0.0, before=float("inf"), **match):
    for e in sorted(events, key=lambda e: e["t"]):
        if e["role"] == role and e["ev"] == ev and after <= e["t"] < before and all(e.get(k) == v for k, v in match.items()):
            return e
    return None


def split(events: list[dict], ha: str, cn: str | None = None) -> dict:
    ms = lambda a, b: round((b["t"] - a["t"]) * 1e3, 1) if a and b else None  # noqa: E731
    down = _first(events, "mn", "link_down")
    t = down["t"] if down else 0.0
    # the first registration only: up to the MN's return home, if it came back (thesis-loss)
    home = _first(events, "mn", "home_link_detected", t)
    end = home["t"] if home else float("inf")
    _f = lambda role, ev, after, **kw: _first(events, role, ev, after, end, **kw)  # noqa: E731
    md = _f("mn", "movement_detected", t)
    moved = _f("mn", "home_address_moved", t)
    bu = _f("mn", "bu_tx", t, peer=ha)
    ba = _f("mn", "ba_rx", t, peer=ha, accepted=True)
    dad = _f("ha", "dad_done", t)
    ha_ba = _f("ha", "ba_tx", t, status=0)
    tun = _f("mn", "tunnel", t)
    out = {"movement_detection_ms": ms(down, md), "home_address_move_ms": ms(md, moved),
           "bu_ba_ha_ms": ms(bu, ba), "ha_dad_ms": dad["ms"] if dad else None,
           "ha_processing_ms": round(ha_ba["ms"] - (dad["ms"] if dad else 0), 1) if ha_ba else None,
           "bu_retransmissions": sum(1 for e in events if e["role"] == "mn" and e["ev"] == "bu_tx"
                                     and e.get("retransmit") and e.get("peer") == ha and e["t"] < end),
           "tunnel_route_ms": ms(ba, tun)}
    last = ba
    if cn:
        rr0 = _f("mn", "rr_start", t)
        hot, cot = _f("mn", "hot_rx", t), _f("mn", "cot_rx", t)
        rr1 = max((x for x in (hot, cot) if x), key=lambda x: x["t"], default=None) if hot and cot else None
        bucn = _f("mn", "bu_tx", t, peer=cn)
        bacn = _f("mn", "ba_rx", t, peer=cn, accepted=True)
        roa = _f("mn", "ro_active", t)
        out.update({"return_routability_ms": ms(rr0, rr1), "bu_ba_cn_ms": ms(bucn, bacn), "ro_route_ms": ms(bacn, roa)})
        last = bacn
    out["handoff_delay_ms"] = ms(bu, last)
    return out


def moves(events: list[dict], ha: str, cn: str | None, t0: float) -> list[dict]:
    """Every movement of a run, each a registration away from home (`movement_detected`) or a
    deregistration at home (`home_link_detected`, §11.5.5), up to the next movement; in the shape
    of the ILNP handoffs (analysis.handoffs) so the thesis-loss report reads both: `t_s` (the
    movement at the MN, s after t0), `attempts` (BUs to the HA: retransmissions count), `acked`
    (the HA's BA accepted), `no_retransmission` (one BU to the HA and, with RO, one to the CN and no
    HoTI/CoTI retransmitted: the thesis's single shot, every message of the handoff arrived the first time),
    `lu_reached_cn` (here: the first BU reached the HA, its `bu_rx` with that sequence number),
    `delay_ms` (first BU -> the last BA: the HA's, with RO the CN's), `success` (the binding done:
    the HA's BA and with RO the CN's, before the next movement), `ro` (RO done or deleted)."""
    ev = sorted(events, key=lambda e: e["t"])
    starts = [e for e in ev if e["role"] == "mn" and e["ev"] in ("movement_detected", "home_link_detected")]
    out = []
    for i, s in enumerate(starts):
        end = starts[i + 1]["t"] if i + 1 < len(starts) else float("inf")
        win = [e for e in ev if s["t"] <= e["t"] < end]
        mn = lambda name, **kw: [e for e in win if e["role"] == "mn" and e["ev"] == name  # noqa: E731
                                 and all(e.get(k) == v for k, v in kw.items())]
        home = s["ev"] == "home_link_detected"
        bus, bas = mn("bu_tx", peer=ha), mn("ba_rx", peer=ha, accepted=True)
        if home and not bas:  # status 133, no home registration there (never bound): home all the same
            bas = [e for e in mn("ba_rx", peer=ha, status=133) if any(x["ev"] == "home" for x in mn("home"))]
        cbus, cbas = (mn("bu_tx", peer=cn), mn("ba_rx", peer=cn, accepted=True)) if cn else ([], [])
        last = (cbas or [None])[0] if cn else (bas or [None])[0]
        first_seq = bus[0]["seq"] if bus else None
        at_ha = any(e["role"] == "ha" and e["ev"] == "bu_rx" and e.get("seq") == first_seq for e in win)
        out.append({
            "t_s": round(s["t"] - t0, 4), "kind": "home" if home else "away", "iface": s.get("iface"),
            "attempts": len(bus), "copies": len(bus),
            "acked": bool(bas), "no_retransmission": bool(bas) and len(bus) == 1
            and (not cn or (bool(cbas) and len(cbus) == 1 and not mn("rr_retransmit"))),
            "lu_reached_cn": bool(bus) and at_ha,
            "delay_ms": round((last["t"] - bus[0]["t"]) * 1e3, 1) if bus and last else None,
            "success": bool(bas) and (not cn or bool(cbas)),
            "ro": (bool(mn("ro_deregistered")) if home else bool(mn("ro_active"))) if cn else None,
            "cn_attempts": len(cbus) if cn else None, "rr_retransmissions": len(mn("rr_retransmit")) if cn else None})
    return out


def analytic_single_shot(kind: str, new: float, old: float, ro: bool) -> float:
    """Thesis §6.2.1's single-shot handoff success for MIPv6 from the one-way delivery of the
    new link's path (`new`, CN <-> the foreign router) and the old one's (`old`, CN <-> the home
    agent): eq. 17 (BU and BA, each over both) = (new·old)^2; eq. 18 adds HoTI and HoT (through
    the HA: new·old^2 each) and CoTI, CoT, BU and BA to the CN (new each): new^8·old^6. Back
    home (the thesis has no such case) the BU and BA stay on the home link (1), and with RO the
    HoTI, HoT, BU and BA to the CN cross the old path: old^4."""
    if kind == "home":
        return round(old ** 4 if ro else 1.0, 6)
    return round(new ** 8 * old ** 6 if ro else (new * old) ** 2, 6)


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


# seed 001 Table 6.5 / seed 000 Fig. 16 (ilnp_lab.mobility_report.PUBLISHED): LAN->LAN
THESIS_MS = {"mipv6": {"handoff": 1005, "interruption": 1002.5}, "mipv6-ro": {"handoff": 1024, "interruption": 1002.5}}
PHASES = ["movement_detection_ms", "home_address_move_ms", "bu_ba_ha_ms", "ha_dad_ms", "ha_processing_ms",
          "bu_retransmissions", "tunnel_route_ms", "return_routability_ms", "bu_ba_cn_ms", "ro_route_ms",
          "handoff_delay_ms"]
HA, CN = "2001:db8:2::1", "2001:db8:a::c"  # tests/system/mipv6_guest.py's addresses


def report(results: list[dict], prov: dict) -> str:
    """report.md of a guest run (its MIPV6-RESULT lines): provenance, handoffs split into phases
    beside the thesis's, the session, message sizes. `python3 -m ilnp_lab.mipv6.phases DIR`."""
    runs = [(r, split(r["events"], HA, CN if r["scheme"] == "mipv6-ro" else None)) for r in results if "events" in r]
    others = [r for r in results if "events" not in r]  # ILNPv6 in the same VM run
    cols = [f"{r['scheme']} {r['traffic']}" for r, _ in runs]
    out = ["# Mobile IPv6 in Debian 12's kernel under qemu: LAN -> LAN (issue #43)", "",
           "Provenance: " + ", ".join(f"{k} {v}" for k, v in prov.items()), "",
           "One handoff per column (tests/system/mipv6_guest.py; phases: lab/ilnp_lab/mipv6/phases.py; "
           "docs/mipv6.md explains each). Times from the roles' event lines (one clock for the VM).", "",
           "| phase (ms) | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for k in PHASES:
        out.append(f"| {k.removesuffix('_ms').replace('_', ' ')} | " + " | ".join(str(s.get(k, "—")) for _, s in runs) + " |")
    out.append("| thesis handoff delay | " + " | ".join(str(THESIS_MS[r["scheme"]]["handoff"]) for r, _ in runs) + " |")
    out.append("| UDP CN->MN longest gap | " + " | ".join(str(r["udp_cn_to_mn"]["max_gap_ms"]) for r, _ in runs) + " |")
    out.append("| thesis interruption | " + " | ".join(str(THESIS_MS[r["scheme"]]["interruption"]) for r, _ in runs) + " |")
    out.append("| UDP CN->MN lost | " + " | ".join(str(r["udp_cn_to_mn"]["lost"]) for r, _ in runs) + " |")
    out.append("| TCP bytes (after the move) | " + " | ".join(
        f"{r['tcp']['bytes']} ({r['tcp']['after_move_bytes']})" if r.get("tcp") else "—" for r, _ in runs) + " |")
    out.append("| data frames after: tunnelled / RH2 / HAO | " + " | ".join(
        "{tunnelled} / {rh2} / {hao}".format(**r["data_after"]) for r, _ in runs) + " |")
    if others:
        out += ["", "ILNPv6 (ilnpd, hard handoff) in the same VM, topology and timeline; thesis LAN->LAN handoff "
                "7 ms, interruption 4.5 ms:", "", "| run | UDP CN->MN longest gap (ms) | lost | TCP bytes (after the move) |",
                "|---|---|---|---|"]
        out += [f"| {r['scheme']} {r['traffic']} | {r['udp_cn_to_mn']['max_gap_ms']} | {r['udp_cn_to_mn']['lost']} | "
                + (f"{r['tcp']['bytes']} ({r['tcp'].get('after_move_bytes')})" if r.get("tcp") else "—") + " |" for r in others]
    got = {}
    for r, _ in runs:
        for k, v in sizes(r.get("mh_frames", []), HA, CN).items():
            got.setdefault(k, set()).add(v)
    out += ["", "| message (Ethernet frame, bytes) | ours | thesis (seed 001 §6.4) |", "|---|---|---|"]
    out += [f"| {k} | {', '.join(map(str, sorted(got.get(k, [])))) or '—'} | {v} |" for k, v in THESIS_BYTES.items()]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    import json
    import sys
    from pathlib import Path
    d = Path(sys.argv[1])
    res = [json.loads(line) for line in (d / "results.jsonl").read_text().splitlines() if line.strip()]
    (d / "report.md").write_text(report(res, json.loads((d / "provenance.json").read_text())))
