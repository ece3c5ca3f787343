#!/usr/bin/env python3
"""Mobile IPv6 handoffs (lab/ilnp_lab/mipv6, RFC 6275) on Debian 12's own kernel (6.1, with
CONFIG_IPV6_MIP6), run inside the VM scripts/qemu-debian12.sh boots:

    scripts/qemu-debian12.sh --guest tests/system/mipv6_guest.py [mipv6|mipv6-ro ...] [--tcp|--udp] \
        [--lab ILNP-LAB-RUN-ARGS...]

With --lab, first `ilnp-lab run ARGS` in the VM (e.g. `--lab seed000-tcp --quick --scheme ilnp-soft
--scheme plain --scheme mptcp --scheme mipv6 --scheme mipv6-ro`): the lab's own seed000 testbed,
Mobile IPv6 one scheme among the others, its run folder out through ILNP_VM_OUT (function `lab`);
then the standalone checks below for the schemes named before --lab.

The seeds' Fig. 8 topology in namespaces (seed 000 §5.3, lab/ilnp_lab/experiments/seed000-tcp):
CN - R1 - {R2, R3} - MN, LAN to LAN (no added delay). R2 is the MN's home agent and its home
link's router (radvd there with the home agent flag), R3 a foreign router (radvd). The MN is at
home (home address 2001:db8:2::100); it enters R3's cell (link up, R3's RA, SLAAC: the
care-of address), then leaves R2's (link down: the link-layer trigger) and registers with the
HA (BU/BA: the HA's DAD for the home address first), the session carried on through the
bidirectional tunnel; with route optimisation (mipv6-ro) return routability and a binding at
the CN follow. Traffic CN -> MN: a sequence-numbered UDP stream (200/s, both directions) and,
with --tcp, an iperf3 TCP flow (320 KB window, as the seeds). Each run prints one line
"MIPV6-RESULT {json}" (events of the three roles, the MH frames the MN's tcpdump saw, UDP gaps
and loss, the TCP flow) and PASS/FAIL lines; exit 0 only if every check passed. The checks:
the session survives the move (UDP arrives after it, iperf3 ends and moved data after the
move), BA accepted, HA DAD took ~RetransTimer, the handoff delay within the thesis's range.
"""

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# in the VM the lab's mipv6 package sits beside this script; in a checkout, in lab/
LAB = HERE if os.path.isdir(os.path.join(HERE, "ilnp_lab")) else os.path.join(HERE, "..", "..", "lab")
sys.path.insert(0, LAB)
from ilnp_lab.mipv6 import mhcap, phases, roles  # noqa: E402

TAG = f"m{os.getpid() % 10000}"
HOA, HA, CN = "2001:db8:2::100", "2001:db8:2::1", "2001:db8:a::c"
PPS, PORT = 200, 5300
T_JOIN, T_LEAVE, T_END = 2.0, 6.0, 14.0
# the thesis's LAN->LAN handoff delay (seed 001 Table 6.5 / seed 000 Fig. 16; mobility_report.PUBLISHED)
THESIS_MS = {"mipv6": 1005, "mipv6-ro": 1024, "ilnp-hard": 7}
# ILNPv6 in the same VM and run (ilnpd on CN and MN, hard handoff): identifier addresses
ID_PREFIX = "fd69:6c6e:7000::"
NIDS = {"cn": "0200:00ff:fe00:000c", "mn": "0200:00ff:fe00:000d"}
IDS = {"cn": "fd69:6c6e:7000:0:200:ff:fe00:c", "mn": "fd69:6c6e:7000:0:200:ff:fe00:d"}
# ours may be faster (no 802.11 association, no UMIP thread hand-offs) or slower: TCG costs every
# step of the HA after its DAD, and past InitialBindackTimeoutFirstReg (1.5 s) the MN retransmits
# its BU and takes only the second BA (docs/mipv6.md)
MARGIN_MS = (-150, 700)
results: list[tuple[bool, str]] = []
procs: list[subprocess.Popen] = []


def check(ok: bool, what: str) -> None:
    results.append((ok, what))
    print(("PASS " if ok else "FAIL ") + what, flush=True)


def sh(*a, check=True, **kw):
    r = subprocess.run(list(a), capture_output=True, text=True, **kw)
    if check and r.returncode:
        raise RuntimeError(f"{' '.join(a)}: {r.stderr.strip()}")
    return r.stdout


def nx(ns, *a, **kw):
    return sh("ip", "netns", "exec", f"{TAG}{ns}", *a, **kw)


def spawn(ns, *a, out=None, err=None):
    p = subprocess.Popen(["ip", "netns", "exec", f"{TAG}{ns}", *a], stdout=out or subprocess.DEVNULL,
                         stderr=subprocess.STDOUT if out else (err or subprocess.DEVNULL),
                         env={**os.environ, "PYTHONPATH": LAB})
    procs.append(p)
    return p


def stop(p):
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


LINKS = [("cn", "eth0", "2001:db8:a::c/64", "r1", "eth-cn", "2001:db8:a::1/64"),
         ("r1", "eth-r2", "2001:db8:12::1/64", "r2", "eth-r1", "2001:db8:12::2/64"),
         ("r1", "eth-r3", "2001:db8:13::1/64", "r3", "eth-r1", "2001:db8:13::3/64"),
         ("r2", "eth-mn", "2001:db8:2::1/64", "mn", "eth-r2", None),
         ("r3", "eth-mn", "2001:db8:3::1/64", "mn", "eth-r3", None)]
ROUTES = [("cn", "default", "2001:db8:a::1"), ("r1", "2001:db8:2::/64", "2001:db8:12::2"),
          ("r1", "2001:db8:3::/64", "2001:db8:13::3"), ("r2", "default", "2001:db8:12::1"),
          ("r3", "default", "2001:db8:13::1")]
RADVD = """interface eth-mn {{
  AdvSendAdvert on; MinRtrAdvInterval 0.5; MaxRtrAdvInterval 1.5; AdvHomeAgentFlag {ha};
  prefix {prefix} {{ AdvOnLink on; AdvAutonomous on; AdvRouterAddr on; }};
}};
"""


def build(work):
    for n in ("cn", "r1", "r2", "r3", "mn"):
        sh("ip", "netns", "add", f"{TAG}{n}")
        nx(n, "ip", "link", "set", "lo", "up")
        for k, v in (("net.ipv6.conf.all.accept_dad", 0), ("net.ipv6.conf.default.accept_dad", 0)):
            nx(n, "sysctl", "-qw", f"{k}={v}")
        if n.startswith("r"):
            nx(n, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
            # a router's cell interface keeps its address while down (R3's before the MN comes)
            nx(n, "sysctl", "-qw", "net.ipv6.conf.all.keep_addr_on_down=1")
    for a, ai, aa, b, bi, ba in LINKS:
        sh("ip", "link", "add", "tmpa", "type", "veth", "peer", "name", "tmpb")
        sh("ip", "link", "set", "tmpa", "netns", f"{TAG}{a}", "name", ai)
        sh("ip", "link", "set", "tmpb", "netns", f"{TAG}{b}", "name", bi)
        for n, i, addr in ((a, ai, aa), (b, bi, ba)):
            if addr:
                nx(n, "ip", "addr", "add", addr, "dev", i, "nodad")
            nx(n, "ip", "link", "set", i, "up")
    for n, dst, via in ROUTES:
        nx(n, "ip", "-6", "route", "add", dst, "via", via)
    # the MN's cells: 30 Mbit/s as the lab's seed000 links; R3's cell not yet entered
    for n, i in (("r2", "eth-mn"), ("r3", "eth-mn"), ("mn", "eth-r2"), ("mn", "eth-r3")):
        nx(n, "tc", "qdisc", "add", "dev", i, "root", "tbf", "rate", "30mbit", "burst", "32kb", "latency", "50ms")
    nx("mn", "ip", "link", "set", "eth-r3", "down")
    nx("r3", "ip", "link", "set", "eth-mn", "down")
    nx("mn", "ip", "addr", "add", f"{HOA}/64", "dev", "eth-r2", "nodad")
    for r, prefix, ha in (("r2", "2001:db8:2::/64", "on"), ("r3", "2001:db8:3::/64", "off")):
        conf = os.path.join(work, f"radvd-{r}.conf")
        open(conf, "w").write(RADVD.format(prefix=prefix, ha=ha))
        spawn(r, "radvd", "-n", "-C", conf, "-p", os.path.join(work, f"radvd-{r}.pid"), "-u", "root")


def wait_for(pred, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.1)
    raise RuntimeError(f"timed out waiting for {what}")


def probe_recv(addr, port, until, out):
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.bind((addr, port))
    s.settimeout(0.2)
    with open(out, "w") as f:
        while time.time() < until:
            try:
                d = s.recv(64)
            except socket.timeout:
                continue
            f.write(f"{struct.unpack('!I', d[:4])[0]} {time.time():.6f}\n")
            f.flush()


def probe_send(dst, port, until, src=None):
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    if src:
        s.bind((src, 0))
    seq, t0 = 0, time.time()
    while time.time() < until:
        try:
            s.sendto(struct.pack("!I", seq) + bytes(28), (dst, port))
        except OSError:
            pass
        seq += 1
        time.sleep(max(0, t0 + seq / PPS - time.time()))


def gaps(path, t_from):
    if not os.path.exists(path):
        return {"received": 0, "lost": None, "max_gap_ms": None, "last_t": None}
    rows = [tuple(map(float, l.split())) for l in open(path) if l.strip()]
    seqs = sorted(int(s) for s, _ in rows)
    times = sorted(t for _, t in rows)
    after = [t for t in times if t >= t_from - 1]
    gap = max((b - a for a, b in zip(after, after[1:])), default=None)
    lost = (seqs[-1] + 1 - len(set(seqs))) if seqs else None
    return {"received": len(rows), "lost": lost, "max_gap_ms": round(gap * 1e3, 1) if gap else None,
            "last_t": times[-1] if times else None}


def diag():
    """Non-zero IPv6 and xfrm drop counters of each namespace (why a message went missing)."""
    for n in ("cn", "r1", "r2", "r3", "mn"):
        out = []
        for path in ("/proc/net/snmp6", "/proc/net/xfrm_stat"):
            for line in nx(n, "cat", path, check=False).splitlines():
                k, _, v = line.partition(" ")
                if v.strip() not in ("", "0") and any(w in k for w in ("Err", "Discard", "NoRoute", "NoState", "Xfrm",
                                                                         "Unknown", "Trunc")):
                    out.append(f"{k}={v.strip()}")
        print(f"MIPV6-DIAG {n}: {' '.join(out)}", flush=True)
        if n in ("cn", "mn") and os.environ.get("MIPV6_DIAG_XFRM"):
            print(nx(n, "ip", "-s", "xfrm", "policy", check=False) + nx(n, "ip", "xfrm", "state", check=False)
                  + nx(n, "ip", "-6", "route", "show", "table", "all", check=False), flush=True)


def ilnpd(work, n, uplinks, peer, peer_l64):
    """ilnpd in node n (hard handoff), the other end its static peer; returns its process."""
    cfg = os.path.join(work, f"ilnpd-{n}.toml")
    open(cfg, "w").write(
        f'uplinks = {json.dumps(uplinks)}\nidentifier_prefix = "{ID_PREFIX}"\nnid = "{NIDS[n]}"\n'
        f'datapath = "ebpf"\ncontrol_socket = "{work}/ilnpd-{n}.sock"\npin_dir = "{work}/bpf/{n}"\n'
        f'handoff = "hard"\n\n[[peer]]\nname = "{peer}"\nnid = "{NIDS[peer]}"\n'
        f'locators = [{{ l64 = "{peer_l64}", pref = 10 }}]\n')
    p = spawn(n, os.environ.get("ILNPD", "ilnpd"), "--config", cfg, out=open(os.path.join(work, f"ilnpd-{n}.log"), "a"))
    wait_for(lambda: p.poll() is not None or os.path.exists(f"{work}/ilnpd-{n}.sock"), 120, f"ilnpd in {n}")
    if p.poll() is not None:
        raise RuntimeError(f"ilnpd in {n} exited: " + open(os.path.join(work, f"ilnpd-{n}.log")).read()[-2000:])
    return p


def lu_frames(cap):
    """ICMPv6 other than ND/MLD the MN sent or got (LU is type 156): (time, source, type).
    The capture is on every interface (Linux cooked headers)."""
    with open(cap, "rb") as f:
        linktype = struct.unpack("<I", f.read(24)[20:24])[0]
    # Ethernet (1), Linux cooked (113), cooked v2 (276: tcpdump 4.99's "any"): header length, ethertype offset
    hl, et = {113: (16, 14), 276: (20, 0)}.get(linktype, (14, 12))
    out = []
    for t, _orig, fr in mhcap.frames(cap):
        if len(fr) < hl + 48 or fr[et:et + 2] != b"\x86\xdd":
            continue
        nh, off = fr[hl + 6], hl + 40
        while nh in (0, 60, 43) and off + 2 <= len(fr):
            nh, off = fr[off], off + (fr[off + 1] + 1) * 8
        if nh == 58 and off + 5 < len(fr) and fr[off] not in (133, 134, 135, 136, 143):
            out.append((t, mhcap.a_str(fr[hl + 8:hl + 24]), fr[off]))
    return out


def lu_times(lus, t_leave):
    """The MN's first LU at or after the move and the CN's first LU message after it (the ack)."""
    mn_lu = next((t for t, src, ty in lus if ty == 156 and t >= t_leave and not src.startswith("2001:db8:a:")), None)
    ack = next((t for t, src, ty in lus if ty == 156 and mn_lu and t > mn_lu and src.startswith("2001:db8:a:")), None)
    return mn_lu, ack


def run(scheme, tcp, work):
    if scheme == "ilnp-hard":
        return run_ilnp(tcp, work)
    ro = scheme == "mipv6-ro"
    build(work)
    ev = {r: open(os.path.join(work, f"ev-{r}.jsonl"), "w") for r in ("ha", "mn", "cn")}
    spawn("r2", *roles.ha_cmd("eth-mn", HA, "2001:db8:2::/64"), out=ev["ha"])
    spawn("cn", *roles.cn_cmd(CN), out=ev["cn"])
    spawn("mn", *roles.mn_cmd("eth-r2", "2001:db8:2::/64", HOA, HA, CN, ro), out=ev["mn"])
    wait_for(lambda: all("ready" in open(f.name).read() for f in ev.values()), 60, "the three roles")
    cap = os.path.join(work, "mn.pcap")
    nx("cn", "ping", "-6", "-c", "1", "-W", "5", HOA, check=False)
    time.sleep(1)
    t0 = time.time()
    until = t0 + T_END
    rx = os.path.join(work, "rx.txt"), os.path.join(work, "rx-cn.txt")
    me = os.path.abspath(__file__)
    perr = open(os.path.join(work, "probes.err"), "w")
    spawn("mn", sys.executable, me, "probe-recv", HOA, str(PORT), str(until), rx[0], err=perr)
    spawn("cn", sys.executable, me, "probe-recv", CN, str(PORT), str(until), rx[1], err=perr)
    time.sleep(0.3)
    spawn("cn", sys.executable, me, "probe-send", HOA, str(PORT), str(until - 0.5), err=perr)
    spawn("mn", sys.executable, me, "probe-send", CN, str(PORT), str(until - 0.5), HOA, err=perr)
    ipf = None
    if tcp:
        srv = spawn("mn", "iperf3", "-s", "-1", "-B", HOA, "-p", "5201")
        time.sleep(0.5)
        ipf = subprocess.Popen(["ip", "netns", "exec", f"{TAG}cn", "iperf3", "-c", HOA, "-p", "5201", "-w", "320K",
                                "-t", str(int(T_END - 2)), "-i", "0.5", "-J"], stdout=subprocess.PIPE, text=True)
        procs.append(ipf)
    time.sleep(max(0, t0 + T_JOIN - time.time()))
    nx("r3", "ip", "link", "set", "eth-mn", "up")
    nx("mn", "ip", "link", "set", "eth-r3", "up")
    t_join = time.time()
    spawn("mn", "tcpdump", "-q", "-n", "-U", "-s", "200", "-i", "eth-r3", "-w", cap)
    time.sleep(max(0, t0 + T_LEAVE - time.time()))
    t_leave = time.time()
    nx("mn", "ip", "link", "set", "eth-r2", "down")  # as the lab's seed000 event: the MN's side only
    tcp_res = None
    if ipf:
        out, _ = ipf.communicate(timeout=T_END + 120)
        try:
            j = json.loads(out)
            iv = [(i["sum"]["start"], i["sum"]["bytes"]) for i in j.get("intervals", [])]
            tcp_res = {"rc": ipf.returncode, "bytes": j["end"]["sum_received"]["bytes"],
                       "after_move_bytes": sum(b for s, b in iv if s >= T_LEAVE - 2 + 1.5),
                       "zero_intervals": sum(1 for _, b in iv if b == 0)}
        except (ValueError, KeyError) as e:
            tcp_res = {"rc": ipf.returncode, "error": str(e)}
    time.sleep(max(0, until + 0.5 - time.time()))
    for p in procs:
        stop(p)
    procs.clear()
    for f in ev.values():
        f.close()
    events, other = roles.read_events({r: os.path.join(work, f"ev-{r}.jsonl") for r in roles.ROLES})
    for r, lines in other.items():  # a role's traceback, if any
        print(f"MIPV6-STDERR {r}:\n" + "\n".join(lines), flush=True)
    data = []
    res = {"scheme": scheme, "traffic": "tcp" if tcp else "udp", "t0": t0, "t_join": t_join, "t_leave": t_leave,
           "events": events, "mh_frames": mhcap.mh_frames(cap, data) if os.path.exists(cap) else [],
           "udp_cn_to_mn": gaps(rx[0], t_leave), "udp_mn_to_cn": gaps(rx[1], t_leave), "tcp": tcp_res,
           "kernel": os.uname().release}
    # the path data took on the MN's link after the handoff, by kind (tunnel, RH2 in, HAO out)
    done_t = next((e["t"] for e in events if e["role"] == "mn" and e["ev"] in (("ro_active",) if ro else ("tunnel",))), None)
    res["data_after"] = {k: sum(1 for t, kk, _s, _d in data if kk == k and done_t and t > done_t + 0.2)
                         for k in ("tunnelled", "rh2", "hao", "plain")}
    print("MIPV6-RESULT " + json.dumps(res), flush=True)
    if os.environ.get("MIPV6_DIAG", "1") == "1":
        diag()
    for n in ("cn", "r1", "r2", "r3", "mn"):
        sh("ip", "netns", "del", f"{TAG}{n}", check=False)
    sp = phases.split(events, HA, CN if ro else None)  # the one definition of the phases
    dad = sp["ha_dad_ms"]
    check(any(e["role"] == "mn" and e["ev"] == "ba_rx" and e["peer"] == HA and e["accepted"] for e in events),
          f"{scheme}: BA from the HA accepted")
    check(dad is not None and 950 <= dad <= 1300, f"{scheme}: HA DAD before the first BA took {dad} ms (RetransTimer 1 s)")
    if ro:
        check(any(e["role"] == "mn" and e["ev"] == "ro_active" for e in events),
              f"{scheme}: return routability and the CN's BA done (ro_active)")
    ms = sp["handoff_delay_ms"]
    lo, hi = THESIS_MS[scheme] + MARGIN_MS[0], THESIS_MS[scheme] + MARGIN_MS[1]
    check(ms is not None and lo <= ms <= hi, f"{scheme}: handoff delay {ms} ms (first BU -> last BA), thesis "
          f"{THESIS_MS[scheme]} ms, accepted {lo}..{hi}; phases {sp}")
    d = res["data_after"]
    if ro:
        check(d["rh2"] > 0 and d["hao"] > 0, f"{scheme}: data off the tunnel after RO: RH2 in, HAO out ({d})")
    else:
        check(d["tunnelled"] > 0 and d["rh2"] == 0, f"{scheme}: data through the HA's tunnel ({d})")
    u = res["udp_cn_to_mn"]
    check(u["last_t"] is not None and u["last_t"] > t_leave + 3,
          f"{scheme}: UDP CN -> MN arrives after the move (gap {u['max_gap_ms']} ms, lost {u['lost']})")
    if tcp:
        check(bool(tcp_res) and tcp_res.get("rc") == 0 and tcp_res.get("after_move_bytes", 0) > 0,
              f"{scheme}: the TCP flow survives the move ({tcp_res})")


def run_ilnp(tcp, work):
    """ILNPv6 (hard handoff) on the same topology and timeline: ilnpd on CN and MN; the flow between
    identifier addresses; handoff delay = the MN's first LU after the move -> the CN's ack on the
    MN's link (seed 000's definition for ILNPv6)."""
    scheme = "ilnp-hard"
    build(work)
    os.makedirs(f"{work}/bpf")
    sh("mount", "-t", "bpf", "bpf", f"{work}/bpf")
    try:
        nx("mn", "ip", "addr", "del", f"{HOA}/64", "dev", "eth-r2")  # no MIPv6 home address here
        wait_for(lambda: "2001:db8:2:" in nx("mn", "ip", "-6", "addr", "show", "dev", "eth-r2"), 60, "the MN's SLAAC")
        ilnpd(work, "cn", ["eth0"], "mn", "2001:db8:2::")
        ilnpd(work, "mn", ["eth-r2", "eth-r3"], "cn", "2001:db8:a::")
        dst, src = IDS["mn"], IDS["cn"]
        wait_for(lambda: nx("cn", "ping", "-6", "-c", "1", "-W", "2", dst, check=False) is not None and
                 subprocess.run(["ip", "netns", "exec", f"{TAG}cn", "ping", "-6", "-c", "1", "-W", "2", dst],
                                capture_output=True).returncode == 0, 60, "an ILNPv6 session")
        cap = os.path.join(work, "mn.pcap")
        t0 = time.time()
        until = t0 + T_END
        rx = os.path.join(work, "rx.txt"), os.path.join(work, "rx-cn.txt")
        me = os.path.abspath(__file__)
        perr = open(os.path.join(work, "probes.err"), "w")
        spawn("mn", sys.executable, me, "probe-recv", dst, str(PORT), str(until), rx[0], err=perr)
        spawn("cn", sys.executable, me, "probe-recv", src, str(PORT), str(until), rx[1], err=perr)
        time.sleep(0.3)
        spawn("cn", sys.executable, me, "probe-send", dst, str(PORT), str(until - 0.5), src, err=perr)
        spawn("mn", sys.executable, me, "probe-send", src, str(PORT), str(until - 0.5), dst, err=perr)
        ipf = None
        if tcp:
            spawn("mn", "iperf3", "-s", "-1", "-B", dst, "-p", "5201")
            time.sleep(0.5)
            ipf = subprocess.Popen(["ip", "netns", "exec", f"{TAG}cn", "iperf3", "-c", dst, "-p", "5201", "-w", "320K",
                                    "-t", str(int(T_END - 2)), "-i", "0.5", "-J"], stdout=subprocess.PIPE, text=True)
            procs.append(ipf)
        time.sleep(max(0, t0 + T_JOIN - time.time()))
        nx("r3", "ip", "link", "set", "eth-mn", "up")
        nx("mn", "ip", "link", "set", "eth-r3", "up")
        spawn("mn", "tcpdump", "-q", "-n", "-U", "-s", "200", "-i", "any", "-w", cap)
        time.sleep(max(0, t0 + T_LEAVE - time.time()))
        t_leave = time.time()
        nx("mn", "ip", "link", "set", "eth-r2", "down")
        tcp_res = None
        if ipf:
            out, _ = ipf.communicate(timeout=T_END + 120)
            try:
                j = json.loads(out)
                iv = [(i["sum"]["start"], i["sum"]["bytes"]) for i in j.get("intervals", [])]
                tcp_res = {"rc": ipf.returncode, "bytes": j["end"]["sum_received"]["bytes"],
                           "after_move_bytes": sum(b for s_, b in iv if s_ >= T_LEAVE - 2 + 1.5)}
            except (ValueError, KeyError) as e:
                tcp_res = {"rc": ipf.returncode, "error": str(e)}
        time.sleep(max(0, until + 0.5 - time.time()))
        for p in procs:
            stop(p)
        procs.clear()
        lus = lu_frames(cap) if os.path.exists(cap) else []
        lu, ack = lu_times(lus, t_leave)
        res = {"scheme": scheme, "traffic": "tcp" if tcp else "udp", "t0": t0, "t_leave": t_leave,
               "lu_t": lu, "lu_ack_t": ack, "lu_frames": [(round(t - t_leave, 4), a, op) for t, a, op in lus],
               "capture_frames": sum(1 for _ in mhcap.frames(cap)) if os.path.exists(cap) else None, "handoff_delay_ms": round((ack - lu) * 1e3, 1) if lu and ack else None,
               "udp_cn_to_mn": gaps(rx[0], t_leave), "udp_mn_to_cn": gaps(rx[1], t_leave), "tcp": tcp_res,
               "kernel": os.uname().release}
        print("MIPV6-RESULT " + json.dumps(res), flush=True)
    finally:
        for p in procs:
            stop(p)
        procs.clear()
        sh("umount", f"{work}/bpf", check=False)
        for n in ("cn", "r1", "r2", "r3", "mn"):
            sh("ip", "netns", "del", f"{TAG}{n}", check=False)
    u = res["udp_cn_to_mn"]
    # the LU / LU-ACK pair is not found in the MN's capture yet (docs/mipv6.md): reported, not checked
    print(f"MIPV6-INFO {scheme}: LU -> LU-ACK {res['handoff_delay_ms']} ms, {len(res['lu_frames'])} ICMPv6 frames", flush=True)
    check(u["last_t"] is not None and u["last_t"] > t_leave + 3,
          f"{scheme}: UDP CN -> MN arrives after the move (gap {u['max_gap_ms']} ms, lost {u['lost']})")
    if tcp:
        check(bool(tcp_res) and tcp_res.get("rc") == 0 and tcp_res.get("after_move_bytes", 0) > 0,
              f"{scheme}: the TCP flow survives the move ({tcp_res})")


# what each scheme's session does across seed000's move (plain IPv6: breaks when the MN leaves)
LAB_SURVIVES = {"plain": False}


def lab(args):
    """`ilnp-lab run ARGS` inside the VM (qemu-debian12.sh ships the lab for --lab): Mobile IPv6
    as a scheme beside ILNPv6, plain IPv6 and MPTCP, each in the same VM and run. Checks per
    result: the run finished, the session survived (plain IPv6: broke), MIPv6's handoff (first BU
    -> last BA) within the thesis's LAN->LAN value + MARGIN_MS and its BA(s) accepted. The run
    folder (without captures) leaves on the console as an ILNP-OUT block (ILNP_VM_OUT)."""
    out = tempfile.mkdtemp(prefix="lab-")
    env = {**os.environ, "PYTHONPATH": f"{LAB}:{LAB}/site", "ILNP_BIN_DIR": "/usr/local/bin", "MPLCONFIGDIR": "/tmp"}
    if os.path.exists(os.path.join(LAB, "host-provenance.json")):  # which commit the host packed (no git here)
        env["ILNP_HOST_PROVENANCE"] = os.path.join(LAB, "host-provenance.json")
    t = time.time()
    r = subprocess.run([sys.executable, "-m", "ilnp_lab.cli", "run", *args, "--drop-captures", "--out", out], env=env)
    print(f"MIPV6-LAB ilnp-lab run {' '.join(args)}: {time.time() - t:.1f} s, exit {r.returncode}", flush=True)
    try:
        results = json.load(open(os.path.join(out, "results.json")))
    except (OSError, ValueError) as e:
        check(False, f"lab: no results.json ({e})")
        return
    check(r.returncode == 0 and bool(results), f"lab: ilnp-lab run exit {r.returncode}, {len(results)} results")
    for x in results:
        s, what = x["scheme"], f"lab {x['cell']} run {x['run']}"
        if not x.get("ok"):
            check(False, f"{what}: {x.get('error')}")
            continue
        check(x["session_survived"] == LAB_SURVIVES.get(s, True),
              f"{what}: session survived {x['session_survived']}, data {x['flow']['bytes_received']} B, "
              f"interruption at leave {x['flow'].get('interruption_leave_ms')} ms, handoff {x.get('handoff_delay_ms')} ms")
        if s.startswith("mipv6") and x["move"] == "lan-lan":
            ms, e = x.get("handoff_delay_ms"), x.get("extra") or {}
            lo, hi = THESIS_MS[s] + MARGIN_MS[0], THESIS_MS[s] + MARGIN_MS[1]
            check(ms is not None and lo <= ms <= hi and e.get("ha_ba_accepted") and e.get("ro_active") is not False,
                  f"{what}: handoff {ms} ms (thesis {THESIS_MS[s]}, accepted {lo}..{hi}), BA from the HA accepted "
                  f"{e.get('ha_ba_accepted')}, RO {e.get('ro_active')}; phases {e.get('phases')}")
        if s.startswith("mipv6") and any(h.get("kind") == "home" for h in x.get("handoffs") or []):
            # thesis-loss: back home every other move (RFC 6275 §11.5.5), away again afterwards
            hs = x["handoffs"]
            home, away = [h for h in hs if h["kind"] == "home"], [h for h in hs if h["kind"] == "away"]
            again = [h for h in away if h["t_s"] > home[0]["t_s"]]
            # with loss on the old link too (the *-oldM moves) a registration's BU or BA may be lost
            # in every try before the next move (Table 6.2: 66 % / 23 % at 10 / 10 %), and with RO
            # the return home's BU to the CN: not a fault; the HA's BA at home (home link) always
            lossy_old = any(h.get("old_loss_pct") for h in away)
            check(bool(home) and all(h["acked"] and (lossy_old or h["success"]) for h in home)
                  and (lossy_old or any(h["success"] for h in again)),
                  f"{what}: {len(home)} returns home, deregistered {sum(h['success'] for h in home)}; "
                  f"{len(away)} registrations, done {sum(h['success'] for h in away)}; "
                  + ", ".join(f"{h['label']} {h['delay_ms']} ms x{h['attempts']}" for h in hs))
    subprocess.run(["dmesg", "-n", "1"], check=False)  # no kernel lines inside the block
    tar = subprocess.run(["tar", "czf", "-", "--exclude=*.pcap", "-C", out, "."], capture_output=True).stdout
    b64 = __import__("base64").encodebytes(tar).decode()
    sys.stdout.write(f"ILNP-OUT-BEGIN {len(tar)} bytes\n{b64}ILNP-OUT-END\n")
    sys.stdout.flush()


def main(argv):
    if argv and argv[0] == "probe-recv":
        return probe_recv(argv[1], int(argv[2]), float(argv[3]), argv[4])
    if argv and argv[0] == "probe-send":
        return probe_send(argv[1], int(argv[2]), float(argv[3]), argv[4] if len(argv) > 4 else None)
    subprocess.run(["modprobe", "-a", "ip6_tunnel", "xfrm_user", "tun", "sch_tbf", "sch_netem", "veth"], check=False)
    if "--diag-xfrm" in argv:
        os.environ["MIPV6_DIAG_XFRM"] = "1"
    lab_args = argv[argv.index("--lab") + 1:] if "--lab" in argv else None
    argv = argv[:argv.index("--lab")] if lab_args is not None else argv
    if lab_args is not None:
        lab(lab_args)
    # with --lab alone, only the lab's run; the standalone checks need their schemes named before it
    schemes = [a for a in argv if a and not a.startswith("--")] or ([] if lab_args else ["mipv6", "mipv6-ro", "ilnp-hard"])
    kinds = [k for k in ("tcp", "udp") if f"--{k}" in argv] or ["udp", "tcp"]
    print(f"MIPV6-GUEST kernel {os.uname().release}: {schemes} x {kinds}", flush=True)
    for s in schemes:
        for k in kinds:
            work = tempfile.mkdtemp(prefix="mipv6-")
            try:
                run(s, k == "tcp", work)
            except Exception as e:  # a failed run is a FAIL line, the others still run
                check(False, f"{s}/{k}: {type(e).__name__}: {e}")
                for p in procs:
                    stop(p)
                procs.clear()
                for n in ("cn", "r1", "r2", "r3", "mn"):
                    sh("ip", "netns", "del", f"{TAG}{n}", check=False)
                for f in os.listdir(work):
                    if f.startswith("ev-") or f.endswith(".err"):
                        print(f"--- {f}\n" + open(os.path.join(work, f)).read(), flush=True)
            finally:
                shutil.rmtree(work, ignore_errors=True)
    bad = [w for ok, w in results if not ok]
    print(f"MIPV6-GUEST {len(results) - len(bad)}/{len(results)} checks passed", flush=True)
    return 1 if bad or not results else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]) or 0)
