"""The v4 path admits as IPv6 does (issue #42 items 3 and 8), on `v4_nat_topology`.

1. A spoofed TCP SYN flood to a closed port of the CN, once over IPv6 (ilnp-flood, random
   NIDs in 2001:db8:f::/64) and once over the v4 path (UDP/IPv4 to the CN's port with the
   outer source a victim's IPv4 address): the victim receives no more per attacker packet
   over the v4 path than over IPv6, and neither flood makes an ILCC entry.
2. A real NAT rebinding is validated while forged datagrams (wrong nonce) arrive from
   another port far faster than the MN's own; an attacker that once saw the MN's nonce
   replays its datagram from its own port and answers the challenge sent there: the MN,
   still on its old mapping, answers the confirmation sent over the old path, and the
   attacker does not win.
3. The MN's IPv4-only uplink has IPv6 disabled (disable_ipv6=1): a session over the v4 path
   is carried (the decapsulated packets are delivered through ilnp0).
"""

import json
import random
import socket
import struct
import time

from ilnp_lab import pcap
from ilnp_lab.daemon import Ilnpd, Peer, binary
from ilnp_lab.fixtures import CN_V4, v4_nat_topology
from ilnp_lab.services import radvd
from ilnp_lab.testbed import wait_for
from ilnp_test_util import CN_ID, CN_L64, CN_NID, CN_WIRE, MN_ID, MN_NID, Capture, Monitor
from test_ipv4_nat import CN_V4_LOC, L2, onto_v4, remote_of

SPOOF6 = "2001:db8:f::"
VICTIM4 = "203.0.113.77"
FLOOD, PPS, CLOSED = 2000, 1000, 9


def pair(bed, mn_hook=None, extra=None):
    """test_ipv4_nat.v4_pair with a hook run on the MN before its ilnpd starts."""
    t = v4_nat_topology(bed)
    mn = t["mn"]
    radvd(t["r2"], "eth-mn", "2001:db8:2::/64")
    wait_for(lambda: "2001:db8:2:" in mn.ip("-6", "addr", "show", "eth-r2").stdout, timeout=15, what="SLAAC on R2")
    if mn_hook:
        mn_hook(mn)
    extra = {"ipv4": {}, **(extra or {})}
    dcn = Ilnpd(t["cn"], ["eth0"], nid=CN_NID, peers=[Peer("mn", MN_NID, [(L2, 10)])], extra=dict(extra)).start()
    dmn = Ilnpd(mn, ["eth-r2", "eth-r3"], nid=MN_NID, peers=[Peer("cn", CN_NID, [(CN_L64, 10), (CN_V4_LOC, 30)])],
                extra=dict(extra)).start()
    return t, dcn, dmn


# R1 floods the CN over the v4 path: ILNPv6 TCP SYNs from random NIDs in UDP/IPv4 whose
# outer source is the victim (raw socket, IP_HDRINCL). argv: victim, cn_v4, cn_nid, count, pps
V4_FLOOD = r"""
import os, random, socket, struct, sys, time
victim, cn4, cn_nid, count, pps = sys.argv[1], sys.argv[2], bytes.fromhex(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
def csum(b):
    if len(b) % 2: b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b)); s = (s >> 16) + (s & 0xffff); s += s >> 16
    return ~s & 0xffff
def v4loc(a, port): return b"\x00\x04" + socket.inet_aton(a) + struct.pack("!H", port)
r = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
dst6 = v4loc(cn4, 6740) + cn_nid
t0 = time.monotonic()
for i in range(count):
    nid = bytes([2, 0, 0xff, 0xfe]) + os.urandom(4)
    src6 = v4loc(victim, 6740) + nid
    tcp = struct.pack("!HHIIBBHHH", random.randint(1024, 65535), 9, random.getrandbits(32), 0, 5 << 4, 2, 64240, 0, 0)
    # ILNPv6 checksum rule: the pseudo-header's addresses are the NIDs alone
    ph = bytes(8) + nid + bytes(8) + cn_nid + struct.pack("!IxxxB", len(tcp), 6)
    tcp = tcp[:16] + struct.pack("!H", csum(ph + tcp)) + tcp[18:]
    dopt = bytes([6, 1, 0x8b, 4]) + os.urandom(4) + bytes([1, 6, 0, 0, 0, 0, 0, 0])
    ip6 = struct.pack("!IHBB", 6 << 28, len(dopt) + len(tcp), 60, 64) + src6 + dst6 + dopt + tcp
    udp = struct.pack("!HHHH", 6740, 6740, 8 + len(ip6), 0) + ip6
    ip4 = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), i & 0xffff, 0, 64, 17, 0,
                      socket.inet_aton(victim), socket.inet_aton(cn4))
    ip4 = ip4[:10] + struct.pack("!H", csum(ip4)) + ip4[12:]
    r.sendto(ip4 + udp, (cn4, 0))
    time.sleep(max(0.0, t0 + (i + 1) / pps - time.monotonic()))
print(count)
"""


def count_to_victims(r1):
    out = r1.run("nft", "-j", "list", "table", "inet", "victim").stdout
    c = {}
    for x in json.loads(out)["nftables"]:
        if "rule" in x:
            c[x["rule"]["comment"]] = x["rule"]["expr"][-1]["counter"]["packets"]
    return c


def adm(d):
    return d.status()["admission"]


def test_a_spoofed_syn_flood_over_the_v4_path_reflects_no_more_than_over_ipv6_and_makes_no_state(bed):
    t, dcn, dmn = pair(bed)
    cn, r1 = t["cn"], t["r1"]
    # what the CN sends towards the victims, counted where it arrives at R1
    r1.run("nft", "add table inet victim")
    r1.run("nft", "add chain inet victim pre { type filter hook prerouting priority 0 ; }")
    r1.run("nft", f"add rule inet victim pre iifname eth-cn ip6 daddr {SPOOF6}/64 counter comment \"v6\"")
    r1.run("nft", f"add rule inet victim pre iifname eth-cn ip daddr {VICTIM4} counter comment \"v4\"")
    cn_nid = bytes.fromhex(CN_NID.replace(":", ""))
    a0 = adm(dcn)
    f = r1.run(binary("ilnp-flood"), "--dst", CN_WIRE, "--src-l64", SPOOF6, "--count", str(FLOOD), "--pps", str(PPS),
               "--syn", "--dport", str(CLOSED), timeout=60)
    time.sleep(3)  # the stack's last answers out; the budget refills (100 tokens/s, burst 100)
    a1 = adm(dcn)
    r1.run("python3", "-c", V4_FLOOD, VICTIM4, CN_V4, cn_nid.hex(), str(FLOOD), str(PPS), timeout=60)
    time.sleep(3)
    a2 = adm(dcn)
    got = count_to_victims(r1)
    dp = dcn.stats()["datapath"]
    core = dcn.stats()["core"]
    d6 = {k: a1["counters"].get(k, 0) - a0["counters"].get(k, 0) for k in a1["counters"]}
    d4 = {k: a2["counters"].get(k, 0) - a1["counters"].get(k, 0) for k in a2["counters"]}
    r6, r4 = got["v6"] / FLOOD, got["v4"] / FLOOD
    print(f"ipv6 flood: {json.loads(f.stdout)}; victim got {got['v6']} ({r6:.3f}x); admission delta {d6}")
    print(f"v4 flood: victim got {got['v4']} ({r4:.3f}x); admission delta {d4}; tiers {a2}")
    print("datapath", {k: v for k, v in dp.items() if v}, "core", {k: v for k, v in core.items() if "answer" in k
                                                                  or "embryonic" in k or "hello" in k})
    # the v4 path reflects no more than IPv6 (the same budget bounds both)
    assert got["v4"] <= got["v6"] * 1.1 + 5, (got, d6, d4)
    assert r4 < 0.5, got
    # no state for strangers, on either path
    for d in (d6, d4):
        assert d.get("admit_embryonic", 0) == 0 and d.get("admit_embryonic_evicted", 0) == 0, d
    assert a2["embryonic"] == 0 and a2["established"] == a0["established"], a2
    # counted: passed up statelessly by the fast path, the refusals within the budget
    assert dp["ingress_v4_no_socket"] >= 0.5 * FLOOD, dp
    assert d4["answer_rate_limited"] > 0 and d4["answer_sent"] > 0, d4


def echo_session_on_v4(t, dcn, dmn):
    """A UDP echo service on the CN's port 7, a session from the MN to it, moved onto the v4 path."""
    cn, mn = t["cn"], t["mn"]
    cn.spawn("python3", "-c", "import socket\ns = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)\n"
             f"s.bind(('{CN_ID}', 7))\nwhile True:\n    d, a = s.recvfrom(100)\n    s.sendto(d, a)")
    cn.wait_listening_udp(7)
    mn.run("sh", "-c", f"echo hi | socat -u - UDP6-SENDTO:[{CN_ID}]:7")
    wait_for(lambda: any(e["nid"] == CN_NID for e in dmn.ctl("ilcc", "show")), what="session")
    onto_v4(t, dcn, dmn)


def test_a_rebinding_is_validated_under_forgeries_and_a_nonce_seer_does_not_win(bed, tmp_path):
    t, dcn, dmn = pair(bed)
    cn, mn, r1, r3 = t["cn"], t["mn"], t["r1"], t["r3"]
    echo_session_on_v4(t, dcn, dmn)
    old_via = remote_of(dcn, MN_NID)["remote_locators"][0]["via"]
    cap = Capture(r1, tmp_path / "outside.pcap", iface="eth-r3", filt="udp dst port 6740", direction="in")
    mon = Monitor(dcn)
    # the MN: one datagram every 200 ms (its NAT mapping in use, slowly)
    ping = mn.spawn("python3", "-c", f"""
import socket, time
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); s.bind(("{MN_ID}", 0)); s.settimeout(0.2)
t0 = time.monotonic()
for i in range(60):
    s.sendto(str(i).encode(), ("{CN_ID}", 7))
    try: s.recv(100)
    except OSError: pass
    time.sleep(max(0.0, t0 + 0.2 * (i + 1) - time.monotonic()))
""")
    time.sleep(1)
    replay = pcap.read(cap.stop())[-1].raw
    v4_events = lambda: [(e["outcome"], e["via"]) for _, e in mon.of("v4_path")]  # noqa: E731
    # forged datagrams (wrong nonce) from another port, 400 a second, during what follows
    forged = bytearray(replay)
    forged[44] ^= 0xFF
    code = ("import socket, time\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "s.bind(('198.51.100.1', 5556))\n"
            f"for i in range(2400):\n    s.sendto(bytes.fromhex('{bytes(forged).hex()}'), ('{CN_V4}', 6740))\n"
            "    time.sleep(0.0025)\n")
    forger = r1.spawn("python3", "-c", code, stderr=open(tmp_path / "forger.err", "w"))
    time.sleep(0.5)
    # the NAT forgets its mapping and maps the MN's next datagram to a new range
    r3.run("nft", "flush chain ip nat post")
    r3.run("nft", "add rule ip nat post oifname eth-r1 meta l4proto udp masquerade to :20000-20099")
    r3.run("nft", "add rule ip nat post oifname eth-r1 masquerade")
    r3.run("conntrack", "-D", "-p", "udp", "--orig-port-src", "6740")
    ok = True
    try:
        wait_for(lambda: dcn.stats()["core"].get("v4_path_rebound", 0) >= 1, timeout=4, what="rebinding validated")
    except Exception:
        ok = False
    core = dcn.stats()["core"]
    print("under forgeries:", "validated" if ok else "NOT validated", v4_events(),
          {k: v for k, v in core.items() if k.startswith("v4_") or "challenge" in k or "nonce" in k}, (tmp_path / "forger.err").read_text()[-300:], dcn.stats()["datapath"])
    forger.kill()
    forger.wait()
    assert ok, "forgeries held the real rebinding back"
    assert core.get("bad_nonce", 0) > 100, core
    new_via = remote_of(dcn, MN_NID)["remote_locators"][0]["via"]
    assert new_via != old_via and 20000 <= int(new_via.rsplit(":", 1)[1]) <= 20099, (old_via, new_via)

    # an attacker that saw the MN's datagram (and so its nonce) replays it from its own
    # port and answers the Echo Request the CN sends there with that nonce
    nonce = replay[44:48]  # the nonce, after the Destination Options header's first 4 bytes
    attacker = r1.spawn("python3", "-c", ATTACKER, replay.hex(), CN_V4, nonce.hex(),
                        stdout=open(tmp_path / "attacker.txt", "w"))
    wait_for(lambda: any(via.endswith(":5555") for _, via in v4_events()), timeout=5, what="the attacker challenged")
    time.sleep(1.5)
    attacker.kill()
    attacker.wait()
    ping.wait(timeout=30)
    mon.stop()
    core = dcn.stats()["core"]
    print("nonce seer:", (tmp_path / "attacker.txt").read_text(), v4_events(),
          {k: v for k, v in core.items() if k.startswith("v4_")})
    assert "answered" in (tmp_path / "attacker.txt").read_text(), "the attacker never got to answer"
    assert ("rebound", "198.51.100.1:5555") not in v4_events(), v4_events()
    assert remote_of(dcn, MN_NID)["remote_locators"][0]["via"] == new_via, "the path moved to the attacker"
    assert core.get("v4_path_refused_old_path", 0) >= 1, core


# R1 as the attacker: replays a captured v4-path datagram from 198.51.100.1:5555 and answers
# every Echo Request that comes back with an Echo Reply carrying the nonce it saw.
ATTACKER = r"""
import socket, struct, sys
replay, cn4, nonce = bytes.fromhex(sys.argv[1]), sys.argv[2], bytes.fromhex(sys.argv[3])
def csum(b):
    if len(b) % 2: b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b)); s = (s >> 16) + (s & 0xffff); s += s >> 16
    return ~s & 0xffff
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("198.51.100.1", 5555)); s.settimeout(3)
s.sendto(replay, (cn4, 6740))
while True:
    try: d, a = s.recvfrom(2000)
    except OSError: break
    if len(d) < 40 + 16 + 8 or d[6] != 60 or d[40] != 58 or d[56] != 128:
        continue
    src, dst = d[24:40], d[8:24]          # swap: the reply from the MN's address to the CN
    icmp = bytearray(d[56:]); icmp[0] = 129; icmp[2:4] = b"\0\0"
    ph = src + dst + struct.pack("!I3xB", len(icmp), 58)
    icmp[2:4] = struct.pack("!H", csum(ph + bytes(icmp)))
    dopt = bytes([58, 1, 0x8b, 4]) + nonce + bytes([1, 6, 0, 0, 0, 0, 0, 0])
    pkt = struct.pack("!IHBB", 6 << 28, len(dopt) + len(icmp), 60, 64) + src + dst + dopt + bytes(icmp)
    s.sendto(pkt, a)
    print("answered", a, flush=True)
"""


def test_a_v4_path_session_over_an_uplink_with_ipv6_disabled(bed):
    def no_ipv6(mn):
        mn.sysctl("net.ipv6.conf.eth-r3.disable_ipv6=1")
    t, dcn, dmn = pair(bed, mn_hook=no_ipv6)
    cn, mn = t["cn"], t["mn"]
    echo_session_on_v4(t, dcn, dmn)
    disc0 = mn.nstat().get("Ip6InDiscards", 0)
    r = mn.run("python3", "-c", f"""
import socket, json
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); s.bind(("{MN_ID}", 0)); s.settimeout(0.5)
got = 0
for i in range(50):
    s.sendto(b"x%d" % i, ("{CN_ID}", 7))
    try: got += s.recv(100) == b"x%d" % i
    except OSError: pass
print(json.dumps({{"got": got}}))
""", timeout=60)
    got = json.loads(r.stdout)["got"]
    dp = dmn.stats()["datapath"]
    disc = mn.nstat().get("Ip6InDiscards", 0) - disc0
    print(f"disable_ipv6 uplink: {got}/50 echoes; Ip6InDiscards +{disc};",
          {k: v for k, v in dp.items() if "v4" in k and v})
    assert got >= 48, (got, disc, dp)
    assert dp["ingress_v4_via_ilnp0"] >= 48, dp
