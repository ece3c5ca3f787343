"""Names for unmodified applications (issue #13): real BIND 9 serving RFC 6742 NID/L64/LP
records, ilnpd's resolver proxy in each host (the namespace's resolv.conf points at it),
no peer files.

CN — R1 — MN, and a name server node NS behind R1 (plain IPv6).
"""

import json
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ilnp_lab import pcap
from ilnp_lab.bind import Bind, Host, resolv_conf
from ilnp_lab.daemon import Ilnpd
from ilnp_lab.fixtures import DNS_ADDR, dns_server
from ilnp_lab.testbed import wait_for
from ilnp_test_util import (CN_ID, CN_L64, CN_NID, MN_ID, MN_L64, MN_NID, MN_WIRE, Capture, identifier_address,
                            three_node)

ZONE = "lab.example"
OTHER_NID = "0200:00ff:fe00:00ee"
CLAIM_L64, CLAIM_AAAA = "2001:db8:e:0", "2001:db8:e::1"


def zone_hosts() -> list[Host]:
    """The zone, from the topology: CN and MN with NID + L64; `mn-lp` reaches MN's
    locator through an LP record; a plain IPv6 name; bad ones."""
    return [
        Host("cn", nid=CN_NID, l64s=[(CN_L64, 10)]),
        Host("mn", nid=MN_NID, l64s=[(MN_L64, 10)]),
        Host("mn-lp", nid=MN_NID, lps=[(f"net-b.{ZONE}", 10)]),
        Host("net-b", l64s=[(MN_L64, 10)]),
        Host("plain", aaaa=["2001:db8:b::d"]),
        Host("loop1", nid=OTHER_NID, lps=[(f"loop2.{ZONE}", 10)]),
        Host("loop2", lps=[(f"loop1.{ZONE}", 10)]),
        Host("nolocs", nid=OTHER_NID, aaaa=["2001:db8:b::e"]),
        # a zone owner publishing MN's NID at a locator of its own (docs/security.md)
        Host("claims-mn", nid=MN_NID, l64s=[(CLAIM_L64, 10)], aaaa=[CLAIM_AAAA]),
    ]


def named_pair(bed, upstream=None, dns_extra=None):
    """Topology + BIND + ilnpd (no peers) with the resolver proxy on CN and MN."""
    cn, r1, mn = three_node(bed)
    ns = dns_server(bed, r1)
    bind = Bind(ns, DNS_ADDR, zone_hosts()).start() if upstream is None else None
    dns = {"upstream": upstream or f"[{DNS_ADDR}]:53", **(dns_extra or {})}
    dcn = Ilnpd(cn, ["eth0"], nid=CN_NID, extra={"dns": dns}).start()
    dmn = Ilnpd(mn, ["eth0"], nid=MN_NID, extra={"dns": dns}).start()
    for n in (cn, mn):
        resolv_conf(n, "127.0.0.1")
    return cn, r1, mn, ns, bind, dcn, dmn


def getent(node, name, timeout=15):
    t = time.monotonic()
    r = node.run("getent", "ahostsv6", name, check=False, timeout=timeout)
    addrs = sorted({line.split()[0] for line in r.stdout.splitlines() if line.strip()})
    return addrs, time.monotonic() - t


def test_unmodified_apps_by_name(bed, tmp_path):
    cn, r1, mn, ns, bind, dcn, dmn = named_pair(bed)
    assert dcn.ctl("peer", "show") == [], "no peer file"
    # glibc getaddrinfo (NSS) and dig both get the identifier address
    assert getent(cn, f"mn.{ZONE}")[0] == [MN_ID]
    assert cn.run("dig", "+short", f"mn.{ZONE}", "AAAA").stdout.split() == [MN_ID]
    peers = dcn.ctl("peer", "show")
    assert [(p["name"], p["nid"], p["source"]) for p in peers] == [(f"mn.{ZONE}", MN_NID, "dns")]
    assert peers[0]["locators"] == [{"l64": MN_L64, "pref": 10}]

    cap = Capture(r1, tmp_path / "r1.pcap", iface="eth-mn")
    # curl by name
    root = bed.workdir / "www"
    root.mkdir()
    body = secrets.token_bytes(200_000)
    (root / "blob").write_bytes(body)
    mn.spawn("python3", "-m", "http.server", "--bind", MN_ID, "--directory", str(root), "8080")
    out = bed.workdir / "got"
    wait_for(lambda: cn.run("curl", "-sS", "--max-time", "5", "-o", str(out),
                            f"http://mn.{ZONE}:8080/blob", check=False).returncode == 0,
             timeout=10, interval=0.3, what="curl by name")
    assert out.read_bytes() == body
    # socat by name, from MN to CN this time (MN's proxy resolves cn.lab.example)
    cn.spawn("socat", f"TCP6-LISTEN:7000,bind=[{CN_ID}],reuseaddr,fork", "EXEC:cat")
    cn.wait_listening(7000)
    msg = secrets.token_hex(1000)
    r = mn.run("sh", "-c", f"printf %s {msg} | socat -t 2 - TCP6:cn.{ZONE}:7000", timeout=20)
    assert r.stdout == msg
    # iperf3 by name
    srv = mn.spawn("iperf3", "-s", "-1", "-B", MN_ID, "-p", "5201")
    mn.wait_listening(5201)
    r = cn.run("iperf3", "-c", f"mn.{ZONE}", "-p", "5201", "-t", "1", check=False, timeout=30)
    srv.wait(timeout=10)
    assert r.returncode == 0, r.stdout[-1500:] + r.stderr[-1500:]
    cap.stop()
    ilnp = [p for p in pcap.read(cap.path) if p.nonces and str(p.dst) == MN_WIRE]
    assert len(ilnp) > 100, "ILNPv6 (nonce option) on the wire between the hosts"
    tcp = [p for p in pcap.read(cap.path) if p.proto == pcap.TCP]
    assert all(p.nonces for p in tcp), "every TCP packet on the wire is ILNPv6"
    assert "DNS: mn.lab.example is NID" in dcn.log.read_text()


def test_plain_names_lp_and_bad_records(bed):
    cn, r1, mn, ns, bind, dcn, dmn = named_pair(bed)
    # names without ILNP records resolve exactly as without ilnpd
    for name, rtype in [(f"plain.{ZONE}", "AAAA"), (f"nolocs.{ZONE}", "A"), (f"nothere.{ZONE}", "AAAA"),
                        (f"mn.{ZONE}", "NID"), (f"mn.{ZONE}", "L64"), (ZONE, "SOA")]:
        via_proxy = bind.dig(cn, name, rtype, server="127.0.0.1", opts=("+noall", "+answer", "+comments", "+nocookie"))
        direct = bind.dig(cn, name, rtype, opts=("+noall", "+answer", "+comments", "+nocookie"))

        def strip(s):  # the header's ID and the server line differ by nature
            return [line for line in s.splitlines() if "id:" not in line and "SERVER" not in line]
        assert strip(via_proxy) == strip(direct), f"{name} {rtype}:\n{via_proxy}\n---\n{direct}"
        assert direct.strip(), f"{name} {rtype}: dig printed nothing"
    assert getent(cn, f"plain.{ZONE}")[0] == ["2001:db8:b::d"]
    # LP followed to the name holding the L64
    assert getent(cn, f"mn-lp.{ZONE}")[0] == [MN_ID]
    lp = [p for p in dcn.ctl("peer", "show") if p["name"] == f"mn-lp.{ZONE}"]
    assert lp and lp[0]["locators"] == [{"l64": MN_L64, "pref": 10}]
    # LP loop and NID without locator: a clear log line, the plain answer, at once
    addrs, took = getent(cn, f"loop1.{ZONE}")
    assert addrs == [] and took < 3, (addrs, took)
    addrs, took = getent(cn, f"nolocs.{ZONE}")
    assert addrs == ["2001:db8:b::e"] and took < 3, (addrs, took)
    log = dcn.log.read_text()
    assert "LP record: loop: loop1.lab.example. -> loop2.lab.example. -> loop1.lab.example." in log
    assert "nolocs.lab.example. NID record: NID 0200:00ff:fe00:00ee but no L64 or LP record" in log
    # nothing cached from the bad answers
    assert OTHER_NID not in {p["nid"] for p in dcn.ctl("peer", "show")}


def test_another_name_cannot_take_a_nid_held_for_a_name(bed):
    """A record belongs to the name that taught it (issue #42): another zone's answer with
    the same NID and its own locators is not stored, its client gets the plain answer,
    and a new session to the NID still goes where the first name said."""
    cn, r1, mn, ns, bind, dcn, dmn = named_pair(bed)
    assert getent(cn, f"mn.{ZONE}")[0] == [MN_ID]
    # the claim: the plain AAAA only, never MN's identifier address
    assert getent(cn, f"claims-mn.{ZONE}")[0] == [CLAIM_AAAA]
    peers = dcn.ctl("peer", "show")
    assert [(p["name"], p["locators"]) for p in peers] == [(f"mn.{ZONE}", [{"l64": MN_L64, "pref": 10}])], peers
    assert dcn.stats()["core"].get("dns_peer_other_name") == 1
    assert f"DNS: claims-mn.{ZONE} is NID {MN_NID} at [2001:0db8:000e:0000|10] TTL 30 s: other_name" in dcn.log.read_text()
    # an alias with MN's own locators (LP to net-b) is the same record, still mn's
    assert getent(cn, f"mn-lp.{ZONE}")[0] == [MN_ID]
    assert [p["name"] for p in dcn.ctl("peer", "show")] == [f"mn.{ZONE}"]
    # a session by name, opened after the claim, reaches MN
    mn.spawn("socat", f"TCP6-LISTEN:7000,bind=[{MN_ID}],reuseaddr,fork", "EXEC:cat")
    mn.wait_listening(7000)
    msg = secrets.token_hex(100)
    r = cn.run("sh", "-c", f"printf %s {msg} | socat -t 2 - TCP6:mn.{ZONE}:7000", timeout=20)
    assert r.stdout == msg
    ilcc = [e for e in dcn.ctl("ilcc", "show") if e["nid"] == MN_NID][0]
    assert [x["l64"] for x in ilcc["remote_locators"]] == [MN_L64], ilcc


def test_bad_upstream_answers(bed):
    cn, r1, mn, ns, _, dcn, dmn = named_pair(bed, upstream=f"[{DNS_ADDR}]:53", dns_extra={"timeout_ms": 500})
    script = Path(__file__).with_name("fake_dns.py")
    fake = ns.spawn(sys.executable, str(script), DNS_ADDR, "53", stdout=subprocess.PIPE)
    assert fake.stdout.readline().strip() == b"ready"
    # malformed NID RDATA: named in the log, plain answer (none), nothing learned
    addrs, took = getent(cn, f"badnid.{ZONE}")
    assert addrs == [] and took < 3
    # SERVFAIL: passed on, no hang
    addrs, took = getent(cn, f"servfail.{ZONE}")
    assert addrs == [] and took < 5
    # a spoofed answer (wrong ID) is ignored; the real one is used
    assert getent(cn, f"spoof.{ZONE}")[0] == [identifier_address("0200:00ff:fe00:0777")]
    # a truncated answer: the proxy asks again over TCP and uses the whole answer
    assert getent(cn, f"trunc.{ZONE}")[0] == [identifier_address("0200:00ff:fe00:0888")]
    # an upstream that never answers: SERVFAIL from the proxy after its timeout
    t = time.monotonic()
    r = cn.run("dig", "@127.0.0.1", f"silent.{ZONE}", "AAAA", "+time=5", "+tries=1", check=False)
    assert "SERVFAIL" in r.stdout and time.monotonic() - t < 3, r.stdout
    log = dcn.log.read_text()
    assert "badnid.lab.example. NID record: malformed RDATA (5 bytes)" in log
    assert "wrong ID" in log and "spoof.lab.example." in log
    assert "servfail.lab.example. NID record: the server answered" in log
    assert "silent.lab.example. AAAA: no answer from the upstream server (timeout); answering SERVFAIL" in log
    nids = {p["nid"] for p in dcn.ctl("peer", "show")}
    assert nids == {"0200:00ff:fe00:0777", "0200:00ff:fe00:0888"}, nids


def test_mobile_server_updates_its_l64(bed, tmp_path):
    """The server moves to a new prefix: its TSIG-signed update reaches BIND (dig), and
    a client that starts a session afterwards resolves the new L64 and connects."""
    cn, r1, mn = three_node(bed)
    ns = dns_server(bed, r1)
    bind = Bind(ns, DNS_ADDR, zone_hosts()).start()
    upstream = {"upstream": f"[{DNS_ADDR}]:53"}
    update = {"zone": ZONE, "name": f"mn.{ZONE}", "server": DNS_ADDR, "key_file": str(bind.key_file), "ttl_s": 3}
    dcn = Ilnpd(cn, ["eth0"], nid=CN_NID, extra={"dns": upstream}).start()
    # [dns.update] is a sub-table of [dns]: written as a dotted table after [dns]
    dmn = Ilnpd(mn, ["eth0"], nid=MN_NID, extra={"dns": upstream, "dns.update": update}).start()
    resolv_conf(cn, "127.0.0.1")

    def l64s():  # BIND prints L64 groups without leading zeros
        lines = bind.dig(cn, f"mn.{ZONE}", "L64", opts=("+short",)).splitlines()
        return sorted(f"{p} {':'.join(g.zfill(4) for g in l.split(':'))}" for p, l in (x.split() for x in lines if x))

    wait_for(lambda: dmn.ctl("dns", "status")["update"]["state"] == "ok", timeout=10, what="first update")
    assert l64s() == [f"10 {MN_L64}"]
    st = dmn.ctl("dns", "status")["update"]
    assert st["locators"] == [f"{MN_L64}|10"] and st["ttl_s"] == 3

    # the move: a new prefix on MN's link, the old address gone
    new_l64 = "2001:0db8:000c:0000"
    r1.ip("addr", "add", "2001:db8:c::1/64", "dev", "eth-mn", "nodad")
    t0 = time.monotonic()
    mn.ip("addr", "add", "2001:db8:c::d/64", "dev", "eth0", "nodad")
    mn.ip("-6", "route", "replace", "default", "via", "2001:db8:c::1", "dev", "eth0")
    mn.ip("addr", "del", "2001:db8:b::d/64", "dev", "eth0")
    wait_for(lambda: l64s() == [f"10 {new_l64}"], timeout=10, interval=0.02, what="BIND serves the new L64")
    took = time.monotonic() - t0
    st = dmn.ctl("dns", "status")["update"]
    assert st["updates_ok"] >= 2 and st["locators"] == [f"{new_l64}|10"], st
    print(f"update latency: locator change -> BIND serves it {took * 1e3:.0f} ms (daemon: {st['last_latency_ms']:.1f} ms)")
    assert "dns update: mn.lab.example L64 [2001:0db8:000c:0000|10] TTL 3 s accepted" in dmn.log.read_text()

    # a new client resolves the new locator and connects
    assert getent(cn, f"mn.{ZONE}")[0] == [MN_ID]
    peer = [p for p in dcn.ctl("peer", "show") if p["nid"] == MN_NID][0]
    assert peer["locators"] == [{"l64": new_l64, "pref": 10}]
    cn.spawn("socat", "-u", f"TCP6-LISTEN:7000,bind=[{CN_ID}],reuseaddr", "OPEN:/dev/null")
    mn.spawn("socat", f"TCP6-LISTEN:7001,bind=[{MN_ID}],reuseaddr,fork", "EXEC:cat")
    mn.wait_listening(7001)
    r = cn.run("sh", "-c", f"printf hello | socat -t 2 - TCP6:mn.{ZONE}:7001", timeout=20)
    assert r.stdout == "hello"
    ilcc = [e for e in dcn.ctl("ilcc", "show") if e["nid"] == MN_NID][0]
    assert new_l64 in json.dumps(ilcc), ilcc


def test_update_refused_is_logged_and_retried(bed):
    """A key BIND does not know: NOTAUTH, logged with the name, retried with back-off."""
    cn, r1, mn = three_node(bed)
    ns = dns_server(bed, r1)
    bind = Bind(ns, DNS_ADDR, zone_hosts()).start()
    bad_key = bed.workdir / "bad.key"
    bad_key.write_text('key "ilnp-update" {\n\talgorithm hmac-sha256;\n\tsecret "d3Jvbmcgc2VjcmV0IGZvciB0aGUgdGVzdA==";\n};\n')
    update = {"zone": ZONE, "name": f"mn.{ZONE}", "server": DNS_ADDR, "key_file": str(bad_key)}
    dmn = Ilnpd(mn, ["eth0"], nid=MN_NID, extra={"dns.update": update}).start()
    wait_for(lambda: (dmn.ctl("dns", "status")["update"] or {}).get("updates_failed", 0) >= 2, timeout=10,
             what="two failed attempts")
    st = dmn.ctl("dns", "status")
    assert st["proxy"] is False and st["update"]["state"] in ("failed", "pending")
    assert "NOTAUTH" in st["update"]["last_error"]
    log = dmn.log.read_text()
    assert "dns update: mn.lab.example L64 [2001:0db8:000b:0000|10]" in log and "failed (attempt 2)" in log
    assert bind.dig(mn, f"mn.{ZONE}", "L64", opts=("+short",)).split() == ["10", "2001:db8:b:0"], "zone unchanged"


ECHO_CLIENT = r"""
import socket, sys, time
s = socket.create_connection((sys.argv[1], 7001), timeout=30)
s.settimeout(0.2)
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    try:
        s.sendall(b"x")
        if s.recv(64):
            print(f"{time.monotonic():.3f}", flush=True)
    except socket.timeout:
        pass
    time.sleep(0.05)
"""


@pytest.mark.parametrize("restart", [False, True], ids=["", "after-a-kill9-of-the-cn"])
def test_both_ends_move_session_recovers_by_re_resolution(bed, restart):
    """Simultaneous hard handoff: each end's LU goes to the other's old locator and is lost;
    when CN's LU gives up, CN re-resolves mn.lab.example (MN's update published its new L64)
    and the session carries on. With `restart`, CN's ilnpd is killed and started again
    during the session first: the name it re-resolves is in its state file (before, the
    record learned from DNS was lost, and with it the way back)."""
    cn, r1, mn = three_node(bed)
    ns = dns_server(bed, r1)
    bind = Bind(ns, DNS_ADDR, zone_hosts()).start()
    fast_lu = {"handoff": "hard", "lu_initial_rto_ms": 100, "lu_max_attempts": 3}
    upstream = {"upstream": f"[{DNS_ADDR}]:53"}
    update = {"zone": ZONE, "name": f"mn.{ZONE}", "server": DNS_ADDR, "key_file": str(bind.key_file), "ttl_s": 3}
    dcn = Ilnpd(cn, ["eth0"], nid=CN_NID, extra={**fast_lu, "dns": upstream}).start()
    dmn = Ilnpd(mn, ["eth0"], nid=MN_NID, extra={**fast_lu, "dns": upstream, "dns.update": update}).start()
    resolv_conf(cn, "127.0.0.1")
    mn.spawn("socat", f"TCP6-LISTEN:7001,bind=[{MN_ID}],reuseaddr,fork", "EXEC:cat")
    mn.wait_listening(7001)
    client = cn.spawn(sys.executable, "-c", ECHO_CLIENT, f"mn.{ZONE}", "14", stdout=subprocess.PIPE)
    time.sleep(2)
    if restart:
        dcn.kill()
        dcn.start()
        (p,) = dcn.ctl("peer", "show")
        assert (p["name"], p["nid"], p["source"]) == (f"mn.{ZONE}", MN_NID, "dns"), p
        time.sleep(0.5)
    r1.ip("addr", "add", "2001:db8:a2::1/64", "dev", "eth-cn", "nodad")
    r1.ip("addr", "add", "2001:db8:c::1/64", "dev", "eth-mn", "nodad")
    # simultaneous: R1 forwards nothing while both ends change their prefix, so neither
    # end's first LU can reach the other before the other's old locator is gone
    r1.sysctl("net.ipv6.conf.all.forwarding=0")
    t_move = time.monotonic()
    for node, new, gw, old in [(cn, "2001:db8:a2::c/64", "2001:db8:a2::1", "2001:db8:a::c/64"),
                               (mn, "2001:db8:c::d/64", "2001:db8:c::1", "2001:db8:b::d/64")]:
        node.ip("addr", "add", new, "dev", "eth0", "nodad")
        node.ip("-6", "route", "replace", "default", "via", gw, "dev", "eth0")
        node.ip("addr", "del", old, "dev", "eth0")
    time.sleep(0.3)
    r1.sysctl("net.ipv6.conf.all.forwarding=1")
    out, _ = client.communicate(timeout=30)
    echoes = [float(x) for x in out.decode().split()]
    before = [t for t in echoes if t < t_move]
    after = [t for t in echoes if t > t_move]
    assert before and after, f"{len(before)} echoes before the move, {len(after)} after"
    recovered_s = after[0] - t_move
    print(f"both ends moved: first echo {recovered_s * 1e3:.0f} ms after the move")
    assert after[-1] > t_move + 6, "the session keeps working"
    # the LU went to the re-resolved locators and the session moved only on the MN's
    # ack with its own nonce (issue #42: a DNS answer is not proof)
    core = dcn.stats()["core"]
    assert core.get("dns_recovery_lu_sent", 0) >= 1 and core.get("dns_peer_recovered", 0) >= 1, core
    assert "LU sent to the re-resolved locators" in dcn.log.read_text()
    ilcc = [e for e in dmn.ctl("ilcc", "show") if e["nid"] == CN_NID][0]
    assert "2001:0db8:00a2:0000" in json.dumps(ilcc), "MN learned CN's new locator from CN's LU"


def test_dns_learned_peers_show_their_ttl_state_and_expiry(bed):
    """A DNS-learned peer shows when its records stop being used; past their TTL it is
    marked expired (its locators may be stale), in JSON and in the table."""
    cn, r1, mn = three_node(bed)
    ns = dns_server(bed, r1)
    Bind(ns, DNS_ADDR, zone_hosts(), ttl=3).start()
    dcn = Ilnpd(cn, ["eth0"], nid=CN_NID, extra={"dns": {"upstream": f"[{DNS_ADDR}]:53"}}).start()
    resolv_conf(cn, "127.0.0.1")
    assert getent(cn, f"mn.{ZONE}")[0] == [MN_ID]
    (p,) = dcn.ctl("peer", "show")
    assert p["ttl_s"] == 3 and 0 <= p["expires_in_s"] <= 3 and not p.get("expired"), p
    assert "expires in" in dcn.ctl_raw("peer", "show").stdout
    wait_for(lambda: dcn.ctl("peer", "show")[0].get("expired"), timeout=6, what="the record's TTL to run out")
    (p,) = dcn.ctl("peer", "show")
    assert p["expires_in_s"] <= 0, p
    assert "EXPIRED" in dcn.ctl_raw("peer", "show").stdout
    # a static peer has neither field; a runtime peer is said not to be kept
    r = dcn.ctl_raw("peer", "add", "cn2", OTHER_NID, "2001:db8:c::/64")
    assert "for this run only: not kept across a restart" in r.stdout, r.stdout
    static = [x for x in dcn.ctl("peer", "show") if x["nid"] == OTHER_NID][0]
    assert "expires_in_s" not in static and "expired" not in static, static
