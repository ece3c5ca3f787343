"""`ilnp-lab run ipsec` (issue #44 item 4): authenticated sessions between two ILNP hosts and
what they cost: ESP over ILNPv6 (strongSwan, the swanctl.conf of docs/guide.md § 9) against
plain ILNPv6 and WireGuard between the same two hosts; throughput and the interruption of a
hard move. bench/ipsec.py runs the same measurement and prints ratios.

Testbed: `mobility_topology` (seed 000's CN — R1 — {R2, R3} — MN, radvd on R2 and R3), one
fresh testbed per scheme and run:

* `ilnp`      ilnpd on CN and MN; iperf3 between the identifier addresses.
* `esp-ilnp`  the same plus one charon per host (lab/ilnp_lab/ipsec.py): ESP between the
              identifier addresses. Without esp6 in the kernel the ESP is strongSwan's
              user-space libipsec (the report says which).
* `wireguard` no ilnpd; WireGuard between the hosts' plain IPv6 addresses (the MN's SLAAC
              address, the CN's 2001:db8:a::c), the MN configured with the CN's endpoint and
              persistent-keepalive 25, the CN learning the MN's endpoint (WireGuard's
              roaming); iperf3 between the tunnel's addresses. Without the kernel module,
              wireguard-go (the report says which).

Per scheme: TCP CN → MN at full speed for `seconds` (Mbit/s at the receiver), `rounds` times;
then a hard move of the MN (leave R2, `outage_s` of nothing, join R3) 2 s into `flow_s` of
TCP (20 Mbit/s) and UDP (250 datagrams/s) CN → MN, measured at the receiver in 0.1-s
intervals: the interruption is the longest run of empty intervals (negative: the flow had not
come back by the end, so at least that long).
"""

from __future__ import annotations

import base64
import json
import os
import statistics
import sys
import time
from pathlib import Path

from . import experiment
from .addr import CN_NID, MN_NID, identifier_address
from .daemon import Ilnpd, Peer
from .fixtures import CN_L64, CN_V6, mobility_topology
from .ipsec import Strongswan, Wireguard, kernel_esp, kernel_has
from .services import radvd
from .testbed import Testbed, wait_for

SCHEMES = ("ilnp", "esp-ilnp", "wireguard")
L2 = "2001:0db8:0002:0000"
CN_ID, MN_ID = identifier_address(CN_NID), identifier_address(MN_NID)
WG_CN, WG_MN = "fd00:77::c", "fd00:77::d"


class Spec(experiment.Spec):
    """experiments/ipsec.toml: [experiment] = the full form, [quick] overrides it."""
    KEYS = {"schemes", "seconds", "rounds", "flow_s", "outage_s"}

    def check(self, name: str, c: dict) -> None:
        bad = [s for s in c["schemes"] if s not in SCHEMES]
        if bad:
            raise ValueError(f"{self.path}: [{name}] schemes {bad}: unknown (known: {', '.join(SCHEMES)})")


OPTIONS: set[str] = set()


def describe(spec: Spec) -> str:
    return f"{spec.title}  (schemes: {', '.join(spec.full['schemes'])})"


def backends() -> dict[str, str]:
    return {"esp": "kernel (esp6)" if kernel_esp() else "strongSwan libipsec (user space: no esp6)",
            "wireguard": "kernel module" if kernel_has("WIREGUARD") else "wireguard-go (user space: no module)"}


def setup(bed: Testbed, scheme: str, workdir: Path, stop: list):
    """The two hosts with `scheme` up; (topology, the MN's address to send to). What must be
    stopped before the testbed closes goes onto `stop` as soon as it runs."""
    t = mobility_topology(bed)
    mn = t["mn"]
    radvd(t["r2"], "eth-mn", "2001:db8:2::/64")
    radvd(t["r3"], "eth-mn", "2001:db8:3::/64")
    wait_for(lambda: "2001:db8:2:" in mn.ip("-6", "addr", "show", "eth-r2").stdout, timeout=15, what="SLAAC on R2")
    if scheme == "wireguard":
        wcn = Wireguard(t["cn"], workdir / "wg-cn", WG_CN).start()
        stop.append(wcn.stop)
        wmn = Wireguard(mn, workdir / "wg-mn", WG_MN).start()
        stop.append(wmn.stop)
        wcn.add_peer(wmn.public, WG_MN)
        wmn.add_peer(wcn.public, WG_CN, endpoint=f"[{CN_V6}]:51820")
        mn.run("ping", "-6", "-c", "3", "-i", "0.2", WG_CN)  # the handshake
        return t, WG_MN
    Ilnpd(t["cn"], ["eth0"], nid=CN_NID, peers=[Peer("mn", MN_NID, [(L2, 10)])]).start()
    Ilnpd(mn, ["eth-r2", "eth-r3"], nid=MN_NID, peers=[Peer("cn", CN_NID, [(CN_L64, 10)])]).start()
    if scheme == "esp-ilnp":
        psk = "0s" + base64.b64encode(os.urandom(32)).decode()
        scn = Strongswan(t["cn"], workdir / "swan-cn", CN_ID, MN_ID, psk).start()
        stop.append(scn.stop)
        smn = Strongswan(mn, workdir / "swan-mn", MN_ID, CN_ID, psk).start()
        stop.append(smn.stop)
        smn.initiate()
    return t, MN_ID


def throughput(t, dst: str, secs: int) -> float:
    t["mn"].spawn("iperf3", "-s", "-1", "-B", dst)
    t["mn"].wait_listening(5201)
    out = t["cn"].run("iperf3", "-c", dst, "-t", str(secs), "-J", check=False, timeout=secs + 30).stdout
    return json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e6


def longest_gap(path: Path) -> float:
    """The longest run of empty 0.1-s intervals at the receiver, in seconds; negative if the
    flow had not come back by the end (then: at least that long)."""
    best = run = 0
    # the last interval is a partial one (the flow's end) when shorter than the others
    iv = [i for i in json.loads(path.read_text())["intervals"] if i["sum"]["seconds"] > 0.09]
    for i in iv:
        run = run + 1 if i["sum"]["bytes"] == 0 else 0
        best = max(best, run)
    return round(best * 0.1, 1) * (-1 if iv and iv[-1]["sum"]["bytes"] == 0 else 1)


def hard_move(t, dst: str, workdir: Path, flow_s: int, outage_s: float) -> dict[str, float]:
    cn, mn = t["cn"], t["mn"]
    for port, name in ((5301, "tcp"), (5302, "udp")):
        mn.spawn("iperf3", "-s", "-1", "-B", dst, "-p", str(port), "-i", "0.1", "-J",
                 stdout=open(workdir / f"{name}-rx.json", "w"))
        mn.wait_listening(port)
    tcp = cn.spawn("iperf3", "-c", dst, "-p", "5301", "-b", "20M", "-t", str(flow_s))
    udp = cn.spawn("iperf3", "-c", dst, "-p", "5302", "-u", "-b", "2M", "-l", "1000", "-t", str(flow_s))
    time.sleep(2)
    mn.set_link("eth-r2", False)
    time.sleep(outage_s)
    mn.set_link("eth-r3", True)
    tcp.wait(timeout=flow_s + 60)
    udp.wait(timeout=flow_s + 60)
    time.sleep(0.5)
    return {n: longest_gap(workdir / f"{n}-rx.json") for n in ("tcp", "udp")}


def one(scheme: str, cfg: dict, rdir: Path) -> dict:
    rdir.mkdir(parents=True, exist_ok=True)
    r = {"scheme": scheme, "ok": False}
    try:
        with Testbed(workdir=rdir) as bed:
            stop = []
            try:
                t, dst = setup(bed, scheme, rdir, stop)
                r["mbps"] = [throughput(t, dst, cfg["seconds"]) for _ in range(cfg["rounds"])]
                r["gap_s"] = hard_move(t, dst, rdir, cfg["flow_s"], cfg["outage_s"])
                r["ok"] = True
            finally:
                for s in reversed(stop):
                    s()
    except Exception as e:  # noqa: BLE001 (a failed run is recorded, the others go on)
        r["error"] = f"{type(e).__name__}: {e}"
    return r


def measure(cfg: dict, out: Path) -> dict:
    res = {"config": cfg, "backends": backends(), "runs": []}
    t0 = time.monotonic()
    for scheme in cfg["schemes"]:
        r = one(scheme, cfg, out / scheme)
        res["runs"].append(r)
        print(f"  {scheme:10} {r if not r['ok'] else {k: r[k] for k in ('mbps', 'gap_s')}}", file=sys.stderr)
    res["elapsed_s"] = time.monotonic() - t0
    return res


def summarise(res: dict) -> dict:
    ok = {r["scheme"]: r for r in res["runs"] if r["ok"]}
    base = statistics.median(ok["ilnp"]["mbps"]) if "ilnp" in ok else None
    s = {}
    for name, r in ok.items():
        m = statistics.median(r["mbps"])
        s[name] = {"mbps": m, "vs_ilnp": m / base if base else None, "gap_s": r["gap_s"]}
    return s


def _gap(v: float) -> str:
    return f"{v:.1f} s" if v >= 0 else f"> {-v:.0f} s (not back by the end)"


def table(res: dict) -> list[str]:
    L = ["| scheme | TCP Mbit/s (median) | vs plain ILNPv6 | hard move: TCP interruption | UDP interruption |",
         "|---|---|---|---|---|"]
    for name, v in summarise(res).items():
        ratio = f"{v['vs_ilnp']:.2f}" if v["vs_ilnp"] is not None else "-"
        L.append(f"| {name} | {v['mbps']:.0f} | {ratio} | {_gap(v['gap_s']['tcp'])} | {_gap(v['gap_s']['udp'])} |")
    return L


def report(out: Path, res: dict, meta: dict) -> Path:
    cfg, b = res["config"], res["backends"]
    L = experiment.header(meta, f"{res['elapsed_s']:.0f} s") + [
        f"ESP: {b['esp']}; WireGuard: {b['wireguard']}. TCP CN -> MN {cfg['seconds']} s x {cfg['rounds']}; "
        f"then a hard move (leave R2, {cfg['outage_s']} s of nothing, join R3) 2 s into {cfg['flow_s']} s of "
        "TCP 20 Mbit/s and UDP 250/s CN -> MN (receiver, 0.1-s intervals).", "", *table(res), ""]
    for r in res["runs"]:
        if not r["ok"]:
            L.append(f"* {r['scheme']}: FAILED: {r.get('error')}")
    path = out / "report.md"
    path.write_text("\n".join(L) + "\n")
    return path


def run(spec: Spec, args, meta: dict) -> int:
    out = experiment.out_dir(spec, args)
    res = measure(spec.cfg(args.quick), out)
    return experiment.finish(sys.modules[__name__], out, res, meta, args, sum(1 for r in res["runs"] if not r["ok"]))
