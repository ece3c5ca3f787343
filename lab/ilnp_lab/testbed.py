"""Namespaced testbeds: network namespaces, veth links, addresses, routes, processes.

Every name is unique per run (a random tag), every process is tracked by pid and
stopped by pid, and `Testbed.close()` removes everything it created even when a
step failed half-way.

A leaf: it imports nothing from the package. What runs on top of a testbed lives
beside it: `services.py` (radvd, neighbour warm-up, NIC settings), `fixtures.py`
(the tests' topologies), `topology.py` (experiment files), `daemon.py` (ilnpd).
"""

from __future__ import annotations

import functools
import ipaddress
import json
import os
import secrets
import shutil
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from pyroute2 import NetNS
from pyroute2.netlink.exceptions import NetlinkError


REPO = Path(__file__).resolve().parents[2]


# The TCP counters (`nstat` names) that say how a flow's packets were reordered and recovered:
# the balancing and aggregation experiments report their deltas over a run.
REORDER_COUNTERS = ("TcpRetransSegs", "TcpExtTCPSACKReorder", "TcpExtTCPTSReorder", "TcpExtTCPRenoReorder",
                    "TcpExtTCPReordering", "TcpExtTCPFastRetrans", "TcpExtTCPSlowStartRetrans", "TcpExtTCPLostRetransmit",
                    "TcpExtTCPDSACKRecv", "TcpExtTCPDSACKUndo", "TcpExtTCPOFOQueue", "TcpExtTCPSpuriousRTOs")


class StepError(RuntimeError):
    """A testbed step failed; the message names the step and its output."""


def run(cmd: list[str], check: bool = True, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise StepError(f"{shlex.join(cmd)} failed ({p.returncode}): {p.stderr.strip() or p.stdout.strip()}")
    return p


def bin_dir() -> Path:
    """Where the project's binaries (ilnpd, ilnpctl, ilnp-delayline) are: $ILNP_BIN_DIR or
    the workspace's release build."""
    d = os.environ.get("ILNP_BIN_DIR")
    return Path(d) if d else REPO / "target" / "release"


def binary(name: str) -> str:
    p = bin_dir() / name
    if not p.exists():
        raise StepError(f"{p} not found: build with `cargo build --release` or set ILNP_BIN_DIR")
    return str(p)


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

    def link_stats(self, iface: str) -> dict[str, int]:
        """The interface's 64-bit counters (IFLA_STATS64: rx_bytes, rx_packets, tx_packets, ...)."""
        return dict(self.nl.get_links(self.index(iface))[0].get_attr("IFLA_STATS64"))

    def nstat(self) -> dict[str, int]:
        """The namespace's kernel counters, absolute (`nstat -azs`: the history file untouched)."""
        j = json.loads(self.run("nstat", "-azs", "--json").stdout)
        return {k: int(v) for k, v in (j.get("kernel") or j).items()}

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

    def listening(self, port: int) -> bool:
        """A TCP socket listens on `port` in this namespace."""
        return f":{port} " in self.run("ss", "-Hltn", check=False).stdout

    def wait_listening(self, port: int, timeout: float = 10) -> None:
        """Until a server started here listens on TCP `port`. Not a fixed sleep: a client
        whose SYN arrives first is refused at once (plain IPv6, and ILNPv6 with
        `admission = socket`: the stack's RST reaches the peer), not retried."""
        wait_for(lambda: self.listening(port), timeout=timeout, what=f"TCP port {port} listening in {self.name}")

    def listening_udp(self, port: int) -> bool:
        """A UDP socket is bound to `port` in this namespace."""
        return f":{port} " in self.run("ss", "-Hlun", check=False).stdout

    def wait_listening_udp(self, port: int, timeout: float = 10) -> None:
        """Until a server started here has bound UDP `port` (a datagram sent before that is
        answered with port unreachable and lost, not queued)."""
        wait_for(lambda: self.listening_udp(port), timeout=timeout, what=f"UDP port {port} bound in {self.name}")


class Testbed:
    """A set of namespaces joined by veth links. Use as a context manager."""

    __test__ = False  # not a pytest test class

    def __init__(self, tag: str | None = None, workdir: Path | None = None):
        self.tag = tag or f"il{os.getpid() % 10000}{secrets.token_hex(2)}"
        self.nodes: dict[str, Node] = {}
        self.procs: list[subprocess.Popen] = []
        self.ilnpds: list = []  # every daemon.Ilnpd started here, for checks at teardown
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
            # per-namespace /etc files (resolv.conf, bind.resolv_conf), if any were made
            shutil.rmtree(Path("/etc/netns") / node.ns, ignore_errors=True)
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
                   seed: int = 1, rate_mbit: float | None = None, queue_packets: int | None = None,
                   jitter_ms: float = 0.0, jitter_dist: str = "normal", jitter_order: str = "fifo") -> subprocess.Popen | None:
        """A link with one-way delay (and loss, rate, queue limit, jitter: the delay's standard
        deviation, drawn from `jitter_dist`) in both directions: netem on both ends where the
        kernel has it, otherwise through the lab's own delay line, a —[dl namespace]— b (returns
        its process). netem has no FIFO jitter (it reorders unless rate-limited) and takes its
        uniform jitter as a half-width: only `reorder` is given to it, scaled to the same deviation."""
        if netem_available():
            if jitter_ms and jitter_order != "reorder":
                raise StepError("jitter_order = \"fifo\" needs ilnp-delayline; this kernel's netem reorders")
            jit = []
            if jitter_ms:
                jit = ([f"{jitter_ms * 3 ** 0.5}ms"] if jitter_dist == "uniform"
                       else [f"{jitter_ms}ms", "distribution", jitter_dist])
            self.link(a, a_if, b, b_if)
            for n, i in ((a, a_if), (b, b_if)):
                n.run("tc", "qdisc", "add", "dev", i, "root", "netem", "delay", f"{delay_ms}ms", *jit,
                      "loss", f"{loss_pct}%", *(["rate", f"{rate_mbit}mbit"] if rate_mbit else []),
                      *(["limit", str(queue_packets)] if queue_packets else []))
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
        if jitter_ms:
            args += ["--jitter-ms", str(jitter_ms), "--jitter-dist", "pareto-normal" if jitter_dist == "paretonormal"
                     else jitter_dist, "--jitter-order", jitter_order]
        if rate_mbit:
            args += ["--rate-mbit", str(rate_mbit)]
        if queue_packets:
            args += ["--queue-packets", str(queue_packets)]
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
