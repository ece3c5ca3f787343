"""Host integrity (issue #10): plain IPv6 on a host running ilnpd behaves as without it.

Two namespaces on one link, static 2001:db8:5::a/64 and ::b/64, ilnpd with
`uplinks = ["eth0"]` and nothing else (NID = EUI-64 of the MAC): the `L64:NID`
address ilnpd adds on eth0 must not win the kernel's source address selection.
"""

import ipaddress
import json
import textwrap
import time

from ilnp_lab.daemon import Ilnpd

A, B = "2001:db8:5::a", "2001:db8:5::b"

# an unbound UDP echo server: bound to ::, answers with sendto() so the kernel picks
# the reply's source address (the bug: it picked ilnpd's L64:NID)
ECHO_SERVER = textwrap.dedent("""
    import socket
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.bind(("::", 7007))
    while True:
        data, peer = s.recvfrom(2048)
        s.sendto(data, peer)
""")

# a client with a connected UDP socket (what iperf3 -u does): prints the source of
# every reply it accepts; a reply from another address never arrives at it
ECHO_CLIENT = textwrap.dedent("""
    import json, socket, sys
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.settimeout(1.0)
    s.connect((sys.argv[1], 7007))
    got = []
    for i in range(5):
        s.send(b"ping %d" % i)
        try:
            data, peer = s.recvfrom(2048)
            got.append([data.decode(), peer[0]])
        except socket.timeout:
            got.append(None)
    print(json.dumps(got))
""")

# an unconnected client: sees replies from any source, so it can name the wrong one
PEEK_CLIENT = textwrap.dedent("""
    import json, socket, sys
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.settimeout(1.0)
    s.sendto(b"peek", (sys.argv[1], 7007))
    try:
        print(json.dumps(s.recvfrom(2048)[1][0]))
    except socket.timeout:
        print(json.dumps(None))
""")


def one_link(bed):
    a, b = bed.add_node("ha"), bed.add_node("hb")
    bed.link(a, "eth0", b, "eth0")
    a.add_addr("eth0", f"{A}/64")
    b.add_addr("eth0", f"{B}/64")
    return a, b


def plain_ipv6_checks(bed, a, b):
    """iperf3 UDP (connected sockets), an unbound UDP echo server and TCP, A → B."""
    (bed.workdir / "echo_server.py").write_text(ECHO_SERVER)
    (bed.workdir / "echo_client.py").write_text(ECHO_CLIENT)
    (bed.workdir / "peek_client.py").write_text(PEEK_CLIENT)
    b.spawn("python3", str(bed.workdir / "echo_server.py"))
    time.sleep(0.3)
    peek = json.loads(a.run("python3", str(bed.workdir / "peek_client.py"), B).stdout)
    assert peek == B, f"the unbound server answered from {peek}, not {B}"
    got = json.loads(a.run("python3", str(bed.workdir / "echo_client.py"), B).stdout)
    assert got == [[f"ping {i}", B] for i in range(5)], got

    srv = b.spawn("iperf3", "-s", "-1", "-p", "5201")
    time.sleep(0.3)
    r = a.run("iperf3", "-c", B, "-p", "5201", "-u", "-b", "1M", "-t", "1", "-J", check=False, timeout=30)
    srv.wait(timeout=10)
    assert r.returncode == 0, f"iperf3 UDP failed: {r.stdout[-1500:]} {r.stderr[-500:]}"
    assert json.loads(r.stdout)["end"]["sum"]["packets"] > 50

    # TCP: the server sees the client's own address (its source selection) and itself as B
    b.spawn("socat", "TCP6-LISTEN:7008,reuseaddr,fork", "SYSTEM:echo $SOCAT_PEERADDR $SOCAT_SOCKADDR")
    time.sleep(0.3)
    r = a.run("sh", "-c", f"socat -t 2 - TCP6:[{B}]:7008 </dev/null")
    seen = [ipaddress.IPv6Address(x.strip("[]")) for x in r.stdout.split()]
    assert seen == [ipaddress.IPv6Address(A), ipaddress.IPv6Address(B)], f"TCP: {r.stdout!r}"


def test_plain_ipv6_source_selection_with_ilnpd(bed):
    a, b = one_link(bed)
    da = Ilnpd(a, ["eth0"]).start()
    db = Ilnpd(b, ["eth0"]).start()
    # ilnpd did add its L64:NID (so ND answers for it): the case that broke selection
    nid_b = db.status()["nid"]
    ours = [x for x in b.global_addrs("eth0") if x != B]
    assert ours, f"ilnpd added no L64:NID on hb (NID {nid_b}): {b.global_addrs('eth0')}"
    plain_ipv6_checks(bed, a, b)
    da.stop()
    db.stop()
