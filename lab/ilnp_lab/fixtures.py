"""Ready-made topologies for the system tests, the benchmarks and the demo (experiments
describe theirs in TOML: `topology.py`). Each builds into a `Testbed` and returns its nodes.

    three_node:         CN — R1 — MN, static addressing (CN_L64, MN_L64)
    mobility_topology:  seed 000 Fig. 8, CN — R1 — {R2, R3} — MN, from experiments/seed000-tcp.toml
    v4_nat_topology:    the same with IPv4 beside IPv6 on CN — R1 and R3's network IPv4-only behind
                        an nftables masquerade on R3 (issue #26)
    dns_server:         a name server node behind a router (DNS_ADDR), for bind.Bind
"""

from __future__ import annotations

from .addr import CN_NID, MN_NID, address
from .services import nic_segmentation
from .testbed import Node, Testbed
from .topology import build, load

# three_node's networks, as L64s
CN_L64 = "2001:0db8:000a:0000"
MN_L64 = "2001:0db8:000b:0000"
# three_node's wire addresses of the lab's CN and MN NIDs (what ilnpd puts on the wire)
CN_WIRE = address(CN_L64, CN_NID)
MN_WIRE = address(MN_L64, MN_NID)


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


def mobility_topology(bed: Testbed, wan_r2_ms: float = 0, wan_r3_ms: float = 0, cn_mobile: bool = False) -> dict[str, Node]:
    """Seed 000 Fig. 8 for the tests: the network of experiments/seed000-tcp.toml (CN — R1 —
    {R2, R3} — MN, the MN's link to R3 down at first) without its 30 Mbit/s cell rate and
    without radvd (tests start it: `radvd(t["r2"], "eth-mn", "2001:db8:2::/64")`, R3:
    2001:db8:3::/64). `wan_r2_ms`/`wan_r3_ms`: one-way delay added on R1—R2 / R1—R3.
    `cn_mobile`: the CN gets a second link to R1 (eth1, down at first), where R1 has
    2001:db8:a2::1/64 (tests start `radvd(t["r1"], "eth-cn2", "2001:db8:a2::/64")`).
    """
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


# the CN's plain IPv6 address in mobility_topology (seed000-tcp.toml's cn-r1 link)
CN_V6 = "2001:db8:a::c"

# v4_nat_topology's IPv4 plan: the CN and R1 public, R3's outside public, R3's inside private
CN_V4 = "192.0.2.10"
R3_OUTSIDE_V4 = "198.51.100.3"
MN_V4 = "10.0.3.2"
R3_INSIDE_V4 = "10.0.3.1"


def v4_nat_topology(bed: Testbed, wan_r3_ms: float = 0) -> dict[str, Node]:
    """`mobility_topology` with IPv4: CN 192.0.2.10/24 — R1 (192.0.2.1, 198.51.100.1) — R3
    (198.51.100.3 outside, 10.0.3.1/24 inside, masquerading what leaves by eth-r1). R3
    advertises no IPv6 prefix (tests start radvd on R2 only): its network is IPv4-only
    behind a NAT, as most Wi-Fi. The MN's address and default route on it are added by
    `v4_join` (what DHCP would do)."""
    t = mobility_topology(bed, wan_r3_ms=wan_r3_ms)
    cn, r1, r3 = t["cn"], t["r1"], t["r3"]
    for n in (r1, r3):
        n.sysctl("net.ipv4.ip_forward=1")
    cn.ip("addr", "add", f"{CN_V4}/24", "dev", "eth0")
    cn.ip("route", "add", "default", "via", "192.0.2.1")
    r1.ip("addr", "add", "192.0.2.1/24", "dev", "eth-cn")
    r1.ip("addr", "add", "198.51.100.1/24", "dev", "eth-r3")
    r3.ip("addr", "add", f"{R3_OUTSIDE_V4}/24", "dev", "eth-r1")
    r3.ip("addr", "add", f"{R3_INSIDE_V4}/24", "dev", "eth-mn")
    r3.ip("route", "add", "default", "via", "198.51.100.1")
    r3.run("nft", "add table ip nat")
    r3.run("nft", "add chain ip nat post { type nat hook postrouting priority 100 ; }")
    r3.run("nft", "add rule ip nat post oifname eth-r1 masquerade")
    return t


def v4_join(mn: Node, iface: str = "eth-r3") -> None:
    """The MN joins R3's IPv4-only network: link up, address and default route (DHCP's job)."""
    mn.set_link(iface, True)
    mn.ip("addr", "add", f"{MN_V4}/24", "dev", iface)
    mn.ip("route", "add", "default", "via", R3_INSIDE_V4, "dev", iface)


# dns_server's network: R1 routes 2001:db8:53::/64 to the name server node
DNS_ADDR = "2001:db8:53::53"


def dns_server(bed: Testbed, router: Node) -> Node:
    """A name server node `ns` behind `router` (its eth-ns), at DNS_ADDR; plain IPv6."""
    ns = bed.add_node("ns")
    bed.link(router, "eth-ns", ns, "eth0")
    router.add_addr("eth-ns", "2001:db8:53::1/64")
    ns.add_addr("eth0", f"{DNS_ADDR}/64")
    ns.add_route("default", "2001:db8:53::1")
    return ns
