"""Transparent fallback (issue #10 item 4): the CN runs ilnpd, the MN does not.

The MN has MN_WIRE (its L64:NID) as a plain address. Applications on the CN use the
MN's identifier address; ilnpd finds out that the MN does not speak ILNPv6 (its
kernel's Parameter Problem at our nonce option, or silence while plain IPv6 to
MN_WIRE answers) and carries the session as plain IPv6. With `fallback = false`
the application fails at once (tests/test_robustness.py
test_fallback_to_non_ilnp_peer_is_prompt).
"""

import json
import secrets
import struct
import time

import pytest

from ilnp_lab import pcap
from ilnp_lab.testbed import wait_for
from ilnp_test_util import CN_ID, CN_WIRE, MN_ID, MN_NID, MN_WIRE, Capture, ilnp_pair, probe


def non_ilnp_mn(bed, mode):
    cn, r1, mn, dcn, _ = ilnp_pair(bed, datapath=mode, on_mn=False)
    mn.ip("addr", "add", f"{MN_WIRE}/64", "dev", "eth0", "nodad")
    return cn, r1, mn, dcn


def curl_blob(bed, cn, mn, timeout=10):
    root = bed.workdir / "www"
    root.mkdir(exist_ok=True)
    body = secrets.token_bytes(300_000)
    (root / "blob").write_bytes(body)
    # the MN knows nothing of identifiers: it listens on all its addresses
    mn.spawn("python3", "-m", "http.server", "--bind", "::", "--directory", str(root), "8080")
    mn.wait_listening(8080)
    out = bed.workdir / "got"
    t0 = time.monotonic()
    r = cn.run("curl", "-sS", "-g", "--max-time", str(timeout), "-o", str(out), f"http://[{MN_ID}]:8080/blob",
               check=False, timeout=timeout + 5)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == body
    return time.monotonic() - t0


def peer(d):
    return next(p for p in d.ctl("peer", "show") if p["nid"] == MN_NID)


@pytest.mark.parametrize("mode", ["ebpf", "userspace"])
def test_curl_and_iperf3_to_a_non_ilnp_peer(bed, mode, tmp_path):
    cn, r1, mn, dcn = non_ilnp_mn(bed, mode)
    cap = Capture(r1, tmp_path / "r1.pcap", iface="eth-mn")
    elapsed = curl_blob(bed, cn, mn)
    # the Parameter Problem answers the first SYN; the SYN itself is re-sent plain
    assert elapsed < 1.0, f"curl took {elapsed:.2f}s"
    p = peer(dcn)
    assert p["state"] == "fallback" and p["non_ilnp"], p
    assert p["fallback"]["reason"] == "parameter_problem", p
    assert p["fallback"]["address"] == MN_WIRE, p
    assert p["fallback"]["pkts_out"] > 0 and p["fallback"]["pkts_in"] > 100, p

    srv = mn.spawn("iperf3", "-s", "-1", "-p", "5201")
    mn.wait_listening(5201)
    r = cn.run("iperf3", "-c", MN_ID, "-p", "5201", "-t", "2", "-J", check=False, timeout=30)
    srv.wait(timeout=10)
    assert r.returncode == 0, r.stdout[-1500:]
    assert json.loads(r.stdout)["end"]["sum_received"]["bytes"] > 1_000_000
    srv = mn.spawn("iperf3", "-s", "-1", "-p", "5202")
    mn.wait_listening(5202)
    r = cn.run("iperf3", "-c", MN_ID, "-p", "5202", "-u", "-b", "10M", "-l", "1200", "-t", "2", "-J",
               check=False, timeout=30)
    srv.wait(timeout=10)
    assert r.returncode == 0, r.stdout[-1500:]
    s = json.loads(r.stdout)["end"]["sum"]
    assert s["packets"] > 1000 and s["lost_percent"] < 2.0, s

    stats = dcn.stats()
    assert stats["core"]["fallback_started"] == 1, stats["core"]
    assert stats["core"]["fallback_pkts_in"] > 1000, stats["core"]
    assert stats["datapath"]["ingress_punt_plain_peer"] > 1000, stats["datapath"]
    # on the wire: after the one rejected packet, plain IPv6 between the two L64:NIDs
    pkts = pcap.read(cap.stop())
    with_nonce = [x for x in pkts if x.nonces]
    assert len(with_nonce) <= 1, [(str(x.src), str(x.dst)) for x in with_nonce]
    plain = [x for x in pkts if str(x.src) in (CN_WIRE, MN_WIRE) and str(x.dst) in (CN_WIRE, MN_WIRE)]
    assert len(plain) > 2000
    # ilnpd's translations carry ordinary IPv6 checksums (full addresses), as the MN
    # verifies them (its own packets may show offloaded, partial ones in a capture)
    ours = [x for x in plain if str(x.src) == CN_WIRE and x.proto in (6, 17) and not x.truncated and not x.nonces]
    assert ours and all(full_address_checksum_ok(x) for x in ours[:500])


def full_address_checksum_ok(p) -> bool:
    pseudo = p.src.packed + p.dst.packed + struct.pack("!IxxxB", len(p.l4), p.proto)
    return pcap.ones_sum(pseudo + p.l4) == 0xFFFF


def test_silent_peer_is_probed_then_reached_plain(bed):
    """The MN drops every packet with a Destination Options header (a middlebox
    would): no Parameter Problem, only silence. The CN's ilnpd probes MN_WIRE with
    a plain Echo Request at the application's first retransmission at least
    `fallback_probe_ms` (2 s) into the session and carries the session plain from
    the next one (measured: curl done in 3.1 s; fail-fast or ILNP only: never)."""
    cn, r1, mn, dcn = non_ilnp_mn(bed, "ebpf")
    mn.run("nft", "add table ip6 dropdst")
    mn.run("nft", "add chain ip6 dropdst in { type filter hook prerouting priority -300 ; }")
    mn.run("nft", "add rule ip6 dropdst in exthdr dst exists drop")
    elapsed = curl_blob(bed, cn, mn, timeout=20)
    assert 2.0 < elapsed < 10, f"curl took {elapsed:.2f}s"
    p = peer(dcn)
    assert p["state"] == "fallback" and p["fallback"]["reason"] == "no_answer", p
    assert dcn.stats()["core"]["fallback_probe_sent"] >= 1


# a receiver in the CN's application: binds the CN's identifier address, sends one
# datagram to the MN's identifier address (which opens the session, and with it the
# fallback), then only listens: the MN's datagrams are all that arrives
RECEIVER = r"""
import json, socket, sys, time
me, peer, port, secs, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.bind((me, port))
s.sendto(b"open", (peer, port))
s.settimeout(0.05)
got, end = set(), time.monotonic() + secs
while time.monotonic() < end:
    try:
        got.add(int.from_bytes(s.recv(64)[:4], "big"))
    except socket.timeout:
        pass
json.dump(sorted(got), open(out, "w"))
"""


@pytest.mark.parametrize("mode", ["ebpf", "userspace"])
def test_fallback_session_survives_a_kill9_of_the_cn(bed, mode, tmp_path):
    """A session carried as plain IPv6 is core state like an ILCC entry: after a crash
    and restart of the CN's ilnpd it goes on at once. The MN streams to the CN, which
    sends nothing after its first datagram, so nothing of the CN's would find the
    fallback out again: what is lost is what arrived while no ilnpd ran (the slow path
    carries every packet of a fallback session)."""
    cn, r1, mn, dcn = non_ilnp_mn(bed, mode)
    rate, secs = 200, 5
    recv = cn.spawn("python3", "-c", RECEIVER, CN_ID, MN_ID, "7400", str(secs + 3), str(tmp_path / "got.json"))
    wait_for(lambda: peer(dcn)["state"] == "fallback", timeout=5, what="the fallback to the MN")
    sender = probe(mn, MN_WIRE, CN_WIRE, 7400, secs, rate, tmp_path / "mn.json")
    time.sleep(2.0)
    t_kill = time.monotonic()
    dcn.kill()
    dcn.start()
    t_up = time.monotonic()
    p = peer(dcn)
    assert p["state"] == "fallback" and p["fallback"]["address"] == MN_WIRE, p
    sender.wait(timeout=30)
    recv.wait(timeout=30)
    sent = json.loads((tmp_path / "mn.json").read_text())["sent"]
    got = json.loads((tmp_path / "got.json").read_text())
    lost = sent - len(got)
    down = t_up - t_kill
    print(f"{mode}: sent {sent}, got {len(got)}, lost {lost}; ilnpd down {1000 * down:.0f} ms "
          f"({rate * down:.0f} datagrams' worth); the last 10 arrived: {set(range(sent - 10, sent)) <= set(got)}")
    assert set(range(sent - 10, sent)) <= set(got), "the stream did not resume after the restart"
    assert lost <= rate * down + 5, (lost, down)
    assert peer(dcn)["fallback"]["pkts_in"] > 0
    if mode != "ebpf":
        return
    # restarted with fallback configured off: the MN is not ILNPv6-capable, and the
    # earlier run's punt of its plain packets (pinned) goes
    dcn.kill()
    dcn.extra["fallback"] = False
    dcn.start()
    assert peer(dcn)["state"] == "non-ilnp"
    punted = dcn.stats()["datapath"]["ingress_punt_plain_peer"]
    mn.run("python3", "-c", "import socket; s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); "
           f"s.bind(('{MN_WIRE}', 7400)); [s.sendto(b'x', ('{CN_WIRE}', 7400)) for _ in range(50)]")
    assert dcn.stats()["datapath"]["ingress_punt_plain_peer"] == punted
    assert "punt of plain peer" in dcn.log.read_text()
