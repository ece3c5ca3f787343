"""The adversary suite's results as a report: the summary (successes must be 0), a row per
attack and peer mode, the two classic attacks in detail.
"""

from __future__ import annotations

from pathlib import Path

from .. import experiment


def summarise(res: dict) -> dict:
    rows = res["rows"]
    return {"scenarios": len(rows), "successes": sum(r["successes"] for r in rows),
            "exposures": sum(r.get("exposures", 0) for r in rows),
            # after a documented move the attacker's packets come from the path: not comparable
            "uncounted": sum(max(0, r["attempts"] - r["counted"]) for r in rows if not r.get("exposures")),
            "entries_created": sum(max(0, r["entries_created"]) for r in rows),
            "max_third_party_ratio": max((r["third_party_ratio"] for r in rows), default=0)}


def report(out: Path, res: dict, meta: dict) -> Path:
    s = summarise(res)
    L = experiment.header(meta, f"{res['elapsed_s']:.0f} s")
    L += ["## Summary", "", f"{s['scenarios']} scenarios, **{s['successes']} successes** (must be 0), "
          f"{s['uncounted']} attack packets not counted under their reason, {s['entries_created']} ILCC entries "
          f"created, at most {s['max_third_party_ratio']} packets toward third parties per attacker packet; "
          f"{s['exposures']} documented exposures (below).", ""]
    L += ["## Results", "", "| attack | peer | attempts | successes | exposures | counted | entries | "
          "to third parties (per attacker packet; bytes per attacker packet) | to attacker | challenges | "
          "CN ilnpd CPU ms per 10^5 attacker packets | real peer's datagrams delivered |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        L.append(f"| {r['attack']} | {r['peer']} | {r['attempts']} | {r['successes']} | {r.get('exposures', 0)} | "
                 f"{r['counted']} | {r['entries_created']} | {r['toward_third_parties']} ({r['third_party_ratio']}; "
                 f"{r.get('third_party_bytes_ratio', '-')} B) | {r['toward_attacker']} | {r['challenges']} | "
                 f"{r.get('cpu_ms_per_1e5', '-')} | {r['real_peer_delivered']} in {r['window_s']} s |")
    L += ["", "## The two classic attacks in detail", ""]
    for r in res["rows"]:
        if "v4" in r:
            v, a = r["v4"], r["v4"]["attacker"]
            moved = ""
            if r["session_moved"]:
                why = "taken with no validation: " if r["taken_unvalidated"] else ""
                moved = f" (**moved**: {why}" + ("a success" if r["successes"] else "the documented exposure") + ")"
            L.append(f"* v4-replay, peer {r['peer']}: path {v['via_before']} → {v['via_after']}{moved}; "
                     f"{a['replays']} replays, {a['echo_requests']} Echo Requests to the attacker, {a['answered']} "
                     f"answered; {r['delivered_to_app']} replays delivered to the application (duplicates of the "
                     f"peer's datagram); CN: " + ", ".join(f"`{k}` {x}" for k, x in v["counters"].items()))
        if "dns" in r:
            x = r["dns"]
            lo, hi = x["held_closed_after_s"]
            when = f"closed after {lo}-{hi} s" if lo is not None else "none closed while the attacker waited"
            L.append(f"* slow-dns: {r['attempts']} slow connections, {x['held']} held ({when}), "
                     f"{x['over_cap_held']} beyond the cap held, {x['outlived_deadline']} outlived the deadline; "
                     f"the CN's local client: "
                     f"{x['udp_answered']} of {x['udp_sent']} UDP queries answered (slowest {x['udp_slowest_s']} s), "
                     f"its TCP query during the attack "
                     f"{'refused (the cap)' if x['legit_tcp_refused'] else 'answered'}, after it "
                     f"{'answered' if x['tcp_after_answered'] else '**not answered**'}; proxy: "
                     + ", ".join(f"`{k}` {v}" for k, v in x["counters"].items()))
    L += ["", "Exposures: what docs/architecture.md § IPv4 and NAT says an attacker that once saw the peer's "
          "nonce can do (take the v4 path when the old path does not answer within 4×srtt: the peer silent, or "
          "the confirmation lost), counted apart from the successes.",
          "", "Definitions: lab/ilnp_lab/attacks/catalogue.py (module docstring); the threat model: docs/security.md."]
    if res["notes"]:
        L += ["", "## Notes", ""] + [f"* {n}" for n in res["notes"]]
    path = out / "report.md"
    path.write_text("\n".join(L) + "\n")
    return path
