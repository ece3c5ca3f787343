"""Temporary NIDs (`[privacy]`, issue #44 item 2), through the real daemon in namespaces.

The MN runs ilnpd with `[privacy]` and a short period; the CN is an outside server that
knows nothing of the MN but its stable NID (a peer record, as DNS would give it). The CN's
server tells each client the address it saw (`SOCAT_PEERADDR`): connections from the MN
show a temporary NID, not the stable one, not the MAC's EUI-64, with u = g = 0, another one
after each period; a connection opened on one goes on after the rotation; the stable NID
still serves sessions to the MN's name; a restart of ilnpd keeps the temporary NIDs and
their sessions (state file). The stable identifier address is deprecated on ilnp0 and the
preferred temporary one is not: the kernel's source selection (RFC 6724 rule 3) does the
rest, applications unchanged.
"""

import json
import sys
import time

from ilnp_lab.addr import identifier_address
from ilnp_lab.daemon import Ilnpd, Peer
from ilnp_lab.fixtures import MN_L64, three_node
from ilnp_test_util import CN_ID, CN_L64, CN_NID
from test_nid import eui64, u_g
from test_startup import echo_session as echo

PERIOD_S = 4
IDLE_S = 3
WHO = 7400  # the CN's "who are you" port


def nid_of(addr: str) -> str:
    """The NID (last 64 bits, four groups as ilnpd writes them) of an IPv6 address."""
    import ipaddress
    b = ipaddress.IPv6Address(addr.strip().strip("[]")).packed[8:]
    return ":".join(b[i:i + 2].hex() for i in range(0, 8, 2))


def seen_by_cn(cn, mn) -> str:
    """One connection from the MN to the CN: the NID the CN saw it come from."""
    if not cn.listening(WHO):
        cn.spawn("socat", f"TCP6-LISTEN:{WHO},reuseaddr,fork", "SYSTEM:echo $SOCAT_PEERADDR")
        cn.wait_listening(WHO)
    r = mn.sh(f"socat -T 5 - 'TCP6:[{CN_ID}]:{WHO},connect-timeout=5' </dev/null", check=False, timeout=20)
    assert r.stdout.strip(), f"no answer from the CN: {r.stderr}"
    return nid_of(r.stdout.strip())


def ilnp0_addrs(mn) -> dict[str, dict]:
    """ilnp0's global addresses: NID -> the kernel's view (preferred_life_time...)."""
    j = json.loads(mn.ip("-j", "-6", "addr", "show", "dev", "ilnp0").stdout)
    return {nid_of(a["local"]): a for a in j[0]["addr_info"] if a.get("scope") == "global"}


def long_session(mn, port: int, lines: int, gap_s: float):
    """A TCP session from the MN to the CN's echo server, one line every gap_s: the
    process (its stdout: what came back)."""
    script = (f"import socket,time\n"
              f"s=socket.create_connection(('{CN_ID}',{port}),timeout=10)\n"
              f"print(s.getsockname()[0],flush=True)\n"
              f"for i in range({lines}):\n"
              f"    s.sendall(b'line%d\\n'%i); print(s.recv(100).decode().strip(),flush=True); time.sleep({gap_s})\n")
    return mn.spawn("python3", "-c", script, stdout=-1)


def session_on_temp(cn, mn, port: int, lines: int, gap_s: float):
    """An echo server on the CN at `port` and a long_session to it from the MN: the process
    and the temporary NID it runs on (its first line)."""
    cn.spawn("socat", f"TCP6-LISTEN:{port},reuseaddr,fork", "EXEC:cat")
    cn.wait_listening(port)
    sess = long_session(mn, port, lines=lines, gap_s=gap_s)
    return sess, nid_of(sess.stdout.readline().decode())


def privacy_pair(bed, privacy: dict, **extra):
    """CN and MN (three_node), ilnpd on both: the MN with `[privacy]`, the CN knowing only its
    stable NID; after the first tick (the first temporary NID drawn). (cn, mn, dmn, dcn, stable)."""
    cn, r1, mn = three_node(bed)
    dmn = Ilnpd(mn, ["eth0"], peers=[Peer("cn", CN_NID, [(CN_L64, 10)])], extra={**extra, "privacy": privacy}).start()
    stable = dmn.status()["nid"]
    dcn = Ilnpd(cn, ["eth0"], nid=CN_NID, peers=[Peer("mn", stable, [(MN_L64, 10)])]).start()
    time.sleep(1.5)  # the first temporary NID is drawn on the first tick
    return cn, mn, dmn, dcn, stable


def test_outgoing_sessions_use_rotating_temporary_nids_and_the_stable_one_still_serves(bed):
    cn, mn, dmn, dcn, stable = privacy_pair(bed, {"period_s": PERIOD_S, "valid_s": PERIOD_S * 2}, idle_timeout_s=IDLE_S)
    first = seen_by_cn(cn, mn)
    assert first != stable, "the outside server saw the stable NID"
    assert first != eui64(mn, "eth0"), "the outside server saw the MAC's EUI-64"
    assert u_g(first) == (0, 0), first
    addrs = ilnp0_addrs(mn)
    assert addrs[stable]["preferred_life_time"] == 0, ("the stable address is not deprecated", addrs)
    assert addrs[first]["preferred_life_time"] > 0, addrs
    # ilnpctl status lists it (the operator's view; no log line joins the two)
    tn = {t["nid"]: t for t in dmn.status()["temporary_nids"]}
    assert tn[first]["preferred"] and stable not in tn, tn
    assert f"{first} (preferred" in dmn.ctl_raw("status").stdout
    # a session opened on it, one line a second across the rotation
    cn.spawn("socat", "TCP6-LISTEN:7401,reuseaddr,fork", "EXEC:cat")
    cn.wait_listening(7401)
    lines = PERIOD_S + 3
    sess = long_session(mn, 7401, lines=lines, gap_s=1)
    assert nid_of(sess.stdout.readline().decode()) == first
    time.sleep(PERIOD_S + 1.5)
    # rotated: the first one deprecated (kept: its session goes on), another preferred
    addrs = ilnp0_addrs(mn)
    assert addrs[first]["preferred_life_time"] == 0, addrs
    fresh = [n for n, a in addrs.items() if a["preferred_life_time"] > 0]
    assert len(fresh) == 1 and fresh[0] not in (first, stable), addrs
    # a correspondent in a session with the first one stays on it (pinned: it keeps
    # seeing a NID it knows, not a new one beside it), new connections take the first too
    assert seen_by_cn(cn, mn) == first
    out, _ = sess.communicate(timeout=30)
    got = out.decode().split()
    assert got == [f"line{i}" for i in range(lines)], f"the session on {first} broke across the rotation: {got}"
    # its sessions ended (idle): new connections to it take the preferred one
    time.sleep(IDLE_S + 2)
    second = seen_by_cn(cn, mn)
    assert second not in (first, stable) and u_g(second) == (0, 0), (first, second)
    # past its valid time with no session left, the first one is gone
    time.sleep(max(0.0, PERIOD_S * 2 + 1 - (IDLE_S + 2)))
    assert first not in ilnp0_addrs(mn), ilnp0_addrs(mn)
    # the stable NID still serves sessions to the MN's name (once the CN's sessions with a
    # temporary one ended)
    time.sleep(IDLE_S + 2)
    assert echo(cn, mn, identifier_address(stable)) == "ilnp-hello\n"
    # the log names no temporary NID beside the stable one
    for line in dmn.log.read_text().splitlines():
        assert not (stable in line and (first in line or second in line)), line
    st = json.dumps(dmn.ctl("stats"))
    assert "temp_nid_drawn" in st, st
    assert dmn.stop() == 0 and dcn.stop() == 0


def test_a_restart_keeps_the_temporary_nids_and_their_sessions(bed):
    cn, mn, dmn, dcn, stable = privacy_pair(bed, {"period_s": 600})
    cn.spawn("socat", "TCP6-LISTEN:7402,reuseaddr,fork", "EXEC:cat")
    cn.wait_listening(7402)
    sess = long_session(mn, 7402, lines=8, gap_s=1)
    temp = nid_of(sess.stdout.readline().decode())
    assert temp != stable
    time.sleep(2)
    dmn.kill()  # a crash: the next ilnpd adopts ilnp0 and reads the state file
    dmn.start()
    out, _ = sess.communicate(timeout=30)
    assert out.decode().split() == [f"line{i}" for i in range(8)], f"the session on {temp} broke: {out}"
    assert seen_by_cn(cn, mn) == temp, "a restart drew another temporary NID"
    assert dmn.stop() == 0 and dcn.stop() == 0


def test_a_correspondent_reaches_the_stable_nid_while_it_has_a_session_on_a_temporary_one(bed):
    """The ILCC is keyed by the pair of NIDs (docs/design/privacy.md): while the MN's
    outgoing session to the CN runs on a temporary NID, the CN connects to the MN's name
    (its stable NID) and is answered; each end holds two entries, one per NID of the MN,
    with nonces of their own. On the code keyed by the remote NID alone, the MN refused the
    CN's SYNs to the stable NID (`other_local_nid`) and the CN, hearing nothing, fell back to
    plain IPv6 for it after its probe (no ILNPv6, so no mobility for that session)."""
    cn, mn, dmn, dcn, stable = privacy_pair(bed, {"period_s": 600})
    lines = 12
    sess, temp = session_on_temp(cn, mn, 7405, lines, 0.5)
    assert temp != stable
    assert sess.stdout.readline().decode().strip() == "line0"
    # the CN to the MN's name while the session on the temporary NID runs
    assert echo(cn, mn, identifier_address(stable), port=7406) == "ilnp-hello\n"
    assert dcn.ctl("stats")["core"].get("fallback_started", 0) == 0, "the CN fell back to plain IPv6"
    assert dmn.ctl("stats")["core"].get("other_local_nid", 0) == 0
    mine = sorted((e.get("local_nid") or "stable") for e in dmn.ctl("ilcc", "show") if e["nid"] == CN_NID)
    assert mine == sorted([temp, "stable"]), dmn.ctl("ilcc", "show")
    theirs = sorted(e["nid"] for e in dcn.ctl("ilcc", "show"))
    assert theirs == sorted([temp, stable]), theirs
    # one nonce per entry: the CN's two entries share none
    tx = [e["nonce_tx"] for e in dcn.ctl("ilcc", "show")]
    assert len(set(tx)) == 2 and None not in tx, tx
    out, _ = sess.communicate(timeout=30)
    assert out.decode().split() == [f"line{i}" for i in range(1, lines)], out
    # new connections to the CN still take the preferred temporary NID
    assert seen_by_cn(cn, mn) == temp
    assert dmn.stop() == 0 and dcn.stop() == 0


def test_a_new_network_draws_a_new_temporary_nid_and_a_session_on_the_old_one_moves(bed):
    from ilnp_test_util import mobile_pair
    from ilnp_lab.testbed import wait_for
    t, dcn, dmn = mobile_pair(bed, mn_extra={"idle_timeout_s": IDLE_S, "privacy": {"period_s": 600}})
    cn, mn = t["cn"], t["mn"]
    stable = dmn.status()["nid"]
    time.sleep(1.5)
    cn.spawn("socat", "TCP6-LISTEN:7403,reuseaddr,fork", "EXEC:cat")
    cn.wait_listening(7403)
    lines = 12
    sess = long_session(mn, 7403, lines=lines, gap_s=1)
    first = nid_of(sess.stdout.readline().decode())
    assert first != stable and u_g(first) == (0, 0)
    # the MN joins R3's network (2001:db8:3::/64), then leaves R2's
    mn.set_link("eth-r3", True)
    wait_for(lambda: "2001:db8:3:" in mn.ip("-6", "addr", "show", "eth-r3").stdout, timeout=15, what="SLAAC on R3")
    wait_for(lambda: any(a["preferred_life_time"] > 0 and n not in (first, stable)
                         for n, a in ilnp0_addrs(mn).items()), timeout=5, what="a new temporary NID")
    time.sleep(1)
    mn.set_link("eth-r2", False)
    out, _ = sess.communicate(timeout=40)
    got = out.decode().split()
    assert got == [f"line{i}" for i in range(lines)], f"the session on {first} did not survive the move: {got}"
    fresh = [n for n, a in ilnp0_addrs(mn).items() if a["preferred_life_time"] > 0]
    assert len(fresh) == 1 and fresh[0] not in (first, stable), ilnp0_addrs(mn)
    # once the CN's sessions with the first one ended, new connections show the new one
    time.sleep(IDLE_S + 2)
    assert seen_by_cn(cn, mn) == fresh[0]
    assert dmn.stop() == 0 and dcn.stop() == 0


def test_a_session_on_a_temporary_nid_runs_in_the_fast_path(bed):
    """The eBPF fast path carries a session on a temporary NID both ways (the entry's
    local NID: design/privacy.md): after its first packets, which create the entries in
    the slow path, neither program punts it (`egress_punt_src`, `ingress_punt_temp_nid`
    stay where they were), the MN's per-peer fast-path counters carry every line and
    the entry's slow-path counters none."""
    cn, mn, dmn, dcn, stable = privacy_pair(bed, {"period_s": 600})
    lines = 80
    sess, temp = session_on_temp(cn, mn, 7404, lines, 0.05)
    assert temp != stable
    for i in range(3):  # the first packets: both entries set up, both nonces learned
        assert sess.stdout.readline().decode().strip() == f"line{i}"
    time.sleep(0.3)

    def entry():
        return next(e for e in dmn.ctl("ilcc", "show") if e["nid"] == CN_NID)
    s0, e0 = dmn.stats()["datapath"], entry()
    out, _ = sess.communicate(timeout=30)
    got = out.decode().split()
    assert got == [f"line{i}" for i in range(3, lines)], got
    s1, e1 = dmn.stats()["datapath"], entry()
    punts = {k: s1.get(k, 0) - s0.get(k, 0) for k in ("egress_punt_src", "ingress_punt_temp_nid", "ingress_punt_other_nid")}
    assert punts == dict.fromkeys(punts, 0), (punts, s1)
    fast = {k: e1["fast"][k] - ((e0["fast"] or {}).get(k, 0)) for k in ("tx_pkts", "rx_pkts")}
    # the session went on while s0 was read (a line every 50 ms): half its lines at least
    assert min(fast.values()) >= lines // 2, (fast, e1)
    assert (e1["slow_pkts_in"], e1["slow_pkts_out"]) == (e0["slow_pkts_in"], e0["slow_pkts_out"]), (e0, e1)
    assert dmn.stop() == 0 and dcn.stop() == 0


DAD_ANSWERER = r'''
import socket, struct, sys
iface, stable, out = sys.argv[1], bytes.fromhex(sys.argv[2].replace(":", "")), sys.argv[3]
mac = bytes.fromhex(open(f"/sys/class/net/{iface}/address").read().strip().replace(":", ""))
idx = socket.if_nametoindex(iface)
sniff = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x86DD))
sniff.bind((iface, 0))
tx = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
tx.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_HOPS, 255)
tx.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_IF, idx)
print("ready", flush=True)
while True:
    f = sniff.recv(2048)
    ip = f[14:]
    # DAD: a Neighbour Solicitation (135) from the unspecified address, for a temporary NID
    if len(ip) < 64 or ip[6] != 58 or ip[40] != 135 or ip[8:24] != bytes(16):
        continue
    target = ip[48:64]
    if target[8:] == stable:
        continue
    # "that address is mine": a Neighbor Advertisement to all nodes, override, our MAC
    na = struct.pack("!BBHI", 136, 0, 0, 0x20000000) + target + bytes([2, 1]) + mac
    tx.sendto(na, ("ff02::1", 0, 0, idx))
    open(out, "w").write(socket.inet_ntop(socket.AF_INET6, target))
    break  # the first one only: the next draw must succeed
'''


def test_a_temporary_nid_another_node_has_is_dropped_and_another_drawn(bed, tmp_path):
    """Duplicate Address Detection of a temporary NID's L64:NID on the uplink: a node on
    the link that claims it (here R1, answering the first DAD probe it sees) makes ilnpd
    drop that NID (`temp_nid_dad_failed`) and draw another; the outside server sees the
    other one, never the claimed one."""
    cn, r1, mn = three_node(bed)
    mn.sysctl("net.ipv6.conf.eth0.accept_dad=1")  # the lab turns DAD off; hosts have it on
    dmn_cfg = {"privacy": {"period_s": 600}}
    out = tmp_path / "claimed"
    stable_probe = Ilnpd(mn, ["eth0"], peers=[Peer("cn", CN_NID, [(CN_L64, 10)])], extra=dmn_cfg)
    # the stable NID is known before start: the state_dir's record (nid.rs)
    dmn = stable_probe.start()
    stable = dmn.status()["nid"]
    assert dmn.stop() == 0
    ans = r1.spawn(sys.executable, "-c", DAD_ANSWERER, "eth-mn", stable, str(out), stdout=-1)
    assert ans.stdout.readline().strip() == b"ready"
    dmn.start()
    dcn = Ilnpd(cn, ["eth0"], nid=CN_NID, peers=[Peer("mn", stable, [(MN_L64, 10)])]).start()
    from ilnp_lab.testbed import wait_for
    wait_for(lambda: out.exists(), timeout=10, what="a DAD probe for a temporary NID")
    claimed = nid_of(out.read_text())
    wait_for(lambda: json.dumps(dmn.ctl("stats")).count("temp_nid_dad_failed\": 1"), timeout=10,
             what="the collision detected")
    wait_for(lambda: any(t["preferred"] and t["nid"] != claimed for t in dmn.status().get("temporary_nids", [])),
             timeout=10, what="another temporary NID")
    time.sleep(1.5)  # its own DAD
    seen = seen_by_cn(cn, mn)
    assert seen not in (claimed, stable), (seen, claimed)
    assert claimed not in ilnp0_addrs(mn)
    assert "Duplicate Address Detection failed" in dmn.log.read_text()
    assert dmn.stop() == 0 and dcn.stop() == 0
