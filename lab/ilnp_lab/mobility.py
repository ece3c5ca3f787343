"""The mobility plugin (experiment.py; every experiment file that names no other plugin):
every cell (move x scheme x load x congestion control) `runs` times, each run on a freshly
built testbed that is removed afterwards, even when the run fails or the user presses Ctrl-C.

One run: build the network, start radvd and wait for SLAAC, set up the scheme
(schemes.py: ilnpd on CN and MN with hard or soft handoff, or soft by name with a BIND node;
nothing for plain IPv6; MPTCP
limits and endpoints for every address, which follow the MN's addresses on the timeline), start tcpdump on the CN
and the MN, the iperf3 server on the MN (with `mptcp-client`: on the CN) and the UDP probe
at both ends, start the iperf3 client on the CN (the MN, with -R) at t = 0 (the data flows
CN -> MN either way), play the timeline (links up/down), wait for the flow to end, then
analyse the captures (analysis/) into `result.json`.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from . import analysis, experiment, mobility_report
from . import cc as cc_mod
from .capture import wire_capture
from .schemes import BY_NAME as SCHEME_CLASSES
from .testbed import StepError, Testbed, stop_process, wait_for
from .topology import Experiment, Load, build, load, parse_sysctl

IPERF_PORT = 5201
PROBE_PORT = 7100
LAB_DIR = Path(__file__).resolve().parents[1]


class RunError(RuntimeError):
    """A run failed; the message names the cell, the run and the step."""


@dataclass(frozen=True)
class Cell:
    move: str
    scheme: str
    load: Load
    cc: str

    @property
    def id(self) -> str:
        parts = [self.move, self.scheme]
        if self.load.name != "default":
            parts.append(self.load.name)
        parts.append(self.cc)
        return "/".join(parts)


def cells(ex: Experiment, moves: list[str] | None = None, schemes: list[str] | None = None) -> tuple[list[Cell], list[str]]:
    """The cells to run and notes on what was skipped (unknown names are errors)."""
    notes = []
    for name, pool, what in ((moves, ex.moves, "move"), (schemes, ex.schemes, "scheme")):
        for n in name or []:
            if n not in pool:
                raise ValueError(f"{ex.name}: no {what} {n!r} (known: {', '.join(pool)})")
    asked = set(schemes or ())
    schemes = list(schemes or ex.schemes)
    for s in list(schemes):
        why = SCHEME_CLASSES[s].unavailable()
        if why and s in asked:
            raise ValueError(f"{ex.name}: {why}")
        if why:
            notes.append(f"scheme {s!r} skipped: {why}")
            schemes.remove(s)
    ccs = ex.ccs if ex.kind == "tcp" else ["-"]
    have = cc_mod.offered()  # the kernel's own, plus hybla/veno as BPF struct_ops (cc.py)
    runnable = []
    for cc in ccs:
        if cc != "-" and cc not in have:
            why = f" ({cc_mod.can_load()})" if cc in cc_mod.BPF_CCS and cc_mod.can_load() else ""
            notes.append(f"congestion control {cc!r} skipped: this kernel has only {', '.join(sorted(have))}{why}")
        else:
            runnable.append(cc)
    if not moves and ex.moves_only_if_named:
        notes.append(f"moves run only when named with --scenario: {', '.join(m for m in ex.moves if m in ex.moves_only_if_named)}")
    moves = moves or [m for m in ex.moves if m not in ex.moves_only_if_named]
    out = [Cell(m, s, ld, cc) for m in moves for s in schemes for ld in ex.loads for cc in runnable]
    # one note per text (mipv6 and mipv6-ro share theirs)
    notes += dict.fromkeys(SCHEME_CLASSES[s].note for s in dict.fromkeys(c.scheme for c in out) if SCHEME_CLASSES[s].note)
    return out, notes


def flow_setup_lost(ex: Experiment, res: dict) -> bool:
    """A UDP run whose iperf3 client never got its UDP connect answered (the MN's capture holds
    at most the 4-byte connect message): nothing of the flow was measured."""
    return (ex.kind == "udp" and "unable to read from stream socket" in (res.get("iperf_error") or "")
            and (res.get("flow") or {}).get("bytes_received", 0) <= 4)


class Run:
    def __init__(self, ex: Experiment, cell: Cell, index: int, duration: float, rdir: Path, seed: int):
        self.ex, self.cell, self.index, self.duration, self.rdir, self.seed = ex, cell, index, duration, rdir, seed
        self.step = "start"
        self.notes: list[str] = []
        self.t0: float | None = None  # the flow's start (wall clock), once it started

    def event_times(self) -> list[tuple[float, object]]:
        """When each timeline event happens: its time scaled to the flow's duration (or, with
        [quick] timeline = "cut", as written, those after the flow's end left out), plus
        the association delay for the MN joining a network (the link comes up that much
        later, as a Wi-Fi association and authentication would make it)."""
        scale = self.duration / self.ex.duration_s
        events = self.ex.events_for(self.cell.move)
        if scale < 1 and self.ex.quick_timeline == "cut":  # [quick] timeline = "cut": as written, up to the end
            scale, events = 1.0, [e for e in events if e.at_s < self.duration]
        return sorted(((e.at_s * scale + (self.ex.assoc_delay_s if e.action == "up" and e.node == self.ex.mn else 0.0), e)
                       for e in events), key=lambda x: x[0])

    def execute(self) -> dict:
        """The run; once more (a fresh testbed, another loss seed, the first attempt's folder kept
        as `runNN-setup-lost`) if the UDP flow never started: iperf3 (3.12) sends its UDP connect
        message once and waits 30 s for the reply, so one lost on a lossy link the MN starts
        behind (thesis-loss's old-link moves: R1-R2) fails the whole run before any movement.
        A loss before the first event says nothing about a handoff, so the retry biases none."""
        res = self._attempt()
        if flow_setup_lost(self.ex, res):
            lost = self.rdir.with_name(self.rdir.name + "-setup-lost")
            shutil.rmtree(lost, ignore_errors=True)
            self.rdir.rename(lost)
            self.notes = [f"run again (seed {self.seed} -> {self.seed + 1000}): the flow never started, iperf3's UDP "
                          f"connect or its reply lost ({res.get('iperf_error')}; {lost.name} kept)"]
            self.seed += 1000
            res = self._attempt()
        return res

    def _attempt(self) -> dict:
        cell = self.cell
        self.rdir.mkdir(parents=True, exist_ok=True)
        with Testbed(workdir=self.rdir) as bed:
            try:
                return self._execute(bed)
            except Exception as e:
                raise RunError(f"{cell.id} run {self.index}: step '{self.step}': {e}") from e

    def _execute(self, bed: Testbed) -> dict:
        ex, cell, d = self.ex, self.cell, self.rdir
        self.step = f"build the network (move {cell.move})"
        nodes = build(bed, ex, cell.move, seed=self.seed, home_agents=SCHEME_CLASSES[cell.scheme].home_agents(ex))
        cn, mn = nodes[ex.cn], nodes[ex.mn]
        self.step = "wait for SLAAC on the MN's first network"
        first = ex.initial_prefixes(ex.mn)
        for iface, prefix in first:
            net = ipaddress.IPv6Network(prefix)
            wait_for(lambda: any(ipaddress.IPv6Address(a) in net for a in mn.global_addrs(iface)), timeout=20,
                     what=f"SLAAC address from {prefix} on {ex.mn}:{iface}")
        self.step = "measure the round trip to each access network"
        rtt = path_rtts_ms(ex, nodes)
        scheme = SCHEME_CLASSES[cell.scheme](self, nodes)
        src, dst = scheme.setup()  # names its own steps

        self.step = "start captures, server and probes"
        caps = {n.name: wire_capture(n, d / f"{n.name}.pcap") for n in (cn, mn)}
        scheme.start()
        # the data flows CN -> MN either way; `reverse`: the MN is the client (iperf3 -R, a download)
        srv_node, cli_node, srv_addr, cli_addr = (cn, mn, src, dst) if scheme.reverse else (mn, cn, dst, src)
        # what the applications are given to reach each end: its address, or its name (ilnp-soft-dns)
        src_to, dst_to = scheme.targets(src, dst)
        srv_to = src_to if scheme.reverse else dst_to
        srv = srv_node.spawn(*scheme.wrap, "iperf3", "-s", "-1", *scheme.server_bind(srv_addr), "-p", str(IPERF_PORT),
                             "-J", stdout=open(d / "iperf-server.json", "w"), stderr=open(d / "iperf-server.err", "w"))
        env = dict(os.environ, PYTHONPATH=str(LAB_DIR))
        probes = {}
        if ex.probe_pps:
            for node, me, peer in ((cn, src, dst_to), (mn, dst, src_to)):
                probes[node.name] = node.spawn("python3", "-m", "ilnp_lab.probe", me, peer, str(PROBE_PORT),
                                               str(self.duration), str(ex.probe_pps), str(d / f"probe-{node.name}.json"),
                                               env=env)
        srv_node.wait_listening(IPERF_PORT)

        self.step = "traffic and timeline"
        args = [*scheme.wrap, "iperf3", "-c", srv_to, "-p", str(IPERF_PORT), "-t", str(self.duration), "-J",
                "-B", cli_addr] + (["-R"] if scheme.reverse else [])
        if ex.kind == "tcp":
            args += ["-C", cell.cc] + (["-w", ex.window] if ex.window else [])
        else:
            args += ["-u"] + (["-b", cell.load.rate] if cell.load.rate else []) + (["-l", str(cell.load.size)] if cell.load.size else [])
            args += ["--bidir"] if ex.bidir else []
        t0 = self.t0 = time.time()
        cli = cli_node.spawn(*args, stdout=open(d / "iperf-client.json", "w"), stderr=open(d / "iperf-client.err", "w"))
        timeline = []
        for at, e in self.event_times():
            delay = t0 + at - time.time()
            if delay > 0:
                time.sleep(delay)
            t_event = time.time() - t0  # before the change: its effects (RS, RA, LU) follow within microseconds
            nodes[e.node].set_link(e.iface, e.action == "up")
            # the kernel has made the change: microseconds after t_event on the host, up to ~0.1 s
            # under the VM's emulation (Debian 12 under qemu TCG, the Mobile IPv6 runs)
            t_changed = time.time() - t0
            rec = {"t_s": round(t_event, 4), "label": e.label, "node": e.node, "iface": e.iface,
                   "action": e.action, "scheduled_s": round(at, 4), "changed_s": round(t_changed, 4)}
            timeline.append(rec)
            scheme.on_event(e)
            # when the link change and the scheme's own reaction (e.g. MPTCP's endpoint delete) had
            # returned: both are subprocesses, slower than the kernel when iperf3 saturates the CPU
            rec["handled_s"] = round(time.time() - t0, 4)
        self.step = "wait for the flow to end"
        self._wait_client(cli, scheme, t0)
        for p in probes.values():
            try:
                p.wait(timeout=max(1.0, t0 + self.duration + 5 - time.time()))
            except subprocess.TimeoutExpired:
                stop_process(p)
        stop_process(srv)
        sender = tcp_counters(cn) if ex.kind == "tcp" else None  # the data flows CN -> MN in every scheme
        stats = scheme.counters()
        extra = scheme.extra()
        scheme.stop()
        time.sleep(0.5)  # the last segments and FINs reach the capture files
        for c in caps.values():
            c.stop(settle_s=0)
        raw = {"t0": t0, "timeline": timeline, "stats": stats, "notes": self.notes, "rtt_ms": rtt,
               "mn_nid": scheme.mn_nid, "extra": extra, "tcp_sender": sender}
        (d / "run.json").write_text(json.dumps(raw, indent=1))
        self.step = "analyse"
        return self.analyse(raw)

    def _wait_client(self, cli, scheme, t0: float) -> None:
        """Until iperf3's client ends, at most 15 s after the flow's end; from 1 s after the end
        on, a session the scheme knows is broken (`Scheme.broken`) is not waited for."""
        end = t0 + self.duration
        while cli.poll() is None:
            now = time.time()
            why = scheme.broken() if now >= end + 1 else None
            if why or now >= end + 15:
                what = f"broken: {why}" if why else "session broken"
                after = "1 s" if why else "15 s"
                self.notes.append(f"iperf3 client did not finish {after} after the flow's end ({what}): stopped")
                stop_process(cli)
                return
            time.sleep(0.1 if now < end else 0.05)  # after the end, each wait adds to the run

    def analyse(self, raw: dict) -> dict:
        """Results of a finished run from its captures and `run.json` (so a run folder can be
        analysed again: `ilnp-lab report DIR --reanalyse`)."""
        ex, cell, d = self.ex, self.cell, self.rdir
        t0, timeline, stats, mn_nid = raw["t0"], raw["timeline"], raw["stats"], raw["mn_nid"]
        self.notes = raw["notes"]
        cn_pcaps, mn_pcaps = [str(d / f"{ex.cn}.pcap")], [str(d / f"{ex.mn}.pcap")]
        stale = 0
        if mn_nid:
            stale = int(stats[ex.mn]["core"].get("aged_local_locator", 0))
        res = {"experiment": ex.name, "cell": cell.id, "move": cell.move, "scheme": cell.scheme, "load": cell.load.name,
               "cc": cell.cc, "run": self.index, "duration_s": self.duration, "t0": t0, "timeline": timeline,
               "rtt_ms": raw["rtt_ms"]}
        lus = analysis.lu_handshakes(mn_pcaps, t0, mn_nid=mn_nid) if mn_nid else []
        # hard handoff: the MN accepts only the locators of its latest LU; packets captured to others were dropped
        acc = analysis.accepted_locators(lus, cell.scheme.split("-")[1] if mn_nid else None)
        events = analysis.event_context(ex, cell.move, mn_pcaps[0], t0, timeline)
        kw = {"accepted": acc, "events": events, "end_s": self.duration}
        reverse = SCHEME_CLASSES[cell.scheme].reverse
        if ex.kind == "tcp":
            flow = analysis.tcp_flow(cn_pcaps, mn_pcaps, IPERF_PORT, t0, reverse=reverse, **kw)
        else:
            flow = analysis.udp_transfer(cn_pcaps, mn_pcaps, IPERF_PORT, t0, **kw)
            if ex.bidir:
                flow["mn_to_cn"] = analysis.udp_reverse(cn_pcaps, mn_pcaps, IPERF_PORT, t0)
        res["flow"] = flow
        res["stale_drops_by_flow"] = analysis.attribute_drops(analysis.stale_drops(mn_pcaps, t0, mn_nid, acc) if mn_nid else [],
                                                      {"flow": IPERF_PORT, "probe": PROBE_PORT}, stale if mn_nid else None)
        # iperf3's receiver is the server, or with -R the client (the MN either way)
        res["iperf_receiver"] = analysis.iperf_receiver(d / f"iperf-{'client' if reverse else 'server'}.json", ex.kind)
        res["session_survived"] = flow["broken_at_s"] is None  # data delivered in the flow's last second
        # seed 003 §VI-B: control and data-plane latency per event; the control messages of the run
        res["latency"] = analysis.handoff_latencies(mn_pcaps, t0, analysis.with_new_prefixes(ex, events), IPERF_PORT,
                                                    reverse=reverse, end_s=self.duration)
        first_event = min((e["t_s"] for e in timeline), default=0.0)
        res["control"] = analysis.control_totals(analysis.control_messages(mn_pcaps, t0), first_event)
        res["lu"] = lus
        res["lu_by_event"] = analysis.lu_by_event(lus, timeline)
        # ILNPv6: the first LU's handshake; Mobile IPv6: its roles' first BU -> last BA (extra)
        res["handoff_delay_ms"] = lus[0]["delay_ms"] if lus else (raw.get("extra") or {}).get("handoff_delay_ms")
        res["lu_copies"] = sum(l["copies"] for l in lus)
        res["ra_to_lu_ms"] = analysis.ra_to_lu_ms(mn_pcaps[0], t0, timeline, ex, lus)
        if mn_nid:
            # thesis Ch. 6: per join, did the CN switch, with how many LUs, how fast; beside the
            # analytic single-shot probability of this move's links (topology.path_delivery)
            facing = lambda e: ex.radvd_facing(ex.mn, e["iface"]) if e["node"] == ex.mn else None  # noqa: E731
            marked = [dict(e, prefix=facing(e).prefix) if e["action"] == "up" and facing(e) else e for e in events]
            joins = [e for e in marked if "prefix" in e]
            hs = analysis.handoffs(lus, marked, cn_pcaps, t0, mn_nid, self.duration)
            for h, e in zip(hs, joins):
                h["analytic_single_shot"] = round(ex.path_delivery(cell.move, ex.mn, e["iface"]) ** 2, 6)
                h["new_loss_pct"] = round(100 * (1 - ex.path_delivery(cell.move, ex.mn, e["iface"])), 3)
            res["handoffs"] = hs
        elif (raw.get("extra") or {}).get("moves") is not None:
            res["handoffs"] = self.mipv6_moves(raw["extra"], timeline)
        else:
            res["handoffs"] = None
        res["probe"] = analysis.probe_loss(d, ex)
        try:
            ij = json.loads((d / "iperf-client.json").read_text() or "{}")
            res["iperf_error"] = ij.get("error")
            if ex.kind == "tcp":
                res["iperf_retransmits"] = ij.get("end", {}).get("sum_sent", {}).get("retransmits")
        except ValueError:
            res["iperf_error"] = "no JSON from iperf3 client"
        res["stats"] = stats
        res["tcp_sender"] = raw.get("tcp_sender")  # None: a UDP run, or one from before the counters were read
        res["extra"] = raw.get("extra")  # what the scheme recorded besides its counters (ilnp-soft-dns: names, BIND)
        res["notes"] = self.notes
        (d / "result.json").write_text(json.dumps(res, indent=1))
        return res

    def mipv6_moves(self, extra: dict, timeline: list[dict]) -> list[dict]:
        """Mobile IPv6's handoffs (mipv6.phases.moves: each registration away, each return home),
        labelled by the timeline's latest event before each, with the thesis's analytic single-shot
        success for this move's links (mipv6.phases.analytic_single_shot, thesis §6.2.1 eqs. 17-18)."""
        from .mipv6.phases import analytic_single_shot
        ex, move = self.ex, self.cell.move
        home_if = SCHEME_CLASSES[self.cell.scheme].home(ex)[0]
        out = []
        for m in extra["moves"]:
            before = [e for e in timeline if e["t_s"] <= m["t_s"] + 0.001]
            new = ex.path_delivery(move, ex.mn, m.get("iface") or home_if)
            old = ex.path_delivery(move, ex.mn, home_if)
            out.append(dict(m, label=before[-1]["label"] if before else None,
                            analytic_single_shot=analytic_single_shot(m["kind"], new, old, extra.get("cn") is not None),
                            new_loss_pct=round(100 * (1 - new), 3), old_loss_pct=round(100 * (1 - old), 3)))
        return out


# The data sender's TCP recovery, from its kernel (nstat's TcpExt counters in the CN's
# namespace, whose only TCP is the run's iperf3 data and control connections), kept without
# the "TcpExt" prefix: RTO timeouts; undos of an RTO's cwnd reduction (TCPLossUndo), of which
# F-RTO judged the RTO spurious (TCPSpuriousRTOs: an ack of data never retransmitted came after
# it; RFC 5682); fast recoveries entered on SACK (TCPSackRecovery); duplicate SACKs received.
TCP_COUNTERS = ("TCPTimeouts", "TCPLossUndo", "TCPSpuriousRTOs", "TCPSackRecovery", "TCPDSACKRecv")


def tcp_counters(node) -> dict[str, int]:
    n = node.nstat()
    return {k: n.get("TcpExt" + k, 0) for k in TCP_COUNTERS}


def path_rtts_ms(ex: Experiment, nodes: dict) -> dict[str, float]:
    """Mean of 5 pings from the CN to each access router's MN-facing address: the
    round trip of each path the MN can use (less its last hop), measured in the same run."""
    out = {}
    for r in ex.radvd:
        link = next(l for l in ex.links if (l.a, l.a_if) == (r.node, r.iface) or (l.b, l.b_if) == (r.node, r.iface))
        addr = link.a_addr if (link.a, link.a_if) == (r.node, r.iface) else link.b_addr
        if not addr:
            continue
        p = nodes[ex.cn].run("ping", "-6", "-n", "-q", "-c", "5", "-i", "0.05", "-W", "2",
                             addr.split("/")[0], check=False, timeout=30)
        # rtt min/avg/max/mdev = 0.051/0.062/0.080/0.010 ms
        for line in p.stdout.splitlines():
            if "min/avg/max" in line:
                out[r.node] = float(line.split("=")[1].split("/")[1])
    return out


def _one(ex: Experiment, cell: Cell, i: int, duration: float, out: Path, seed: int, drop_captures: bool = False) -> dict:
    rdir = out / "runs" / cell.id.replace("/", "_") / f"run{i:02d}"
    try:
        return Run(ex, cell, i, duration, rdir, seed + i - 1).execute() | {"ok": True}
    except RunError as e:
        return {"experiment": ex.name, "cell": cell.id, "move": cell.move, "scheme": cell.scheme,
                "load": cell.load.name, "cc": cell.cc, "run": i, "ok": False, "error": str(e)}
    finally:
        if drop_captures:  # the results (or the failed step) are written: what is left of the run is small
            for d in (rdir, rdir.with_name(rdir.name + "-setup-lost")):
                for pcap in d.rglob("*.pcap"):
                    pcap.unlink()


def run_all(ex: Experiment, todo: list[Cell], runs: int, duration: float, out: Path, seed: int,
            jobs: int = 1, drop_captures: bool = False) -> tuple[list[dict], bool]:
    """Every cell `runs` times with a progress bar on stderr; a failed run is recorded
    (with its step) and the others go on. `jobs` > 1 runs that many testbeds at once, each
    in its own worker process (runs are independent: own namespaces, own names).
    `drop_captures`: each run's pcaps deleted once it is done (`--drop-captures`). Returns
    (results in cell order, interrupted by Ctrl-C)."""
    from tqdm import tqdm

    work = [(cell, i) for cell in todo for i in range(1, runs + 1)]
    results: dict[int, dict] = {}
    bar = tqdm(total=len(work), unit="run", file=sys.stderr, dynamic_ncols=True)

    def done(k: int, res: dict) -> None:
        results[k] = res
        if not res["ok"]:
            tqdm.write(f"ilnp-lab: run failed: {res['error']}", file=sys.stderr)
        bar.update(1)

    try:
        if jobs <= 1:
            for k, (cell, i) in enumerate(work):
                bar.set_description(f"{cell.id} #{i}")
                done(k, _one(ex, cell, i, duration, out, seed, drop_captures))
        else:
            import concurrent.futures as cf
            import multiprocessing as mp
            with cf.ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn"), initializer=install_sigterm,
                                        initargs=(True,)) as pool:
                futs = {pool.submit(_one, ex, cell, i, duration, out, seed, drop_captures): k for k, (cell, i) in enumerate(work)}
                try:
                    for f in cf.as_completed(futs):
                        done(futs[f], f.result())
                except KeyboardInterrupt:
                    for f in futs:
                        f.cancel()
                    for p in list(pool._processes.values()):  # each worker removes its testbed on SIGTERM
                        p.terminate()
                    raise
    except KeyboardInterrupt:
        tqdm.write("ilnp-lab: interrupted: the running testbeds were removed; writing what finished", file=sys.stderr)
        return [results[k] for k in sorted(results)], True
    finally:
        bar.close()
    return [results[k] for k in sorted(results)], False


def reanalyse(outdir: Path, results: list[dict], ex: Experiment) -> list[dict]:
    """Recomputes every finished run's results from its captures and run.json."""
    loads = {ld.name: ld for ld in ex.loads}
    out = []
    for r in results:
        if r.get("ok"):
            cell = Cell(r["move"], r["scheme"], loads[r["load"]], r["cc"])
            rdir = outdir / "runs" / cell.id.replace("/", "_") / f"run{r['run']:02d}"
            run = Run(ex, cell, r["run"], r["duration_s"], rdir, 0)
            try:
                raw = json.loads((rdir / "run.json").read_text())
            except OSError as e:
                raise ValueError(f"{rdir}: cannot re-analyse: {e.strerror} (run.json)") from e
            r = run.analyse(raw) | {"ok": True}
        out.append(r)
    return out


def install_sigterm(worker: bool = False) -> None:
    """SIGTERM ends a run like Ctrl-C: the testbed's cleanup runs, and runs once: the first
    signal turns further SIGTERMs (and Ctrl-Cs) off, because a second one would cut that cleanup
    short and leave the testbed behind (a process-group kill reaches a --jobs worker, then the
    parent terminates it too). A worker ignores SIGINT: the parent takes the terminal's Ctrl-C
    and stops its workers with SIGTERM. Only in this process: pyroute2's forked helpers
    inherit the handler and are stopped by it."""
    main = os.getpid()

    def handler(signum, frame):
        if os.getpid() != main:
            os._exit(0)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if signal.getsignal(signal.SIGINT) is handler:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, handler)
    if worker:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    elif signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not when started with SIGINT ignored
        signal.signal(signal.SIGINT, handler)


# ---------------------------------------------------------------- the plugin (experiment.py)
# The mobility file format is richer than a plugin table: topology.py reads and checks all of it.
Spec = load
# --scenario MOVE, --scheme S, --cc NAME, --jobs N, --dad, --dad-transmits N, --assoc-delay S, --sysctl,
# --drop-captures
OPTIONS = {"runs", "scenario", "scheme", "cc", "jobs", "dad", "dad_transmits", "assoc_delay", "sysctl", "drop_captures"}


def describe(ex: Experiment) -> str:
    return (f"{ex.title}  ({len(ex.nodes)} nodes, {len(ex.links)} links, {len(ex.all_events())} events; "
            f"moves: {', '.join(m + ('*' if m in ex.moves_only_if_named else '') for m in ex.moves)}; "
            f"schemes: {', '.join(ex.schemes)}" + ("; *: run only when named (--scenario)" if ex.moves_only_if_named else "") + ")")


def report(out: Path, results: list[dict], meta: dict) -> Path:
    return mobility_report.write(out, results, meta)


def run(ex: Experiment, args, meta: dict) -> int:
    """`ilnp-lab run NAME` for a mobility experiment: the cells the options pick, `runs` each."""
    if args.dad_transmits < 1 or args.assoc_delay < 0:
        print(f"ilnp-lab run: --dad-transmits {args.dad_transmits} / --assoc-delay {args.assoc_delay}: "
              "need at least 1 / at least 0", file=sys.stderr)
        return 2
    cores = os.cpu_count() or 1
    if args.jobs > cores:
        print(f"ilnp-lab run: --jobs {args.jobs} is more than this machine's {cores} cores: timed testbeds would "
              f"compete for the CPUs (use --jobs {cores} or fewer)", file=sys.stderr)
        return 2
    if args.cc:
        ex.ccs = args.cc
    ex.dad, ex.dad_transmits, ex.assoc_delay_s = args.dad, args.dad_transmits, args.assoc_delay
    ex.sysctls = [parse_sysctl(ex, s) for s in args.sysctl or ()]
    todo, notes = cells(ex, args.scenario, args.scheme)
    if not todo:
        print(f"ilnp-lab run: nothing to run: {'; '.join(notes)}", file=sys.stderr)
        return 2
    duration = ex.quick_duration_s if args.quick else ex.duration_s
    runs = args.runs or (ex.quick_runs if args.quick else ex.runs)
    out = experiment.out_dir(ex, args)
    install_sigterm()
    meta.update(duration_s=duration, runs_per_cell=runs, dad=args.dad, dad_transmits=args.dad_transmits,
                assoc_delay_s=args.assoc_delay, drop_captures=args.drop_captures,
                sysctls=[f"{n}:{k}={v}" for n, k, v in ex.sysctls], notes=notes)
    for n in notes:
        print(f"note: {n}", file=sys.stderr)
    try:
        # hybla/veno the kernel lacks: registered as BPF struct_ops for this run, removed after
        with cc_mod.loaded(sorted({c.cc for c in todo})) as impl:
            meta["cc_impl"] = impl
            results, interrupted = run_all(ex, todo, runs, duration, out, args.seed, max(1, args.jobs),
                                           args.drop_captures)
    except StepError as e:
        print(f"ilnp-lab run: {e}", file=sys.stderr)
        return 1
    meta["runs_done"] = len(results)
    return experiment.finish(sys.modules[__name__], out, results, meta, args, sum(1 for r in results if not r.get("ok")),
                             json_out=results, interrupted=interrupted)
