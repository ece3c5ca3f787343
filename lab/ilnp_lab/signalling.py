"""`ilnp-lab run signalling-scale`: seed 003 §VI-E (Table III, Fig. 13) and thesis §6.4:
the control messages and bytes one handoff costs as the number of correspondents grows.

The signalling plugin (experiment.py); not a mobility experiment (mobility.py runs one flow
between one CN and the MN): here one MN holds `conns` idle TCP connections to each of N
correspondent hosts and moves once; what is measured is the signalling on the wire at the MN, beside the published formulas. Its file
`experiments/signalling-scale.toml` says `plugin = "signalling"`.

Topology: one router `r`; the N CNs (namespaces cn1..cnN) on one Linux bridge inside `r`
(2001:db8:c::/64, static addresses, `r` is their default router); the MN on two access links
of `r`, network A (2001:db8:1::/64) and network B (2001:db8:2::/64), both advertised by radvd,
B down at first. One handoff, hard (the seed's Fig. 13 counts one handoff of either kind; the
hard order gives each protocol exactly one round of signalling): the MN's link to A goes
down, `outage_s` later its link to B comes up; the capture at the MN (all its interfaces)
from the leave on, until every connection has carried a byte each way on the new path and
`settle_s` more have passed, is what is counted (analysis.control_messages).

Schemes, configured as their users would:
* `ilnp`: ilnpd on the MN (every CN a static peer) and on every CN (the MN a static peer),
  soft handoff (ilnpd's default; with A gone first there is nothing to keep), log level warn;
  the connections use the CNs' identifier addresses.
* `mptcp`: kernel MPTCP, the MN as the client (it opens the connections; mptcp.dev: the
  client creates subflows): `ip mptcp limits set subflows 8 add_addr_accepted 8` on every
  host, the MN's address on A a `subflow` endpoint; on the move, as NetworkManager/mptcpd do,
  the endpoint of the address lost is deleted and one for the address on B added as soon as
  SLAAC gives it (the kernel then opens one MP_JOIN subflow per connection). The CNs listen
  on MPTCP sockets (IPPROTO_MPTCP) and announce nothing.

The connections are held by one helper process (`python3 -m ilnp_lab.signalling hold`) that
creates the CNs' listening sockets inside their namespaces (setns) and the MN's connecting
ones inside the MN's: no process per CN besides ilnpd.
"""

from __future__ import annotations

import ctypes
import json
import os
import selectors
import socket
import subprocess
import sys
import time
from pathlib import Path

from . import analysis, experiment
from .addr import MN_NID, identifier_address, l64, lab_nid
from .daemon import Ilnpd, Peer
from .plots import figure_path, plt, save
from .capture import wire_capture
from .services import radvd
from .testbed import Node, Testbed, stop_process, wait_for
from .topology import dad_sysctls

CN_NET, CN_PREFIX = "2001:db8:c::", "2001:db8:c::/64"
NET_A, NET_B = "2001:db8:1::/64", "2001:db8:2::/64"
PORT = 7300
IPPROTO_MPTCP = 262
CLONE_NEWNET = 0x40000000
SCHEMES = ("ilnp", "mptcp")
# IPv6 packet bytes of one LU / LU-ack in the thesis (§6.4.1: "LU = LU-ACK = 86 bytes", from tcpdump)
THESIS_PAIR_BYTES = 172


def formulas(n_cn: int, addrs_local: int = 1, addrs_host: int = 1, conns: int = 4) -> dict[str, int]:
    """Seed 003 Table III's messages for one handoff, summed over `n_cn` correspondents (Fig. 13:
    one address each, 4 connections per correspondent). MIPv6 with route optimisation as in
    thesis §6.4 (one binding with the home agent, 6 messages per correspondent; Table III writes
    the per-correspondent form (2 + 6) x addrs)."""
    return {"IHMP (DIME)": 2 * max(addrs_local, addrs_host) * n_cn,
            "HIP": 4 * addrs_local * addrs_host * n_cn,
            "MIPv6 RO": (2 + 6 * n_cn) * addrs_local,
            "MPTCP": 4 * addrs_local * addrs_host * conns * n_cn}


def cn_nid(i: int) -> str:
    return lab_nid(0x100 + i)


def cn_addr(i: int) -> str:
    return f"{CN_NET}{0x100 + i:x}"


class Spec(experiment.Spec):
    """experiments/signalling-scale.toml: [experiment] = the full form, [quick] overrides it."""
    KEYS = {"correspondents", "conns", "schemes", "outage_s", "settle_s", "runs"}
    DEFAULTS = {"conns": 4, "schemes": list(SCHEMES), "outage_s": 1.0, "settle_s": 2.0, "runs": 1}

    def check(self, name: str, c: dict) -> None:
        ns = c.get("correspondents")
        if not isinstance(ns, list) or not ns or not all(isinstance(n, int) and 1 <= n <= 250 for n in ns):
            raise ValueError(f"{self.path}: [{name}] correspondents = {ns!r}: a list of counts 1..250")
        if not all(s in SCHEMES for s in c["schemes"]):
            raise ValueError(f"{self.path}: [{name}] schemes = {c['schemes']!r}: known: {', '.join(SCHEMES)}")
        if not (isinstance(c["conns"], int) and 1 <= c["conns"] <= 64):
            raise ValueError(f"{self.path}: [{name}] conns = {c['conns']!r}: 1..64")


OPTIONS = {"runs", "scheme"}  # --runs N: runs per point; --scheme ilnp|mptcp


def describe(spec: Spec) -> str:
    c = spec.full
    return (f"{spec.title}  (correspondents: {', '.join(map(str, c['correspondents']))}; "
            f"{c['conns']} connections each; schemes: {', '.join(c['schemes'])})")


# ---------------------------------------------------------------- the connection holder

def _setns(path: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {path}")
    finally:
        os.close(fd)


def hold(mn_ns: str, cns: list[tuple[str, str]], conns: int, mptcp: bool) -> int:
    """The helper: listening sockets in each CN namespace, `conns` connections from the MN's
    namespace to each; prints {"ready": n} once every connection exchanged a byte, then on
    each stdin line "check" sends one byte on every MN-side socket and prints how many came
    back echoed within 30 s ({"echoed": k, "of": n}); "quit" ends it."""
    proto = IPPROTO_MPTCP if mptcp else 0
    listeners = []
    for ns, addr in cns:
        _setns(f"/run/netns/{ns}")
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM, proto)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("::", PORT))
        s.listen(conns + 4)
        listeners.append(s)
    _setns(f"/run/netns/{mn_ns}")
    clients = []
    for _ns, addr in cns:
        for _ in range(conns):
            c = socket.socket(socket.AF_INET6, socket.SOCK_STREAM, proto)
            c.settimeout(20)
            c.connect((addr, PORT))
            clients.append(c)
    servers = []
    for s in listeners:
        for _ in range(conns):
            a, _peer = s.accept()
            servers.append(a)
    sel = selectors.DefaultSelector()
    for a in servers:
        a.setblocking(False)
        sel.register(a, selectors.EVENT_READ)

    def exchange(timeout: float) -> int:
        for c in clients:
            try:
                c.sendall(b"x")
            except OSError:
                pass
        echoed, deadline, pending = 0, time.monotonic() + timeout, set(range(len(clients)))
        while pending and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=0.05):
                try:
                    data = key.fileobj.recv(64)
                    if data:
                        key.fileobj.sendall(data)
                except OSError:
                    pass
            for i in list(pending):
                c = clients[i]
                c.settimeout(0)
                try:
                    if c.recv(64):
                        pending.discard(i)
                        echoed += 1
                except (BlockingIOError, socket.timeout):
                    pass
                except OSError:
                    pending.discard(i)
        return echoed

    print(json.dumps({"ready": exchange(20), "of": len(clients)}), flush=True)
    for line in sys.stdin:
        if line.strip() == "check":
            print(json.dumps({"echoed": exchange(30), "of": len(clients)}), flush=True)
        elif line.strip() == "quit":
            break
    return 0


# ---------------------------------------------------------------- one point

def build(bed: Testbed, n: int) -> dict:
    r = bed.add_node("r", router=True)
    mn = bed.add_node("mn")
    r.ip("link", "add", "br0", "type", "bridge")
    r.set_link("br0", True)
    r.add_addr("br0", f"{CN_NET}1/64")
    cns = []
    for i in range(1, n + 1):
        cn = bed.add_node(f"cn{i}")
        bed.link(cn, "eth0", r, f"p{i}")
        r.ip("link", "set", f"p{i}", "master", "br0")
        cn.add_addr("eth0", f"{cn_addr(i)}/64")
        cn.add_route("default", f"{CN_NET}1")
        cns.append(cn)
    for iface, net in (("eth-a", NET_A), ("eth-b", NET_B)):
        bed.link(r, iface, mn, iface)
        r.add_addr(iface, net.replace("::/64", "::1/64"))
        mn.sysctl(*[f"net.ipv6.conf.{iface}.{k}={v}" for k, v in dad_sysctls("optimistic", 1)])
        radvd(r, iface, net, min_ra=3, max_ra=4, valid=600, preferred=300)
    mn.set_link("eth-b", False)
    wait_for(lambda: any(a.startswith("2001:db8:1:") for a in mn.global_addrs("eth-a")), timeout=20,
             what="SLAAC address on the MN's network A")
    return {"r": r, "mn": mn, "cns": cns}


def _addr_in(node: Node, iface: str, net: str) -> str | None:
    pre = net.split("::")[0] + ":"
    return next((a for a in node.global_addrs(iface) if a.startswith(pre)), None)


def _procs_cost(pids: list[int]) -> dict:
    """RSS (sum, MiB) and CPU time (s) of processes by pid."""
    rss, cpu = 0, 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        try:
            for line in open(f"/proc/{pid}/status"):
                if line.startswith("VmRSS:"):
                    rss += int(line.split()[1])
            f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            cpu += (int(f[11]) + int(f[12])) / tick
        except OSError:
            pass
    return {"rss_mib": round(rss / 1024, 1), "cpu_s": round(cpu, 2), "processes": len(pids)}


def run_point(scheme: str, n: int, cfg: dict, out: Path, seed: int) -> dict:
    d = out / "runs" / f"{scheme}-n{n:03d}-run{seed:02d}"
    d.mkdir(parents=True, exist_ok=True)
    res = {"scheme": scheme, "correspondents": n, "conns": cfg["conns"], "run": seed, "ok": False}
    step = "build"
    t_start = time.monotonic()
    try:
        with Testbed(workdir=d) as bed:
            nodes = build(bed, n)
            mn, cns = nodes["mn"], nodes["cns"]
            res["build_s"] = round(time.monotonic() - t_start, 2)
            daemons = []
            step = f"{scheme} set-up"
            t_setup = time.monotonic()
            if scheme == "ilnp":
                peers = [Peer(f"cn{i}", cn_nid(i), [(l64(CN_PREFIX), 10)]) for i in range(1, n + 1)]
                daemons.append(Ilnpd(mn, ["eth-a", "eth-b"], nid=MN_NID, peers=peers,
                                     extra={"rng_seed": seed, "log_level": "warn"}).start())
                for i, cn in enumerate(cns, 1):
                    daemons.append(Ilnpd(cn, ["eth0"], nid=cn_nid(i), peers=[Peer("mn", MN_NID, [(l64(NET_A), 10)])],
                                         extra={"rng_seed": seed * 1000 + i, "log_level": "warn"}).start())
                targets = [(cn.ns, identifier_address(cn_nid(i))) for i, cn in enumerate(cns, 1)]
            else:
                for node in (mn, *cns):
                    node.ip("mptcp", "limits", "set", "subflows", "8", "add_addr_accepted", "8")
                mn.ip("mptcp", "endpoint", "add", _addr_in(mn, "eth-a", NET_A), "dev", "eth-a", "id", "1", "subflow")
                targets = [(cn.ns, cn_addr(i)) for i, cn in enumerate(cns, 1)]
            res["setup_s"] = round(time.monotonic() - t_setup, 2)
            step = "open the connections"
            env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
            args = [sys.executable, "-m", "ilnp_lab.signalling", "hold", mn.ns, str(cfg["conns"]),
                    "mptcp" if scheme == "mptcp" else "tcp", *[f"{ns}={a}" for ns, a in targets]]
            holder = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(d / "hold.err", "w"),
                                      text=True, env=env, start_new_session=True)
            bed.procs.append(holder)
            ready = json.loads(holder.stdout.readline() or "{}")
            res["connections"] = ready.get("of")
            res["connections_ready"] = ready.get("ready")
            if ready.get("ready") != n * cfg["conns"]:
                raise RuntimeError(f"only {ready.get('ready')} of {n * cfg['conns']} connections carried a byte: "
                                   f"{(d / 'hold.err').read_text()[-500:]}")
            res["daemon_cost_before"] = _procs_cost([dm.proc.pid for dm in daemons])
            step = "capture and move"
            cap = wire_capture(mn, d / "mn.pcap")
            time.sleep(0.5)
            t0 = time.time()
            mn.set_link("eth-a", False)
            if scheme == "mptcp":
                mn.ip("mptcp", "endpoint", "delete", "id", "1", check=False)
            time.sleep(cfg["outage_s"])
            t_join = time.time() - t0
            mn.set_link("eth-b", True)
            addr_b = wait_for(lambda: _addr_in(mn, "eth-b", NET_B), timeout=20, interval=0.005,
                              what="SLAAC address on network B")
            if scheme == "mptcp":
                mn.ip("mptcp", "endpoint", "add", addr_b, "dev", "eth-b", "id", "2", "subflow")
            step = "every connection on the new path"
            holder.stdin.write("check\n")
            holder.stdin.flush()
            echoed = json.loads(holder.stdout.readline() or "{}")
            res["connections_alive_after"] = echoed.get("echoed")
            time.sleep(cfg["settle_s"])
            res["daemon_cost_after"] = _procs_cost([dm.proc.pid for dm in daemons])
            holder.stdin.write("quit\n")
            holder.stdin.flush()
            try:
                holder.wait(timeout=10)
            except subprocess.TimeoutExpired:
                stop_process(holder)
            cap.stop()
            step = "analyse"
            msgs = analysis.control_messages(str(d / "mn.pcap"), t0)
            tot = analysis.control_totals(msgs, 0.0)
            res.update(t_join_s=round(t_join, 4), messages=tot["messages"], bytes=tot["bytes"],
                       by_kind=tot["by_kind"], formulas=formulas(n, conns=cfg["conns"]),
                       per_correspondent_messages=round(tot["messages"] / n, 3),
                       per_correspondent_bytes=round(tot["bytes"] / n, 1),
                       first_s=msgs[0]["t_s"] if msgs else None, last_s=msgs[-1]["t_s"] if msgs else None)
            if scheme == "ilnp":
                res["lus_acked"] = sum(1 for a in analysis.lu_handshakes(str(d / "mn.pcap"), t0, mn_nid=MN_NID)
                                       if a["t_ack_s"] is not None)
            res["ok"] = True
    except Exception as e:  # recorded; the other points go on
        res["error"] = f"step '{step}': {e}"
    res["elapsed_s"] = round(time.monotonic() - t_start, 2)
    (d / "result.json").write_text(json.dumps(res, indent=1))
    return res


# ---------------------------------------------------------------- report

def plot(out: Path, results: list[dict]) -> list[str]:
    ok = [r for r in results if r.get("ok")]
    if not ok:
        return []
    ns = sorted({r["correspondents"] for r in ok})
    conns = ok[0]["conns"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    span = list(range(1, max(max(ns), 2) + 1))
    for name in formulas(1, conns=conns):
        ax.plot(span, [formulas(k, conns=conns)[name] for k in span], "--", label=f"{name} (Table III)")
    for scheme, mark in (("ilnp", "o"), ("mptcp", "s")):
        pts = sorted((r["correspondents"], r["messages"]) for r in ok if r["scheme"] == scheme)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], mark + "-", lw=2, label=f"{scheme} measured")
    ax.set_xlabel("correspondent hosts")
    ax.set_ylabel("control messages for one handoff")
    ax.set_title(f"Handoff control messages ({conns} connections per correspondent)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    p = save(fig, figure_path(out / "plots" / "signalling-scale-messages.png"))
    return [str(p.relative_to(out))]


def report(out: Path, results: list[dict], meta: dict) -> Path:
    out = Path(out)
    figs = plot(out, results)
    cfg = meta.get("config", {})
    L = experiment.header(meta) + [
         "One MN, N correspondent hosts (namespaces on one bridge behind router r), "
         f"{cfg.get('conns', 4)} idle TCP connections from the MN to each; one hard handoff (the MN's link to "
         f"network A down, {cfg.get('outage_s', 1)} s later its link to B up). Counted at the MN, all interfaces, "
         "from the leave until every connection echoed a byte on the new path plus "
         f"{cfg.get('settle_s', 2)} s: ILNP = LU + LU-ack; MPTCP = MP_JOIN SYN / SYN-ACK / ACK and the responder's "
         "fourth ACK, ADD_ADDR (+ echo), REMOVE_ADDR. Bytes = IPv6 packets (header, extension headers and "
         "upper layer; +14 per message for an Ethernet frame).", "",
         "| scheme | correspondents | connections alive after / all | messages | bytes | per correspondent: "
         "messages / bytes | by kind | IHMP 2·N | HIP 4·N | MIPv6 RO 2+6·N | MPTCP 4·1·1·conns·N | "
         "thesis ILNP bytes 172·N |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(results, key=lambda r: (r["scheme"], r["correspondents"], r["run"])):
        if not r.get("ok"):
            L.append(f"| {r['scheme']} | {r['correspondents']} | failed: {r.get('error')} |||||||||")
            continue
        f = r["formulas"]
        kinds = ", ".join(f"{k} {v['messages']}" for k, v in sorted(r["by_kind"].items()))
        L.append(f"| {r['scheme']} | {r['correspondents']} | {r['connections_alive_after']}/{r['connections']} | "
                 f"{r['messages']} | {r['bytes']} | {r['per_correspondent_messages']:g} / "
                 f"{r['per_correspondent_bytes']:g} | {kinds or '—'} | {f['IHMP (DIME)']} | {f['HIP']} | "
                 f"{f['MIPv6 RO']} | {f['MPTCP']} | {THESIS_PAIR_BYTES * r['correspondents']} |")
    L += ["", "Cost of the daemons (ILNP: ilnpd on the MN and on every CN; RSS summed over them, CPU time "
          "since each started), and of building and setting up each point:", "",
          "| scheme | correspondents | ilnpd processes | RSS after the handoff (MiB) | CPU (s) | build (s) | set-up (s) "
          "| whole point (s) |", "|---|---|---|---|---|---|---|---|"]
    for r in sorted((r for r in results if r.get("ok")), key=lambda r: (r["scheme"], r["correspondents"])):
        c = r.get("daemon_cost_after") or {}
        L.append(f"| {r['scheme']} | {r['correspondents']} | {c.get('processes', 0)} | {c.get('rss_mib', 0)} | "
                 f"{c.get('cpu_s', 0)} | {r.get('build_s')} | {r.get('setup_s')} | {r.get('elapsed_s')} |")
    L += ["", "Published: seed 003 Table III (formulas above; Fig. 13 plots them for 1-100 correspondents, one "
          "address each, 4 connections); thesis §6.4: ILNPv6 2·MN·CN packets and 172·MN·CN bytes (LU = LU-ACK "
          "= 86 bytes), MIPv6 with RO MN·(2 + 6·CN) packets, MN·(204 + 596·CN) bytes.", ""]
    L += [f"![{Path(f).stem}]({f})" for f in figs] + [""]
    p = out / "report.md"
    p.write_text("\n".join(L) + "\n")
    return p


def run(spec: Spec, args, meta: dict) -> int:
    """`ilnp-lab run signalling-scale` (experiment.py hands the file here)."""
    bad = [s for s in args.scheme or () if s not in SCHEMES]
    if bad:
        print(f"ilnp-lab run {spec.name}: --scheme {', '.join(bad)}: known: {', '.join(SCHEMES)}", file=sys.stderr)
        return 2
    cfg = spec.cfg(args.quick, schemes=args.scheme, runs=args.runs)
    runs = cfg["runs"]
    out = experiment.out_dir(spec, args)
    meta["config"] = cfg
    results = []
    for scheme in cfg["schemes"]:
        for n in cfg["correspondents"]:
            for i in range(1, runs + 1):
                r = run_point(scheme, n, cfg, out, args.seed + i - 1)
                print(f"  {scheme:5} N={n:3} run {i}: "
                      + (f"{r['messages']} messages, {r['bytes']} bytes, {r['connections_alive_after']}/"
                         f"{r['connections']} connections alive ({r['elapsed_s']} s)" if r["ok"] else r["error"]),
                      file=sys.stderr)
                results.append(r)
    failed = sum(1 for r in results if not r["ok"])
    return experiment.finish(sys.modules[__name__], out, results, meta, args, failed, json_out=results)


def main(argv: list[str]) -> int:
    if argv[:1] == ["hold"]:
        mn_ns, conns, kind, *cns = argv[1:]
        return hold(mn_ns, [tuple(c.split("=", 1)) for c in cns], int(conns), kind == "mptcp")
    print("usage: python -m ilnp_lab.signalling hold MN_NS CONNS tcp|mptcp NS=ADDR ...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
