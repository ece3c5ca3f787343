"""Fallback, ICMPv6 error translation, bad input, clean shutdown, config errors (issue #2)."""

import json
import os
import struct
import time

import pytest

from ilnp_lab.daemon import Ilnpd, Peer, binary
from ilnp_lab.fixtures import three_node
from ilnp_lab.testbed import wait_for
from ilnp_test_util import (CN_ID, CN_L64, CN_NID, CN_WIRE, MN_ID, MN_L64, MN_NID, MN_WIRE, ilnp_pair)


def host_state(node):
    """What ilnpd must leave as it found it."""
    return {
        "addr": node.ip("-6", "-o", "addr", "show").stdout,
        "route": node.ip("-6", "route", "show", "table", "all").stdout,
        "link": node.ip("-o", "link", "show").stdout,
        "qdisc": node.run("tc", "qdisc", "show").stdout,
    }


@pytest.mark.parametrize("mode", ["ebpf", "userspace"])
def test_stop_leaves_host_as_it_was(bed, mode):
    cn, r1, mn = three_node(bed)
    before = host_state(cn)
    d = Ilnpd(cn, ["eth0"], nid=CN_NID, datapath=mode, peers=[Peer("mn", MN_NID, [(MN_L64, 10)])]).start()
    during = host_state(cn)
    assert during != before, "ilnpd changed nothing (no ilnp0, no locator address?)"
    assert "ilnp0" in during["link"]
    assert CN_WIRE in during["addr"] and CN_ID in during["addr"]
    assert d.stop() == 0, d.log.read_text()[-2000:]
    assert host_state(cn) == before
    assert not os.path.exists(d.socket)


def test_fallback_to_non_ilnp_peer_is_prompt(bed):
    """ilnpd on CN only, `fallback = false`: MN's kernel rejects the nonce with a
    Parameter Problem; the app's connect fails at once and ilnpctl reports a
    non-ILNP peer. (With fallback, the default: tests/test_fallback.py.)"""
    cn, r1, mn, dcn, _ = ilnp_pair(bed, on_mn=False, extra={"fallback": False})
    # MN has MN_WIRE as a plain address and a listener, but no ilnpd
    mn.ip("addr", "add", f"{MN_WIRE}/64", "dev", "eth0", "nodad")
    mn.spawn("socat", "TCP6-LISTEN:7000,reuseaddr,fork", "EXEC:cat")
    mn.wait_listening(7000)
    t0 = time.monotonic()
    r = cn.run("socat", "-T", "10", "-", f"TCP6:[{MN_ID}]:7000,connect-timeout=10", check=False, timeout=20)
    elapsed = time.monotonic() - t0
    assert r.returncode != 0
    assert "No route to host" in r.stderr or "unreachable" in r.stderr.lower(), r.stderr
    assert elapsed < 1.0, f"the application waited {elapsed:.2f}s for the failure"
    stats = dcn.stats()
    assert stats["core"].get("non_ilnp_peer", 0) >= 1, stats
    peers = dcn.ctl("peer", "show")
    assert any(p["nid"] == MN_NID and p.get("non_ilnp") for p in peers), peers


@pytest.mark.parametrize("mode", ["ebpf", "userspace"])
def test_packet_too_big_reaches_the_socket(bed, mode):
    """R1—MN has MTU 1400: R1 sends Packet Too Big to CN's wire address; the
    translated error (MTU 1400 - 16 for the nonce header, 16 bytes for either nonce
    size since the GSO fix: docs/architecture.md) must lower the PMTU of
    CN's identifier route so TCP goes on. (A 1280-byte path cannot carry ILNPv6
    TCP at all without fragmentation: the identifier route cannot go below the
    IPv6 minimum of 1280; see docs/architecture.md.)"""
    cn, r1, mn, dcn, dmn = ilnp_pair(bed, datapath=mode, mtu_mn=1400)
    srv = mn.spawn("iperf3", "-s", "-1", "-B", MN_ID)
    mn.wait_listening(5201)
    r = cn.run("iperf3", "-c", MN_ID, "-n", "2M", "-J", "--connect-timeout", "3000", check=False, timeout=30)
    srv.wait(timeout=10)
    assert r.returncode == 0, r.stdout[-1500:]
    assert json.loads(r.stdout)["end"]["sum_sent"]["bytes"] >= 2_000_000
    assert dcn.stats()["core"].get("icmp_error_translated", 0) >= 1
    route = cn.run("ip", "-6", "route", "get", MN_ID).stdout
    assert "mtu 1384" in route, route


def _nonce_udp(src, dst, nonces, payload=b"x" * 16, nonce_len_override=None):
    """A hand-built ILNPv6 UDP packet (bytes from the IPv6 header on)."""
    opts = b""
    for n in nonces:
        opts += bytes([0x8B, nonce_len_override if nonce_len_override is not None else len(n)]) + n
    hdr = bytes([17, 0]) + opts
    pad = (-len(hdr)) % 8
    if pad == 1:
        hdr += b"\0"
    elif pad:
        hdr += bytes([1, pad - 2]) + b"\0" * (pad - 2)
    hdr = bytes([17, len(hdr) // 8 - 1]) + hdr[2:]
    udp = struct.pack("!HHHH", 40000, 9, 8 + len(payload), 0) + payload
    body = hdr + udp
    import ipaddress
    ip6 = struct.pack("!IHBB", 6 << 28, len(body), 60, 64) + ipaddress.IPv6Address(src).packed + ipaddress.IPv6Address(dst).packed
    return ip6 + body


def _lu(src, dst, nonce, num, entries):
    import ipaddress
    body = struct.pack("!BBHBBH", 156, 0, 0, num, 1, 0)
    for l64, pref, life in entries:
        body += struct.pack("!QHH", l64, pref, life)
    dest = bytes([58, 0, 0x8B, 4]) + nonce
    ip6 = struct.pack("!IHBB", 6 << 28, len(dest) + len(body), 60, 64) + ipaddress.IPv6Address(src).packed + ipaddress.IPv6Address(dst).packed
    return ip6 + dest + body


def _send_raw(node, pkts):
    """Sends complete IPv6 packets from a node with an IPPROTO_RAW socket."""
    hexes = ",".join(repr(p.hex()) for p in pkts)
    script = (
        "import socket,ipaddress\n"
        "s=socket.socket(socket.AF_INET6,socket.SOCK_RAW,socket.IPPROTO_RAW)\n"
        f"for h in [{hexes}]:\n"
        "    b=bytes.fromhex(h); d=str(ipaddress.IPv6Address(b[24:40]))\n"
        "    s.sendto(b,(d,0))\n"
    )
    node.run("python3", "-c", script)


@pytest.mark.parametrize("mode", ["ebpf", "userspace"])
def test_bad_input_is_dropped_and_counted(bed, mode):
    cn, r1, mn, dcn, dmn = ilnp_pair(bed, datapath=mode)
    # establish the session so MN knows CN's nonce
    received = bed.workdir / "mn-received.txt"
    mn.spawn("socat", "-u", f"UDP6-RECV:9,bind=[{MN_ID}]", f"OPEN:{received},creat,append")
    mn.wait_listening_udp(9)
    cn.run("sh", "-c", f"echo hi | socat -u - UDP6-SENDTO:[{MN_ID}]:9")
    wait_for(lambda: any(e["nid"] == CN_NID for e in dmn.ctl("ilcc", "show")), what="MN learns CN")

    # the same reason as counted by the daemon's core and by the eBPF programs
    datapath_name = {"drop_multi_nonce": "ingress_drop_multi_nonce", "malformed": "ingress_drop_malformed"}

    def total(name):
        s = dmn.stats()
        return s["core"].get(name, 0) + s.get("datapath", {}).get(datapath_name.get(name, name), 0)

    before = {k: total(k) for k in ("drop_multi_nonce", "bad_nonce", "lu_bad_nonce", "lu_malformed", "malformed")}
    # R1 forges, spoofing CN's wire address
    forged = [
        _nonce_udp(CN_WIRE, MN_WIRE, [b"AAAA", b"BBBB"]),  # two nonce options
        _nonce_udp(CN_WIRE, MN_WIRE, [b"\x00\x00\x00\x00"]),  # wrong nonce from a known correspondent
        _lu(CN_WIRE, MN_WIRE, b"\x00\x00\x00\x00", 1, [(0x20010DB8000E0000, 10, 30)]),  # LU with a wrong nonce
        _lu(CN_WIRE, MN_WIRE, b"\x00\x00\x00\x00", 0, []),  # Num of Locs = 0
        _lu(CN_WIRE, MN_WIRE, b"\x00\x00\x00\x00", 3, [(0x20010DB8000E0000, 10, 30)]),  # num disagrees with length
        _nonce_udp(CN_WIRE, MN_WIRE, [b"\x01\x02\x03"]),  # 3-byte nonce: bad length
    ]
    _send_raw(r1, forged)
    time.sleep(0.5)
    after = {k: total(k) for k in before}
    assert after["drop_multi_nonce"] > before["drop_multi_nonce"], after
    assert after["bad_nonce"] > before["bad_nonce"], after
    assert after["lu_bad_nonce"] + after["lu_malformed"] >= before["lu_bad_nonce"] + before["lu_malformed"] + 3, after
    assert after["malformed"] > before["malformed"], after
    assert dmn.proc.poll() is None, "ilnpd died on bad input"
    # the session still works and CN's locator set is unchanged
    entry = [e for e in dmn.ctl("ilcc", "show") if e["nid"] == CN_NID][0]
    assert [l["l64"] for l in entry["remote_locators"]] == [CN_L64]
    cn.run("sh", "-c", f"echo again | socat -u - UDP6-SENDTO:[{MN_ID}]:9")
    wait_for(lambda: "again" in received.read_text(), timeout=5, what="MN receives the datagram sent after the forgeries")
    assert received.read_text().split() == ["hi", "again"], received.read_text()


def test_config_errors_name_the_problem(bed, tmp_path):
    cn, r1, mn = three_node(bed)

    def start(text):
        cfg = tmp_path / "bad.toml"
        cfg.write_text(text)
        return cn.run(binary("ilnpd"), "--config", str(cfg), check=False, timeout=15)

    sock = f'control_socket = "{tmp_path}/c.sock"\n'
    r = start(f'uplinks = ["eth0"]\n{sock}bogus_key = 1\n')
    assert r.returncode != 0 and "bogus_key" in r.stderr and "line 3" in r.stderr, r.stderr
    r = start(f'uplinks = ["nosuch0"]\n{sock}')
    assert r.returncode != 0 and "nosuch0" in r.stderr, r.stderr
    r = start(f'uplinks = ["eth0"]\n{sock}identifier_prefix = "2001:db8:a::/64"\n')
    assert r.returncode != 0 and "overlap" in r.stderr.lower(), r.stderr
    r = start(f'uplinks = ["eth0"]\n{sock}nonce_bits = 48\n')
    assert r.returncode != 0 and "nonce_bits" in r.stderr, r.stderr
    # nothing was left behind by the failed starts
    assert "ilnp0" not in cn.ip("-o", "link", "show").stdout
