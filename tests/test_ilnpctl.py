"""ilnpctl as an operator meets it (issue 24 item 5): pipes that close early, a
daemon that does not answer, options anywhere on the line, what is at the socket
path, and `peer add` refusing what the config file's peers refuse.

One ilnpd (userspace data path: the control plane is what is tested) on the CN of
the CN — R1 — MN testbed; the other sockets are made here, in the test's own folder.
"""

import json
import os
import socket
import subprocess
import threading
import time

import pytest

from ilnp_lab.daemon import Ilnpd, Peer, binary
from ilnp_lab.testbed import stop_process
from ilnp_test_util import CN_NID, MN_L64, MN_NID, three_node

CTL = str(binary("ilnpctl"))


@pytest.fixture
def cn_daemon(bed):
    cn, _r1, _mn = three_node(bed)
    d = Ilnpd(cn, ["eth0"], nid=CN_NID, datapath="userspace", peers=[Peer("mn", MN_NID, [(MN_L64, 10)])]).start()
    yield cn, d
    d.stop()


def ctl(*args, timeout=20):
    return subprocess.run([CTL, *args], capture_output=True, text=True, timeout=timeout)


def test_closed_stdout_ends_quietly(cn_daemon):
    _cn, d = cn_daemon
    for reader in ("head -1", "true"):  # `true` has gone before ilnpctl writes: EPIPE for certain
        r = subprocess.run(["bash", "-c", f'"$0" --json -s "$1" stats | {reader}; echo "${{PIPESTATUS[@]}}" >&2',
                            CTL, d.socket], capture_output=True, text=True, timeout=20)
        status = r.stderr.strip().splitlines()[-1].split()
        assert status[0] == "0", f"| {reader}: ilnpctl exited {status[0]}: {r.stderr}"
        assert r.stderr.strip().splitlines() == [" ".join(status)], f"| {reader}: stderr {r.stderr!r}"
    assert ctl("--json", "-s", d.socket, "stats").stdout.startswith("{")


def test_monitor_ends_quietly_when_its_reader_goes(cn_daemon):
    cn, d = cn_daemon
    p = subprocess.Popen([CTL, "-s", d.socket, "--json", "monitor"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        p.stdout.close()  # the reader is gone before the first event
        time.sleep(0.5)  # subscribed (its first reply needs no reader)
        assert p.poll() is None, p.stderr.read()
        # an event: a new global /64 on the uplink is a new local locator
        cn.ip("addr", "add", "2001:db8:77::c/64", "dev", "eth0", "nodad")
        rc = p.wait(timeout=15)
        err = p.stderr.read().decode()
        assert (rc, err) == (0, ""), f"monitor exited {rc}: {err}"
    finally:
        stop_process(p)


def test_socket_option_after_the_subcommand(cn_daemon):
    _cn, d = cn_daemon
    r = ctl("status", "-s", d.socket, "--json", "--timeout", "3")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["nid"] == CN_NID


def silent_listener(path):
    """A Unix socket that accepts and never answers (a hung daemon, or not ilnpd)."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(4)
    held = []

    def accept():
        while True:
            try:
                held.append(srv.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    return srv, held


def test_a_daemon_that_never_answers_times_out(bed):
    path = str(bed.workdir / "silent.sock")
    srv, held = silent_listener(path)
    try:
        t0 = time.monotonic()
        r = ctl("--timeout", "1", "-s", path, "status")
        took = time.monotonic() - t0
        assert r.returncode != 0
        assert 0.9 < took < 3.0, f"took {took:.2f} s"
        assert path in r.stderr and "1 s" in r.stderr and "--timeout" in r.stderr, r.stderr
        assert held, "ilnpctl connected"
        # after the subcommand too
        t0 = time.monotonic()
        r = ctl("status", "-s", path, "--timeout", "0.5")
        assert r.returncode != 0 and time.monotonic() - t0 < 2.5 and path in r.stderr, r.stderr
    finally:
        srv.close()
        for c in held:
            c.close()


def test_what_is_at_the_socket_path_is_named(bed):
    r = ctl("-s", "/etc/passwd", "status")
    assert r.returncode != 0 and "/etc/passwd is not a socket (a regular file)" in r.stderr, r.stderr
    assert "stale" not in r.stderr
    missing = str(bed.workdir / "none.sock")
    r = ctl("-s", missing, "status")
    assert r.returncode != 0 and f"no such file: {missing}" in r.stderr, r.stderr
    # a socket file with nobody listening: what a killed daemon leaves
    stale = str(bed.workdir / "stale.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(stale)
    s.close()
    assert os.path.exists(stale)
    r = ctl("-s", stale, "status")
    assert r.returncode != 0 and f"stale socket {stale}" in r.stderr and "nothing listening" in r.stderr, r.stderr


# (nid, locator, what the message must say besides the bad input); the last two only
# the daemon can know: its own NID and identifier prefix
GOOD_NID, GOOD_L64 = "0200:00ff:fe00:00ee", "2001:db8:e::/64"
BAD = [
    ("0300:0000:0000:0001", GOOD_L64, "0300:0000:0000:0001", "group (g) bit"),
    ("0000:0000:0000:0000", GOOD_L64, "0000:0000:0000:0000", "all-zero NID"),
    ("ffff:ffff:ffff:ffff", GOOD_L64, "ffff:ffff:ffff:ffff", "all-ones NID"),
    (GOOD_NID, "2001:db8:b::/48", "2001:db8:b::/48", "prefix length /48"),
    (GOOD_NID, "ff02::/64", "ff02:0000:0000:0000", "multicast"),
    (GOOD_NID, "fe80::/64", "fe80:0000:0000:0000", "link-local"),
    (GOOD_NID, "::/64", "0000:0000:0000:0000", "all-zero locator"),
    (CN_NID, GOOD_L64, CN_NID, "own NID"),
    (GOOD_NID, "fd69:6c6e:7000::/64", "fd69:6c6e:7000:0000", "identifier prefix"),
]


def raw_request(path, req: dict) -> dict:
    """One request line straight to the daemon (no ilnpctl in between)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(path)
        s.sendall((json.dumps(req) + "\n").encode())
        return json.loads(s.makefile().readline())


def test_peer_add_refuses_what_cannot_be_a_peer(cn_daemon):
    _cn, d = cn_daemon
    before = d.ctl("peer", "show")
    assert [p["nid"] for p in before] == [MN_NID]
    for nid, l64, named, why in BAD:
        r = ctl("-s", d.socket, "peer", "add", "bad", nid, l64)
        assert r.returncode != 0, f"peer add {nid} {l64} was accepted"
        assert named in r.stderr and why in r.stderr, f"peer add {nid} {l64}: {r.stderr}"
        # the daemon refuses it by itself too, with the same rule
        rep = raw_request(d.socket, {"cmd": "peer_add", "name": "bad", "nid": nid, "locators": [{"l64": l64}]})
        assert rep["ok"] is False and named in rep["error"] and why in rep["error"], rep
    assert d.ctl("peer", "show") == before, "nothing was added"
    # and a good one still goes in
    r = ctl("-s", d.socket, "peer", "add", "ok", GOOD_NID, "2001:db8:e::/64/5")
    assert r.returncode == 0, r.stderr
    added = [p for p in d.ctl("peer", "show") if p["nid"] == GOOD_NID]
    assert added and added[0]["locators"] == [{"l64": "2001:0db8:000e:0000", "pref": 5}], added
