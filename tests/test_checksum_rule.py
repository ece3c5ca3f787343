"""The TCP/UDP checksum rule per correspondent (issue #25 item 3): RFC 6741's
(locators zeroed, the default) or the full addresses (draft-bhatti-ilnp-tcp-udp-checksums,
equal to plain IPv6's). Offloads stay on; a full-address peer's packets take the slow path
(the fast path's constant adjustment is RFC 6741's): `egress_punt_csum_rule`,
`ingress_punt_csum_rule`.
"""

import json

from ilnp_lab import pcap
from ilnp_test_util import CN_ID, CN_WIRE, MN_ID, MN_WIRE, Capture, ilnp_pair

TCP, UDP = 6, 17


def iperf3(c, s, *args, check=True):
    srv = s.spawn("iperf3", "-s", "-1", "-B", MN_ID)
    s.wait_listening(5201)
    r = c.run("iperf3", "-c", MN_ID, "-J", "--connect-timeout", "2000", *args, check=False, timeout=30)
    srv.kill()
    if check:
        assert r.returncode == 0, r.stdout[-1500:]
    return json.loads(r.stdout) if r.stdout.strip() else {}


def test_both_ends_on_the_full_address_rule(bed, tmp_path):
    cn, r1, mn, dcn, dmn = ilnp_pair(bed, extra={"transport_checksum": "full-address"})
    cap = Capture(r1, tmp_path / "r1.pcap", iface="eth-mn", filt="ip6")
    tcp = iperf3(cn, mn, "-t", "2")
    assert tcp["end"]["sum_received"]["bytes"] > 1_000_000
    udp = iperf3(cn, mn, "-u", "-b", "10M", "-l", "1000", "-t", "1")["end"]["sum"]
    assert udp["packets"] > 500 and udp["lost_percent"] < 5.0, udp
    pkts = pcap.read(cap.stop())
    # on the wire, the checksums verify over the full addresses (as plain IPv6's would)
    data = [p for p in pkts if p.proto in (TCP, UDP) and str(p.src) == CN_WIRE and str(p.dst) == MN_WIRE and p.nonces]
    assert len(data) > 100
    assert all(pcap.transport_checksum_ok(p, full_address=True) for p in data[:200])
    for d in (dcn, dmn):
        fp = d.stats()["datapath"]
        assert fp.get("egress_punt_csum_rule", 0) > 0 and fp.get("ingress_punt_csum_rule", 0) > 0, fp
        assert d.stats()["core"].get("bad_nonce", 0) == 0


def test_ends_on_different_rules_carry_no_tcp(bed, tmp_path):
    """The failure the draft warns of: every TCP/UDP packet between them is dropped (by
    the receiving kernel's checksum check)."""
    cn, r1, mn, dcn, dmn = ilnp_pair(bed, on_mn=False)
    from ilnp_lab.daemon import Ilnpd, Peer
    from ilnp_test_util import CN_L64, CN_NID, MN_NID
    dmn = Ilnpd(mn, ["eth0"], nid=MN_NID, peers=[Peer("cn", CN_NID, [(CN_L64, 10)])],
                extra={"transport_checksum": "full-address"}).start()
    r = iperf3(cn, mn, "-t", "1", check=False)
    assert not r.get("end", {}).get("sum_received", {}).get("bytes"), "no TCP across a rule mismatch"
    # the same pair on one rule works (the per-peer setting overrides the default)
    dmn.stop()
    dmn = Ilnpd(mn, ["eth0"], nid=MN_NID, peers=[Peer("cn", CN_NID, [(CN_L64, 10)])],
                extra={"transport_checksum": "full-address", "peer_checksum": {"cn": "rfc6741"}}).start()
    dcn.ctl_raw("ilcc", "flush")
    tcp = iperf3(cn, mn, "-t", "1")
    assert tcp["end"]["sum_received"]["bytes"] > 500_000
