"""Seed 003 (DIME) experiments in --quick form, end to end through `ilnp-lab run` (issue #15
items 3 and 4): `dime-handoff` (its two-router testbed with 60 ms added, soft and hard
handoff, control and data-plane latency, goodput) and `signalling-scale` (control messages
for one handoff as the correspondents grow, beside seed 003 Table III).

What can fail: a run failing or leaving namespaces, outputs that do not parse, plots that are
not PNGs, a latency that measures something else than its name (the data plane cannot be
faster than the round trip the signalling needs; ILNP's first control message after a join
is its LU, MPTCP's the MP_JOIN SYN from the MN), ILNP's signalling not being exactly one LU
and one ack per correspondent, MPTCP's not one four-message MP_JOIN per connection, or a
connection not surviving the move."""

import json
import subprocess
import sys
from pathlib import Path

from test_lab_experiments import lab, namespaces, png_ok

RTT_S = 0.120  # dime-handoff: 60 ms each way on the CN's link


def pngs_of(out: Path, report: str) -> list[Path]:
    return [out / line.split("](")[1].rstrip(")") for line in report.splitlines() if line.startswith("![")]


def lat(r: dict, key: str) -> dict:
    return next(e for e in r["latency"] if e["key"] == key)


def test_dime_handoff_quick(tmp_path):
    out = tmp_path / "dime"
    r = lab("run", "dime-handoff", "--quick", "--scheme", "ilnp-soft", "--scheme", "mptcp-client", "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    assert not namespaces(r.pid)
    results = json.loads((out / "results.json").read_text())
    assert all(x["ok"] for x in results), results
    assert {(x["move"], x["scheme"]) for x in results} == {(m, s) for m in ("soft", "hard")
                                                           for s in ("ilnp-soft", "mptcp-client")}
    report = (out / "report.md").read_text()
    assert "Handoff latencies and goodput" in report and "Goodput, hard vs soft handoff" in report
    pngs = pngs_of(out, report)
    assert pngs and all(p.exists() and png_ok(p) for p in pngs), pngs
    by = {(x["move"], x["scheme"]): x for x in results}
    for (move, scheme), x in by.items():
        # the move's own timeline ran: soft = join then leave, hard = leave then join
        assert [e["action"] for e in x["timeline"]] == (["up", "down"] if move == "soft" else ["down", "up"])
        join = lat(x, "join")
        first = join["first_control"]
        assert first is not None, (move, scheme, join)
        # the message that starts each protocol's handoff, sent by the MN after its new address is usable
        assert first["kind"] == ("lu" if scheme == "ilnp-soft" else "mp_join_syn"), first
        # MPTCP's join comes from the new address; ILNPv6's LU leaves from the locator the CN
        # already knows while it still works (a soft move: the old network's), then from the new
        # one (#46 item 4, docs/design/lu-source-locator.md); after a hard move only the new works
        old_known = scheme == "ilnp-soft" and move == "soft"
        assert first["src"].startswith("2001:db8:1:" if old_known else "2001:db8:2:"), (move, scheme, first)
        assert join["usable_s"] is not None and first["t_s"] >= join["usable_s"] >= join["t_s"], join
        assert 0 <= join["control_latency_ms"] < 500, join
        # data on the new path needs the signalling to reach the CN and the data to come back; after
        # a hard handoff ILNP's connection resumes only at the CN's next retransmission timeout, which
        # may fall after the flow's end (None); MPTCP's new subflow carries data at once
        dp = join["dataplane_latency_ms"]
        if move == "soft" or scheme == "mptcp-client":
            assert dp is not None, (move, scheme, join)
        assert dp is None or dp >= (RTT_S - 0.005) * 1000, join
        if move == "soft":
            assert x["session_survived"], x["cell"]
            leave = lat(x, "leave")
            # the old network gone: ILNP's LU without it, MPTCP's REMOVE_ADDR, on the path still up
            assert leave["first_control"]["kind"] == ("lu" if scheme == "ilnp-soft" else "remove_addr"), leave
        else:
            assert lat(x, "leave")["first_control"] is None  # no path left to signal on
    # the sender's kernel counters: the outage timed the CN's TCP out; a soft handoff never does
    assert by[("hard", "ilnp-soft")]["tcp_sender"]["TCPTimeouts"] >= 1, by[("hard", "ilnp-soft")]["tcp_sender"]
    assert by[("soft", "ilnp-soft")]["tcp_sender"]["TCPTimeouts"] == 0, by[("soft", "ilnp-soft")]["tcp_sender"]
    assert "The CN's TCP recovery" in report
    soft = by[("soft", "ilnp-soft")]
    assert soft["control"]["by_kind"]["lu"]["messages"] >= 2 and "lu_ack" in soft["control"]["by_kind"]
    assert by[("soft", "mptcp-client")]["control"]["by_kind"]["mp_join_ack4"]["messages"] >= 1


def test_signalling_scale_quick(tmp_path):
    out = tmp_path / "sig"
    r = lab("run", "signalling-scale", "--quick", "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    assert not namespaces(r.pid)
    results = json.loads((out / "results.json").read_text())
    meta = json.loads((out / "meta.json").read_text())
    assert meta["quick"] and "--quick" in meta["reference_not_because"]
    assert {(x["scheme"], x["correspondents"]) for x in results} == {(s, n) for s in ("ilnp", "mptcp") for n in (1, 3)}
    report = (out / "report.md").read_text()
    assert "QUICK FORM (not a reference run)" in report
    pngs = pngs_of(out, report)
    assert pngs and all(p.exists() and png_ok(p) for p in pngs), pngs
    for x in results:
        assert x["ok"], x
        n, conns = x["correspondents"], x["conns"]
        assert x["connections_alive_after"] == x["connections"] == n * conns, x
        kinds = {k: v["messages"] for k, v in x["by_kind"].items()}
        if x["scheme"] == "ilnp":
            # one LU and one ack per correspondent, exactly (IHMP's 2 x max(addrs) with one address)
            assert kinds == {"lu": n, "lu_ack": n}, kinds
            assert x["messages"] == 2 * n == x["formulas"]["IHMP (DIME)"]
            assert x["lus_acked"] == n
        else:
            # one MP_JOIN handshake (4 messages) per connection: Table III's 4 x 1 x 1 x conns per correspondent
            assert kinds.get("mp_join_syn") == kinds.get("mp_join_synack") == kinds.get("mp_join_ack") == n * conns, kinds
            assert x["messages"] >= 3 * n * conns, x
    r2 = subprocess.run([sys.executable, "-m", "ilnp_lab.cli", "report", str(out)], capture_output=True, text=True)
    assert r2.returncode == 0 and Path(r2.stdout.strip()) == out / "report.md", r2


def test_move_timelines_are_checked(tmp_path):
    """A move's own `events` are checked like [[event]]s, and named in the error."""
    src = (Path(__file__).resolve().parents[1] / "lab" / "ilnp_lab" / "experiments" / "dime-handoff.toml").read_text()
    bad = tmp_path / "bad.toml"
    old = '{ at_s = 10, node = "mn", iface = "eth-r2", action = "up", label = "join r2" },\n]'
    assert src.count(old) == 1
    bad.write_text(src.replace(old, old.replace("at_s = 10", "at_s = 2")))
    r = lab("check", str(bad))
    assert r.returncode == 2 and "[move.hard] events #2" in r.stderr and "before the previous event" in r.stderr, r
    bad.write_text(src.replace('iface = "eth-r1", action = "down", label = "leave r1" },\n]',
                               'iface = "eth-r9", action = "down", label = "leave r1" },\n]'))
    r = lab("check", str(bad))
    assert r.returncode == 2 and "[move.soft] events #2" in r.stderr and "mn:eth-r9" in r.stderr, r
