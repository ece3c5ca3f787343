"""Host integrity (issue #10 items 2 and 3): a daemon restart loses nothing, a peer
that restarted is served again at once, a forged nonce for a live peer is still dropped.

* `kill -9` of ilnpd on either end while iperf3 (TCP and UDP) runs, restarted within
  2 s: the pinned maps and tcx links keep the fast path running, ilnp0 persists, the
  state file gives the new daemon its ILCC; iperf3 exits 0 and a move afterwards is acked.
* The CN's ilnpd stops (a reboot: no state) and starts again with a new nonce; the MN
  challenges the old CN, which answers with its new nonce: a new session is served in
  a few round trips. A forged packet with the CN's NID and a wrong nonce while the CN
  is alive: the CN answers the challenge with the old nonce; the forgery stays dropped.
* A corrupt state file: ignored with a warning naming the file.
"""

import json
import os
import struct
import time
import ipaddress

import pytest

from ilnp_lab.testbed import wait_for
from ilnp_test_util import L3, mobile_pair, CN_NID, CN_WIRE, MN_ID, MN_NID, MN_WIRE, ilnp_pair



def core(d, name):
    return d.stats()["core"].get(name, 0)


# docs/architecture.md § Restart without loss: 200 Mbit/s of TCP is 12.5 MB per 0.5 s interval
# (measured minimum 12.3 MB with ilnpd down); the bound leaves 20 % for a loaded machine
TCP_MBIT, UDP_MBIT, DOWN_S = 200, 20, 3.0
TCP_MIN_PER_HALF_S = 0.8 * TCP_MBIT * 1e6 / 8 / 2


@pytest.mark.parametrize("side", ["mn", "cn"])
def test_kill9_mid_iperf_session_survives(bed, tmp_path, side):
    """kill -9 of ilnpd on one end, down for DOWN_S while the pinned fast path carries
    TCP and UDP at the documented rates; the MN joins R3 while it is down; the new
    ilnpd adopts everything, the move's LU is acked after the restart."""
    t, dcn, dmn = mobile_pair(bed)
    cn, mn = t["cn"], t["mn"]
    try:
        secs = 10
        mn.spawn("iperf3", "-s", "-1", "-B", MN_ID, "-p", "5201")
        mn.spawn("iperf3", "-s", "-1", "-B", MN_ID, "-p", "5202")
        mn.wait_listening(5201)
        mn.wait_listening(5202)
        t_tcp = time.monotonic()
        tcp = cn.spawn("iperf3", "-c", MN_ID, "-p", "5201", "-t", str(secs), "-b", f"{TCP_MBIT}M", "-i", "0.5", "-J",
                       stdout=open(tmp_path / "tcp.json", "w"))
        udp = cn.spawn("iperf3", "-c", MN_ID, "-p", "5202", "-u", "-b", f"{UDP_MBIT}M", "-t", str(secs), "-J",
                       stdout=open(tmp_path / "udp.json", "w"))
        time.sleep(2.5)
        d = dmn if side == "mn" else dcn
        acked = core(dmn, "lu_acked")
        t_kill = time.monotonic()
        d.kill()
        assert os.path.exists(d.state_file), "no state file left by the killed daemon"
        time.sleep(1.0)
        t_move = time.monotonic()
        mn.ip("link", "set", "eth-r3", "up")  # the MN joins R3's network while ilnpd is down
        time.sleep(max(0.0, t_kill + DOWN_S - time.monotonic()))
        d.start()
        down_s = time.monotonic() - t_kill
        log = d.log.read_text()
        assert "adopting it" in log and "adopted the pinned tc" in log, log[-3000:]
        assert "restored 1 ILCC entries" in log, log[-3000:]
        # the move is acknowledged after the restart and the CN uses the new locator
        wait_for(lambda: core(dmn, "lu_acked") > acked, timeout=10, what="the move's LU acked after the restart")
        t_acked = time.monotonic()
        wait_for(lambda: L3 in [r["l64"] for e in dcn.ctl("ilcc", "show") if e["nid"] == MN_NID
                                for r in e["remote_locators"]], timeout=10, what="CN learns L3")
        assert tcp.wait(timeout=30) == 0 and udp.wait(timeout=30) == 0
        rt, ru = json.loads((tmp_path / "tcp.json").read_text()), json.loads((tmp_path / "udp.json").read_text())
        assert "error" not in rt and "error" not in ru, (rt.get("error"), ru.get("error"))
        per = [i["sum"]["bytes"] for i in rt["intervals"]]
        u = ru["end"]["sum"]
        print(f"{side}: ilnpd down {down_s:.2f} s (move at +1 s, LU acked {t_acked - t_kill:.2f} s after the kill); "
              f"TCP min {min(per) / 1e6:.1f} MB per 0.5 s {[round(b / 1e6, 1) for b in per]}; "
              f"UDP {u['packets']} datagrams, {u['lost_packets']} lost")
        if side == "mn":
            # TCP at the documented level in every half second, the downtime's included
            assert min(per) >= TCP_MIN_PER_HALF_S, (min(per), per)
        else:
            # the CN's ilnpd is down when the MN (soft handoff) starts using L3: the CN's
            # fast path punts packets from that unknown source locator to the TUN, which
            # has no reader, so the MN's ACKs are lost until the new ilnpd takes the LU
            # (documented: § Restart without loss). Data CN->MN keeps flowing (UDP: 0 lost);
            # TCP stalls from the move to the LU's ack, then catches up. Every interval
            # outside that window (0.5 s of slack each side) is at the documented level.
            def outside(i):
                a = t_tcp + 0.5 * i
                return a + 0.5 < t_move - 0.5 or a > t_acked + 0.5
            assert all(b >= TCP_MIN_PER_HALF_S for i, b in enumerate(per) if outside(i)), per
            stalled = [b for i, b in enumerate(per) if not outside(i)]
            assert len(stalled) <= 2 * (t_acked - t_move + 2), (stalled, t_acked - t_move)
        # UDP: nothing lost (the receiver's count; iperf3's end summary is the server's)
        assert u["packets"] > 0 and u["lost_packets"] == 0, u
        assert core(dcn, "bad_nonce") == 0 and core(dmn, "bad_nonce") == 0
    finally:
        for x in (dcn, dmn):
            x.stop()
    # a clean stop removes what a crash leaves
    for x in (dcn, dmn):
        assert not os.path.exists(x.state_file)
        assert not os.path.exists(x.pin_dir), os.listdir(x.pin_dir)
        assert "ilnp0" not in x.node.ip("-o", "link", "show").stdout


def forged_udp(src, dst, nonce: bytes, payload=b"forged") -> bytes:
    """IPv6 + Destination Options (nonce) + UDP, wire form (checksum over locator-zeroed
    addresses is not needed: the nonce check comes first)."""
    s, d = ipaddress.IPv6Address(src).packed, ipaddress.IPv6Address(dst).packed
    udp = struct.pack("!HHHH", 40000, 9, 8 + len(payload), 0) + payload
    dest = bytes([17, 0, 0x8B, 4]) + nonce
    return struct.pack("!IHBB", 6 << 28, len(dest) + len(udp), 60, 64) + s + d + dest + udp


def test_peer_restart_is_served_and_a_forged_nonce_is_still_dropped(bed, tmp_path):
    cn, r1, mn, dcn, dmn = ilnp_pair(bed)
    try:
        assert cn.run("ping", "-6", "-c", "2", "-i", "0.2", "-W", "2", MN_ID, check=False).returncode == 0
        old = [e for e in dmn.ctl("ilcc", "show") if e["nid"] == CN_NID][0]["nonce_rx"]
        # forged: the CN's NID and locator, a wrong nonce, sent from R1 while the CN is alive
        pkt = forged_udp(CN_WIRE, MN_WIRE, b"\x13\x37\x13\x37")
        r1.run("python3", "-c",
               "import socket;s=socket.socket(socket.AF_INET6,socket.SOCK_RAW,socket.IPPROTO_RAW);"
               f"s.sendto(bytes.fromhex('{pkt.hex()}'),('{MN_WIRE}',0))")
        wait_for(lambda: core(dmn, "peer_challenge_answered") == 1, timeout=5,
                 what=f"the live CN answers the challenge: {dmn.stats()['core']}")
        assert core(dmn, "bad_nonce") == 1 and core(dmn, "peer_restart_replaced") == 0
        assert [e for e in dmn.ctl("ilcc", "show") if e["nid"] == CN_NID][0]["nonce_rx"] == old
        # the CN reboots (after the 1 s challenge hold-off the forgery started): its
        # state is gone (a clean stop removes pins and state file)
        time.sleep(1.0)
        assert dcn.stop() == 0
        dcn.start()
        t0 = time.monotonic()
        r = cn.run("ping", "-6", "-c", "1", "-W", "3", MN_ID, check=False)
        served_ms = (time.monotonic() - t0) * 1000
        assert r.returncode == 0, (r.stdout, dmn.stats()["core"])
        rtt_ms = float(r.stdout.split("time=")[1].split()[0])
        print(f"new session after the peer restart served in {served_ms:.0f} ms (ping incl. process start), "
              f"ping's round trip {rtt_ms:.1f} ms")
        assert core(dmn, "peer_restart_replaced") == 1 and core(dmn, "peer_challenge_sent") == 2
        # served by the restarted CN's echo reply (one round trip: docs/architecture.md § Peer
        # restart measured 6 ms), not by the challenge's timeout (300 ms without an RTT
        # sample), which also counts peer_restart_replaced: the MN's event says which
        log = dmn.log.read_text()
        assert "answered with a new nonce: peer restarted" in log, log[-3000:]
        assert "unanswered: peer restarted" not in log, log[-3000:]
        # and the first ping's own round trip (challenge included) is far below the timeout:
        # < 50 ms on this LAN (the doc's 6 ms, with room for a loaded machine)
        assert rtt_ms < 50, rtt_ms
        new = [e for e in dmn.ctl("ilcc", "show") if e["nid"] == CN_NID][0]["nonce_rx"]
        assert new != old
        # the forgery with the old wrong nonce is still dropped (hold-off: no new challenge)
        r1.run("python3", "-c",
               "import socket;s=socket.socket(socket.AF_INET6,socket.SOCK_RAW,socket.IPPROTO_RAW);"
               f"s.sendto(bytes.fromhex('{pkt.hex()}'),('{MN_WIRE}',0))")
        wait_for(lambda: core(dmn, "bad_nonce") >= 3, timeout=5, what="forgery counted")
        assert [e for e in dmn.ctl("ilcc", "show") if e["nid"] == CN_NID][0]["nonce_rx"] == new
    finally:
        dcn.stop()
        dmn.stop()


def test_corrupt_state_file_is_ignored_with_a_warning(bed):
    cn, r1, mn, dcn, dmn = ilnp_pair(bed)
    try:
        assert cn.run("ping", "-6", "-c", "2", "-i", "0.2", "-W", "2", MN_ID, check=False).returncode == 0
        wait_for(lambda: os.path.exists(dmn.state_file), what="state file written")
        dmn.kill()
        text = open(dmn.state_file, "rb").read()
        open(dmn.state_file, "wb").write(text[: len(text) // 2])  # truncated
        dmn.start()
        log = dmn.log.read_text()
        assert f"state file {dmn.state_file}" in log and "ignored" in log, log[-3000:]
        assert "has no state in the core: removed" in log, log[-3000:]
        assert dmn.ctl("ilcc", "show") == []
        # the CN still has the old MN's nonce: it challenges, the new MN answers, served
        r = cn.run("ping", "-6", "-c", "1", "-W", "3", MN_ID, check=False)
        assert r.returncode == 0, (r.stdout, dcn.stats()["core"], dmn.stats()["core"])
        assert core(dcn, "peer_restart_replaced") == 1
    finally:
        dcn.stop()
        dmn.stop()


def test_slow_path_session_stalls_while_down_and_resumes(bed, tmp_path):
    """datapath = userspace: every packet goes through ilnpd, so while it is down the
    session stalls (the persistent ilnp0 has no reader: the TUN drops); TCP retransmits
    and the session resumes when the new ilnpd reads ilnp0 again."""
    cn, r1, mn, dcn, dmn = ilnp_pair(bed, datapath="userspace")
    try:
        mn.spawn("iperf3", "-s", "-1", "-B", MN_ID)
        mn.wait_listening(5201)
        c = cn.spawn("iperf3", "-c", MN_ID, "-t", "6", "-b", "20M", "-i", "0.5", "-J",
                     stdout=open(tmp_path / "tcp.json", "w"))
        time.sleep(2)
        dmn.kill()
        time.sleep(0.5)  # down: nothing gets through
        dmn.start()
        assert c.wait(timeout=30) == 0
        r = json.loads((tmp_path / "tcp.json").read_text())
        assert "error" not in r, r.get("error")
        per = [i["sum"]["bytes"] for i in r["intervals"]]
        print(f"userspace restart: bytes per 0.5 s {per}")
        # data again in the last two seconds, after the restart
        assert all(b > 0 for b in per[-4:]), per
    finally:
        dcn.stop()
        dmn.stop()


def test_v4_path_session_behind_a_nat_survives_a_kill9_of_the_cn(bed, tmp_path):
    """The v4 path (issue #26) is carried by ilnpd's UDP socket: while the CN's ilnpd is
    down its datagrams wait (TCP retransmits); the new ilnpd binds the port again and takes
    the NAT's observed address from the state file, so its replies reach the MN through
    the NAT at once, without a new datagram from the MN having to show it."""
    from test_ipv4_nat import MN_NID as MN, onto_v4, remote_of, v4_pair

    t, dcn, dmn = v4_pair(bed)
    cn, mn = t["cn"], t["mn"]
    mn.spawn("iperf3", "-s", "-1", "-B", MN_ID)
    mn.wait_listening(5201)
    c = cn.spawn("iperf3", "-c", MN_ID, "-t", "8", "-b", "20M", "-i", "0.5", "-J",
                 stdout=open(tmp_path / "tcp.json", "w"))
    time.sleep(1)
    onto_v4(t, dcn, dmn)
    via = remote_of(dcn, MN)["remote_locators"][0]["via"]
    time.sleep(1)
    dcn.kill()
    time.sleep(1)
    dcn.start()
    assert remote_of(dcn, MN)["remote_locators"][0].get("via") == via, "the NAT's address restored"
    assert c.wait(timeout=30) == 0
    r = json.loads((tmp_path / "tcp.json").read_text())
    assert "error" not in r, r.get("error")
    per = [i["sum"]["bytes"] for i in r["intervals"]]
    print(f"v4 path, CN restarted: bytes per 0.5 s {per}")
    assert all(b > 0 for b in per[-4:]), per  # data again in the last two seconds
