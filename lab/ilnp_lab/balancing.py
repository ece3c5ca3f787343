"""`ilnp-lab run seed002-lb`: seed 002 §V–VI (Fig. 7 topology, Figs. 8–10, Table II) and
issue #12 item 4 (reordering of one TCP flow balanced per packet over paths of different delay).

The balancing plugin (experiment.py): no move (that is mobility.py's), its factors are
weights, frame sizes and target rates, and its measurements are per-locator counts, iperf3
UDP goodput and ping RTT. Its file `experiments/seed002-lb.toml` says `plugin = "balancing"`.

Fig. 7 topology: hosts vm1 and vm2, each on two Ethernet segments ('cafe' = 2001:db8:cafe::/64
on eth0, 'd00d' = 2001:db8:d00d::/64 on eth1; each segment a Linux bridge in its own
namespace), and an RA-only router `ra` on both segments running radvd (SLAAC on the hosts).
Deviation: `ra` has forwarding on (the seed's had none): a pair whose source locator is on
one segment and destination locator on the other leaves through the source's uplink towards
its router, which forwards it to the other segment (the seed's FreeBSD hosts reached both
segments directly). Both hosts run ilnpd, per-packet policy, equal locator preference.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from . import experiment, pcap
from .analysis import ci95
from .capture import Capture
from .plots import plt, save
from .addr import identifier_address, lab_nid
from .daemon import Ilnpd, Peer
from .services import nic_segmentation, radvd
from .testbed import REORDER_COUNTERS, Node, Testbed, stop_process, wait_for

NETS = {"cafe": ("eth0", "2001:db8:cafe::/64", 0x2001_0DB8_CAFE_0000),
        "d00d": ("eth1", "2001:db8:d00d::/64", 0x2001_0DB8_D00D_0000)}
VM1_NID, VM2_NID = lab_nid(0x21), lab_nid(0x22)
ETH_IP6_UDP = 14 + 40 + 8
NONCE_OPT = 16  # our Destination Options header (16 bytes for either nonce size: ilnp_wire::destopts)


class Spec(experiment.Spec):
    """experiments/seed002-lb.toml: [experiment] = the full form, [quick] overrides it."""
    KEYS = {"weights", "echoes", "interval_s", "trials", "sizes", "rates", "points", "beyond", "flow_s",
            "sweep_weights", "reorder_s", "reorder_delay_ms"}
    DEFAULTS = {"points": None}
    QUICK_DEFAULTS = {"sizes": None}

    def check(self, name: str, c: dict) -> None:
        for w in c["weights"] + c["sweep_weights"]:
            if len(w) != 2 or min(w) < 0 or sum(w) <= 0:
                raise ValueError(f"{self.path}: [{name}] weights {w}: two non-negative weights, not both 0")
        if not (c["points"] or (c["sizes"] and c["rates"])):
            raise ValueError(f"{self.path}: [{name}]: needs points or sizes and rates")


OPTIONS = {"runs"}  # --runs N: trials per weighting


def describe(spec: Spec) -> str:
    return f"{spec.title}  (weights: {', '.join(f'{a}/{b}' for a, b in spec.full['weights'])}; no moves)"


# ---------------------------------------------------------------- topology
def build(bed: Testbed, d00d_delay_ms: float = 0, delay_host: str = "vm2") -> dict[str, Node]:
    """Fig. 7: vm1, vm2 and ra on two bridged segments. `d00d_delay_ms`: one-way delay on
    `delay_host`'s link into the d00d segment, through the lab's delay line (netem where the
    kernel has it). On vm2's (the reordering run): every packet to vm2's d00d locator is
    slower, whichever interface the sender put it on (a cross pair can reach it on-link or
    through `ra`). On vm1's: what vm1 sends from its d00d uplink is slower."""
    vm1, vm2, ra = bed.add_node("vm1"), bed.add_node("vm2"), bed.add_node("ra", router=True)
    for seg, (dev, prefix, _) in NETS.items():
        sw = bed.add_node(f"sw{seg}")
        sw.ip("link", "add", "br0", "type", "bridge")
        ports = [(vm1, dev, "p1"), (vm2, dev, "p2"), (ra, f"eth-{seg}", "p3")]
        for host, hdev, port in ports:
            if host.name == delay_host and seg == "d00d" and d00d_delay_ms:
                bed.delay_link(host, hdev, sw, port, d00d_delay_ms)
            else:
                bed.link(host, hdev, sw, port)
        for _, _, port in ports:
            if port in sw.ip("-o", "link", "show").stdout:
                sw.ip("link", "set", port, "master", "br0")
                sw.set_link(port, True)
        sw.set_link("br0", True)
        base = prefix.split("::")[0]
        ra.add_addr(f"eth-{seg}", f"{base}::1/64")
        radvd(ra, f"eth-{seg}", prefix, min_ra=3, max_ra=4, valid=600, preferred=300)
    for h in (vm1, vm2):
        for dev, _, _ in NETS.values():
            nic_segmentation(h, dev)
    for h in (vm1, vm2):
        for dev, prefix, _ in NETS.values():
            net = prefix.split("::")[0] + ":"
            wait_for(lambda: net in h.ip("-6", "addr", "show", dev).stdout and h.default_gateway(dev),
                     timeout=20, what=f"SLAAC and RA on {h.name}/{dev}")
    return {"vm1": vm1, "vm2": vm2, "ra": ra}


def slaac(node: Node, seg: str) -> str:
    dev, prefix, _ = NETS[seg]
    net = prefix.split("::")[0] + ":"
    return next(a for a in node.global_addrs(dev) if a.startswith(net))


def l64s(prefix_int: int) -> str:
    h = f"{prefix_int:016x}"
    return ":".join(h[i:i + 4] for i in range(0, 16, 4))


def start_daemons(nodes: dict[str, Node], policy: str, w: tuple[int, int]) -> tuple[Ilnpd, Ilnpd]:
    """ilnpd on both hosts, both uplinks, equal preference, weights `w` (cafe, d00d); each
    knows the other's two locators; waits until each entry lists both remote locators."""
    locs = [(l64s(p), 10) for _, _, p in NETS.values()]
    ds = []
    for me, nid, other, onid in (("vm1", VM1_NID, "vm2", VM2_NID), ("vm2", VM2_NID, "vm1", VM1_NID)):
        extra = {"balance_policy": policy,
                 "locator_pref": {dev: 10 for dev, _, _ in NETS.values()},
                 "locator_weight": {NETS["cafe"][0]: w[0], NETS["d00d"][0]: w[1]}}
        d = Ilnpd(nodes[me], [dev for dev, _, _ in NETS.values()], nid=nid, peers=[Peer(other, onid, locs)],
                  extra=extra)
        ds.append(d.start())
    for d in ds:
        wait_for(lambda: len(d.ctl("locator", "show")) >= 2, timeout=15, what=f"both locators of {d.node.name}")
    # one exchange opens the sessions both ways
    nodes["vm1"].run("ping", "-6", "-c", "3", "-i", "0.2", "-W", "2", identifier_address(VM2_NID), check=False)
    return ds[0], ds[1]


def set_weights(ds: tuple[Ilnpd, Ilnpd], w: tuple[int, int]) -> None:
    for d in ds:
        # a 0 first would leave both at 0 for a moment (refused): raise the other first
        order = [(NETS["cafe"][0], w[0]), (NETS["d00d"][0], w[1])]
        order.sort(key=lambda x: x[1] == 0)
        for dev, n in order:
            d.ctl_raw("locator", "set", dev, "weight", str(n))


# ---------------------------------------------------------------- measurements
def echo_trial(nodes, echoes: int, interval: float, out: Path) -> dict:
    """`echoes` ICMPv6 echoes vm1 → vm2's identifier address. Counted at each receiver from
    captures: the replies at vm1 by source locator (vm2's weighted choice) and by interface
    (vm1's locators, equal preference: shared), the requests at vm2 by source locator."""
    vm1, vm2 = nodes["vm1"], nodes["vm2"]
    caps = {(h.name, seg): Capture(h, out / f"{h.name}-{seg}.pcap", iface=dev, direction="in", snaplen=128)
            for h in (vm1, vm2) for seg, (dev, _, _) in NETS.items()}
    p = vm1.run("ping", "-6", "-q", "-c", str(echoes), "-i", str(interval), "-W", "2", identifier_address(VM2_NID),
                check=False, timeout=echoes * interval + 60)
    pk = {k: pcap.read(c.stop()) for k, c in caps.items()}
    r = {"sent": echoes, "ping_summary": p.stdout.strip().splitlines()[-2:] if p.stdout else []}
    for host, typ, key in (("vm1", 129, "replies"), ("vm2", 128, "requests")):
        by_src = {seg: 0 for seg in NETS}
        by_if = {}
        for seg in NETS:
            got = [x for x in pk[(host, seg)] if x.proto == pcap.ICMPV6 and x.l4[:1] == bytes([typ]) and x.nonces]
            by_if[seg] = len(got)
            for x in got:
                for s, (_, _, pre) in NETS.items():
                    if x.src_loc == pre:
                        by_src[s] += 1
        r[key] = {"by_source_locator": by_src, "by_interface": by_if, "total": sum(by_if.values())}
    return r


def udp_payload(frame: int, ilnp: bool) -> int:
    """iperf3 -l for an Ethernet frame of `frame` bytes: the ILNP frame carries the 16-byte
    nonce header, so plain IPv6 gets 16 bytes more payload (seed 002 §V-C)."""
    return frame - ETH_IP6_UDP - (NONCE_OPT if ilnp else 0)


def sweep_point(nodes, dst: str, frame: int, mbit: float, secs: float, ilnp: bool) -> dict:
    """iperf3 UDP vm1 → dst at `mbit` with `frame`-byte frames for `secs`, and ping (same
    frame size, every 10 ms) alongside: goodput at the receiver, loss, loaded RTT."""
    vm1, vm2 = nodes["vm1"], nodes["vm2"]
    ln = udp_payload(frame, ilnp)
    srv = vm2.spawn("iperf3", "-s", "-1", "-B", dst)
    vm2.wait_listening(5201)
    icmp_data = frame - 14 - 40 - 8 - (NONCE_OPT if ilnp else 0)
    pingp = vm1.spawn("ping", "-6", "-c", str(int(secs * 100)), "-i", "0.01", "-s", str(icmp_data), dst,
                      stdout=subprocess.PIPE)
    c = vm1.run("iperf3", "-c", dst, "-u", "-b", f"{mbit}M", "-l", str(ln), "-t", str(secs), "-J",
                check=False, timeout=secs + 30)
    out, _ = pingp.communicate(timeout=secs + 20)
    stop_process(srv)
    res = {"frame": frame, "target_mbit": mbit, "payload": ln, "ok": c.returncode == 0}
    try:
        j = json.loads(c.stdout)
        s = j["end"]["sum"]
        recv = j["end"].get("sum_received") or s
        lost = s.get("lost_percent", 0.0)
        res.update(sent_mbit=s["bits_per_second"] / 1e6, lost_pct=lost,
                   goodput_mbit=s["bits_per_second"] * (1 - lost / 100) / 1e6 if "sum_received" not in j["end"]
                   else recv["bits_per_second"] / 1e6)
    except (ValueError, KeyError) as e:
        res.update(ok=False, error=f"iperf3: {e}: {c.stderr.strip()[-300:]}")
    rtts = [float(w.split("=")[1]) for line in out.decode().splitlines() for w in line.split() if w.startswith("time=")]
    res["rtt_ms"], res["rtt_ci_ms"] = ci95(rtts) if rtts else (None, None)
    res["rtt_n"] = len(rtts)
    return res


def sweep_plan(cfg) -> list[tuple[int, float]]:
    if cfg.get("points"):
        return list(cfg["points"])
    return [(f, r) for f in cfg["sizes"] for r in cfg["rates"]]


def run_sweep(nodes, cfg, ilnp: bool, ds=None) -> list[dict]:
    dst = identifier_address(VM2_NID) if ilnp else slaac(nodes["vm2"], "cafe")
    groups = [(w, f"ILNPv6 {w[0]}/{w[1]}") for w in cfg["sweep_weights"]] if ilnp else [(None, "IPv6")]
    res = []
    for w, label in groups:
        if w:
            set_weights(ds, w)
        for frame in sorted({f for f, _ in sweep_plan(cfg)}):
            rates = [r for f, r in sweep_plan(cfg) if f == frame]
            if cfg["beyond"]:
                rates = list(rates)
                while rates[-1] < 10_000:
                    rates.append(rates[-1] * 2)
            for mbit in rates:
                r = sweep_point(nodes, dst, frame, mbit, cfg["flow_s"], ilnp)
                r["group"] = label
                res.append(r)
                print(f"  {label:14} {frame:5} B {mbit:7} Mbit/s: goodput {r.get('goodput_mbit', 0):8.2f}, "
                      f"loss {r.get('lost_pct', 0):6.2f} %, RTT {r['rtt_ms'] or 0:.3f} ms", file=sys.stderr)
                # beyond the seed's rates: stop once the machine no longer keeps up
                if cfg["beyond"] and mbit > 100 and r.get("goodput_mbit", 0) < 0.5 * mbit:
                    break
    return res


def rx_packets(node: Node) -> dict[str, int]:
    """Packets received on each segment's interface (which path the flow's packets took)."""
    return {seg: node.link_stats(dev)["rx_packets"] for seg, (dev, _, _) in NETS.items()}




def reorder_run(policy: str, secs: float, delay_ms: float, workdir: Path, tag: str) -> dict:
    """One TCP flow vm1 → vm2 (identifier addresses) with vm2's d00d link `delay_ms`
    slower, 50/50 weights, under `policy`: goodput, retransmissions, the kernel's reordering
    counters (nstat, both ends) and `ss -ti` of the flow in the middle of the run."""
    with Testbed(workdir=workdir / f"reorder-{policy}", tag=f"{tag}r{policy[4]}") as bed:
        nodes = build(bed, d00d_delay_ms=delay_ms)
        ds = start_daemons(nodes, policy, (50, 50))
        vm1, vm2 = nodes["vm1"], nodes["vm2"]
        dst = identifier_address(VM2_NID)
        srv = vm2.spawn("iperf3", "-s", "-1", "-B", dst)
        vm2.wait_listening(5201)
        before = {n.name: n.nstat() for n in (vm1, vm2)}
        rx0 = rx_packets(vm2)
        cli = vm1.spawn("iperf3", "-c", dst, "-t", str(secs), "-J", stdout=subprocess.PIPE)
        time.sleep(secs / 2)
        ss = vm1.run("ss", "-tin", "state", "established", f"dst = [{dst}]:5201", check=False).stdout
        out, _ = cli.communicate(timeout=secs + 30)
        after = {n.name: n.nstat() for n in (vm1, vm2)}
        rx1 = rx_packets(vm2)
        stop_process(srv)
        pairs = ds[0].ctl("policy")
        for d in ds:
            d.stop()
    res = {"policy": policy, "delay_ms": delay_ms, "ss_ti": ss.strip()}
    try:
        j = json.loads(out)
        res["goodput_mbit"] = j["end"]["sum_received"]["bits_per_second"] / 1e6
        res["retransmits"] = j["end"]["sum_sent"].get("retransmits")
    except (ValueError, KeyError) as e:
        res["error"] = f"iperf3: {e}"
    res["nstat"] = {h: {k: after[h].get(k, 0) - before[h].get(k, 0) for k in REORDER_COUNTERS} for h in after}
    res["pairs"] = pairs.get("peers", [])
    got = {seg: rx1[seg] - rx0[seg] for seg in NETS}
    res["vm2_rx_packets"] = got
    res["slow_path_pct"] = 100 * got["d00d"] / max(1, sum(got.values()))
    for w in ss.split():
        if w.startswith(("reordering:", "reord_seen:", "retrans:")):
            res.setdefault("ss", {})[w.split(":")[0]] = w.split(":", 1)[1]
    return res


# ---------------------------------------------------------------- experiment
def run_experiment(spec: Spec, out: Path, quick: bool, trials: int | None = None) -> dict:
    cfg = spec.cfg(quick, trials=trials)
    out.mkdir(parents=True, exist_ok=True)
    tag = experiment.run_tag("s2")
    res = {"config": {k: v for k, v in cfg.items()}, "echo": [], "sweep": [], "reorder": []}
    t0 = time.monotonic()
    with Testbed(workdir=out / "bed", tag=tag) as bed:
        nodes = build(bed)
        print("plain IPv6 sweep (no ilnpd)", file=sys.stderr)
        res["sweep"] += run_sweep(nodes, cfg, ilnp=False)
        ds = start_daemons(nodes, "per-packet", (50, 50))
        for w in map(tuple, cfg["weights"]):
            set_weights(ds, w)
            for t in range(cfg["trials"]):
                d = out / "echo" / f"{w[0]}-{w[1]}-{t}"
                d.mkdir(parents=True, exist_ok=True)
                r = echo_trial(nodes, cfg["echoes"], cfg["interval_s"], d)
                r.update(weights=list(w), trial=t)
                res["echo"].append(r)
                print(f"  echo {w[0]}/{w[1]} trial {t}: replies by source locator {r['replies']['by_source_locator']}, "
                      f"requests {r['requests']['by_source_locator']}", file=sys.stderr)
        print("ILNPv6 sweep", file=sys.stderr)
        res["sweep"] += run_sweep(nodes, cfg, ilnp=True, ds=ds)
        res["datapath_stats"] = {d.node.name: d.stats()["datapath"] for d in ds}
        for d in ds:
            d.stop()
    for policy in ("per-packet", "per-flow"):
        print(f"reordering: one TCP flow, {policy}", file=sys.stderr)
        res["reorder"].append(reorder_run(policy, cfg["reorder_s"], cfg["reorder_delay_ms"], out, tag))
    res["elapsed_s"] = time.monotonic() - t0
    return res


def summarise(res: dict) -> dict:
    """Per weight group: the share of the first locator (cafe) at the receiver, mean and 95 % CI
    over trials, and the deviation from the requested weighting in percentage points."""
    s = {}
    for w in map(tuple, res["config"]["weights"]):
        rows = [r for r in res["echo"] if tuple(r["weights"]) == w]
        if not rows:
            continue
        g = {}
        for key in ("replies", "requests"):
            shares = [100 * r[key]["by_source_locator"]["cafe"] / max(1, r[key]["total"]) for r in rows]
            m, ci = ci95(shares)
            g[key] = {"cafe_pct": m, "ci95": ci, "deviation_pp": m - w[0],
                      "received": sum(r[key]["total"] for r in rows), "sent": sum(r["sent"] for r in rows)}
        ifs = [100 * r["replies"]["by_interface"]["cafe"] / max(1, r["replies"]["total"]) for r in rows]
        g["replies_cafe_interface_pct"] = ci95(ifs)[0]
        s[f"{w[0]}/{w[1]}"] = g
    return s


def plots(out: Path, res: dict) -> list[str]:
    made = []
    groups = sorted({r["group"] for r in res["sweep"]})
    for frame in sorted({r["frame"] for r in res["sweep"]}):
        fig, ax = plt.subplots(1, 2, figsize=(10, 4))
        for g in groups:
            pts = sorted((r["target_mbit"], r) for r in res["sweep"] if r["group"] == g and r["frame"] == frame
                         and r.get("goodput_mbit") is not None)
            if not pts:
                continue
            xs = [p[0] for p in pts]
            ax[0].errorbar(xs, [p[1]["rtt_ms"] or 0 for p in pts], yerr=[p[1]["rtt_ci_ms"] or 0 for p in pts],
                           marker="o", linestyle="--", label=g, capsize=3)
            ax[1].plot(xs, [p[1]["goodput_mbit"] / p[0] for p in pts], marker="o", linestyle="--", label=g)
        for a in ax:
            a.set_xscale("log")
            a.set_xlabel("target goodput (Mbit/s)")
            a.legend(fontsize=8)
        ax[0].set_ylabel("mean RTT under load (ms)")
        ax[1].set_ylabel("goodput / target")
        ax[0].set_title(f"RTT, {frame}-byte frames (cf. seed Fig. 8{'a' if frame == 128 else 'b'})")
        ax[1].set_title(f"goodput ratio, {frame}-byte frames (cf. Fig. 10)")
        p = out / f"sweep-{frame}.png"
        save(fig, p)
        made.append(p.name)
    s = summarise(res)
    if s:
        fig, ax = plt.subplots(figsize=(6, 4))
        labels = list(s)
        x = range(len(labels))
        ax.bar([i - 0.2 for i in x], [s[k]["replies"]["cafe_pct"] for k in labels], 0.4, label="measured (cafe)",
               yerr=[s[k]["replies"]["ci95"] or 0 for k in labels], capsize=3)
        ax.bar([i + 0.2 for i in x], [float(k.split("/")[0]) for k in labels], 0.4, label="requested")
        ax.set_xticks(list(x), labels)
        ax.set_ylabel("% of echo replies from locator cafe")
        ax.set_title("volume balancing at the receiver (cf. seed Fig. 9)")
        ax.legend()
        p = out / "balance.png"
        save(fig, p)
        made.append(p.name)
    return made


def report(out: Path, res: dict, meta: dict) -> Path:
    s = summarise(res)
    figs = plots(out, res)
    L = experiment.header(meta, f"{res['elapsed_s']:.0f} s") + [
         "Topology: seed 002 Fig. 7 (vm1, vm2 each on segments cafe and d00d; `ra` advertises both prefixes; "
         "ILNPv6 per-packet policy, equal locator preference, weights = the seed's locator precedence).", "",
         "## Volume balancing (seed Fig. 9)", "",
         f"{res['config']['echoes']} echoes vm1 → vm2 every {res['config']['interval_s']} s, "
         f"{res['config']['trials']} trial(s) per weighting. Counted at each receiver by the sender's source locator: "
         "echo replies at vm1 (vm2's choice), requests at vm2 (vm1's choice). Seed: within 0.1 % of the weighting.", "",
         "| weights cafe/d00d | replies cafe % (95 % CI) | deviation (pp) | requests cafe % | replies rcvd/sent | "
         "replies on vm1's cafe interface % |", "|---|---|---|---|---|---|"]
    for k, g in s.items():
        ci = f" ± {g['replies']['ci95']:.3f}" if g["replies"]["ci95"] is not None else " (1 trial)"
        L.append(f"| {k} | {g['replies']['cafe_pct']:.2f}{ci} | {g['replies']['deviation_pp']:+.2f} | "
                 f"{g['requests']['cafe_pct']:.2f} | {g['replies']['received']}/{g['replies']['sent']} | "
                 f"{g['replies_cafe_interface_pct']:.1f} |")
    L += ["", "The interface a reply arrives on is the *destination* locator: vm1 advertises both with equal "
          "preference, so the peer shares them equally (architecture.md § Load balancing: the peer decides which "
          "of its locators carry traffic, weights split over our uplinks).", "",
          "## Overhead vs IPv6 (seed Figs. 8, 10; Table II)", "",
          "iperf3 UDP vm1 → vm2 (`-u -b RATE -l LEN`, frame size counted on the Ethernet wire; ILNPv6 frames carry "
          f"the {NONCE_OPT}-byte nonce header (the seed's was 8), so IPv6 gets {NONCE_OPT} bytes more payload, as in the "
          "seed), ping of the same frame size "
          "every 10 ms alongside (loaded RTT). IPv6: vm2's SLAAC address, no ilnpd running.", "",
          "| group | frame B | target Mbit/s | goodput Mbit/s | goodput/target | loss % | RTT ms (95 % CI) | "
          "vs IPv6 goodput |", "|---|---|---|---|---|---|---|---|"]
    plain = {(r["frame"], r["target_mbit"]): r for r in res["sweep"] if r["group"] == "IPv6"}
    table2 = []
    for r in res["sweep"]:
        gp = r.get("goodput_mbit")
        base = plain.get((r["frame"], r["target_mbit"]), {}).get("goodput_mbit")
        rel = f"{gp / base:.2f}" if gp is not None and base else "-"
        rtt = f"{r['rtt_ms']:.3f} ± {r['rtt_ci_ms']:.3f}" if r.get("rtt_ci_ms") is not None else "-"
        gps = f"{gp:.2f}" if gp is not None else "failed"
        ratio = f"{gp / r['target_mbit']:.3f}" if gp is not None else "-"
        L.append(f"| {r['group']} | {r['frame']} | {r['target_mbit']} | {gps} | {ratio} | "
                 f"{r.get('lost_pct', 0):.2f} | {rtt} | {rel} |")
        if r.get("lost_pct", 0) > 0.01:
            table2.append(r)
    L += ["", "Groups with mean loss > 100 ppm (cf. Table II):", ""]
    L += [f"* {r['frame']} B, {r['target_mbit']} Mbit/s, {r['group']}: {r['lost_pct']:.2f} %" for r in table2] or ["* none"]
    L += ["", "Seed 002 (FreeBSD VMs): RTT constantly higher for ILNPv6; 1514-byte goodput unaffected; 128-byte "
          "goodput ≈ 50 % of IPv6 above 10 Mbit/s; 48 % loss at 128 B / 100 Mbit/s (VMware switch saturated).", "",
          "## Reordering: one TCP flow over two paths of different delay (issue #12 item 4)", "",
          f"vm2's link into segment d00d has {res['config']['reorder_delay_ms']} ms one-way delay (ilnp-delayline), weights 50/50. "
          "Counters are nstat deltas over the run (sender vm1 / receiver vm2).", "",
          "| policy | packets on the slow path % | goodput Mbit/s | retransmits | TCPSACKReorder | TCPTSReorder | "
          "TCPDSACKRecv | OFOQueue (rcv) | ss reordering |", "|---|---|---|---|---|---|---|---|---|"]
    for r in res["reorder"]:
        n1, n2 = r["nstat"]["vm1"], r["nstat"]["vm2"]
        L.append(f"| {r['policy']} | {r.get('slow_path_pct', 0):.1f} | {r.get('goodput_mbit', 0):.2f} | "
                 f"{r.get('retransmits')} | "
                 f"{n1['TcpExtTCPSACKReorder']} | {n1['TcpExtTCPTSReorder']} | {n1['TcpExtTCPDSACKRecv']} | "
                 f"{n2['TcpExtTCPOFOQueue']} | {r.get('ss', {}).get('reordering', '-')} |")
    L += ["", "Figures: " + ", ".join(f"![{f}]({f})" for f in figs), ""]
    p = out / "report.md"
    p.write_text("\n".join(L) + "\n")
    return p


def run(spec: Spec, args, meta: dict) -> int:
    """`ilnp-lab run seed002-lb` (experiment.py hands the file here)."""
    out = experiment.out_dir(spec, args)
    res = run_experiment(spec, out, args.quick, args.runs)
    failed = sum(1 for r in res["sweep"] if not r.get("ok", True))
    return experiment.finish(sys.modules[__name__], out, res, meta, args, failed)
