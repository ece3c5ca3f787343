"""Experiment files: topology, timeline, traffic and the cells to run, in TOML; and the
generic network they describe (nodes, links, routes, radvd, addresses), built in a `Testbed`.
What happens to it over a run (timeline, moves, their paths, DAD) is `mobility_model.py`.

`load(path)` reads and checks a whole file before anything is created: an unknown
key, a link to a missing node, an address that does not parse or a timeline out of
order is a `SpecError` naming the file, the item and (where the key is written
in the file) its line. `build(bed, topo, move)` then creates the network in a
`Testbed`. The shipped experiments live in `experiments/` beside this file;
`resolve("seed000-tcp")` finds them by name.

Format (see experiments/seed000-tcp.toml for a complete file):

    base = "other.toml"          # optional: start from another file, replace its top-level tables
    [experiment] name, title, duration_s, runs, cn, mn, schemes = ["ilnp-hard", "ilnp-soft", "ilnp-soft-dns", "plain", "mptcp", "mptcp-client"]
    [quick] duration_s, runs, timeline = "scale"|"cut"   # what --quick runs: the timeline scaled to the
                                 # shorter flow (default), or kept as written with the events after its end left out
    [traffic] kind = "tcp"|"udp", window, cc = [...], probe_pps, loads = [{name, rate, size}],
              bidir (iperf3 --bidir: the same flow MN -> CN too; UDP only)
    [[node]] name, router
    [[link]] name, a = "node:iface", b = "node:iface", a_addr, b_addr, delay_ms, loss_pct, rate_mbit, mtu, up,
             jitter_ms, jitter_dist ("uniform"|"normal"|"pareto"|"paretonormal"), jitter_order ("fifo"|"reorder")
    [[route]] node, dst ("default" or prefix), via
    [[radvd]] node, iface, prefix, pref ("low"|"medium"|"high"), min_ra, max_ra, valid, preferred
    [[event]], [move.NAME]       # the timeline and the moves: mobility_model.py's doc

Link delay, jitter and loss apply in both directions. Jitter is the standard deviation of
the one-way delay, drawn per frame from `jitter_dist` (mean 0; ilnp-delayline's line.rs
says how each is shaped); `jitter_order` "fifo" (default) keeps frames in order, "reorder"
lets each keep its own draw, as netem does.
"""

from __future__ import annotations

import ipaddress
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .addr import CN_NID, MN_NID, l64, lab_nid
from .links import LINK_PARAMS, LinkSpec
from .mobility_model import DAD_MODES, EventSpec, Moves, dad_sysctls, parse_events, parse_moves  # noqa: F401 (DAD_MODES: cli)
from .services import nic_segmentation, radvd, warm_neighbours
from .testbed import Node, Testbed

EXPERIMENTS = Path(__file__).resolve().parent / "experiments"
SCHEMES = ("ilnp-hard", "ilnp-soft", "ilnp-soft-dns", "plain", "mptcp", "mptcp-client", "mipv6", "mipv6-ro")
IFNAME = re.compile(r"^[A-Za-z0-9_.-]{1,15}$")
NODENAME = re.compile(r"^[a-z][a-z0-9]{0,7}$")


class SpecError(ValueError):
    """A bad experiment file; the message names the file, the item and the key."""


@dataclass(frozen=True)
class RadvdSpec:
    node: str
    iface: str
    prefix: str
    pref: str = "medium"
    min_ra: float = 3
    max_ra: float = 4
    valid: int = 30
    preferred: int = 20


@dataclass(frozen=True)
class Load:
    name: str
    rate: str | None = None  # iperf3 -b
    size: int | None = None  # iperf3 -l


@dataclass
class Experiment(Moves):
    """A checked experiment file: the network (nodes, links, routes, radvd), the roles, schemes
    and traffic, and the mobility model (`Moves`: the timeline, the moves, their paths)."""
    path: Path
    name: str
    title: str
    duration_s: float
    runs: int
    quick_duration_s: float
    quick_runs: int
    cn: str
    mn: str
    schemes: list[str]
    kind: str
    window: str | None
    ccs: list[str]
    probe_pps: int
    loads: list[Load]
    nodes: dict[str, bool]  # name -> router
    links: list[LinkSpec]
    routes: list[tuple[str, str, str]]
    radvd: list[RadvdSpec]
    events: list[EventSpec]
    moves: dict[str, dict[str, dict]] = field(default_factory=dict)
    move_events: dict[str, list[EventSpec]] = field(default_factory=dict)  # a move's own timeline
    # per move: ilnpd configuration keys for the ILNP schemes ({"lu_timer": "fixed-1s"})
    move_daemon: dict[str, dict] = field(default_factory=dict)
    moves_only_if_named: set[str] = field(default_factory=set)  # [move] only_if_named = true
    bidir: bool = False
    quick_timeline: str = "scale"
    # run-time knobs (`ilnp-lab run --dad/--dad-transmits/--assoc-delay`), not file keys:
    # Duplicate Address Detection on the hosts' SLAAC interfaces ("optimistic": RFC 4429,
    # the address is usable at once; "standard": tentative for dad_transmits x RetransTimer;
    # "off") and the delay before the MN's link to a joined network comes up
    dad: str = "optimistic"
    dad_transmits: int = 1
    assoc_delay_s: float = 0.0
    # `--sysctl NODE:KEY=VALUE`: set in that node's namespace after the network is built (a
    # diagnosis, e.g. cn:net.ipv4.tcp_frto=0; only the testbed's namespaces, never the host's)
    sysctls: list[tuple[str, str, str]] = field(default_factory=list)

    def host_ifaces(self, node: str) -> list[tuple[str, LinkSpec]]:
        out = []
        for l in self.links:
            if l.a == node:
                out.append((l.a_if, l))
            if l.b == node:
                out.append((l.b_if, l))
        return out

    def nid(self, host: str) -> str:
        """The NID ilnpd uses on `host` in a run: the CN's and MN's as in the tests' fixtures."""
        return {self.cn: CN_NID, self.mn: MN_NID}.get(host) or lab_nid(0x10 + sorted(self.nodes).index(host))

    def initial_prefixes(self, host: str) -> list[tuple[str, str]]:
        """(iface, /64) of the host's networks that are up at t = 0: static or advertised."""
        out = []
        for iface, link in self.host_ifaces(host):
            if not link.up:
                continue
            addr = link.a_addr if (link.a, link.a_if) == (host, iface) else link.b_addr
            ra = self.radvd_facing(host, iface)
            if addr:
                out.append((iface, str(ipaddress.IPv6Interface(addr).network)))
            elif ra:
                out.append((iface, ra.prefix))
        return out

    def initial_l64s(self, host: str) -> list[str]:
        """The L64s of `initial_prefixes(host)`: the locators a static peer entry lists."""
        return [l64(p) for _, p in self.initial_prefixes(host)]

    def radvd_facing(self, node: str, iface: str) -> RadvdSpec | None:
        """The radvd advertising onto the link behind `node:iface`, if any."""
        for l in self.links:
            far = (l.b, l.b_if) if (l.a, l.a_if) == (node, iface) else (l.a, l.a_if) if (l.b, l.b_if) == (node, iface) else None
            if far:
                for r in self.radvd:
                    if (r.node, r.iface) == far:
                        return r
        return None


# ---------------------------------------------------------------- loading

def resolve(name_or_path: str) -> Path:
    p = Path(name_or_path)
    if p.suffix == ".toml" or p.exists():
        if not p.exists():
            raise SpecError(f"{p}: no such file")
        return p
    q = EXPERIMENTS / f"{name_or_path}.toml"
    if not q.exists():
        known = ", ".join(sorted(x.stem for x in EXPERIMENTS.glob("*.toml")))
        raise SpecError(f"no experiment named {name_or_path!r} (shipped: {known}; or give a .toml path)")
    return q


class _Ctx:
    def __init__(self, path: Path, text: str):
        self.path, self.lines = path, text.splitlines()

    def line_of(self, key: str) -> str:
        pat = re.compile(rf"^\s*{re.escape(key)}\s*=|[{{,]\s*{re.escape(key)}\s*=")
        for i, line in enumerate(self.lines, 1):
            if pat.search(line.split("#", 1)[0]):
                return f":{i}"
        return ""

    def err(self, where: str, msg: str, key: str | None = None) -> SpecError:
        return SpecError(f"{self.path}{self.line_of(key) if key else ''}: {where}: {msg}")

    def keys(self, where: str, table: dict, allowed: set[str], required: set[str] = frozenset()) -> None:
        if not isinstance(table, dict):
            raise self.err(where, "must be a table")
        for k in table:
            if k not in allowed:
                raise self.err(where, f"unknown key {k!r} (allowed: {', '.join(sorted(allowed))})", k)
        for k in required:
            if k not in table:
                raise self.err(where, f"missing key {k!r}")

    def num(self, where: str, table: dict, key: str, default, lo: float = 0, hi: float = float("inf"), integer=False):
        v = table.get(key, default)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and not isinstance(v, int)):
            raise self.err(where, f"{key} = {v!r} is not a{'n integer' if integer else ' number'}", key)
        if not lo <= v <= hi:
            raise self.err(where, f"{key} = {v!r} is out of range [{lo}, {hi}]", key)
        return v

    def string(self, where: str, table: dict, key: str, default=None, choices=None) -> str | None:
        v = table.get(key, default)
        if v is not None and not isinstance(v, str):
            raise self.err(where, f"{key} = {v!r} is not a string", key)
        if choices and v not in choices:
            raise self.err(where, f"{key} = {v!r} is not one of {', '.join(choices)}", key)
        return v


def _read(path: Path, seen: tuple[Path, ...] = ()) -> tuple[dict, str]:
    try:
        text = path.read_text()
        doc = tomllib.loads(text)
    except OSError as e:
        raise SpecError(f"{path}: {e.strerror}") from e
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{path}: {e}") from e
    base = doc.pop("base", None)
    if base is None:
        return doc, text
    if not isinstance(base, str):
        raise SpecError(f"{path}: base = {base!r} is not a file name")
    bpath = (path.parent / base).resolve()
    if bpath in seen:
        raise SpecError(f"{path}: base {base!r} includes itself")
    merged, btext = _read(bpath, seen + (path.resolve(),))
    merged.update(doc)  # top-level tables of this file replace the base's
    return merged, text + "\n" + btext


JITTER_DISTS = ("uniform", "normal", "pareto", "paretonormal")
JITTER_ORDERS = ("fifo", "reorder")


def load(name_or_path: str | Path) -> Experiment:
    """Reads and checks a whole experiment file (see the module doc). The tables are checked
    in a fixed order, so a file with several mistakes always reports the same first one."""
    path = resolve(str(name_or_path))
    doc, text = _read(path)
    c = _Ctx(path, text)
    c.keys("top level", doc, {"experiment", "quick", "traffic", "node", "link", "route", "radvd", "event", "move"},
           {"experiment", "node", "link", "traffic"})
    ex = _experiment(c, doc["experiment"])
    quick = doc.get("quick", {})
    c.keys("[quick]", quick, {"duration_s", "runs", "timeline"})
    nodes = _nodes(c, doc["node"])
    links = _links(c, doc["link"], nodes)
    ifaces = {e for l in links for e in ((l.a, l.a_if), (l.b, l.b_if))}
    routes = _routes(c, doc.get("route", []), nodes)
    radvds = _radvds(c, doc.get("radvd", []), ifaces)
    events = parse_events(c, doc.get("event", []), ifaces, ex["duration"])
    moves, move_events, move_daemon, named_only = parse_moves(c, doc.get("move") or {"default": {}}, links, ifaces,
                                                              ex["duration"], _link_params)
    tr = doc["traffic"]
    kind, loads, ccs = _traffic(c, tr)
    for name in ("mptcp", "mptcp-client"):
        if name in ex["schemes"] and kind != "tcp":
            raise c.err("[experiment]", f"scheme {name!r} needs [traffic] kind = \"tcp\"", "schemes")
    for role in ("cn", "mn"):
        if ex[role] not in nodes or nodes[ex[role]]:
            raise c.err("[experiment]", f"{role} = {ex[role]!r} is not a host node", role)
    bidir = tr.get("bidir", False)
    if not isinstance(bidir, bool) or (bidir and kind != "udp"):
        raise c.err("[traffic]", f"bidir = {bidir!r}: true or false, and only with kind = \"udp\"", "bidir")
    duration = ex["duration"]
    return Experiment(
        path=path, name=ex["name"], title=ex["title"], duration_s=float(duration), runs=ex["runs"],
        quick_duration_s=float(c.num("[quick]", quick, "duration_s", min(duration, 12), 2, duration)),
        quick_runs=c.num("[quick]", quick, "runs", 1, 1, 1000, integer=True),
        cn=ex["cn"], mn=ex["mn"], schemes=ex["schemes"], kind=kind, window=c.string("[traffic]", tr, "window"),
        ccs=ccs, probe_pps=c.num("[traffic]", tr, "probe_pps", 100, 0, 10_000, integer=True), loads=loads,
        nodes=nodes, links=links, routes=routes, radvd=radvds, events=events, moves=moves,
        move_events=move_events, move_daemon=move_daemon, moves_only_if_named=named_only,
        bidir=bidir, quick_timeline=c.string("[quick]", quick, "timeline", "scale", ("scale", "cut")))


def _experiment(c: _Ctx, ex: dict) -> dict:
    """[experiment]: name, title, duration, runs, roles and the schemes."""
    c.keys("[experiment]", ex, {"name", "title", "plugin", "duration_s", "runs", "cn", "mn", "schemes"}, {"name", "cn", "mn"})
    duration = c.num("[experiment]", ex, "duration_s", 30, 2, 3600)
    runs = c.num("[experiment]", ex, "runs", 10, 1, 1000, integer=True)
    schemes = ex.get("schemes", list(SCHEMES))
    if not isinstance(schemes, list) or not schemes:
        raise c.err("[experiment]", "schemes must be a non-empty list", "schemes")
    for s in schemes:
        if s not in SCHEMES:
            raise c.err("[experiment]", f"unknown scheme {s!r} (known: {', '.join(SCHEMES)})", "schemes")
    return {"name": ex["name"], "title": ex.get("title", ex["name"]), "duration": duration, "runs": runs,
            "cn": ex["cn"], "mn": ex["mn"], "schemes": list(schemes)}


def _nodes(c: _Ctx, items: list) -> dict[str, bool]:
    """[[node]]: name -> router."""
    nodes: dict[str, bool] = {}
    for i, n in enumerate(items, 1):
        where = f"[[node]] #{i}"
        c.keys(where, n, {"name", "router"}, {"name"})
        name = c.string(where, n, "name")
        if not NODENAME.match(name):
            raise c.err(where, f"node name {name!r}: lowercase letter then up to 7 letters/digits", "name")
        if name in nodes:
            raise c.err(where, f"node {name!r} defined twice", "name")
        r = n.get("router", False)
        if not isinstance(r, bool):
            raise c.err(f"[[node]] {name!r}", f"router = {r!r} is not true/false", "router")
        nodes[name] = r
    return nodes


def _endpoint(c: _Ctx, where: str, spec, key: str, nodes: dict[str, bool]) -> tuple[str, str]:
    """A link end, "node:iface"."""
    if not isinstance(spec, str) or spec.count(":") != 1:
        raise c.err(where, f"{key} = {spec!r}: write \"node:iface\"", key)
    node, iface = spec.split(":")
    if node not in nodes:
        raise c.err(where, f"{key} = {spec!r}: no node named {node!r}", key)
    if not IFNAME.match(iface):
        raise c.err(where, f"{key} = {spec!r}: bad interface name {iface!r}", key)
    return node, iface


def _cidr(c: _Ctx, where: str, v, key: str) -> str | None:
    """An IPv6 address or prefix with its prefix length, "2001:db8:a::c/64"."""
    if v is None:
        return None
    try:
        ipaddress.IPv6Interface(v)
    except (ValueError, TypeError):
        raise c.err(where, f"{key} = {v!r} is not an IPv6 address/prefix-length", key) from None
    if "/" not in v:
        raise c.err(where, f"{key} = {v!r} needs a prefix length", key)
    return v


def _link_params(c: _Ctx, where: str, t: dict) -> dict:
    return {"delay_ms": c.num(where, t, "delay_ms", 0.0, 0, 10_000),
            "loss_pct": c.num(where, t, "loss_pct", 0.0, 0, 100),
            "rate_mbit": c.num(where, t, "rate_mbit", None, 0.001, 100_000),
            "jitter_ms": c.num(where, t, "jitter_ms", 0.0, 0, 10_000),
            "jitter_dist": c.string(where, t, "jitter_dist", "normal", JITTER_DISTS),
            "jitter_order": c.string(where, t, "jitter_order", "fifo", JITTER_ORDERS)}


def _links(c: _Ctx, items: list, nodes: dict[str, bool]) -> list[LinkSpec]:
    """[[link]]: two ends on existing nodes, each interface on one link only."""
    links: list[LinkSpec] = []
    ifaces: set[tuple[str, str]] = set()
    for i, l in enumerate(items, 1):
        name = l.get("name") if isinstance(l, dict) else None
        where = f"[[link]] {name!r}" if isinstance(name, str) else f"[[link]] #{i}"
        c.keys(where, l, {"name", "a", "b", "a_addr", "b_addr", "mtu", "up"} | LINK_PARAMS, {"name", "a", "b"})
        name = c.string(where, l, "name")
        if any(x.name == name for x in links):
            raise c.err(where, "link name used twice", "name")
        a, a_if = _endpoint(c, where, l["a"], "a", nodes)
        b, b_if = _endpoint(c, where, l["b"], "b", nodes)
        for e in ((a, a_if), (b, b_if)):
            if e in ifaces:
                raise c.err(where, f"interface {e[0]}:{e[1]} is on two links")
            ifaces.add(e)
        up = l.get("up", True)
        if not isinstance(up, bool):
            raise c.err(where, f"up = {up!r} is not true/false", "up")
        links.append(LinkSpec(name, a, a_if, b, b_if, _cidr(c, where, l.get("a_addr"), "a_addr"),
                              _cidr(c, where, l.get("b_addr"), "b_addr"),
                              mtu=c.num(where, l, "mtu", None, 1280, 65535, True), up=up, **_link_params(c, where, l)))
    return links


def _routes(c: _Ctx, items: list, nodes: dict[str, bool]) -> list[tuple[str, str, str]]:
    """[[route]]: (node, dst, via)."""
    routes = []
    for i, r in enumerate(items, 1):
        where = f"[[route]] #{i}"
        c.keys(where, r, {"node", "dst", "via"}, {"node", "dst", "via"})
        if r["node"] not in nodes:
            raise c.err(where, f"node = {r['node']!r}: no such node", "node")
        if r["dst"] != "default":
            _cidr(c, where, r["dst"], "dst")
        try:
            ipaddress.IPv6Address(r["via"])
        except (ValueError, TypeError):
            raise c.err(where, f"via = {r['via']!r} is not an IPv6 address", "via") from None
        routes.append((r["node"], r["dst"], r["via"]))
    return routes


def _radvds(c: _Ctx, items: list, ifaces: set[tuple[str, str]]) -> list[RadvdSpec]:
    """[[radvd]]: a /64 advertised on a link's interface."""
    radvds = []
    for i, r in enumerate(items, 1):
        where = f"[[radvd]] #{i}"
        c.keys(where, r, {"node", "iface", "prefix", "pref", "min_ra", "max_ra", "valid", "preferred"},
               {"node", "iface", "prefix"})
        if (r["node"], r["iface"]) not in ifaces:
            raise c.err(where, f"{r['node']}:{r['iface']} is not an interface of any link", "iface")
        net = _cidr(c, where, r["prefix"], "prefix")
        if ipaddress.IPv6Network(net, strict=False).prefixlen != 64:
            raise c.err(where, f"prefix = {net!r}: SLAAC needs a /64", "prefix")
        radvds.append(RadvdSpec(r["node"], r["iface"], net, c.string(where, r, "pref", "medium", ("low", "medium", "high")),
                                c.num(where, r, "min_ra", 3, 0.05, 1800), c.num(where, r, "max_ra", 4, 0.07, 1800),
                                c.num(where, r, "valid", 30, 1, 2**32 - 1, True),
                                c.num(where, r, "preferred", 20, 0, 2**32 - 1, True)))
    return radvds


def _traffic(c: _Ctx, tr: dict) -> tuple[str, list[Load], list[str]]:
    """[traffic]: kind, loads and congestion controls (window and probe rate are read by `load`)."""
    c.keys("[traffic]", tr, {"kind", "window", "cc", "probe_pps", "loads", "bidir"}, {"kind"})
    kind = c.string("[traffic]", tr, "kind", choices=("tcp", "udp"))
    loads = []
    for i, ld in enumerate(tr.get("loads", [{"name": "default"}]), 1):
        c.keys(f"[traffic] loads #{i}", ld, {"name", "rate", "size"}, {"name"})
        loads.append(Load(ld["name"], ld.get("rate"), c.num(f"[traffic] loads #{i}", ld, "size", None, 16, 65000, True)))
    ccs = tr.get("cc", ["cubic"])
    if not isinstance(ccs, list) or not all(isinstance(x, str) for x in ccs):
        raise c.err("[traffic]", "cc must be a list of congestion control names", "cc")
    return kind, loads, ccs


# ---------------------------------------------------------------- building

def parse_sysctl(ex: Experiment, spec: str) -> tuple[str, str, str]:
    """`NODE:KEY=VALUE` (`ilnp-lab run --sysctl`) -> (node, key, value), checked against the
    experiment's nodes and this kernel's network-namespace sysctls (net.*, present in /proc/sys)."""
    node, sep, kv = spec.partition(":")
    key, eq, value = kv.partition("=")
    key, value = key.strip(), value.strip()
    if not sep or not eq or not node or not key or not value:
        raise ValueError(f"--sysctl {spec!r}: expected NODE:KEY=VALUE, e.g. cn:net.ipv4.tcp_frto=0")
    if node not in ex.nodes:
        raise ValueError(f"--sysctl {spec!r}: no node {node!r} in {ex.name} (nodes: {', '.join(ex.nodes)})")
    if not key.startswith("net.") or not re.fullmatch(r"[A-Za-z0-9_.\-]+", key) or ".." in key:
        raise ValueError(f"--sysctl {spec!r}: {key!r} is not a network-namespace sysctl (net.*)")
    parts = key.split(".")
    if len(parts) >= 5 and parts[2] in ("conf", "neigh"):
        parts[3] = "default"  # a per-interface key: the interface is the testbed's, check the template
    if not Path("/proc/sys", *parts).is_file():
        raise ValueError(f"--sysctl {spec!r}: this kernel has no {key}")
    return node, key, value


def build(bed: Testbed, ex: Experiment, move: str, seed: int = 1, overrides: dict[str, dict] | None = None,
          start_radvd: bool = True, home_agents: set[tuple[str, str]] = frozenset()) -> dict[str, Node]:
    """Creates the experiment's network for `move` in `bed`; returns {name: Node}.
    `overrides`: per-link parameters on top of the move's ({"r1-r3": {"delay_ms": 50}}).
    `home_agents`: (router, interface) whose radvd advertises a Mobile IPv6 home agent.
    Routers know each other's link-layer addresses before it returns."""
    nodes = {name: bed.add_node(name, router=r) for name, r in ex.nodes.items()}
    for i, l in enumerate(ex.links_for(move, overrides)):
        a, b = nodes[l.a], nodes[l.b]
        if l.delay_ms or l.loss_pct or l.jitter_ms:
            bed.delay_link(a, l.a_if, b, l.b_if, l.delay_ms, l.loss_pct, seed=seed * 100 + i, rate_mbit=l.rate_mbit,
                           jitter_ms=l.jitter_ms, jitter_dist=l.jitter_dist, jitter_order=l.jitter_order)
        else:
            bed.link(a, l.a_if, b, l.b_if, mtu=l.mtu, rate_mbit=l.rate_mbit)
        for n, iface, addr in ((a, l.a_if, l.a_addr), (b, l.b_if, l.b_addr)):
            if addr:
                n.add_addr(iface, addr)
    for node, dst, via in ex.routes:
        nodes[node].add_route(dst, via)
    for l in ex.links:
        if ex.nodes[l.a] and ex.nodes[l.b] and l.b_addr:
            warm_neighbours(nodes[l.a], nodes[l.b], l.b_addr.split("/")[0])
    for name, router in ex.nodes.items():
        if router:
            continue
        slaac = []
        for iface, _ in ex.host_ifaces(name):
            nic_segmentation(nodes[name], iface)
            if ex.radvd_facing(name, iface):
                slaac += [f"net.ipv6.conf.{iface}.{k}={v}" for k, v in dad_sysctls(ex.dad, ex.dad_transmits)]
        if slaac:
            nodes[name].sysctl(*slaac)
    for node, key, value in ex.sysctls:
        nodes[node].sysctl(f"{key}={value}")
    for r in ex.radvd if start_radvd else ():
        radvd(nodes[r.node], r.iface, r.prefix, r.min_ra, r.max_ra, r.pref, r.valid, r.preferred,
              home_agent=(r.node, r.iface) in home_agents)
    for l in ex.links:
        if not l.up:
            # down at the end the timeline later brings up (the MN's interface), else at b
            ends = [(n, i) for n, i in ((l.a, l.a_if), (l.b, l.b_if)) if any((e.node, e.iface) == (n, i) for e in ex.all_events())]
            for n, i in ends or [(l.b, l.b_if)]:
                nodes[n].set_link(i, False)
    return nodes
