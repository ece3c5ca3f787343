"""Issue #14: Linux routers and GSO packets that carry an extension header.

1. The kernel behaviour itself, without ilnpd (bench/gso_exthdr.py): a forwarding
   namespace measures a GSO packet (host TSO, or GRO on its own ingress) as if its
   first extension header were the TCP header, so DestOpts header byte 12 acts as
   the TCP data offset. High nibble 0xf: every GSO packet gets Packet Too Big and
   nothing arrives; 0x7: forwarded. A kernel that changes fails this test.
2. ILNPv6 TCP through such a router with the hosts' default offloads (TSO on):
   our header keeps byte 12's top bit clear, so iperf3 moves data and the router
   sends no Packet Too Big, for both nonce lengths.
"""

import importlib.util
import json
from pathlib import Path

import pytest

from ilnp_test_util import MN_ID, ilnp_pair

_spec = importlib.util.spec_from_file_location(
    "gso_exthdr", Path(__file__).resolve().parents[1] / "bench" / "gso_exthdr.py")
gso_exthdr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gso_exthdr)


def test_router_reads_first_extension_header_as_tcp_for_gso_packets():
    cases = [c for c in gso_exthdr.CASES if c[0] in (
        "plain, TSO",
        "dstopts byte12=0xf0, TSO",
        "dstopts byte12=0x70, TSO",
        "dstopts byte12=0xf0, TSO off, router GRO",
        "dstopts byte12=0xf0, TSO off, no GRO",
    )]
    rows = {r["case"]: r for r in gso_exthdr.run(1.0, cases)}
    plain = rows["plain, TSO"]
    assert plain["bytes"] > 10_000_000 and plain["ptb"] == 0, rows
    # doff read as 15 * 4 = 60 > 16 + 32: every GSO packet "too big"
    bad = rows["dstopts byte12=0xf0, TSO"]
    assert bad["ptb"] >= 5 and bad["bytes"] < plain["bytes"] * 0.05, rows
    # doff 7 * 4 = 28 <= 16 + 32: forwarded like plain
    good = rows["dstopts byte12=0x70, TSO"]
    assert good["ptb"] == 0 and good["bytes"] > plain["bytes"] * 0.3, rows
    # GRO on the router's ingress builds GSO packets that meet the same check
    gro = rows["dstopts byte12=0xf0, TSO off, router GRO"]
    assert gro["ptb"] >= 5 and gro["bytes"] < plain["bytes"] * 0.05, rows
    # without GSO at the router (host segments, no GRO) the check is never made
    seg = rows["dstopts byte12=0xf0, TSO off, no GRO"]
    assert seg["ptb"] == 0 and seg["bytes"] > 10_000_000, rows


def router_ptb(r1) -> int:
    for line in r1.run("cat", "/proc/net/snmp6").stdout.splitlines():
        k, _, v = line.partition(" ")
        if k == "Icmp6OutPktTooBigs":
            return int(v)
    raise AssertionError("no Icmp6OutPktTooBigs")


@pytest.mark.parametrize("nonce_bits", [32, 96])
def test_ilnp_tcp_through_a_router_with_default_offloads(bed, nonce_bits):
    cn, r1, mn, dcn, dmn = ilnp_pair(bed, nonce_bits=nonce_bits)
    for h in (cn, mn):  # the hosts' default: TSO on (the lab turns it off)
        h.run("ethtool", "-K", "eth0", "tso", "on")
    ptb0 = router_ptb(r1)
    srv = mn.spawn("iperf3", "-s", "-1", "-B", MN_ID, "-p", "5201")
    mn.wait_listening(5201)
    r = cn.run("iperf3", "-c", MN_ID, "-p", "5201", "-t", "2", "-J", check=False, timeout=40)
    srv.wait(timeout=15)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    got = json.loads(r.stdout)["end"]["sum_received"]["bytes"]
    ptb = router_ptb(r1) - ptb0
    assert got > 0, r.stdout[-2000:]
    # with an 8-byte header (byte 12 = the TCP sequence number's top byte) the router
    # answered whole stretches of the sequence space with Packet Too Big
    assert ptb <= 2, f"{ptb} Packet Too Big from the router, {got} bytes moved"
