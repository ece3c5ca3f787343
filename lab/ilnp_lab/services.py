"""What a testbed's nodes run or are set to beyond links and addresses, the way real
networks have them: radvd on access routers, routers that already know each other's
link-layer addresses, hosts whose NIC segments TCP. Used by experiment builds
(`topology.build`), the tests' fixtures (`fixtures.py`) and the tests themselves.
"""

from __future__ import annotations

import subprocess

from .testbed import Node, run

RADVD_CONF = """interface {iface} {{
    AdvSendAdvert on;
    MinRtrAdvInterval {min_ra};
    MaxRtrAdvInterval {max_ra};
    AdvDefaultPreference {pref};{ha}
    prefix {prefix} {{
        AdvOnLink on;
        AdvAutonomous on;{router_addr}
        AdvValidLifetime {valid};
        AdvPreferredLifetime {preferred};
    }};
}};
"""


def radvd(node: Node, iface: str, prefix: str, min_ra: float = 3, max_ra: float = 4,
          pref: str = "medium", valid: int = 30, preferred: int = 20, home_agent: bool = False) -> subprocess.Popen:
    """Runs radvd on `node` advertising `prefix` (a /64) on `iface`; returns the process.
    `home_agent`: the RAs carry the home-agent flag and the router's address in the prefix
    option (RFC 6275 §7.1-7.2, as the seeds' home link had it)."""
    d = node.bed.workdir / f"radvd-{node.name}-{iface}"
    d.mkdir(parents=True, exist_ok=True)
    conf = d / "radvd.conf"
    conf.write_text(RADVD_CONF.format(iface=iface, prefix=prefix, min_ra=min_ra, max_ra=max_ra, pref=pref,
                                      valid=valid, preferred=preferred,
                                      ha="\n    AdvHomeAgentFlag on;" if home_agent else "",
                                      router_addr="\n        AdvRouterAddr on;" if home_agent else ""))
    run(["radvd", "--configtest", "-C", str(conf)])
    return node.spawn("radvd", "-n", "-C", str(conf), "-p", str(d / "radvd.pid"), "-m", "stderr")


def warm_neighbours(a: Node, b: Node, b_addr: str) -> None:
    """One ping from `a` to `b_addr` so both routers know each other's link-layer
    address before an experiment, as routers carrying traffic do; otherwise the
    first packet of a handoff over a never-used delayed link pays a Neighbour
    Discovery round trip across it (and packets queued behind it may overflow).
    A lossy link may lose the ping or its reply: up to 5 tries."""
    for _ in range(4):
        if a.run("ping", "-6", "-c", "1", "-W", "3", b_addr, timeout=10, check=False).returncode == 0:
            return
    a.run("ping", "-6", "-c", "1", "-W", "3", b_addr, timeout=10)


def nic_segmentation(node: Node, iface: str) -> None:
    """Makes a host's veth segment TCP itself, as a real NIC does on the wire, instead of
    handing 64 KB GSO packets to the next namespace (veth's default). Since ilnpd's
    header passes Linux forwarding's GSO length check (docs/architecture.md § Linux
    routers and GSO packets) ILNPv6 no longer needs it; the lab keeps it for its
    emulated links, where a frame is the unit of loss, queueing and rate (ilnp-delayline
    loses a GSO super-frame whole, tbf queues it whole), for plain IPv6 baselines too.
    Throughput benchmarks run with the kernel's default offloads (bench/datapath.py).
    GSO stays on."""
    node.run("ethtool", "-K", iface, "tso", "off")
