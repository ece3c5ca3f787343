"""One nonce per direction from our first packet to a correspondent (issue #46 item 2).

The MN first hits a closed TCP and UDP port of the CN: the CN keeps no state and its stack's RST
and port unreachable go out statelessly (admission = "socket"), with a derived nonce. A moment
later an application on the CN opens a session to the MN. Every packet the CN sends the MN, the
stateless answers included, must carry one nonce: the Linux 4.9 prototype keeps the first nonce
it sees from a NID and drops every later packet with another, and the MN's ilnpd, which learned
the nonce from the RST, would take a second one for a restart of the CN and challenge it. Both
nonce sizes, as users run it (eBPF data path), the wire seen at the router.
"""

import json

import pytest

from ilnp_lab import pcap
from ilnp_test_util import CN_ID, CN_NID, MN_ID, Capture, ilnp_pair

CLOSED, PORT, COUNT = 7002, 6100, 5

# on the MN: a TCP connect to the CN's closed port (a RST), then a datagram to it on a
# connected socket (an ICMPv6 port unreachable); prints "refused refused" (ECONNREFUSED both
# times) or what happened instead
REFUSED = r"""
import socket, sys
res = []
t = socket.socket(socket.AF_INET6, socket.SOCK_STREAM); t.settimeout(5); t.bind((sys.argv[1], 0))
try:
    t.connect((sys.argv[2], int(sys.argv[3]))); res.append("connected")
except ConnectionRefusedError:
    res.append("refused")
except OSError as e:
    res.append(repr(e))
u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); u.settimeout(5)
u.bind((sys.argv[1], 0)); u.connect((sys.argv[2], int(sys.argv[3])))
try:
    u.send(b"x"); u.recv(64); res.append("answered")
except ConnectionRefusedError:
    res.append("refused")
except OSError as e:
    res.append(repr(e))
print(" ".join(res))
"""

# on the MN: receives COUNT datagrams (or gives up after 5 s); writes how many to PATH
RECEIVER = r"""
import socket, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); s.settimeout(5)
s.bind((sys.argv[1], int(sys.argv[2])))
n = 0
try:
    while n < int(sys.argv[3]):
        s.recv(2048); n += 1
except socket.timeout:
    pass
open(sys.argv[4], "w").write(str(n))
"""

SENDER = r"""
import socket, sys, time
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); s.bind((sys.argv[1], 0))
for i in range(int(sys.argv[4])):
    s.sendto(b"from the cn %d" % i, (sys.argv[2], int(sys.argv[3]))); time.sleep(0.05)
"""


@pytest.mark.parametrize("nonce_bits", [32, 96])
def test_a_stateless_answer_and_the_session_we_open_after_it_carry_one_nonce(bed, tmp_path, nonce_bits):
    cn, r1, mn, dcn, dmn = ilnp_pair(bed, nonce_bits=nonce_bits)
    cap = Capture(r1, tmp_path / "to-mn.pcap", iface="eth-mn", direction="out")
    before = dcn.status()["admission"]["counters"]
    got = mn.run("python3", "-c", REFUSED, MN_ID, CN_ID, str(CLOSED), timeout=20).stdout.strip()
    assert got == "refused refused", got
    counters = dcn.status()["admission"]
    assert counters["counters"]["answer_sent"] > before["answer_sent"], counters
    assert counters["established"] == 0 and counters["embryonic"] == 0, "the CN kept no state"
    # the CN's application opens a session to the MN
    out = tmp_path / "recv"
    rx = mn.spawn("python3", "-c", RECEIVER, MN_ID, str(PORT), str(COUNT), str(out))
    mn.wait_listening_udp(PORT)
    cn.run("python3", "-c", SENDER, CN_ID, MN_ID, str(PORT), str(COUNT), timeout=20)
    rx.wait(timeout=15)
    assert out.read_text() == str(COUNT), "every datagram of the CN's session reached the MN"
    from_cn = [p for p in pcap.read(cap.stop()) if p.nonces and (int(p.src) & (2**64 - 1)) == int(CN_NID.replace(":", ""), 16)]
    kinds = sorted({p.proto for p in from_cn})
    nonces = {p.nonces[0].hex() for p in from_cn}
    print(nonce_bits, "CN -> MN:", len(from_cn), "packets, protocols", kinds, "nonces", nonces)
    assert {6, 17, 58} <= set(kinds), f"the answers (RST, ICMPv6) and the session (UDP) all seen: {kinds}"
    assert all(len(p.nonces[0]) * 8 == nonce_bits for p in from_cn)
    assert len(nonces) == 1, f"one nonce from the CN's first packet on: {nonces}"
    core = dmn.stats()["core"]
    assert core.get("peer_challenge_sent", 0) == 0 and core.get("bad_nonce", 0) == 0, json.dumps(core)
