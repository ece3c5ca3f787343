"""The schemes a run compares, one class each, with the hooks `mobility.Run` calls in order:

    setup(nodes)  after SLAAC: what the scheme needs before traffic; returns (src, dst),
                  the addresses the flow and the probes use
    start()       once captures run: the scheme's own recorders (ilnpd's event monitor)
    on_event(e)   after each timeline change (MPTCP: the MN's endpoints follow its addresses)
    counters()    after the flow: the scheme's counters for run.json (ilnpd's stats)
    stop()        then: stop what `start` began

`wrap` prefixes the iperf3 commands (mptcpize), `server_bind` binds the server, `reverse`
swaps the iperf3 roles (the CN is the server, the MN the client with `-R`: the data still flows
CN -> MN), `note` states what the scheme configures (mobility.cells adds it to the run's notes),
`mn_nid` marks runs whose captures carry ILNPv6 (LU handshakes, stale-locator drops).
`unavailable()` says why this kernel cannot run the scheme (None: it can), `home_agents(ex)` the
(router, interface) pairs whose radvd advertises a home agent (Mobile IPv6).
`BY_NAME` holds one class per name in topology.SCHEMES.
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
import threading
import time
from pathlib import Path

from .addr import l64
from .bind import ZONE, Bind, Host, resolv_conf
from .daemon import Ilnpd, Peer
from .fixtures import DNS_ADDR, dns_server
from .mipv6 import kernel as mip6_kernel
from .mipv6 import phases as mip6_phases
from .mipv6 import roles as mip6_roles
from .testbed import Node, binary, stop_process, wait_for
from .topology import SCHEMES


class Scheme:
    name = ""
    wrap: list[str] = []
    reverse = False  # True: iperf3 server on the CN, client on the MN with -R (a download)
    note = ""  # what the scheme configures, for meta.json's and report.md's notes

    def __init__(self, run, nodes: dict[str, Node]):
        self.run, self.ex, self.nodes = run, run.ex, nodes
        self.cn, self.mn = nodes[run.ex.cn], nodes[run.ex.mn]

    @property
    def mn_nid(self) -> str | None:
        return None

    @classmethod
    def unavailable(cls) -> str | None:
        return None

    @classmethod
    def home_agents(cls, ex) -> set[tuple[str, str]]:
        return set()

    def setup(self) -> tuple[str, str]:
        raise NotImplementedError

    def server_bind(self, dst: str) -> list[str]:
        """iperf3 -s binds any address, by default."""
        return []

    def start(self) -> None:
        pass

    def on_event(self, e) -> None:
        pass

    def targets(self, src: str, dst: str) -> tuple[str, str]:
        """What the applications are given to reach the CN and the MN: the addresses, by default."""
        return src, dst

    def counters(self) -> dict:
        return {}

    def broken(self) -> str | None:
        """After the flow's end: why the session cannot finish any more (so the run stops
        waiting for it), or None: the run waits up to 15 s for the applications to end."""
        return None

    def extra(self) -> dict | None:
        """After the flow: what else the scheme recorded (run.json and result.json `extra`)."""
        return None

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
        self.bound = dst
        return src, dst

    def broken(self) -> str | None:
        """A plain socket is bound to the MN's first address: once the kernel has removed it
        (the MN left that network), nothing of the session can arrive or leave."""
        if self.bound not in self.mn.global_addrs():
            return f"the MN's address {self.bound} is gone"
        return None


class Mptcp(Plain):
    """Kernel MPTCP (iperf3 under mptcpize, in-kernel path manager) configured as mptcp.dev's
    path-manager guide and ip-mptcp(8) recommend, with the MN doing what its connection manager
    (NetworkManager, mptcpd) does on address changes. `note` states it in meta.json and report.md."""
    name = "mptcp"
    wrap = ["mptcpize", "run"]
    LIMITS = ("subflows", "8", "add_addr_accepted", "8")
    MN_FLAG = "signal"  # the MN's endpoint flag: the server announces its addresses
    note = ("MPTCP configuration (in-kernel path manager, mptcp.dev/pm.html, ip-mptcp(8)): "
              "both hosts `ip mptcp limits set subflows 8 add_addr_accepted 8`; "
              "the CN is the iperf3 client (mptcp.dev: the client creates subflows): `ip mptcp endpoint add ADDR dev IF "
              "subflow fullmesh` for its address, so it opens a subflow to every address the MN announces; "
              "the MN is the server (mptcp.dev: the server announces addresses): `ip mptcp endpoint add ADDR dev IF "
              "id N signal` for every address, the first included (the kernel announces only the later ones; the "
              "first one's endpoint is what lets its removal close the initial subflow), plus a source route per "
              "network (RFC 8678); "
              "on the timeline, as NetworkManager/mptcpd do on address changes: the MN's interface goes down -> "
              "`ip mptcp endpoint delete id N` at once (the kernel sends REMOVE_ADDR and closes that address's "
              "subflows instead of waiting for an RTO); an interface comes up -> the same `signal` endpoint as soon "
              "as SLAAC gives it an address")

    def broken(self) -> str | None:
        return None  # MPTCP carries the session on another subflow

    def setup(self) -> tuple[str, str]:
        src, dst = super().setup()
        ex = self.ex
        self.run.step = "MPTCP limits, endpoints and the MN's per-network routing"
        self.ids = {iface: k + 1 for k, (iface, _) in enumerate(ex.host_ifaces(ex.mn))}  # MN endpoint ids
        self.lock = threading.Lock()
        for n in (self.cn, self.mn):
            n.ip("mptcp", "limits", "set", *self.LIMITS)
        self._cn_endpoints()
        for k, (iface, prefix) in enumerate(ex.initial_prefixes(ex.mn)):
            self.mn.source_route(iface, prefix, 100 + k)
            for addr in self._in(self.mn, iface, prefix):
                self._signal(iface, addr)
        return src, dst

    def _cn_endpoints(self) -> None:
        """The CN is the client: it opens a subflow to every address the MN announces."""
        ex = self.ex
        for iface, prefix in ex.initial_prefixes(ex.cn):
            for addr in self._in(self.cn, iface, prefix):
                self.cn.ip("mptcp", "endpoint", "add", addr, "dev", iface, "subflow", "fullmesh")

    @staticmethod
    def _in(node: Node, iface: str, prefix: str) -> list[str]:
        net = ipaddress.IPv6Network(prefix)
        return [a for a in node.global_addrs(iface) if ipaddress.IPv6Address(a) in net]

    def _signal(self, iface: str, addr: str) -> None:
        with self.lock:
            self.mn.ip("mptcp", "endpoint", "add", addr, "dev", iface, "id", str(self.ids[iface]), self.MN_FLAG)

    def on_event(self, e) -> None:
        if e.node != self.ex.mn:
            return
        if e.action == "up":
            threading.Thread(target=self._joined, args=(e.iface,), daemon=True).start()
        else:
            self._left(e.iface)

    def _joined(self, iface: str) -> None:
        """A new network: route its source address out of its own interface, and add its endpoint
        (signal: announce it; subflow: open a subflow from it)."""
        mn = self.mn
        try:
            addr = wait_for(lambda: mn.global_addrs(iface), timeout=10, interval=0.005, what=f"address on {iface}")[0]
            mn.source_route(iface, f"{addr}/64", 200 + mn.index(iface))
            self._signal(iface, addr)
        except Exception as e:  # recorded, the run goes on: the result shows what MPTCP did
            self.run.notes.append(f"mptcp endpoint on {iface}: {e}")

    def _left(self, iface: str) -> None:
        """A network lost: its endpoint goes, so the kernel signals REMOVE_ADDR to the peer."""
        with self.lock:
            p = self.mn.ip("mptcp", "endpoint", "delete", "id", str(self.ids[iface]), check=False)
        if p.returncode != 0:
            self.run.notes.append(f"mptcp endpoint delete on {iface}: {p.stderr.strip()}")


class MptcpClient(Mptcp):
    """The variant a mobile user most likely runs: the MN is the MPTCP client (a phone
    downloading; iperf3 -R, so the data still flows CN -> MN), and, as mptcp.dev recommends for
    a client, its endpoints are `subflow`: the MN itself opens a subflow from each of its
    addresses, one more as soon as a new address appears, and closes one when its address goes.
    The CN is a plain server: limits only. This is what a phone's connection manager does
    (Android/iOS MPTCP, NetworkManager's default `subflow` endpoints) and it does not depend on
    the server announcing anything."""
    name = "mptcp-client"
    reverse = True
    MN_FLAG = "subflow"
    note = ("MPTCP client variant `mptcp-client` (in-kernel path manager, mptcp.dev/pm.html, ip-mptcp(8)): "
            "both hosts `ip mptcp limits set subflows 8 add_addr_accepted 8`; "
            "the MN is the iperf3 client with -R (a download: the data flows CN -> MN; mptcp.dev: the client "
            "creates subflows): `ip mptcp endpoint add ADDR dev IF id N subflow` for every address, the first "
            "included (the kernel opens no second subflow from the initial one's address; its endpoint is what "
            "lets its removal close the initial subflow), plus a source route per network (RFC 8678); the CN is "
            "the server with no endpoint (one address, nothing to announce); "
            "on the timeline, as NetworkManager/mptcpd do on address changes: the MN's interface goes down -> "
            "`ip mptcp endpoint delete id N` at once (the kernel closes that address's subflows and sends "
            "REMOVE_ADDR instead of waiting for an RTO); an interface comes up -> the same `subflow` endpoint as "
            "soon as SLAAC gives it an address, and the kernel opens a subflow from it (MP_JOIN from the MN)")

    def _cn_endpoints(self) -> None:
        """The CN is the server: it has one address and announces nothing."""


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
            peers, extra = self.daemon_config(host, other)
            self.daemons[host] = Ilnpd(self.nodes[host], [i for i, _ in ex.host_ifaces(host)], nid=ex.nid(host),
                                       peers=peers, extra={"handoff": self.handoff, "rng_seed": self.run.seed,
                                                           "log_level": "info",
                                                           **ex.move_daemon.get(self.run.cell.move, {}),
                                                           **extra}).start()
        return self.daemons[ex.cn].identifier_address(), self.daemons[ex.mn].identifier_address()

    def daemon_config(self, host: str, other: str) -> tuple[list[Peer], dict]:
        """`host`'s static peers and extra config keys: the other end as a peer entry (its NID
        and the locators it has at t = 0)."""
        ex = self.ex
        return [Peer(other, ex.nid(other), [(l, 10) for l in ex.initial_l64s(other)])], {}

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


class IlnpSoftDns(IlnpSoft):
    """ILNP soft handoff where the applications use names (issue #13, RFC 6742): a BIND 9 node
    `ns` on its own link behind the CN's first-hop router (R1 in seed 000; 2001:db8:53::53)
    serves the zone `lab.example` with the CN's and MN's NID and L64 records at t = 0 (from the
    topology); both ilnpds run the resolver proxy (the namespace's resolv.conf points at it) and
    have no peer entry; the iperf3 client on the CN connects to `mn.lab.example` and the probes
    resolve `mn.lab.example` / `cn.lab.example` by name; the MN's ilnpd sends TSIG-signed dynamic
    updates of its L64 records when its locators change. The scheme records (result.json
    `extra`) when BIND serves the MN's new locator set after each of the MN's moves (dig against
    BIND, from its own node, every 20 ms)."""
    name = "ilnp-soft-dns"
    ZONE = ZONE
    note = ("`ilnp-soft-dns`: ILNP soft handoff by name: BIND 9 on a node `ns` behind R1 on its own link "
            f"({DNS_ADDR}) serves `{ZONE}` (NID and L64 records of CN and MN at t = 0, TTL 5 s); both ilnpds run "
            "the resolver proxy and have no `[[peer]]`; iperf3 and the probes on the CN use `mn.lab.example`, the "
            "MN's probe `cn.lab.example`; the MN's ilnpd sends TSIG-signed dynamic updates (RFC 2136) of its L64s "
            "when it moves")

    def __init__(self, run, nodes: dict[str, Node]):
        super().__init__(run, nodes)
        self.bind: Bind | None = None
        self.ns: Node | None = None
        self.l64_log: list[dict] = []
        self.waiters: list[threading.Thread] = []

    def first_hop(self) -> str:
        """The router on the CN's link: the name server's link attaches to it."""
        for _, link in self.ex.host_ifaces(self.ex.cn):
            far = link.b if link.a == self.ex.cn else link.a
            if self.ex.nodes[far]:
                return far
        raise ValueError(f"{self.ex.name}: {self.ex.cn} has no router next to it for the name server")

    def setup(self) -> tuple[str, str]:
        ex = self.ex
        if "ns" in self.nodes:
            raise ValueError(f"{ex.name}: scheme {self.name} adds a node 'ns'; the topology has one already")
        self.run.step = f"start BIND on a name server node behind {self.first_hop()}"
        router = self.nodes[self.first_hop()]
        self.ns = dns_server(router.bed, router)
        hosts = [Host(h, nid=ex.nid(h), l64s=[(l, 10) for l in ex.initial_l64s(h)]) for h in (ex.cn, ex.mn)]
        self.bind = Bind(self.ns, DNS_ADDR, hosts, zone=self.ZONE, ttl=5).start()
        for h in (ex.cn, ex.mn):
            resolv_conf(self.nodes[h], "127.0.0.1")
        return super().setup()

    def daemon_config(self, host: str, other: str) -> tuple[list[Peer], dict]:
        """No peer entry; the resolver proxy on both; dynamic updates from the MN."""
        extra: dict = {"dns": {"upstream": f"[{DNS_ADDR}]:53"}}
        if host == self.ex.mn:
            extra["dns.update"] = {"zone": self.ZONE, "name": self.fqdn(host), "server": DNS_ADDR,
                                   "key_file": str(self.bind.key_file)}
        return [], extra

    def fqdn(self, host: str) -> str:
        return f"{host}.{self.ZONE}"

    def targets(self, src: str, dst: str) -> tuple[str, str]:
        """The applications use names: the CN's and the MN's."""
        return self.fqdn(self.ex.cn), self.fqdn(self.ex.mn)

    def bind_l64s(self) -> list[str]:
        """The MN's L64 records BIND serves now, as "2001:0db8:0003:0000" (dig prints them short)."""
        out = self.bind.dig(self.ns, self.fqdn(self.ex.mn), "L64", opts=("+short",))
        return sorted(":".join(g.zfill(4) for g in line.split()[1].split(":")) for line in out.splitlines()
                      if len(line.split()) == 2)

    def on_event(self, e) -> None:
        """After each of the MN's moves: when does BIND serve its new locator set?"""
        if e.node != self.ex.mn:
            return
        t = threading.Thread(target=self._watch_bind, args=(e, time.monotonic()), daemon=True)
        t.start()
        self.waiters.append(t)

    def _watch_bind(self, e, t_event: float) -> None:
        ex = self.ex
        ra = ex.radvd_facing(ex.mn, e.iface)
        want = l64(ra.prefix) if ra else None
        # joining: the new network's L64 appears; leaving: it disappears
        ok = (lambda ls: want in ls) if e.action == "up" else (lambda ls: want not in ls and bool(ls))
        rec = {"label": e.label, "action": e.action, "l64": want, "served_after_ms": None, "l64s": None}
        try:
            ls = wait_for(lambda: (lambda x: x if ok(x) else None)(self.bind_l64s()), timeout=10, interval=0.02,
                          what=f"BIND serves {ex.mn}'s locators after '{e.label}'")
            rec.update(served_after_ms=round((time.monotonic() - t_event) * 1000, 1), l64s=ls)
        except TimeoutError as err:
            rec["l64s"] = self.bind_l64s()
            self.run.notes.append(f"{self.name}: {err}")
        self.l64_log.append(rec)

    def extra(self) -> dict:
        for t in self.waiters:
            t.join(timeout=12)
        ex = self.ex
        return {"zone": self.ZONE, "name_server": {"node": "ns", "behind": self.first_hop(), "addr": DNS_ADDR},
                "targets": dict(zip(("cn", "mn"), self.targets("", ""))),
                "peer_entries": {h: "[[peer]]" in (dm.dir / "ilnpd.toml").read_text() for h, dm in self.daemons.items()},
                "peers": {h: dm.ctl("peer", "show") for h, dm in self.daemons.items()},
                "update": self.daemons[ex.mn].ctl("dns", "status")["update"],
                "bind_after_moves": sorted(self.l64_log, key=lambda r: r["label"]),
                "bind_l64s_end": self.bind_l64s()}

    def stop(self) -> None:
        super().stop()
        if self.bind is not None and self.bind.proc is not None:
            stop_process(self.bind.proc)


class Mipv6(Plain):
    """Mobile IPv6 (RFC 6275, lab/ilnp_lab/mipv6): the router advertising the MN's first
    network is its home agent (radvd with the home-agent flag there), the MN has a fixed home
    address (::100 of that prefix) and the CN and MN roles; the flow and the probes use the CN's
    address and the home address. Bidirectional tunnelling through the HA; `mipv6-ro` adds route
    optimisation (return routability, a binding at the CN). The handoff delay is the seeds'
    (the first BU -> the last BA, from the roles' events); needs CONFIG_IPV6_MIP6 and ip6_tunnel."""
    name, ro = "mipv6", False
    note = ("`mipv6`/`mipv6-ro`: the lab's own RFC 6275 implementation (lab/ilnp_lab/mipv6, no UMIP release reaches "
            "this kernel); home agent on the router advertising the MN's first network (radvd `AdvHomeAgentFlag on`, "
            "`AdvRouterAddr on`), home address ::100 of that prefix, HA DAD before the first BA (RetransTimer 1 s), "
            "no IPsec between MN and HA (as the seeds ran it); handoff = the first BU -> the last BA (the HA's; the "
            "CN's with RO), from the roles' event lines; docs/mipv6.md")

    def __init__(self, run, nodes: dict[str, Node]):
        super().__init__(run, nodes)
        self.procs: dict[str, subprocess.Popen] = {}
        self.paths: dict[str, object] = {}
        self.ha_addr = self.cn_addr = ""

    @classmethod
    def unavailable(cls) -> str | None:
        return mip6_kernel.refusal()

    @classmethod
    def home(cls, ex) -> tuple[str, str, str, str, str]:
        """(MN's home interface, home prefix, HA router, its interface, its address there)."""
        iface, prefix = ex.initial_prefixes(ex.mn)[0]
        ra = ex.radvd_facing(ex.mn, iface)
        link = next((l for _, l in ex.host_ifaces(ex.mn) if (l.a, l.a_if) == (ra.node, ra.iface)
                     or (l.b, l.b_if) == (ra.node, ra.iface)), None) if ra else None
        addr = (link.a_addr if (link.a, link.a_if) == (ra.node, ra.iface) else link.b_addr) if link else None
        if not addr:
            raise ValueError(f"{ex.name}: scheme {cls.name} needs a router advertising the MN's first network "
                             f"({prefix}) with a static address on that link: the home agent")
        return iface, prefix, ra.node, ra.iface, addr.split("/")[0]

    @classmethod
    def home_agents(cls, ex) -> set[tuple[str, str]]:
        _, _, r, rif, _ = cls.home(ex)
        return {(r, rif)}

    def setup(self) -> tuple[str, str]:
        ex = self.ex
        src, _ = super().setup()
        iface, prefix, ha_node, ha_if, self.ha_addr = self.home(ex)
        self.cn_addr, hoa = src, mip6_roles.home_address(prefix)
        self.bound = hoa  # what the MN's sockets use: the home address, which moves with the MN
        self.run.step = f"Mobile IPv6: home address {hoa}, home agent on {ha_node}, MN and CN roles"
        self.mn.add_addr(iface, f"{hoa}/64")
        env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
        cmds = {"ha": (self.nodes[ha_node], mip6_roles.ha_cmd(ha_if, self.ha_addr, prefix)),
                "cn": (self.cn, mip6_roles.cn_cmd(src)),
                "mn": (self.mn, mip6_roles.mn_cmd(iface, prefix, hoa, self.ha_addr, src, self.ro))}
        for role, (node, cmd) in cmds.items():
            self.paths[role] = self.run.rdir / f"mipv6-{role}.jsonl"
            self.procs[role] = node.spawn(*cmd, stdout=open(self.paths[role], "w"), stderr=subprocess.STDOUT, env=env)
        mip6_roles.wait_ready(self.paths, self.procs)
        self.cn.run("ping", "-6", "-c", "1", "-W", "5", hoa, check=False)  # the HA's and R's neighbour entries
        return src, hoa

    def extra(self) -> dict:
        events, other = mip6_roles.read_events(self.paths)
        cn = self.cn_addr if self.ro else None
        out = mip6_roles.summary(events, self.ha_addr, cn, self.run.t0 or 0.0)
        # every registration and return home of the run (thesis-loss's handoffs: mobility.Run.mipv6_moves)
        return out | {"role_stderr": other or None, "events": len(events), "ha": self.ha_addr, "cn": cn,
                      "moves": mip6_phases.moves(events, self.ha_addr, cn, self.run.t0 or 0.0)}

    def stop(self) -> None:
        for p in self.procs.values():
            stop_process(p)


class Mipv6Ro(Mipv6):
    name, ro = "mipv6-ro", True


BY_NAME: dict[str, type[Scheme]] = {c.name: c for c in (IlnpHard, IlnpSoft, IlnpSoftDns, Plain, Mptcp, MptcpClient,
                                                        Mipv6, Mipv6Ro)}
assert set(BY_NAME) == set(SCHEMES), "a scheme named in experiment files has no class (or the reverse)"
