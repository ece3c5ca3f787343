"""The mobility plugin's report (mobility.report): a run folder's results -> results.csv,
plots/*.png and report.md.

Our numbers sit beside the seeds': the measured ILNPv6 values of seed 000 / thesis
Ch. 5 and the thesis's analytic values (Tables 6.5-6.12, no loss), labelled as reference rows;
MIPv6 is measured where the kernel has it (schemes mipv6 / mipv6-ro, Debian 12's kernel in the VM),
the thesis's MIPv6 values beside those rows.
"""

from __future__ import annotations

import csv
from pathlib import Path

from . import analysis, experiment, plots
from .addr import upper64

# thesis Tables 6.5-6.12 (no loss): handoff delay and interruption time, ms
PUBLISHED = {
    "lan-lan": {"handoff": {"MIPv6 no RO": 1005, "MIPv6 RO": 1024, "ILNP hard": 7, "ILNP soft": 7},
                "interruption": {"MIPv6 no RO": 1002.5, "MIPv6 RO": 1002.5, "ILNP hard": 4.5, "ILNP soft": 0}},
    "lan-wan": {"handoff": {"MIPv6 no RO": 1200, "MIPv6 RO": 1609, "ILNP hard": 202, "ILNP soft": 202},
                "interruption": {"MIPv6 no RO": 1100, "MIPv6 RO": 1100, "ILNP hard": 102, "ILNP soft": 0}},
    "wan-lan": {"handoff": {"MIPv6 no RO": 1200, "MIPv6 RO": 1609, "ILNP hard": 7, "ILNP soft": 7},
                "interruption": {"MIPv6 no RO": 1100, "MIPv6 RO": 1100, "ILNP hard": 4.5, "ILNP soft": 0}},
    "wan-wan": {"handoff": {"MIPv6 no RO": 1400, "MIPv6 RO": 2204, "ILNP hard": 202, "ILNP soft": 202},
                "interruption": {"MIPv6 no RO": 1200, "MIPv6 RO": 1200, "ILNP hard": 102, "ILNP soft": 0}},
}
# seed 000 §6.1.3: a hard handoff (and MIPv6) loses about one 320 KB window of 1400 B segments
WINDOW_LOSS_PACKETS = 234

# columns whose meaning changed in issue #9 were renamed: `lost` (included the MN's whole
# stale-drop counter, probe included) is now `flow_lost`; `interruption_ms` (longest gap of
# the whole flow) is now one column per move event; `stale_drops` is split per flow. The
# per-event window is RTT-based (analysis.event_window): `*_is_steady` marks an interruption
# no longer than the flow's longest steady-state gap, `steady_gap_p99_ms` is the steady level
CSV_FIELDS = ["experiment", "cell", "move", "scheme", "load", "cc", "run", "ok", "failed_step", "session_survived",
              "bytes_received", "retransmissions", "flow_lost", "broken_at_s", "undelivered_after_break",
              "interruption_join_ms", "interruption_join_at_s", "interruption_join_is_steady", "interruption_leave_ms",
              "interruption_leave_at_s", "interruption_leave_is_steady", "startup_gap_ms", "steady_gap_ms",
              "steady_gap_p99_ms", "handoff_delay_ms", "leave_handoff_delay_ms", "lu_copies",
              "ra_to_lu_ms", "probe_cn_to_mn_lost", "probe_mn_to_cn_lost", "stale_drops_flow", "stale_drops_probe",
              "stale_drops_daemon", "iperf_received", "tcp_timeouts", "tcp_loss_undo", "tcp_spurious_rtos"]


def _iperf_received(r: dict):
    i = r.get("iperf_receiver") or {}
    return i.get("packets_delivered", i.get("bytes_received"))


def _leave_lu(r: dict):
    return next((e["handoff_delay_ms"] for e in r.get("lu_by_event") or [] if e["key"] == "leave"), None)


def flat(r: dict) -> dict:
    if not r.get("ok", True):
        return {k: r.get(k) for k in ("experiment", "cell", "move", "scheme", "load", "cc", "run")} | {
            "ok": False, "failed_step": r.get("error")}
    f, p, sd = r["flow"], r.get("probe") or {}, r.get("stale_drops_by_flow") or {}
    return {"experiment": r["experiment"], "cell": r["cell"], "move": r["move"], "scheme": r["scheme"], "load": r["load"],
            "cc": r["cc"], "run": r["run"], "ok": True, "failed_step": None, "session_survived": r["session_survived"],
            "bytes_received": f["bytes_received"], "retransmissions": f.get("retransmissions"), "flow_lost": f.get("lost"),
            "broken_at_s": f.get("broken_at_s"), "undelivered_after_break": f.get("undelivered_after_break"),
            **{k: f.get(k) for k in ("interruption_join_ms", "interruption_join_at_s", "interruption_join_is_steady",
                                     "interruption_leave_ms", "interruption_leave_at_s", "interruption_leave_is_steady",
                                     "startup_gap_ms", "steady_gap_ms", "steady_gap_p99_ms")},
            "handoff_delay_ms": r.get("handoff_delay_ms"), "leave_handoff_delay_ms": _leave_lu(r),
            "lu_copies": r.get("lu_copies"), "ra_to_lu_ms": r.get("ra_to_lu_ms"),
            "probe_cn_to_mn_lost": p.get("cn_to_mn_lost"), "probe_mn_to_cn_lost": p.get("mn_to_cn_lost"),
            "stale_drops_flow": sd.get("flow"), "stale_drops_probe": sd.get("probe"),
            "stale_drops_daemon": sd.get("daemon_counter"), "iperf_received": _iperf_received(r),
            **{k: (r.get("tcp_sender") or {}).get(c) for k, c in (("tcp_timeouts", "TCPTimeouts"),
                                                                   ("tcp_loss_undo", "TCPLossUndo"),
                                                                   ("tcp_spurious_rtos", "TCPSpuriousRTOs"))}}


def write_csv(results: list[dict], path: Path) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        w.writeheader()
        for r in results:
            w.writerow(flat(r))


def fmt(s: dict, scale: float = 1.0, digits: int = 1) -> str:
    if not s or not s.get("n"):
        return "—"
    med = s["median"] * scale
    if s["n"] == 1:
        return f"{med:.{digits}f}"
    return f"{med:.{digits}f} [{s['p25'] * scale:.{digits}f}–{s['p75'] * scale:.{digits}f}]"


def interruption(rs: list[dict], key: str) -> str:
    """Median [IQR] of the runs' interruption at an event, and in how many of them it was no
    longer than the flow's longest steady-state gap."""
    vals = [r["flow"].get(f"interruption_{key}_ms") for r in rs]
    out = fmt(analysis.summary(vals))
    n = sum(1 for v in vals if v is not None)
    k = sum(1 for r in rs if r["flow"].get(f"interruption_{key}_is_steady"))
    return out if not n or not k else f"{out} ({k}/{n} ≤ steady)"


def goodput_mbit(r: dict) -> float:
    """Seed 003 §VI-D's goodput: unique payload bytes delivered to the MN over the flow's duration."""
    return r["flow"]["bytes_received"] * 8 / r["duration_s"] / 1e6


def _lat(r: dict, key: str, field: str):
    return next((e[field] for e in r.get("latency") or [] if e["key"] == key), None)


def latency_table(by_scheme: dict[str, list[dict]], move: str) -> list[str]:
    """Seed 003 §VI-B/D per scheme: goodput, control and data-plane latency at each event."""
    keys = [e["key"] for e in next(iter(by_scheme.values()))[0].get("latency") or []]
    head = "| scheme | goodput (Mbit/s) | " + " | ".join(
        f"{k}: control latency (ms) | {k}: data-plane latency (ms) | {k}: event → data on new path (ms)" for k in keys)
    lines = ["", f"Handoff latencies and goodput (seed 003 §VI-B, D), move {move}: *control latency* = the network "
             "event (a join: the new address usable, i.e. its first Router Advertisement at the MN; a leave: the link "
             "going) → the first control message on the wire at the MN (ILNP: LU; MPTCP: ADD_ADDR, MP_JOIN SYN or "
             "REMOVE_ADDR; plain IPv6 has none: —); *data-plane latency* = that message → the first data packet to the "
             "MN on the new path (an address in the joined network, or for a leave the networks still up); *event → "
             "data on new path* = from the link event itself, whatever the signalling; *goodput* = data delivered to "
             "the MN over the flow's duration.", "", head + " | control messages (bytes) |",
             "|" + "---|" * (3 + 3 * len(keys))]
    for scheme, srs in by_scheme.items():
        col = lambda f: analysis.summary([f(r) for r in srs])  # noqa: E731
        cells = [fmt(col(goodput_mbit), digits=2)]
        for k in keys:
            for field in ("control_latency_ms", "dataplane_latency_ms", "event_to_new_path_ms"):
                cells.append(fmt(col(lambda r: _lat(r, k, field))))
        ctl = f"{fmt(col(lambda r: (r.get('control') or {}).get('messages')), digits=0)} " \
              f"({fmt(col(lambda r: (r.get('control') or {}).get('bytes')), digits=0)})"
        lines.append(f"| {scheme} | " + " | ".join(cells) + f" | {ctl} |")
    return lines


def goodput_ratio_table(ok: list[dict]) -> list[str]:
    """Seed 003 §VI-D: hard-handoff goodput over soft-handoff goodput, per scheme (experiments
    with moves named `soft` and `hard`); the seed's bound is about 2/3 (a 5 s outage in 15 s)."""
    g: dict[tuple, list[float]] = {}
    for r in ok:
        if r["move"] in ("soft", "hard") and r.get("flow"):
            g.setdefault((r["scheme"], r["cc"], r["move"]), []).append(goodput_mbit(r))
    schemes = sorted({(s, cc) for s, cc, _ in g})
    rows = []
    for s, cc in schemes:
        soft, hard = g.get((s, cc, "soft")), g.get((s, cc, "hard"))
        if soft and hard:
            a, b = analysis.summary(soft)["median"], analysis.summary(hard)["median"]
            rows.append(f"| {s} | {cc} | {a:.2f} | {b:.2f} | {b / a if a else float('nan'):.2f} |")
    if not rows:
        return []
    return ["## Goodput, hard vs soft handoff (seed 003 §VI-D, Fig. 12)", "",
            "Seed 003: every protocol about equal over a soft handoff; over a hard one (5 s outage in a 15 s test) "
            "the bound is ≈ 2/3 of soft, which DIME reaches \"almost exactly\"; MPTCP lower (its ≈ 1 s control "
            "latency and slow start), MIPv6 lower still, HIP lowest. Medians over the runs:", "",
            "| scheme | cc | soft (Mbit/s) | hard (Mbit/s) | hard / soft (seed: DIME ≈ 0.67) |", "|---|---|---|---|---|",
            *rows, ""]


def group_key(r: dict) -> tuple:
    return (r["experiment"], r["load"], r["cc"], r["move"])


# thesis §6.3.3, Tables 6.5-6.12: ILNP handoff delay when the LU or its ack is lost, with the
# prototype's fixed 1 s timer (Δ_I): RTT + T_CN + 1 s
PUBLISHED_LU_LOSS_MS = {"lan": 1007, "wan": 1202}


def sender_table(by_scheme: dict[str, list[dict]]) -> list[str]:
    """The CN's TCP recovery (its kernel's counters, mobility.TCP_COUNTERS) and the data delivered
    in runs where the kernel undid an RTO against the others: after an outage the first acks
    can cover data the MN got before its link went but never acked; the sender then judges the
    RTO spurious and restores the window it had before, and the repair that follows is slow."""
    rows = {sc: [r for r in srs if r.get("tcp_sender")] for sc, srs in by_scheme.items()}
    if not any(r["tcp_sender"].get("TCPTimeouts") for rs in rows.values() for r in rs):
        return []
    out = ["", "The CN's TCP recovery (its kernel's TcpExt counters, the CN's namespace): *RTO undone* = runs with "
           "TCPLossUndo > 0: acks after a timeout showed that data sent before it had arrived (F-RTO, RFC 5682: an "
           "ack of data never retransmitted, counted in TCPSpuriousRTOs; or the kernel's D-SACK and timestamp-echo "
           "undo), so the RTO "
           "was judged spurious and the window before it restored; *data* = median [IQR] MB delivered in the runs "
           "with and without an RTO undone:", "",
           "| scheme | runs | RTO timeouts | RTO undone (of which F-RTO) | data, RTO undone (MB) "
           "| data, no RTO undone (MB) |", "|---|---|---|---|---|---|"]
    for sc, rs in rows.items():
        if not rs:
            continue
        c = lambda r, k: r["tcp_sender"].get(k, 0)  # noqa: E731
        undone = [r for r in rs if c(r, "TCPLossUndo") > 0]
        rest = [r for r in rs if c(r, "TCPLossUndo") == 0]
        frto = sum(1 for r in rs if c(r, "TCPSpuriousRTOs") > 0)
        mb = lambda xs: fmt(analysis.summary([r["flow"]["bytes_received"] for r in xs]), 1e-6, 2) if xs else "—"  # noqa: E731
        out.append(f"| {sc} | {len(rs)} | {fmt(analysis.summary([c(r, 'TCPTimeouts') for r in rs]), digits=0)} "
                   f"| {len(undone)}/{len(rs)} ({frto}) | {mb(undone)} | {mb(rest)} |")
    return out


# thesis Table 6.2 (§6.2.3, analytic single shot, eqs. 17-19): handoff success by the old link's loss
# (R1-HA; rows) and the new link's (R1-R3; columns), percent
TABLE_6_2_LOSS = (1, 2, 5, 10)
PUBLISHED_SUCCESS = {
    "MIPv6 no RO": {1: (.96, .94, .88, .79), 2: (.94, .92, .87, .78), 5: (.88, .87, .81, .73), 10: (.79, .78, .73, .66)},
    "MIPv6 RO": {1: (.86, .80, .62, .40), 2: (.82, .75, .59, .38), 5: (.68, .63, .49, .32), 10: (.49, .45, .35, .23)},
    "ILNPv6": {old: (.98, .96, .90, .81) for old in TABLE_6_2_LOSS},
}


def seed_success(scheme: str, hs: list[dict]) -> str:
    """Table 6.2's success for this scheme at the handoffs' new-link loss (the seed's 1/2/5/10 %),
    at their old-link loss or, below 1 % (a lossless old link: every move but the *-oldM ones), the 1 % row,
    said so; '—' where the table has no cell (a lossless new link; MIPv6's return home, whose
    BU and BA stay on the home link whatever R1-R2's loss)."""
    name = {"mipv6": "MIPv6 no RO", "mipv6-ro": "MIPv6 RO"}.get(scheme, "ILNPv6" if scheme.startswith("ilnp") else None)
    # ILNPv6's single shot is the new path's delivery squared (runs from before new_loss_pct was kept)
    new = {h["new_loss_pct"] if "new_loss_pct" in h else
           round(100 * (1 - h["analytic_single_shot"] ** 0.5), 3) if h.get("analytic_single_shot") is not None
           and scheme.startswith("ilnp") else None for h in hs}
    old = {h.get("old_loss_pct") or 0 for h in hs}
    if name is None or any(h.get("kind") == "home" for h in hs) or len(new) != 1 or len(old) != 1 or (n := next(iter(new))) not in TABLE_6_2_LOSS:
        return "—"
    o = next(iter(old))
    row = o if o in TABLE_6_2_LOSS else 1
    v = PUBLISHED_SUCCESS[name][row][TABLE_6_2_LOSS.index(n)]
    return f"{100 * v:.0f} %" + ("" if row == o or name == "ILNPv6" else f" (old {row} %)")  # ILNPv6's: any old row


def handoff_table(by_scheme: dict[str, list[dict]]) -> list[str]:
    """The handoffs of the ILNP runs (analysis.handoffs), by scheme and by where the MN went:
    measured against the thesis's analytic single-shot success (Table 6.2)."""
    rows = []
    for scheme, srs in by_scheme.items():
        by_label: dict[str, list[dict]] = {}
        for r in srs:
            for h in r.get("handoffs") or []:
                by_label.setdefault(h["label"], []).append(h)
        for label, hs in by_label.items():
            s = analysis.handoff_summary(hs)
            analytic = analysis.summary(h.get("analytic_single_shot") for h in hs)
            pct = lambda x: "—" if x is None else f"{100 * x:.1f} %"  # noqa: E731
            lus = "—" if s["lus_per_handoff"] is None else f"{s['lus_per_handoff']:.2f}"
            rows.append(f"| {scheme} | {label} | {s['n']} | {pct(s['success'])} | {pct(s['no_retransmission'])} "
                        f"| {pct(analytic['median'])} | {seed_success(scheme, hs)} | {pct(s['lu_reached_cn'])} | {lus} | {fmt(s['delay_ms'])} "
                        f"| {fmt(s['delay_single_ms'])} | {fmt(s['delay_retried_ms'])} ({s['delay_retried_ms']['n']}) |")
    if not rows:
        return []
    return ["", "Handoffs (each join of a network; thesis Ch. 6): *success* = the CN sent to the joined network's "
            "locator before the next join; *one LU* = completed with no retransmission (the ack reached the MN "
            "before the timer fired: with no jitter, the first LU and its ack both arrived), beside *analytic "
            "single-shot* = P(LU) × P(ack) from the links' loss on the path (thesis §6.2.1 eqs. 3, 8, 9; Table 6.2 "
            "gives .98 / .96 / .90 / .81 at 1 / 2 / 5 / 10 % on the new link) and *seed* = Table 6.2 at the "
            "handoff's new-link and old-link loss (Table 6.2 has no row below 1 %: a lossless old link takes the "
            "1 % row, marked *(old 1 %)* for MIPv6; ILNPv6's is the same in every row); *LU at CN* = "
            "the first LU was captured at the CN (before any retransmission); *LUs / handoff* = send instants of "
            "the handoff's LU until acked, at the MN (thesis Fig. 3.15c); *delay* = first LU → first ack at the MN "
            "(thesis §3.3: ≥ 1 RTT, < 2 RTT), of all handoffs, of those with one LU and of those retried (the first "
            "LU or its ack lost or late; thesis with its fixed 1 s timer: "
            f"{PUBLISHED_LU_LOSS_MS['lan']} ms LAN / {PUBLISHED_LU_LOSS_MS['wan']} ms WAN), (n) retried handoffs. "
            "Mobile IPv6 (mipv6, mipv6-ro; mipv6.phases.moves) has a handoff per registration away from home "
            "(labelled by the event that made it: the home link's leave, or a join when the home link went first) "
            "and per return home (the home prefix's RA, §11.5.5): *success* = the HA's BA (with RO also the CN's) "
            "before the next movement; *one LU* = one BU to the HA (and one to the CN) acknowledged; *analytic* = "
            "thesis eqs. 17-18 on this move's links (a return home keeps the BU/BA on the home link: 1, with RO "
            "old-path⁴); *LU at CN* = the first BU reached the HA; *LUs* = BUs to the HA; *delay* = first BU → the "
            "last BA (thesis Tables 6.5, 6.11: 1005 / 1024 ms LAN, 1400 / 2204 WAN; a BU or BA lost: 2505 / 2524 "
            "and 2900 / 3704 ms).", "",
            "| scheme | handoff | n | success | one LU | analytic single-shot | seed (Table 6.2) | LU at CN | LUs / handoff "
            "| delay (ms) | delay, one LU (ms) | delay, retried (ms) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"] + rows


def path_rtts(rs: list[dict]) -> dict[str, float]:
    """The median over the runs of each access path's round trip (mobility.path_rtts_ms: CN to
    the access router's MN-facing address)."""
    names = sorted({k for r in rs for k in (r.get("rtt_ms") or {})})
    return {k: analysis.median((r.get("rtt_ms") or {}).get(k) for r in rs) for k in names}


def cell_label(load: str, cc: str, move: str) -> str:
    return f"{move}" + (f", load {load}" if load != "default" else "") + (f", {cc}" if cc != "-" else "")


def _ms(x: float) -> str:
    return f"{x:.2f}" if x < 1 else f"{x:.1f}"


def make_before_break(timeline: list[dict], mn: str) -> bool:
    """The MN joined a network before it left one (a move a soft handoff can make hitless)."""
    t = {a: min((e["t_s"] for e in timeline if e["node"] == mn and e["action"] == a), default=None) for a in ("up", "down")}
    return t["up"] is not None and (t["down"] is None or t["up"] < t["down"])


def lu_path_router(ex, r: dict) -> str | None:
    """The access router whose network the run's first LU advertised first (the path it took:
    its source locator), from the experiment's [[radvd]] prefixes; None if unknown."""
    locs = (r.get("lu") or [{}])[0].get("locators") or []
    if ex is None or not locs:
        return None
    return next((ra.node for ra in ex.radvd if upper64(ra.prefix) == upper64(locs[0])), None)


def claims(groups: dict[tuple, list[dict]], ex) -> list[str]:
    """The seeds' claims this run can check, each with our numbers and a verdict by a stated rule."""
    runs = [r for rs in groups.values() for r in rs]
    ilnp = [r for r in runs if r["scheme"].startswith("ilnp")]
    if not ilnp:
        return []
    out = ["**The seeds' claims, checked on this run** (the rule in brackets):", ""]
    # 1. survival
    by = {}
    for r in runs:
        by.setdefault(r["scheme"], []).append(r["session_survived"])
    kept = sum(r["session_survived"] for r in ilnp)
    broken = sorted({f"{r['move']} {r['scheme']}" for r in ilnp if not r["session_survived"]})
    per = ", ".join(f"{sc} {sum(v)}/{len(v)}" for sc, v in by.items())
    out.append(f"* *An ILNPv6 session survives the move* (seed 000 §6, thesis Ch. 5): sessions kept per scheme: {per}. "
               + ("**Agrees** [every ILNPv6 run kept its session]." if kept == len(ilnp) else
                  f"**Disagrees** [every ILNPv6 run kept its session]: broken in {', '.join(broken)}."))
    # 2. handoff = one round trip of the path the LU takes
    excess, off, n = [], [], 0
    for (_, load, cc, move), rs in sorted(groups.items()):
        for sc in sorted({r["scheme"] for r in rs if r["scheme"].startswith("ilnp")}):
            pairs = [(r["handoff_delay_ms"], (r.get("rtt_ms") or {}).get(lu_path_router(ex, r) or ""), r.get("lu_copies"))
                     for r in rs if r["scheme"] == sc and r.get("handoff_delay_ms") is not None]
            pairs = [p for p in pairs if p[1] is not None]
            if not pairs:
                continue
            n += 1
            h, rtt = analysis.median(p[0] for p in pairs), analysis.median(p[1] for p in pairs)
            if h <= rtt * 1.1 + 1.0:
                excess.append(h - rtt)
            else:
                off.append(f"{cell_label(load, cc, move)}: {sc} {_ms(h)} ms on a {_ms(rtt)} ms path (LUs sent: median "
                           f"{analysis.median(p[2] for p in pairs):g})")
    if n:
        out.append("* *A handoff (first LU → its ack) takes one round trip of the path the LU takes* (thesis Tables "
                   "6.5–6.12, analytic; the path's round trip: CN to that network's access router, pinged in the same "
                   "runs, the MN's own link excluded): "
                   + (f"within it in {len(excess)} of {n} cell × scheme pairs (median handoff − round trip "
                      f"{_ms(min(excess))} to {_ms(max(excess))} ms)" if excess else "in none")
                   + (f"; not in {'; '.join(off)}" if off else "") + ". "
                   + ("**Agrees**" if not off else f"**Agrees in {len(excess)} of {n}**")
                   + " [median ≤ the round trip + 10 % + 1 ms; a lost LU is retried after a timeout].")
    # 3. a soft handoff interrupts nothing: where the MN joins the new network before leaving the old
    mn = ex.mn if ex else "mn"
    soft, calm, loud = 0, 0, []
    for (_, load, cc, move), rs in sorted(groups.items()):
        srs = [r for r in rs if r["scheme"] == "ilnp-soft" and make_before_break(r["timeline"], mn)]
        if not srs:
            continue
        soft += 1
        steady = [all(r["flow"].get(f"interruption_{k}_is_steady") is not False for k in ("join", "leave")) for r in srs]
        if 2 * sum(steady) > len(steady):
            calm += 1
        else:
            j = analysis.median(r["flow"].get("interruption_join_ms") for r in srs)
            lv = analysis.median(r["flow"].get("interruption_leave_ms") for r in srs)
            loud.append(f"{cell_label(load, cc, move)} (join {'—' if j is None else _ms(j)} ms, "
                        f"leave {'—' if lv is None else _ms(lv)} ms)")
    if soft:
        out.append(f"* *A soft handoff interrupts nothing* (thesis Tables 6.5–6.12: 0 ms, analytic; moves that join the "
                   f"new network before leaving the old): ILNPv6 soft's interruptions at join and leave stayed within "
                   f"the flow's own steady-state gap in {calm} of {soft} cells [in most of a cell's runs]"
                   + ("." if not loud else f"; not in {'; '.join(loud)}: see the interruption note above and "
                      "docs/experiments.md.") + (" **Agrees.**" if calm == soft else f" **Agrees in {calm} of {soft}.**"))
    return out + [""]


# the seed's scheme names for ours, where the thesis publishes a row (PUBLISHED)
SEED_SCHEME = {"ilnp-hard": "ILNP hard", "ilnp-soft": "ILNP soft", "mipv6": "MIPv6 no RO", "mipv6-ro": "MIPv6 RO"}


def summary_table(cell: str, by_scheme: dict[str, list[dict]], published: dict | None) -> list[str]:
    """One cell's headline: per scheme, did the session survive, how long did the application
    wait at the join and at the leave, how long the handoff took, what was delivered; with the
    seed's handoff and interruption for the move beside ILNPv6's, and its MIPv6 rows."""
    med = lambda xs: analysis.summary([x for x in xs if x is not None])  # noqa: E731
    out = [f"**{cell}**", "", "| scheme | session survived | interruption at join (ms) | interruption at leave (ms) "
           "| handoff (ms) | data (MB) |" + (" seed: handoff / interruption (ms) |" if published else ""),
           "|---|---|---|---|---|---|" + ("---|" if published else "")]
    for sc, srs in by_scheme.items():
        one = lambda k: fmt(med(r["flow"].get(k) for r in srs))  # noqa: E731
        seed = ""
        if published:
            name = SEED_SCHEME.get(sc)
            seed = (f" {published['handoff'][name]:g} / {published['interruption'][name]:g} |" if name else " — |")
        out.append(f"| {sc} | {sum(1 for r in srs if r['session_survived'])}/{len(srs)} "
                   f"| {one('interruption_join_ms')} | {one('interruption_leave_ms')} "
                   f"| {fmt(med(r.get('handoff_delay_ms') for r in srs))} "
                   f"| {fmt(med(r['flow']['bytes_received'] for r in srs), 1e-6, 2)} |{seed}")
    if published:
        out += [f"| {k} (seed, analytic) | — | {published['interruption'][k]:g} | — | {published['handoff'][k]:g} | — | — |"
                for k in published["handoff"] if k.startswith("MIPv6")]
    return out + [""]


def experiment_of(meta: dict):
    """The run's experiment file as this checkout reads it (None if it cannot be read)."""
    from .topology import load
    try:
        shipped = experiment.experiment_path(meta["experiment"])
        return load(shipped if shipped.is_file() else meta.get("file", ""))
    except (ValueError, OSError):
        return None


def write(outdir: Path, results: list[dict], meta: dict) -> Path:
    """Writes results.csv, the plots and report.md into `outdir`; returns the report's path."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    write_csv(results, outdir / "results.csv")
    pdir = outdir / "plots"
    head = experiment.header(meta, f"{meta['runs_done']} runs ({meta['runs_failed']} failed)",
                             f"{meta['runs_per_cell']} per cell", f"{meta.get('jobs', 1)} at a time",
                             f"flows of {meta['duration_s']:g} s")
    prov = meta.get("provenance_start") or {}
    lines = ["## The run", ""] + ([f"ilnpd build sha256 {prov['ilnpd_sha256'][:12]}.", ""] if prov else []) + [
             "Versions and link emulation:", ""]
    if "reanalysed" in meta:
        r = meta["reanalysed"]
        lines[-3:-3] = [f"Results re-analysed from the run's captures at {r['at']} with the analysis of commit "
                        f"{r['commit']}{'' if r['clean'] else ' (work tree not clean)'} (`ilnp-lab report DIR --reanalyse`); "
                        f"the data and the run's provenance above are unchanged."]
    if "dad" in meta:
        lines[-3:-3] = [f"DAD on the hosts' SLAAC interfaces: {meta['dad']} ({meta['dad_transmits']} probe(s)); "
                        f"association delay before the MN's link to a joined network comes up: "
                        f"{meta['assoc_delay_s']:g} s."]
    if meta.get("sysctls"):
        lines[-3:-3] = ["Set in the testbed's namespaces after it was built (`--sysctl`, not the kernel's defaults): "
                        + ", ".join(f"`{s}`" for s in meta["sysctls"]) + "."]
    lines += [f"* {k}: {v}" for k, v in meta["versions"].items()]
    lines += [f"* congestion control {k}: {v}" for k, v in (meta.get("cc_impl") or {}).items()]
    for n in meta.get("notes", []):
        lines.append(f"* note: {n}")
    window = next((r["flow"].get("event_window") for r in results if r.get("ok", True) and r.get("flow")), None)
    window = window or {"pre_s": analysis.EVENT_PRE_S, "rtts": analysis.EVENT_RTTS, "margin_s": analysis.EVENT_MARGIN_S}
    startup = next((r["flow"].get("startup_s") for r in results if r.get("ok", True) and r.get("flow")), None)
    lines += ["", "## Definitions", "", "Values are median [25th–75th percentile] over the runs of a cell. Definitions (seed 000 §5.4, "
              "issue #9): *data* = unique TCP/UDP payload bytes delivered to the MN; a packet captured at the MN "
              "that its ilnpd dropped (hard handoff: addressed to a locator its latest Locator Update no longer "
              "advertises) is *not* delivered; *retrans.* = data segments the CN sent with a sequence number it "
              "had sent before; *flow lost* = TCP: retransmitted at the CN and not delivered twice at the MN; "
              "UDP: sent at the CN and never delivered (the probe's datagrams are never in it); a *broken* "
              "session (nothing delivered in the flow's last second) has no loss count: *broken at* = its last "
              "delivered data (s), *not delivered after* = data packets the CN sent that never reached the MN "
              "(UDP: sent after the last delivered one); *interruption at join / leave* = the longest gap between "
              "delivered data arrivals that overlaps the event's window (in progress at its start or starting in "
              f"it; up to the next event's): from {window['pre_s'] * 1000:g} ms before to "
              f"{window['rtts']:g} × RTT + {window['margin_s'] * 1000:g} ms after the change can act on the flow "
              "(a leave: the event; a join: the new locator usable, i.e. the first Router Advertisement with its "
              "prefix at the MN, plus DAD unless optimistic), RTT = the larger configured round trip of the MN's "
              "paths before and after the event; *(k/n ≤ steady)* = in k of the n runs that gap was no longer than "
              "the longest gap of the flow's steady state (outside start-up and every event's window): not "
              "distinguishable from the flow's ordinary pacing, no handoff pause; *steady gap max / p99* = the "
              "steady state's longest gap and 99th percentile; *start-up gap* = the longest gap starting within "
              f"{startup} s of the first delivered data (TCP's first round trips, iperf3's start), never an "
              "interruption; *handoff* = first Locator Update after joining sent → its ack, at the MN; *RA→LU* "
              "= the new network's first Router Advertisement at the MN → the first LU on the wire; *stale drops "
              "flow / probe* = captured packets ilnpd dropped for a stale locator, per flow (by port); *probe* = "
              "sequence-numbered UDP probe lost CN→MN / MN→CN. The probe is a plain UDP socket for every scheme: "
              "for plain IPv6 and MPTCP it stays on the MN's first address, so once the MN has left that network "
              "every probe datagram is lost until the run ends (probe rate × the time away: the ≈ 1,000 of those "
              "rows), while ILNPv6 moves it with the session.", ""]
    summary = ["## Summary", "",
               "Per cell, the median over its runs (definitions below). Where the seed publishes numbers for the "
               "move (thesis Tables 6.5–6.12, analytic, no loss), they stand beside ours. The seeds' claims are checked "
               "first, each by the rule given in brackets; why ours differ is discussed per experiment in "
               "docs/experiments.md. An interruption is "
               "the longest gap between data the application received around the event; a soft handoff onto a path "
               "with a longer delay shows the flow's first round trips on it as such a gap (e.g. ≈ 84 ms when a TCP "
               "flow moves onto a 200 ms path), where the seed's 0 is the analytic pause for signalling.", ""]

    ok = [r for r in results if r.get("ok", True)]
    failed = [r for r in results if not r.get("ok", True)]
    groups: dict[tuple, list[dict]] = {}
    for r in ok:
        groups.setdefault(group_key(r), []).append(r)
    for (exp, load, cc, move), rs in sorted(groups.items()):
        tag = "-".join(x for x in (move, load if load != "default" else "", cc if cc != "-" else "") if x)
        cell = cell_label(load, cc, move)
        lines += [f"## {cell}: details", ""]
        by_scheme: dict[str, list[dict]] = {}
        for r in sorted(rs, key=lambda r: (r["scheme"], r["run"])):
            by_scheme.setdefault(r["scheme"], []).append(r)
        summary += summary_table(cell, by_scheme, PUBLISHED.get(move))
        lines += ["| scheme | runs | session survived | data (MB) | retrans. | flow lost | broken at (s): not delivered "
                  "after | interruption at join (ms) | interruption at leave (ms) | steady gap max / p99 (ms) "
                  "| start-up gap (ms) | handoff (ms) "
                  "| LUs sent | RA→LU (ms) | stale drops flow / probe | probe lost CN→MN / MN→CN |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for scheme, srs in by_scheme.items():
            col = lambda f: analysis.summary([v for v in (f(r) for r in srs) if v is not None])  # noqa: E731
            probe = lambda k: col(lambda r: (r.get("probe") or {}).get(k))  # noqa: E731
            drops = lambda k: col(lambda r: (r.get("stale_drops_by_flow") or {}).get(k))  # noqa: E731
            surv = sum(1 for r in srs if r["session_survived"])
            broken = [r for r in srs if r["flow"].get("broken_at_s") is not None]
            brk = "—" if not broken else (
                f"{len(broken)} run(s): {fmt(analysis.summary([r['flow']['broken_at_s'] for r in broken]))}: "
                f"{fmt(analysis.summary([r['flow'].get('undelivered_after_break') for r in broken]), digits=0)}")
            lines.append(
                f"| {scheme} | {len(srs)} | {surv}/{len(srs)} | {fmt(col(lambda r: r['flow']['bytes_received']), 1e-6, 2)} "
                f"| {fmt(col(lambda r: r['flow'].get('retransmissions')), digits=0)} "
                f"| {fmt(col(lambda r: r['flow'].get('lost')), digits=0)} | {brk} "
                f"| {interruption(srs, 'join')} | {interruption(srs, 'leave')} "
                f"| {fmt(col(lambda r: r['flow'].get('steady_gap_ms')))} / {fmt(col(lambda r: r['flow'].get('steady_gap_p99_ms')))} "
                f"| {fmt(col(lambda r: r['flow'].get('startup_gap_ms')))} | {fmt(col(lambda r: r.get('handoff_delay_ms')))} "
                f"| {fmt(col(lambda r: r.get('lu_copies') if r['scheme'].startswith('ilnp') else None), digits=0)} "
                f"| {fmt(col(lambda r: r.get('ra_to_lu_ms')))} "
                f"| {fmt(drops('flow'), digits=0)} / {fmt(drops('probe'), digits=0)} "
                f"| {fmt(probe('cn_to_mn_lost'), digits=0)} / {fmt(probe('mn_to_cn_lost'), digits=0)} |")
        bidir = {sc: [r["flow"]["mn_to_cn"] for r in srs if r["flow"].get("mn_to_cn")] for sc, srs in by_scheme.items()}
        if any(bidir.values()):
            lines += ["", "MN → CN half of the UDP flow (iperf3 --bidir; sent at the MN, delivered at the CN):", "",
                      "| scheme | sent | delivered | lost |", "|---|---|---|---|"]
            lines += [f"| {sc} | {fmt(analysis.summary(x['packets_sent'] for x in v), digits=0)} "
                      f"| {fmt(analysis.summary(x['packets_delivered'] for x in v), digits=0)} "
                      f"| {fmt(analysis.summary(x['lost'] for x in v), digits=0)} |" for sc, v in bidir.items() if v]
        lines += sender_table(by_scheme)
        lines += handoff_table(by_scheme)
        pub = PUBLISHED.get(move)
        if pub:
            where = ("MIPv6 measured above: the lab's RFC 6275 roles, docs/mipv6.md" if {"mipv6", "mipv6-ro"} & set(by_scheme)
                     else "MIPv6 not run here: it needs CONFIG_IPV6_MIP6 and ip6_tunnel, docs/mipv6.md")
            lines += ["", f"Reference rows (thesis Tables 6.5–6.12, analytic, no loss; {where}):", "",
                      "| scheme | handoff (ms) | interruption (ms) |", "|---|---|---|"]
            lines += [f"| {k} (published) | {pub['handoff'][k]:g} | {pub['interruption'][k]:g} |" for k in pub["handoff"]]
            if exp.endswith("tcp"):
                lines.append(f"| ILNP hard / MIPv6, TCP lost packets (seed 000 Fig. 15, ≈ one window) | — | "
                             f"≈ {WINDOW_LOSS_PACKETS} packets |")
        if any(r.get("latency") for r in rs):
            lines += latency_table(by_scheme, move)
        # plots: one timeline (first run of each scheme) and box plots, like Figs. 9-16
        series = {s: srs[0]["flow"]["timeline"] for s, srs in by_scheme.items()}
        events = [(e["t_s"], e["label"]) for e in rs[0]["timeline"]]
        figs = [plots.timeline_plot(series, pdir / f"{exp}-{tag}-timeline.png", f"{exp} {tag}: data rate at the MN", events)]
        for metric, label, get in (("data", "data received (MB)", lambda r: r["flow"]["bytes_received"] / 1e6),
                                   ("lost", "flow lost packets (sessions that survived)", lambda r: r["flow"].get("lost")),
                                   ("retrans", "retransmissions at the CN", lambda r: r["flow"].get("retransmissions")),
                                   ("handoff", "handoff delay LU→ack (ms)", lambda r: r.get("handoff_delay_ms")),
                                   ("interruption-join", "interruption at join (ms)",
                                    lambda r: r["flow"].get("interruption_join_ms")),
                                   ("interruption-leave", "interruption at leave (ms)",
                                    lambda r: r["flow"].get("interruption_leave_ms"))):
            data = {s: [v for v in (get(r) for r in srs) if v is not None] for s, srs in by_scheme.items()}
            if metric == "retrans" and not exp.endswith("tcp"):
                continue
            # an LU handshake is one round trip of the path it takes: each path's, measured in the runs
            refs = {f"round trip CN → {k} (ping, median)": v for k, v in path_rtts(rs).items()} if metric == "handoff" else None
            figs.append(plots.box_plot(data, pdir / f"{exp}-{tag}-{metric}.png", f"{exp} {tag}", label, refs=refs))
        lines += [""] + [f"![{Path(f).stem}](plots/{Path(f).name})" for f in figs] + [""]
    summary[4:4] = claims(groups, experiment_of(meta))
    lines += goodput_ratio_table(ok)
    if failed:
        lines += ["## Failed runs", ""] + [f"* {r['cell']} run {r['run']}: {r['error']}" for r in failed] + [""]
    path = outdir / "report.md"
    path.write_text("\n".join(head + summary + lines) + "\n")
    return path
