"""The lab's mobility model: what happens to an experiment's network over a run. Apart from
`topology.py` (the network itself: nodes, links, routes, radvd, addresses, building it).

    [[event]] at_s, node, iface, action ("up"|"down"), label
    [move.NAME] links = { LINK = { delay_ms, loss_pct, rate_mbit, jitter_ms, jitter_dist, jitter_order } },
                events = [{ at_s, node, iface, action, label }, ...],   # optional: this move's own
                timeline instead of the [[event]]s (seed 003's soft and hard handoffs differ only in
                the order of the MN's link changes),
                lu_timer ("rtt"|"fixed-<N>s"|"fixed-<N>ms": the ILNP schemes' ilnpd `lu_timer` in this move),
                only_if_named (true: run only when `--scenario` names it, not in the file's full
                or --quick run without --scenario: a sweep's extra axis that costs nothing by default)

`Moves` (a base of `topology.Experiment`): a move's timeline, its links with the move's
overrides, and the path a move gives from the CN to a host's interface (configured round
trip, delivery probability: thesis §6.2.1). `parse_events` / `parse_moves` check those tables
with the file's checking context. `dad_sysctls`: Duplicate Address Detection on the hosts'
SLAAC interfaces, i.e. how soon a handoff's new address is usable (`ilnp-lab run --dad`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from .links import LINK_PARAMS, LinkSpec
LU_TIMER = re.compile(r"^(rtt|fixed-[1-9][0-9]*(ms|s))$")


@dataclass(frozen=True)
class EventSpec:
    at_s: float
    node: str
    iface: str
    action: str
    label: str


class Moves:
    """The mobility part of `topology.Experiment` (its fields `links`, `nodes`, `cn`, `events`,
    `moves`, `move_events`)."""

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


def parse_events(c, items: list, ifaces: set[tuple[str, str]], duration: float,
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


def parse_moves(c, table: dict, links: list, ifaces: set[tuple[str, str]], duration: float, link_params
                ) -> tuple[dict[str, dict[str, dict]], dict[str, list[EventSpec]], dict[str, dict], set[str]]:
    """[move.NAME]: per-link parameter overrides, the move's own timeline if it has one, ilnpd
    keys for the ILNP schemes, and the moves run only when named. `c` is the file's checking
    context (topology._Ctx) and `link_params` the link-parameter checker (topology._link_params):
    the generic parts."""
    moves, move_events, daemon, named_only = {}, {}, {}, set()
    for mname, m in table.items():
        where = f"[move.{mname}]"
        c.keys(where, m, {"links", "events", "lu_timer", "only_if_named"})
        if "only_if_named" in m:
            if not isinstance(m["only_if_named"], bool):
                raise c.err(where, f"only_if_named = {m['only_if_named']!r}: true or false", "only_if_named")
            if m["only_if_named"]:
                named_only.add(mname)
        if "events" in m:
            move_events[mname] = parse_events(c, m["events"], ifaces, duration, f"{where} events")
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
            over[lname] = {k: v for k, v in link_params(c, f"{where} links.{lname}", params).items() if k in params}
        moves[mname] = over
    if named_only and named_only == set(moves):
        raise c.err("[move]", "every move has only_if_named = true: a run without --scenario would have none", "only_if_named")
    return moves, move_events, daemon, named_only


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
