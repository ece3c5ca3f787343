#!/usr/bin/env python3
"""IPv4 and NAT benchmark (issue #26): the v4 path (ILNPv6 in UDP/IPv4) against plain IPv4
through the same NAT, in one run, and the handoff IPv6 <-> IPv4 against the path's RTT.

    sudo .venv/bin/python bench/v4nat.py [--rounds 3] [--seconds 5] [--moves 3]

Testbed: `ilnp_lab.fixtures.v4_nat_topology` (seed 000's, CN dual-stack, R3's network
IPv4-only behind an nftables masquerade), ilnpd with `[ipv4]` on the CN and the MN. The MN
sits on R3's network only; then, per round and interleaved: iperf3 TCP MN -> CN to the CN's
identifier address (v4 path) and to its IPv4 address (plain, through the NAT); 64-byte UDP
at full speed both ways the same (packets/s delivered at the receiver). Then the MN moves
IPv6 -> IPv4 -> IPv6 `--moves` times: the LU handshake (sent -> acked, ilnpd's events) of
each move against ping's RTT over the path moved to. Prints numbers and ratios, asserts
nothing; which path carried the packets is shown by the data path's counters.
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from ilnp_lab.daemon import Ilnpd, Peer  # noqa: E402
from ilnp_lab.fixtures import CN_V4, CN_V6, MN_V4, R3_INSIDE_V4, v4_join, v4_nat_topology  # noqa: E402
from ilnp_lab.services import radvd  # noqa: E402
from ilnp_lab.testbed import Testbed, wait_for  # noqa: E402
from ilnp_test_util import CN_ID, CN_L64, CN_NID, MN_NID, Monitor  # noqa: E402

L2 = "2001:0db8:0002:0000"
MN_V4_LOC = f"v4:{MN_V4}:6740"


def iperf(node, *args, secs):
    out = node.run("iperf3", *args, "-t", str(secs), "-J", check=False, timeout=secs + 30).stdout
    return json.loads(out)


def tcp_gbps(mn, dst, secs):
    r = iperf(mn, "-c", dst, secs=secs)
    return r["end"]["sum_received"]["bits_per_second"] / 1e9


def udp_kpps(mn, dst, secs):
    r = iperf(mn, "-c", dst, "-u", "-l", "64", "-b", "0", secs=secs)
    s = r["end"]["sum"]
    return (s["packets"] - s["lost_packets"]) / s["seconds"] / 1e3


def ping_ms(node, dst, n=20):
    out = node.run("ping", "-n", "-q", "-c", str(n), "-i", "0.05", dst, check=False).stdout
    line = [l for l in out.splitlines() if "min/avg" in l]
    return float(line[0].split("=")[1].split("/")[1]) if line else None


def lu_acks(mon, after):
    return [e["rtt_us"] / 1000 for t, e in mon.of("lu_acked", after)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--moves", type=int, default=3)
    args = ap.parse_args()
    with Testbed() as bed:
        t = v4_nat_topology(bed)
        cn, mn = t["cn"], t["mn"]
        radvd(t["r2"], "eth-mn", "2001:db8:2::/64")
        wait_for(lambda: "2001:db8:2:" in mn.ip("-6", "addr", "show", "eth-r2").stdout, timeout=15, what="SLAAC")
        extra = {"ipv4": {}}
        dcn = Ilnpd(cn, ["eth0"], nid=CN_NID, peers=[Peer("mn", MN_NID, [(L2, 10)])], extra=dict(extra)).start()
        dmn = Ilnpd(mn, ["eth-r2", "eth-r3"], nid=MN_NID,
                    peers=[Peer("cn", CN_NID, [(CN_L64, 10), (f"v4:{CN_V4}:6740", 30)])], extra=dict(extra)).start()
        cn.spawn("iperf3", "-s")
        cn.wait_listening(5201)
        v4_join(mn)
        mn.set_link("eth-r2", False)
        wait_for(lambda: [l["l64"] for l in dmn.ctl("locator", "show")] == [MN_V4_LOC], timeout=10,
                 what="MN on the v4 path only")
        before = dmn.stats()["datapath"]
        rows = {k: [] for k in ("tcp plain", "tcp ilnp", "udp64 plain", "udp64 ilnp")}
        for _ in range(args.rounds):
            rows["tcp plain"].append(tcp_gbps(mn, CN_V4, args.seconds))
            rows["tcp ilnp"].append(tcp_gbps(mn, CN_ID, args.seconds))
            rows["udp64 plain"].append(udp_kpps(mn, CN_V4, args.seconds))
            rows["udp64 ilnp"].append(udp_kpps(mn, CN_ID, args.seconds))
        after = dmn.stats()["datapath"]
        moved = {k: after.get(k, 0) - before.get(k, 0) for k in after if after.get(k, 0) != before.get(k, 0)}
        med = {k: statistics.median(v) for k, v in rows.items()}
        print(f"\nv4 path vs plain IPv4 through the same NAT, MN -> CN, medians of {args.rounds} interleaved rounds "
              f"of {args.seconds} s")
        print(f"  TCP      plain {med['tcp plain']:.3f} Gbit/s  ILNP {med['tcp ilnp']:.3f} Gbit/s  "
              f"ratio {med['tcp ilnp'] / med['tcp plain']:.2f}  (all: {rows['tcp plain']} / {rows['tcp ilnp']})")
        print(f"  UDP 64 B plain {med['udp64 plain']:.1f} kpps     ILNP {med['udp64 ilnp']:.1f} kpps     "
              f"ratio {med['udp64 ilnp'] / med['udp64 plain']:.2f}")
        print(f"  MN data path counters during the rounds: {moved}")
        print(f"  MN core: {dmn.stats()['core']}")

        # handoffs: IPv4 -> IPv6 (join R2, leave R3) and IPv6 -> IPv4 (join R3, leave R2)
        mon = Monitor(dmn)
        to6, to4 = [], []
        rtt6 = rtt4 = None
        for _ in range(args.moves):
            mark = time.monotonic()
            mn.set_link("eth-r2", True)
            wait_for(lambda: L2 in [r["l64"] for e in dcn.ctl("ilcc", "show") for r in e["remote_locators"]][:1],
                     timeout=15, what="CN on L2")
            mn.set_link("eth-r3", False)
            time.sleep(1)
            to6 += lu_acks(mon, mark)[:1]
            rtt6 = ping_ms(mn, CN_V6)
            mark = time.monotonic()
            mn.set_link("eth-r3", True)  # its address stayed; DHCP would renew the lease
            mn.ip("route", "replace", "default", "via", R3_INSIDE_V4, "dev", "eth-r3")
            time.sleep(0.5)
            mn.set_link("eth-r2", False)
            wait_for(lambda: [r["l64"] for e in dcn.ctl("ilcc", "show") for r in e["remote_locators"]][:1]
                     == [MN_V4_LOC], timeout=10, what="CN on the v4 path")
            time.sleep(1)
            to4 += lu_acks(mon, mark)[-1:]
            rtt4 = ping_ms(mn, CN_V4)
        mon.stop()
        print(f"\nhandoff (first LU -> ack at the MN, ms) over {args.moves} moves each way")
        print(f"  IPv4 -> IPv6: {to6} vs ping RTT over IPv6 {rtt6} ms")
        print(f"  IPv6 -> IPv4: {to4} vs ping RTT over IPv4 through the NAT {rtt4} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
