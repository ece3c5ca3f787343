"""The adversary suite: `ilnp-lab run attacks` (experiments/attacks.toml; issue #42 item 7).

Every attack of docs/security.md run against two ilnpd hosts by a third host the attacker
owns, with the real peer silent, lossy and live:

    CN (the target: ilnpd, a UDP echo service) — R1 — MN (the real peer: ilnpd, a client)
                                                  |
                                                  +— X (the attacker: its own /64 and IPv4 network, raw sockets)
                                                  +— M4 (`v4-replay` only: the real peer on the v4 path)

`v4-replay` adds IPv4 to CN, R1, X and M4 (no NAT: M4's v4 path is its own address) and
`[ipv4]` to the CN's ilnpd; M4 runs ilnpd with `[ipv4]`, knows the CN only by its v4 path
and sends the CN's echo service 20 datagrams/s over UDP/IPv4. `slow-dns` runs the CN's DNS
resolver proxy on 127.0.0.1:53 and on the CN's address (so the attacker can reach it), with
a local NXDOMAIN server upstream; it does not touch a session, so it runs once, on the
first peer mode's testbed (its rows say `peer = once`).

The attacker knows what DNS and the wire give away: the MN's NID and locator, the CN's
identifier address and service port, and, as an observer of the CN → MN direction only,
the CN's nonce for the MN (read from the CN's `ilnpctl ilcc show`, which stands for a
capture of one packet on that direction: it is what such an observer sees).

Peer modes: `live` (the MN sends 20 datagrams/s and answers), `lossy` (30 % of the packets
to and from the MN's link dropped by nftables on R1), `silent` (the MN sent its last
datagram before the attack and its stack drops Echo Requests: a firewall, a hard handoff).

Per attack: attempts (attacker packets), successes (what the attack wanted happened: an
attacker's datagram reached the CN's application as the MN's, or the CN's entry for the MN
took the attacker's nonce or locator, or a local mutating request was carried out; must
be 0), the counters on the CN that named the attack packets (`counted`, the attack's own
reasons, from `ilnpctl stats`), ILCC entries created on the CN, and packets the CN sent
toward third parties (to the MN's locator: the challenge echoes) and toward the attacker,
each per attacker packet.

`v4-replay`: the attacker saw one of M4's datagrams (captured on R1 before the attack: it
knows M4's nonce, it has left the nonce's scope) and replays it from its own IPv4 address,
one new port per replay, answering every Echo Request the CN sends there with that nonce
(attempts: the replays and the answers). It wants the CN's v4 path for M4 (`via`) moved to
one of its ports (`v4_path_rebound`). docs/architecture.md § IPv4 and NAT promises that it
cannot while the peer answers on the old path, and says it can when the old path does not
answer within 4×srtt (the peer silent, or the old path losing the confirmation), as a real
rebinding would: a move is a success with the live peer and a documented exposure
(`exposures`) with the lossy and the silent one, unless the path was taken with no
validation at all (`v4_nat_detected`: the attacker's datagram taken for the first on the
path, which the document allows only after a restart): a success with any peer. The replayed datagrams are delivered (a
duplicate of M4's: `v4_path_unvalidated_rx`; the holder of a nonce can inject, the same
document): reported as `delivered_to_app`, not a success. Counted: the replays and the
answers as `v4_path_unvalidated_rx` (after a move the attacker's packets come from the path
and the peer's do not: no longer comparable); toward third parties: the confirmations sent
to M4 over the old path (ICMPv6 Echo Requests inside UDP/IPv4); toward the attacker: the
challenges to its ports (and, after a move, M4's traffic).

`slow-dns`: the attacker opens `dns_clients` TCP connections (more than the proxy's cap of
64) to the CN's proxy and sends each a length prefix and one byte of a message, then
nothing. While they are open, a local client on the CN sends a UDP query every 0.5 s and
one TCP query. Successes: a UDP query not answered within 1 s, a connection beyond the cap
still open after 1 s, a connection open longer than the 10 s deadline + 1.5 s, no TCP answer
once the attacker's connections are gone. The local TCP query made while the attacker holds
the 64 slots is refused (`legit_tcp_refused`): what the cap means (docs/security.md § Local
user), reported, not a success. Counted: `tcp_slow_closed` + `tcp_refused_full` (`ilnpctl
dns status`) less the local client's own refusal.
"""

from __future__ import annotations

import grp
import json
import os
import secrets
import struct
import subprocess
import sys
import time
from pathlib import Path

from . import experiment
from . import pcap
from .addr import CN_NID, MN_NID, address, identifier_address, lab_nid
from .capture import Capture
from .daemon import Ilnpd, Peer, binary
from .fixtures import CN_L64, CN_V4, MN_L64, three_node
from .testbed import Testbed, wait_for
from .wire import (DSTOPTS, ECHO_REQUEST, ICMPV6, LOCATOR_UPDATE, LU_ADVERT, LU_ENTRY, NONCE_OPT, PACKET_TOO_BIG, UDP, a16,
                   icmp6, ip6, udp)

X_L64 = "2001:0db8:00ee:0000"
X_NET, X_ADDR = "2001:db8:ee::1/64", "2001:db8:ee::e/64"
PORT = 7000
CLIENT_PPS = 20  # the MN's datagrams per second to the CN (live and lossy)
SETTLE_S = 1.2  # after an attack: a challenge's deadline (at most 1 s) passes, counters settle
MODES = ["live", "lossy", "silent"]
ATTACKS = ["hijack-new-nonce", "reflected-lu", "reflected-data", "forged-lu", "nonce-guess", "lu-flood",
           "echo-flood", "forged-icmp", "v4-replay", "group-mutation", "slow-dns"]
ONCE = {"slow-dns"}  # attacks on no session: run on the first peer mode's testbed only
# v4-replay: IPv4 on CN — R1 — {M4, X}; M4 is the real peer on the v4 path (its own NID)
M4_NID = lab_nid(0x14)
M4_V4, X_V4, V4_PORT = "198.51.100.4", "203.0.113.5", 6740
V4_REPLAY_GAP_S = 0.25  # between the attacker's replays (each from a new port)
V4_LINGER_S = 1.0  # the attacker answers challenges this long after its last replay
# slow-dns: the CN's proxy (ilnpd's MAX_TCP_CLIENTS, TCP_MESSAGE_DEADLINE) and its upstream
DNS_CAP, DNS_DEADLINE_S, DNS_UPSTREAM_PORT = 64, 10.0, 5353
# what names each attack's packets on the CN (`ilnpctl stats`: core counters and fast-path reasons)
COUNTED = {
    "hijack-new-nonce": ["bad_nonce"],
    "reflected-lu": ["lu_reflected_nonce"],
    "reflected-data": ["reflected_nonce"],
    "forged-lu": ["lu_bad_nonce"],
    "nonce-guess": ["bad_nonce"],
    "lu-flood": ["lu_bad_nonce"],
    "echo-flood": ["bad_nonce"],
    "forged-icmp": ["icmp_error_unverified"],
    "v4-replay": ["v4_path_unvalidated_rx"],
    "group-mutation": ["control_refused_not_root"],
    "slow-dns": ["tcp_slow_closed", "tcp_refused_full"],
}

# The CN's application: a UDP echo service that logs what reached it, one line a datagram.
ECHO = r"""
import socket, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
out = open(sys.argv[3], "a", buffering=1)
while True:
    d, a = s.recvfrom(2048)
    out.write(d[:32].decode(errors="replace") + "\n")
    s.sendto(d, a)
"""
# The MN's client: RATE datagrams/s "PREFIX N" ("real N") to the CN while the file STOP does not exist.
CLIENT = r"""
import os, socket, sys, time
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 0)); s.setblocking(False)
dst, rate, stop = (sys.argv[2], int(sys.argv[3])), float(sys.argv[4]), sys.argv[5]
prefix = (sys.argv[6] if len(sys.argv) > 6 else "real").encode()
n = 0
while not os.path.exists(stop):
    try:
        s.sendto(b"%s %d" % (prefix, n), dst)
    except OSError:
        pass
    n += 1
    try:
        while s.recv(2048): pass
    except OSError:
        pass
    time.sleep(1 / rate)
"""
# The attacker's sender: packets (hex, one a line) at RATE per second through a raw socket.
SENDER = r"""
import socket, sys, time
pkts = [bytes.fromhex(l) for l in open(sys.argv[1]) if l.strip()]
rate = float(sys.argv[2])
s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
t0 = time.monotonic()
for i, p in enumerate(pkts):
    if rate > 0:
        delay = t0 + i / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    dst = socket.inet_ntop(socket.AF_INET6, p[24:40])
    s.sendto(p, (dst, 0))
"""
# v4-replay, on X: the captured datagram (an IPv6 packet, the UDP payload) sent to the CN's
# v4 port from X_V4, one new port per replay, GAP s apart; every Echo Request that comes back
# to one of those ports is answered from it, with the nonce seen (its Destination Options
# header, hex). Prints what it did (JSON).
V4_REPLAYER = r"""
import json, select, socket, struct, sys, time
replay, cn4, dopt = bytes.fromhex(sys.argv[1]), sys.argv[2], bytes.fromhex(sys.argv[3])
x4, port0, n, gap, linger = sys.argv[4], int(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7]), float(sys.argv[8])
def csum(b):
    if len(b) % 2: b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b)); s = (s >> 16) + (s & 0xffff); s += s >> 16
    return ~s & 0xffff
socks, out = [], {"replays": 0, "received": 0, "echo_requests": 0, "answered": 0}
t0 = time.monotonic()
while True:
    now = time.monotonic()
    if len(socks) < n and now >= t0 + len(socks) * gap:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((x4, port0 + len(socks)))
        s.sendto(replay, (cn4, 6740)); socks.append(s); out["replays"] += 1
        continue
    if len(socks) == n and now >= t0 + (n - 1) * gap + linger:
        break
    for s in select.select(socks, [], [], 0.02)[0]:
        d, a = s.recvfrom(4000)
        out["received"] += 1
        if len(d) < 64 or d[0] >> 4 != 6 or d[6] != 60:
            continue
        off = 40 + (d[41] + 1) * 8  # after the Destination Options header
        if d[40] != 58 or len(d) < off + 8 or d[off] != 128:
            continue
        out["echo_requests"] += 1
        src, dst = d[24:40], d[8:24]  # the reply: from the peer's address to the CN
        icmp = bytearray(d[off:]); icmp[0] = 129; icmp[2:4] = b"\0\0"
        icmp[2:4] = struct.pack("!H", csum(src + dst + struct.pack("!I3xB", len(icmp), 58) + bytes(icmp)))
        s.sendto(struct.pack("!IHBB", 6 << 28, len(dopt) + len(icmp), 60, 64) + src + dst + dopt + bytes(icmp), a)
        out["answered"] += 1
print(json.dumps(out))
"""
# slow-dns, on X: N TCP connections to the proxy, each sent a length prefix and one byte of
# a 40-byte message, then nothing; when each was closed (s after its connect; null: open
# after HOLD s). Prints JSON.
SLOW_DNS = r"""
import json, select, socket, sys, time
host, n, hold = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
conns, closed = [], []
for i in range(n):
    t = time.monotonic()
    try:
        s = socket.create_connection((host, 53), timeout=2)
        s.sendall(b"\x00\x28\x12")
        s.setblocking(False)
        conns.append((s, t)); closed.append(None)
    except OSError:
        conns.append((None, t)); closed.append(0.0)
end = time.monotonic() + hold
while time.monotonic() < end and any(c is None for c in closed):
    live = {s: i for i, ((s, _), c) in enumerate(zip(conns, closed)) if c is None}
    for s in select.select(list(live), [], [], 0.05)[0]:
        try:
            d = s.recv(64)
        except OSError:
            d = b""
        if not d:
            i = live[s]
            closed[i] = round(time.monotonic() - conns[i][1], 3)
            s.close()
print(json.dumps({"closed_after_s": closed}))
"""
# slow-dns, on the CN: a local client of the proxy at 127.0.0.1:53 while the attack runs:
# one TCP query, then a UDP query every 0.5 s for DURATION s (each waits 1 s for its answer).
DNS_CLIENT = r"""
import json, socket, struct, sys, time
duration = float(sys.argv[1])
def query(i):
    return struct.pack("!HHHHHH", i, 0x0100, 1, 0, 0, 0) + b"\x05other\x03lab\x07example\x00" + struct.pack("!HH", 1, 1)
def tcp(i):
    try:
        s = socket.create_connection(("127.0.0.1", 53), timeout=1); s.settimeout(1)
        q = query(i); s.sendall(struct.pack("!H", len(q)) + q)
        h = s.recv(2)
        return len(h) == 2
    except OSError:
        return False
out = {"tcp_during": tcp(1), "udp_sent": 0, "udp_answered": 0, "udp_slowest_s": 0.0}
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(1)
t0 = time.monotonic()
while time.monotonic() < t0 + duration:
    t = time.monotonic(); out["udp_sent"] += 1
    u.sendto(query(100 + out["udp_sent"]), ("127.0.0.1", 53))
    try:
        u.recv(512); out["udp_answered"] += 1
        out["udp_slowest_s"] = max(out["udp_slowest_s"], round(time.monotonic() - t, 3))
    except OSError:
        pass
    time.sleep(max(0.0, t + 0.5 - time.monotonic()))
if len(sys.argv) > 2:
    while not __import__("os").path.exists(sys.argv[2]):
        time.sleep(0.05)
    out["tcp_after"] = tcp(2)
print(json.dumps(out))
"""
# slow-dns: the proxy's upstream on the CN, [::1]:PORT over UDP: NXDOMAIN to everything
UPSTREAM = r"""
import socket, struct, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.bind(("::1", int(sys.argv[1])))
print("ready", flush=True)
while True:
    q, a = s.recvfrom(4096)
    i = 12
    while i < len(q) and q[i]:
        i += 1 + q[i]
    s.sendto(q[:2] + struct.pack("!HHHHH", 0x8183, 1, 0, 0, 0) + q[12:i + 5], a)
"""


class Spec(experiment.Spec):
    """experiments/attacks.toml: [experiment] = the full form, [quick] overrides it."""
    KEYS = {"modes", "attacks", "attempts", "flood", "flood_pps", "hijack_interval_s", "dns_clients"}

    def check(self, name: str, c: dict) -> None:
        for k, known in (("modes", MODES), ("attacks", ATTACKS)):
            bad = [x for x in c[k] if x not in known]
            if bad or not c[k]:
                raise ValueError(f"{self.path}: [{name}] {k} {bad or c[k]}: unknown or empty "
                                 f"(known: {', '.join(known)})")
        if c["attempts"] < 1 or c["flood"] < 1 or c["flood_pps"] < 0 or c["hijack_interval_s"] <= 0:
            raise ValueError(f"{self.path}: [{name}]: attempts, flood >= 1, flood_pps >= 0, hijack_interval_s > 0")
        if c["dns_clients"] <= DNS_CAP:
            raise ValueError(f"{self.path}: [{name}]: dns_clients > {DNS_CAP} (the proxy's cap)")


OPTIONS: set[str] = set()


def describe(spec: Spec) -> str:
    return f"{spec.title}  (attacks: {', '.join(spec.full['attacks'])}; peer: {', '.join(spec.full['modes'])})"


def nonce_opt(nxt: int, nonce: bytes) -> bytes:
    """Our Destination Options header: the nonce option, padded to 8 bytes (PadN)."""
    body = bytes([NONCE_OPT, len(nonce)]) + nonce
    pad = (-(2 + len(body))) % 8
    if pad == 1:
        body += b"\0"
    elif pad:
        body += bytes([1, pad - 2]) + b"\0" * (pad - 2)
    return bytes([nxt, (2 + len(body)) // 8 - 1]) + body


def forged_udp(src: str, dst: str, nonce: bytes, payload: bytes) -> bytes:
    s, d = a16(src), a16(dst)
    return ip6(s, d, DSTOPTS, nonce_opt(UDP, nonce) + udp(s, d, 40000, PORT, payload))


def forged_lu(src: str, dst: str, nonce: bytes, l64s: list[str]) -> bytes:
    s, d = a16(src), a16(dst)
    body = bytes([len(l64s), LU_ADVERT, 0, 0]) + b"".join(
        LU_ENTRY.pack(int(l.replace(":", ""), 16), 10, 300) for l in l64s)
    return ip6(s, d, DSTOPTS, nonce_opt(ICMPV6, nonce) + icmp6(s, d, LOCATOR_UPDATE, 0, body))


def forged_echo(src: str, dst: str, nonce: bytes, seq: int) -> bytes:
    """An Echo Request claiming `src`, with a guessed nonce: a reply would go to the claimed peer."""
    s, d = a16(src), a16(dst)
    return ip6(s, d, DSTOPTS, nonce_opt(ICMPV6, nonce) + icmp6(s, d, ECHO_REQUEST, 0, struct.pack("!HH", 7, seq)))


def forged_icmp(src: str, cn_wire: str, mn_wire: str) -> bytes:
    """Packet Too Big from a 'router' at `src`, quoting a CN -> MN datagram with a guessed nonce."""
    quoted = forged_udp(cn_wire, mn_wire, secrets.token_bytes(4), b"q" * 32)
    s, d = a16(src), a16(cn_wire)
    return ip6(s, d, ICMPV6, icmp6(s, d, PACKET_TOO_BIG, 0, struct.pack("!I", 1280) + quoted))


def entry(d: Ilnpd, nid: str) -> dict | None:
    return next((e for e in d.ctl("ilcc", "show") if e["nid"] == nid), None)


def counters(d: Ilnpd) -> dict:
    s = d.stats()
    return {**s.get("datapath", {}), **s.get("core", {}), **s.get("control", {})}


class Bed:
    """One testbed: the topology, both daemons, the CN's echo service, the MN's client; with
    `v4`, M4 on the v4 path (and the datagram of its that the attacker saw); with `dns`, the
    CN's DNS proxy."""

    def __init__(self, bed: Testbed, mode: str, v4: bool = False, dns: bool = False):
        self.bed, self.mode = bed, mode
        self.cn, self.r1, self.mn = three_node(bed)
        self.x = bed.add_node("x")
        bed.link(self.r1, "eth-x", self.x, "eth0")
        self.r1.add_addr("eth-x", X_NET)
        self.x.add_addr("eth0", X_ADDR)
        self.x.add_route("default", "2001:db8:ee::1")
        self.cn_wire, self.mn_wire = address(CN_L64, CN_NID), address(MN_L64, MN_NID)
        self.x_claims_mn = address(X_L64, MN_NID)
        cn_extra, cn_peers = {}, [Peer("mn", MN_NID, [(MN_L64, 10)])]
        if v4:
            self.m4 = bed.add_node("m4")
            bed.link(self.r1, "eth-m4", self.m4, "eth0")
            self.r1.sysctl("net.ipv4.ip_forward=1")
            for node, iface, cidr, gw in ((self.cn, "eth0", f"{CN_V4}/24", "192.0.2.1"),
                                          (self.m4, "eth0", f"{M4_V4}/24", "198.51.100.1"),
                                          (self.x, "eth0", f"{X_V4}/24", "203.0.113.1")):
                node.ip("addr", "add", cidr, "dev", iface)
                node.ip("route", "add", "default", "via", gw)
            for iface, cidr in (("eth-cn", "192.0.2.1/24"), ("eth-m4", "198.51.100.1/24"), ("eth-x", "203.0.113.1/24")):
                self.r1.ip("addr", "add", cidr, "dev", iface)
            cn_extra["ipv4"] = {}
            cn_peers.append(Peer("m4", M4_NID, [(f"v4:{M4_V4}:{V4_PORT}", 30)]))
        if dns:
            upstream = self.cn.spawn(sys.executable, "-c", UPSTREAM, str(DNS_UPSTREAM_PORT), stdout=subprocess.PIPE)
            assert upstream.stdout.readline().strip() == b"ready"
            # on the CN's address too: the attacker is another host
            cn_extra["dns"] = {"upstream": f"[::1]:{DNS_UPSTREAM_PORT}", "timeout_ms": 500,
                               "listen": ["127.0.0.1:53", "[2001:db8:a::c]:53"]}
        self.dcn = Ilnpd(self.cn, ["eth0"], nid=CN_NID, peers=cn_peers, extra=cn_extra).start()
        self.dmn = Ilnpd(self.mn, ["eth0"], nid=MN_NID, peers=[Peer("cn", CN_NID, [(CN_L64, 10)])]).start()
        if v4:
            self.dm4 = Ilnpd(self.m4, ["eth0"], nid=M4_NID, extra={"ipv4": {}},
                             peers=[Peer("cn", CN_NID, [(f"v4:{CN_V4}:{V4_PORT}", 30)])]).start()
        # a folder of an earlier run may hold them
        self.app_log, self.stop = bed.workdir / "cn-app.log", bed.workdir / "client.stop"
        self.app_log.unlink(missing_ok=True)
        self.stop.unlink(missing_ok=True)
        self.cn.spawn(sys.executable, "-c", ECHO, identifier_address(CN_NID), str(PORT), str(self.app_log))
        self.cn.wait_listening_udp(PORT)
        self.mn.spawn(sys.executable, "-c", CLIENT, identifier_address(MN_NID), identifier_address(CN_NID),
                      str(PORT), str(CLIENT_PPS), str(self.stop))
        wait_for(lambda: entry(self.dcn, MN_NID) and entry(self.dcn, MN_NID).get("nonce_rx"),
                 what="the MN's session on the CN")
        wait_for(lambda: self.app_lines("real") >= 5, what="the MN's datagrams reach the CN's application")
        if v4:
            self.v4_setup()
        hosts = [self.mn] + ([self.m4] if v4 else [])
        if mode == "silent":
            self.stop.write_text("")
            for h in hosts:
                h.sh("nft add table inet atk; nft add chain inet atk c_in '{ type filter hook input priority 0; }'; "
                     "nft add rule inet atk c_in icmpv6 type echo-request drop")
        elif mode == "lossy":
            # on R1 (the MN's own egress is a BPF redirect, which netfilter's egress hook
            # does not see): 30 % of what goes to or comes from the MN's network (and M4's)
            self.r1.sh("nft add table inet loss; "
                       "nft add chain inet loss c_fw '{ type filter hook forward priority 10; }'" + "".join(
                           f"; nft add rule inet loss c_fw {d}ifname {i} numgen random mod 10 lt 3 counter drop"
                           for i in ["eth-mn"] + (["eth-m4"] if v4 else []) for d in ("o", "i")))
        # R1 counts what the CN sends toward the MN's network (ICMPv6: challenges) and the attacker's;
        # over IPv4: Echo Requests inside the v4 path toward M4 (UDP to its port, after the
        # Destination Options header of a 4-byte nonce: ICMPv6 type 128), all toward X
        self.r1.sh("nft add table inet cnt; nft add chain inet cnt c_fw '{ type filter hook forward priority 0; }'; "
                   "nft add counter inet cnt to_mn; nft add counter inet cnt to_x; "
                   "nft add counter inet cnt to_m4; nft add counter inet cnt to_x4; "
                   "nft add rule inet cnt c_fw iifname eth-cn ip6 daddr 2001:db8:b::/64 meta l4proto ipv6-icmp "
                   "counter name to_mn; "
                   "nft add rule inet cnt c_fw iifname eth-cn ip6 daddr 2001:db8:ee::/64 counter name to_x; "
                   f"nft add rule inet cnt c_fw iifname eth-cn ip daddr {M4_V4} udp dport {V4_PORT} "
                   "@th,384,8 58 @th,512,8 128 counter name to_m4; "
                   f"nft add rule inet cnt c_fw iifname eth-cn ip daddr {X_V4} counter name to_x4")
        self.before = entry(self.dcn, MN_NID)

    def v4_setup(self) -> None:
        """M4's client over the v4 path; one of its datagrams captured on R1 (the attacker's
        observation: M4's nonce and a datagram to replay)."""
        self.m4.spawn(sys.executable, "-c", CLIENT, identifier_address(M4_NID), identifier_address(CN_NID),
                      str(PORT), str(CLIENT_PPS), str(self.stop), "v4real")
        wait_for(lambda: (e := entry(self.dcn, M4_NID)) and e.get("nonce_rx")
                 and e["remote_locators"][0]["l64"].startswith("v4:"), what="M4's session on the CN's v4 path")
        wait_for(lambda: self.app_lines("v4real") >= 5, what="M4's datagrams reach the CN's application")
        cap = Capture(self.r1, self.bed.workdir / "m4.pcap", iface="eth-m4", direction="in",
                      filt=f"udp and src host {M4_V4} and dst port {V4_PORT}")
        time.sleep(0.3)
        seen = [p for p in pcap.read(cap.stop()) if p.proto == UDP and p.l4[8:].startswith(b"v4real")]
        if not seen:
            raise RuntimeError("no datagram of M4's on the v4 path captured on R1")
        self.v4_replay = seen[-1]

    def app_log_lines(self) -> list[str]:
        return self.app_log.read_text().splitlines() if self.app_log.exists() else []

    def app_lines(self, prefix: str) -> int:
        return sum(1 for line in self.app_log_lines() if line.startswith(prefix))

    def r1_counter(self, name: str, what: str = "packets") -> int:
        j = json.loads(self.r1.run("nft", "-j", "list", "counter", "inet", "cnt", name).stdout)
        return next(x["counter"][what] for x in j["nftables"] if "counter" in x)

    def cn_cpu_s(self) -> float:
        """The CN's ilnpd's CPU time so far, user + system (/proc/PID/stat fields 14-15)."""
        f = Path(f"/proc/{self.dcn.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

    def send(self, pkts: list[bytes], rate: float) -> None:
        f = self.bed.workdir / f"pkts-{secrets.token_hex(3)}"
        f.write_text("\n".join(p.hex() for p in pkts))
        self.x.run(sys.executable, "-c", SENDER, str(f), str(rate), timeout=600)
        f.unlink()


def attack(b: Bed, name: str, cfg: dict) -> dict:
    """Runs one attack on bed `b`; returns its row, with the CN's ilnpd's CPU time per 10^5
    attacker packets (the whole window: the real peer's traffic included) and the bytes
    toward the third party per attacker packet (issue #42's numbers, not asserted)."""
    third = "to_m4" if name == "v4-replay" else "to_mn"
    cpu0, bytes0 = b.cn_cpu_s(), b.r1_counter(third, "bytes")
    row = {"v4-replay": attack_v4_replay, "slow-dns": attack_slow_dns}.get(name, attack_ilnp)(b, name, cfg)
    n = row["attempts"]
    row["cpu_ms_per_1e5"] = round((b.cn_cpu_s() - cpu0) * 1e3 * 1e5 / n, 1) if n else 0
    row["third_party_bytes_ratio"] = round((b.r1_counter(third, "bytes") - bytes0) / n, 2) if n else 0
    return row


def attack_ilnp(b: Bed, name: str, cfg: dict) -> dict:
    """The attacks on the ILNPv6 session and the local ones (module docstring)."""
    cn_n0 = counters(b.dcn)
    entries0 = len(b.dcn.ctl("ilcc", "show"))
    to_mn0, to_x0 = b.r1_counter("to_mn"), b.r1_counter("to_x")
    app0, real0 = b.app_lines("attack"), b.app_lines("real")
    before = entry(b.dcn, MN_NID) or b.before  # this attack's baseline (an earlier one may have won)
    nonce_tx = bytes.fromhex(b.before["nonce_tx"])
    attempts, mutated = 0, 0
    t0 = time.monotonic()
    if name == "hijack-new-nonce":
        # one datagram per interval from the attacker's own locator, a new random nonce each
        pkts = [forged_udp(b.x_claims_mn, b.cn_wire, secrets.token_bytes(4), b"attack hijack %d" % i)
                for i in range(cfg["attempts"])]
        b.send(pkts, 1 / cfg["hijack_interval_s"])
        attempts = len(pkts)
    elif name == "reflected-lu":
        pkts = [forged_lu(b.x_claims_mn, b.cn_wire, nonce_tx, [X_L64]) for _ in range(cfg["attempts"])]
        b.send(pkts, 20)
        attempts = len(pkts)
    elif name == "reflected-data":
        pkts = [forged_udp(b.x_claims_mn, b.cn_wire, nonce_tx, b"attack reflected %d" % i)
                for i in range(cfg["attempts"])]
        b.send(pkts, 20)
        attempts = len(pkts)
    elif name == "forged-lu":
        pkts = [forged_lu(b.x_claims_mn, b.cn_wire, secrets.token_bytes(4), [X_L64]) for _ in range(cfg["attempts"])]
        b.send(pkts, 20)
        attempts = len(pkts)
    elif name == "nonce-guess":
        # from the MN's own locator (spoofed): a right guess would be the MN's packet
        pkts = [forged_udp(b.mn_wire, b.cn_wire, secrets.token_bytes(4), b"attack guess %d" % i)
                for i in range(cfg["flood"])]
        b.send(pkts, cfg["flood_pps"])
        attempts = len(pkts)
    elif name == "lu-flood":
        pkts = [forged_lu(b.mn_wire, b.cn_wire, secrets.token_bytes(4), [X_L64]) for _ in range(cfg["flood"])]
        b.send(pkts, cfg["flood_pps"])
        attempts = len(pkts)
    elif name == "echo-flood":
        # Echo Requests from the MN's own locator: each answered one would be a packet to the MN
        pkts = [forged_echo(b.mn_wire, b.cn_wire, secrets.token_bytes(4), i % 65536) for i in range(cfg["flood"])]
        b.send(pkts, cfg["flood_pps"])
        attempts = len(pkts)
    elif name == "forged-icmp":
        pkts = [forged_icmp("2001:db8:ee::e", b.cn_wire, b.mn_wire) for _ in range(cfg["attempts"])]
        b.send(pkts, 20)
        attempts = len(pkts)
    elif name == "group-mutation":
        # a local member of group ilnp (not root) asks to flush the ILCC and to add a peer
        gid = grp.getgrnam("ilnp").gr_gid
        for req in (["ilcc", "flush"], ["peer", "add", "evil", MN_NID, f"{X_L64}|1"]):
            attempts += 1
            argv = [str(binary("ilnpctl")), "-s", b.dcn.socket, *req]
            r = subprocess.run(["setpriv", "--reuid=65534", f"--regid={gid}", "--clear-groups", *argv],
                               capture_output=True, text=True, timeout=30)
            mutated += r.returncode == 0
    elapsed = time.monotonic() - t0
    time.sleep(SETTLE_S)
    after = entry(b.dcn, MN_NID)
    n1 = counters(b.dcn)
    had_x = any(r["l64"] == X_L64 for r in before.get("remote_locators", []))
    moved = after is None or after.get("nonce_rx") != before.get("nonce_rx") or (not had_x and any(
        r["l64"] == X_L64 for r in after.get("remote_locators", [])))
    delivered = b.app_lines("attack") - app0
    counted = sum(n1.get(k, 0) - cn_n0.get(k, 0) for k in COUNTED[name])
    to_mn, to_x = b.r1_counter("to_mn") - to_mn0, b.r1_counter("to_x") - to_x0
    return {
        "attack": name, "peer": b.mode, "attempts": attempts, "elapsed_s": round(elapsed, 2),
        "successes": int(delivered > 0) + int(moved) + mutated, "exposures": 0, "delivered_to_app": delivered,
        "session_moved": moved, "mutated": mutated, "counted": counted,
        "entries_created": len(b.dcn.ctl("ilcc", "show")) - entries0,
        "toward_third_parties": to_mn, "toward_attacker": to_x,
        "third_party_ratio": round(to_mn / attempts, 4) if attempts else 0,
        "challenges": n1.get("peer_challenge_sent", 0) - cn_n0.get("peer_challenge_sent", 0),
        # the real peer's datagrams that reached the CN's application meanwhile (live: 20/s)
        "real_peer_delivered": b.app_lines("real") - real0, "window_s": round(elapsed + SETTLE_S, 2),
    }


def v4_via(e: dict | None) -> str | None:
    """Where the CN sends M4's packets: the observed path (`via`), else the locator's own."""
    if not e or not e.get("remote_locators"):
        return None
    r = e["remote_locators"][0]
    return r.get("via") or r["l64"]


def attack_v4_replay(b: Bed, name: str, cfg: dict) -> dict:
    """The replay from another IPv4 port (module docstring)."""
    n0, entries0 = counters(b.dcn), len(b.dcn.ctl("ilcc", "show"))
    to_m4_0, to_x4_0 = b.r1_counter("to_m4"), b.r1_counter("to_x4")
    seen = b.v4_replay
    payload = seen.l4[8:40].decode(errors="replace")
    dup0, real0 = sum(1 for l in b.app_log_lines() if l == payload), b.app_lines("v4real")
    before = entry(b.dcn, M4_NID)
    hlen = (seen.raw[41] + 1) * 8  # its Destination Options header (the nonce), for the Echo Replies
    dopt = bytes([ICMPV6]) + seen.raw[41:40 + hlen]
    t0 = time.monotonic()
    r = b.x.run(sys.executable, "-c", V4_REPLAYER, seen.raw.hex(), CN_V4, dopt.hex(), X_V4, "5555",
                str(cfg["attempts"]), str(V4_REPLAY_GAP_S), str(V4_LINGER_S), timeout=120)
    elapsed = time.monotonic() - t0
    out = json.loads(r.stdout)
    time.sleep(SETTLE_S)
    after, n1 = entry(b.dcn, M4_NID), counters(b.dcn)
    d = {k: n1.get(k, 0) - n0.get(k, 0) for k in set(n1) | set(n0)
         if k.startswith("v4_") or k.startswith("ingress_punt_v4")}
    d = {k: v for k, v in sorted(d.items()) if v}
    moved = v4_via(after) != v4_via(before) or d.get("v4_path_rebound", 0) > 0
    attempts = out["replays"] + out["answered"]  # its packets: the replays and its Echo Replies
    delivered = sum(1 for l in b.app_log_lines() if l == payload) - dup0
    to_m4, to_x4 = b.r1_counter("to_m4") - to_m4_0, b.r1_counter("to_x4") - to_x4_0
    # the promise: no move while the peer answers on the old path; with the peer silent or
    # lossy a validated move is the documented exposure. A path taken with no validation at
    # all (the attacker's datagram taken for the first on the path: `v4_nat_detected`) is
    # promised nowhere but one restart wide: a success with any peer.
    unvalidated = d.get("v4_nat_detected", 0) > 0
    exposed = moved and b.mode != "live" and not unvalidated
    return {
        "attack": "v4-replay", "peer": b.mode, "attempts": attempts, "elapsed_s": round(elapsed, 2),
        "successes": int(moved and not exposed), "exposures": int(exposed), "taken_unvalidated": unvalidated,
        "delivered_to_app": delivered, "session_moved": moved, "mutated": 0,
        "counted": d.get("v4_path_unvalidated_rx", 0),
        "entries_created": len(b.dcn.ctl("ilcc", "show")) - entries0,
        "toward_third_parties": to_m4, "toward_attacker": to_x4,
        "third_party_ratio": round(to_m4 / attempts, 4) if attempts else 0,
        "challenges": d.get("v4_path_challenge_sent", 0),
        "real_peer_delivered": b.app_lines("v4real") - real0 - delivered, "window_s": round(elapsed + SETTLE_S, 2),
        "v4": {"via_before": v4_via(before), "via_after": v4_via(after), "attacker": out, "counters": d},
    }


def attack_slow_dns(b: Bed, name: str, cfg: dict) -> dict:
    """Slow TCP clients of the CN's DNS proxy (module docstring)."""
    def dns_counters() -> dict:
        return dict(b.dcn.ctl("dns", "status").get("counters", {}))
    c0, entries0 = dns_counters(), len(b.dcn.ctl("ilcc", "show"))
    to_mn0, to_x0 = b.r1_counter("to_mn"), b.r1_counter("to_x")
    done = b.bed.workdir / "slow-dns.done"
    done.unlink(missing_ok=True)
    n, hold = cfg["dns_clients"], DNS_DEADLINE_S + 2
    t0 = time.monotonic()
    atk = b.x.spawn(sys.executable, "-c", SLOW_DNS, "2001:db8:a::c", str(n), str(hold), stdout=subprocess.PIPE)
    time.sleep(1.0)  # its connections are open (70 take a few ms)
    # the CN's own client meanwhile: UDP queries while the attacker's connections are held
    legit = b.cn.spawn(sys.executable, "-c", DNS_CLIENT, str(DNS_DEADLINE_S - 2.5), str(done), stdout=subprocess.PIPE)
    closed = json.loads(atk.communicate(timeout=hold + 30)[0])["closed_after_s"]
    done.write_text("")
    got = json.loads(legit.communicate(timeout=30)[0])
    elapsed = time.monotonic() - t0
    time.sleep(SETTLE_S)
    c1 = dns_counters()
    d = {k: c1.get(k, 0) - c0.get(k, 0) for k in c1}
    held = [c for c in closed if c is None or c > 1.0]
    over_cap_held = max(0, len(held) - DNS_CAP)
    outlived = sum(1 for c in closed if c is None or c > DNS_DEADLINE_S + 1.5)
    udp_missed = got["udp_sent"] - got["udp_answered"]
    tcp_after_missed = int(not got.get("tcp_after", False))
    legit_refused = int(not got["tcp_during"])
    to_mn, to_x = b.r1_counter("to_mn") - to_mn0, b.r1_counter("to_x") - to_x0
    return {
        "attack": "slow-dns", "peer": "once", "attempts": n, "elapsed_s": round(elapsed, 2),
        "successes": udp_missed + over_cap_held + outlived + tcp_after_missed, "exposures": 0,
        "delivered_to_app": 0, "session_moved": False, "mutated": 0,
        "counted": d.get("tcp_slow_closed", 0) + d.get("tcp_refused_full", 0) - legit_refused,
        "entries_created": len(b.dcn.ctl("ilcc", "show")) - entries0,
        "toward_third_parties": to_mn, "toward_attacker": to_x,
        "third_party_ratio": round(to_mn / n, 4), "challenges": 0,
        "real_peer_delivered": 0, "window_s": round(elapsed + SETTLE_S, 2),
        "dns": {"udp_sent": got["udp_sent"], "udp_answered": got["udp_answered"],
                "udp_slowest_s": got["udp_slowest_s"], "legit_tcp_refused": legit_refused,
                "tcp_after_answered": not tcp_after_missed, "held": len(held), "over_cap_held": over_cap_held,
                "outlived_deadline": outlived,
                "held_closed_after_s": [min((c for c in held if c is not None), default=None),
                                        max((c for c in held if c is not None), default=None)],
                "counters": {k: v for k, v in d.items() if v}},
    }


def ensure_group() -> bool:
    """Group ilnp (ilnpd gives its control socket to it), made if the host has none: True then."""
    try:
        grp.getgrnam("ilnp")
        return False
    except KeyError:
        subprocess.run(["groupadd", "--system", "ilnp"], check=True)
        return True


def run_experiment(cfg: dict, out: Path) -> dict:
    made = ensure_group()
    try:
        return _run(cfg, out)
    finally:
        if made:
            subprocess.run(["groupdel", "ilnp"], check=False)


def _run(cfg: dict, out: Path) -> dict:
    rows, notes = [], []
    t0 = time.monotonic()
    tag = experiment.run_tag("ia")
    for i, mode in enumerate(cfg["modes"]):
        rdir = out / mode
        rdir.mkdir(parents=True, exist_ok=True)
        names = [a for a in cfg["attacks"] if i == 0 or a not in ONCE]
        with Testbed(workdir=rdir, tag=f"{tag}{i}") as bed:
            try:
                b = Bed(bed, mode, v4="v4-replay" in names, dns="slow-dns" in names)
                for name in names:
                    rows.append(attack(b, name, cfg))
                b.stop.write_text("")
            except Exception as e:  # recorded: a failed testbed is a failed run
                notes.append(f"{mode}: {e}")
    return {"config": cfg, "rows": rows, "notes": notes, "elapsed_s": round(time.monotonic() - t0, 1)}


def summarise(res: dict) -> dict:
    rows = res["rows"]
    return {"scenarios": len(rows), "successes": sum(r["successes"] for r in rows),
            "exposures": sum(r.get("exposures", 0) for r in rows),
            # after a documented move the attacker's packets come from the path: not comparable
            "uncounted": sum(max(0, r["attempts"] - r["counted"]) for r in rows if not r.get("exposures")),
            "entries_created": sum(max(0, r["entries_created"]) for r in rows),
            "max_third_party_ratio": max((r["third_party_ratio"] for r in rows), default=0)}


def report(out: Path, res: dict, meta: dict) -> Path:
    s = summarise(res)
    L = experiment.header(meta, f"{res['elapsed_s']:.0f} s")
    L += ["## Summary", "", f"{s['scenarios']} scenarios, **{s['successes']} successes** (must be 0), "
          f"{s['uncounted']} attack packets not counted under their reason, {s['entries_created']} ILCC entries "
          f"created, at most {s['max_third_party_ratio']} packets toward third parties per attacker packet; "
          f"{s['exposures']} documented exposures (below).", ""]
    L += ["## Results", "", "| attack | peer | attempts | successes | exposures | counted | entries | "
          "to third parties (per attacker packet; bytes per attacker packet) | to attacker | challenges | "
          "CN ilnpd CPU ms per 10^5 attacker packets | real peer's datagrams delivered |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        L.append(f"| {r['attack']} | {r['peer']} | {r['attempts']} | {r['successes']} | {r.get('exposures', 0)} | "
                 f"{r['counted']} | {r['entries_created']} | {r['toward_third_parties']} ({r['third_party_ratio']}; "
                 f"{r.get('third_party_bytes_ratio', '-')} B) | {r['toward_attacker']} | {r['challenges']} | "
                 f"{r.get('cpu_ms_per_1e5', '-')} | {r['real_peer_delivered']} in {r['window_s']} s |")
    L += ["", "## The two classic attacks in detail", ""]
    for r in res["rows"]:
        if "v4" in r:
            v, a = r["v4"], r["v4"]["attacker"]
            moved = ""
            if r["session_moved"]:
                why = "taken with no validation: " if r["taken_unvalidated"] else ""
                moved = f" (**moved**: {why}" + ("a success" if r["successes"] else "the documented exposure") + ")"
            L.append(f"* v4-replay, peer {r['peer']}: path {v['via_before']} → {v['via_after']}{moved}; "
                     f"{a['replays']} replays, {a['echo_requests']} Echo Requests to the attacker, {a['answered']} "
                     f"answered; {r['delivered_to_app']} replays delivered to the application (duplicates of the "
                     f"peer's datagram); CN: " + ", ".join(f"`{k}` {x}" for k, x in v["counters"].items()))
        if "dns" in r:
            x = r["dns"]
            lo, hi = x["held_closed_after_s"]
            when = f"closed after {lo}-{hi} s" if lo is not None else "none closed while the attacker waited"
            L.append(f"* slow-dns: {r['attempts']} slow connections, {x['held']} held ({when}), "
                     f"{x['over_cap_held']} beyond the cap held, {x['outlived_deadline']} outlived the deadline; "
                     f"the CN's local client: "
                     f"{x['udp_answered']} of {x['udp_sent']} UDP queries answered (slowest {x['udp_slowest_s']} s), "
                     f"its TCP query during the attack "
                     f"{'refused (the cap)' if x['legit_tcp_refused'] else 'answered'}, after it "
                     f"{'answered' if x['tcp_after_answered'] else '**not answered**'}; proxy: "
                     + ", ".join(f"`{k}` {v}" for k, v in x["counters"].items()))
    L += ["", "Exposures: what docs/architecture.md § IPv4 and NAT says an attacker that once saw the peer's "
          "nonce can do (take the v4 path when the old path does not answer within 4×srtt: the peer silent, or "
          "the confirmation lost), counted apart from the successes.",
          "", "Definitions: lab/ilnp_lab/attacks.py (module docstring); the threat model: docs/security.md."]
    if res["notes"]:
        L += ["", "## Notes", ""] + [f"* {n}" for n in res["notes"]]
    path = out / "report.md"
    path.write_text("\n".join(L) + "\n")
    return path


def run(spec: Spec, args, meta: dict) -> int:
    out = experiment.out_dir(spec, args)
    cfg = spec.cfg(args.quick)
    res = run_experiment(cfg, out)
    failed = len(res["notes"]) + sum(1 for r in res["rows"] if r["successes"])
    return experiment.finish(sys.modules[__name__], out, res, meta, args, failed)
