#!/usr/bin/env python3
"""Soak (issue #10): the MN hands off between R2's and R3's networks every 5 s while
iperf3 TCP (CN -> MN) and UDP (MN -> CN) run for the whole soak; resources of both
daemons at the start and at the end must not grow.

    sudo .venv/bin/python bench/soak.py [--minutes 30] [--quick] [--interval 5] [--out out/bench-soak]

Topology: the tests' mobility network (CN — R1 — {R2, R3} — MN, LAN, radvd on R2 and
R3). A handoff is make-before-break: the MN's link to the new network comes up, 1 s
later the old one goes down (soft handoff, the default). Prints, per daemon: RSS
(VmRSS), open fds, ILCC entries (core, `ilnpctl ilcc show`) and fast-path map
entries (`bpftool map dump` of the pinned ilnp_ilcc and ilnp_locals) at the start
(after the first handoff) and at the end; and for the sessions: handoffs done, LUs
acked/failed, TCP seconds without data (stuck), whether each iperf3 ended in error
(broken), UDP loss. Numbers, never assertions (`--quick`: 2 minutes).
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab"))

from ilnp_lab.addr import CN_NID, MN_NID, identifier_address  # noqa: E402
from ilnp_lab.daemon import Ilnpd, Peer  # noqa: E402
from ilnp_lab.fixtures import mobility_topology  # noqa: E402
from ilnp_lab.services import radvd  # noqa: E402
from ilnp_lab.testbed import Testbed, stop_process, wait_for  # noqa: E402

CN_L64 = "2001:0db8:000a:0000"
L2 = "2001:0db8:0002:0000"


def map_entries(pin_dir: str, name: str) -> int | None:
    paths = glob.glob(f"{pin_dir}/maps-*/{name}")
    if not paths:
        return None
    r = subprocess.run(["bpftool", "-j", "map", "dump", "pinned", paths[0]], capture_output=True, text=True)
    return len(json.loads(r.stdout)) if r.returncode == 0 else None


def sample(d: Ilnpd) -> dict:
    pid = d.proc.pid
    rss = next(int(l.split()[1]) for l in open(f"/proc/{pid}/status") if l.startswith("VmRSS:"))
    st = d.stats()
    return {
        "rss_kib": rss,
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
        "ilcc": len(d.ctl("ilcc", "show")),
        "map_ilcc": map_entries(d.pin_dir, "ilnp_ilcc"),
        "map_locals": map_entries(d.pin_dir, "ilnp_locals"),
        "lu_acked": st["core"].get("lu_acked", 0),
        "lu_failed": st["core"].get("lu_failed", 0),
        "bad_nonce": st["core"].get("bad_nonce", 0),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--quick", action="store_true", help="2 minutes")
    ap.add_argument("--interval", type=float, default=5, help="seconds between handoffs")
    ap.add_argument("--out", type=Path, default=Path("out/bench-soak"))
    args = ap.parse_args()
    secs = int((2 if args.quick else args.minutes) * 60)
    args.out.mkdir(parents=True, exist_ok=True)
    mn_id, cn_id = identifier_address(MN_NID), identifier_address(CN_NID)
    with Testbed(workdir=args.out.resolve()) as bed:
        t = mobility_topology(bed)
        cn, mn = t["cn"], t["mn"]
        radvd(t["r2"], "eth-mn", "2001:db8:2::/64")
        radvd(t["r3"], "eth-mn", "2001:db8:3::/64")
        wait_for(lambda: "2001:db8:2:" in mn.ip("-6", "addr", "show", "eth-r2").stdout, timeout=15, what="SLAAC")
        dcn = Ilnpd(cn, ["eth0"], nid=CN_NID, peers=[Peer("mn", MN_NID, [(L2, 10)])]).start()
        dmn = Ilnpd(mn, ["eth-r2", "eth-r3"], nid=MN_NID, peers=[Peer("cn", CN_NID, [(CN_L64, 10)])]).start()
        try:
            mn.spawn("iperf3", "-s", "-1", "-B", mn_id, "-p", "5201")
            cn.spawn("iperf3", "-s", "-1", "-B", cn_id, "-p", "5202")
            mn.wait_listening(5201)
            cn.wait_listening(5202)
            tcp = cn.spawn("iperf3", "-c", mn_id, "-p", "5201", "-t", str(secs), "-b", "50M", "-i", "1", "-J",
                           stdout=open(args.out / "tcp.json", "w"))
            udp = mn.spawn("iperf3", "-c", cn_id, "-p", "5202", "-u", "-b", "5M", "-t", str(secs), "-J",
                           stdout=open(args.out / "udp.json", "w"))
            links, cur = ["eth-r2", "eth-r3"], 0
            handoffs, start = 0, {}
            t0 = time.monotonic()
            while time.monotonic() - t0 < secs - args.interval:
                nxt = 1 - cur
                mn.ip("link", "set", links[nxt], "up")
                time.sleep(1.0)
                mn.ip("link", "set", links[cur], "down")
                cur = nxt
                handoffs += 1
                if handoffs == 1:
                    time.sleep(0.5)
                    start = {"cn": sample(dcn), "mn": sample(dmn)}
                time.sleep(max(0.0, args.interval - 1.0 - (0.5 if handoffs == 1 else 0)))
            end = {"cn": sample(dcn), "mn": sample(dmn)}
            rc_tcp, rc_udp = tcp.wait(timeout=secs + 60), udp.wait(timeout=secs + 60)
        finally:
            for d in (dcn, dmn):
                d.stop()
        rt = json.loads((args.out / "tcp.json").read_text())
        ru = json.loads((args.out / "udp.json").read_text())
    per_s = [i["sum"]["bytes"] for i in rt.get("intervals", [])]
    stuck = sum(1 for b in per_s if b == 0)
    print(f"\nsoak: {secs} s, {handoffs} handoffs (every {args.interval:g} s, make-before-break, soft)")
    print(f"{'daemon':6} {'':5} {'RSS KiB':>8} {'fds':>4} {'ILCC':>5} {'map ilcc':>8} {'map locals':>10} "
          f"{'LU acked':>8} {'LU failed':>9} {'bad nonce':>9}")
    for who in ("cn", "mn"):
        for when, s in (("start", start.get(who, {})), ("end", end[who])):
            print(f"{who:6} {when:5} {s.get('rss_kib', '—'):>8} {s.get('fds', '—'):>4} {s.get('ilcc', '—'):>5} "
                  f"{str(s.get('map_ilcc')):>8} {str(s.get('map_locals')):>10} {s.get('lu_acked', '—'):>8} "
                  f"{s.get('lu_failed', '—'):>9} {s.get('bad_nonce', '—'):>9}")
    tcp_err, udp_err = rt.get("error"), ru.get("error")
    print(f"TCP CN->MN: exit {rc_tcp}{' error ' + tcp_err if tcp_err else ''}, "
          f"{rt.get('end', {}).get('sum_received', {}).get('bytes', 0) / 1e6:.0f} MB, "
          f"stuck seconds (no data) {stuck} of {len(per_s)}, broken {int(rc_tcp != 0 or bool(tcp_err))}")
    us = ru.get("end", {}).get("sum", {})
    print(f"UDP MN->CN: exit {rc_udp}{' error ' + udp_err if udp_err else ''}, "
          f"{us.get('lost_packets', '—')}/{us.get('packets', '—')} lost ({us.get('lost_percent', 0):.3f} %), "
          f"broken {int(rc_udp != 0 or bool(udp_err))}")
    json.dump({"secs": secs, "handoffs": handoffs, "start": start, "end": end, "tcp_stuck_s": stuck,
               "tcp_rc": rc_tcp, "udp_rc": rc_udp, "udp": us}, open(args.out / "soak.json", "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
