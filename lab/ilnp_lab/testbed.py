"""Namespaced testbeds: network namespaces, veth links, routers, processes.

Every name is unique per run (a random tag), every process is tracked by pid and
stopped by pid, and `Testbed.close()` removes everything it created even when a
step failed half-way.
"""

from __future__ import annotations

import os
import secrets
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path


class StepError(RuntimeError):
    """A testbed step failed; the message names the step and its output."""


def run(cmd: list[str], check: bool = True, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise StepError(f"{shlex.join(cmd)} failed ({p.returncode}): {p.stderr.strip() or p.stdout.strip()}")
    return p


@dataclass
class Node:
    bed: "Testbed"
    name: str  # logical name (cn, r1, mn)
    ns: str  # namespace name (unique per run)
    ifaces: list[str] = field(default_factory=list)

    def cmd(self, *args: str) -> list[str]:
        return ["ip", "netns", "exec", self.ns, *args]

    def run(self, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        return run(self.cmd(*args), check=check, timeout=timeout)

    def sh(self, script: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        return run(self.cmd("sh", "-c", script), check=check, timeout=timeout)

    def ip(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return run(["ip", "-n", self.ns, *args], check=check)

    def sysctl(self, key: str, value: str) -> None:
        self.run("sysctl", "-qw", f"{key}={value}")

    def spawn(self, *args: str, stdout=None, stderr=None, env=None) -> subprocess.Popen:
        return self.bed.spawn(self, list(args), stdout=stdout, stderr=stderr, env=env)


class Testbed:
    """A set of namespaces joined by veth links. Use as a context manager."""

    __test__ = False  # not a pytest test class

    def __init__(self, tag: str | None = None, workdir: Path | None = None):
        self.tag = tag or f"il{os.getpid() % 10000}{secrets.token_hex(2)}"
        self.nodes: dict[str, Node] = {}
        self.procs: list[subprocess.Popen] = []
        self.workdir = Path(workdir) if workdir else Path("/tmp") / f"ilnp-{self.tag}"
        self.workdir.mkdir(parents=True, exist_ok=True)

    # ---------- lifecycle
    def __enter__(self) -> "Testbed":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for p in reversed(self.procs):
            stop_process(p)
        self.procs.clear()
        for node in self.nodes.values():
            run(["ip", "netns", "del", node.ns], check=False)
        self.nodes.clear()

    # ---------- topology
    def add_node(self, name: str, router: bool = False) -> Node:
        ns = f"{self.tag}-{name}"
        run(["ip", "netns", "add", ns])
        node = Node(self, name, ns)
        self.nodes[name] = node
        node.ip("link", "set", "lo", "up")
        # deterministic headers for byte-level comparisons; no DAD delays in the lab
        node.sysctl("net.ipv6.auto_flowlabels", "0")
        node.sysctl("net.ipv6.conf.all.accept_dad", "0")
        node.sysctl("net.ipv6.conf.default.accept_dad", "0")
        if router:
            node.sysctl("net.ipv6.conf.all.forwarding", "1")
        return node

    def link(self, a: Node, a_if: str, b: Node, b_if: str, mtu: int | None = None) -> None:
        run(["ip", "-n", a.ns, "link", "add", a_if, "type", "veth", "peer", "name", b_if, "netns", b.ns])
        for n, i in ((a, a_if), (b, b_if)):
            if mtu:
                n.ip("link", "set", i, "mtu", str(mtu))
            n.ip("link", "set", i, "up")
            n.ifaces.append(i)

    def delay_link(self, a: Node, a_if: str, b: Node, b_if: str, delay_ms: float, loss_pct: float = 0.0,
                   seed: int = 1) -> subprocess.Popen:
        """A link with one-way delay (and loss) in both directions through the lab's
        own delay line (this kernel has no netem): a —[dl namespace]— b."""
        from .daemon import binary
        dl = self.add_node(f"dl{len(self.nodes)}")
        run(["ip", "-n", a.ns, "link", "add", a_if, "type", "veth", "peer", "name", "dla", "netns", dl.ns])
        run(["ip", "-n", b.ns, "link", "add", b_if, "type", "veth", "peer", "name", "dlb", "netns", dl.ns])
        for i in ("dla", "dlb"):
            dl.sysctl(f"net.ipv6.conf.{i}.disable_ipv6", "1")  # the line's namespace stays silent
            dl.ip("link", "set", i, "up")
        for n, i in ((a, a_if), (b, b_if)):
            n.ip("link", "set", i, "up")
            n.ifaces.append(i)
        log = open(self.workdir / f"{dl.name}.log", "w")
        p = dl.spawn(binary("ilnp-delayline"), "--a", "dla", "--b", "dlb", "--delay-ms", str(delay_ms),
                     "--loss", str(loss_pct), "--seed", str(seed), stdout=log, stderr=subprocess.STDOUT)
        wait_for(lambda: "ready" in (self.workdir / f"{dl.name}.log").read_text() or p.poll() is not None,
                 timeout=10, what="delay line ready")
        if p.poll() is not None:
            raise StepError(f"delay line exited: {(self.workdir / f'{dl.name}.log').read_text()}")
        return p

    def spawn(self, node: Node, args: list[str], stdout=None, stderr=None, env=None) -> subprocess.Popen:
        p = subprocess.Popen(
            node.cmd(*args),
            stdout=stdout if stdout is not None else subprocess.DEVNULL,
            stderr=stderr if stderr is not None else subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        self.procs.append(p)
        return p


def stop_process(p: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 10) -> int | None:
    """Stops one process we started, by pid (never by name)."""
    if p.poll() is None:
        try:
            os.kill(p.pid, sig)
        except ProcessLookupError:
            pass
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=5)
    return p.returncode


def wait_for(pred, timeout: float = 10, interval: float = 0.05, what: str = "condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = pred()
        if last:
            return last
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def nic_segmentation(node: Node, iface: str) -> None:
    """Makes a host's veth segment TCP itself, as a real NIC does, instead of
    handing 64 KB GSO packets to the next namespace. Linux's forwarding path
    (ip6_forward's GSO length check) reads the first extension header as the TCP
    header, so a plain router namespace wrongly rejects forwarded GSO packets
    that carry any IPv6 extension header, the ILNPv6 nonce included, with
    Packet Too Big. Plain IPv6 baselines use the same setting. GSO stays on."""
    node.run("ethtool", "-K", iface, "tso", "off")


def three_node(bed: Testbed, mtu_mn: int | None = None) -> tuple[Node, Node, Node]:
    """CN — R1 — MN with static addressing; R1 is a plain Linux router.

    CN: 2001:db8:a::c/64 on eth0 (locator 2001:db8:a:0)
    MN: 2001:db8:b::d/64 on eth0 (locator 2001:db8:b:0)
    """
    cn, r1, mn = bed.add_node("cn"), bed.add_node("r1", router=True), bed.add_node("mn")
    bed.link(cn, "eth0", r1, "eth-cn")
    bed.link(r1, "eth-mn", mn, "eth0")
    if mtu_mn:
        # only R1's side: hosts do not know it, so R1 must send Packet Too Big
        r1.ip("link", "set", "eth-mn", "mtu", str(mtu_mn))
    r1.ip("addr", "add", "2001:db8:a::1/64", "dev", "eth-cn", "nodad")
    r1.ip("addr", "add", "2001:db8:b::1/64", "dev", "eth-mn", "nodad")
    cn.ip("addr", "add", "2001:db8:a::c/64", "dev", "eth0", "nodad")
    mn.ip("addr", "add", "2001:db8:b::d/64", "dev", "eth0", "nodad")
    cn.ip("-6", "route", "add", "default", "via", "2001:db8:a::1")
    mn.ip("-6", "route", "add", "default", "via", "2001:db8:b::1")
    nic_segmentation(cn, "eth0")
    nic_segmentation(mn, "eth0")
    return cn, r1, mn


RADVD_CONF = """interface {iface} {{
    AdvSendAdvert on;
    MinRtrAdvInterval {min_ra};
    MaxRtrAdvInterval {max_ra};
    AdvDefaultPreference {pref};
    prefix {prefix} {{
        AdvOnLink on;
        AdvAutonomous on;
        AdvValidLifetime {valid};
        AdvPreferredLifetime {preferred};
    }};
}};
"""


def radvd(node: Node, iface: str, prefix: str, min_ra: float = 3, max_ra: float = 4,
          pref: str = "medium", valid: int = 30, preferred: int = 20) -> subprocess.Popen:
    """Runs radvd on `node` advertising `prefix` (a /64) on `iface`; returns the process."""
    d = node.bed.workdir / f"radvd-{node.name}-{iface}"
    d.mkdir(parents=True, exist_ok=True)
    conf = d / "radvd.conf"
    conf.write_text(RADVD_CONF.format(iface=iface, prefix=prefix, min_ra=min_ra, max_ra=max_ra, pref=pref,
                                      valid=valid, preferred=preferred))
    run(["radvd", "--configtest", "-C", str(conf)])
    return node.spawn("radvd", "-n", "-C", str(conf), "-p", str(d / "radvd.pid"), "-m", "stderr")


def mobility_topology(bed: Testbed, wan_r2_ms: float = 0, wan_r3_ms: float = 0, cn_mobile: bool = False) -> dict[str, Node]:
    """Seed 000 Fig. 8: CN — R1 — {R2, R3} — MN. R2 advertises 2001:db8:2::/64 and R3
    2001:db8:3::/64 to the MN with radvd; the MN starts with its R3 link down.
    `wan_r2_ms`/`wan_r3_ms`: one-way delay added on R1—R2 / R1—R3 (the seeds' WAN: 100).
    `cn_mobile`: the CN gets a second link to R1 (eth1, down at first), where R1
    advertises 2001:db8:a2::/64 with radvd (call `radvd(t["r1"], "eth-cn2", ...)`).

    CN: 2001:db8:a::c/64 static.  R1—R2: 2001:db8:12::/64, R1—R3: 2001:db8:13::/64.
    """
    cn, r1 = bed.add_node("cn"), bed.add_node("r1", router=True)
    r2, r3 = bed.add_node("r2", router=True), bed.add_node("r3", router=True)
    mn = bed.add_node("mn")
    bed.link(cn, "eth0", r1, "eth-cn")
    for r, name, ms in ((r2, "eth-r2", wan_r2_ms), (r3, "eth-r3", wan_r3_ms)):
        if ms:
            bed.delay_link(r1, name, r, "eth-r1", ms)
        else:
            bed.link(r1, name, r, "eth-r1")
    bed.link(r2, "eth-mn", mn, "eth-r2")
    bed.link(r3, "eth-mn", mn, "eth-r3")
    for n, i, a in ((r1, "eth-cn", "2001:db8:a::1/64"), (cn, "eth0", "2001:db8:a::c/64"),
                    (r1, "eth-r2", "2001:db8:12::1/64"), (r2, "eth-r1", "2001:db8:12::2/64"),
                    (r1, "eth-r3", "2001:db8:13::1/64"), (r3, "eth-r1", "2001:db8:13::3/64"),
                    (r2, "eth-mn", "2001:db8:2::1/64"), (r3, "eth-mn", "2001:db8:3::1/64")):
        n.ip("addr", "add", a, "dev", i, "nodad")
    cn.ip("-6", "route", "add", "default", "via", "2001:db8:a::1")
    r1.ip("-6", "route", "add", "2001:db8:2::/64", "via", "2001:db8:12::2")
    r1.ip("-6", "route", "add", "2001:db8:3::/64", "via", "2001:db8:13::3")
    r2.ip("-6", "route", "add", "default", "via", "2001:db8:12::1")
    r3.ip("-6", "route", "add", "default", "via", "2001:db8:13::1")
    for i in ("eth-r2", "eth-r3"):
        mn.sysctl(f"net.ipv6.conf.{i}.accept_ra", "2")
        mn.sysctl(f"net.ipv6.conf.{i}.autoconf", "1")
        mn.sysctl(f"net.ipv6.conf.{i}.optimistic_dad", "1")
    if cn_mobile:
        bed.link(cn, "eth1", r1, "eth-cn2")
        r1.ip("addr", "add", "2001:db8:a2::1/64", "dev", "eth-cn2", "nodad")
        cn.sysctl("net.ipv6.conf.eth1.accept_ra", "2")
        nic_segmentation(cn, "eth1")
        cn.ip("link", "set", "eth1", "down")
    nic_segmentation(cn, "eth0")
    for i in ("eth-r2", "eth-r3"):
        nic_segmentation(mn, i)
    mn.ip("link", "set", "eth-r3", "down")
    return {"cn": cn, "r1": r1, "r2": r2, "r3": r3, "mn": mn}
