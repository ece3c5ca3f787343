#!/usr/bin/env python3
"""What temporary NIDs cost (issue #44 item 2, `[privacy]`): one run, CN — R1 — MN.

    sudo .venv/bin/python bench/privacy.py [--seconds 5] [--rotations 4]

1. Throughput MN -> CN (iperf3, TCP) as ratios against plain IPv6 in the same run: ILNPv6 from
   the stable NID and from the temporary NID, both in the fast path (the ILCC map entry carries
   the NID of ours it uses, design/privacy.md); the MN's fast-path punts of the temporary run.
2. A rotation: with `period_s` = 2, a new TCP connection to the CN every 0.5 s (the MN's entry
   never idles out: the CN stays pinned to one NID) and then every 2.5 s (idle_timeout_s 1: each
   connection after the entry ended, on the current NID), what the rotations added: LUs sent by the MN (none are expected: a session keeps its NID), ILCC entries
   at the MN and at the CN (the CN sees each temporary NID as a new correspondent), the slow
   path's work (core counters, the fast path's punts).

Prints, asserts nothing.
"""

import argparse
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from ilnp_lab.addr import identifier_address  # noqa: E402
from ilnp_lab.daemon import Ilnpd, Peer  # noqa: E402
from ilnp_lab.fixtures import CN_L64, MN_L64, three_node  # noqa: E402
from ilnp_lab.addr import CN_NID  # noqa: E402
from ilnp_lab.testbed import Testbed  # noqa: E402

CN_ID = identifier_address(CN_NID)


def iperf(mn, cn, dst: str, secs: int, bind: str | None = None) -> float:
    """Mbit/s received by the CN's iperf3 server."""
    srv = cn.spawn("iperf3", "-s", "-1", "-p", "5301")
    time.sleep(0.5)
    b = ["-B", bind] if bind else []
    r = mn.run("iperf3", "-c", dst, "-p", "5301", "-t", str(secs), "-J", *b, check=False, timeout=secs + 30)
    srv.wait(timeout=10)
    try:
        return json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"] / 1e6
    except (ValueError, KeyError):
        return float("nan")


def plain_v6(node, dev: str = "eth0") -> str:
    j = json.loads(node.ip("-j", "-6", "addr", "show", "dev", dev).stdout)
    return next(a["local"] for a in j[0]["addr_info"] if a["scope"] == "global" and not a.get("deprecated"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rotations", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3, help="throughput rounds (median)")
    a = ap.parse_args()
    with Testbed() as bed:
        cn, r1, mn = three_node(bed)
        dmn = Ilnpd(mn, ["eth0"], peers=[Peer("cn", CN_NID, [(CN_L64, 10)])],
                    extra={"privacy": {"period_s": 600}}).start()
        stable = dmn.status()["nid"]
        dcn = Ilnpd(cn, ["eth0"], nid=CN_NID, peers=[Peer("mn", stable, [(MN_L64, 10)])]).start()
        time.sleep(1.5)
        rows: dict[str, list[float]] = {"plain": [], "fast": [], "temp": []}
        for _ in range(a.rounds):
            rows["plain"].append(iperf(mn, cn, plain_v6(cn), a.seconds))
            dcn.ctl_raw("ilcc", "flush")
            dmn.ctl_raw("ilcc", "flush")
            rows["fast"].append(iperf(mn, cn, CN_ID, a.seconds, bind=identifier_address(stable)))
            dcn.ctl_raw("ilcc", "flush")
            dmn.ctl_raw("ilcc", "flush")
            p0 = dmn.stats()["datapath"]
            rows["temp"].append(iperf(mn, cn, CN_ID, a.seconds))
            p1 = dmn.stats()["datapath"]
            print("temporary NID run, MN punts:", {k: p1.get(k, 0) - p0.get(k, 0) for k in
                  ("egress_punt_src", "ingress_punt_temp_nid", "ingress_punt_other_nid", "egress_fast", "ingress_fast")})
        print("rounds (Mbit/s):", json.dumps(rows))
        plain, fast, temp = (sorted(rows[k])[len(rows[k]) // 2] for k in ("plain", "fast", "temp"))
        print(f"throughput MN->CN, {a.seconds} s each, median of {a.rounds} (Mbit/s, ratio to plain IPv6):")
        for name, v in (("plain IPv6", plain), ("ILNPv6, stable NID (fast path)", fast),
                        ("ILNPv6, temporary NID (fast path)", temp)):
            print(f"  {name:36s} {v:9.1f}  {v / plain:5.2f}")
        dmn.stop()
        dcn.stop()

        # rotations
        dmn = Ilnpd(mn, ["eth0"], peers=[Peer("cn", CN_NID, [(CN_L64, 10)])],
                    extra={"idle_timeout_s": 1, "privacy": {"period_s": 2, "valid_s": 2}}).start()
        dcn = Ilnpd(cn, ["eth0"], nid=CN_NID, peers=[Peer("mn", stable, [(MN_L64, 10)])]).start()
        cn.spawn("socat", "TCP6-LISTEN:7500,reuseaddr,fork", "SYSTEM:echo $SOCAT_PEERADDR")
        cn.wait_listening(7500)
        time.sleep(1.5)
        for gap in (0.5, 2.5):
            s0m, s0c = dmn.stats(), dcn.stats()
            t_end = time.time() + 2 * a.rotations + 0.5
            conns, seen = 0, set()
            while time.time() < t_end:
                r = mn.sh(f"socat -T 2 - 'TCP6:[{CN_ID}]:7500,connect-timeout=2' </dev/null", check=False, timeout=10)
                conns += 1
                seen.add(r.stdout.strip())
                time.sleep(gap)
            s1m, s1c = dmn.stats(), dcn.stats()

            def delta(s1, s0, part, pat):
                return {k: v - s0[part].get(k, 0) for k, v in s1[part].items()
                        if re.search(pat, k) and v != s0[part].get(k, 0)}
            print(f"\nrotations (period_s 2, a connection every {gap} s, {conns} connections, "
                  f"{len(seen - {''})} source NIDs seen by the CN):")
            print("  MN core (LUs, entries, temporary NIDs):",
                  delta(s1m, s0m, "core", r"lu|peer_created|temp_nid|other_local|idle"))
            print("  MN fast path punts:", delta(s1m, s0m, "datapath", r"punt_src|punt_temp"))
            print("  CN core (entries):", delta(s1c, s0c, "core", r"peer_created|admit|hello|idle"))
            print(f"  ILCC entries now: MN {len(dmn.ctl('ilcc', 'show') or [])}, "
                  f"CN {len(dcn.ctl('ilcc', 'show') or [])}")
        dmn.stop()
        dcn.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
