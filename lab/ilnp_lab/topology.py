"""Experiment files: topology, timeline, traffic and the cells to run, in TOML.

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
    [[event]] at_s, node, iface, action ("up"|"down"), label
    [move.NAME] links = { LINK = { delay_ms, loss_pct, rate_mbit, jitter_ms, jitter_dist, jitter_order } },
                events = [{ at_s, node, iface, action, label }, ...],   # optional: this move's own
                timeline instead of the [[event]]s (seed 003's soft and hard handoffs differ only in
                the order of the MN's link changes),
                lu_timer ("rtt"|"fixed-<N>s"|"fixed-<N>ms": the ILNP schemes' ilnpd `lu_timer` in this move)

Link delay, jitter and loss apply in both directions. Jitter is the standard deviation of
the one-way delay, drawn per frame from `jitter_dist` (mean 0; ilnp-delayline's line.rs
says how each is shaped); `jitter_order` "fifo" (default) keeps frames in order, "reorder"
lets each keep its own draw, as netem does.
"""

from __future__ import annotations

import ipaddress
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from .addr import CN_NID, MN_NID, l64, lab_nid
from .services import nic_segmentation, radvd, warm_neighbours
from .testbed import Node, Testbed

EXPERIMENTS = Path(__file__).resolve().parent / "experiments"
SCHEMES = ("ilnp-hard", "ilnp-soft", "ilnp-soft-dns", "plain", "mptcp", "mptcp-client")
IFNAME = re.compile(r"^[A-Za-z0-9_.-]{1,15}$")
NODENAME = re.compile(r"^[a-z][a-z0-9]{0,7}$")


class SpecError(ValueError):
    """A bad experiment file; the message names the file, the item and the key."""


@dataclass(frozen=True)
class LinkSpec:
    name: str
    a: str
    a_if: str
    b: str
    b_if: str
    a_addr: str | None = None
    b_addr: str | None = None
    delay_ms: float = 0.0
    loss_pct: float = 0.0
    rate_mbit: float | None = None
    mtu: int | None = None
    up: bool = True
    jitter_ms: float = 0.0
    jitter_dist: str = "normal"
    jitter_order: str = "fifo"


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
class EventSpec:
    at_s: float
    node: str
    iface: str
    action: str
    label: str


@dataclass(frozen=True)
class Load:
    name: str
    rate: str | None = None  # iperf3 -b
    size: int | None = None  # iperf3 -l


@dataclass
class Experiment:
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

    def events_for(self, move: str) -> list[EventSpec]:
        """The timeline of `move`: its own `events`, else the file's [[event]]s."""
        return self.move_events.get(move, self.events)

    def all_events(self) -> list[EventSpec]:
        """Every move's timeline events (which link ends the timelines switch)."""
        return [*self.events, *(e for evs in self.move_events.values() for e in evs)]

    def links_for(self, move: str, overrides: dict[str, dict] | None = None) -> list[LinkSpec]:
        over = {k: dict(v) for k, v in self.moves[move].items()}
        for name, params in (overrides or {}).items():
            over.setdefault(name, {}).update(params)
        return [replace(l, **over.get(l.name, {})) for l in self.links]

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

    def _path(self, move: str, host: str, iface: str) -> tuple[LinkSpec, list[LinkSpec], float]:
        """The path from the CN to `host` entering through `iface` in `move`: the host's link
        behind `iface`, the least-delay chain of links from the CN to that link's far end, and
        that chain's one-way delay (ms)."""
        links = self.links_for(move)
        last = next(l for l in links if (l.a, l.a_if) == (host, iface) or (l.b, l.b_if) == (host, iface))
        far = last.b if last.a == host else last.a
        dist, via, todo = {self.cn: 0.0}, {self.cn: None}, [self.cn]
        while todo:  # Bellman-Ford style relaxation: a handful of nodes
            n = todo.pop()
            if n != self.cn and not self.nodes[n]:
                continue  # hosts do not forward
            for l in links:
                if l is last or n not in (l.a, l.b):
                    continue
                other = l.b if l.a == n else l.a
                d = dist[n] + l.delay_ms
                if d < dist.get(other, float("inf")):
                    dist[other], via[other] = d, (n, l)
                    todo.append(other)
        if far not in dist:
            raise ValueError(f"{self.name}: no path from {self.cn} to {far}")
        chain, n = [], far
        while via[n] is not None:
            n, l = via[n]
            chain.append(l)
        return last, chain, dist[far]

    def path_rtt_s(self, move: str, host: str, iface: str) -> float:
        """The configured round trip (link delays, both ways) between the CN and `host` when
        the traffic enters `host` through `iface`: the least-delay path from the CN to the
        far end of that link, plus the link itself. Queueing and processing are not in it."""
        last, _, d = self._path(move, host, iface)
        return round(2 * (d + last.delay_ms) / 1000, 6)

    def path_delivery(self, move: str, host: str, iface: str) -> float:
        """The probability that one packet crosses the configured links from the CN to `host`
        entering through `iface` (the path of `path_rtt_s`), from the links' random loss; the
        way back has the same links and loss. So a single LU and its ack both arrive with
        probability `path_delivery ** 2` (thesis §6.2.1, eqs. 3, 8, 9)."""
        last, chain, _ = self._path(move, host, iface)
        p = 1.0
        for l in [last, *chain]:
            p *= 1.0 - l.loss_pct / 100
        return round(p, 9)

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


LINK_PARAMS = {"delay_ms", "loss_pct", "rate_mbit", "jitter_ms", "jitter_dist", "jitter_order"}  # what a move may change on a link
JITTER_DISTS = ("uniform", "normal", "pareto", "paretonormal")
JITTER_ORDERS = ("fifo", "reorder")
LU_TIMER = re.compile(r"^(rtt|fixed-[1-9][0-9]*(ms|s))$")


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
    events = _events(c, doc.get("event", []), ifaces, ex["duration"])
    moves, move_events, move_daemon = _moves(c, doc.get("move") or {"default": {}}, links, ifaces, ex["duration"])
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
        move_events=move_events, move_daemon=move_daemon,
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


def _events(c: _Ctx, items: list, ifaces: set[tuple[str, str]], duration: float,
            what: str = "[[event]]") -> list[EventSpec]:
    """[[event]] (or a move's `events`): the timeline, in order, within the flow."""
    events = []
    last = -1.0
    if not isinstance(items, list):
        raise c.err(what, "must be a list of events")
    for i, e in enumerate(items, 1):
        where = f"{what} #{i}"
        c.keys(where, e, {"at_s", "node", "iface", "action", "label"}, {"at_s", "node", "iface", "action"})
        at = c.num(where, e, "at_s", None, 0, duration)
        if at < last:
            raise c.err(where, f"at_s = {at} comes before the previous event's {last}: the timeline must be in order", "at_s")
        last = at
        if (e["node"], e["iface"]) not in ifaces:
            raise c.err(where, f"{e['node']}:{e['iface']} is not an interface of any link", "iface")
        action = c.string(where, e, "action", choices=("up", "down"))
        events.append(EventSpec(at, e["node"], e["iface"], action, e.get("label") or f"{e['node']}:{e['iface']} {action}"))
    return events


def _moves(c: _Ctx, table: dict, links: list[LinkSpec], ifaces: set[tuple[str, str]], duration: float
           ) -> tuple[dict[str, dict[str, dict]], dict[str, list[EventSpec]], dict[str, dict]]:
    """[move.NAME]: per-link parameter overrides, the move's own timeline if it has one, and
    ilnpd keys for the ILNP schemes."""
    moves, move_events, daemon = {}, {}, {}
    for mname, m in table.items():
        where = f"[move.{mname}]"
        c.keys(where, m, {"links", "events", "lu_timer"})
        if "events" in m:
            move_events[mname] = _events(c, m["events"], ifaces, duration, f"{where} events")
        daemon[mname] = {}
        if "lu_timer" in m:
            t = c.string(where, m, "lu_timer")
            if not LU_TIMER.match(t):
                raise c.err(where, f"lu_timer = {t!r}: write \"rtt\", \"fixed-<N>s\" or \"fixed-<N>ms\"", "lu_timer")
            daemon[mname]["lu_timer"] = t
        over = {}
        for lname, params in (m.get("links") or {}).items():
            if not any(l.name == lname for l in links):
                raise c.err(where, f"no link named {lname!r}", lname)
            c.keys(f"{where} links.{lname}", params, LINK_PARAMS)
            over[lname] = {k: v for k, v in _link_params(c, f"{where} links.{lname}", params).items() if k in params}
        moves[mname] = over
    return moves, move_events, daemon


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

DAD_MODES = ("optimistic", "standard", "off")


def dad_sysctls(mode: str, transmits: int) -> list[tuple[str, int]]:
    """Per-interface sysctls of a host interface that takes SLAAC addresses from an RA."""
    if mode not in DAD_MODES:
        raise ValueError(f"dad {mode!r}: expected one of {', '.join(DAD_MODES)}")
    if transmits < 1:
        raise ValueError(f"dad_transmits {transmits}: must be at least 1")
    optimistic = int(mode == "optimistic")
    return [("accept_ra", 2), ("autoconf", 1), ("accept_dad", int(mode != "off")), ("dad_transmits", transmits),
            ("optimistic_dad", optimistic), ("use_optimistic", optimistic)]


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
          start_radvd: bool = True) -> dict[str, Node]:
    """Creates the experiment's network for `move` in `bed`; returns {name: Node}.
    `overrides`: per-link parameters on top of the move's ({"r1-r3": {"delay_ms": 50}}).
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
        radvd(nodes[r.node], r.iface, r.prefix, r.min_ra, r.max_ra, r.pref, r.valid, r.preferred)
    for l in ex.links:
        if not l.up:
            # down at the end the timeline later brings up (the MN's interface), else at b
            ends = [(n, i) for n, i in ((l.a, l.a_if), (l.b, l.b_if)) if any((e.node, e.iface) == (n, i) for e in ex.all_events())]
            for n, i in ends or [(l.b, l.b_if)]:
                nodes[n].set_link(i, False)
    return nodes
