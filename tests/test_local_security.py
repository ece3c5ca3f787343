"""A local user against ilnpd (issue 42 item 4): secrets stay root's, group ilnp only reads.

* A member of group `ilnp` (uid 65534 with the group as its only one, through
  `setpriv`) runs ilnpctl: `status`, `ilcc show`, `stats` work; `ilcc show` has no
  nonces for it (null, `nonces_hidden`) while root's has them; `ilcc flush`, `peer add`,
  `peer del`, `policy per-flow` and `locator set` are refused by the daemon ("... needs
  root"), ilnpctl exits 1, nothing changed, each counted (`control_refused_not_root`).
* No nonce of the session is in either daemon's log or in the monitor stream after a
  session and a forged packet (a wrong nonce claiming the CN, sent from R1).
* Start-up never deletes what is not a socket at the `control_socket` path.
* A member cannot exhaust the control socket: 64 connections at most (the 65th is told
  why and closed; root is still served), a request line at most 64 KiB.
* The DNS proxy's TCP listener (issue 42 item 5): a client that sends a length prefix
  and then nothing is closed at the 10 s deadline; beyond 64 clients new ones are closed
  at once; a normal query is answered after; counted in `dns status` and the metrics.

The group `ilnp` is created for the test if the host has none (and removed after):
ilnpd gives the socket to it at start, as on an installed host.
"""

import grp
import ipaddress
import json
import os
import struct
import subprocess
import time

import pytest

from ilnp_lab.daemon import Ilnpd, Monitor, binary
from ilnp_lab.testbed import StepError, wait_for
from ilnp_test_util import CN_NID, CN_WIRE, MN_ID, MN_NID, MN_WIRE, ilnp_pair, three_node

CTL = str(binary("ilnpctl"))
MEMBER_UID = 65534  # nobody: not root, in group ilnp only for the command


@pytest.fixture
def ilnp_group():
    """The gid of group ilnp (made here if missing, removed after)."""
    made = False
    try:
        gid = grp.getgrnam("ilnp").gr_gid
    except KeyError:
        subprocess.run(["groupadd", "--system", "ilnp"], check=True)
        made = True
        gid = grp.getgrnam("ilnp").gr_gid
    yield gid
    if made:
        subprocess.run(["groupdel", "ilnp"], check=True)


def as_member(gid, d, *args):
    """ilnpctl ARGS as uid 65534 whose only group is ilnp."""
    return subprocess.run(["setpriv", f"--reuid={MEMBER_UID}", f"--regid={gid}", "--clear-groups",
                           CTL, "-s", d.socket, *args], capture_output=True, text=True, timeout=20)


def refused(d) -> int:
    return d.stats()["core"].get("control_refused_not_root", 0)


def test_group_ilnp_reads_without_nonces_and_changes_nothing(ilnp_group, bed):
    cn, r1, mn, dcn, dmn = ilnp_pair(bed, datapath="userspace")
    st = os.stat(dcn.socket)
    assert (st.st_gid, st.st_mode & 0o777) == (ilnp_group, 0o660), st
    assert cn.run("ping", "-6", "-c", "2", "-i", "0.2", "-W", "2", MN_ID, check=False).returncode == 0
    wait_for(lambda: (dcn.ctl("ilcc", "show") or [{}])[0].get("nonce_rx"), what="the CN's entry with both nonces")
    # root sees the nonces
    [root_view] = [e for e in dcn.ctl("ilcc", "show") if e["nid"] == MN_NID]
    assert root_view["nonce_tx"] and root_view["nonce_rx"] and "nonces_hidden" not in root_view, root_view
    # the member reads
    r = as_member(ilnp_group, dcn, "--json", "status")
    assert r.returncode == 0 and f'"nid":"{CN_NID}"' in r.stdout.replace(" ", ""), (r.returncode, r.stderr)
    r = as_member(ilnp_group, dcn, "--json", "ilcc", "show")
    assert r.returncode == 0, r.stderr
    [member_view] = [e for e in json.loads(r.stdout) if e["nid"] == MN_NID]
    print("member's ilcc show entry:", member_view)
    assert member_view["nonce_tx"] is None and member_view["nonce_rx"] is None, member_view
    assert member_view["nonces_hidden"] is True, member_view
    for n in (root_view["nonce_tx"], root_view["nonce_rx"]):
        assert n not in r.stdout
    table = as_member(ilnp_group, dcn, "ilcc", "show")
    assert table.returncode == 0 and "(root only)" in table.stdout, table
    assert root_view["nonce_tx"] not in table.stdout and root_view["nonce_rx"] not in table.stdout
    assert as_member(ilnp_group, dcn, "stats").returncode == 0
    # ... and changes nothing
    peers_before = dcn.ctl("peer", "show")
    tries = [
        (("ilcc", "flush"), "ilcc flush needs root"),
        (("peer", "add", "x", "0200:00ff:fe00:00ee", "2001:db8:e::/64"), "peer add needs root"),
        (("peer", "del", MN_NID), "peer del needs root"),
        (("policy", "per-flow"), "policy set needs root"),
        (("locator", "set", "eth0", "weight", "0"), "locator set needs root"),
    ]
    for args, want in tries:
        r = as_member(ilnp_group, dcn, *args)
        print(f"member: ilnpctl {' '.join(args)} -> exit {r.returncode}: {r.stderr.strip()}")
        assert r.returncode == 1, (args, r.returncode, r.stdout, r.stderr)
        assert want in r.stderr and f"uid {MEMBER_UID}" in r.stderr, (args, r.stderr)
    assert refused(dcn) == len(tries)
    assert [e["nid"] for e in dcn.ctl("ilcc", "show")] == [MN_NID], "the member flushed the ILCC"
    assert dcn.ctl("peer", "show") == peers_before
    assert dcn.ctl("policy")["default_policy"] == "failover"
    # root still may
    assert dcn.ctl("ilcc", "flush")["flushed"] == 1
    assert refused(dcn) == len(tries)


def forged_udp(src, dst, nonce: bytes, payload=b"forged") -> bytes:
    """IPv6 + Destination Options (nonce) + UDP, wire form (the nonce check comes first)."""
    s, d = ipaddress.IPv6Address(src).packed, ipaddress.IPv6Address(dst).packed
    udp = struct.pack("!HHHH", 40000, 9, 8 + len(payload), 0) + payload
    dest = bytes([17, 0, 0x8B, 4]) + nonce
    return struct.pack("!IHBB", 6 << 28, len(dest) + len(udp), 60, 64) + s + d + dest + udp


def test_no_nonce_in_logs_or_events_after_a_forged_packet(bed):
    cn, r1, mn, dcn, dmn = ilnp_pair(bed)
    mon = Monitor(dmn)
    try:
        assert cn.run("ping", "-6", "-c", "2", "-i", "0.2", "-W", "2", MN_ID, check=False).returncode == 0
        [e] = [e for e in dmn.ctl("ilcc", "show") if e["nid"] == CN_NID]
        nonces = {e["nonce_tx"], e["nonce_rx"]}
        assert all(nonces), e
        pkt = forged_udp(CN_WIRE, MN_WIRE, b"\x13\x37\x13\x37")
        r1.run("python3", "-c",
               "import socket;s=socket.socket(socket.AF_INET6,socket.SOCK_RAW,socket.IPPROTO_RAW);"
               f"s.sendto(bytes.fromhex('{pkt.hex()}'),('{MN_WIRE}',0))")
        wait_for(lambda: dmn.stats()["core"].get("bad_nonce", 0) >= 1, timeout=5, what="the forgery counted")
        wait_for(lambda: dmn.stats()["core"].get("peer_challenge_answered", 0) >= 1, timeout=5,
                 what="the live CN answers the challenge")
        assert cn.run("ping", "-6", "-c", "1", "-W", "2", MN_ID, check=False).returncode == 0
        time.sleep(0.5)
    finally:
        mon.stop()
    events = "\n".join(str(ev) for _t, ev in mon.events)
    assert any(ev.get("reason") == "bad_nonce" for _t, ev in mon.events), events[-2000:]
    for where, text in (("the MN's log", dmn.log.read_text()), ("the CN's log", dcn.log.read_text()),
                        ("the MN's monitor stream", events)):
        for n in nonces:
            for form in (n, n.upper(), "0x" + n, " ".join(n[i:i + 2] for i in range(0, len(n), 2))):
                assert form not in text, f"nonce {n} ({form!r}) in {where}:\n" + "\n".join(
                    line for line in text.splitlines() if form in line)[-2000:]


@pytest.mark.parametrize("kind", ["file", "symlink", "directory"])
def test_start_up_never_removes_a_non_socket_at_the_control_socket_path(bed, kind, tmp_path):
    cn, _r1, _mn = three_node(bed)
    d = Ilnpd(cn, ["eth0"], nid=CN_NID, datapath="userspace")
    path = d.socket
    victim = tmp_path / "victim"
    victim.write_text("precious")
    if kind == "file":
        with open(path, "w") as f:
            f.write("not a socket")
    elif kind == "symlink":
        os.symlink(victim, path)
    else:
        os.mkdir(path)
    try:
        with pytest.raises(StepError) as e:
            d.start()
        d.runs[-1][1] = True  # refused to start on purpose: not an exit problem
        log = d.log.read_text()
        print(f"{kind}: {[l for l in log.splitlines() if 'control_socket' in l]}")
        assert d.proc.returncode != 0, str(e.value)
        assert f"control_socket: {path} exists and is" in log and "not a socket" in log, log[-2000:]
        assert os.path.lexists(path), f"the {kind} at {path} was removed"
        assert victim.read_text() == "precious"
        if kind == "file":
            assert open(path).read() == "not a socket"
    finally:
        if os.path.isdir(path) and not os.path.islink(path):
            os.rmdir(path)
        elif os.path.lexists(path):
            os.unlink(path)


# In the CN's namespace: a client that sends a length prefix and then nothing (timed until
# the proxy closes it), then MAX_TCP_CLIENTS + 3 idle connections (the last 3 closed at
# once), then, with those gone, a normal TCP query.
DNS_TCP_CLIENT = r"""
import json, socket, struct, sys, time
at = ("127.0.0.1", 53)
out = {}
def closed_after(s, limit):
    t = time.monotonic()
    s.settimeout(limit)
    try:
        while s.recv(64):
            pass
    except ConnectionResetError:
        pass
    except socket.timeout:
        return None
    return time.monotonic() - t
slow = socket.create_connection(at)
slow.sendall(b"\x00\x28")
out["slow_closed_s"] = closed_after(slow, 30)
held = [socket.create_connection(at) for _ in range(int(sys.argv[1]))]
time.sleep(0.3)
over = [socket.create_connection(at) for _ in range(3)]
out["over_closed_s"] = [closed_after(s, 3) for s in over]
for s in held + over:
    s.close()
time.sleep(0.3)
q = struct.pack("!HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0) + b"\x05other\x03lab\x07example\x00" + struct.pack("!HH", 1, 1)
s = socket.create_connection(at)
s.settimeout(5)
s.sendall(struct.pack("!H", len(q)) + q)
n = struct.unpack("!H", s.recv(2))[0]
a = b""
while len(a) < n:
    a += s.recv(n - len(a))
out["answer_id"] = a[:2].hex()
out["answer_rcode"] = a[3] & 0xF
print(json.dumps(out))
"""


def test_dns_tcp_slow_client_is_closed_at_the_deadline_and_clients_are_capped(bed):
    cn, _r1, _mn = three_node(bed)
    fake = cn.spawn("python3", os.path.join(os.path.dirname(__file__), "fake_dns.py"), "::1", "5353",
                    stdout=subprocess.PIPE)
    assert fake.stdout.readline().strip() == b"ready"
    d = Ilnpd(cn, ["eth0"], nid=CN_NID, datapath="userspace",
              extra={"dns": {"upstream": "[::1]:5353", "timeout_ms": 500},
                     "metrics": {"listen": ["127.0.0.1:9469"]}}).start()
    try:
        r = cn.run("python3", "-c", DNS_TCP_CLIENT, "64", timeout=60)
        got = json.loads(r.stdout)
        c = d.ctl("dns", "status")["counters"]
        print(f"slow client closed after {got['slow_closed_s']} s (None: still open after 30 s); clients 65-67 "
              f"closed after {got['over_closed_s']} s; then a query: rcode {got['answer_rcode']}; {c}")
        assert got["slow_closed_s"] is not None and 9.5 <= got["slow_closed_s"] <= 11.5, got
        assert all(x is not None and x < 0.5 for x in got["over_closed_s"]), got
        assert (got["answer_id"], got["answer_rcode"]) == ("4242", 3), got  # fake_dns: NXDOMAIN
        assert (c["tcp_slow_closed"], c["tcp_refused_full"]) == (1, 3), c
        # the same counters in the metrics
        text = cn.run("curl", "-sf", "http://127.0.0.1:9469/metrics").stdout
        for line in ('ilnp_dns_proxy_events_total{event="tcp_refused_full"} 3',
                     'ilnp_dns_proxy_events_total{event="tcp_slow_closed"} 1'):
            assert line in text, [l for l in text.splitlines() if "dns" in l]
    finally:
        d.stop()
        fake.kill()
        fake.wait()


# As a group member: MAX_CLIENTS connections held, one more (told why and closed), a
# request line without end; prints what the extra one and the long line got.
CONTROL_CLIENT = r"""
import json, socket, sys, time
path, n = sys.argv[1], int(sys.argv[2])
def conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.settimeout(5)
    return s
def reply(s):
    got = b""
    while not got.endswith(b"\n"):
        b = s.recv(4096)
        if not b:
            break
        got += b
    return got.decode()
held = [conn() for _ in range(n)]
held[0].sendall(b'{"cmd":"status"}\n')
first = json.loads(reply(held[0]))["ok"]
time.sleep(0.2)
extra = conn()
busy = reply(extra)
print(json.dumps({"first": first, "busy": busy}), flush=True)
sys.stdin.readline()  # held until the test has asked as root
for s in held + [extra]:
    s.close()
time.sleep(0.2)
long = conn()
try:
    long.sendall(b"x" * (200 * 1024))
except OSError:
    pass
print(json.dumps({"long": reply(long)}), flush=True)
"""


def test_group_members_cannot_exhaust_the_control_socket(ilnp_group, bed):
    cn, _r1, _mn = three_node(bed)
    d = Ilnpd(cn, ["eth0"], nid=CN_NID, datapath="userspace").start()
    p = subprocess.Popen(["setpriv", f"--reuid={MEMBER_UID}", f"--regid={ilnp_group}", "--clear-groups",
                          "/usr/bin/python3", "-c", CONTROL_CLIENT, d.socket, "64"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = json.loads(p.stdout.readline() or "{}")
        print("member, 65th connection:", first)
        assert first.get("first") is True, (first, p.stderr.read() if p.poll() is not None else "")
        assert "64 clients other than root are connected" in first["busy"], first
        # root is never locked out
        assert d.status()["nid"] == CN_NID
        p.stdin.write("\n")
        p.stdin.flush()
        second = json.loads(p.stdout.readline())
        print("member, 200 KiB without a newline:", second)
        assert "request line longer than 65536 bytes" in second["long"], second
        assert p.wait(timeout=10) == 0, p.stderr.read()
        core = d.stats()["core"]
        assert (core["control_refused_busy"], core["control_line_too_long"]) == (1, 1), core
        # all slots free again
        assert as_member(ilnp_group, d, "status").returncode == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        d.stop()
