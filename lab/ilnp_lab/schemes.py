"""The schemes a run compares, one class each, with the hooks `runner.Run` calls in order:

    setup(nodes)  after SLAAC: what the scheme needs before traffic; returns (src, dst),
                  the addresses the flow and the probes use
    start()       once captures run: the scheme's own recorders (ilnpd's event monitor)
    on_event(e)   after each timeline change (MPTCP announces the MN's new address)
    counters()    after the flow: the scheme's counters for run.json (ilnpd's stats)
    stop()        then: stop what `start` began

`wrap` prefixes the iperf3 commands (mptcpize), `server_bind` binds the server, `mn_nid`
marks runs whose captures carry ILNPv6 (LU handshakes, stale-locator drops).
`BY_NAME` holds one class per name in topology.SCHEMES.
"""

from __future__ import annotations

import ipaddress
import subprocess
import threading

from .daemon import Ilnpd, Peer
from .testbed import Node, binary, stop_process, wait_for
from .topology import SCHEMES


class Scheme:
    name = ""
    wrap: list[str] = []

    def __init__(self, run, nodes: dict[str, Node]):
        self.run, self.ex, self.nodes = run, run.ex, nodes
        self.cn, self.mn = nodes[run.ex.cn], nodes[run.ex.mn]

    @property
    def mn_nid(self) -> str | None:
        return None

    def setup(self) -> tuple[str, str]:
        raise NotImplementedError

    def server_bind(self, dst: str) -> list[str]:
        """iperf3 -s binds any address, by default."""
        return []

    def start(self) -> None:
        pass

    def on_event(self, e) -> None:
        pass

    def counters(self) -> dict:
        return {}

    def stop(self) -> None:
        pass


class Plain(Scheme):
    """Plain IPv6: nothing runs; the flow uses the hosts' first global addresses (the MN's
    from its first network), and the session is expected to break when the MN leaves it."""
    name = "plain"

    def setup(self) -> tuple[str, str]:
        ex = self.ex
        first = ex.initial_prefixes(ex.mn)
        src = self.cn.global_addrs(ex.initial_prefixes(ex.cn)[0][0])[0]
        net = ipaddress.IPv6Network(first[0][1])
        dst = next(a for a in self.mn.global_addrs(first[0][0]) if ipaddress.IPv6Address(a) in net)
        return src, dst


class Mptcp(Plain):
    """Kernel MPTCP (iperf3 under mptcpize) from plain IPv6 addresses, with what a connection
    manager adds: limits, a source route per network, a `signal` endpoint for each new address."""
    name = "mptcp"
    wrap = ["mptcpize", "run"]

    def setup(self) -> tuple[str, str]:
        src, dst = super().setup()
        self.run.step = "MPTCP limits and the MN's per-network routing"
        for n in (self.cn, self.mn):
            n.ip("mptcp", "limits", "set", "subflows", "4", "add_addr_accepted", "4")
        for k, (iface, prefix) in enumerate(self.ex.initial_prefixes(self.ex.mn)):
            self.mn.source_route(iface, prefix, 100 + k)
        return src, dst

    def on_event(self, e) -> None:
        if e.action == "up" and e.node == self.ex.mn:
            threading.Thread(target=self._endpoint, args=(e.iface,), daemon=True).start()

    def _endpoint(self, iface: str) -> None:
        """What a connection manager does for MPTCP (the deployment guides' setup): route each
        new network's source address out of its own interface, and announce the address."""
        mn = self.mn
        try:
            addr = wait_for(lambda: mn.global_addrs(iface), timeout=10, what=f"address on {iface}")[0]
            mn.source_route(iface, f"{addr}/64", 200 + mn.index(iface))
            mn.ip("mptcp", "endpoint", "add", addr, "dev", iface, "signal")
        except Exception as e:  # recorded, the run goes on: the result shows what MPTCP did
            self.run.notes.append(f"mptcp endpoint on {iface}: {e}")


class Ilnp(Scheme):
    """ILNPv6: ilnpd on the CN and the MN, each the other's static peer (its NID and the
    locators it has at t = 0), nonces seeded by the run; the flow uses identifier addresses."""
    handoff = ""

    def __init__(self, run, nodes: dict[str, Node]):
        super().__init__(run, nodes)
        self.daemons: dict[str, Ilnpd] = {}
        self.monitor: subprocess.Popen | None = None

    @property
    def mn_nid(self) -> str | None:
        return self.ex.nid(self.ex.mn)

    def setup(self) -> tuple[str, str]:
        ex = self.ex
        self.run.step = "start ilnpd on CN and MN"
        for host, other in ((ex.cn, ex.mn), (ex.mn, ex.cn)):
            peers = [Peer(other, ex.nid(other), [(l, 10) for l in ex.initial_l64s(other)])]
            self.daemons[host] = Ilnpd(self.nodes[host], [i for i, _ in ex.host_ifaces(host)], nid=ex.nid(host),
                                       peers=peers, extra={"handoff": self.handoff, "rng_seed": self.run.seed,
                                                           "log_level": "info"}).start()
        return self.daemons[ex.cn].identifier_address(), self.daemons[ex.mn].identifier_address()

    def server_bind(self, dst: str) -> list[str]:
        """The server binds the identifier address (other schemes any address, so that MPTCP
        can add subflows towards the MN's new addresses)."""
        return ["-B", dst]

    def start(self) -> None:
        self.monitor = self.mn.spawn(binary("ilnpctl"), "-s", self.daemons[self.ex.mn].socket, "--json", "monitor",
                                     stdout=open(self.run.rdir / "mn-events.jsonl", "w"))

    def counters(self) -> dict:
        return {host: dm.stats() for host, dm in self.daemons.items()}

    def stop(self) -> None:
        if self.monitor is not None:
            stop_process(self.monitor)


class IlnpHard(Ilnp):
    name, handoff = "ilnp-hard", "hard"


class IlnpSoft(Ilnp):
    name, handoff = "ilnp-soft", "soft"


BY_NAME: dict[str, type[Scheme]] = {c.name: c for c in (IlnpHard, IlnpSoft, Plain, Mptcp)}
assert set(BY_NAME) == set(SCHEMES), "a scheme named in experiment files has no class (or the reverse)"
