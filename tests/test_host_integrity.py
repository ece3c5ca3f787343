"""Host integrity (issue #10): plain IPv6 on a host running ilnpd behaves as without it,
and a clean stop leaves the host as it found it (items 1 and 5; the inventory of
what ilnpd changes is in docs/architecture.md, "Host state ilnpd changes").

Two namespaces on one link, static 2001:db8:5::a/64 and ::b/64, ilnpd with
`uplinks = ["eth0"]` and nothing else (nid = "auto", a stable-privacy NID): the `L64:NID`
address ilnpd adds on eth0 must not win the kernel's source address selection.
"""

import ipaddress
import json
import textwrap

from ilnp_lab.daemon import Ilnpd
from ilnp_lab.testbed import stop_process
from ilnp_test_util import host_snapshot as snapshot, snapshot_diff

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


def plain_ipv6_checks(bed, a, b, a_addr=A, b_addr=B):
    """iperf3 UDP (connected sockets), an unbound UDP echo server and TCP, a → b."""
    (bed.workdir / "echo_server.py").write_text(ECHO_SERVER)
    (bed.workdir / "echo_client.py").write_text(ECHO_CLIENT)
    (bed.workdir / "peek_client.py").write_text(PEEK_CLIENT)
    echo = b.spawn("python3", str(bed.workdir / "echo_server.py"))
    b.wait_listening_udp(7007)
    peek = json.loads(a.run("python3", str(bed.workdir / "peek_client.py"), b_addr).stdout)
    assert peek == b_addr, f"the unbound server answered from {peek}, not {b_addr}"
    got = json.loads(a.run("python3", str(bed.workdir / "echo_client.py"), b_addr).stdout)
    assert got == [[f"ping {i}", b_addr] for i in range(5)], got
    stop_process(echo)

    srv = b.spawn("iperf3", "-s", "-1", "-p", "5201")
    b.wait_listening(5201)
    r = a.run("iperf3", "-c", b_addr, "-p", "5201", "-u", "-b", "1M", "-t", "1", "-J", check=False, timeout=30)
    srv.wait(timeout=10)
    assert r.returncode == 0, f"iperf3 UDP failed: {r.stdout[-1500:]} {r.stderr[-500:]}"
    assert json.loads(r.stdout)["end"]["sum"]["packets"] > 50

    # TCP: the server sees the client's own address (its source selection) and itself
    tcp = b.spawn("socat", "TCP6-LISTEN:7008,reuseaddr,fork", "SYSTEM:echo $SOCAT_PEERADDR $SOCAT_SOCKADDR")
    b.wait_listening(7008)
    r = a.run("sh", "-c", f"socat -t 2 - TCP6:[{b_addr}]:7008 </dev/null")
    seen = [ipaddress.IPv6Address(x.strip("[]")) for x in r.stdout.split()]
    assert seen == [ipaddress.IPv6Address(a_addr), ipaddress.IPv6Address(b_addr)], f"TCP: {r.stdout!r}"
    stop_process(tcp)


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


def test_host_state_inventory_and_clean_stop(bed):
    """Before start / while running / after a clean stop: while running, only the
    documented items differ (and plain IPv6 to the host works); after the stop,
    nothing does."""
    a, b = one_link(bed)
    db = Ilnpd(b, ["eth0"]).start()
    before = snapshot(a)
    da = Ilnpd(a, ["eth0"]).start()
    nid = da.status()["nid"].replace(":", "")
    ours = ":".join(nid[i:i + 4].lstrip("0") or "0" for i in range(0, 16, 4))  # as ip(8) prints it
    during = snapshot(a)
    added = {k: during[k] - before[k] for k in before}
    gone = {k: before[k] - during[k] for k in before}
    # addresses: our L64:NID on eth0 (deprecated, no prefix route, no DAD) and the
    # identifier address on ilnp0; nothing removed
    assert gone["addr"] == set(), gone["addr"]
    eth0 = [l for l in added["addr"] if " eth0 " in l]
    assert len(eth0) == 1 and f"2001:db8:5:0:{ours}/64" in eth0[0], added["addr"]
    for flag in ("deprecated", "nodad", "noprefixroute", "preferred_lft 0sec"):
        assert flag in eth0[0], eth0[0]
    assert all(" ilnp0 " in l for l in added["addr"] if l not in eth0), added["addr"]
    # routes: only ilnp0's (identifier prefix, its local and multicast routes) and the
    # local route of our L64:NID; the uplink's prefix route is untouched
    assert gone["route"] == set(), gone["route"]
    for l in added["route"]:
        assert "dev ilnp0" in l or (l.startswith(f"local 2001:db8:5:0:{ours} ") and "dev eth0" in l), l
    assert added["rule"] == set() and gone["rule"] == set()
    # sysctls: ilnp0's own, and ignore_routes_with_linkdown on the uplink
    changed = {l.split(" = ")[0] for l in added["sysctl"] | gone["sysctl"] if ".ilnp0." not in l}
    assert changed == {"net.ipv6.conf.eth0.ignore_routes_with_linkdown"}, changed
    # multicast: ilnp0's groups (all-routers too: forwarding=1 on ilnp0); on eth0 only
    # our solicited-node group (ff02::1:ffXX:XXXX; the link-local made from the same
    # MAC may share it: then its user count changes)
    sn = str(ipaddress.IPv6Address(f"ff02::1:ff{nid[10:12]}:{nid[12:16]}"))
    groups = [l for l in added["maddr"] | gone["maddr"] if not l.startswith("ilnp0 ")]
    assert groups and all(l.startswith(f"eth0 inet6 {sn}") for l in groups), (sn, groups)
    assert all("ilnp0" in l for l in added["link"]) and added["link"] and not gone["link"], added["link"]
    assert added["nft"] == set() and gone["nft"] == set()
    # plain IPv6 from the other host to this one while it runs (both run ilnpd)
    plain_ipv6_checks(bed, b, a, a_addr=B, b_addr=A)
    assert da.stop() == 0, da.log.read_text()[-2000:]
    assert snapshot_diff(before, snapshot(a)) == {}
    db.stop()
