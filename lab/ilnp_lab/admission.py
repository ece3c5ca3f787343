"""Seed 004 reproduced: `ilnp-lab run seed004-ilcc` (experiments/seed004-ilcc.toml).

The admission plugin (experiment.py): no moves, schemes or captures (mobility.py's); one
testbed per (scenario, policy), T's ilnpd started afresh for
every test (no state file, no pins: each test starts with an empty ILCC, as the seed's).

    T (target: ilnpd, admission = POLICY) — R1 (router; load generators) — B (echo clients)

* transport scenario: T runs a UDP echo service; B (ilnpd, one fixed NID) runs the 20 echo
  clients (one process, 20 sockets, `client_pps` together); R1 runs k load generators
  (TestK: one `ilnp-flood` at k × `load_pps`, one random NID and a nonce per packet) to
  the echo port.
* network scenario: T runs no service; only the random-NID load, to a closed port.
* scale: both scenarios' TestMax: the load at the highest rate ilnp-flood reaches here.

Metrics per test: ILCC size per tier over time (`ilnpctl status`, every 0.5 s), the BPF
programs' time per packet (run_time_ns / run_cnt deltas, kernel.bpf_stats_enabled=1 for
the test only, restored after), ilnpd's slow-path histogram delta (`stats` slow_path_ns),
serving rate (echo replies received by the clients / requests sent, also per second),
drop rate (packets sent to T that T's eth0 did not receive, plus UDP receive-buffer
drops on T), CPU split (ilnpd's and the echo server's utime+stime from /proc/PID/stat,
the BPF programs' run time, as % of the test's wall time).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from . import experiment, plots
from .addr import CN_NID, MN_NID, identifier_address
from .bpfstats import BPF_STATS, daemon_progs, prog_stats
from .daemon import Ilnpd, Peer, binary
from .fixtures import CN_L64, CN_WIRE, three_node
from .testbed import Testbed, stop_process, wait_for

SPOOF = "2001:db8:f::"
TICK = os.sysconf("SC_CLK_TCK")

# Seed 004's numbers (text of §5), beside ours in the report
SEED = {
    "transport_pps": "1280 → 1940 pps (Test0 → Test10), 0 → 34 % random",
    "network_pps": "65 → 660 pps (Test1 → Test10)",
    "without_policy": "ILCC grows one entry per correspondent to ~15 k (hardware-bound); per-packet time "
                      "267.75 µs (Test1) → 1495.78 µs (Test10); serving < 50 % at Test9-10; drops > 50 % "
                      "from Test7 (transport), > 25 % from Test8 (network); unreachable after 40 s (network Test9-10)",
    "with_policy": "0 entries; 7-13.86 µs per packet; 0 drops; serving = arrival rate",
}

# The echo clients: one process, N UDP sockets, PPS requests/s together (sent in small
# bursts on a 10 ms tick), for SECS s, then 1 s more to collect replies. Writes
# {"sent", "received", "per_s": [[sent, received], ...]}.
CLIENTS = r"""
import json, selectors, socket, sys, time
dst, port, n, pps, secs, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
socks = [socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) for _ in range(n)]
sel = selectors.DefaultSelector()
for i, s in enumerate(socks):
    s.setblocking(False); s.connect((dst, port)); sel.register(s, selectors.EVENT_READ, i)
per = [[0, 0] for _ in range(int(secs) + 2)]
sent_at = {}
sent = received = 0
t0 = time.monotonic()
end = t0 + secs
while True:
    now = time.monotonic()
    if now >= end + 1.0:
        break
    if now < end:
        due = int((now - t0) * pps) - sent
        for _ in range(max(0, due)):
            i = sent % n
            try:
                socks[i].send(sent.to_bytes(8, "big"))
            except OSError:
                pass
            sent_at[sent] = int(now - t0)
            per[int(now - t0)][0] += 1
            sent += 1
    for key, _ in sel.select(timeout=0.01):
        while True:
            try:
                d = key.fileobj.recv(64)
            except OSError:
                break
            seq = int.from_bytes(d[:8], "big")
            sec = sent_at.pop(seq, None)
            if sec is not None:
                received += 1; per[sec][1] += 1
json.dump({"sent": sent, "received": received, "per_s": per[:int(secs) + 1]}, open(out, "w"))
"""

ECHO = r"""
import socket, sys
u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
u.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
u.bind(("::", int(sys.argv[1])))
while True:
    d, a = u.recvfrom(2048)
    try:
        u.sendto(d, a)
    except OSError:
        pass
"""


class Spec(experiment.Spec):
    """experiments/seed004-ilcc.toml: [experiment] the full form, [quick] its overrides,
    [traffic] the clients and the load, [target] T's ilnpd settings (ilnpd checks them)."""
    KEYS = {"duration_s", "tests", "scenarios", "policies", "scale"}
    DEFAULTS = {"scale": False}
    QUICK_DEFAULTS = {"duration_s": 5, "tests": [0, 5, 10]}
    TABLES = {"traffic": {"clients", "client_pps", "load_pps", "echo_port", "closed_port", "scale_pps_cap"},
              "target": None}
    REQUIRED = {"experiment": {"duration_s", "tests", "scenarios", "policies"},
                "traffic": {"clients", "client_pps", "load_pps", "echo_port", "closed_port"}}

    def __init__(self, path: Path):
        super().__init__(path)
        e, q, tr = self.full, self.quick, self.tables["traffic"]
        self.duration_s, self.tests = float(e["duration_s"]), list(e["tests"])
        self.scenarios, self.policies, self.scale = list(e["scenarios"]), list(e["policies"]), bool(e["scale"])
        self.quick_duration_s, self.quick_tests = float(q["duration_s"]), list(q["tests"])
        self.clients, self.client_pps, self.load_pps = int(tr["clients"]), float(tr["client_pps"]), float(tr["load_pps"])
        self.echo_port, self.closed_port = int(tr["echo_port"]), int(tr["closed_port"])
        self.scale_pps_cap = int(tr.get("scale_pps_cap", 1_000_000))
        self.target = self.tables["target"]

    def check(self, name: str, c: dict) -> None:
        for s in c["scenarios"]:
            if s not in ("transport", "network"):
                raise ValueError(f"{self.path}: [{name}] scenario {s!r}: transport or network")
        for p in c["policies"]:
            if p not in ("socket", "open"):
                raise ValueError(f"{self.path}: [{name}] policy {p!r}: socket or open")


OPTIONS = {"scenario", "scheme", "no_scale"}  # --scheme picks the admission policy (socket|open)


def describe(spec: Spec) -> str:
    return (f"{spec.title}  (scenarios: {', '.join(spec.scenarios)}; policies: {', '.join(spec.policies)}; "
            f"tests {spec.tests})")


# ---- measurements on T -------------------------------------------------------------------

def cpu_s(pid: int | None) -> float:
    if pid is None:
        return 0.0
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(f[11]) + int(f[12])) / TICK  # utime, stime (fields 14, 15)


def udp_rcvbuf_errors(node) -> int:
    for line in node.run("cat", "/proc/net/snmp6").stdout.splitlines():
        if line.startswith("Udp6RcvbufErrors"):
            return int(line.split()[1])
    return 0


def hist_delta(a: dict, b: dict) -> dict[str, int]:
    return {k: b.get(k, 0) - a.get(k, 0) for k in b if b.get(k, 0) - a.get(k, 0) > 0}


def hist_mean_ns(h: dict[str, int]) -> float | None:
    """Mean of a log2 histogram (`lt_Xns`: [X/2, X); `ge_Xns`: X), each bucket at 3/4 of its top."""
    n = sum(h.values())
    if not n:
        return None
    tot = 0.0
    for k, c in h.items():
        x = int(k.split("_")[1].rstrip("ns"))
        tot += c * (0.75 * x if k.startswith("lt_") else x)
    return tot / n


class Sampler(threading.Thread):
    """T's ILCC size per tier every `period` s, until stopped."""

    def __init__(self, d: Ilnpd, period: float = 0.5):
        super().__init__(daemon=True)
        self.d, self.period, self.rows, self.stop_ev = d, period, [], threading.Event()
        self.t0 = time.monotonic()

    def run(self):
        while not self.stop_ev.is_set():
            try:
                a = self.d.status()["admission"]
                self.rows.append([round(time.monotonic() - self.t0, 2), a["established"], a["embryonic"]])
            except Exception:  # noqa: BLE001 - a busy daemon may miss a sample; the series says so
                self.rows.append([round(time.monotonic() - self.t0, 2), None, None])
            self.stop_ev.wait(self.period)

    def stop(self):
        self.stop_ev.set()
        self.join(timeout=10)
        return self.rows


# ---- one test ----------------------------------------------------------------------------

def flood_rate(spec: Spec, t, r1) -> float:
    """The random-NID load rate this machine reaches (ilnp-flood --pps 0, 100 000 packets to a
    closed port), with T's ilnpd (socket policy) up for the measurement only: without it T does
    not answer Neighbour Discovery for its wire address and the sends stall."""
    dt = Ilnpd(t, ["eth0"], nid=CN_NID, extra={"admission": "socket", **spec.target})
    dt.remove_leftovers()
    dt.start()
    try:
        r = r1.run(binary("ilnp-flood"), "--dst", CN_WIRE, "--src-l64", SPOOF, "--count", "100000", "--pps", "0",
                   "--dport", str(spec.closed_port), "--seed", "99", timeout=300)
    finally:
        dt.stop()
        dt.remove_leftovers()
    return json.loads(r.stdout)["pps"]


def one_test(spec: Spec, bed, nodes, scenario: str, policy: str, test: int | str, load_pps: float, secs: float,
             out: Path, seed: int, echo_pid: int | None) -> dict:
    t, r1, b, db = nodes
    cfg = {"admission": policy, **spec.target}
    dt = Ilnpd(t, ["eth0"], nid=CN_NID, extra=cfg)
    dt.remove_leftovers()  # an empty ILCC: no state file, no pins from the previous test
    dt.start()
    res = {"scenario": scenario, "policy": policy, "test": test, "load_pps": load_pps, "seconds": secs, "ok": False}
    old_stats = BPF_STATS.read_text().strip()
    try:
        client_pps = spec.client_pps if scenario == "transport" else 0
        if client_pps:
            # B's first exchange makes (socket: admits, then promotes) its entry before the clock starts
            warm = out / f"warm-{scenario}-{policy}-{test}.json"
            b.run("python3", "-c", CLIENTS, identifier_address(CN_NID), str(spec.echo_port), "1", "20", "0.5",
                  str(warm), timeout=30)
            wait_for(lambda: dt.status()["admission"]["established"] >= 1, timeout=10, what="B established at T")
        progs = daemon_progs(dt.proc.pid)
        s0 = {"adm": dt.status()["admission"]["counters"], "hist": dt.stats().get("slow_path_ns", {}),
              "ilnpd": cpu_s(dt.proc.pid), "echo": cpu_s(echo_pid), "rx": t.link_stats("eth0")["rx_packets"],
              "rcvbuf": udp_rcvbuf_errors(t)}
        sampler = Sampler(dt)
        BPF_STATS.write_text("1")
        p0 = prog_stats(progs)
        sampler.start()
        t0 = time.monotonic()
        procs = []
        if load_pps > 0:
            port = spec.echo_port if scenario == "transport" else spec.closed_port
            procs.append(r1.spawn(binary("ilnp-flood"), "--dst", CN_WIRE, "--src-l64", SPOOF,
                                  "--count", str(max(1, int(load_pps * secs))), "--pps", str(int(load_pps)),
                                  "--dport", str(port), "--seed", str(seed), stdout=subprocess.PIPE))
        cl_out = out / f"clients-{scenario}-{policy}-{test}.json"
        if client_pps:
            procs.append(b.spawn("python3", "-c", CLIENTS, identifier_address(CN_NID), str(spec.echo_port),
                                 str(spec.clients), str(client_pps), str(secs), str(cl_out)))
        else:
            time.sleep(secs)
        flood = {}
        for p in procs:
            o, _ = p.communicate(timeout=secs * 4 + 60)
            if o:
                flood = json.loads(o)
        wall = time.monotonic() - t0
        p1 = prog_stats(progs)
        BPF_STATS.write_text(old_stats)
        series = sampler.stop()
        a1 = dt.status()["admission"]
        series.append([round(time.monotonic() - sampler.t0, 2), a1["established"], a1["embryonic"]])
        s1 = {"adm": a1["counters"], "hist": dt.stats().get("slow_path_ns", {}), "ilnpd": cpu_s(dt.proc.pid),
              "echo": cpu_s(echo_pid), "rx": t.link_stats("eth0")["rx_packets"], "rcvbuf": udp_rcvbuf_errors(t)}
        cl = json.loads(cl_out.read_text()) if client_pps else {"sent": 0, "received": 0, "per_s": []}
        bpf = {k: {"ns": p1[k][0] - p0[k][0], "runs": p1[k][1] - p0[k][1]} for k in progs}
        for v in bpf.values():
            v["ns_per_run"] = v["ns"] / v["runs"] if v["runs"] else None
        hist = hist_delta(s0["hist"], s1["hist"])
        sent_to_t = cl["sent"] + flood.get("sent", 0)
        rx = s1["rx"] - s0["rx"]
        rcvbuf = s1["rcvbuf"] - s0["rcvbuf"]
        bpf_ns = sum(v["ns"] for v in bpf.values())
        res.update({
            "ok": dt.proc.poll() is None,
            "wall_s": wall,
            "flood": flood,
            "clients": cl,
            "ilcc_series": series,  # [t_s, established, embryonic]
            "ilcc_max": max((r[1] + r[2] for r in series if r[1] is not None), default=None),
            "established_max": max((r[1] for r in series if r[1] is not None), default=None),
            "established_end": a1["established"], "embryonic_end": a1["embryonic"],
            "admission_delta": {k: v - s0["adm"].get(k, 0) for k, v in s1["adm"].items() if v - s0["adm"].get(k, 0)},
            "bpf": bpf,
            # per packet arriving at T: the ingress program's time
            "fast_ns_per_pkt": bpf.get("ilnp_ingress", {}).get("ns_per_run"),
            "slow_path_hist": hist,
            "slow_path_pkts": sum(hist.values()),
            "slow_ns_mean": hist_mean_ns(hist),
            "serving": cl["received"] / cl["sent"] if cl["sent"] else None,
            "sent_to_t": sent_to_t,
            "rx_at_t": rx,
            "udp_rcvbuf_drops": rcvbuf,
            "drop": (max(0, sent_to_t - rx) + rcvbuf) / sent_to_t if sent_to_t else None,
            "cpu_pct": {"ilnpd": 100 * (s1["ilnpd"] - s0["ilnpd"]) / wall, "echo": 100 * (s1["echo"] - s0["echo"]) / wall,
                        "bpf": 100 * bpf_ns / 1e9 / wall},
        })
    finally:
        BPF_STATS.write_text(old_stats)
        dt.stop()
        dt.remove_leftovers()
    return res


def topology(bed):
    t, r1, b = three_node(bed)
    db = Ilnpd(b, ["eth0"], nid=MN_NID, extra={"log_level": "warn"}, peers=[Peer("t", CN_NID, [(CN_L64, 10)])]).start()
    return t, r1, b, db


def run_experiment(spec: Spec, quick: bool, out: Path, seed: int = 1, scenarios=None, policies=None,
                   scale: bool | None = None, log=print) -> list[dict]:
    secs = spec.quick_duration_s if quick else spec.duration_s
    tests = spec.quick_tests if quick else spec.tests
    scale = spec.scale if scale is None else scale
    results = []
    for scenario in scenarios or spec.scenarios:
        for policy in policies or spec.policies:
            with Testbed(workdir=out / "beds" / f"{scenario}-{policy}") as bed:
                nodes = topology(bed)
                t, r1 = nodes[0], nodes[1]
                echo = t.spawn("python3", "-c", ECHO, str(spec.echo_port)) if scenario == "transport" else None
                try:
                    rows = [(k, spec.load_pps * k) for k in tests]
                    if scale:
                        rows.append(("max", min(spec.scale_pps_cap, flood_rate(spec, t, r1))))
                    for i, (k, pps) in enumerate(rows):
                        r = one_test(spec, bed, nodes, scenario, policy, k, pps, secs, out, seed + i,
                                     echo.pid if echo else None)
                        results.append(r)
                        log(summary_line(r))
                finally:
                    if echo is not None:
                        stop_process(echo)
                    nodes[3].stop()
    return results


def summary_line(r: dict) -> str:
    def f(x, fmt):
        return "-" if x is None else format(x, fmt)
    return (f"{r['scenario']:9} {r['policy']:6} Test{r['test']!s:3} load {r['load_pps']:>8.0f} pps  "
            f"ILCC max {f(r.get('ilcc_max'), 'd')} (est {f(r.get('established_max'), 'd')})  "
            f"ingress {f(r.get('fast_ns_per_pkt'), '.0f')} ns/pkt  slow {f(r.get('slow_ns_mean'), '.0f')} ns "
            f"x{r.get('slow_path_pkts', 0)}  serving {f(r.get('serving'), '.4f')}  drop {f(r.get('drop'), '.4f')}")


# ---- report and plots --------------------------------------------------------------------

def _num(x, fmt=".2f"):
    return "–" if x is None else format(x, fmt)


def figures(results: list[dict], outdir: str | Path) -> list[Path]:
    """Seed 004's figures from `run_experiment` rows: ILCC size vs test and over time
    (Figs. 4-5), per-packet time vs test (Figs. 6-7), serving (Fig. 8) and drop rate (Figs.
    9, 11), serving over time (Figs. 10, 12), CPU split (Figs. 13-16)."""
    d = Path(outdir)
    rows = [r for r in results if "ilcc_series" in r]
    out = [
        plots.vs_test(rows, lambda r: r["ilcc_max"], d / "ilcc-size.png", "ILCC size (both tiers, max over the test)",
                      "entries", logy=True),
        plots.vs_test(rows, lambda r: r["established_max"], d / "ilcc-established.png", "ILCC established entries (max)",
                      "entries", logy=True),
        plots.vs_test(rows, lambda r: r["fast_ns_per_pkt"] and r["fast_ns_per_pkt"] / 1000, d / "per-packet-fast.png",
                      "per-packet time: T's ingress BPF program (run_time_ns / run_cnt)", "µs per packet"),
        plots.vs_test(rows, lambda r: r["slow_ns_mean"] and r["slow_ns_mean"] / 1000, d / "per-packet-slow.png",
                      "per-packet time: ilnpd slow path (slow_path_ns histogram mean)", "µs per packet"),
        plots.vs_test([r for r in rows if r["scenario"] == "transport"], lambda r: r["serving"] and 100 * r["serving"],
                      d / "serving.png", "serving rate of the echo clients", "% of requests answered"),
        plots.vs_test(rows, lambda r: r["drop"] is not None and 100 * r["drop"] or 0.0, d / "drop.png",
                      "drop rate at T", "% of packets sent to T"),
        plots.vs_test(rows, lambda r: r["cpu_pct"]["ilnpd"], d / "cpu-ilnpd.png", "CPU: T's ilnpd (utime+stime)",
                      "% of one core"),
        plots.vs_test(rows, lambda r: r["cpu_pct"]["bpf"], d / "cpu-bpf.png", "CPU: T's BPF programs (run_time_ns)",
                      "% of one core"),
    ]
    # ILCC size over time per test (Figs. 4-5), one figure per scenario and policy
    for scen, pol in dict.fromkeys((r["scenario"], r["policy"]) for r in rows):
        series = {}
        for r in rows:
            if (r["scenario"], r["policy"]) == (scen, pol):
                pts = [(t, e + m) for t, e, m in r["ilcc_series"] if e is not None]
                series[f"Test{r['test']}"] = ([t for t, _ in pts], [y for _, y in pts])
        out.append(plots.series_plot(series, d / f"ilcc-time-{scen}-{pol}.png",
                                     f"ILCC size over time: {scen} scenario, admission = {pol}", "ILCC entries (both tiers)"))
    # echo serving per second (Figs. 10, 12)
    for pol in dict.fromkeys(r["policy"] for r in rows if r["scenario"] == "transport"):
        series = {f"Test{r['test']}": (range(len(ps)), [100 * rc / s if s else None for s, rc in ps])
                  for r in rows if r["scenario"] == "transport" and r["policy"] == pol and (ps := r["clients"]["per_s"])}
        out.append(plots.series_plot(series, d / f"serving-time-{pol}.png", f"echo serving over time, admission = {pol}",
                                     "% of requests answered"))
    return out


def report(out: Path, results: list[dict], meta: dict) -> Path:
    figs = figures(results, out / "plots")
    L = experiment.header(meta, f"{meta['duration_s']:g} s per test", f"tests {meta['tests']}")
    L += ["## Seed 004 (its text, §5) beside ours", "",
          f"* seed traffic: transport {SEED['transport_pps']}; network {SEED['network_pps']}",
          f"* seed without policy: {SEED['without_policy']}",
          f"* seed with policy: {SEED['with_policy']}",
          "* ours: `admission = \"open\"` is the seed's kernel without policy, `\"socket\"` the one with. "
          "Per-packet time: the seed's is the ILNP kernel function's; ours is T's ingress BPF program "
          "(every packet) and ilnpd's slow path (only packets the fast path hands up). Test `max`: the load at "
          "the rate ilnp-flood reaches on this machine.", ""]
    for scenario in ("transport", "network"):
        rows = [r for r in results if r["scenario"] == scenario]
        if not rows:
            continue
        L += [f"## {scenario} scenario", "",
              "| policy | test | load pps | ILCC max (est.) | est. end | ingress ns/pkt | egress ns/pkt | slow-path pkts | "
              "slow ns/pkt (mean) | serving | drop | CPU % ilnpd / echo / BPF |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            if not r.get("ok") and "serving" not in r:
                L.append(f"| {r['policy']} | {r['test']} | {r['load_pps']:.0f} | failed: {r.get('error', '')} |||||||||")
                continue
            c = r["cpu_pct"]
            L.append(f"| {r['policy']} | {r['test']} | {r['load_pps']:.0f} | {r['ilcc_max']} ({r['established_max']}) | "
                     f"{r['established_end']} | {_num(r['fast_ns_per_pkt'], '.0f')} | "
                     f"{_num(r['bpf'].get('ilnp_egress', {}).get('ns_per_run'), '.0f')} | {r['slow_path_pkts']} | "
                     f"{_num(r['slow_ns_mean'], '.0f')} | {_num(r['serving'], '.4f')} | {_num(r['drop'], '.4f')} | "
                     f"{c['ilnpd']:.1f} / {c['echo']:.1f} / {c['bpf']:.1f} |")
        L.append("")
    L += ["## Figures", ""] + [f"![{p.stem}](plots/{p.name})" for p in figs] + [""]
    L += ["## Method", "", "See docs/experiments.md § Seed 004. Drop: packets sent to T (clients + load) that T's "
          "eth0 did not receive, plus T's UDP receive-buffer drops, over packets sent. Serving: echo replies "
          "received by the clients (within 1 s after the test) over requests sent.", ""]
    p = out / "report.md"
    p.write_text("\n".join(L))
    return p


def run(spec: Spec, args, meta: dict) -> int:
    """`ilnp-lab run seed004-ilcc` (experiment.py hands the file here)."""
    quick, seed, as_json = args.quick, args.seed, args.json
    out = experiment.out_dir(spec, args).resolve()
    meta.update(duration_s=spec.quick_duration_s if quick else spec.duration_s,
                tests=spec.quick_tests if quick else spec.tests)
    results = run_experiment(spec, quick, out, seed, args.scenario, args.scheme, False if args.no_scale else None,
                             log=(lambda s: print(s, file=sys.stderr, flush=True)) if as_json else (lambda s: print(s, flush=True)))
    failed = sum(1 for r in results if not r.get("ok"))
    return experiment.finish(sys.modules[__name__], out, results, meta, args, failed, json_out=results)