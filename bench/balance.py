#!/usr/bin/env python3
"""Load-balancing benchmark (issue #12 "Numbers"), on seed 002's Fig. 7 testbed (two hosts,
each on two segments; lab/ilnp_lab/balancing.py builds it), all in one run:

* 128-byte frames at this machine's limit: iperf3 UDP `-b 0` vm1 -> vm2 for each of plain
  IPv6 (vm2's SLAAC address; before ilnpd starts, and with ilnpd running), ILNPv6 failover,
  per-flow and per-packet (vm2's identifier address, weights 50/50), rounds interleaved;
  packets delivered per second at the receiver, median over rounds, ratio vs plain IPv6
  (seed 002: ~0.5x above 10 Mbit/s; target >= 0.9x);
* the egress programs' cost per packet under each policy (the identifier route's lwt program
  and ilnp0's tc program together: balanced packets run both): BPF run_time_ns / run_cnt deltas
  (lab/ilnp_lab/bpfstats.py) over a fixed-rate UDP run (kernel.bpf_stats_enabled on only for
  those runs, restored after), ratio vs failover;
* split accuracy: per-packet 80/20, N datagrams, counted at the receiver by source locator.

Prints numbers and ratios; asserts nothing. Run as root after scripts/setup.sh:

    sudo .venv/bin/python bench/balance.py [--seconds 5] [--rounds 3] [--split 10000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab"))

from ilnp_lab import analysis, balancing, bpfstats, pcap  # noqa: E402
from ilnp_lab.capture import Capture  # noqa: E402
from ilnp_lab.addr import identifier_address  # noqa: E402
from ilnp_lab.testbed import Testbed, stop_process  # noqa: E402

FRAME = 128
POLICIES = ("failover", "per-flow", "per-packet")


def udp(vm1, vm2, dst: str, payload: int, seconds: float, rate: str = "0", packets: int | None = None) -> dict:
    """iperf3 UDP vm1 -> dst: packets sent and delivered (per second) from iperf3's report."""
    srv = vm2.spawn("iperf3", "-s", "-1", "-B", dst)
    vm2.wait_listening(5201)
    args = ["iperf3", "-c", dst, "-u", "-b", rate, "-l", str(payload), "-J"]
    args += ["-k", str(packets)] if packets else ["-t", str(seconds)]
    r = vm1.run(*args, check=False, timeout=seconds + 60)
    stop_process(srv)
    try:
        s = json.loads(r.stdout)["end"]["sum"]
        return {"sent_pps": s["packets"] / s["seconds"], "delivered_pps": (s["packets"] - s["lost_packets"]) / s["seconds"],
                "lost_pct": s["lost_percent"], "packets": s["packets"]}
    except (ValueError, KeyError) as e:
        return {"error": f"{e}: {r.stderr[-300:]}"}


def set_policy(ds, policy: str) -> None:
    for d in ds:
        d.ctl_raw("policy", policy)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=5, help="seconds per rate measurement")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the rate measurement")
    ap.add_argument("--cost-pps", default="20M", help="iperf3 -b of the fixed-rate run for the BPF cost")
    ap.add_argument("--split", type=int, default=10000, help="datagrams of the split-accuracy run")
    ap.add_argument("--json", help="write results here")
    args = ap.parse_args()
    res: dict = {"frame": FRAME, "rate": {}, "bpf_ns": {}, "split": None}
    ilnp_len, plain_len = balancing.udp_payload(FRAME, True), balancing.udp_payload(FRAME, False)
    with Testbed() as bed:
        nodes = balancing.build(bed)
        vm1, vm2 = nodes["vm1"], nodes["vm2"]
        plain_dst, ilnp_dst = balancing.slaac(vm2, "cafe"), identifier_address(balancing.VM2_NID)
        rate = {k: [] for k in ("plain, no ilnpd", "plain", *POLICIES)}
        for _ in range(args.rounds):
            rate["plain, no ilnpd"].append(udp(vm1, vm2, plain_dst, plain_len, args.seconds))
        ds = balancing.start_daemons(nodes, "per-packet", (50, 50))
        for i in range(args.rounds):
            order = ["plain", *POLICIES]
            order = order[i % len(order):] + order[:i % len(order)]
            for k in order:
                if k in POLICIES:
                    set_policy(ds, k)
                r = udp(vm1, vm2, plain_dst if k == "plain" else ilnp_dst, plain_len if k == "plain" else ilnp_len,
                        args.seconds)
                rate[k].append(r)
                print(f"  round {i} {k:16} {r}", file=sys.stderr)
        res["rate"] = {k: {"runs": v, "median_pps": analysis.median([r.get("delivered_pps") for r in v]),
                           "median_sent_pps": analysis.median([r.get("sent_pps") for r in v])} for k, v in rate.items()}

        progs = bpfstats.daemon_progs(ds[0].proc.pid)
        with bpfstats.stats_enabled():
            for k in POLICIES:
                set_policy(ds, k)
                before = bpfstats.prog_stats(progs)
                udp(vm1, vm2, ilnp_dst, ilnp_len, args.seconds, rate=args.cost_pps)
                after = bpfstats.prog_stats(progs)
                d = {p: (after[p][0] - before[p][0], after[p][1] - before[p][1])
                     for p in ("ilnp_route_xmit", "ilnp_egress") if p in after}
                # every datagram runs the identifier route's lwt program first (if it is on);
                # a balanced one is left to ilnp0's tc program, which runs too
                ns, n = sum(t for t, _ in d.values()), d.get("ilnp_route_xmit", d["ilnp_egress"])[1]
                res["bpf_ns"][k] = {"ns_per_pkt": ns / n if n else None, "runs": n}

        set_policy(ds, "per-packet")
        balancing.set_weights(ds, (80, 20))
        caps = {seg: Capture(vm2, bed.workdir / f"split-{seg}.pcap", iface=dev, direction="in", snaplen=128)
                for seg, (dev, _, _) in balancing.NETS.items()}
        udp(vm1, vm2, ilnp_dst, ilnp_len, 60, rate="10M", packets=args.split)
        got = {seg: 0 for seg in balancing.NETS}
        for c in caps.values():
            for x in pcap.read(c.stop()):
                if x.proto == 17 and x.nonces and x.ports and x.ports[1] == 5201:
                    for seg, (_, _, pre) in balancing.NETS.items():
                        got[seg] += x.src_loc == pre
        total = sum(got.values())
        res["split"] = {"weights": [80, 20], "sent": args.split, "by_source_locator": got, "received": total,
                        "cafe_pct": 100 * got["cafe"] / max(1, total)}
        for d in ds:
            d.stop()

    base, sbase = res["rate"]["plain"]["median_pps"], res["rate"]["plain"]["median_sent_pps"]
    print(f"{FRAME}-byte frames, iperf3 UDP -b 0 vm1 -> vm2, {args.rounds} interleaved rounds x {args.seconds} s; "
          "medians of packets/s delivered at the receiver and sent by the sender; ratios vs plain IPv6 with ilnpd "
          "running")
    for k, v in res["rate"].items():
        m, sm = v["median_pps"], v["median_sent_pps"]
        ratio = f"{m / base:.2f}x" if m and base else "-"
        sratio = f"{sm / sbase:.2f}x" if sm and sbase else "-"
        print(f"  {k:16} delivered {m or 0:9.0f} pps {ratio:>6}   sent {sm or 0:9.0f} pps {sratio:>6}   "
              f"delivered per run {[round(r.get('delivered_pps') or 0) for r in v['runs']]}")
    fo = res["bpf_ns"]["failover"]["ns_per_pkt"]
    print(f"egress program per packet (run_time_ns/run_cnt, iperf3 -b {args.cost_pps}, {args.seconds} s):")
    for k, v in res["bpf_ns"].items():
        ratio = f"{v['ns_per_pkt'] / fo:.2f}x" if v["ns_per_pkt"] and fo else "-"
        print(f"  {k:12} {v['ns_per_pkt'] or 0:8.1f} ns  {ratio:>6} vs failover  ({v['runs']} runs)")
    s = res["split"]
    print(f"split, per-packet 80/20, {s['sent']} datagrams: at the receiver by source locator {s['by_source_locator']} "
          f"(received {s['received']}): cafe {s['cafe_pct']:.2f} %, deviation {s['cafe_pct'] - 80:+.2f} pp "
          f"(bound 0.1 % + 1 packet = {0.1 + 100 / max(1, s['received']):.2f} pp)")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
