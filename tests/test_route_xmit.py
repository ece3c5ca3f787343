"""Translation at the route (issue #27) with ilnpd as users run it (eBPF data path,
`route_xmit = true`; the default is off, docs/architecture.md): a small packet of an established session is transmitted
once, on the uplink, not first on ilnp0 and then again on the uplink, and it arrives.

Every packet transmitted on ilnp0 runs ilnp0's tc egress program (`ilnp_egress`), including
the ones it redirects to an uplink, which ilnp0's own tx counters never see; a packet the
identifier route's lwt program (`ilnp_route_xmit`) sends is not transmitted on ilnp0 at all.
The kernel counts each program's runs (run_cnt, on while a BPF_ENABLE_STATS fd is held: no
sysctl is changed), so those counts are the transmits.

The claim (docs/architecture.md § Data path): every small packet of a session whose next hop
ilnp0's tc program has cached goes out at the route; the first packet after the cache entry's
1 s TTL or a route or neighbour event goes through ilnp0 once and refreshes it. So for N
datagrams sent in T seconds, ilnp_egress runs at most ceil(T) + 2 times (one refresh per TTL,
and two for neighbour events of the testbed's own links or a packet the ingress program hands
to ilnpd through ilnp0), ilnp_route_xmit runs N times and sends all but those it counts as
left to ilnp0, the uplink's tx_packets grow by at least N, and the
correspondent's socket gets all N. With `route_xmit` at its default, off, ilnp_egress
runs N times and nothing is sent at the route.
"""

import json
import math
import os

import pytest

from ilnp_lab import bpfstats
from ilnp_lab.testbed import Testbed
from ilnp_test_util import CN_ID, MN_ID, ilnp_pair

N = 500
PAYLOAD = 64

RECEIVER = r"""
import socket, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 6300))
s.settimeout(3)
n = 0
try:
    while True:
        data, addr = s.recvfrom(2048)
        if data == b"ping":
            s.sendto(b"pong", addr)
        else:
            n += 1
except socket.timeout:
    pass
open(sys.argv[2], "w").write(str(n))
"""

PING = r"""
import socket, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 0))
s.settimeout(0.5)
for _ in range(20):
    s.sendto(b"ping", (sys.argv[2], 6300))
    try:
        s.recvfrom(64)
        sys.exit(0)
    except socket.timeout:
        pass
sys.exit("no answer")
"""

BURST = r"""
import socket, sys, time
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 0))
t0 = time.monotonic()
for i in range(int(sys.argv[3])):
    s.sendto(bytes([i % 256]) * int(sys.argv[4]), (sys.argv[2], 6300))
    if i % 50 == 49:
        time.sleep(0.001)  # the receiver keeps up: no socket-buffer loss
print(time.monotonic() - t0)
"""


def tx_packets(node, dev):
    j = json.loads(node.ip("-s", "-j", "link", "show", "dev", dev).stdout)
    return j[0]["stats64"]["tx"]["packets"]


@pytest.mark.parametrize("route_xmit", [True, False], ids=["route-xmit", "tc-only"])
def test_small_packets_leave_with_one_transmit(tmp_path, route_xmit):
    extra = {"route_xmit": True} if route_xmit else {}
    with Testbed(workdir=tmp_path) as bed:
        cn, r1, mn, dcn, dmn = ilnp_pair(bed, extra=extra)
        route = mn.ip("-6", "route", "show", "dev", "ilnp0").stdout
        assert ("encap bpf xmit" in route) == route_xmit, route
        assert dmn.status().get("route_xmit", False) == route_xmit
        progs = bpfstats.daemon_progs(dmn.proc.pid)
        assert ("ilnp_route_xmit" in progs) == route_xmit, progs
        out = tmp_path / "count"
        rx = cn.spawn("python3", "-c", RECEIVER, CN_ID, str(out))
        cn.wait_listening_udp(6300)
        # the session first: its first packets may take the slow path, then ilnp0's program
        mn.run("python3", "-c", PING, MN_ID, CN_ID, timeout=30)
        stats_fd = bpfstats.enable_stats_fd()
        assert stats_fd is not None, "bpf(BPF_ENABLE_STATS) refused"
        try:
            s0, r0 = dmn.stats()["datapath"], bpfstats.prog_stats(progs)
            up_0 = tx_packets(mn, "eth0")
            secs = float(mn.run("python3", "-c", BURST, MN_ID, CN_ID, str(N), str(PAYLOAD), timeout=60).stdout)
            s1, r1_ = dmn.stats()["datapath"], bpfstats.prog_stats(progs)
            up_1 = tx_packets(mn, "eth0")
        finally:
            os.close(stats_fd)
        rx.wait(timeout=15)
        got = int(out.read_text())

        d = {k: s1[k] - s0[k] for k in s1 if s1[k] != s0[k]}
        runs = {k: r1_[k][1] - r0[k][1] for k in progs}
        on_uplink = up_1 - up_0
        print(f"route_xmit={route_xmit}: {N} datagrams of {PAYLOAD} bytes in {secs:.3f} s; program runs {runs}; "
              f"uplink tx +{on_uplink}; counters {d}")
        assert got == N, f"the CN's socket got {got} of {N}"
        assert d.get("egress_fast", 0) == N, d
        assert on_uplink >= N, (on_uplink, d)
        if route_xmit:
            margin = math.ceil(secs) + 2
            assert runs["ilnp_route_xmit"] == N, runs
            assert runs["ilnp_egress"] <= margin, (runs, margin, d)
            assert d.get("egress_route_xmit", 0) >= N - margin, d
            # every datagram the route program did not send it left to ilnp0, counted
            assert d.get("egress_route_xmit", 0) + d.get("egress_route_pass_nh", 0) == N, d
        else:
            assert N <= runs["ilnp_egress"] <= N + 2, runs  # + what ingress hands to ilnpd
            assert d.get("egress_route_xmit", 0) == 0, d
