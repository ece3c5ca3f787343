"""`ilnp-lab run dime-v4v6` (issue #26 item 4): the mobile host moves IPv6 → IPv4-only behind
a NAT → IPv6, soft and hard, while a TCP and a UDP flow run CN → MN; ILNPv6 over the v4 path
(docs/architecture.md § IPv4 and NAT) against plain IPv6 and MPTCP with IPv4 and IPv6 subflows.

Topology: `fixtures.v4_nat_topology` (seed 000's CN — R1 — {R2, R3} — MN; R2 advertises
2001:db8:2::/64 with radvd; R3's network is IPv4-only, 10.0.3.0/24 behind an nftables
masquerade; the CN is dual-stack, 192.0.2.10). The MN starts on R2's network only. Its moves,
seconds from the flows' start (`to_v4_s`, `back_s`, `overlap_s` in the file):

    soft  join R3 (IPv4: link, address, default route: DHCP's job, `fixtures.v4_join`) at
          to_v4_s, leave R2 at to_v4_s + overlap_s; join R2 again at back_s, leave R3 at
          back_s + overlap_s
    hard  leave R2 at to_v4_s, join R3 overlap_s later; leave R3 at back_s, join R2
          overlap_s later (an outage of overlap_s each way)

Schemes (one fresh testbed per scheme, move and run; runs interleaved):

* `ilnp`   ilnpd on CN and MN with `[ipv4]` (port 6740), the handoff mode named by the move
           (soft or hard); the MN knows the CN's IPv6 locator and its v4 path (a static peer;
           DNS would give an L32 record); the flows between identifier addresses.
* `plain`  plain IPv6 between the CN's address and the MN's SLAAC address on R2's network.
* `mptcp`  kernel MPTCP (both programs under mptcpize), configured as mptcp.dev and
           ip-mptcp(8) say for a client behind a NAT: the MN is the client (`subflow`
           endpoints: it opens subflows, which a NAT lets out), the CN announces its IPv4
           address (`signal` endpoint) besides the IPv6 one the connection starts on; limits
           `subflows 8 add_addr_accepted 8` on both; on the timeline the MN's endpoint for an
           address goes when its network goes and comes when it comes back (what
           NetworkManager/mptcpd do). MPTCP carries no UDP: the UDP flow runs as plain IPv6.

Flows, CN → MN, from the lab's own sender and receiver (below): TCP records and UDP datagrams
of `size` bytes at `rate_pps` each, sequence-numbered; the receiver logs when each reached the
application (CLOCK_MONOTONIC, shared by the namespaces). The MN connects to the CN for TCP
(the MPTCP client is the MN). Measured with the definitions of the other experiments
(analysis.delivered: the move events' windows, the longest gap in what reached the
application in each = its interruption; broken = nothing in the last second); lost =
sent − delivered (UDP: datagrams; TCP: records, only when the connection broke). For ILNPv6
also the LU handshake of each move (ilnpd's `lu_acked` events at the MN: the event → the
ack, and the LU's own round trip) and the data path's v4 counters (which path carried it).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

from . import analysis, experiment
from .addr import CN_NID, MN_NID, identifier_address
from .daemon import Ilnpd, Monitor, Peer
from .fixtures import CN_L64, CN_V4, CN_V6, MN_V4, v4_join, v4_nat_topology
from .services import radvd
from .testbed import Testbed, stop_process, wait_for

SCHEMES = ("ilnp", "plain", "mptcp")
MOVES = ("soft", "hard")
R2_PREFIX = "2001:db8:2::/64"
R2_L64 = "2001:0db8:0002:0000"
UDP_PORT, TCP_PORT = 7101, 7102
MPTCP_LIMITS = ("subflows", "8", "add_addr_accepted", "8")

# The receiver (on the MN): UDP datagrams to bind:port, or a TCP connection to the CN, for
# `until` (monotonic); each record's sequence number (its first 4 bytes) and arrival time.
SINK = r"""
import json, socket, struct, sys, time
proto, bind, port, size, until, peer = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
got, err, eof = [], None, None
try:
    if proto == "udp":
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        s.bind((bind, port))
        s.settimeout(0.2)
        while time.monotonic() < until:
            try:
                d = s.recv(65535)
            except socket.timeout:
                continue
            got.append([time.monotonic(), struct.unpack("!I", d[:4])[0]])
    else:
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.bind((bind, 0))
        s.settimeout(10)
        s.connect((peer, port))
        s.settimeout(0.2)
        buf = b""
        while time.monotonic() < until:
            try:
                d = s.recv(65536)
            except socket.timeout:
                continue
            if not d:
                eof = time.monotonic()
                break
            buf += d
            now = time.monotonic()
            while len(buf) >= size:
                got.append([now, struct.unpack("!I", buf[:4])[0]])
                buf = buf[size:]
except OSError as e:
    err = str(e)
print(json.dumps({"arrivals": got, "error": err, "eof": eof}))
"""

# The sender (on the CN): from `start` (monotonic) for `secs`, `pps` records of `size` bytes
# to dst:port (UDP), or to the one TCP connection it accepts on bind:port.
SOURCE = r"""
import json, socket, struct, sys, time
proto, bind, dst, port, size, pps, start, secs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]), float(sys.argv[7]), float(sys.argv[8])
sent, errors, broken = 0, 0, None
if proto == "udp":
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.bind((bind, 0))
else:
    ls = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((bind, port))
    ls.listen(1)
    ls.settimeout(start + 5 - time.monotonic())
    s, _ = ls.accept()
pad = b"\x00" * (size - 4)
while time.monotonic() < start:
    time.sleep(0.001)
while True:
    t = start + sent / pps
    if t >= start + secs:
        break
    d = t - time.monotonic()
    if d > 0:
        time.sleep(d)
    rec = struct.pack("!I", sent) + pad
    try:
        if proto == "udp":
            s.sendto(rec, (dst, port))
        else:
            s.sendall(rec)
    except OSError as e:
        errors += 1
        if proto == "tcp":
            broken = [time.monotonic(), str(e)]
            break
    sent += 1
print(json.dumps({"sent": sent, "send_errors": errors, "broken": broken}))
"""


class Spec(experiment.Spec):
    """experiments/dime-v4v6.toml: [experiment] = the full form, [quick] overrides it."""
    KEYS = {"duration_s", "runs", "schemes", "moves", "to_v4_s", "back_s", "overlap_s", "rate_pps", "size", "wan_ms"}

    def check(self, name: str, c: dict) -> None:
        path = self.path
        missing = self.KEYS - {"wan_ms"} - set(c)
        if missing:
            raise ValueError(f"{path}: [{name}]: {', '.join(sorted(missing))} missing")
        for k, known in (("schemes", SCHEMES), ("moves", MOVES)):
            bad = [x for x in c[k] if x not in known]
            if bad or not c[k]:
                raise ValueError(f"{path}: [{name}] {k} {bad or c[k]}: unknown or empty (known: {', '.join(known)})")
        if not 0 < c["to_v4_s"] < c["to_v4_s"] + c["overlap_s"] < c["back_s"] < c["back_s"] + c["overlap_s"] \
                < c["duration_s"] - 1:
            raise ValueError(f"{path}: [{name}]: need 0 < to_v4_s < to_v4_s + overlap_s < back_s < back_s + "
                             "overlap_s < duration_s - 1")
        if c["runs"] < 1 or c["rate_pps"] <= 0 or not 8 <= c["size"] <= 1400:
            raise ValueError(f"{path}: [{name}]: runs >= 1, rate_pps > 0, 8 <= size <= 1400")


OPTIONS = {"runs"}


def describe(spec: Spec) -> str:
    return f"{spec.title}  (moves: {', '.join(spec.full['moves'])}; schemes: {', '.join(spec.full['schemes'])})"


def timeline(cfg: dict, move: str) -> list[dict]:
    """The move's events: seconds from the flows' start, in the form analysis.delivered takes."""
    a, b, o = cfg["to_v4_s"], cfg["back_s"], cfg["overlap_s"]
    join4 = {"action": "up", "iface": "eth-r3", "label": "join R3 (IPv4, NAT)"}
    leave6 = {"action": "down", "iface": "eth-r2", "label": "leave R2 (IPv6)"}
    join6 = {"action": "up", "iface": "eth-r2", "label": "join R2 (IPv6)"}
    leave4 = {"action": "down", "iface": "eth-r3", "label": "leave R3 (IPv4)"}
    order = [join4, leave6, join6, leave4] if move == "soft" else [leave6, join4, leave4, join6]
    return [{**e, "t_s": t} for e, t in zip(order, (a, a + o, b, b + o))]


class _Mptcp:
    """The MPTCP configuration above: limits, the CN's IPv4 `signal` endpoint, the MN's
    `subflow` endpoint per address as its networks come and go."""

    def __init__(self, cn, mn, notes: list[str]):
        self.cn, self.mn, self.notes, self.lock = cn, mn, notes, threading.Lock()
        for n in (cn, mn):
            n.ip("mptcp", "limits", "set", *MPTCP_LIMITS)
        cn.ip("mptcp", "endpoint", "add", CN_V4, "dev", "eth0", "signal")
        self.ids = {"eth-r2": 1, "eth-r3": 2}
        self._add("eth-r2", mn.global_addrs("eth-r2")[0])

    def _add(self, iface: str, addr: str) -> None:
        with self.lock:
            p = self.mn.ip("mptcp", "endpoint", "add", addr, "dev", iface, "id", str(self.ids[iface]), "subflow",
                           check=False)
        if p.returncode:
            self.notes.append(f"mptcp endpoint add {addr}: {p.stderr.strip()}")

    def on_event(self, e: dict) -> None:
        iface = e["iface"]
        if e["action"] == "down":
            with self.lock:
                self.mn.ip("mptcp", "endpoint", "delete", "id", str(self.ids[iface]), check=False)
            return
        if iface == "eth-r3":
            self._add(iface, MN_V4)
            return

        def joined():
            try:
                addr = wait_for(lambda: self.mn.global_addrs(iface), timeout=10, interval=0.005,
                                what=f"address on {iface}")[0]
                self._add(iface, addr)
            except Exception as err:  # recorded: the result shows what MPTCP did
                self.notes.append(f"mptcp endpoint on {iface}: {err}")
        threading.Thread(target=joined, daemon=True).start()


def _apply(mn, e: dict) -> None:
    if e["action"] == "down":
        mn.set_link(e["iface"], False)
    elif e["iface"] == "eth-r3":
        v4_join(mn)
    else:
        mn.set_link(e["iface"], True)


def one(cfg: dict, scheme: str, move: str, index: int, out: Path, tag: str) -> dict:
    rdir = out / f"{scheme}-{move}-{index}"
    rdir.mkdir(parents=True, exist_ok=True)
    res: dict = {"scheme": scheme, "move": move, "run": index, "ok": False, "notes": []}
    evs = timeline(cfg, move)
    with Testbed(workdir=rdir, tag=f"{tag}{index}{SCHEMES.index(scheme)}{MOVES.index(move)}") as bed:
        t = v4_nat_topology(bed, wan_r3_ms=cfg.get("wan_ms", 0))
        cn, mn = t["cn"], t["mn"]
        radvd(t["r2"], "eth-mn", R2_PREFIX)
        wait_for(lambda: "2001:db8:2:" in mn.ip("-6", "addr", "show", "eth-r2").stdout, timeout=15,
                 what="SLAAC on R2")
        daemons, mon, mptcp, wrap = {}, None, None, []
        if scheme == "ilnp":
            extra = {"handoff": move, "ipv4": {}, "rng_seed": 1000 + index}
            daemons["cn"] = Ilnpd(cn, ["eth0"], nid=CN_NID, peers=[Peer("mn", MN_NID, [(R2_L64, 10)])],
                                  extra=dict(extra)).start()
            daemons["mn"] = Ilnpd(mn, ["eth-r2", "eth-r3"], nid=MN_NID,
                                  peers=[Peer("cn", CN_NID, [(CN_L64, 10), (f"v4:{CN_V4}:6740", 30)])],
                                  extra=dict(extra)).start()
            mon = Monitor(daemons["mn"])
            cn_addr, mn_addr = identifier_address(CN_NID), identifier_address(MN_NID)
        else:
            cn_addr, mn_addr = CN_V6, mn.global_addrs("eth-r2")[0]
        if scheme == "mptcp":
            mptcp = _Mptcp(cn, mn, res["notes"])
            wrap = ["mptcpize", "run"]
        n0 = {"cn": cn.nstat(), "mn": mn.nstat()}
        start = time.monotonic() + 3.0
        until = start + cfg["duration_s"] + 1.5
        common = [str(cfg["size"])]
        sinks = {"udp": mn.spawn("python3", "-c", SINK, "udp", mn_addr, str(UDP_PORT), *common, str(until), "-",
                                 stdout=open(rdir / "sink-udp.json", "w"))}
        srcs = {"tcp": cn.spawn(*wrap, "python3", "-c", SOURCE, "tcp", cn_addr, "-", str(TCP_PORT), *common,
                                str(cfg["rate_pps"]), str(start), str(cfg["duration_s"]),
                                stdout=open(rdir / "source-tcp.json", "w"))}
        mn.wait_listening_udp(UDP_PORT)
        cn.wait_listening(TCP_PORT)
        sinks["tcp"] = mn.spawn(*wrap, "python3", "-c", SINK, "tcp", mn_addr, str(TCP_PORT), *common, str(until),
                                cn_addr, stdout=open(rdir / "sink-tcp.json", "w"))
        srcs["udp"] = cn.spawn("python3", "-c", SOURCE, "udp", cn_addr, mn_addr, str(UDP_PORT), *common,
                               str(cfg["rate_pps"]), str(start), str(cfg["duration_s"]),
                               stdout=open(rdir / "source-udp.json", "w"))
        done = []
        for e in evs:
            time.sleep(max(0.0, start + e["t_s"] - time.monotonic()))
            at = time.monotonic() - start
            _apply(mn, e)
            if mptcp:
                mptcp.on_event(e)
            done.append({**e, "applied_s": round(at, 6)})
        for p in (*srcs.values(), *sinks.values()):
            try:
                p.wait(timeout=cfg["duration_s"] + 30)
            except Exception:
                stop_process(p)
        n1 = {"cn": cn.nstat(), "mn": mn.nstat()}
        res["mptcp_nstat"] = {h: {k: n1[h].get(k, 0) - n0[h].get(k, 0) for k in n1[h]
                                  if k.startswith("MPTcpExt") and n1[h].get(k, 0) != n0[h].get(k, 0)} for h in n1}
        if scheme == "mptcp":
            res["mptcp_endpoints_end"] = mn.ip("mptcp", "endpoint", "show", check=False).stdout.strip()
        if daemons:
            res["lu"] = [{"t_s": round(ts - start, 6), "rtt_ms": ev["rtt_us"] / 1000} for ts, ev in mon.of("lu_acked")]
            mon.stop()
            res["datapath"] = {h: {k: v for k, v in d.stats()["datapath"].items() if "v4" in k and v}
                               for h, d in daemons.items()}
            for d in daemons.values():
                d.stop()
    res["events"] = done
    res["flows"] = {}
    for proto in ("tcp", "udp"):
        try:
            src = json.loads((rdir / f"source-{proto}.json").read_text())
            sink = json.loads((rdir / f"sink-{proto}.json").read_text())
        except (OSError, ValueError) as err:
            res["flows"][proto] = {"error": f"no result: {err}"}
            continue
        arr = [(t - start, cfg["size"]) for t, _ in sink["arrivals"]]
        m = analysis.delivered(arr, cfg["duration_s"], evs)
        seqs = {s for _, s in sink["arrivals"]}
        # while the MN is on the IPv4/NAT network only: from the second event to the third,
        # past the first second (a hard handoff's join, soft's leave of IPv6)
        lo, hi = evs[1]["t_s"] + 1.0, evs[2]["t_s"]
        on_v4 = sum(1 for t, _ in arr if lo <= t < hi)
        res["flows"][proto] = {"sent": src["sent"], "delivered": len(seqs), "lost": src["sent"] - len(seqs),
                               "send_errors": src["send_errors"], "source_broken": src["broken"],
                               "sink_error": sink["error"], "broken_at_s": m["broken_at_s"],
                               "on_v4_only": on_v4, "on_v4_only_s": [lo, hi],
                               "interruptions_ms": {e["key"]: e["interruption_ms"] for e in m["events"]},
                               "events": m["events"], "steady_gap_ms": m["steady_gap_ms"]}
    res["ok"] = all("error" not in f for f in res["flows"].values())
    if scheme == "ilnp":
        res["handoffs"] = lu_per_event(done, res.get("lu", []))
    return res


def lu_per_event(events: list[dict], lus: list[dict]) -> list[dict]:
    """For each move event, the first LU handshake the MN completed after it (the event →
    its ack; the LU's round trip); none when the event needed none (a join under hard
    handoff that only adds a locator the peer hears of with the next LU is still one)."""
    out = []
    for e, after in zip(events, analysis.between_events(events, lus, "applied_s", "t_s")):
        out.append({"label": e["label"], "event_to_ack_ms": round((after[0]["t_s"] - e["applied_s"]) * 1000, 3)
                    if after else None, "lu_rtt_ms": after[0]["rtt_ms"] if after else None})
    return out


def run_experiment(cfg: dict, out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    tag = experiment.run_tag("v4")
    res = {"config": cfg, "runs": []}
    t0 = time.monotonic()
    cases = [(s, m) for m in cfg["moves"] for s in cfg["schemes"]]
    for i, (scheme, move) in experiment.rotations(cases, cfg["runs"]):
        r = one(cfg, scheme, move, i, out, tag)
        res["runs"].append(r)
        f = r["flows"]
        print(f"  run {i} {scheme:6} {move:5} " + "  ".join(
            f"{p}: lost {f[p].get('lost')} broken {f[p].get('broken_at_s')} gaps {f[p].get('interruptions_ms')}"
            for p in ("tcp", "udp") if p in f) + ("" if r["ok"] else "  FAILED"), file=sys.stderr)
    res["elapsed_s"] = time.monotonic() - t0
    return res


def summarise(res: dict) -> dict:
    """Per (scheme, move, flow): runs, survived, median lost, median interruption per event."""
    s: dict = {}
    for r in res["runs"]:
        for proto, f in r["flows"].items():
            if "error" in f:
                continue
            row = s.setdefault(f"{r['scheme']} {r['move']} {proto}", {"scheme": r["scheme"], "move": r["move"],
                                                                      "flow": proto, "rows": []})
            row["rows"].append(f)
    for row in s.values():
        rows = row.pop("rows")
        row["runs"] = len(rows)
        row["survived"] = sum(1 for f in rows if f["broken_at_s"] is None)
        row["on_v4"] = sum(1 for f in rows if f["on_v4_only"] > 0)
        row["lost_median"] = analysis.median([f["lost"] for f in rows])
        keys = list(rows[0]["interruptions_ms"])
        row["interruption_ms"] = {k: analysis.median([f["interruptions_ms"].get(k) for f in rows]) for k in keys}
    for r in res["runs"]:
        if r["scheme"] == "ilnp":
            for proto in r["flows"]:
                row = s.get(f"ilnp {r['move']} {proto}")
                if row is not None:
                    hs = row.setdefault("_hs", [])
                    hs.append(r.get("handoffs", []))
    for row in s.values():
        hs = row.pop("_hs", None)
        if hs:
            row["event_to_ack_ms"] = [analysis.median([h[i]["event_to_ack_ms"] for h in hs if i < len(h)])
                                      for i in range(max(len(h) for h in hs))]
            row["lu_rtt_ms"] = [analysis.median([h[i]["lu_rtt_ms"] for h in hs if i < len(h)]) for i in range(max(len(h) for h in hs))]
    return s


def _fmt(v, nd=1):
    return "-" if v is None else f"{v:.{nd}f}"


def report(out: Path, res: dict, meta: dict) -> Path:
    cfg = res["config"]
    s = summarise(res)
    labels = {m: [e["label"] for e in timeline(cfg, m)] for m in cfg["moves"]}
    L = experiment.header(meta, f"{res['elapsed_s']:.0f} s")
    L += ["## Summary", ""]
    for move in cfg["moves"]:
        il = {p: s.get(f"ilnp {move} {p}") for p in ("tcp", "udp")}
        pl = {p: s.get(f"plain {move} {p}") for p in ("tcp", "udp")}
        mp = s.get(f"mptcp {move} tcp")
        parts = []

        def carried(row):
            return f"{row['on_v4']}/{row['runs']}"
        if il["tcp"] and il["udp"]:
            parts.append(f"ILNPv6 ({move} handoff) carried TCP in {carried(il['tcp'])} runs and UDP in "
                         f"{carried(il['udp'])} while the MN was on the IPv4/NAT network only, and lost a median of "
                         f"{_fmt(il['udp']['lost_median'], 0)} UDP datagrams over the two moves")
        if pl["tcp"]:
            parts.append(f"plain IPv6 carried TCP there in {carried(pl['tcp'])}")
        if mp:
            parts.append(f"MPTCP in {carried(mp)}")
        L.append(f"* **{move}** ({'; '.join(labels[move])}): " + "; ".join(parts) + ".")
    L += ["* Seed 003 (DIME) claims IPv4/IPv6 handover and NAT traversal (with middlebox help) for DIME, and "
          "IPv4/IPv6 handover not for MPTCP (its Table IV); it gives no figures for them. ILNPv6 here crosses the "
          "NAT without middlebox help (the v4 path, RFC 4380-style). What MPTCP does is measured, configured as "
          "its docs say (below).", ""]
    L += ["## Results", "",
          f"{cfg['runs']} run(s) per scheme and move, interleaved, a fresh testbed each; flows CN → MN for "
          f"{cfg['duration_s']} s, {cfg['rate_pps']} records/s of {cfg['size']} bytes each (TCP and UDP at once). "
          "Interruption: the longest gap in what reached the application in the event's window (the other "
          "experiments' definition, analysis.delivered); `-` where the flow was broken by then (no data in its "
          "last second). Carried on IPv4 only: runs in which the application got data between 1 s after the "
          "second event and the third (the MN on the IPv4/NAT network only); plain IPv6 and MPTCP resume when "
          "the MN is back on R2's network with its old address, which is why they are not broken at the end. "
          "Survived: not broken at the end. Lost: sent − delivered (TCP: only when the connection broke). Medians "
          "over runs.", ""]
    for move in cfg["moves"]:
        L += [f"### {move}", "", "| scheme | flow | runs | carried on IPv4 only | survived | lost | " +
              " | ".join(f"{lab} (ms)" for lab in labels[move]) + " |",
              "|---|---|---|---|---|---|" + "---|" * len(labels[move])]
        for scheme in cfg["schemes"]:
            for proto in ("tcp", "udp"):
                row = s.get(f"{scheme} {move} {proto}")
                if row is None:
                    continue
                name = scheme if not (scheme == "mptcp" and proto == "udp") else "mptcp (UDP as plain IPv6)"
                L.append(f"| {name} | {proto} | {row['runs']} | {row['on_v4']} | {row['survived']} | "
                         f"{_fmt(row['lost_median'], 0)} | " +
                         " | ".join(_fmt(v) for v in row["interruption_ms"].values()) + " |")
        il = s.get(f"ilnp {move} tcp")
        if il and il.get("event_to_ack_ms"):
            L += ["", "ILNPv6's Locator Update per event (the MN's first LU acked after it, medians): event → ack "
                  + ", ".join(f"{lab}: {_fmt(v, 2)} ms" for lab, v in zip(labels[move], il["event_to_ack_ms"]))
                  + "; the LU's round trip " + ", ".join(_fmt(v, 3) for v in il["lu_rtt_ms"]) + " ms."]
        L.append("")
    dps = [r["datapath"] for r in res["runs"] if r.get("datapath")]
    if dps:
        L += ["Which path carried ILNPv6 (the data path's counters of the last ILNPv6 run): "
              f"`{json.dumps(dps[-1])}`.", ""]
    mps = [r for r in res["runs"] if r["scheme"] == "mptcp"]
    if mps:
        L += ["MPTCP's own counters (nstat deltas, last run): "
              f"`{json.dumps(mps[-1].get('mptcp_nstat'))}`; its notes: {mps[-1].get('notes') or 'none'}.", ""]
    if mps and not any(f.get("on_v4_only") for r in mps for f in r["flows"].values()):
        errs = sum(r.get("mptcp_nstat", {}).get("mn", {}).get("MPTcpExtMPJoinSynTxConnectErr", 0) for r in mps)
        L += [f"MPTCP never carried data on IPv4: the MN's `MPJoinSynTxConnectErr` counted {errs} in {len(mps)} "
              "run(s). Its in-kernel path manager opens a subflow to an address the peer announces when the "
              "ADD_ADDR arrives, at the connection's start, when the MN had no IPv4 route; it did not try that "
              "address again when the MN's IPv4 `subflow` endpoint appeared (that endpoint has only the peer's "
              "IPv6 address to pair with). The connection resumed when the MN was back on IPv6.", ""]
    L += ["Configurations: ILNPv6: ilnpd with `[ipv4]` on both ends, the handoff mode of the move; the MN's "
          "peer entry for the CN lists its IPv6 locator (preference 10) and `v4:192.0.2.10:6740` (30). "
          "MPTCP: both programs under `mptcpize run`; `ip mptcp limits set subflows 8 add_addr_accepted 8` on "
          "both; the CN: `ip mptcp endpoint add 192.0.2.10 dev eth0 signal`; the MN (the client): `ip mptcp "
          "endpoint add ADDR dev IF id N subflow` for its address on each network it is on, deleted when it "
          "leaves that network, added when it joins (mptcp.dev/pm.html, ip-mptcp(8)).", ""]
    bad = [r for r in res["runs"] if not r["ok"]]
    L += [f"* failed: {r['scheme']} {r['move']} run {r['run']}: {r['flows']}" for r in bad]
    p = out / "report.md"
    p.write_text("\n".join(L) + "\n")
    return p


def run(spec: Spec, args, meta: dict) -> int:
    out = experiment.out_dir(spec, args)
    cfg = spec.cfg(args.quick, runs=args.runs)
    res = run_experiment(cfg, out)
    return experiment.finish(sys.modules[__name__], out, res, meta, args, sum(1 for r in res["runs"] if not r["ok"]))
