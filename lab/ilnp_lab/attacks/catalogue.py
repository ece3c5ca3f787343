"""The attacks: what each one sends, what it wants, and what names its packets on the CN.

Per attack: attempts (attacker packets), successes (what the attack wanted happened: an
attacker's datagram reached the CN's application as the MN's, or the CN's entry for the MN
took the attacker's nonce or locator, or a local mutating request was carried out; must
be 0), the counters on the CN that named the attack packets (`counted`, the attack's own
reasons, from `ilnpctl stats`), ILCC entries created on the CN, and packets the CN sent
toward third parties (to the MN's locator: the challenge echoes) and toward the attacker,
each per attacker packet.

`v4-replay`: the attacker saw one of M4's datagrams (captured on R1 before the attack: it
knows M4's nonce, it has left the nonce's scope) and replays it from its own IPv4 address,
one new port per replay, answering every Echo Request the CN sends there with that nonce
(attempts: the replays and the answers). It wants the CN's v4 path for M4 (`via`) moved to
one of its ports (`v4_path_rebound`). docs/architecture.md § IPv4 and NAT promises that it
cannot while the peer answers on the old path, and says it can when the old path does not
answer within 4×srtt (the peer silent, or the old path losing the confirmation), as a real
rebinding would: a move is a success with the live peer and a documented exposure
(`exposures`) with the lossy and the silent one, unless the path was taken with no
validation at all (`v4_nat_detected`: the attacker's datagram taken for the first on the
path, which the document allows only after a restart): a success with any peer. The replayed datagrams are delivered (a
duplicate of M4's: `v4_path_unvalidated_rx`; the holder of a nonce can inject, the same
document): reported as `delivered_to_app`, not a success. Counted: the replays and the
answers as `v4_path_unvalidated_rx` (after a move the attacker's packets come from the path
and the peer's do not: no longer comparable); toward third parties: the confirmations sent
to M4 over the old path (ICMPv6 Echo Requests inside UDP/IPv4); toward the attacker: the
challenges to its ports (and, after a move, M4's traffic).

`slow-dns`: the attacker opens `dns_clients` TCP connections (more than the proxy's cap of
64) to the CN's proxy and sends each a length prefix and one byte of a message, then
nothing. While they are open, a local client on the CN sends a UDP query every 0.5 s and
one TCP query. Successes: a UDP query not answered within 1 s, a connection beyond the cap
still open after 1 s, a connection open longer than the 10 s deadline + 1.5 s, no TCP answer
once the attacker's connections are gone. The local TCP query made while the attacker holds
the 64 slots is refused (`legit_tcp_refused`): what the cap means (docs/security.md § Local
user), reported, not a success. Counted: `tcp_slow_closed` + `tcp_refused_full` (`ilnpctl
dns status`) less the local client's own refusal.
"""

from __future__ import annotations

import grp
import json
import secrets
import subprocess
import sys
import time

from ..addr import MN_NID
from ..daemon import binary
from ..fixtures import CN_V4
from ..wire import ICMPV6
from .bed import M4_NID, X_L64, X_V4, Bed, counters, entry
from .forge import forged_echo, forged_icmp, forged_lu, forged_udp
from .scripts import DNS_CLIENT, SLOW_DNS, V4_REPLAYER


ATTACKS = ["hijack-new-nonce", "reflected-lu", "reflected-data", "forged-lu", "nonce-guess", "lu-flood",
           "echo-flood", "forged-icmp", "v4-replay", "group-mutation", "slow-dns"]
ONCE = {"slow-dns"}  # attacks on no session: run on the first peer mode's testbed only
SETTLE_S = 1.2  # after an attack: a challenge's deadline (at most 1 s) passes, counters settle
V4_REPLAY_GAP_S = 0.25  # between the attacker's replays (each from a new port)
V4_LINGER_S = 1.0  # the attacker answers challenges this long after its last replay
# slow-dns: the CN's proxy (ilnpd's MAX_TCP_CLIENTS, TCP_MESSAGE_DEADLINE)
DNS_CAP, DNS_DEADLINE_S = 64, 10.0
# what names each attack's packets on the CN (`ilnpctl stats`: core counters and fast-path reasons)
COUNTED = {
    "hijack-new-nonce": ["bad_nonce"],
    "reflected-lu": ["lu_reflected_nonce"],
    "reflected-data": ["reflected_nonce"],
    "forged-lu": ["lu_bad_nonce"],
    "nonce-guess": ["bad_nonce"],
    "lu-flood": ["lu_bad_nonce"],
    "echo-flood": ["bad_nonce"],
    "forged-icmp": ["icmp_error_unverified"],
    "v4-replay": ["v4_path_unvalidated_rx"],
    "group-mutation": ["control_refused_not_root"],
    "slow-dns": ["tcp_slow_closed", "tcp_refused_full"],
}


def attack(b: Bed, name: str, cfg: dict) -> dict:
    """Runs one attack on bed `b`; returns its row, with the CN's ilnpd's CPU time per 10^5
    attacker packets (the whole window: the real peer's traffic included) and the bytes
    toward the third party per attacker packet (issue #42's numbers, not asserted)."""
    third = "to_m4" if name == "v4-replay" else "to_mn"
    cpu0, bytes0 = b.cn_cpu_s(), b.r1_counter(third, "bytes")
    row = {"v4-replay": attack_v4_replay, "slow-dns": attack_slow_dns}.get(name, attack_ilnp)(b, name, cfg)
    n = row["attempts"]
    row["cpu_ms_per_1e5"] = round((b.cn_cpu_s() - cpu0) * 1e3 * 1e5 / n, 1) if n else 0
    row["third_party_bytes_ratio"] = round((b.r1_counter(third, "bytes") - bytes0) / n, 2) if n else 0
    return row


def attack_ilnp(b: Bed, name: str, cfg: dict) -> dict:
    """The attacks on the ILNPv6 session and the local ones (module docstring)."""
    cn_n0 = counters(b.dcn)
    entries0 = len(b.dcn.ctl("ilcc", "show"))
    to_mn0, to_x0 = b.r1_counter("to_mn"), b.r1_counter("to_x")
    app0, real0 = b.app_lines("attack"), b.app_lines("real")
    before = entry(b.dcn, MN_NID) or b.before  # this attack's baseline (an earlier one may have won)
    nonce_tx = bytes.fromhex(b.before["nonce_tx"])
    attempts, mutated = 0, 0
    t0 = time.monotonic()
    if name == "hijack-new-nonce":
        # one datagram per interval from the attacker's own locator, a new random nonce each
        pkts = [forged_udp(b.x_claims_mn, b.cn_wire, secrets.token_bytes(4), b"attack hijack %d" % i)
                for i in range(cfg["attempts"])]
        b.send(pkts, 1 / cfg["hijack_interval_s"])
        attempts = len(pkts)
    elif name == "reflected-lu":
        pkts = [forged_lu(b.x_claims_mn, b.cn_wire, nonce_tx, [X_L64]) for _ in range(cfg["attempts"])]
        b.send(pkts, 20)
        attempts = len(pkts)
    elif name == "reflected-data":
        pkts = [forged_udp(b.x_claims_mn, b.cn_wire, nonce_tx, b"attack reflected %d" % i)
                for i in range(cfg["attempts"])]
        b.send(pkts, 20)
        attempts = len(pkts)
    elif name == "forged-lu":
        pkts = [forged_lu(b.x_claims_mn, b.cn_wire, secrets.token_bytes(4), [X_L64]) for _ in range(cfg["attempts"])]
        b.send(pkts, 20)
        attempts = len(pkts)
    elif name == "nonce-guess":
        # from the MN's own locator (spoofed): a right guess would be the MN's packet
        pkts = [forged_udp(b.mn_wire, b.cn_wire, secrets.token_bytes(4), b"attack guess %d" % i)
                for i in range(cfg["flood"])]
        b.send(pkts, cfg["flood_pps"])
        attempts = len(pkts)
    elif name == "lu-flood":
        pkts = [forged_lu(b.mn_wire, b.cn_wire, secrets.token_bytes(4), [X_L64]) for _ in range(cfg["flood"])]
        b.send(pkts, cfg["flood_pps"])
        attempts = len(pkts)
    elif name == "echo-flood":
        # Echo Requests from the MN's own locator: each answered one would be a packet to the MN
        pkts = [forged_echo(b.mn_wire, b.cn_wire, secrets.token_bytes(4), i % 65536) for i in range(cfg["flood"])]
        b.send(pkts, cfg["flood_pps"])
        attempts = len(pkts)
    elif name == "forged-icmp":
        pkts = [forged_icmp("2001:db8:ee::e", b.cn_wire, b.mn_wire) for _ in range(cfg["attempts"])]
        b.send(pkts, 20)
        attempts = len(pkts)
    elif name == "group-mutation":
        # a local member of group ilnp (not root) asks to flush the ILCC and to add a peer
        gid = grp.getgrnam("ilnp").gr_gid
        for req in (["ilcc", "flush"], ["peer", "add", "evil", MN_NID, f"{X_L64}|1"]):
            attempts += 1
            argv = [str(binary("ilnpctl")), "-s", b.dcn.socket, *req]
            r = subprocess.run(["setpriv", "--reuid=65534", f"--regid={gid}", "--clear-groups", *argv],
                               capture_output=True, text=True, timeout=30)
            mutated += r.returncode == 0
    elapsed = time.monotonic() - t0
    time.sleep(SETTLE_S)
    after = entry(b.dcn, MN_NID)
    n1 = counters(b.dcn)
    had_x = any(r["l64"] == X_L64 for r in before.get("remote_locators", []))
    moved = after is None or after.get("nonce_rx") != before.get("nonce_rx") or (not had_x and any(
        r["l64"] == X_L64 for r in after.get("remote_locators", [])))
    delivered = b.app_lines("attack") - app0
    counted = sum(n1.get(k, 0) - cn_n0.get(k, 0) for k in COUNTED[name])
    to_mn, to_x = b.r1_counter("to_mn") - to_mn0, b.r1_counter("to_x") - to_x0
    return {
        "attack": name, "peer": b.mode, "attempts": attempts, "elapsed_s": round(elapsed, 2),
        "successes": int(delivered > 0) + int(moved) + mutated, "exposures": 0, "delivered_to_app": delivered,
        "session_moved": moved, "mutated": mutated, "counted": counted,
        "entries_created": len(b.dcn.ctl("ilcc", "show")) - entries0,
        "toward_third_parties": to_mn, "toward_attacker": to_x,
        "third_party_ratio": round(to_mn / attempts, 4) if attempts else 0,
        "challenges": n1.get("peer_challenge_sent", 0) - cn_n0.get("peer_challenge_sent", 0),
        # the real peer's datagrams that reached the CN's application meanwhile (live: 20/s)
        "real_peer_delivered": b.app_lines("real") - real0, "window_s": round(elapsed + SETTLE_S, 2),
    }


def v4_via(e: dict | None) -> str | None:
    """Where the CN sends M4's packets: the observed path (`via`), else the locator's own."""
    if not e or not e.get("remote_locators"):
        return None
    r = e["remote_locators"][0]
    return r.get("via") or r["l64"]


def attack_v4_replay(b: Bed, name: str, cfg: dict) -> dict:
    """The replay from another IPv4 port (module docstring)."""
    n0, entries0 = counters(b.dcn), len(b.dcn.ctl("ilcc", "show"))
    to_m4_0, to_x4_0 = b.r1_counter("to_m4"), b.r1_counter("to_x4")
    seen = b.v4_replay
    payload = seen.l4[8:40].decode(errors="replace")
    dup0, real0 = sum(1 for l in b.app_log_lines() if l == payload), b.app_lines("v4real")
    before = entry(b.dcn, M4_NID)
    hlen = (seen.raw[41] + 1) * 8  # its Destination Options header (the nonce), for the Echo Replies
    dopt = bytes([ICMPV6]) + seen.raw[41:40 + hlen]
    t0 = time.monotonic()
    r = b.x.run(sys.executable, "-c", V4_REPLAYER, seen.raw.hex(), CN_V4, dopt.hex(), X_V4, "5555",
                str(cfg["attempts"]), str(V4_REPLAY_GAP_S), str(V4_LINGER_S), timeout=120)
    elapsed = time.monotonic() - t0
    out = json.loads(r.stdout)
    time.sleep(SETTLE_S)
    after, n1 = entry(b.dcn, M4_NID), counters(b.dcn)
    d = {k: n1.get(k, 0) - n0.get(k, 0) for k in set(n1) | set(n0)
         if k.startswith("v4_") or k.startswith("ingress_punt_v4")}
    d = {k: v for k, v in sorted(d.items()) if v}
    moved = v4_via(after) != v4_via(before) or d.get("v4_path_rebound", 0) > 0
    attempts = out["replays"] + out["answered"]  # its packets: the replays and its Echo Replies
    delivered = sum(1 for l in b.app_log_lines() if l == payload) - dup0
    to_m4, to_x4 = b.r1_counter("to_m4") - to_m4_0, b.r1_counter("to_x4") - to_x4_0
    # the promise: no move while the peer answers on the old path; with the peer silent or
    # lossy a validated move is the documented exposure. A path taken with no validation at
    # all (the attacker's datagram taken for the first on the path: `v4_nat_detected`) is
    # promised nowhere but one restart wide: a success with any peer.
    unvalidated = d.get("v4_nat_detected", 0) > 0
    exposed = moved and b.mode != "live" and not unvalidated
    return {
        "attack": "v4-replay", "peer": b.mode, "attempts": attempts, "elapsed_s": round(elapsed, 2),
        "successes": int(moved and not exposed), "exposures": int(exposed), "taken_unvalidated": unvalidated,
        "delivered_to_app": delivered, "session_moved": moved, "mutated": 0,
        "counted": d.get("v4_path_unvalidated_rx", 0),
        "entries_created": len(b.dcn.ctl("ilcc", "show")) - entries0,
        "toward_third_parties": to_m4, "toward_attacker": to_x4,
        "third_party_ratio": round(to_m4 / attempts, 4) if attempts else 0,
        "challenges": d.get("v4_path_challenge_sent", 0),
        "real_peer_delivered": b.app_lines("v4real") - real0 - delivered, "window_s": round(elapsed + SETTLE_S, 2),
        "v4": {"via_before": v4_via(before), "via_after": v4_via(after), "attacker": out, "counters": d},
    }


def attack_slow_dns(b: Bed, name: str, cfg: dict) -> dict:
    """Slow TCP clients of the CN's DNS proxy (module docstring)."""
    def dns_counters() -> dict:
        return dict(b.dcn.ctl("dns", "status").get("counters", {}))
    c0, entries0 = dns_counters(), len(b.dcn.ctl("ilcc", "show"))
    to_mn0, to_x0 = b.r1_counter("to_mn"), b.r1_counter("to_x")
    done = b.bed.workdir / "slow-dns.done"
    done.unlink(missing_ok=True)
    n, hold = cfg["dns_clients"], DNS_DEADLINE_S + 2
    t0 = time.monotonic()
    atk = b.x.spawn(sys.executable, "-c", SLOW_DNS, "2001:db8:a::c", str(n), str(hold), stdout=subprocess.PIPE)
    time.sleep(1.0)  # its connections are open (70 take a few ms)
    # the CN's own client meanwhile: UDP queries while the attacker's connections are held
    legit = b.cn.spawn(sys.executable, "-c", DNS_CLIENT, str(DNS_DEADLINE_S - 2.5), str(done), stdout=subprocess.PIPE)
    closed = json.loads(atk.communicate(timeout=hold + 30)[0])["closed_after_s"]
    done.write_text("")
    got = json.loads(legit.communicate(timeout=30)[0])
    elapsed = time.monotonic() - t0
    time.sleep(SETTLE_S)
    c1 = dns_counters()
    d = {k: c1.get(k, 0) - c0.get(k, 0) for k in c1}
    held = [c for c in closed if c is None or c > 1.0]
    over_cap_held = max(0, len(held) - DNS_CAP)
    outlived = sum(1 for c in closed if c is None or c > DNS_DEADLINE_S + 1.5)
    udp_missed = got["udp_sent"] - got["udp_answered"]
    tcp_after_missed = int(not got.get("tcp_after", False))
    legit_refused = int(not got["tcp_during"])
    to_mn, to_x = b.r1_counter("to_mn") - to_mn0, b.r1_counter("to_x") - to_x0
    return {
        "attack": "slow-dns", "peer": "once", "attempts": n, "elapsed_s": round(elapsed, 2),
        "successes": udp_missed + over_cap_held + outlived + tcp_after_missed, "exposures": 0,
        "delivered_to_app": 0, "session_moved": False, "mutated": 0,
        "counted": d.get("tcp_slow_closed", 0) + d.get("tcp_refused_full", 0) - legit_refused,
        "entries_created": len(b.dcn.ctl("ilcc", "show")) - entries0,
        "toward_third_parties": to_mn, "toward_attacker": to_x,
        "third_party_ratio": round(to_mn / n, 4), "challenges": 0,
        "real_peer_delivered": 0, "window_s": round(elapsed + SETTLE_S, 2),
        "dns": {"udp_sent": got["udp_sent"], "udp_answered": got["udp_answered"],
                "udp_slowest_s": got["udp_slowest_s"], "legit_tcp_refused": legit_refused,
                "tcp_after_answered": not tcp_after_missed, "held": len(held), "over_cap_held": over_cap_held,
                "outlived_deadline": outlived,
                "held_closed_after_s": [min((c for c in held if c is not None), default=None),
                                        max((c for c in held if c is not None), default=None)],
                "counters": {k: v for k, v in d.items() if v}},
    }
