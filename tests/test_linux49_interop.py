"""Interoperation with the protocol authors' Linux 4.9.52 ILNPv6 kernel (issue #46),
against a correspondent that behaves as that code does (`ilnp_lab.linux49`, written from
its source: the padding rule, its nonce handling, unknown source locators dropped before
the nonce, its LU layout and checksum, sessions forgotten after 30 s idle, resets
without a nonce). Its applications are the model namespace's real ping, UDP and TCP.

The seven checks of the live test (scripts/linux49-live.sh), in both roles (the model
opens the session / ilnpd's host does) with 32- and 96-bit nonces: the model first hits
a closed port on ilnpd's host, then ping, UDP echo, TCP echo and a bulk transfer each
way, the model's host moving, ilnpd's host moving, and an idle time past the model's
session timeout (here IDLE_S, the kernel's 30 s scaled down: `--session-timeout`), after
which the model's side sends first (what ilnpd's host sends first is dropped by the
prototype until then: its bug 5 in docs/interop.md, asserted as such).
ilnpd marks the model's peer `linux49` ([peer_interop]) and `shared` ([peer_nonce]: as
responder it sends back the initiator's nonce). docs/interop.md has the results.
"""

import sys
import textwrap
import time

import pytest

from ilnp_lab.addr import address, identifier_address
from ilnp_lab.daemon import Ilnpd, Peer
from ilnp_lab.linux49 import Linux49Peer
from ilnp_lab.testbed import wait_for
from ilnp_test_util import CN_ID, CN_L64, CN_NID, MN_L64, three_node

L49_NID = "0211:22ff:fe33:4449"
L49_ID = identifier_address(L49_NID)
L49_WIRE = address(MN_L64, L49_NID)
CN_WIRE = address(CN_L64, CN_NID)
L49_L64_2 = "2001:0db8:000f:0000"  # where the model moves (R1 routes it)
CN_L64_2 = "2001:0db8:00a1:0000"  # where ilnpd's host moves
IDLE_S = 8.0  # the model's session timeout and L64 lifetime in CI (the kernel's: 30 s)
UDP_PORT, TCP_PORT, CLOSED_PORT = 7000, 7001, 7999
BULK = 300_000

SERVE = textwrap.dedent("""
    import socket, sys, threading
    host, uport, tport, bulk = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); u.bind((host, uport))
    t = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); t.bind((host, tport)); t.listen(8)
    def udp():
        while True:
            d, a = u.recvfrom(65535); u.sendto(d, a)
    def conn(c):
        with c:
            cmd = c.recv(16)
            if cmd.startswith(b"echo"):
                c.sendall(cmd)
            elif cmd.startswith(b"get"):
                c.sendall(bytes(bulk))
            elif cmd.startswith(b"put"):
                n = 0
                while n < bulk:
                    d = c.recv(65536)
                    if not d: break
                    n += len(d)
                c.sendall(str(n).encode())
    threading.Thread(target=udp, daemon=True).start()
    while True:
        c, _ = t.accept(); threading.Thread(target=conn, args=(c,), daemon=True).start()
""")

CLIENT = textwrap.dedent("""
    import socket, sys
    src, dst, what, port, bulk = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    if what == "udp":
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); s.bind((src, 0)); s.settimeout(0.7)
        for i in range(4):
            s.sendto(b"ping%d" % i, (dst, port))
            try:
                print(s.recvfrom(100)[0].decode()); break
            except socket.timeout:
                pass
        sys.exit(0)
    s = socket.create_connection((dst, port), timeout=4, source_address=(src, 0))
    s.settimeout(8)
    if what == "echo":
        s.sendall(b"echo-tcp"); print(s.recv(100).decode())
    elif what == "get":
        s.sendall(b"get"); n = 0
        while True:
            d = s.recv(65536)
            if not d: break
            n += len(d)
        print(n)
    elif what == "put":
        s.sendall(b"put".ljust(16)); s.sendall(bytes(bulk)); s.shutdown(socket.SHUT_WR); print(s.recv(100).decode())
""")


class Skip(Exception):
    pass


def core(d, name):
    return d.stats()["core"].get(name, 0)


def entry(d, nid):
    return next((e for e in d.ctl("ilcc", "show") if e["nid"] == nid), None)


def client(node, src, dst, what, port=None, timeout=25):
    port = port or (UDP_PORT if what == "udp" else TCP_PORT)
    r = node.run(sys.executable, "-c", CLIENT, src, dst, what, str(port), str(BULK), check=False, timeout=timeout)
    return r.stdout.strip()


def ping(node, dst, n=3):
    return node.run("ping", "-6", "-c", str(n), "-i", "0.2", "-W", "1", dst, check=False, timeout=15).returncode == 0


def setup(bed, bits):
    cn, r1, mn = three_node(bed)
    r1.add_addr("eth-mn", "2001:db8:f::1/64")
    r1.add_addr("eth-cn", "2001:db8:a1::1/64")
    extra = {"peer_interop": {"l49": "linux49"}, "peer_nonce": {"l49": "shared"}}
    dcn = Ilnpd(cn, ["eth0"], nid=CN_NID, nonce_bits=bits, peers=[Peer("l49", L49_NID, [(MN_L64, 10)])],
                extra=extra).start()
    m = Linux49Peer(mn, "eth0", L49_NID, MN_L64, gateway="2001:db8:b::1", session_timeout=IDLE_S).start()
    m.cmd("hosts", hosts=[[CN_L64, CN_NID]])
    return cn, r1, mn, dcn, m


def servers(cn, mn):
    cn.spawn(sys.executable, "-c", SERVE, CN_ID, str(UDP_PORT), str(TCP_PORT), str(BULK))
    mn.spawn(sys.executable, "-c", SERVE, L49_WIRE, str(UDP_PORT), str(TCP_PORT), str(BULK))
    wait_for(lambda: cn.listening(TCP_PORT) and mn.listening(TCP_PORT), what="the servers")


def traffic(cn, mn, first):
    """ping, UDP echo, TCP echo, bulk each way; `first` ("model" / "ilnpd") starts each."""
    from_model = (mn, L49_WIRE, CN_WIRE)
    from_ilnpd = (cn, CN_ID, L49_ID)
    order = [from_model, from_ilnpd] if first == "model" else [from_ilnpd, from_model]
    got = {}
    for node, src, dst in order:
        side = "model" if node is mn else "ilnpd"
        got[f"ping from {side}"] = ping(node, dst)
        got[f"udp from {side}"] = client(node, src, dst, "udp").startswith("ping")
        got[f"tcp echo from {side}"] = client(node, src, dst, "echo") == "echo-tcp"
        got[f"bulk to {side}"] = client(node, src, dst, "get") == str(BULK)
        got[f"bulk from {side}"] = client(node, src, dst, "put") == str(BULK)
    return got


@pytest.mark.parametrize("bits", [32, 96])
@pytest.mark.parametrize("first", ["model", "ilnpd"])
def test_linux49_seven_checks(bed, first, bits):
    """The seven checks; every failure is listed at the end (one assert) with the model's
    drops and ilnpd's counters, so a run says which checks fail and why."""
    cn, r1, mn, dcn, m = setup(bed, bits)
    results = {}
    try:
        servers(cn, mn)
        # 7. the model hits a closed port on ilnpd's host before any session
        client(mn, L49_WIRE, CN_WIRE, "udp", port=CLOSED_PORT, timeout=15)
        # 1-3. ping, UDP, TCP echo and bulk each way, the session opened by `first`
        results.update({f"{k}": v for k, v in traffic(cn, mn, first).items()})
        results["closed port first"] = all(results.values())
        results["ilcc show marks the entry linux49"] = (entry(dcn, L49_NID) or {}).get("interop") == "linux49"
        if not any(results.values()):
            raise Skip  # no session at all: the other checks would only time out
        # 4. the model moves: its LU (its layout, its checksum) is taken by ilnpd
        m.add_locator(L49_L64_2)
        m.cmd("move", l64s=[MN_L64, L49_L64_2])
        try:
            wait_for(lambda: L49_L64_2 in [r["l64"] for r in entry(dcn, L49_NID)["remote_locators"]], timeout=10,
                     what="ilnpd learns the model's move")
            results["model moves: LU taken"] = True
        except Exception:
            results["model moves: LU taken"] = False
        results.update({f"after the model moved: {k}": v for k, v in traffic(cn, mn, first).items()})
        # 5. ilnpd's host moves: its LU in the model's layout, from a locator the model knows
        cn.add_addr("eth0", "2001:db8:a1::c/64")
        try:
            wait_for(lambda: any(l["accepted"] and l["l64"] == CN_L64_2 for l in m.log("lu")), timeout=10,
                     what="the model takes our LU")
            results["ilnpd moves: LU taken"] = True
        except Exception:
            results["ilnpd moves: LU taken"] = False
        results.update({f"after ilnpd moved: {k}": v for k, v in traffic(cn, mn, first).items()})
        # 6. idle past the model's session timeout: it forgets both nonces
        time.sleep(IDLE_S + 2)
        assert m.log("session_timeout"), "the model's session timed out"
        if first == "ilnpd":
            # its bug 5 (docs/interop.md): its local locator expired with the session
            # (`ilcc_expired`), so what ilnpd's host sends first is dropped until the model
            # itself sends; the live kernel does the same (35 s idle, ilnpd's side first)
            results["after idle: ilnpd's first ping dropped (its expired local locator)"] = (
                not ping(cn, L49_ID, n=2) and any(d["why"] == "expired_local_l64" for d in m.log("drop")))
        results.update({f"after idle: {k}": v for k, v in traffic(cn, mn, "model").items()})
    except Skip:
        pass
    finally:
        drops = [(d["why"], d.get("l64")) for d in m.log("drop")] + [(e["error"], None) for e in m.log("model_error")]
        counters = {k: v for k, v in dcn.stats()["core"].items() if v and ("drop" in k or "bad" in k or "lu" in k)}
        m.stop()
        dcn.stop()
    failed = [k for k, v in results.items() if not v]
    print(f"linux49 {first} {bits}: {len(results) - len(failed)}/{len(results)} passed; model drops "
          f"{sorted(set(drops))}; ilnpd {counters}")
    assert not failed, (failed, sorted(set(drops)), counters)
