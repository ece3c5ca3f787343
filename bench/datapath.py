#!/usr/bin/env python3
"""Data-path benchmark: ILNPv6 (eBPF fast path, userspace mode) vs plain IPv6,
measured in the same run over the same namespaces (CN — R1 — MN).

Prints numbers and ratios; asserts nothing. Run as root after scripts/setup.sh:

    sudo .venv/bin/python bench/datapath.py [--seconds 5] [--rounds 3] [--rr 3000] [--json out.json]

Hosts keep their default offloads (TSO on); plain IPv6 and ILNPv6 TCP are measured
interleaved (plain, ILNP, plain, ILNP, ...) with both daemons running.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab"))

from ilnp_lab.daemon import Ilnpd, Peer  # noqa: E402
from ilnp_lab.addr import CN_NID, MN_NID  # noqa: E402
from ilnp_lab.fixtures import CN_L64, MN_L64, MN_WIRE, three_node  # noqa: E402
from ilnp_lab.testbed import Testbed, stop_process, wait_for  # noqa: E402

RR_SERVER = r"""
import socket, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 6200))
while True:
    d, a = s.recvfrom(2048)
    s.sendto(d, a)
"""

RR_CLIENT = r"""
import socket, sys, time, json
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.settimeout(1)
dst = (sys.argv[1], 6200); n = int(sys.argv[2]); msg = b"x" * 64
rtts = []
for i in range(n + 200):
    t0 = time.perf_counter_ns(); s.sendto(msg, dst); s.recv(2048); t1 = time.perf_counter_ns()
    if i >= 200: rtts.append((t1 - t0) / 1000.0)
rtts.sort()
print(json.dumps({"median_us": rtts[len(rtts)//2], "p90_us": rtts[int(len(rtts)*0.9)]}))
"""


def iperf(cn, mn, server, seconds, streams):
    srv = mn.spawn("iperf3", "-s", "-1", "-B", server)
    time.sleep(0.3)
    r = cn.run("iperf3", "-c", server, "-t", str(seconds), "-P", str(streams), "-J", check=False, timeout=seconds + 40)
    srv.wait(timeout=15)
    if r.returncode != 0:
        return None
    return json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"] / 1e9


def rr(cn, mn, server, n):
    srv = mn.spawn("python3", "-c", RR_SERVER, server)
    time.sleep(0.3)
    r = cn.run("python3", "-c", RR_CLIENT, server, str(n), check=False, timeout=120)
    stop_process(srv)
    return json.loads(r.stdout)["median_us"] if r.returncode == 0 else None


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return None


def ilcc_flood(r1, dst_wire, count):
    """R1 sends one nonce-carrying UDP packet from each of `count` random NIDs in CN's locator."""
    script = r"""
import socket, struct, ipaddress, random, sys, time
random.seed(7)
dst = ipaddress.IPv6Address(sys.argv[1]); n = int(sys.argv[2]); loc = int(sys.argv[3], 16)
s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
for i in range(n):
    nid = (random.getrandbits(64) & ~(3 << 56)) | (1 << 57)
    src = ipaddress.IPv6Address((loc << 64) | nid)
    udp = struct.pack("!HHHH", 40000, 9, 12, 0) + b"ping"
    body = bytes([17, 1, 0x8B, 4]) + random.getrandbits(32).to_bytes(4, "big") + bytes([1, 6, 0, 0, 0, 0, 0, 0]) + udp
    pkt = struct.pack("!IHBB", 6 << 28, len(body), 60, 64) + src.packed + dst.packed + body
    s.sendto(pkt, (str(dst), 0))
    if i % 200 == 199:
        time.sleep(0.02)   # ~10k new correspondents a second: measure state, not queue overflow
"""
    r1.run("python3", "-c", script, dst_wire, str(count), CN_L64.replace(":", ""), timeout=300)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rr", type=int, default=3000, help="request/response round trips per measurement")
    ap.add_argument("--entries", type=int, default=10000, help="ILCC entries for the memory measurement")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved plain/ILNP rounds per mode")
    ap.add_argument("--json", help="write results here")
    args = ap.parse_args()

    res = {}
    with Testbed() as bed:
        cn, r1, mn = three_node(bed)
        # the hosts' default offloads (TSO on): 64 KB GSO packets cross R1, as users run
        # it (the lab's three_node turns TSO off; tests/test_gso_exthdr.py for why that
        # is no longer needed)
        for n in (cn, mn):
            n.run("ethtool", "-K", "eth0", "tso", "on")
        for mode in ("ebpf", "userspace"):
            dcn = Ilnpd(cn, ["eth0"], nid=CN_NID, datapath=mode, peers=[Peer("mn", MN_NID, [(MN_L64, 10)])]).start()
            dmn = Ilnpd(mn, ["eth0"], nid=MN_NID, datapath=mode, peers=[Peer("cn", CN_NID, [(CN_L64, 10)])],
                        # admission "open": the memory measurement fills the ILCC with one crafted
                        # packet per NID (under "socket" they would get no state at all)
                        extra={"ilcc_max_entries": max(65536, args.entries * 2), "log_level": "info",
                               "admission": "open"}).start()
            mn_id = dmn.identifier_address()
            # interleaved in one run: plain, ILNP, plain, ILNP, ... (the daemons leave plain
            # IPv6 to the MN's SLAAC-less static address untouched)
            rounds = {"plain": {"tcp1": [], "tcp4": []}, mode: {"tcp1": [], "tcp4": []}}
            for _ in range(args.rounds):
                for streams in (1, 4):
                    for k, dst in (("plain", "2001:db8:b::d"), (mode, mn_id)):
                        rounds[k][f"tcp{streams}"].append(iperf(cn, mn, dst, args.seconds, streams))
            r = {"rounds": rounds[mode], "plain_rounds": rounds["plain"], "rr_us": rr(cn, mn, mn_id, args.rr),
                 "plain_rr_us": rr(cn, mn, "2001:db8:b::d", args.rr)}
            if mode == "ebpf":
                # ilnpd runs under `ip netns exec`: its pid is the Popen pid (exec replaces ip)
                r["rss_idle_kib"] = rss_kib(dmn.proc.pid)
                before = len(dmn.ctl("ilcc", "show"))
                t0 = time.monotonic()
                ilcc_flood(r1, MN_WIRE, args.entries)
                try:
                    wait_for(lambda: len(dmn.ctl("ilcc", "show")) >= before + args.entries, timeout=60,
                             interval=0.5, what="ILCC entries")
                except TimeoutError:
                    pass
                r["ilcc_entries"] = len(dmn.ctl("ilcc", "show"))
                r["flood_seconds"] = round(time.monotonic() - t0, 2)
                r["rss_entries_kib"] = rss_kib(dmn.proc.pid)
            res[mode] = r
            dcn.stop()
            dmn.stop()

    def med(xs):
        xs = [x for x in xs if x is not None]
        return (statistics.median(xs), min(xs), max(xs)) if xs else None

    print(f"CN - R1 - MN, hosts' default offloads (TSO on); {args.rounds} interleaved rounds, "
          f"{args.seconds} s each; median [min-max] Gbit/s; ratio of medians vs plain IPv6 of the same rounds")
    for mode, r in res.items():
        for t in ("tcp1", "tcp4"):
            p, i = med(r["plain_rounds"][t]), med(r["rounds"][t])
            if not p or not i:
                print(f"{mode:<10}{t}: failed")
                continue
            print(f"{mode:<10}{t}: plain {p[0]:.2f} [{p[1]:.2f}-{p[2]:.2f}]  ILNP {i[0]:.2f} [{i[1]:.2f}-{i[2]:.2f}]"
                  f"  ({i[0] / p[0]:.2f}x)")
        if r["rr_us"] and r["plain_rr_us"]:
            print(f"{mode:<10}UDP RR median (Python client): plain {r['plain_rr_us']:.1f} us, ILNP {r['rr_us']:.1f} us "
                  f"({r['rr_us'] - r['plain_rr_us']:+.1f} us)")
    e = res["ebpf"]
    if e.get("rss_idle_kib"):
        print(f"ilnpd RSS: idle {e['rss_idle_kib'] / 1024:.1f} MiB; with {e.get('ilcc_entries')} ILCC entries "
              f"{e['rss_entries_kib'] / 1024:.1f} MiB (target < 64 MiB); flood took {e.get('flood_seconds')} s")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
