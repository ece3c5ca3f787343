"""The adversary suite: `ilnp-lab run attacks` (experiments/attacks.toml; issue #42 item 7).

Every attack of docs/security.md run against two ilnpd hosts by a third host the attacker
owns, with the real peer silent, lossy and live:

    CN (the target: ilnpd, a UDP echo service) — R1 — MN (the real peer: ilnpd, a client)
                                                  |
                                                  X (the attacker: its own /64, raw sockets)

The attacker knows what DNS and the wire give away: the MN's NID and locator, the CN's
identifier address and service port, and, as an observer of the CN → MN direction only,
the CN's nonce for the MN (read from the CN's `ilnpctl ilcc show`, which stands for a
capture of one packet on that direction: it is what such an observer sees).

Peer modes: `live` (the MN sends 20 datagrams/s and answers), `lossy` (30 % of the packets
to and from the MN's link dropped by nftables on R1), `silent` (the MN sent its last
datagram before the attack and its stack drops Echo Requests: a firewall, a hard handoff).

Per attack: attempts (attacker packets), successes (what the attack wanted happened: an
attacker's datagram reached the CN's application as the MN's, or the CN's entry for the MN
took the attacker's nonce or locator, or a local mutating request was carried out; must
be 0), the counters on the CN that named the attack packets (`counted`, the attack's own
reasons, from `ilnpctl stats`), ILCC entries created on the CN, and packets the CN sent
toward third parties (to the MN's locator: the challenge echoes) and toward the attacker,
each per attacker packet.
"""

from __future__ import annotations

import grp
import json
import os
import secrets
import struct
import subprocess
import sys
import time
from pathlib import Path

from . import experiment
from .addr import CN_NID, MN_NID, address, identifier_address
from .daemon import Ilnpd, Peer, binary
from .fixtures import CN_L64, MN_L64, three_node
from .freebsd import LOCATOR_UPDATE, LU_ADVERT, PROTO_DSTOPTS, PROTO_ICMPV6, PROTO_UDP, a16, icmp6, ip6, udp
from .testbed import Testbed, wait_for

X_L64 = "2001:0db8:00ee:0000"
X_NET, X_ADDR = "2001:db8:ee::1/64", "2001:db8:ee::e/64"
PORT = 7000
CLIENT_PPS = 20  # the MN's datagrams per second to the CN (live and lossy)
SETTLE_S = 1.2  # after an attack: a challenge's deadline (at most 1 s) passes, counters settle
MODES = ["live", "lossy", "silent"]
ATTACKS = ["hijack-new-nonce", "reflected-lu", "reflected-data", "forged-lu", "nonce-guess", "lu-flood",
           "echo-flood", "forged-icmp", "group-mutation"]
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
    "group-mutation": ["control_refused_not_root"],
}

# The CN's application: a UDP echo service that logs what reached it, one line a datagram.
ECHO = r"""
import socket, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
out = open(sys.argv[3], "a", buffering=1)
while True:
    d, a = s.recvfrom(2048)
    out.write(d[:32].decode(errors="replace") + "\n")
    s.sendto(d, a)
"""
# The MN's client: RATE datagrams/s "real N" to the CN while the file STOP does not exist.
CLIENT = r"""
import os, socket, sys, time
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 0)); s.setblocking(False)
dst, rate, stop = (sys.argv[2], int(sys.argv[3])), float(sys.argv[4]), sys.argv[5]
n = 0
while not os.path.exists(stop):
    try:
        s.sendto(b"real %d" % n, dst)
    except OSError:
        pass
    n += 1
    try:
        while s.recv(2048): pass
    except OSError:
        pass
    time.sleep(1 / rate)
"""
# The attacker's sender: packets (hex, one a line) at RATE per second through a raw socket.
SENDER = r"""
import socket, sys, time
pkts = [bytes.fromhex(l) for l in open(sys.argv[1]) if l.strip()]
rate = float(sys.argv[2])
s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
t0 = time.monotonic()
for i, p in enumerate(pkts):
    if rate > 0:
        delay = t0 + i / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    dst = socket.inet_ntop(socket.AF_INET6, p[24:40])
    s.sendto(p, (dst, 0))
"""


class Spec(experiment.Spec):
    """experiments/attacks.toml: [experiment] = the full form, [quick] overrides it."""
    KEYS = {"modes", "attacks", "attempts", "flood", "flood_pps", "hijack_interval_s"}

    def check(self, name: str, c: dict) -> None:
        for k, known in (("modes", MODES), ("attacks", ATTACKS)):
            bad = [x for x in c[k] if x not in known]
            if bad or not c[k]:
                raise ValueError(f"{self.path}: [{name}] {k} {bad or c[k]}: unknown or empty "
                                 f"(known: {', '.join(known)})")
        if c["attempts"] < 1 or c["flood"] < 1 or c["flood_pps"] < 0 or c["hijack_interval_s"] <= 0:
            raise ValueError(f"{self.path}: [{name}]: attempts, flood >= 1, flood_pps >= 0, hijack_interval_s > 0")


OPTIONS: set[str] = set()


def describe(spec: Spec) -> str:
    return f"{spec.title}  (attacks: {', '.join(spec.full['attacks'])}; peer: {', '.join(spec.full['modes'])})"


def nonce_opt(nxt: int, nonce: bytes) -> bytes:
    """Our Destination Options header: the nonce option, padded to 8 bytes (PadN)."""
    body = bytes([0x8B, len(nonce)]) + nonce
    pad = (-(2 + len(body))) % 8
    if pad == 1:
        body += b"\0"
    elif pad:
        body += bytes([1, pad - 2]) + b"\0" * (pad - 2)
    return bytes([nxt, (2 + len(body)) // 8 - 1]) + body


def forged_udp(src: str, dst: str, nonce: bytes, payload: bytes) -> bytes:
    s, d = a16(src), a16(dst)
    return ip6(s, d, PROTO_DSTOPTS, nonce_opt(PROTO_UDP, nonce) + udp(s, d, 40000, PORT, payload))


def forged_lu(src: str, dst: str, nonce: bytes, l64s: list[str]) -> bytes:
    s, d = a16(src), a16(dst)
    body = bytes([len(l64s), LU_ADVERT, 0, 0]) + b"".join(
        struct.pack("!QHH", int(l.replace(":", ""), 16), 10, 300) for l in l64s)
    return ip6(s, d, PROTO_DSTOPTS, nonce_opt(PROTO_ICMPV6, nonce) + icmp6(s, d, LOCATOR_UPDATE, 0, body))


def forged_echo(src: str, dst: str, nonce: bytes, seq: int) -> bytes:
    """An Echo Request claiming `src`, with a guessed nonce: a reply would go to the claimed peer."""
    s, d = a16(src), a16(dst)
    return ip6(s, d, PROTO_DSTOPTS, nonce_opt(PROTO_ICMPV6, nonce) + icmp6(s, d, 128, 0, struct.pack("!HH", 7, seq)))


def forged_icmp(src: str, cn_wire: str, mn_wire: str) -> bytes:
    """Packet Too Big from a 'router' at `src`, quoting a CN -> MN datagram with a guessed nonce."""
    quoted = forged_udp(cn_wire, mn_wire, secrets.token_bytes(4), b"q" * 32)
    s, d = a16(src), a16(cn_wire)
    return ip6(s, d, PROTO_ICMPV6, icmp6(s, d, 2, 0, struct.pack("!I", 1280) + quoted))


def entry(d: Ilnpd, nid: str) -> dict | None:
    return next((e for e in d.ctl("ilcc", "show") if e["nid"] == nid), None)


def counters(d: Ilnpd) -> dict:
    s = d.stats()
    return {**s.get("datapath", {}), **s.get("core", {}), **s.get("control", {})}


class Bed:
    """One testbed: the topology, both daemons, the CN's echo service, the MN's client."""

    def __init__(self, bed: Testbed, mode: str):
        self.bed, self.mode = bed, mode
        self.cn, self.r1, self.mn = three_node(bed)
        self.x = bed.add_node("x")
        bed.link(self.r1, "eth-x", self.x, "eth0")
        self.r1.add_addr("eth-x", X_NET)
        self.x.add_addr("eth0", X_ADDR)
        self.x.add_route("default", "2001:db8:ee::1")
        self.cn_wire, self.mn_wire = address(CN_L64, CN_NID), address(MN_L64, MN_NID)
        self.x_claims_mn = address(X_L64, MN_NID)
        self.dcn = Ilnpd(self.cn, ["eth0"], nid=CN_NID, peers=[Peer("mn", MN_NID, [(MN_L64, 10)])]).start()
        self.dmn = Ilnpd(self.mn, ["eth0"], nid=MN_NID, peers=[Peer("cn", CN_NID, [(CN_L64, 10)])]).start()
        # a folder of an earlier run may hold them
        self.app_log, self.stop = bed.workdir / "cn-app.log", bed.workdir / "client.stop"
        self.app_log.unlink(missing_ok=True)
        self.stop.unlink(missing_ok=True)
        self.cn.spawn(sys.executable, "-c", ECHO, identifier_address(CN_NID), str(PORT), str(self.app_log))
        self.cn.wait_listening_udp(PORT)
        self.mn.spawn(sys.executable, "-c", CLIENT, identifier_address(MN_NID), identifier_address(CN_NID),
                      str(PORT), str(CLIENT_PPS), str(self.stop))
        wait_for(lambda: entry(self.dcn, MN_NID) and entry(self.dcn, MN_NID).get("nonce_rx"),
                 what="the MN's session on the CN")
        wait_for(lambda: self.app_lines("real") >= 5, what="the MN's datagrams reach the CN's application")
        if mode == "silent":
            self.stop.write_text("")
            self.mn.sh("nft add table inet atk; nft add chain inet atk c_in '{ type filter hook input priority 0; }'; "
                       "nft add rule inet atk c_in icmpv6 type echo-request drop")
        elif mode == "lossy":
            # on R1 (the MN's own egress is a BPF redirect, which netfilter's egress hook
            # does not see): 30 % of what goes to or comes from the MN's network
            self.r1.sh("nft add table inet loss; "
                       "nft add chain inet loss c_fw '{ type filter hook forward priority 10; }'; "
                       "nft add rule inet loss c_fw oifname eth-mn numgen random mod 10 lt 3 counter drop; "
                       "nft add rule inet loss c_fw iifname eth-mn numgen random mod 10 lt 3 counter drop")
        # R1 counts what the CN sends toward the MN's network (ICMPv6: challenges) and the attacker's
        self.r1.sh("nft add table inet cnt; nft add chain inet cnt c_fw '{ type filter hook forward priority 0; }'; "
                   "nft add counter inet cnt to_mn; nft add counter inet cnt to_x; "
                   "nft add rule inet cnt c_fw iifname eth-cn ip6 daddr 2001:db8:b::/64 meta l4proto ipv6-icmp "
                   "counter name to_mn; "
                   "nft add rule inet cnt c_fw iifname eth-cn ip6 daddr 2001:db8:ee::/64 counter name to_x")
        self.before = entry(self.dcn, MN_NID)

    def app_lines(self, prefix: str) -> int:
        if not self.app_log.exists():
            return 0
        return sum(1 for line in self.app_log.read_text().splitlines() if line.startswith(prefix))

    def r1_counter(self, name: str) -> int:
        j = json.loads(self.r1.run("nft", "-j", "list", "counter", "inet", "cnt", name).stdout)
        return next(x["counter"]["packets"] for x in j["nftables"] if "counter" in x)

    def send(self, pkts: list[bytes], rate: float) -> None:
        f = self.bed.workdir / f"pkts-{secrets.token_hex(3)}"
        f.write_text("\n".join(p.hex() for p in pkts))
        self.x.run(sys.executable, "-c", SENDER, str(f), str(rate), timeout=600)
        f.unlink()


def attack(b: Bed, name: str, cfg: dict) -> dict:
    """Runs one attack on bed `b`; returns its row."""
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
        "successes": int(delivered > 0) + int(moved) + mutated, "delivered_to_app": delivered,
        "session_moved": moved, "mutated": mutated, "counted": counted,
        "entries_created": len(b.dcn.ctl("ilcc", "show")) - entries0,
        "toward_third_parties": to_mn, "toward_attacker": to_x,
        "third_party_ratio": round(to_mn / attempts, 4) if attempts else 0,
        "challenges": n1.get("peer_challenge_sent", 0) - cn_n0.get("peer_challenge_sent", 0),
        # the real peer's datagrams that reached the CN's application meanwhile (live: 20/s)
        "real_peer_delivered": b.app_lines("real") - real0, "window_s": round(elapsed + SETTLE_S, 2),
    }


def ensure_group() -> bool:
    """Group ilnp (ilnpd gives its control socket to it), made if the host has none: True then."""
    try:
        grp.getgrnam("ilnp")
        return False
    except KeyError:
        subprocess.run(["groupadd", "--system", "ilnp"], check=True)
        return True


def run_experiment(cfg: dict, out: Path) -> dict:
    made = ensure_group()
    try:
        return _run(cfg, out)
    finally:
        if made:
            subprocess.run(["groupdel", "ilnp"], check=False)


def _run(cfg: dict, out: Path) -> dict:
    rows, notes = [], []
    t0 = time.monotonic()
    tag = experiment.run_tag("ia")
    for i, mode in enumerate(cfg["modes"]):
        rdir = out / mode
        rdir.mkdir(parents=True, exist_ok=True)
        with Testbed(workdir=rdir, tag=f"{tag}{i}") as bed:
            try:
                b = Bed(bed, mode)
                for name in cfg["attacks"]:
                    rows.append(attack(b, name, cfg))
                b.stop.write_text("")
            except Exception as e:  # recorded: a failed testbed is a failed run
                notes.append(f"{mode}: {e}")
    return {"config": cfg, "rows": rows, "notes": notes, "elapsed_s": round(time.monotonic() - t0, 1)}


def summarise(res: dict) -> dict:
    rows = res["rows"]
    return {"scenarios": len(rows), "successes": sum(r["successes"] for r in rows),
            "uncounted": sum(max(0, r["attempts"] - r["counted"]) for r in rows),
            "entries_created": sum(max(0, r["entries_created"]) for r in rows),
            "max_third_party_ratio": max((r["third_party_ratio"] for r in rows), default=0)}


def report(out: Path, res: dict, meta: dict) -> Path:
    s = summarise(res)
    L = experiment.header(meta, f"{res['elapsed_s']:.0f} s")
    L += ["## Summary", "", f"{s['scenarios']} scenarios, **{s['successes']} successes** (must be 0), "
          f"{s['uncounted']} attack packets not counted under their reason, {s['entries_created']} ILCC entries "
          f"created, at most {s['max_third_party_ratio']} packets toward third parties per attacker packet.", ""]
    L += ["## Results", "", "| attack | peer | attempts | successes | counted | entries | to third parties | "
          "to attacker | challenges | real peer's datagrams delivered |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        L.append(f"| {r['attack']} | {r['peer']} | {r['attempts']} | {r['successes']} | {r['counted']} | "
                 f"{r['entries_created']} | {r['toward_third_parties']} ({r['third_party_ratio']}) | "
                 f"{r['toward_attacker']} | {r['challenges']} | {r['real_peer_delivered']} in {r['window_s']} s |")
    L += ["", "Definitions: lab/ilnp_lab/attacks.py (module docstring); the threat model: docs/security.md."]
    if res["notes"]:
        L += ["", "## Notes", ""] + [f"* {n}" for n in res["notes"]]
    path = out / "report.md"
    path.write_text("\n".join(L) + "\n")
    return path


def run(spec: Spec, args, meta: dict) -> int:
    out = experiment.out_dir(spec, args)
    cfg = spec.cfg(args.quick)
    res = run_experiment(cfg, out)
    failed = len(res["notes"]) + sum(1 for r in res["rows"] if r["successes"])
    return experiment.finish(sys.modules[__name__], out, res, meta, args, failed)
