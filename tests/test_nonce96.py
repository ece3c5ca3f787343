"""96-bit nonces end to end (issue #10): daemon to daemon, both ends 96-bit, then
mixed 32/96, and the path MTU with the 16-byte Destination Options header.

How the size is chosen (wire-facts §1/§6, docs/architecture.md "Decisions"): each
node puts its own configured size (`nonce_bits`, 32 by default) on what it sends
and accepts either size from its correspondents; the RFCs set no negotiation.
"""

import json

import pytest

from ilnp_lab import pcap
from ilnp_lab.daemon import Ilnpd, Peer
from ilnp_test_util import CN_ID, CN_L64, CN_NID, CN_WIRE, MN_ID, MN_L64, MN_NID, MN_WIRE, Capture, three_node

ICMPV6 = 58


def pair(bed, cn_bits, mn_bits, mtu_mn=None):
    cn, r1, mn = three_node(bed, mtu_mn=mtu_mn)
    dcn = Ilnpd(cn, ["eth0"], nid=CN_NID, nonce_bits=cn_bits, peers=[Peer("mn", MN_NID, [(MN_L64, 10)])]).start()
    dmn = Ilnpd(mn, ["eth0"], nid=MN_NID, nonce_bits=mn_bits, peers=[Peer("cn", CN_NID, [(CN_L64, 10)])]).start()
    return cn, r1, mn, dcn, dmn


def iperf3(c, s, *args):
    srv = s.spawn("iperf3", "-s", "-1", "-B", MN_ID)
    s.wait_listening(5201)
    r = c.run("iperf3", "-c", MN_ID, "-J", "--connect-timeout", "3000", *args, check=False, timeout=40)
    srv.wait(timeout=10)
    assert r.returncode == 0, r.stdout[-1500:]
    return json.loads(r.stdout)["end"]


def icmp_errors(pkts):
    """ICMPv6 errors (types 1-4) in a capture, as (type, code)."""
    out = []
    for p in pkts:
        if p.proto == ICMPV6 and p.l4 and p.l4[0] < 128:
            out.append((p.l4[0], p.l4[1]))
    return out


@pytest.mark.parametrize("bits", [(96, 96), (32, 96), (96, 32)], ids=["96-96", "32-96", "96-32"])
def test_tcp_and_udp_with_96_bit_nonces(bed, tmp_path, bits):
    cn_bits, mn_bits = bits
    cn, r1, mn, dcn, dmn = pair(bed, cn_bits, mn_bits)
    # ilnp0 leaves room for the node's own header: 16 bytes for either nonce size
    # (a 32-bit nonce is padded: ilnp_wire::destopts, tests/test_gso_exthdr.py)
    for node, b in ((cn, cn_bits), (mn, mn_bits)):
        assert "mtu 1484 " in node.ip("link", "show", "ilnp0").stdout
    cap = Capture(r1, tmp_path / "r1.pcap", iface="eth-mn", filt="ip6")
    tcp = iperf3(cn, mn, "-t", "2")  # default MSS: full-size segments
    assert tcp["sum_received"]["bytes"] > 2_000_000
    rev = iperf3(cn, mn, "-t", "2", "-R")  # the MN sends: its nonce size on full-size segments
    assert rev["sum_received"]["bytes"] > 2_000_000
    udp = iperf3(cn, mn, "-u", "-b", "20M", "-l", "1200", "-t", "2")["sum"]
    assert udp["packets"] > 1000 and udp["lost_percent"] < 2.0, udp
    pkts = pcap.read(cap.stop())
    fwd = [p for p in pkts if str(p.src) == CN_WIRE and str(p.dst) == MN_WIRE]
    back = [p for p in pkts if str(p.src) == MN_WIRE and str(p.dst) == CN_WIRE]
    assert len(fwd) > 1000 and len(back) > 1000
    # every packet carries exactly one nonce, of its sender's size
    assert {tuple(len(n) for n in p.nonces) for p in fwd} == {(cn_bits // 8,)}
    assert {tuple(len(n) for n in p.nonces) for p in back} == {(mn_bits // 8,)}
    # full-size segments: TCP's MSS is the smaller ilnp0 MTU of the two (less 60), and
    # the sender adds its own header: 16 bytes for either nonce size, so every
    # sender fills the 1500-byte link exactly; never more
    hdr = {32: 16, 96: 16}
    for ps, own, other in ((fwd, cn_bits, mn_bits), (back, mn_bits, cn_bits)):
        want = min(1500 - hdr[own], 1500 - hdr[other]) + hdr[own]
        assert max(40 + p.payload_len for p in ps) == want, (own, other)
    assert icmp_errors(pkts) == []
    for d in (dcn, dmn):
        core = d.stats()["core"]
        assert core.get("bad_nonce", 0) == 0 and core.get("malformed", 0) == 0, core


def test_96_bit_path_mtu_full_size_tcp(bed, tmp_path):
    """R1—MN has MTU 1400: R1 answers the first full-size 96-bit segments with
    Packet Too Big (1400); the translated error (1400 - 16) lowers the identifier
    route's PMTU and TCP goes on at once: no black hole, no other error."""
    cn, r1, mn, dcn, dmn = pair(bed, 96, 96, mtu_mn=1400)
    cap = Capture(r1, tmp_path / "r1.pcap", iface="eth-cn", filt="ip6")
    end = iperf3(cn, mn, "-n", "4M")
    assert end["sum_sent"]["bytes"] >= 4_000_000
    route = cn.run("ip", "-6", "route", "get", MN_ID).stdout
    assert "mtu 1384" in route, route
    errs = icmp_errors(pcap.read(cap.stop()))
    assert errs and set(errs) == {(2, 0)}, errs  # Packet Too Big only
    assert len(errs) <= 20, f"{len(errs)} PTBs: the PMTU did not stick"
    assert dcn.stats()["core"].get("icmp_error_translated", 0) >= 1
