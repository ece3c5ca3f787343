"""The egress program's next-hop cache (issue #12 item 3) with ilnpd running: repeated
packets of a session take the cached route (`egress_nh_hit`), and a route change on the host
applies from the first packet after it (ilnpd's route watch writes a new generation for the
route event; without it the cached route would keep the packets on the fast path)."""

import time

from ilnp_lab.testbed import Testbed
from ilnp_test_util import CN_ID, MN_ID, ilnp_pair

MN_PREFIX = "2001:db8:b::/64"  # MN_L64

ECHO = r"""
import socket, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 6200))
while True:
    data, addr = s.recvfrom(2048)
    s.sendto(data, addr)
"""

SEND = r"""
import socket, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 0))
for i in range(int(sys.argv[3])):
    s.sendto(b"x" * 32, (sys.argv[2], 6200))
"""


def test_next_hop_cache_follows_a_route_change(tmp_path):
    with Testbed(workdir=tmp_path) as bed:
        cn, r1, mn, dcn, dmn = ilnp_pair(bed)
        mn.spawn("python3", "-c", ECHO, MN_ID)  # answers: the session gets both nonces

        def send(n):
            cn.run("python3", "-c", SEND, CN_ID, MN_ID, str(n), timeout=30)

        def dp():
            return dcn.stats()["datapath"]

        # the session: its first packets may take the slow path
        deadline = time.monotonic() + 10
        while dp()["egress_fast"] == 0:
            assert time.monotonic() < deadline, {k: v for k, v in dp().items() if v}
            send(5)
            time.sleep(0.2)
        s0 = dp()
        send(50)
        s1 = dp()
        assert s1["egress_fast"] - s0["egress_fast"] == 50, s1
        assert s1["egress_nh_hit"] - s0["egress_nh_hit"] >= 40, s1  # the rest: misses after events

        # a blackhole for MN's locator: the very next packets are punted (egress_punt_fib),
        # none leaves on the cached route
        cn.ip("-6", "route", "add", "blackhole", MN_PREFIX)
        send(5)
        s2 = dp()
        assert s2["egress_punt_fib"] - s1["egress_punt_fib"] == 5, s2
        assert s2["egress_fast"] == s1["egress_fast"], s2

        # gone again: back on the fast path, looked up once, then cached
        cn.ip("-6", "route", "del", "blackhole", MN_PREFIX)
        send(20)
        s3 = dp()
        assert s3["egress_fast"] - s2["egress_fast"] == 20, s3
        assert s3["egress_nh_miss"] > s2["egress_nh_miss"], s3
        assert s3["egress_nh_hit"] - s2["egress_nh_hit"] >= 15, s3
