"""The lab's UDP probe (ilnp_lab/probe.py) ends on its peer's end mark, not on a fixed second
of listening, and still counts what was in flight when its own sending ended."""

import json

from ilnp_test_util import probe


def run_pair(bed, tmp_path, secs: float, rate: int, peer_runs: bool = True) -> tuple[dict, dict | None]:
    a, b = bed.add_node("a"), bed.add_node("b")
    # 150 ms each way: the peer's last datagrams are in flight when a probe's own sending ends
    bed.delay_link(a, "eth0", b, "eth0", delay_ms=150)
    a.add_addr("eth0", "2001:db8:1::a/64")
    b.add_addr("eth0", "2001:db8:1::b/64")
    pa = probe(a, "2001:db8:1::a", "2001:db8:1::b", 7500, secs, rate, tmp_path / "a.json")
    pb = probe(b, "2001:db8:1::b", "2001:db8:1::a", 7500, secs, rate, tmp_path / "b.json") if peer_runs else None
    for p in (pa, pb):
        if p:
            assert p.wait(timeout=secs + 10) == 0
    ra = json.loads((tmp_path / "a.json").read_text())
    rb = json.loads((tmp_path / "b.json").read_text()) if peer_runs else None
    return ra, rb


def test_probe_ends_on_the_peers_mark_with_everything_in_flight_counted(bed, tmp_path):
    a, b = run_pair(bed, tmp_path, secs=2, rate=100)
    for me, peer in ((a, b), (b, a)):
        # the mark gave the peer's count, and the datagrams 150 ms behind it all arrived first
        assert me["peer_end"] == peer["sent"] == 200, (me["peer_end"], peer["sent"])
        assert me["got"] == list(range(200)), (len(me["got"]), me["got"][-3:])
        # the mark is not a datagram
        assert max(q for q, _ in me["arrivals"]) == 199


def test_probe_without_a_peer_listens_its_full_second(bed, tmp_path):
    a, _ = run_pair(bed, tmp_path, secs=1, rate=50, peer_runs=False)
    assert a["sent"] == 50 and a["got"] == [] and a["peer_end"] is None, a
