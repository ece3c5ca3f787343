"""Interoperation with the protocol authors' FreeBSD 14 ILNP6 (issue #25), against a
correspondent that behaves as that code does (`ilnp_lab.freebsd`, written from its
source: shared nonce, reflection, its LU and ack formats, the nonce after a Fragment
header, the truncated 96-bit reflection, the listener's nonce bug).

Topology: three_node, ilnpd on the CN (2001:db8:a::/64), the FreeBSD-behaviour node on
the "mn" namespace (2001:db8:b::/64, NID FB_NID). docs/interop.md has the matrix.
"""

import sys
import textwrap

import pytest

from ilnp_lab.addr import identifier_address
from ilnp_lab.daemon import Ilnpd, Peer
from ilnp_lab.freebsd import FreeBsdPeer
from ilnp_lab.testbed import wait_for
from ilnp_test_util import CN_ID, CN_L64, CN_NID, MN_L64, three_node

FB_NID = "0211:22ff:fe33:4455"  # the NID of FreeBSD's /etc/hosts example
FB_ID = identifier_address(FB_NID)
FB_L64_2 = "2001:0db8:000f:0000"  # where the FreeBSD node moves (R1 routes it)
CN_L64_2 = "2001:0db8:00a1:0000"  # where the CN moves
FB_PORT, CN_PORT = 7, 7000

ECHO = textwrap.dedent("""
    import socket, sys
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.bind((sys.argv[1], int(sys.argv[2])))
    while True:
        d, a = s.recvfrom(65535)
        print(len(d), d[:16].decode(errors="replace"), flush=True)
        if len(d) < 1000:
            s.sendto(d, a)
""")

ASK = textwrap.dedent("""
    import socket, sys
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.bind((sys.argv[1], int(sys.argv[2])))
    s.settimeout(3)
    s.sendto(sys.argv[5].encode(), (sys.argv[3], int(sys.argv[4])))
    print(s.recvfrom(65535)[0].decode())
""")


def core(d, name):
    return d.stats()["core"].get(name, 0)


def fast(d, name):
    return d.stats()["datapath"].get(name, 0)


def entry(d, nid):
    return next((e for e in d.ctl("ilcc", "show") if e["nid"] == nid), None)


def setup(bed, bits=32, extra=None, datapath="ebpf"):
    cn, r1, mn = three_node(bed)
    # where each side moves later
    r1.add_addr("eth-mn", "2001:db8:f::1/64")
    r1.add_addr("eth-cn", "2001:db8:a1::1/64")
    # a FreeBSD host uses one nonce both ways and reflects ours: say so (docs/interop.md)
    extra = {"peer_nonce": {"fbsd": "shared"}, **(extra or {})}
    dcn = Ilnpd(cn, ["eth0"], nid=CN_NID, nonce_bits=bits, datapath=datapath,
                peers=[Peer("fbsd", FB_NID, [(MN_L64, 10)])], extra=extra).start()
    fb = FreeBsdPeer(mn, "eth0", FB_NID, MN_L64, nonce_bits=bits).start()
    return cn, r1, mn, dcn, fb


def echo_server(cn, tmp_path, name="echo"):
    out = open(tmp_path / f"{name}.out", "w")
    p = cn.spawn(sys.executable, "-c", ECHO, CN_ID, str(CN_PORT), stdout=out)
    wait_for(lambda: cn.sh(f"ss -Hnul sport = :{CN_PORT}", check=False).stdout.strip(), what="echo server")
    return p, tmp_path / f"{name}.out"


def ask(node, src_id, dst, port, text, sport=40000):
    r = node.run(sys.executable, "-c", ASK, src_id, str(sport), dst, str(port), text, check=False, timeout=10)
    return r.stdout.strip()


def ping(node, dst, n=3):
    return node.run("ping", "-6", "-c", str(n), "-i", "0.2", "-W", "1", dst, check=False, timeout=15)


def assert_no_nonce_trouble(d):
    c = d.stats()["core"]
    for k in ("bad_nonce", "lu_bad_nonce", "icmp_bad_nonce", "peer_challenge_sent", "peer_restart_replaced", "malformed"):
        assert c.get(k, 0) == 0, (k, c)


@pytest.mark.parametrize("bits", [32, 96])
def test_freebsd_initiates(bed, tmp_path, bits):
    """FreeBSD opens the session: its data carry its socket's nonce, its LUs, LU acks
    and Echo Replies ours (it overwrote its entry with the first nonce it received).
    Before issue #25 ilnpd dropped those as lu_bad_nonce and took the Echo Reply for a
    restarted peer."""
    cn, r1, mn, dcn, fb = setup(bed, bits)
    try:
        echo_server(cn, tmp_path)
        fb.cmd("connect", nid=CN_NID, l64s=[CN_L64], sport=5555)
        fb.cmd("send", nid=CN_NID, sport=5555, dport=CN_PORT, payload="hello from freebsd")
        wait_for(lambda: fb.log("udp"), what="the CN's application answers")
        sock_nonce = fb.cmd("state")["sockets"][f"{CN_NID}/5555"]
        e = entry(dcn, FB_NID)
        # a shared-nonce peer: ilnpd adopts its nonce, one value both ways (issue #42:
        # before, ilnpd kept its own and accepted it reflected on anything FreeBSD sent)
        assert e["nonce_rx"] == sock_nonce == e["nonce_tx"], e
        # FreeBSD's entry took the first nonce it received (our hello): its own
        assert fb.cmd("state")["entries"][CN_NID]["nonce"] == sock_nonce

        # ping from the ilnpd host: FreeBSD reflects our nonce in the Echo Reply
        r = ping(cn, FB_ID)
        if bits == 32:
            assert r.returncode == 0, r.stdout + r.stderr
        else:
            # 96-bit: the reflected header is 8 bytes for a 14-byte option: refused, counted
            assert r.returncode != 0
            assert fast(dcn, "ingress_drop_nonce_overrun") >= 1, dcn.stats()["datapath"]
        # the session still carries FreeBSD's data afterwards (the reply was not taken
        # for a restart that replaces its nonce)
        fb.cmd("send", nid=CN_NID, sport=5555, dport=CN_PORT, payload="after ping")
        wait_for(lambda: len(fb.log("udp")) >= 2, what="data after the ping")
        assert entry(dcn, FB_NID)["nonce_rx"] == sock_nonce

        # ping from FreeBSD: its Echo Request carries its entry's nonce (= ours)
        fb.cmd("ping", nid=CN_NID)
        wait_for(lambda: fb.log("echo_reply"), what="the CN answers FreeBSD's ping")

        # FreeBSD moves: its LU carries our nonce; ilnpd learns the move and acks
        fb.add_locator(FB_L64_2)
        fb.cmd("move", l64s=[FB_L64_2])
        wait_for(lambda: FB_L64_2 in [r["l64"] for r in entry(dcn, FB_NID)["remote_locators"]], what="CN learns the move")
        if bits == 32:
            wait_for(lambda: fb.log("lu_ack"), what="FreeBSD's LU acked")
            assert all(a["accepted"] for a in fb.log("lu_ack"))
        fb.cmd("send", nid=CN_NID, sport=5555, dport=CN_PORT, payload="from the new locator")
        wait_for(lambda: len(fb.log("udp")) >= 3, what="data after FreeBSD's move")

        # the CN moves: ilnpd's LU (our nonce) is accepted by FreeBSD's <NID, nonce> lookup
        acked, overrun = core(dcn, "lu_acked"), fast(dcn, "ingress_drop_nonce_overrun")
        cn.add_addr("eth0", "2001:db8:a1::c/64")
        wait_for(lambda: any(l["accepted"] and CN_L64_2 in l["l64s"] for l in fb.log("lu")), what="FreeBSD accepts our LU")
        if bits == 32:
            wait_for(lambda: core(dcn, "lu_acked") > acked, what="FreeBSD's ack (our nonce reflected) accepted")
        else:
            # its ack is a 96-bit reflection: refused with its own reason, never taken for another
            wait_for(lambda: fast(dcn, "ingress_drop_nonce_overrun") > overrun, what="the truncated ack counted")
            assert core(dcn, "lu_acked") == acked
        assert_no_nonce_trouble(dcn)
    finally:
        fb.stop()
        dcn.stop()


@pytest.mark.parametrize("bits", [32, 96])
def test_ilnpd_initiates(bed, tmp_path, bits):
    """ilnpd opens the session: FreeBSD takes our nonce both ways."""
    cn, r1, mn, dcn, fb = setup(bed, bits)
    try:
        fb.cmd("listen", port=FB_PORT)
        assert ask(cn, CN_ID, FB_ID, FB_PORT, "hello freebsd") == "hello freebsd"
        e = entry(dcn, FB_NID)
        assert e["nonce_rx"] == e["nonce_tx"], e  # FreeBSD adopted ours
        assert fb.cmd("state")["entries"][CN_NID]["nonce"] == e["nonce_tx"]
        r = ping(cn, FB_ID)
        assert (r.returncode == 0) == (bits == 32), r.stdout
        fb.cmd("ping", nid=CN_NID)
        wait_for(lambda: fb.log("echo_reply"), what="the CN answers FreeBSD's ping")
        # LU both ways
        fb.add_locator(FB_L64_2)
        fb.cmd("move", l64s=[FB_L64_2])
        wait_for(lambda: FB_L64_2 in [r["l64"] for r in entry(dcn, FB_NID)["remote_locators"]], what="CN learns the move")
        assert ask(cn, CN_ID, FB_ID, FB_PORT, "after the move", sport=40001) == "after the move"
        cn.add_addr("eth0", "2001:db8:a1::c/64")
        wait_for(lambda: any(l["accepted"] and CN_L64_2 in l["l64s"] for l in fb.log("lu")), what="FreeBSD accepts our LU")
        if bits == 32:
            wait_for(lambda: core(dcn, "lu_acked") >= 1, what="FreeBSD's ack accepted")
        assert_no_nonce_trouble(dcn)
    finally:
        fb.stop()
        dcn.stop()


@pytest.mark.parametrize("datapath", ["ebpf", "userspace"])
def test_fragmented_datagram_from_freebsd(bed, tmp_path, datapath):
    """A 3000-byte UDP datagram from FreeBSD: IPv6 | Fragment | DestOpts(nonce) | UDP in
    the first fragment, no nonce in the others. Before issue #25 the fragments went to
    the kernel as plain IPv6 and the application never saw the datagram."""
    cn, r1, mn, dcn, fb = setup(bed, datapath=datapath)
    try:
        _, out = echo_server(cn, tmp_path)
        fb.cmd("connect", nid=CN_NID, l64s=[CN_L64], sport=5556)
        fb.cmd("send", nid=CN_NID, sport=5556, dport=CN_PORT, payload="first")
        wait_for(lambda: fb.log("udp"), what="session up")
        n = fb.cmd("frag", nid=CN_NID, sport=5556, dport=CN_PORT, payload="0123456789", size=3000)["fragments"]
        assert n == 3
        wait_for(lambda: "3000 0123456789012345" in out.read_text(), what="the whole datagram reaches the application")
        assert core(dcn, "fragment_nonce_after_frag") == 1 and core(dcn, "fragment_accepted") == 2, dcn.stats()["core"]
        if datapath == "ebpf":
            assert fast(dcn, "ingress_punt_fragment") == 3
        assert_no_nonce_trouble(dcn)
    finally:
        fb.stop()
        dcn.stop()


def test_two_ilnpd_hosts_and_one_freebsd_listener(bed, tmp_path):
    """FreeBSD's listener bug (`in6_pcb.c:1344-1360`, `tcp_syncache.c:912-927`): the
    listener is connected to the first host's entry, so the second host is sent the
    first host's nonce. ilnpd on the second host must neither crash nor lock the peer's
    data out: it learns the nonce FreeBSD's data carry towards it. What FreeBSD sends
    it with the *other* value (its entry's, = ours: Echo Replies, LUs) is refused and
    counted (issue #42: our own nonce, unasked, is what an observer of our direction
    could forge; docs/security.md), so that host learns FreeBSD's moves from its data."""
    cn, r1, mn = three_node(bed)
    c2 = bed.add_node("c2")
    bed.link(r1, "eth-c2", c2, "eth0")
    r1.add_addr("eth-c2", "2001:db8:c::1/64")
    c2.add_addr("eth0", "2001:db8:c::2/64")
    c2.add_route("default", "2001:db8:c::1")
    c2_nid = "0200:00ff:fe00:00c2"
    c2_id = identifier_address(c2_nid)
    peers = [Peer("fbsd", FB_NID, [(MN_L64, 10)])]
    shared = {"peer_nonce": {"fbsd": "shared"}}
    dcn = Ilnpd(cn, ["eth0"], nid=CN_NID, peers=peers, extra=shared).start()
    dc2 = Ilnpd(c2, ["eth0"], nid=c2_nid, peers=peers, extra=shared).start()
    fb = FreeBsdPeer(mn, "eth0", FB_NID, MN_L64).start()
    try:
        fb.cmd("listen", port=FB_PORT)
        assert ask(cn, CN_ID, FB_ID, FB_PORT, "first host") == "first host"
        assert ask(c2, c2_id, FB_ID, FB_PORT, "second host") == "second host"
        n_cn = entry(dcn, FB_NID)["nonce_tx"]
        e2 = entry(dc2, FB_NID)
        # the bug: the second host is sent the first host's nonce...
        replies = [l for l in fb.log("udp") if l["nid"] == c2_nid]
        assert replies and e2["nonce_rx"] == n_cn != e2["nonce_tx"], (e2, n_cn)
        # ... while FreeBSD's entry for it holds its own (adopted)
        assert fb.cmd("state")["entries"][c2_nid]["nonce"] == e2["nonce_tx"]
        # no lock-out of data
        assert ask(c2, c2_id, FB_ID, FB_PORT, "again", sport=40002) == "again"
        # the first host: ping, FreeBSD's move by LU, data after it
        assert ping(cn, FB_ID).returncode == 0
        # the second host's ping: FreeBSD reflects the second host's own nonce, which its
        # data to it never carry: refused, counted, no challenge, nothing replaced
        assert ping(c2, FB_ID).returncode != 0
        assert core(dc2, "reflected_nonce") >= 1, dc2.stats()["core"]
        r1.add_addr("eth-mn", "2001:db8:f::1/64")
        fb.add_locator(FB_L64_2)
        fb.cmd("move", l64s=[FB_L64_2])
        wait_for(lambda: FB_L64_2 in [r["l64"] for r in entry(dcn, FB_NID)["remote_locators"]], what="move learned")
        wait_for(lambda: core(dc2, "lu_reflected_nonce") >= 1, what="the second host refuses the LU with its own nonce")
        assert ask(c2, c2_id, FB_ID, FB_PORT, "after the move", sport=40003) == "after the move"
        assert ask(cn, CN_ID, FB_ID, FB_PORT, "first host again", sport=40004) == "first host again"
        # the second host learned the move from FreeBSD's data (its nonce, RFC 6744 §4)
        assert FB_L64_2 in [r["l64"] for r in entry(dc2, FB_NID)["remote_locators"]]
        assert entry(dc2, FB_NID)["nonce_rx"] == n_cn
        for d in (dcn, dc2):
            assert d.proc.poll() is None
            c = d.stats()["core"]
            for k in ("bad_nonce", "peer_challenge_sent", "peer_restart_replaced", "malformed"):
                assert c.get(k, 0) == 0, (k, c)
        assert_no_nonce_trouble(dcn)
    finally:
        fb.stop()
        dcn.stop()
        dc2.stop()
