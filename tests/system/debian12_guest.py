#!/usr/bin/env python3
"""The core of the system tests, self-contained, for Debian 12's own kernel (6.1: no tcx,
so ilnpd attaches its tc programs with a clsact qdisc + netlink filter). Run as PID 1's
child inside the VM scripts/qemu-debian12.sh boots; also runs on any host as root
(`ILNPD_ATTACH=clsact python3 tests/system/debian12_guest.py`, with ilnpd and ilnpctl in
$ILNP_BIN_DIR or on PATH). docs/debian12-kernel.md.

CN and MN: two network namespaces joined by a veth pair (2001:db8:1::/64), ilnpd on both
(datapath = ebpf, pins in a bpffs mounted at <work>/bpf, outside `ip netns exec`'s private
/sys so the pins outlive a killed daemon). Checks, each printed as PASS/FAIL with its
numbers; exit status 0 only if all passed:

  1. attach: exactly one ilnpd filter per hook (MN eth0 ingress, ilnp0 egress), at
     ilnpd's fixed priority/handle, and the clsact qdisc ilnpd added;
  2. session: a UDP flow (seq-numbered, 200/s) and a TCP echo session CN -> MN between
     identifier addresses fd69:6c6e:7000::<NID>;
  3. restart without loss: `kill -9` of the MN's ilnpd mid-flow (the filters stay, with
     the dead daemon's programs), started again at once; then the same on the CN. After
     each: still one filter per hook, its program replaced (another prog id), the pinned
     maps adopted; at the end, UDP loss counted, the TCP session still echoing;
  4. move: a second locator (2001:db8:2::/64) on the MN's uplink; the LU is acked
     (`ilnpctl --json stats` core lu_acked) and the CN learns the locator;
  5. clean stop (SIGTERM): addresses, routes, IPv6 sysctls, links, qdiscs and tc
     filters of both namespaces are as before ilnpd started; the pin directories are gone;
  6. the v4 path (ILNPv6 in UDP/IPv4, `[ipv4]`), which this kernel's bpf_skb_adjust_room
     cannot decapsulate in one call (BPF_F_ADJ_ROOM_DECAP_L3_IPV6 is 6.3): a UDP flow MN ->
     CN over it is carried by the CN's fast path (`ingress_v4`, no `ingress_punt_v4_no_decap`),
     and a stranger's datagrams (TCP SYNs from random NIDs to a closed port) are passed up
     with no state (`ingress_v4_no_socket`, no embryonic entry), as on 6.3+;
  7. kernel ESP over ILNPv6 (IKEv2 from strongSwan, esp6): tests/system/esp_guest.py, in
     namespaces of its own (`--esp-only`: this stage alone; `--no-esp`: without it).

Everything it creates (namespaces, processes by pid, the bpffs mount, the work directory)
is removed at the end, passed or not.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

BIN = os.environ.get("ILNP_BIN_DIR", "")
ILNPD = os.path.join(BIN, "ilnpd") if BIN else shutil.which("ilnpd") or "ilnpd"
ILNPCTL = os.path.join(BIN, "ilnpctl") if BIN else shutil.which("ilnpctl") or "ilnpctl"
TAG = f"d12{os.getpid() % 100000}"
CN_NS, MN_NS = f"{TAG}cn", f"{TAG}mn"
CN_NID, MN_NID = "0200:00ff:fe00:000c", "0200:00ff:fe00:000d"
CN_ID, MN_ID = "fd69:6c6e:7000:0:200:ff:fe00:c", "fd69:6c6e:7000:0:200:ff:fe00:d"
L1, L2 = "2001:0db8:0001:0000", "2001:0db8:0002:0000"
PRIO, HANDLE = 0x494C, 0x494C4E50  # tc.rs FILTER_PRIORITY, FILTER_HANDLE
V4_CN, V4_MN, V4_PORT = "10.251.0.1", "10.251.0.2", 6740
UDP_PPS, FLOW_S = 200, float(os.environ.get("ILNP_D12_FLOW_S", "12"))
FAST = os.environ.get("ILNP_D12_SLOW") != "1"  # the VM sets it: everything is ~20x slower under TCG
START_TIMEOUT_S = 60 if FAST else 300

results: list[tuple[bool, str]] = []
procs: list[subprocess.Popen] = []


def log(*a):
    print(f"[{time.monotonic():9.3f}]", *a, flush=True)


def check(ok: bool, what: str) -> bool:
    results.append((bool(ok), what))
    log("PASS" if ok else "FAIL", what)
    return bool(ok)


def sh(*args, ns=None, check_rc=True, timeout=60):
    cmd = (["ip", "netns", "exec", ns] if ns else []) + [str(a) for a in args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check_rc and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}: {r.stdout[-2000:]} {r.stderr[-2000:]}")
    return r


def spawn(ns, *args, out=None):
    p = subprocess.Popen(["ip", "netns", "exec", ns] + [str(a) for a in args], stdout=out or subprocess.DEVNULL,
                         stderr=subprocess.STDOUT if out else subprocess.DEVNULL,
                         text=out is subprocess.PIPE)
    procs.append(p)
    return p


def wait_for(pred, timeout=20.0, what="condition", interval=0.05):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = pred()
        except Exception as e:  # noqa: BLE001 (a daemon not answering yet)
            last = e
        if last and not isinstance(last, Exception):
            return last
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


class Daemon:
    def __init__(self, work, ns, nid, peer_name, peer_nid, peer_l64, extra=""):
        self.ns, self.work = ns, work
        self.sock = f"{work}/{ns}.sock"
        self.pin_dir = f"{work}/bpf/{ns}"
        self.logf = f"{work}/{ns}.log"
        self.cfg = f"{work}/{ns}.toml"
        with open(self.cfg, "w") as f:
            f.write(f'uplinks = ["eth0"]\nidentifier_prefix = "fd69:6c6e:7000::"\nnid = "{nid}"\n'
                    f'datapath = "ebpf"\ncontrol_socket = "{self.sock}"\nlog_level = "debug"\n'
                    f'pin_dir = "{self.pin_dir}"\n\n[[peer]]\nname = "{peer_name}"\nnid = "{peer_nid}"\n'
                    f'locators = [{{ l64 = "{peer_l64}", pref = 10 }}]\n{extra}')
        self.proc = None

    def start(self):
        if os.path.exists(self.sock):
            os.unlink(self.sock)  # a killed daemon's socket would look ready
        self.proc = spawn(self.ns, ILNPD, "--config", self.cfg, out=open(self.logf, "a"))
        try:
            # polled gently: under TCG every ilnpctl costs the daemon CPU time
            wait_for(lambda: self.proc.poll() is not None or (os.path.exists(self.sock) and self.ctl("status")),
                     timeout=START_TIMEOUT_S, what=f"ilnpd in {self.ns}", interval=0.05 if FAST else 0.5)
        except TimeoutError:
            for t in os.listdir(f"/proc/{self.proc.pid}/task"):  # where it hangs
                for f in ("wchan", "syscall", "stack"):
                    try:
                        with open(f"/proc/{self.proc.pid}/task/{t}/{f}") as fh:
                            log(f"ilnpd task {t} {f}: {fh.read().strip()}")
                    except OSError:
                        pass
            raise
        if self.proc.poll() is not None:
            raise RuntimeError(f"ilnpd in {self.ns} exited {self.proc.returncode}:\n{self.log()[-3000:]}")
        return self

    def ctl(self, *args):
        r = sh(ILNPCTL, "-s", self.sock, "--json", *args, ns=self.ns, check_rc=False, timeout=20)
        return json.loads(r.stdout) if r.returncode == 0 else None

    def core(self, name):
        return (self.ctl("stats") or {}).get("core", {}).get(name, 0)

    def dp(self, name):
        return (self.ctl("stats") or {}).get("datapath", {}).get(name, 0)

    def kill9(self):
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            return self.proc.wait(timeout=10)

    def log(self):
        with open(self.logf) as f:
            return f.read()


def filters(ns, dev, hook):
    """The bpf filters on a hook: [(pref, handle, name, prog id)]."""
    r = sh("tc", "-j", "filter", "show", "dev", dev, hook, ns=ns, check_rc=False)
    out = []
    for f in json.loads(r.stdout or "[]") if r.returncode == 0 else []:
        o = f.get("options")
        if f.get("kind") == "bpf" and o:
            h = o.get("handle", "0")
            out.append((f.get("pref"), int(h, 16) if isinstance(h, str) else h, o.get("bpf_name"), o.get("prog", {}).get("id")))
    return out


def snapshot(ns):
    links = [l.split(":")[1].strip().split("@")[0] for l in sh("ip", "-o", "link", "show", ns=ns).stdout.splitlines()]
    flt = set()
    for dev in links:
        for hook in ("ingress", "egress"):
            flt |= {f"{dev} {hook} {l}" for l in sh("tc", "filter", "show", "dev", dev, hook, ns=ns, check_rc=False).stdout.splitlines()}
    sysctl = sh("sh", "-c", "sysctl -a 2>/dev/null | grep -E '^net\\.ipv6\\.conf\\.'", ns=ns, check_rc=False).stdout
    return {
        "addr": set(sh("ip", "-6", "-o", "addr", "show", ns=ns).stdout.splitlines()),
        "route": set(sh("ip", "-6", "route", "show", "table", "all", ns=ns).stdout.splitlines()),
        "sysctl": set(sysctl.splitlines()),
        "link": {l.split("link/")[0] for l in sh("ip", "-o", "link", "show", ns=ns).stdout.splitlines()},
        "qdisc": set(sh("tc", "qdisc", "show", ns=ns).stdout.splitlines()),
        "tc_filter": flt,
    }


# one ICMPv6 echo (the root has no ping): exit 0 on the reply
PING = r"""
import socket, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6); s.settimeout(1)
s.sendto(bytes([128, 0, 0, 0, 0x12, 0x34, 0, 1]) + b"ilnp", (sys.argv[1], 0))
while True:
    d, a = s.recvfrom(1500)
    if d[0] == 129 and d[4:6] == bytes([0x12, 0x34]): sys.exit(0)
"""
UDP_RX = r"""
import socket, sys, json
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); s.bind((sys.argv[1], 9000)); s.settimeout(5)
seen = set(); print("ready", flush=True)
try:
    while True:
        d, _ = s.recvfrom(2048); seen.add(int(d[:8]))
except socket.timeout:
    pass
print(json.dumps({"received": len(seen), "max": max(seen) if seen else -1}), flush=True)
"""
UDP_TX = r"""
import socket, sys, time
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
pps, dur = int(sys.argv[2]), float(sys.argv[3]); n = int(pps * dur); t0 = time.monotonic()
for i in range(n):
    while time.monotonic() < t0 + i / pps: time.sleep(0.0005)
    try: s.sendto(b"%08d" % i + b"x" * 200, (sys.argv[1], 9000))
    except OSError as e: print("send error", i, e, flush=True)
print("sent", n, flush=True)
"""
TCP_SRV = r"""
import socket, sys
l = socket.socket(socket.AF_INET6); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind((sys.argv[1], 9001)); l.listen(1); print("ready", flush=True)
c, _ = l.accept()
while True:
    d = c.recv(4096)
    if not d: break
    c.sendall(d)
"""
TCP_CLI = r"""
import socket, sys, time
s = socket.create_connection((sys.argv[1], 9001), timeout=30)
dur = float(sys.argv[2]); t0 = time.monotonic(); n = 0; worst = 0.0; last = t0
while time.monotonic() < t0 + dur:
    s.sendall(b"y" * 64); got = b""
    while len(got) < 64:
        b = s.recv(64 - len(got))
        if not b: print("closed"); sys.exit(1)
        got += b
    now = time.monotonic(); worst = max(worst, now - last); last = now; n += 1
    time.sleep(0.02)
print(f"echoes {n} longest_gap_s {worst:.3f}", flush=True)
"""

# ILNPv6 TCP SYNs from random NIDs in UDP/IPv4 to the CN's v4 port (raw IPv4 socket).
# argv: src4, dst4, port, dst_nid (hex), count, pps
V4_SYNS = r"""
import os, random, socket, struct, sys, time
src4, dst4, port, nid_d, count, pps = sys.argv[1], sys.argv[2], int(sys.argv[3]), bytes.fromhex(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
def csum(b):
    if len(b) % 2: b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b)); s = (s >> 16) + (s & 0xffff); s += s >> 16
    return ~s & 0xffff
def loc(a): return b"\x00\x04" + socket.inet_aton(a) + struct.pack("!H", port)
r = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
t0 = time.monotonic()
for i in range(count):
    nid = bytes([2, 0, 0xff, 0xfe]) + os.urandom(4)
    tcp = struct.pack("!HHIIBBHHH", random.randint(1024, 65535), 9, random.getrandbits(32), 0, 5 << 4, 2, 64240, 0, 0)
    ph = bytes(8) + nid + bytes(8) + nid_d + struct.pack("!IxxxB", len(tcp), 6)  # the NIDs alone
    tcp = tcp[:16] + struct.pack("!H", csum(ph + tcp)) + tcp[18:]
    dopt = bytes([6, 1, 0x8b, 4]) + os.urandom(4) + bytes([1, 6, 0, 0, 0, 0, 0, 0])
    ip6 = struct.pack("!IHBB", 6 << 28, len(dopt) + len(tcp), 60, 64) + loc(src4) + nid + loc(dst4) + nid_d + dopt + tcp
    r.sendto(struct.pack("!HHHH", port, port, 8 + len(ip6), 0) + ip6, (dst4, port))
    time.sleep(max(0.0, t0 + (i + 1) / pps - time.monotonic()))
"""


def setup(work):
    for ns in (CN_NS, MN_NS):
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "set", "lo", "up", ns=ns)
    sh("ip", "link", "add", "eth0", "netns", CN_NS, "type", "veth", "peer", "name", "eth0", "netns", MN_NS)
    for ns, me in ((CN_NS, "c"), (MN_NS, "d")):
        sh("sysctl", "-qw", "net.ipv6.conf.eth0.accept_dad=0", ns=ns)
        sh("ip", "-6", "addr", "add", f"2001:db8:1::{me}/64", "dev", "eth0", "nodad", ns=ns)
        sh("ip", "link", "set", "eth0", "up", ns=ns)
    os.makedirs(f"{work}/bpf")
    sh("mount", "-t", "bpf", "bpf", f"{work}/bpf")
    wait_for(lambda: sh("python3", "-c", PING, "2001:db8:1::d", ns=CN_NS, check_rc=False).returncode == 0,
             what="plain IPv6 between the namespaces")


def teardown(work):
    for p in procs:
        if p.poll() is None:
            p.kill()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
    for ns in (CN_NS, MN_NS):
        sh("ip", "netns", "del", ns, check_rc=False)
    sh("umount", f"{work}/bpf", check_rc=False)
    shutil.rmtree(work, ignore_errors=True)


def hooks_of(ns):
    return {"eth0 ingress": filters(ns, "eth0", "ingress"), "ilnp0 egress": filters(ns, "ilnp0", "egress")}


def one_filter_per_hook(ns, what):
    h = hooks_of(ns)
    ok = all(len(v) == 1 and v[0][0] == PRIO and v[0][1] == HANDLE for v in h.values())
    check(ok, f"{what}: {ns} has exactly one ilnpd filter per hook at prio {PRIO:#x} handle {HANDLE:#x}: {h}")
    return {k: (v[0][3] if v else None) for k, v in h.items()}


def main():
    t_start = time.monotonic()
    log(f"kernel {os.uname().release}, ILNPD_ATTACH={os.environ.get('ILNPD_ATTACH', '')!r}, ilnpd {ILNPD}")
    for m in ("veth", "tun", "sch_ingress", "cls_bpf"):
        if shutil.which("modprobe"):
            r = subprocess.run(["modprobe", m], capture_output=True, text=True)
            if r.returncode != 0:
                log(f"modprobe {m}: {r.stderr.strip()}")
    if "--no-esp" not in sys.argv[1:]:
        import esp_guest  # beside this file (in the VM: /ilnp)

        esp_guest.load_modules()  # the ESP stage's (7), loading while checks 1-6 run
    if "--esp-only" in sys.argv[1:]:
        return esp_stage(t_start)
    work = tempfile.mkdtemp(prefix="ilnp-d12-", dir="/run" if os.path.isdir("/run") else None)
    cn = mn = None
    try:
        setup(work)
        before = {ns: snapshot(ns) for ns in (CN_NS, MN_NS)}
        cn = Daemon(work, CN_NS, CN_NID, "mn", MN_NID, L1).start()
        mn = Daemon(work, MN_NS, MN_NID, "cn", CN_NID, L1).start()
        check("clsact" in mn.log(), "ilnpd says at start that it attaches clsact filters: "
              + next((l for l in mn.log().splitlines() if "clsact" in l), "(no line)")[-200:])
        ids = {ns: one_filter_per_hook(ns, "after start") for ns in (CN_NS, MN_NS)}
        qd = sh("tc", "qdisc", "show", "dev", "eth0", ns=MN_NS).stdout
        check("clsact" in qd, f"clsact qdisc on MN eth0: {qd.strip()}")

        # 2. session
        rx = spawn(MN_NS, "python3", "-u", "-c", UDP_RX, MN_ID, out=subprocess.PIPE)
        srv = spawn(MN_NS, "python3", "-u", "-c", TCP_SRV, MN_ID, out=subprocess.PIPE)
        for p in (rx, srv):
            line = p.stdout.readline().strip()
            if line != "ready":
                raise RuntimeError(f"a listener in the MN did not start: {line} {p.stdout.read()[-1500:]}")
        tx = spawn(CN_NS, "python3", "-u", "-c", UDP_TX, MN_ID, UDP_PPS, FLOW_S, out=subprocess.PIPE)
        cli = spawn(CN_NS, "python3", "-u", "-c", TCP_CLI, MN_ID, FLOW_S, out=subprocess.PIPE)
        t_flow = time.monotonic()

        # 3. kill -9 mid-flow, MN then CN, each restarted at once
        for d, at in ((mn, FLOW_S * 0.25), (cn, FLOW_S * 0.55)):
            time.sleep(max(0.0, at - (time.monotonic() - t_flow)))
            pinned = sorted(os.listdir(d.pin_dir))
            t0 = time.monotonic()
            d.kill9()
            left = hooks_of(d.ns)
            check(all(len(v) == 1 for v in left.values()) and
                  {k: v[0][3] for k, v in left.items()} == ids[d.ns],
                  f"after kill -9 of {d.ns}'s ilnpd its filters stay, with its programs: {left}; pins {pinned}")
            d.start()
            down = time.monotonic() - t0
            log(f"{d.ns}: kill -9 -> ready {down * 1000:.0f} ms")
            new = one_filter_per_hook(d.ns, f"after restarting {d.ns}")
            check(all(new[k] != ids[d.ns][k] for k in new), f"{d.ns}: the filters run the new daemon's programs "
                  f"(prog ids {ids[d.ns]} -> {new})")
            ids[d.ns] = new
            lg = d.log()
            check("adopted the tc ingress filter" in lg and "restored 1 ILCC entries" in lg,
                  f"{d.ns}: filters and sessions adopted: "
                  + " | ".join(l[-120:] for l in lg.splitlines()[-400:] if "adopt" in l or "restored" in l)[-600:])

        out_tx = tx.communicate(timeout=FLOW_S * 4 + 60)[0]
        out_cli = cli.communicate(timeout=60)[0]
        out_rx = rx.communicate(timeout=30)[0]
        sent = int(next(l.split()[1] for l in out_tx.splitlines() if l.startswith("sent")))
        got = json.loads(out_rx.strip().splitlines()[-1])["received"]
        lost = sent - got
        log(f"UDP: sent {sent}, received {got}, lost {lost} ({100.0 * lost / max(sent, 1):.2f} %); TCP: {out_cli.strip()}")
        check(lost == 0, f"UDP across two kill -9 restarts: {lost} of {sent} lost")
        check(cli.returncode == 0 and "echoes" in out_cli, f"TCP echo session survived: {out_cli.strip()}")

        # 4. move: a second locator on the MN's uplink
        acked = mn.core("lu_acked")
        sh("ip", "-6", "route", "add", "2001:db8:2::/64", "dev", "eth0", ns=CN_NS)
        sh("ip", "-6", "addr", "add", "2001:db8:2::d/64", "dev", "eth0", "nodad", ns=MN_NS)
        t0 = time.monotonic()
        try:
            wait_for(lambda: mn.core("lu_acked") > acked, timeout=30, what="the LU acked")
            wait_for(lambda: L2 in [r["l64"] for e in cn.ctl("ilcc", "show") if e["nid"] == MN_NID
                                    for r in e["remote_locators"]], timeout=30, what="the CN learns L2")
            check(True, f"move: LU acked ({mn.core('lu_acked')} > {acked}) and the CN learnt {L2} "
                  f"in {(time.monotonic() - t0) * 1000:.0f} ms")
        except TimeoutError as e:
            check(False, f"move: {e}")
        check(mn.core("bad_nonce") == 0 and cn.core("bad_nonce") == 0, "no bad nonces")

        # 5. clean stop (then the move's own address and route go: the snapshot predates them)
        for d in (mn, cn):
            check(d.stop() == 0, f"{d.ns}: clean stop exits 0")
        sh("ip", "-6", "addr", "del", "2001:db8:2::d/64", "dev", "eth0", ns=MN_NS)
        sh("ip", "-6", "route", "del", "2001:db8:2::/64", "dev", "eth0", ns=CN_NS)
        for ns in (CN_NS, MN_NS):
            diff = {k: sorted(before[ns][k] ^ v) for k, v in snapshot(ns).items() if before[ns][k] != v}
            check(not diff, f"{ns}: plain IPv6 as before ilnpd started (addresses, routes, sysctls, links, "
                  f"qdiscs, filters): {json.dumps(diff)[:1500] if diff else 'equal'}")
        left = [p for p in os.listdir(f"{work}/bpf") if p not in ("maps.debug", "progs.debug")]  # the kernel's
        check(not left, f"pin directories removed: {left}")

        # 6. the v4 path on a kernel whose adjust_room has no DECAP_L3_IPV6
        # both ends IPv4-only: the pair is two v4 paths
        for ns, a in ((CN_NS, V4_CN), (MN_NS, V4_MN)):
            sh("ip", "addr", "add", f"{a}/24", "dev", "eth0", ns=ns)
        sh("ip", "-6", "addr", "del", "2001:db8:1::d/64", "dev", "eth0", ns=MN_NS)
        sh("ip", "-6", "addr", "del", "2001:db8:1::c/64", "dev", "eth0", ns=CN_NS)
        v4 = f"\n[ipv4]\nport = {V4_PORT}\n"
        cn = Daemon(work, CN_NS, CN_NID, "mn", MN_NID, f"v4:{V4_MN}:{V4_PORT}", extra=v4).start()
        mn = Daemon(work, MN_NS, MN_NID, "cn", CN_NID, f"v4:{V4_CN}:{V4_PORT}", extra=v4).start()
        rx = spawn(CN_NS, "python3", "-u", "-c", UDP_RX, CN_ID, out=subprocess.PIPE)
        if rx.stdout.readline().strip() != "ready":
            raise RuntimeError("the UDP listener in the CN did not start")
        fast0, punt0 = cn.dp("ingress_v4"), cn.dp("ingress_punt_v4_no_decap")
        tx = spawn(MN_NS, "python3", "-u", "-c", UDP_TX, CN_ID, "50", "4", out=subprocess.PIPE)
        out_tx = tx.communicate(timeout=120)[0]
        got = json.loads(rx.communicate(timeout=60)[0].strip().splitlines()[-1])["received"]
        fast, punt = cn.dp("ingress_v4") - fast0, cn.dp("ingress_punt_v4_no_decap") - punt0
        e = [x for x in cn.ctl("ilcc", "show") or [] if x["nid"] == MN_NID]
        path = [r.get("l64") for r in e[0]["remote_locators"]] if e else []
        dp = {k: v for k, v in (cn.ctl("stats") or {}).get("datapath", {}).items() if "v4" in k and v}
        log(f"v4 path: {out_tx.strip()}, received {got}; CN's entry for the MN: {path}; CN {dp}")
        # the first datagrams take the slow path while the CN validates the new path
        check(got == 200 and fast >= 100 and punt == 0 and path == [f"v4:{V4_MN}:{V4_PORT}"],
              f"a UDP flow over the v4 path, decapsulated by the fast path: {got} of 200 received, "
              f"ingress_v4 +{fast}, ingress_punt_v4_no_decap +{punt}, remote {path}")
        adm0, ns0 = (cn.ctl("status") or {}).get("admission", {}), cn.dp("ingress_v4_no_socket")
        sh("python3", "-c", V4_SYNS, V4_MN, V4_CN, str(V4_PORT), CN_NID.replace(":", ""), "50", "25", ns=MN_NS,
           timeout=120)
        time.sleep(1 if FAST else 5)
        adm1, stateless = (cn.ctl("status") or {}).get("admission", {}), cn.dp("ingress_v4_no_socket") - ns0
        punt = cn.dp("ingress_punt_v4_no_decap") - punt0
        log(f"v4 strangers: ingress_v4_no_socket +{stateless}, ingress_punt_v4_no_decap +{punt}, admission {adm1}")
        check(stateless == 50 and punt == 0 and adm1.get("embryonic") == 0
              and adm1.get("established") == adm0.get("established"),
              f"50 strangers' SYNs over the v4 path passed up with no state: ingress_v4_no_socket +{stateless}, "
              f"ingress_punt_v4_no_decap +{punt}, embryonic {adm1.get('embryonic')}")
        for d in (mn, cn):
            check(d.stop() == 0, f"{d.ns}: clean stop after the v4 path exits 0")
    except Exception as e:  # noqa: BLE001 (reported as a failure, then cleaned up)
        check(False, f"{type(e).__name__}: {e}")
        for d in (cn, mn):
            if d is not None and os.path.exists(d.logf):
                print(f"--- {d.ns} log (tail)\n{d.log()[-2500:]}", flush=True)
    finally:
        for d in (cn, mn):
            if d is not None:
                d.stop()
        teardown(work)
    return esp_stage(t_start)


def esp_stage(t_start):
    """7. kernel ESP (its own namespaces); then the verdict of all checks."""
    if "--no-esp" not in sys.argv[1:]:
        import esp_guest  # beside this file (in the VM: /ilnp)

        esp_guest.run_stage(sys.modules[__name__])
    failed = [w for ok, w in results if not ok]
    log(f"{len(results) - len(failed)} of {len(results)} checks passed in {time.monotonic() - t_start:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
