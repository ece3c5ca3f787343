#!/usr/bin/env python3
"""Data-path benchmark (issue #14): ILNPv6 (eBPF fast path and userspace reference path)
against plain IPv6 with its normal offloads, in one run, interleaved. Prints numbers and
ratios; asserts nothing. Run as root after scripts/setup.sh and `cargo build --release`:

    sudo .venv/bin/python bench/datapath.py [--quick] [--rounds 3] [--seconds 2] [--json out.json]

Blocks: topology (direct: CN — MN on one veth; routed: CN — R1 — MN, R1 a plain Linux
router) × datapath (ebpf: route_xmit = true, small packets translated at the identifier
route and transmitted once; ebpf-tc: as users run it, the default, every packet through
ilnp0's tc program; userspace) × MN's ILCC size (1, then filled towards 10^6
established entries by `ilnp-flood` as bench/admission.py does, for at most
--fill-deadline seconds; the userspace path at 1 unless --userspace-sizes). Every veth keeps
the kernel's defaults (TSO/GSO on, GRO off). In every block each measurement runs plain IPv6 then ILNPv6, and the
whole list repeats `--rounds` times (A B A B ...); medians and [min-max] are printed, and
ratios of medians against plain IPv6 of the same block:

  tcp1, tcp4        iperf3 TCP CN -> MN, 1 and 4 streams, Gbit/s, and the sender's
                    retransmitted segments
  tcp1_1cpu, ...    the same with both iperf3 processes pinned to CPU 0 (taskset): with the two
                    hosts' stacks on one veth, every cycle of the transfer (sender, both
                    softirqs, receiver) then comes from one core, so the rate is the inverse of
                    the per-byte cost. With two cores the rate also depends on how the work
                    splits between them, which plain IPv6 and ILNPv6 do differently on veth
                    (docs/benchmarks.md § Why ILNPv6 ran 4 TCP streams faster than plain).
                    MN's receive buffers start at --one-core-rmem in these runs (both paths):
                    with autotuning from 128 KiB the buffer settles in one of two states, one of
                    them window-limited, and the rate says which, not what a byte costs.
                    Each TCP run records MN's ACKs and zero-window advertisements, and the
                    runs are printed split by receive-window state (ZERO_WIN_SHARE)
  udp64, udp1400    iperf3 UDP CN -> MN, -b 0, payload 64 / 1400 bytes; packets/s delivered
                    to MN's UDP layer (Udp6InDatagrams + Udp6RcvbufErrors: what crossed both
                    data paths; iperf3's own receive rate, below that, is printed too):
                    "snd" one iperf3 sender (its thread and CN's transmit path are the limit);
                    "rcv" two iperf3 senders against two receivers, more than MN takes in
                    (the share not delivered shows it)
  rr                ilnp-rr (Rust, crates/ilnp-flood) UDP 64-byte request/response,
                    median and p99 round trip, µs; ILNP minus plain
  header floor      the UDP measurements run a third time, plain IPv6 to a third MN
                    address (FLOOR_MN) with a 16-byte Destination Options header pushed on
                    CN's uplink by a minimal tc program (bench/hdr_floor.bpf.c): the cost of
                    carrying ILNPv6's header alone, with no translation and one transmit;
                    what a design with a nonce on every packet cannot go below. Its
                    program's own time per run is taken over its runs (`its program`)
  BPF ns/run        each program's run_time_ns / run_cnt over the ILNP measurement
                    (lab/ilnp_lab/bpfstats.py; kernel.bpf_stats_enabled=1 during the run,
                    restored after); for udp64 a run is one packet
  ilnpd             both daemons' CPU time (all threads, schedstat) per packet received,
                    and the slow path's median time per TUN packet (`stats`.slow_path_ns)

Plain IPv6 runs with the daemons up (their ingress programs see and pass plain packets: the
"plain" BPF column shows what that costs); the hosts' offloads are the kernel's defaults.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from admission import fill, rss_mib  # noqa: E402
from ilnp_lab.addr import CN_NID, MN_NID  # noqa: E402
from ilnp_lab.bpfstats import daemon_progs, prog_stats, stats_enabled  # noqa: E402
from ilnp_lab.daemon import Ilnpd, Peer  # noqa: E402
from ilnp_lab.fixtures import CN_L64, MN_L64, MN_WIRE, three_node  # noqa: E402
from ilnp_lab.testbed import Testbed, binary, stop_process  # noqa: E402

PLAIN_MN = "2001:db8:b::d"
FLOOR_MN = "2001:db8:b::e"  # plain IPv6 + a 16-byte DestOpts header pushed at CN's uplink (header floor)
FLOOR_SRC = Path(__file__).resolve().parent / "hdr_floor.bpf.c"
# --modes: ilnpd's data path and options. "ebpf" with route_xmit = true (small packets
# translated at the identifier route, bpf/ilnp_route.c, one transmit); "ebpf-tc" as users run
# it (the default: every packet through ilnp0's tc program, transmitted on ilnp0 and again on
# the uplink); "userspace" the reference path
MODES = {"ebpf": ("ebpf", {"route_xmit": True}), "ebpf-tc": ("ebpf", {}), "userspace": ("userspace", {})}
TESTS = ("tcp1", "tcp4", "tcp1_1cpu", "tcp4_1cpu", "udp64_snd", "udp64_rcv", "udp1400_snd", "udp1400_rcv", "rr")
# A TCP run is "receive-window limited" when MN advertised a zero window in more than this share
# of its segments (ACKs). With one core and the kernel's autotuning, MN's receive buffer settles
# in one of two states from run to run: tens of MB and no zero windows, or ~5 MB with a zero
# window in 10-20 % of the ACKs, 3x the ACKs and less rate; ILNPv6 fell into the second far more
# often than plain IPv6 (docs/benchmarks.md § TCP on one core: the receive window)
ZERO_WIN_SHARE = 0.01
# So the one-core runs measure the cost per byte, not which state autotuning fell into, MN's
# receive buffers start there at the kernel's default maximum (net.ipv4.tcp_rmem[2], 32 MiB),
# where the runs without zero windows had grown them (20-33 MB); the two-core runs keep
# the kernel's defaults. Set for plain IPv6 and ILNPv6 alike, in MN's namespace, for the run only.
ONE_CORE_RMEM = 33554432


def build(bed, topo):
    """(cn, flooder, mn) with the hosts' default offloads. `direct`: one veth, each host's
    /64 on-link at the other (a default route via the other host: ilnpd's uplink router)."""
    if topo == "routed":
        cn, r1, mn = three_node(bed)
        for n in (cn, mn):  # three_node makes the hosts segment (services.nic_segmentation): undo
            n.run("ethtool", "-K", "eth0", "tso", "on")
        return cn, r1, mn
    cn, mn = bed.add_node("cn"), bed.add_node("mn")
    bed.link(cn, "eth0", mn, "eth0")
    cn.add_addr("eth0", "2001:db8:a::c/64")
    mn.add_addr("eth0", "2001:db8:b::d/64")
    cn.ip("-6", "route", "add", "2001:db8:b::/64", "dev", "eth0")
    mn.ip("-6", "route", "add", "2001:db8:a::/64", "dev", "eth0")
    cn.ip("-6", "route", "add", "default", "via", "2001:db8:b::d", "dev", "eth0")
    mn.ip("-6", "route", "add", "default", "via", "2001:db8:a::c", "dev", "eth0")
    return cn, cn, mn


def header_floor(bed, cn, mn):
    """Attach bench/hdr_floor.bpf.c at CN's uplink egress (a clsact filter beside ilnpd's tcx
    programs) and give MN the FLOOR_MN address. Returns the program's id."""
    obj = Path(bed.workdir) / "hdr_floor.o"
    subprocess.run(["clang", "-O2", "-g", "-target", "bpf", "-DFLOOR_DST_LAST=0x0e", "-c", str(FLOOR_SRC), "-o", str(obj)],
                   check=True)
    mn.add_addr("eth0", f"{FLOOR_MN}/128")
    cn.run("tc", "qdisc", "add", "dev", "eth0", "clsact")
    cn.run("tc", "filter", "add", "dev", "eth0", "egress", "bpf", "da", "obj", str(obj), "sec", "tc")
    shown = cn.run("tc", "filter", "show", "dev", "eth0", "egress").stdout
    if not (m := re.search(r"\bid (\d+)", shown)):
        raise RuntimeError(f"header floor: no program id in `tc filter show dev eth0 egress`: {shown!r}")
    return int(m.group(1))


def iperf_tcp(cn, mn, dst, seconds, streams, cpu=None, rmem=0):
    """Gbit/s received and segments retransmitted; `cpu`: both iperf3 processes pinned to it;
    `rmem`: MN's receive buffers start at this size (tcp_rmem's default) for the run."""
    pin = ["taskset", "-c", str(cpu)] if cpu is not None else []
    saved = mn.run("sysctl", "-n", "net.ipv4.tcp_rmem").stdout.split()
    if rmem:
        mn.run("sysctl", "-qw", f"net.ipv4.tcp_rmem={saved[0]} {rmem} {max(rmem, int(saved[2]))}")
    in_effect = int(mn.run("sysctl", "-n", "net.ipv4.tcp_rmem").stdout.split()[1])
    try:
        srv = mn.spawn(*pin, "iperf3", "-s", "-1", "-B", dst)
        time.sleep(0.3)
        c0 = tcp_counters(mn)
        r = cn.run(*pin, "iperf3", "-c", dst, "-t", str(seconds), "-P", str(streams), "-J", check=False,
                   timeout=seconds + 40)
        c1 = tcp_counters(mn)
        srv.wait(timeout=15)
    finally:
        if rmem:
            mn.run("sysctl", "-qw", f"net.ipv4.tcp_rmem={' '.join(saved)}")
    if r.returncode != 0:
        return None
    end = json.loads(r.stdout)["end"]
    acks, zero = c1["OutSegs"] - c0["OutSegs"], c1["TCPToZeroWindowAdv"] - c0["TCPToZeroWindowAdv"]
    return {"v": end["sum_received"]["bits_per_second"] / 1e9, "retrans": end["sum_sent"].get("retransmits"),
            "mn_acks": acks, "mn_zero_win": zero, "window_limited": zero > ZERO_WIN_SHARE * acks,
            "mn_rmem_default": in_effect}


def tcp_counters(node):
    """`node`'s Tcp and TcpExt counters (/proc/net/snmp and netstat: header line, value line)."""
    out = {}
    for f in ("/proc/net/snmp", "/proc/net/netstat"):
        lines = [ln.split() for ln in node.run("cat", f).stdout.splitlines()]
        for head, vals in zip(lines[::2], lines[1::2]):
            if head[0] in ("Tcp:", "TcpExt:"):
                out.update((k, int(v)) for k, v in zip(head[1:], vals[1:]))
    return out


def udp6_delivered(node):
    """Datagrams that reached `node`'s UDP layer: Udp6InDatagrams + Udp6RcvbufErrors (the
    data path delivered them; a full socket buffer is the application's limit)."""
    c = dict(line.split()[:2] for line in node.run("cat", "/proc/net/snmp6").stdout.splitlines() if line.strip())
    return int(c["Udp6InDatagrams"]) + int(c["Udp6RcvbufErrors"])


def iperf_udp(cn, mn, dst, seconds, size, senders):
    """`senders` parallel iperf3 UDP senders at -b 0: packets/s delivered to MN's UDP layer
    (v), received by iperf3 (app_pps), sent (sent_pps)."""
    ports = [5201 + i for i in range(senders)]
    srvs = [mn.spawn("iperf3", "-s", "-1", "-B", dst, "-p", str(p)) for p in ports]
    time.sleep(0.3)
    d0, t0, w0 = udp6_delivered(mn), time.monotonic(), cn.link_stats("eth0")
    clients = [cn.spawn("iperf3", "-c", dst, "-p", str(p), "-u", "-b", "0", "-l", str(size), "-t", str(seconds),
                        "-J", stdout=-1) for p in ports]
    outs = []
    for c in clients:
        try:
            out, _ = c.communicate(timeout=seconds + 40)
        except Exception:
            stop_process(c)
            out = b""
        outs.append(out)
    d1, t1, w1 = udp6_delivered(mn), time.monotonic(), cn.link_stats("eth0")
    for s in srvs:
        try:
            s.wait(timeout=15)
        except Exception:
            stop_process(s)
    rx = sent = 0
    secs = []
    for out in outs:
        try:
            s = json.loads(out)["end"]["sum"]
        except (ValueError, KeyError):
            return None
        sent += s["packets"]
        rx += s["packets"] - s["lost_packets"]
        secs.append(s["seconds"])
    if not secs:
        return None
    # the senders' own time (iperf3 -t); the counter window adds the clients' start/stop
    return {"v": (d1 - d0) / max(secs), "app_pps": rx / max(secs), "loss": 1 - (d1 - d0) / max(sent, 1),
            "app_loss": 1 - rx / max(sent, 1), "sent_pps": sent / max(secs), "window_s": t1 - t0,
            # frame bytes per packet on CN's uplink (iperf3's control packets are a few in 10^5)
            "wire_bytes": (w1["tx_bytes"] - w0["tx_bytes"]) / max(w1["tx_packets"] - w0["tx_packets"], 1)}


def rr(cn, mn, dst, count):
    srv = mn.spawn(binary("ilnp-rr"), "server", "--bind", dst, "--idle-exit", "3")
    time.sleep(0.3)
    r = cn.run(binary("ilnp-rr"), "client", "--dst", dst, "--count", str(count), check=False, timeout=120)
    stop_process(srv)
    if r.returncode != 0:
        return None
    j = json.loads(r.stdout)
    return {"v": j["median_us"], "p99": j["p99_us"], "lost": j["lost"]}


def measure(test, cn, mn, dst, a):
    if test.startswith("tcp"):
        streams, _, cpu = test[3:].partition("_")
        if cpu == "1cpu":
            return iperf_tcp(cn, mn, dst, a.seconds, int(streams), 0, a.one_core_rmem)
        return iperf_tcp(cn, mn, dst, a.seconds, int(streams))
    if test.startswith("udp"):
        size, kind = test[3:].split("_")
        return iperf_udp(cn, mn, dst, a.seconds, int(size), 1 if kind == "snd" else 2)
    return rr(cn, mn, dst, a.rr)


def cpu_ns(pid):
    """CPU time of every thread of `pid` (schedstat's first field), ns."""
    total = 0
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((t / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def hist_median(h0, h1):
    """The bucket label holding the median of the histogram's growth between h0 and h1."""
    d = {k: v - h0.get(k, 0) for k, v in h1.items() if v - h0.get(k, 0) > 0}
    n = sum(d.values())
    if not n:
        return None
    order = sorted(d, key=lambda k: (k.startswith("ge_"), int(k.split("_")[1][:-2])))
    acc = 0
    for k in order:
        acc += d[k]
        if acc * 2 >= n:
            return k
    return order[-1]


class Probe:
    """BPF run time per run, ilnpd CPU time and slow-path histogram around one measurement."""

    def __init__(self, daemons):
        self.daemons = daemons
        self.progs = {n: daemon_progs(d.proc.pid) for n, d in daemons.items()}

    def snap(self):
        return {n: {"bpf": prog_stats(self.progs[n]), "cpu": cpu_ns(d.proc.pid),
                    "hist": d.stats().get("slow_path_ns", {})} for n, d in self.daemons.items()}

    @staticmethod
    def diff(s0, s1, packets=None):
        out = {"bpf_ns": {}, "bpf_runs": {}}
        cpu = 0
        for n in s0:
            for p, (t1, c1) in s1[n]["bpf"].items():
                t0, c0 = s0[n]["bpf"].get(p, (0, 0))
                if c1 > c0:
                    out["bpf_ns"][f"{n}.{p[5:]}"] = (t1 - t0) / (c1 - c0)
                    out["bpf_runs"][f"{n}.{p[5:]}"] = c1 - c0
            cpu += s1[n]["cpu"] - s0[n]["cpu"]
            out[f"{n}_slow_median"] = hist_median(s0[n]["hist"], s1[n]["hist"])
        out["ilnpd_cpu_ms"] = cpu / 1e6
        if packets:
            out["ilnpd_cpu_ns_per_pkt"] = cpu / packets
        return out


def floor_time(s0, s1):
    """The header floor's program over one measurement, as Probe.diff gives ilnpd's."""
    (t0, c0), (t1, c1) = s0["floor"], s1["floor"]
    return {"bpf_ns": {"floor": (t1 - t0) / (c1 - c0)} if c1 > c0 else {}, "bpf_runs": {"floor": c1 - c0}}


def block(bed_nodes, mode, sizes, a, topo, floor_prog=None):
    cn, flooder, mn = bed_nodes
    big = max(sizes) > 1
    datapath, opts = MODES[mode]
    dcn = Ilnpd(cn, ["eth0"], nid=CN_NID, datapath=datapath, peers=[Peer("mn", MN_NID, [(MN_L64, 10)])],
                extra={"log_level": "warn", **opts}).start()
    # admission "open": the fill's packets (one per random NID) each make an established entry
    dmn = Ilnpd(mn, ["eth0"], nid=MN_NID, datapath=datapath, peers=[Peer("cn", CN_NID, [(CN_L64, 10)])],
                extra={"log_level": "warn", "admission": "open", "hello_rate_pps": 1, "hello_burst": 1, **opts,
                       **({"ilcc_max_entries": max(sizes) + 100_000} if big else {})}).start()
    rows = []
    try:
        mn_id = dmn.identifier_address()
        iperf_tcp(cn, mn, mn_id, 1, 1)  # the session exists before anything is timed
        probe = Probe({"cn": dcn, "mn": dmn})
        for n in sizes:
            have = dmn.status()["admission"]["established"]
            if n > have:
                t0 = time.monotonic()
                have = fill(dmn, flooder, n, dst=MN_WIRE, deadline_s=a.fill_deadline)
                print(f"  [{topo}/{mode}] filled MN's ILCC to {have} in {time.monotonic() - t0:.0f} s", flush=True)
            res = {t: {"plain": [], "ilnp": [], "hdr": [], "probe": [], "plain_probe": [], "hdr_probe": []}
                   for t in a.tests}
            with stats_enabled():
                for _ in range(a.rounds):
                    for t in a.tests:
                        variants = [("plain", PLAIN_MN), ("ilnp", mn_id)]
                        if datapath == "ebpf" and t.startswith("udp"):
                            variants.append(("hdr", FLOOR_MN))
                        for k, dst in variants:
                            s0 = probe.snap()
                            f0 = prog_stats({"floor": floor_prog}) if k == "hdr" else None
                            prof = perf_start(a, t, k, topo, mode, n)
                            m = measure(t, cn, mn, dst, a)
                            perf_stop(prof)
                            s1 = probe.snap()
                            pk = m["v"] * a.seconds if m and t.startswith("udp") else None
                            res[t][k].append(m)
                            if k == "hdr":
                                res[t]["hdr_probe"].append(floor_time(f0, prog_stats({"floor": floor_prog})))
                            else:
                                res[t]["probe" if k == "ilnp" else "plain_probe"].append(Probe.diff(s0, s1, pk))
            row = {"topo": topo, "mode": mode, "entries": have, "rss_mib": rss_mib(dmn.proc.pid), "tests": res}
            rows.append(row)
            print_row(row, a)
    finally:
        dcn.stop()
        dmn.stop()
    return rows


def perf_start(a, test, kind, topo, mode, entries):
    """`perf record -a -g` over one measurement, if asked (--perf TEST): PREFIX-topo-mode-
    entries-{plain,ilnp}.data (the last round's)."""
    if not a.perf or a.perf != test:
        return None
    out = f"{a.perf_out}-{topo}-{mode}-{entries}-{kind}.data"
    return subprocess.Popen(["perf", "record", "-q", "-a", "-g", "-o", out], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def perf_stop(p):
    if p:
        stop_process(p, sig=signal.SIGINT, timeout=60)


def med(ms, key="v"):
    xs = [m[key] for m in ms if m and m.get(key) is not None]
    return (statistics.median(xs), min(xs), max(xs)) if xs else None


def fmt(x, unit):
    if x is None:
        return "failed"
    if unit == "pps":
        return f"{x[0] / 1e3:.0f}k [{x[1] / 1e3:.0f}-{x[2] / 1e3:.0f}k]"
    return f"{x[0]:.2f} [{x[1]:.2f}-{x[2]:.2f}]"


def window_split(r):
    """The TCP runs split by MN's receive-window state (ZERO_WIN_SHARE), each kind's medians and ratio."""
    out = []
    for lim, name in ((False, "not window-limited"), (True, "window-limited")):
        runs = [[m for m in r[k] if m and m.get("window_limited") is lim] for k in ("plain", "ilnp")]
        p, i = med(runs[0]), med(runs[1])
        ratio = f" {i[0] / p[0]:.2f}x" if p and i else ""
        out.append(f"{name} runs {len(runs[0])}/{len(runs[1])}: {p[0] if p else float('nan'):.2f} / "
                   f"{i[0] if i else float('nan'):.2f}{ratio}")
    return "receive window (plain/ILNP): " + "; ".join(out)


def bpf_summary(probes):
    """prog: median ns/run (median runs per measurement)."""
    keys = sorted({k for p in probes for k in p["bpf_ns"]})
    return ", ".join(f"{k} {statistics.median([p['bpf_ns'][k] for p in probes if k in p['bpf_ns']]):.0f}"
                     f" ({statistics.median([p['bpf_runs'][k] for p in probes if k in p['bpf_runs']]):.0f})"
                     for k in keys) or "-"


def print_row(row, a):
    print(f"\n== {row['topo']}, {row['mode']}, MN's ILCC {row['entries']} entries (ilnpd RSS {row['rss_mib']:.0f} MiB); "
          f"{a.rounds} rounds x {a.seconds} s; median [min-max]", flush=True)
    for t in row["tests"]:
        r = row["tests"][t]
        p, i, h = med(r["plain"]), med(r["ilnp"]), med(r.get("hdr", []))
        if t == "rr":
            p99p, p99i = med(r["plain"], "p99"), med(r["ilnp"], "p99")
            added = f"{i[0] - p[0]:+.1f} us median" if p and i else "-"
            added99 = f"{p99i[0] - p99p[0]:+.1f} us p99" if p99p and p99i else ""
            print(f"  rr (us)       plain {fmt(p, 'us')} p99 {fmt(p99p, 'us')} | ILNP {fmt(i, 'us')} p99 {fmt(p99i, 'us')}"
                  f" | {added} {added99}")
        else:
            unit = "pps" if t.startswith("udp") else "Gbit/s"
            ratio = f"{i[0] / p[0]:.2f}x" if p and i and p[0] else "-"
            loss = ""
            if t.startswith("udp"):
                lp, li = med(r["plain"], "loss"), med(r["ilnp"], "loss")
                ap_, ai = med(r["plain"], "app_pps"), med(r["ilnp"], "app_pps")
                sp, si = med(r["plain"], "sent_pps"), med(r["ilnp"], "sent_pps")
                loss = (f" (not delivered {max(lp[0], 0) * 100 if lp else float('nan'):.0f}%/"
                        f"{max(li[0], 0) * 100 if li else float('nan'):.0f}%; sent {sp[0] / 1e3 if sp else 0:.0f}k/"
                        f"{si[0] / 1e3 if si else 0:.0f}k; iperf3 got {ap_[0] / 1e3 if ap_ else 0:.0f}k/"
                        f"{ai[0] / 1e3 if ai else 0:.0f}k)")
            floor = f" | header floor {fmt(h, unit)} ({h[0] / p[0]:.2f}x)" if p and h and p[0] else ""
            if floor and r.get("hdr_probe"):
                floor += f", its program: {bpf_summary(r['hdr_probe'])} ns/run (runs)"
            if t.startswith("tcp"):
                rp, ri = med(r["plain"], "retrans"), med(r["ilnp"], "retrans")
                loss = f" (retransmitted segments {rp[0] if rp else '-'} / {ri[0] if ri else '-'})"
            print(f"  {t:<13} plain {fmt(p, unit)} | ILNP {fmt(i, unit)} | {ratio}{loss}{floor}")
            if t.startswith("tcp"):
                print(f"      {window_split(r)}")
        pr = r["probe"]
        extra = ""
        cpu = [p.get("ilnpd_cpu_ns_per_pkt") for p in pr if p.get("ilnpd_cpu_ns_per_pkt") is not None]
        if cpu:
            extra += f"; ilnpd CPU {statistics.median(cpu):.0f} ns/pkt"
        sm = [p.get("cn_slow_median") for p in pr if p.get("cn_slow_median")]
        if sm:
            extra += f"; CN slow path median {sm[len(sm) // 2]}"
        print(f"      BPF ns/run ILNP: {bpf_summary(pr)}; plain: {bpf_summary(r['plain_probe'])}{extra}")


def markdown(rows):
    """One table line per block: medians, ratios (ILNP / plain of the same block), added RTT."""
    def cell(t, r, key="v", unit=""):
        if t not in r:  # a run from before the measurement existed
            return "-"
        p, i = med(r[t]["plain"], key), med(r[t]["ilnp"], key)
        if not p or not i:
            return "failed"
        if unit == "k":
            return f"{p[0] / 1e3:.0f}k / {i[0] / 1e3:.0f}k ({i[0] / p[0]:.2f}x)"
        return f"{p[0]:.2f} / {i[0]:.2f} ({i[0] / p[0]:.2f}x)"

    def rtt(r):
        if "rr" not in r:
            return "-"
        p, i = med(r["rr"]["plain"]), med(r["rr"]["ilnp"])
        p9, i9 = med(r["rr"]["plain"], "p99"), med(r["rr"]["ilnp"], "p99")
        if not (p and i and p9 and i9):
            return "failed"
        return f"{p[0]:.1f} / {i[0]:.1f} (**{i[0] - p[0]:+.1f}**); p99 {p9[0]:.0f} / {i9[0]:.0f}"

    def bpf(r):
        if "udp64_snd" not in r:
            return "-"
        pr = r["udp64_snd"]["probe"]
        vals = {k: statistics.median([p["bpf_ns"][k] for p in pr if k in p["bpf_ns"]])
                for k in ("cn.route_xmit", "cn.egress", "mn.ingress") if any(k in p["bpf_ns"] for p in pr)}
        plain = [p["bpf_ns"]["mn.ingress"] for p in r["udp64_snd"]["plain_probe"] if "mn.ingress" in p["bpf_ns"]]
        cpu = [p["ilnpd_cpu_ns_per_pkt"] for p in pr if p.get("ilnpd_cpu_ns_per_pkt") is not None]
        out = " / ".join(f"{k.split('.')[1]} {vals[k]:.0f}" for k in vals) or "-"
        if plain:
            out += f" (plain {statistics.median(plain):.0f})"
        return out + (f"; {statistics.median(cpu):.0f}" if cpu else "")

    def floor(r):
        if "udp64_snd" not in r:
            return "-"
        p, h = med(r["udp64_snd"]["plain"]), med(r["udp64_snd"].get("hdr", []))
        if not (p and h):
            return "-"
        return f"{h[0] / 1e3:.0f}k ({h[0] / p[0]:.2f}x)"

    lines = ["| topology | path | ILCC | TCP 1 stream Gbit/s | TCP 4 streams Gbit/s | TCP 1 / 4 streams, one core, Gbit/s | "
             "UDP 64 B, 1 sender: delivered pps | "
             "UDP 64 B, 2 senders: iperf3 rx pps | UDP 1400 B, 1 sender: delivered pps | UDP 1400 B, 2 senders: iperf3 rx pps | "
             "RR µs median (added); p99 | BPF ns/pkt: CN route_xmit / egress, MN ingress; ilnpd CPU ns/pkt | "
             "header floor: UDP 64 B, 1 sender: delivered pps (vs plain) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        r = row["tests"]
        lines.append(f"| {row['topo']} | {row['mode']} | {row['entries']:,} | {cell('tcp1', r)} | {cell('tcp4', r)} | "
                     f"{cell('tcp1_1cpu', r)}; {cell('tcp4_1cpu', r)} | "
                     f"{cell('udp64_snd', r, unit='k')} | {cell('udp64_rcv', r, 'app_pps', 'k')} | "
                     f"{cell('udp1400_snd', r, unit='k')} | {cell('udp1400_rcv', r, 'app_pps', 'k')} | {rtt(r)} | "
                     f"{bpf(r)} | {floor(r)} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 round of 1 s, ILCC size 1 only")
    ap.add_argument("--seconds", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved plain/ILNP rounds per block")
    ap.add_argument("--rr", type=int, default=5000, help="timed round trips per rr measurement")
    ap.add_argument("--sizes", default="1,1000000", help="MN's ILCC sizes (established entries), eBPF path")
    ap.add_argument("--userspace-sizes", default="1",
                    help="the same for the userspace path (its per-packet cost against the ILCC's size is the "
                         "core's: `cargo run --release -p ilnp-core --example ilcc_scale`)")
    ap.add_argument("--topos", default="direct,routed")
    ap.add_argument("--modes", default="ebpf,ebpf-tc,userspace", help=f"of {', '.join(MODES)}")
    ap.add_argument("--tests", default=",".join(TESTS), help="comma-separated subset of the measurements, in order")
    ap.add_argument("--one-core-rmem", type=int, default=ONE_CORE_RMEM, metavar="BYTES",
                    help="MN's receive buffers start at this size in the one-core TCP runs (0: the kernel's "
                         "autotuning from 128 KiB, as in the two-core runs)")
    ap.add_argument("--fill-deadline", type=float, default=180, help="seconds to spend filling the ILCC")
    ap.add_argument("--json", help="write every measurement here")
    ap.add_argument("--perf", metavar="TEST", help="perf record -a -g over each run of TEST (e.g. udp64_snd)")
    ap.add_argument("--perf-out", default="/tmp/datapath-perf", help="prefix of the perf.data files")
    ap.add_argument("--from-json", help="print the markdown table of an earlier run's --json and exit")
    a = ap.parse_args()
    if a.from_json:
        print(markdown(json.loads(Path(a.from_json).read_text())))
        return
    if a.quick:
        a.rounds, a.seconds, a.rr, a.sizes, a.userspace_sizes = 1, 1, 2000, "1", "1"
    a.tests = a.tests.split(",")
    if bad := [t for t in a.tests if t not in TESTS]:
        ap.error(f"--tests: unknown measurement {', '.join(bad)} (known: {', '.join(TESTS)})")
    if bad := [m for m in a.modes.split(",") if m not in MODES]:
        ap.error(f"--modes: unknown path {', '.join(bad)} (known: {', '.join(MODES)})")
    rows = []
    t0 = time.monotonic()
    for topo in a.topos.split(","):
        for mode in a.modes.split(","):
            with Testbed() as bed:
                sizes = [int(x) for x in (a.userspace_sizes if mode == "userspace" else a.sizes).split(",")]
                nodes = build(bed, topo)
                floor_prog = header_floor(bed, nodes[0], nodes[2]) if MODES[mode][0] == "ebpf" else None
                rows += block(nodes, mode, sizes, a, topo, floor_prog)
    print(f"\nplain IPv6 = the hosts' default offloads, daemons up; ratios are ILNP median / plain median of the "
          f"same block; run took {time.monotonic() - t0:.0f} s\n")
    print(markdown(rows))
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
