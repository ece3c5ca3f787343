"""Namespaced testbeds: network namespaces, veth links, routers, processes.

Every name is unique per run (a random tag), every process is tracked by pid and
stopped by pid, and `Testbed.close()` removes everything it created even when a
step failed half-way.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import secrets
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from pyroute2 import NetNS
from pyroute2.netlink.exceptions import NetlinkError


class StepError(RuntimeError):
    """A testbed step failed; the message names the step and its output."""


def run(cmd: list[str], check: bool = True, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise StepError(f"{shlex.join(cmd)} failed ({p.returncode}): {p.stderr.strip() or p.stdout.strip()}")
    return p


IFA_F_NODAD = 0x02
AF_INET6 = 10


@dataclass
class Node:
    bed: "Testbed"
    name: str  # logical name (cn, r1, mn)
    ns: str  # namespace name (unique per run)
    ifaces: list[str] = field(default_factory=list)
    _nl: NetNS | None = None

    @property
    def nl(self) -> NetNS:
        """pyroute2 netlink handle inside this node's namespace."""
        if self._nl is None:
            self._nl = NetNS(self.ns)
        return self._nl

    def close(self) -> None:
        if self._nl is not None:
            self._nl.close()
            self._nl = None

    def index(self, iface: str) -> int:
        idx = self.nl.link_lookup(ifname=iface)
        if not idx:
            raise StepError(f"{self.name}: no interface {iface!r}")
        return idx[0]

    # ---------- netlink (pyroute2)
    def set_link(self, iface: str, up: bool) -> None:
        self.nl.link("set", index=self.index(iface), state="up" if up else "down")

    def add_addr(self, iface: str, cidr: str, nodad: bool = True) -> None:
        addr, plen = cidr.split("/")
        try:
            self.nl.addr("add", index=self.index(iface), address=addr, prefixlen=int(plen),
                         flags=IFA_F_NODAD if nodad else 0)
        except NetlinkError as e:
            raise StepError(f"{self.name}: adding {cidr} on {iface}: {e}") from e

    def add_route(self, dst: str, via: str) -> None:
        try:
            self.nl.route("add", dst=dst, gateway=via, family=AF_INET6)
        except NetlinkError as e:
            raise StepError(f"{self.name}: route {dst} via {via}: {e}") from e

    def default_gateway(self, iface: str) -> str | None:
        """The gateway of the main table's default route through `iface` (from an RA: link-local)."""
        for r in self.nl.get_routes(family=AF_INET6, table=254, oif=self.index(iface)):
            if r["dst_len"] == 0 and r.get_attr("RTA_GATEWAY"):
                return r.get_attr("RTA_GATEWAY")
        return None

    def source_route(self, iface: str, prefix: str, table: int) -> None:
        """Packets from `prefix` leave through `iface` (its default gateway), as a multihomed
        host needs when each network only forwards its own sources (RFC 8678 §5)."""
        gw = wait_for(lambda: self.default_gateway(iface), timeout=10, what=f"{self.name}: default route via {iface}")
        net = ipaddress.IPv6Network(prefix, strict=False)
        self.nl.route("add", dst="::", dst_len=0, gateway=gw, oif=self.index(iface), table=table, family=AF_INET6)
        self.nl.rule("add", family=AF_INET6, src=str(net.network_address), src_len=net.prefixlen, table=table,
                     priority=1000 + table)

    def global_addrs(self, iface: str | None = None) -> list[str]:
        """Global IPv6 addresses (on `iface`, or anywhere), as strings."""
        kw = {"index": self.index(iface)} if iface else {}
        out = []
        for m in self.nl.get_addr(family=AF_INET6, **kw):
            if m["scope"] == 0:
                out.append(m.get_attr("IFA_ADDRESS"))
        return out

    def rate_limit(self, iface: str, rate_mbit: float) -> None:
        """Token bucket on the interface's egress (a link's rate, one direction), with 200 ms
        of queue: deeper than a 320 KB TCP window at 30 Mbit/s, like a Wi-Fi driver's, so that
        a window-limited flow is not cut by tail drops that have nothing to do with a handoff."""
        burst = max(int(rate_mbit * 1e6 / 8 / 250), 16 * 1514)  # 4 ms of traffic, at least 16 frames
        self.nl.tc("add", "tbf", index=self.index(iface), handle="1:", rate=f"{rate_mbit}mbit", burst=burst,
                   latency="200ms")

    # ---------- processes in the namespace
    def cmd(self, *args: str) -> list[str]:
        return ["ip", "netns", "exec", self.ns, *args]

    def run(self, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        return run(self.cmd(*args), check=check, timeout=timeout)

    def sh(self, script: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        return run(self.cmd("sh", "-c", script), check=check, timeout=timeout)

    def ip(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """iproute2, for ad-hoc commands in tests (the lab itself uses pyroute2)."""
        return run(["ip", "-n", self.ns, *args], check=check)

    def sysctl(self, *settings: str) -> None:
        """sysctl KEY=VALUE ... in this namespace (procfs, not netlink: one process for all)."""
        if len(settings) == 2 and "=" not in settings[0]:
            settings = (f"{settings[0]}={settings[1]}",)
        self.run("sysctl", "-qw", *settings)

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
        self.owner = os.getpid()

    # ---------- lifecycle
    def __enter__(self) -> "Testbed":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if os.getpid() != self.owner:
            return  # a forked child (pyroute2 forks) unwinding through our `with`: not its to remove
        for p in reversed(self.procs):
            stop_process(p)
            for pipe in (p.stdin, p.stdout, p.stderr):
                if pipe:
                    pipe.close()
        self.procs.clear()
        for node in self.nodes.values():
            node.close()
            run(["ip", "netns", "del", node.ns], check=False)
        self.nodes.clear()

    # ---------- topology
    def add_node(self, name: str, router: bool = False) -> Node:
        ns = f"{self.tag}-{name}"
        # iproute2 creates the namespace: pyroute2's netns.create forks this process, which
        # is unreliable once its netlink handles into other namespaces are open (the child
        # can be stopped before it bind-mounts the namespace); all else goes through pyroute2
        run(["ip", "netns", "add", ns])
        node = Node(self, name, ns)
        self.nodes[name] = node
        node.set_link("lo", True)
        # deterministic headers for byte-level comparisons; no DAD delays in the lab
        settings = ["net.ipv6.auto_flowlabels=0", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0"]
        if router:
            settings.append("net.ipv6.conf.all.forwarding=1")
        node.sysctl(*settings)
        return node

    def _veth(self, a: Node, a_if: str, b: Node, b_if: str) -> None:
        try:
            a.nl.link("add", ifname=a_if, kind="veth", peer={"ifname": b_if, "net_ns_fd": b.ns})
        except NetlinkError as e:
            raise StepError(f"veth {a.name}:{a_if} — {b.name}:{b_if}: {e}") from e

    def link(self, a: Node, a_if: str, b: Node, b_if: str, mtu: int | None = None,
             rate_mbit: float | None = None) -> None:
        self._veth(a, a_if, b, b_if)
        for n, i in ((a, a_if), (b, b_if)):
            if mtu:
                n.nl.link("set", index=n.index(i), mtu=mtu)
            if rate_mbit:
                n.rate_limit(i, rate_mbit)
            n.set_link(i, True)
            n.ifaces.append(i)

    def delay_link(self, a: Node, a_if: str, b: Node, b_if: str, delay_ms: float, loss_pct: float = 0.0,
                   seed: int = 1, rate_mbit: float | None = None) -> subprocess.Popen | None:
        """A link with one-way delay (and loss, rate) in both directions: netem on both
        ends where the kernel has it, otherwise through the lab's own delay line,
        a —[dl namespace]— b (returns its process)."""
        from .daemon import binary
        if netem_available():
            self.link(a, a_if, b, b_if)
            for n, i in ((a, a_if), (b, b_if)):
                n.run("tc", "qdisc", "add", "dev", i, "root", "netem", "delay", f"{delay_ms}ms", "loss", f"{loss_pct}%",
                      *(["rate", f"{rate_mbit}mbit"] if rate_mbit else []))
            return None
        dl = self.add_node(f"dl{len(self.nodes)}")
        self._veth(a, a_if, dl, "dla")
        self._veth(b, b_if, dl, "dlb")
        dl.sysctl("net.ipv6.conf.dla.disable_ipv6=1", "net.ipv6.conf.dlb.disable_ipv6=1")  # the line stays silent
        for i in ("dla", "dlb"):
            dl.set_link(i, True)
        for n, i in ((a, a_if), (b, b_if)):
            n.set_link(i, True)
            n.ifaces.append(i)
        logpath = self.workdir / f"{dl.name}.log"
        args = [binary("ilnp-delayline"), "--a", "dla", "--b", "dlb", "--delay-ms", str(delay_ms),
                "--loss", str(loss_pct), "--seed", str(seed)]
        if rate_mbit:
            args += ["--rate-mbit", str(rate_mbit)]
        p = dl.spawn(*args, stdout=open(logpath, "w"), stderr=subprocess.STDOUT)
        wait_for(lambda: "ready" in logpath.read_text() or p.poll() is not None, timeout=10, what="delay line ready")
        if p.poll() is not None:
            raise StepError(f"delay line exited: {logpath.read_text()}")
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
        for f in (stdout, stderr):  # the child has its own copy: a long experiment must not run out of fds
            if f is not None and hasattr(f, "close"):
                f.close()
        self.procs.append(p)
        return p


@functools.cache
def netem_available() -> bool:
    """Whether this kernel has netem, tried in a throwaway network namespace."""
    p = run(["unshare", "-n", "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"], check=False)
    return p.returncode == 0


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
        r1.nl.link("set", index=r1.index("eth-mn"), mtu=mtu_mn)
    r1.add_addr("eth-cn", "2001:db8:a::1/64")
    r1.add_addr("eth-mn", "2001:db8:b::1/64")
    cn.add_addr("eth0", "2001:db8:a::c/64")
    mn.add_addr("eth0", "2001:db8:b::d/64")
    cn.add_route("default", "2001:db8:a::1")
    mn.add_route("default", "2001:db8:b::1")
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


def warm_neighbours(a: Node, b: Node, b_addr: str) -> None:
    """One ping from `a` to `b_addr` so both routers know each other's link-layer
    address before an experiment, as routers carrying traffic do; otherwise the
    first packet of a handoff over a never-used delayed link pays a Neighbour
    Discovery round trip across it (and packets queued behind it may overflow)."""
    a.run("ping", "-6", "-c", "1", "-W", "3", b_addr, timeout=10)


def mobility_topology(bed: Testbed, wan_r2_ms: float = 0, wan_r3_ms: float = 0, cn_mobile: bool = False) -> dict[str, Node]:
    """Seed 000 Fig. 8 for the tests: the network of experiments/seed000-tcp.toml (CN — R1 —
    {R2, R3} — MN, the MN's link to R3 down at first) without its 30 Mbit/s cell rate and
    without radvd (tests start it: `radvd(t["r2"], "eth-mn", "2001:db8:2::/64")`, R3:
    2001:db8:3::/64). `wan_r2_ms`/`wan_r3_ms`: one-way delay added on R1—R2 / R1—R3.
    `cn_mobile`: the CN gets a second link to R1 (eth1, down at first), where R1 has
    2001:db8:a2::1/64 (tests start `radvd(t["r1"], "eth-cn2", "2001:db8:a2::/64")`).
    """
    from .topology import build, load

    over = {"r1-r2": {"delay_ms": wan_r2_ms}, "r1-r3": {"delay_ms": wan_r3_ms},
            "r2-mn": {"rate_mbit": None}, "r3-mn": {"rate_mbit": None}}
    nodes = build(bed, load("seed000-tcp"), "lan-lan", overrides=over, start_radvd=False)
    cn, r1 = nodes["cn"], nodes["r1"]
    if cn_mobile:
        bed.link(cn, "eth1", r1, "eth-cn2")
        r1.add_addr("eth-cn2", "2001:db8:a2::1/64")
        cn.sysctl("net.ipv6.conf.eth1.accept_ra=2")
        nic_segmentation(cn, "eth1")
        cn.set_link("eth1", False)
    return nodes
