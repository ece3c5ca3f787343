"""Unmodified applications over ILNPv6 between two namespaced hosts (issue #2).

CN — R1 — MN; R1 is a plain Linux router without ilnpd. Each test runs with the
eBPF fast path and with the userspace reference data path.
"""

import json
import secrets

import pytest

from ilnp_lab import pcap
from ilnp_lab.testbed import wait_for
from ilnp_test_util import (CN_ID, CN_NID, MN_ID, MN_NID, CN_WIRE, MN_WIRE, Capture, ilnp_pair)

MODES = ["ebpf", "userspace"]


def iperf3(node_c, node_s, server_addr, *client_args, timeout=40):
    srv = node_s.spawn("iperf3", "-s", "-1", "-B", server_addr, "-p", "5201")
    node_s.wait_listening(5201)
    r = node_c.run("iperf3", "-c", server_addr, "-p", "5201", "-J", *client_args, check=False, timeout=timeout)
    srv.wait(timeout=10)
    assert r.returncode == 0, f"iperf3 failed: {r.stdout[-2000:]} {r.stderr[-2000:]}"
    return json.loads(r.stdout)


@pytest.mark.parametrize("mode", MODES)
def test_iperf3_tcp_and_udp(bed, mode):
    cn, r1, mn, dcn, dmn = ilnp_pair(bed, datapath=mode)
    res = iperf3(cn, mn, MN_ID, "-t", "2")
    received = res["end"]["sum_received"]["bytes"]
    assert received > 1_000_000, f"TCP moved only {received} bytes"

    res = iperf3(cn, mn, MN_ID, "-u", "-b", "20M", "-l", "1200", "-t", "2")
    s = res["end"]["sum"]
    assert s["packets"] > 1000
    assert s["lost_percent"] < 2.0, f"UDP lost {s['lost_percent']}%"

    # both daemons saw the session and it is one ILCC entry per side
    assert any(e["nid"] == MN_NID for e in dcn.ctl("ilcc", "show"))
    assert any(e["nid"] == CN_NID for e in dmn.ctl("ilcc", "show"))


@pytest.mark.parametrize("mode", MODES)
def test_curl_http_and_socat(bed, mode):
    cn, r1, mn, dcn, dmn = ilnp_pair(bed, datapath=mode)
    root = bed.workdir / "www"
    root.mkdir()
    body = secrets.token_bytes(300_000)
    (root / "blob").write_bytes(body)
    mn.spawn("python3", "-m", "http.server", "--bind", MN_ID, "--directory", str(root), "8080")
    out = bed.workdir / "got"

    def fetch():
        r = cn.run("curl", "-sS", "-g", "--max-time", "5", "-o", str(out), f"http://[{MN_ID}]:8080/blob", check=False)
        return r.returncode == 0

    wait_for(fetch, timeout=10, interval=0.3, what="curl over ILNPv6")
    assert out.read_bytes() == body

    # socat echo, initiated from MN this time (the other direction of session set-up)
    cn.spawn("socat", f"TCP6-LISTEN:7000,bind=[{CN_ID}],reuseaddr,fork", "EXEC:cat")
    cn.wait_listening(7000)
    msg = secrets.token_hex(2000)
    r = mn.run("sh", "-c", f"printf %s {msg} | socat -t 2 - TCP6:[{CN_ID}]:7000", timeout=20)
    assert r.stdout == msg


@pytest.mark.parametrize("mode", MODES)
def test_wire_format_on_router(bed, mode, tmp_path):
    """What R1 sees: L64:NID addresses, exactly one nonce, one constant nonce per
    direction (different each way), and RFC 6744 transport checksums."""
    cn, r1, mn, dcn, dmn = ilnp_pair(bed, datapath=mode)
    # finish checksums in software on the senders so the capture shows final values
    for n in (cn, mn):
        n.run("ethtool", "-K", "eth0", "tx", "off", check=False)
    cap = Capture(r1, tmp_path / "r1.pcap", iface="eth-mn")
    mn.spawn("socat", "-u", f"UDP6-RECV:6000,bind=[{MN_ID}]", "OPEN:/dev/null")
    mn.spawn("socat", f"TCP6-LISTEN:7001,bind=[{MN_ID}],reuseaddr,fork", "EXEC:cat")
    mn.wait_listening_udp(6000)
    mn.wait_listening(7001)
    for i in range(20):
        cn.run("sh", "-c", f"echo datagram-{i} | socat -u - UDP6-SENDTO:[{MN_ID}]:6000,sourceport=40000")
    cn.run("sh", "-c", f"head -c 200000 /dev/urandom | socat -t 2 - TCP6:[{MN_ID}]:7001 > /dev/null", timeout=20)
    path = cap.stop()

    pkts = [p for p in pcap.read(path) if p.nonces or p.proto in (pcap.TCP, pcap.UDP)]
    ilnp = [p for p in pkts if p.nonces]
    assert len(ilnp) >= 40, f"only {len(ilnp)} ILNPv6 packets captured"
    fwd = {bytes(p.nonces[0]) for p in ilnp if str(p.dst) == MN_WIRE}
    rev = {bytes(p.nonces[0]) for p in ilnp if str(p.dst) == CN_WIRE}
    checked = 0
    for p in pkts:
        # never an identifier address on the wire, never a TCP/UDP packet between the hosts without a nonce
        assert not str(p.src).startswith("fd69:6c6e:7000:"), p
        assert not str(p.dst).startswith("fd69:6c6e:7000:"), p
        assert {str(p.src), str(p.dst)} == {CN_WIRE, MN_WIRE}, f"unexpected addresses {p.src} -> {p.dst}"
        assert len(p.nonces) == 1, f"{len(p.nonces)} nonce options in {p.src}->{p.dst}"
        assert len(p.nonces[0]) == 4
        if p.proto in (pcap.TCP, pcap.UDP):
            # whatever the nonce header's length (16 bytes since the router fix): the
            # capture is whole (snaplen 0), so every TCP/UDP packet is checked
            assert not p.truncated and len(p.raw) == 40 + p.payload_len, f"cut capture {p.src}->{p.dst}"
            assert pcap.transport_checksum_ok(p), f"bad RFC 6744 checksum {p.src}->{p.dst} proto {p.proto}"
            checked += 1
    assert checked >= 40, f"only {checked} TCP/UDP packets had their checksum checked"
    assert len(fwd) == 1 and len(rev) == 1, f"nonces not constant per direction: {fwd} {rev}"
    assert fwd != rev, "the same nonce is used in both directions"

    # tshark decodes the same nonce values (an independent dissector)
    r = r1.run("tshark", "-r", path, "-Y", "ipv6.opt.ilnp_nonce", "-T", "fields",
               "-e", "ipv6.dst", "-e", "ipv6.opt.ilnp_nonce")
    seen = {}
    for line in r.stdout.splitlines():
        dst, nonce = line.split("\t")
        seen.setdefault(dst, set()).add(nonce.replace(":", ""))
    assert seen[MN_WIRE] == {fwd.pop().hex()}
    assert seen[CN_WIRE] == {rev.pop().hex()}


@pytest.mark.parametrize("mode", MODES)
def test_plain_ipv6_untouched(bed, mode, tmp_path):
    cn, r1, mn, dcn, dmn = ilnp_pair(bed, datapath=mode)
    cap = Capture(r1, tmp_path / "plain.pcap", iface="eth-mn")
    mn.spawn("socat", "TCP6-LISTEN:7002,bind=[2001:db8:b::d],reuseaddr,fork", "EXEC:cat")
    mn.wait_listening(7002)
    r = cn.run("sh", "-c", "echo plain | socat -t 2 - TCP6:[2001:db8:b::d]:7002")
    assert r.stdout.strip() == "plain"
    cn.run("ping", "-6", "-c", "2", "-i", "0.2", "2001:db8:b::d")
    path = cap.stop()
    pkts = pcap.read(path)
    plain = [p for p in pkts if str(p.dst) in ("2001:db8:b::d", "2001:db8:a::c")]
    assert len(plain) >= 6, [(str(p.src), str(p.dst)) for p in pkts][:10]
    assert all(not p.nonces for p in plain), "a nonce was added to plain IPv6"
