"""`ilnp-lab run aggregation` (issue #12 item 6): two cells used at once — ILNPv6 balancing
(per-flow with several TCP flows, per-packet with one) vs MPTCP on the same cells, plain
IPv6 on one cell as the floor.

Topology: seed 000's (experiments/seed000-tcp.toml: CN — R1 — {R2, R3} — MN, the MN's two
access links 30 Mbit/s) with BOTH cells up for the whole run and no move (the file's `up =
false` and its timeline are dropped), built by `topology.build`; the cases configure their
scheme through `schemes.py`, the one home of how the lab runs ILNPv6 and MPTCP:

* `plain`            plain IPv6 to the MN's first-cell address (schemes.Plain): the floor;
* `ilnp-failover`    ilnpd on both, today's single pair (the default policy);
* `ilnp-per-flow`    ilnpd on both, `balance_policy = "per-flow"`;
* `ilnp-per-packet`  ilnpd on both, `balance_policy = "per-packet"`, ONE flow;
* `mptcp`            kernel MPTCP, the MN the client (schemes.MptcpClient: limits on both,
                     `ip mptcp endpoint add ADDR dev IF id N subflow` for each of the MN's
                     addresses, a source route per network), ONE connection.

The data flows CN -> MN (iperf3, the experiment file's congestion control and window). The
MN's two locators have equal preference (10) and weight 1: the CN (the sender) shares its
packets over them, the MN its ACKs over its uplinks. `flows` TCP flows for plain, failover
and per-flow. Client ports: ephemeral (as applications have them: which cell a flow hashes
to differs from run to run; with 4 flows and two equal cells all land on one cell with
probability 1/8), or fixed with `cport` (iperf3 --cport: consecutive ports from it; the
per-flow hash of given ports and NIDs is the same in every run — the seed is derived from
the local NID — so the quick form in CI is reproducible).

Measured per run: bytes delivered to the application (iperf3's receiver), the sender's TCP
retransmissions (nstat TcpRetransSegs delta on the sending host — subflow retransmissions
for MPTCP — and iperf3's count), bytes received on each of the MN's cell interfaces (which
cell carried the data), for ILNPv6 the pairs the CN's balancing table held. Runs are
interleaved: run 1 of every case, then run 2, ...
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

from . import experiment, schemes
from .analysis import ci95
from .plots import plt, save
from .testbed import REORDER_COUNTERS, Testbed, stop_process, wait_for
from .topology import build, load

IPERF_PORT = 5201
# case -> (scheme, policy, several flows?)
CASES = {
    "plain": ("plain", None, True),
    "ilnp-failover": ("ilnp", "failover", True),
    "ilnp-per-flow": ("ilnp", "per-flow", True),
    "ilnp-per-packet": ("ilnp", "per-packet", False),
    "mptcp": ("mptcp-client", None, False),
}
CELLS = ("eth-r2", "eth-r3")  # the MN's interfaces into R2's and R3's cells


class Spec(experiment.Spec):
    """experiments/aggregation.toml: [experiment] = the full form, [quick] overrides it."""
    KEYS = {"topology", "move", "duration_s", "runs", "flows", "cases", "cc", "window", "cport"}

    def __init__(self, path: Path):
        super().__init__(path)
        self.topology = load(self.full["topology"])
        if self.full["move"] not in self.topology.moves:
            raise ValueError(f"{path}: move {self.full['move']!r}: not a move of {self.full['topology']}")

    def check(self, name: str, c: dict) -> None:
        bad = [x for x in c["cases"] if x not in CASES]
        if bad:
            raise ValueError(f"{self.path}: [{name}] cases {bad}: unknown (known: {', '.join(CASES)})")
        if c["flows"] < 2 or c["runs"] < 1 or c["duration_s"] <= 0:
            raise ValueError(f"{self.path}: [{name}]: flows >= 2, runs >= 1, duration_s > 0")

    def experiment(self):
        """The topology with every link up from the start and no timeline."""
        ex = self.topology
        return replace(ex, links=[replace(l, up=True) for l in ex.links], events=[])


OPTIONS = {"runs"}


def describe(spec: Spec) -> str:
    return f"{spec.title}  (cases: {', '.join(spec.full['cases'])}; no moves)"


class _Run:
    """What schemes.py's classes expect of a run (mobility.Run's attributes they read)."""

    def __init__(self, ex, rdir: Path, seed: int):
        self.ex, self.rdir, self.seed, self.step, self.notes = ex, rdir, seed, "start", []
        self.cell = SimpleNamespace(move=None)  # no move: no per-move daemon keys apply


class Balanced(schemes.IlnpSoft):
    """ILNPv6 with a balancing policy on both ends; the MN's two locators equal preference."""
    name = "ilnp-balanced"
    policy = "failover"

    def daemon_config(self, host, other):
        peers, extra = super().daemon_config(host, other)
        extra["balance_policy"] = self.policy
        if host == self.ex.mn:
            extra["locator_pref"] = {i: 10 for i, _ in self.ex.host_ifaces(host)}
        return peers, extra


def rx_bytes(node) -> dict[str, int]:
    return {dev: node.link_stats(dev)["rx_bytes"] for dev in CELLS}


def one(spec: Spec, cfg: dict, case: str, index: int, out: Path, tag: str) -> dict:
    ex = spec.experiment()
    scheme_name, policy, several = CASES[case]
    flows = cfg["flows"] if several else 1
    rdir = out / f"{case}-{index}"
    rdir.mkdir(parents=True, exist_ok=True)
    res = {"case": case, "run": index, "flows": flows, "policy": policy, "ok": False}
    with Testbed(workdir=rdir, tag=f"{tag}{index}{list(CASES).index(case)}") as bed:
        nodes = build(bed, ex, spec.full["move"], seed=index + 1)
        cn, mn = nodes[ex.cn], nodes[ex.mn]
        for iface, prefix in ex.initial_prefixes(ex.mn):
            net = prefix.split("::")[0] + ":"
            wait_for(lambda: any(a.startswith(net) for a in mn.global_addrs(iface)) and mn.default_gateway(iface),
                     timeout=20, what=f"SLAAC and RA on {ex.mn}:{iface}")
        run = _Run(ex, rdir, index + 1)
        if scheme_name == "ilnp":
            sch = Balanced(run, nodes)
            sch.policy = policy
        else:
            sch = schemes.BY_NAME[scheme_name](run, nodes)
        src, dst = sch.setup()
        if scheme_name == "ilnp":
            # the CN balances over the MN's locators of its best tier: both listed in its peer entry
            wait_for(lambda: len(sch.daemons[ex.mn].ctl("locator", "show")) >= 2, timeout=15, what="both MN locators")
        srv_node, cli_node, srv_addr, cli_addr = (cn, mn, src, dst) if sch.reverse else (mn, cn, dst, src)
        sender = cn
        srv = srv_node.spawn(*sch.wrap, "iperf3", "-s", "-1", *sch.server_bind(srv_addr), "-p", str(IPERF_PORT))
        srv_node.wait_listening(IPERF_PORT)
        n0, b0, r0 = sender.nstat(), rx_bytes(mn), mn.nstat()
        args = [*sch.wrap, "iperf3", "-c", srv_addr, "-p", str(IPERF_PORT), "-t", str(cfg["duration_s"]), "-J",
                "-B", cli_addr, "-P", str(flows), "-C", cfg["cc"]]
        args += ["--cport", str(cfg["cport"])] if cfg.get("cport") else []
        args += ["-w", cfg["window"]] if cfg.get("window") else []
        args += ["-R"] if sch.reverse else []
        c = cli_node.run(*args, check=False, timeout=cfg["duration_s"] + 60)
        n1, b1, r1 = sender.nstat(), rx_bytes(mn), mn.nstat()
        if scheme_name == "ilnp":
            res["pairs"] = sch.daemons[ex.cn].ctl("policy").get("peers", [])
            res["datapath"] = {h: d.stats().get("datapath") for h, d in sch.daemons.items()}
            for d in sch.daemons.values():
                d.stop()
        stop_process(srv)
        sch.stop()
    res["cell_bytes"] = {dev: b1[dev] - b0[dev] for dev in CELLS}
    tot = max(1, sum(res["cell_bytes"].values()))
    res["cell_share_pct"] = {dev: 100 * v / tot for dev, v in res["cell_bytes"].items()}
    res["retrans_segs"] = n1.get("TcpRetransSegs", 0) - n0.get("TcpRetransSegs", 0)
    res["nstat_sender"] = {k: n1.get(k, 0) - n0.get(k, 0) for k in REORDER_COUNTERS}
    res["ofo_queued_receiver"] = r1.get("TcpExtTCPOFOQueue", 0) - r0.get("TcpExtTCPOFOQueue", 0)
    res["mptcp_join_acks"] = n1.get("MPTcpExtMPJoinAckRx", 0) - n0.get("MPTcpExtMPJoinAckRx", 0)
    try:
        j = json.loads(c.stdout)
        e = j["end"]
        res.update(ok=c.returncode == 0 and "error" not in j, bytes=e["sum_received"]["bytes"],
                   goodput_mbit=e["sum_received"]["bits_per_second"] / 1e6,
                   iperf_retransmits=e["sum_sent"].get("retransmits"),
                   streams=[{"local_port": cn_["local_port"], "bytes": st["receiver"]["bytes"]}
                            for cn_, st in zip(j["start"].get("connected", []), e.get("streams", []))])
        if "error" in j:
            res["error"] = j["error"]
    except (ValueError, KeyError) as err:
        res["error"] = f"iperf3: {err}: {c.stderr.strip()[-300:]}"
    return res


def run_experiment(spec: Spec, out: Path, quick: bool, runs: int | None = None) -> dict:
    cfg = spec.cfg(quick, runs=runs)
    out.mkdir(parents=True, exist_ok=True)
    tag = experiment.run_tag("ag")
    res = {"config": cfg, "runs": []}
    t0 = time.monotonic()
    for i, case in experiment.rotations(cfg["cases"], cfg["runs"]):
        r = one(spec, cfg, case, i, out, tag)
        res["runs"].append(r)
        print(f"  run {i} {case:16} {r.get('bytes', 0) / 1e6:8.1f} MB, {r.get('goodput_mbit', 0):6.1f} Mbit/s, "
              f"retrans {r['retrans_segs']:5}, cells {r['cell_share_pct']['eth-r2']:.0f}/"
              f"{r['cell_share_pct']['eth-r3']:.0f} %{'' if r['ok'] else '  FAILED ' + r.get('error', '')}",
              file=sys.stderr)
    res["elapsed_s"] = time.monotonic() - t0
    return res


def summarise(res: dict) -> dict:
    s = {}
    for case in res["config"]["cases"]:
        rows = [r for r in res["runs"] if r["case"] == case and r["ok"]]
        if not rows:
            s[case] = {"runs": 0}
            continue
        mb, ci = ci95([r["bytes"] / 1e6 for r in rows])
        s[case] = {"runs": len(rows), "flows": rows[0]["flows"], "mb": mb, "mb_ci95": ci,
                   "goodput_mbit": sum(r["goodput_mbit"] for r in rows) / len(rows),
                   "retrans": sum(r["retrans_segs"] for r in rows) / len(rows),
                   "dsack": sum(r["nstat_sender"]["TcpExtTCPDSACKRecv"] for r in rows) / len(rows),
                   "cell_r3_pct": sum(r["cell_share_pct"]["eth-r3"] for r in rows) / len(rows)}
    plain = s.get("plain", {}).get("mb")
    for v in s.values():
        if plain and v.get("mb"):
            v["vs_plain"] = v["mb"] / plain
    return s


def plot(out: Path, res: dict) -> str | None:
    s = {k: v for k, v in summarise(res).items() if v.get("runs")}
    if not s:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    ks = list(s)
    ax.bar(ks, [s[k]["mb"] for k in ks], yerr=[s[k]["mb_ci95"] or 0 for k in ks], capsize=3)
    ax.set_ylabel(f"MB delivered in {res['config']['duration_s']} s")
    ax.set_title("two 30 Mbit/s cells: data moved per case")
    plt.setp(ax.get_xticklabels(), rotation=15)
    p = save(fig, out / "aggregation.png")
    return p.name


def report(out: Path, res: dict, meta: dict) -> Path:
    cfg = res["config"]
    s = summarise(res)
    fig = plot(out, res)
    L = experiment.header(meta, f"{res['elapsed_s']:.0f} s") + [
         f"Topology: {cfg['topology']} (move {cfg['move']}), both cells up for the whole run, no move. "
         f"Data CN -> MN for {cfg['duration_s']} s, {cfg['cc']}, window {cfg.get('window') or 'default'}; "
         f"{cfg['runs']} run(s) per case, interleaved; a fresh testbed per run.", "",
         "| case | flows | runs | MB delivered (95 % CI) | Mbit/s | vs plain | retransmitted segments | "
         "of which DSACKed (spurious) | share on R3's cell % |", "|---|---|---|---|---|---|---|---|---|"]
    for k, v in s.items():
        if not v.get("runs"):
            L.append(f"| {k} | - | 0 | failed | - | - | - | - | - |")
            continue
        ci = f" ± {v['mb_ci95']:.1f}" if v["mb_ci95"] is not None else ""
        vp = f"{v['vs_plain']:.2f}" if "vs_plain" in v else "-"
        L.append(f"| {k} | {v['flows']} | {v['runs']} | {v['mb']:.1f}{ci} | {v['goodput_mbit']:.1f} | {vp} | "
                 f"{v['retrans']:.0f} | {v['dsack']:.0f} | {v['cell_r3_pct']:.1f} |")
    L += ["", "Configurations:", "", "* ILNPv6 (`ilnp-*`): ilnpd on CN and MN (soft handoff), each the other's static "
          "peer with all its locators; the MN's two locators preference 10, weight 1 each; `balance_policy` as named, "
          f"on both ends. Client ports: {'fixed from ' + str(cfg['cport']) if cfg.get('cport') else 'ephemeral'}.",
          f"* MPTCP: {schemes.MptcpClient.note}", ""]
    bad = [r for r in res["runs"] if not r["ok"]]
    L += [f"* failed: {r['case']} run {r['run']}: {r.get('error')}" for r in bad]
    if fig:
        L += ["", f"![{fig}]({fig})", ""]
    p = out / "report.md"
    p.write_text("\n".join(L) + "\n")
    return p


def run(spec: Spec, args, meta: dict) -> int:
    out = experiment.out_dir(spec, args)
    res = run_experiment(spec, out, args.quick, args.runs)
    return experiment.finish(sys.modules[__name__], out, res, meta, args, sum(1 for r in res["runs"] if not r["ok"]))
