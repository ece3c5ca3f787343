"""ILCC admission under random-NID floods (issue #11, seed 004), scaled to a 2-core machine.

T (the three_node CN) runs ilnpd with admission = "socket", a small established bound
(ilcc_max_entries = 8) and embryonic bound (64), and a hello budget of 20/s (burst 20).
B (the MN) holds a TCP session with T through the whole test. X (R1, a router on the
path) floods T with `ilnp-flood` (Rust, raw socket): spoofed packets from random NIDs on
2001:db8:f::/64, each with a nonce. C, a fourth host on R1 that never talked to T, must be
served during and right after the flood.

0. A legitimate ILNP peer (C) at a closed port gets the refusal plain IPv6 gives: its TCP
   connect fails with ECONNREFUSED at once, its connected UDP socket too (ICMPv6 port
   unreachable); T keeps no state; once the port opens C connects on the same session
   (T's entry takes the nonce the RST carried: no peer-restart challenge). Both data paths.
1. UDP to a closed port: no state at all (the fast path finds no socket and passes the
   packets up statelessly: `ingress_no_socket`), the kernel's port unreachables reach
   the spoofed sources only within the hello budget (`answer_sent`, the rest
   `answer_rate_limited`), B's session and the established count are untouched, C is
   served, and what T sent towards 2001:db8:f::/64 (counted by nftables on R1) stays
   within that budget.
2. TCP SYNs to T's open port: every SYN finds the listener, so each gets an embryonic
   entry, but their number never exceeds the embryonic bound, the established tier is
   untouched, the kernel's SYN cookies protect the listener, and C's connection succeeds.
"""

import json
import subprocess
import threading
import time

import pytest

from ilnp_lab.daemon import Ilnpd, Peer, binary
from ilnp_lab.testbed import wait_for
from ilnp_test_util import CN_ID, CN_L64, CN_NID, CN_WIRE, MN_NID, three_node

C_NID = "0200:00ff:fe00:000e"
SPOOF = "2001:db8:f::"
TCP_PORT, UDP_PORT, CLOSED_PORT = 5001, 7000, 9
T_CFG = {"ilcc_max_entries": 8, "ilcc_embryonic_max": 64, "hello_rate_pps": 20, "hello_burst": 20}

# TCP and UDP echo on every address of T's namespace (threads; standard library only)
ECHO = r"""
import socket, sys, threading
tport, uport = int(sys.argv[1]), int(sys.argv[2])
def tcp_conn(c):
    with c:
        while True:
            d = c.recv(4096)
            if not d:
                return
            c.sendall(d)
def tcp():
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("::", tport)); s.listen(128)
    while True:
        c, _ = s.accept()
        threading.Thread(target=tcp_conn, args=(c,), daemon=True).start()
threading.Thread(target=tcp, daemon=True).start()
u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
u.bind(("::", uport))
while True:
    d, a = u.recvfrom(2048)
    u.sendto(d, a)
"""

# B's session: one 8-byte message every 20 ms for SECS s over one TCP connection; each
# echo's round trip recorded. Writes {"sent", "echoed", "max_rtt_ms"}.
SESSION = r"""
import json, socket, sys, time
dst, port, secs, out = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
s = socket.create_connection((dst, port), timeout=5)
s.settimeout(5)
sent = echoed = 0; worst = 0.0
t0 = time.monotonic()
open(out + ".up", "w").close()
while time.monotonic() - t0 < secs:
    t = time.monotonic()
    s.sendall(sent.to_bytes(8, "big")); sent += 1
    got = b""
    try:
        while len(got) < 8:
            d = s.recv(8 - len(got))
            if not d:
                break
            got += d
    except OSError:
        break
    if len(got) == 8:
        echoed += 1; worst = max(worst, time.monotonic() - t)
    time.sleep(max(0.0, 0.02 - (time.monotonic() - t)))
json.dump({"sent": sent, "echoed": echoed, "max_rtt_ms": worst * 1000}, open(out, "w"))
"""

# C: (if TCP) one TCP connection (10 s to connect: SYN retransmissions included), then N
# UDP request/echo exchanges (1 s timeout each). Prints {"tcp_ok", "tcp_s", "udp_ok"}.
CLIENT = r"""
import json, socket, sys, time
dst, uport, n, tport = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
res = {}
if tport:
    t = time.monotonic()
    try:
        s = socket.create_connection((dst, tport), timeout=10)
        s.settimeout(5); s.sendall(b"hello-tcp")
        res["tcp_ok"] = s.recv(64) == b"hello-tcp"
    except OSError as e:
        res["tcp_ok"] = False; res["error"] = str(e)
    res["tcp_s"] = time.monotonic() - t
u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); u.settimeout(1.0)
ok = 0
for i in range(n):
    u.sendto(b"c%d" % i, (dst, uport))
    try:
        d, _ = u.recvfrom(64)
        ok += d == b"c%d" % i
    except socket.timeout:
        pass
res["udp_ok"] = ok
print(json.dumps(res))
"""


def topology(bed, datapath="ebpf"):
    t, r1, b = three_node(bed)
    c = bed.add_node("c")
    bed.link(c, "eth0", r1, "eth-c")
    r1.add_addr("eth-c", "2001:db8:c::1/64")
    c.add_addr("eth0", "2001:db8:c::e/64")
    c.add_route("default", "2001:db8:c::1")
    # what T sends towards the spoofed sources, counted where it arrives at R1
    r1.run("nft", "add table inet adm")
    r1.run("nft", "add chain inet adm pre { type filter hook prerouting priority 0 ; }")
    r1.run("nft", f"add rule inet adm pre iifname eth-cn ip6 daddr {SPOOF}/64 counter")
    dt = Ilnpd(t, ["eth0"], nid=CN_NID, datapath=datapath, extra=dict(T_CFG)).start()
    db = Ilnpd(b, ["eth0"], nid=MN_NID, datapath=datapath, peers=[Peer("t", CN_NID, [(CN_L64, 10)])]).start()
    dc = Ilnpd(c, ["eth0"], nid=C_NID, datapath=datapath, peers=[Peer("t", CN_NID, [(CN_L64, 10)])]).start()
    t.spawn("python3", "-c", ECHO, str(TCP_PORT), str(UDP_PORT))
    # listening before anyone connects: a SYN that arrives first is refused at once now
    # (a RST, as plain IPv6 gives), no longer silently dropped and retransmitted
    listening = lambda: all(t.run("ss", "-Hn", f"-l{p}", "sport", "=", f":{port}").stdout.strip()
                            for p, port in (("t", TCP_PORT), ("u", UDP_PORT)))
    wait_for(listening, timeout=10, what="T's echo server")
    return t, r1, b, c, dt, db, dc


def to_spoofed(r1) -> int:
    out = r1.run("nft", "-j", "list", "table", "inet", "adm").stdout
    return sum(x["rule"]["expr"][-1]["counter"]["packets"] for x in json.loads(out)["nftables"] if "rule" in x)


def adm(d) -> dict:
    return d.status()["admission"]


def start_session(b, tmp_path, secs):
    out = tmp_path / "session.json"
    p = b.spawn("python3", "-c", SESSION, CN_ID, str(TCP_PORT), str(secs), str(out))
    wait_for(lambda: (tmp_path / "session.json.up").exists(), timeout=10, what="B's TCP session")
    return p, out


def flood(r1, count, pps, *extra):
    return r1.spawn(binary("ilnp-flood"), "--dst", CN_WIRE, "--src-l64", SPOOF, "--count", str(count),
                    "--pps", str(pps), *extra, stdout=subprocess.PIPE)


def client(c, n, tcp_port=0) -> dict:
    r = c.run("python3", "-c", CLIENT, CN_ID, str(UDP_PORT), str(n), str(tcp_port), timeout=60)
    return json.loads(r.stdout)


# C at closed ports of T: a TCP connect, then a datagram on a connected UDP socket.
# Prints {"tcp", "tcp_s", "udp", "udp_s"}: "refused" is ECONNREFUSED.
REFUSED = r"""
import json, socket, sys, time
dst, tport, uport = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
res = {}
t = time.monotonic()
try:
    socket.create_connection((dst, tport), timeout=5).close(); res["tcp"] = "connected"
except ConnectionRefusedError:
    res["tcp"] = "refused"
except OSError as e:
    res["tcp"] = repr(e)
res["tcp_s"] = time.monotonic() - t
u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); u.settimeout(5); u.connect((dst, uport))
t = time.monotonic()
try:
    u.send(b"x"); u.recv(64); res["udp"] = "answered"
except ConnectionRefusedError:
    res["udp"] = "refused"
except OSError as e:
    res["udp"] = repr(e)
res["udp_s"] = time.monotonic() - t
print(json.dumps(res))
"""

# T opens the closed TCP port (a one-shot echo); writes PATH once listening
LATE_LISTENER = r"""
import socket, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("::", int(sys.argv[1]))); s.listen(8)
open(sys.argv[2], "w").close()
c, _ = s.accept()
c.sendall(c.recv(64))
"""


@pytest.mark.parametrize("datapath", ["ebpf", "userspace"])
def test_a_peer_at_a_closed_port_is_refused_at_once_and_connects_once_it_opens(bed, tmp_path, datapath):
    t, r1, b, c, dt, db, dc = topology(bed, datapath)
    closed_tcp, closed_udp = 5002, 7002
    before = adm(dt)
    r = json.loads(c.run("python3", "-c", REFUSED, CN_ID, str(closed_tcp), str(closed_udp), timeout=30).stdout)
    mid = adm(dt)
    print(datapath, "refusals", r, "T admission", mid)
    # the refusal plain IPv6 gives, within a round trip (a timeout would take 5 s)
    assert r["tcp"] == "refused" and r["tcp_s"] < 1.0, r
    assert r["udp"] == "refused" and r["udp_s"] < 1.0, r
    delta = {k: mid["counters"][k] - before["counters"][k] for k in mid["counters"]}
    assert delta["ingress_no_socket"] >= 2 and delta["answer_sent"] >= 2, delta
    assert delta["answer_unadmitted"] == 0 and delta["answer_rate_limited"] == 0, delta
    # and no state for it
    assert mid["established"] == 0 and mid["embryonic"] == 0, mid
    assert delta["admit_embryonic"] == 0, delta

    # the port opens: C connects on the same session, its first SYN served
    up = tmp_path / "late.up"
    t.spawn("python3", "-c", LATE_LISTENER, str(closed_tcp), str(up))
    wait_for(up.exists, timeout=10, what="T's late listener")
    res = client(c, 0, closed_tcp)
    print(datapath, "after opening", res, "C core", dc.stats()["core"])
    assert res.get("tcp_ok"), res
    assert res["tcp_s"] < 1.0, f"not served at the first SYN: {res}"
    core_c = dc.stats()["core"]
    assert core_c.get("peer_challenge_sent", 0) == 0 and core_c.get("bad_nonce", 0) == 0, core_c
    assert dt.proc.poll() is None and dc.proc.poll() is None


def test_udp_flood_to_a_closed_port_leaves_no_state_and_serves_a_new_peer(bed, tmp_path):
    t, r1, b, c, dt, db, dc = topology(bed)
    sess, sess_out = start_session(b, tmp_path, 8)
    wait_for(lambda: adm(dt)["established"] == 1, timeout=10, what="B established at T")
    before = adm(dt)
    assert before["policy"] == "socket" and before["embryonic"] == 0, before
    spoofed0 = to_spoofed(r1)

    f = flood(r1, 150_000, 50_000, "--dport", str(CLOSED_PORT))
    time.sleep(0.5)
    during = client(c, 5)  # C's first contact with T, mid-flood
    assert f.poll() is None, "the flood ended before C was done: not 'during'"
    samples = []
    while f.poll() is None:
        samples.append(adm(dt))
        time.sleep(0.2)
    fr = json.loads(f.stdout.read())
    after = client(c, 5)
    sess.wait(timeout=30)
    s = json.loads(sess_out.read_text())
    end = adm(dt)

    print("udp flood", fr, "C during/after", during, after, "B", s, "to spoofed", to_spoofed(r1) - spoofed0,
          "T admission", end)
    assert fr["errors"] == 0 and fr["sent"] == 150_000, fr
    assert during["udp_ok"] == 5, f"C refused during the flood: {during}"
    assert after["udp_ok"] == 5, f"C refused after the flood: {after}"
    # B's session never stopped
    assert s["echoed"] == s["sent"] and s["sent"] > 200, s
    assert s["max_rtt_ms"] < 1000, s
    # no state for the flood: B and C are all there is; the established tier never moved
    # but for C's own promotion
    assert all(x["established"] <= 2 and x["embryonic"] <= 1 for x in samples), samples
    assert end["established"] == 2 and end["embryonic"] == 0, end
    cnt, c0 = end["counters"], before["counters"]
    delta = {k: cnt.get(k, 0) - c0.get(k, 0) for k in cnt}
    # most of the flood was passed up without state (the rest lost in queues, not admitted)
    assert delta["ingress_no_socket"] >= 0.5 * fr["sent"], delta
    assert delta["admit_embryonic"] == 1, delta  # C
    assert delta["ilcc_full"] == 0, delta
    # the kernel's port unreachables: a few sent to the hinted (spoofed) locators, the
    # rest held back by the budget
    assert delta["answer_sent"] >= 1 and delta["answer_rate_limited"] >= 1, delta
    # packets towards the spoofed sources: within the one budget (hellos + refusals)
    secs = fr["seconds"] + 1
    budget = T_CFG["hello_burst"] + T_CFG["hello_rate_pps"] * secs
    sent_spoofed = to_spoofed(r1) - spoofed0
    assert sent_spoofed <= budget, (sent_spoofed, budget)
    assert delta["answer_sent"] + delta["hello_sent"] <= budget, delta
    assert dt.proc.poll() is None


def test_syn_flood_to_an_open_port_stays_within_the_embryonic_bound(bed, tmp_path):
    t, r1, b, c, dt, db, dc = topology(bed)
    sess, sess_out = start_session(b, tmp_path, 8)
    wait_for(lambda: adm(dt)["established"] == 1, timeout=10, what="B established at T")
    before = adm(dt)
    cookies0 = syncookies(t)

    f = flood(r1, 100_000, 30_000, "--syn", "--dport", str(TCP_PORT))
    time.sleep(0.5)
    res = {}
    th = threading.Thread(target=lambda: res.update(client(c, 3, TCP_PORT)))
    th.start()
    samples = []
    while f.poll() is None or th.is_alive():
        samples.append(adm(dt))
        time.sleep(0.2)
    th.join()
    fr = json.loads(f.stdout.read())
    mid_flood = 0.5 + res.get("tcp_s", 99) < fr["seconds"]
    sess.wait(timeout=30)
    s = json.loads(sess_out.read_text())
    end = adm(dt)

    print("syn flood", fr, "C", res, "B", s, "max embryonic", max(x["embryonic"] for x in samples),
          "cookies", syncookies(t) - cookies0, "T admission", end)
    assert fr["errors"] == 0, fr
    bound = T_CFG["ilcc_embryonic_max"]
    assert all(x["embryonic"] <= bound for x in samples + [end]), [x["embryonic"] for x in samples]
    assert max(x["embryonic"] for x in samples) > 0, "the flood never reached the slow path"
    # established: B, and C once its connection completed; never a flooder
    assert all(x["established"] <= 2 for x in samples + [end]), samples
    delta = {k: end["counters"].get(k, 0) - before["counters"].get(k, 0) for k in end["counters"]}
    assert delta["ingress_admit_socket"] > 1000 and delta["admit_embryonic_evicted"] > 1000, delta
    assert delta["hello_sent"] <= T_CFG["hello_burst"] + T_CFG["hello_rate_pps"] * (fr["seconds"] + 2), delta
    assert res.get("tcp_ok") and mid_flood, f"C's connection failed during the SYN flood: {res}"
    assert res["udp_ok"] == 3, res
    assert s["echoed"] == s["sent"] and s["sent"] > 200, s
    # the kernel's SYN cookies still answer for the listener under the flood
    assert syncookies(t) > cookies0, "no SYN cookies sent: the listener's queue never filled"
    assert dt.proc.poll() is None


def syncookies(node) -> int:
    rows = [l.split() for l in node.run("cat", "/proc/net/netstat").stdout.splitlines() if l.startswith("TcpExt:")]
    return int(dict(zip(rows[0][1:], rows[1][1:]))["SyncookiesSent"])


def test_floods_without_nonce_and_with_a_known_nid_and_wrong_nonce_are_counted_not_admitted(bed, tmp_path):
    """Bad input: random NIDs without a nonce (plain IPv6: never ours, no state) and B's own NID
    with wrong nonces (each dropped as bad_nonce, B's entry and session untouched)."""
    t, r1, b, c, dt, db, dc = topology(bed)
    sess, sess_out = start_session(b, tmp_path, 6)
    wait_for(lambda: adm(dt)["established"] == 1, timeout=10, what="B established at T")
    before, core0 = adm(dt), dt.stats()["core"]
    plain = flood(r1, 30_000, 30_000, "--no-nonce", "--dport", str(UDP_PORT))
    forged = flood(r1, 30_000, 30_000, "--nid", MN_NID, "--dport", str(UDP_PORT))
    fp, ff = json.loads(plain.communicate(timeout=60)[0]), json.loads(forged.communicate(timeout=60)[0])
    sess.wait(timeout=30)
    s = json.loads(sess_out.read_text())
    end, core = adm(dt), dt.stats()["core"]
    print("no-nonce", fp, "wrong nonce", ff, "B", s, "T", end)
    assert fp["sent"] == ff["sent"] == 30_000, (fp, ff)
    # plain IPv6 is the kernel's: no ILNP counter moves, no state
    assert end["counters"]["ingress_no_socket"] == before["counters"]["ingress_no_socket"], end
    # every forged packet reached the core and was refused; none made state
    bad = core.get("bad_nonce", 0) - core0.get("bad_nonce", 0)
    assert bad >= 0.5 * ff["sent"], (bad, ff)
    assert end["established"] == 1 and end["embryonic"] == 0, end
    assert end["counters"]["admit_embryonic"] == before["counters"]["admit_embryonic"], end
    assert s["echoed"] == s["sent"] and s["sent"] > 100, s
