"""BIND 9 (`named`) as a node's DNS server: a zone with RFC 6742 NID/L64/LP records
generated from the hosts of a topology, a TSIG key allowed to update it (RFC 2136 /
RFC 8945), and the per-namespace resolver configuration that points a host's
unmodified resolver at its ilnpd proxy.

BIND knows NID (104), L64 (106) and LP (107) natively (zone-file presentation:
`NID 10 0200:00ff:fe00:000d`, `L64 10 2001:0db8:000b:0000`, `LP 10 net-b.lab.example.`).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from .testbed import Node, StepError, run, wait_for

ZONE = "lab.example"
KEY_NAME = "ilnp-update"


@dataclass
class Host:
    """One name's records: ILNP (nid + l64s / lps) and/or plain (aaaa)."""

    name: str  # relative to the zone ("mn")
    nid: str | None = None
    l64s: list[tuple[str, int]] = field(default_factory=list)  # (l64, pref)
    lps: list[tuple[str, int]] = field(default_factory=list)  # (fqdn, pref)
    aaaa: list[str] = field(default_factory=list)


def zone_text(zone: str, ns_addr: str, hosts: list[Host], ttl: int = 30) -> str:
    lines = [
        f"$ORIGIN {zone}.",
        f"$TTL {ttl}",
        f"@ SOA ns.{zone}. admin.{zone}. 1 3600 600 86400 {ttl}",
        f"@ NS ns.{zone}.",
        f"ns AAAA {ns_addr}",
    ]
    for h in hosts:
        if h.nid:
            lines.append(f"{h.name} NID 10 {h.nid}")
        lines += [f"{h.name} L64 {pref} {l}" for l, pref in h.l64s]
        lines += [f"{h.name} LP {pref} {t}." for t, pref in h.lps]
        lines += [f"{h.name} AAAA {a}" for a in h.aaaa]
    return "\n".join(lines) + "\n"


class Bind:
    """named in `node`, authoritative for `zone`, listening on `addr` (port 53)."""

    def __init__(self, node: Node, addr: str, hosts: list[Host], zone: str = ZONE, ttl: int = 30):
        self.node, self.addr, self.zone = node, addr, zone
        self.dir = node.bed.workdir / f"named-{node.name}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.zone_file = self.dir / f"{zone}.zone"
        self.zone_file.write_text(zone_text(zone, addr, hosts, ttl))
        # a TSIG key (HMAC-SHA256) the hosts sign their dynamic updates with
        key = run(["tsig-keygen", "-a", "hmac-sha256", KEY_NAME]).stdout
        self.key_file = self.dir / "update.key"
        self.key_file.write_text(key)
        self.conf = self.dir / "named.conf"
        self.conf.write_text(f"""
include "{self.key_file}";
options {{
    directory "{self.dir}";
    pid-file none;
    session-keyfile "{self.dir}/session.key";
    listen-on {{ none; }};
    listen-on-v6 {{ {addr}; }};
    recursion no;
    dnssec-validation no;
    notify no;
}};
controls {{ }};
zone "{zone}" {{
    type primary;
    file "{self.zone_file}";
    allow-update {{ key {KEY_NAME}; }};
}};
""")
        run(["named-checkconf", str(self.conf)])
        r = run(["named-checkzone", zone, str(self.zone_file)], check=False)
        if r.returncode != 0:
            raise StepError(f"zone {zone} does not load: {r.stdout} {r.stderr}")
        self.log = self.dir / "named.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Bind":
        # -g: foreground, log to stderr; no -u: the namespace's root runs it (lab only)
        self.proc = self.node.spawn("named", "-g", "-c", str(self.conf), "-n", "1",
                                    stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
        wait_for(lambda: self.proc.poll() is not None or "running" in self.log.read_text(),
                 timeout=20, what="named running")
        if self.proc.poll() is not None:
            raise StepError(f"named exited:\n{self.log.read_text()[-3000:]}")
        return self

    def dig(self, from_node: Node, name: str, rtype: str = "AAAA", server: str | None = None,
            opts: tuple[str, ...] = ("+noall", "+answer")) -> str:
        """dig from `from_node` against `server` (default: this BIND)."""
        r = from_node.run("dig", f"@{server or self.addr}", name, rtype, "+time=2", "+tries=1", *opts, check=False)
        return r.stdout


def resolv_conf(node: Node, nameserver: str = "127.0.0.1") -> Path:
    """The node's resolver config (`ip netns exec` bind-mounts /etc/netns/NS/resolv.conf
    over /etc/resolv.conf), the host's own /etc/resolv.conf untouched. Testbed.close
    removes /etc/netns/NS."""
    d = Path("/etc/netns") / node.ns
    d.mkdir(parents=True, exist_ok=True)
    p = d / "resolv.conf"
    p.write_text(f"nameserver {nameserver}\noptions timeout:2 attempts:2\n")
    return p
