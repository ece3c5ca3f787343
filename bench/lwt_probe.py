#!/usr/bin/env python3
"""Issue #27 item 1 (a), a probe: does translating at the route, transmitting once, reach the
header floor? Prints numbers and ratios; asserts nothing. Run as root after scripts/setup.sh
and `cargo build --release`:

    sudo .venv/bin/python bench/lwt_probe.py [--rounds 3] [--seconds 2] [--json out.json] [--quick]

Direct topology of bench/datapath.py (CN — MN, one veth, default offloads), both daemons up;
iperf3 UDP CN -> MN at -b 0, one sender, payload 64 and 1400 bytes, packets/s delivered to
MN's UDP layer, interleaved per round over four destinations:

  plain   plain IPv6 to MN
  ilnp    ILNPv6 to MN's identifier address (ilnp_egress on ilnp0, bpf_redirect_neigh: two
          transmits)
  floor   plain IPv6 plus the 16-byte header pushed at CN's uplink (bench/hdr_floor.bpf.c)
  lwt     bench/lwt_probe.bpf.c: an LWT xmit program on the route of a fourth MN address
          rewrites the destination's locator (checksum adjusted), inserts the 16-byte header,
          writes the Ethernet header and redirects to the uplink: one transmit, and no map
          lookups (the ILCC, nonce, next-hop and balancing lookups ilnp_egress does are not in
          it, so it is a lower bound for this design, not a data path). The route's device is
          the uplink: the sending socket reserves the uplink's link-layer space, 24 bytes in
          front of the IPv6 header, and the program's 30 bytes reallocate the head
  lwt_hr  the same program on a fifth address whose route's device is a VXLAN device that
          carries nothing (nothing is ever transmitted on it; the program redirects first): a
          VXLAN device declares headroom for its encapsulation, so the socket reserves enough
          in front of the header for the program's 30 bytes (the route's `headroom` attribute
          does not do this: it lowers the route's MTU only)

"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from datapath import FLOOR_MN, PLAIN_MN, build, header_floor, iperf_udp  # noqa: E402
from ilnp_lab.addr import CN_NID, MN_NID  # noqa: E402
from ilnp_lab.daemon import Ilnpd, Peer  # noqa: E402
from ilnp_lab.fixtures import CN_L64, MN_L64  # noqa: E402
from ilnp_lab.testbed import Testbed  # noqa: E402

PROBE_SRC = Path(__file__).resolve().parent / "lwt_probe.bpf.c"
LWT_MN = "2001:db8:b::f"  # its /128 route on CN carries the probe, device the uplink
LWT_HR_MN = "2001:db8:b::1f"  # the same, device a VXLAN device (headroom only)
TESTS = (("udp64", 64), ("udp1400", 1400))


def mac_c(mac: str) -> str:
    return ",".join(f"0x{b}" for b in mac.split(":"))


def lwt_routes(bed, cn, mn):
    """Compile the probe for CN's uplink and MN's MAC, give MN LWT_MN and LWT_HR_MN, and route
    them on CN through the program (`encap bpf xmit`; `headroom 30` lowers the routes' MTU by
    what the program adds), LWT_HR_MN's via an idle VXLAN device."""
    link = json.loads(cn.run("ip", "-j", "link", "show", "eth0").stdout)[0]
    peer = json.loads(mn.run("ip", "-j", "link", "show", "eth0").stdout)[0]
    obj = Path(bed.workdir) / "lwt_probe.o"
    subprocess.run(["clang", "-O2", "-g", "-Wall", "-Werror", "-target", "bpf", f"-DUPLINK_IFINDEX={link['ifindex']}",
                    f"-DNH_MAC={mac_c(peer['address'])}", f"-DOWN_MAC={mac_c(link['address'])}",
                    "-c", str(PROBE_SRC), "-o", str(obj)], check=True)
    cn.ip("link", "add", "hr0", "type", "vxlan", "id", "1", "dstport", "4789")
    cn.ip("link", "set", "hr0", "up")
    for addr, dev in ((LWT_MN, "eth0"), (LWT_HR_MN, "hr0")):
        mn.add_addr("eth0", f"{addr}/128")
        cn.ip("-6", "route", "add", f"{addr}/128", "encap", "bpf", "xmit", "obj", str(obj), "section", "lwt_xmit",
              "headroom", "30", "dev", dev)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="write every measurement here")
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 round of 1 s")
    a = ap.parse_args()
    if a.quick:
        a.rounds, a.seconds = 1, 1
    res = {t: {k: [] for k in ("plain", "ilnp", "floor", "lwt", "lwt_hr")} for t, _ in TESTS}
    with Testbed() as bed:
        cn, _, mn = build(bed, "direct")
        header_floor(bed, cn, mn)
        lwt_routes(bed, cn, mn)
        dcn = Ilnpd(cn, ["eth0"], nid=CN_NID, peers=[Peer("mn", MN_NID, [(MN_L64, 10)])],
                    extra={"log_level": "warn"}).start()
        dmn = Ilnpd(mn, ["eth0"], nid=MN_NID, peers=[Peer("cn", CN_NID, [(CN_L64, 10)])],
                    extra={"log_level": "warn"}).start()
        try:
            dsts = {"plain": PLAIN_MN, "ilnp": dmn.identifier_address(), "floor": FLOOR_MN,
                    "lwt": LWT_MN, "lwt_hr": LWT_HR_MN}
            iperf_udp(cn, mn, dsts["ilnp"], 1, 64, 1)  # the session exists before anything is timed
            for rnd in range(a.rounds):
                for t, size in TESTS:
                    for k, dst in dsts.items():
                        m = iperf_udp(cn, mn, dst, a.seconds, size, 1)
                        res[t][k].append(m)
                        print(f"  round {rnd} {t} {k}: {m['v'] / 1e3 if m else 0:.0f}k pps delivered, "
                              f"{m['wire_bytes'] if m else 0:.0f} B/frame on CN's uplink", flush=True)
        finally:
            dcn.stop()
            dmn.stop()
    print(f"\n{a.rounds} interleaved rounds x {a.seconds} s, one sender, delivered packets/s, median [min-max]; "
          "ratios of medians against plain and against the header floor\n")
    print("| UDP, 1 sender | plain IPv6 | ILNPv6 (ilnp0, 2 transmits) | header floor | LWT probe (1 transmit, no lookups) "
          "| LWT probe, headroom reserved |")
    print("|---|---|---|---|---|---|")
    for t, _ in TESTS:
        meds = {k: [m["v"] for m in v if m] for k, v in res[t].items()}
        st = {k: (statistics.median(v), min(v), max(v)) if v else None for k, v in meds.items()}

        def cell(k):
            if not st[k]:
                return "failed"
            s = f"{st[k][0] / 1e3:.0f}k [{st[k][1] / 1e3:.0f}-{st[k][2] / 1e3:.0f}k]"
            if k != "plain" and st["plain"]:
                s += f" ({st[k][0] / st['plain'][0]:.2f}×"
                s += f"; {st[k][0] / st['floor'][0]:.2f}× floor)" if k != "floor" and st["floor"] else ")"
            return s
        print(f"| {t} | {cell('plain')} | {cell('ilnp')} | {cell('floor')} | {cell('lwt')} | {cell('lwt_hr')} |")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
