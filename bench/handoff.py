#!/usr/bin/env python3
"""Handoff benchmark (issue #3): the seed 000 moves (LAN/WAN x LAN/WAN) with ILNPv6 soft
and hard handoff, and plain IPv6 and MPTCP measured in the same run on the same testbed.

    sudo .venv/bin/python bench/handoff.py [--runs 3] [--seconds 12] [--jobs 1] [--out out/bench-handoff]

Prints, per move and scheme (medians over the runs): the Locator Update handshake
(first LU sent -> ack, at the MN) against the round trip of the path the MN moved
to, measured with ping in the same run (target: <= RTT + 1 ms); the interruption (longest
gap in data at the MN) against plain IPv6 and MPTCP; packets lost; LUs per handoff;
and "locator usable -> LU on the wire", from the new network's first Router
Advertisement to the first LU (target: <= 10 ms). Numbers, never assertions: the
tests assert behaviour, this prints what it measured. Uses the lab's mobility plugin
(lab/ilnp_lab/mobility.py) on experiments/seed000-tcp.toml.
"""

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab"))

from ilnp_lab import analysis, mobility, topology  # noqa: E402


def f(x, nd=1):
    return "—" if x is None else f"{x:.{nd}f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=12, help="flow length (the timeline is scaled to it)")
    ap.add_argument("--out", type=Path, default=Path("out/bench-handoff"))
    ap.add_argument("--move", action="append", help="only this move (repeatable)")
    ap.add_argument("--jobs", type=int, default=1, help="testbeds at once (timing is cleaner with 1)")
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    if args.jobs > cores:
        ap.error(f"--jobs {args.jobs} is more than this machine's {cores} cores: timed testbeds would compete for the CPUs")
    ex = topology.load("seed000-tcp")
    cells, _ = mobility.cells(ex, args.move, ["ilnp-soft", "ilnp-hard", "mptcp", "plain"])
    mobility.install_sigterm()
    results, interrupted = mobility.run_all(ex, cells, args.runs, args.seconds, args.out, seed=1,
                                           jobs=max(1, args.jobs))
    ok = [r for r in results if r.get("ok")]
    print(f"\nhandoff benchmark: {len(ok)}/{len(results)} runs, {args.seconds:g} s flows, medians over {args.runs} runs")
    print(f"{'move':8} {'scheme':10} {'RTT new':>8} {'LU->ack':>8} {'ratio':>6} {'<=RTT+1':>7} {'leave LU':>8} "
          f"{'interr.':>8} {'lost':>6} {'LUs':>4} {'RA->LU':>7} {'survived':>8}")
    for move in ex.moves if not args.move else args.move:
        new_router = "r3"  # the MN joins R3's network
        old_router = "r2"
        for scheme in ("ilnp-soft", "ilnp-hard", "mptcp", "plain"):
            rs = [r for r in ok if r["move"] == move and r["scheme"] == scheme]
            if not rs:
                continue
            rtt_new = analysis.median([r["rtt_ms"].get(new_router) for r in rs])
            join = analysis.median([r["lu"][0]["delay_ms"] if r["lu"] else None for r in rs])
            leave = analysis.median([r["lu"][1]["delay_ms"] if len(r["lu"]) > 1 else None for r in rs])
            ratio = join / rtt_new if join is not None and rtt_new else None
            meets = "—" if join is None or rtt_new is None else ("yes" if join <= rtt_new + 1 else "no")
            print(f"{move:8} {scheme:10} {f(rtt_new, 2):>8} {f(join, 2):>8} {f(ratio, 2):>6} {meets:>7} {f(leave, 2):>8} "
                  f"{f(analysis.median([max((e['interruption_ms'] or 0 for e in r['flow']['events']), default=None) for r in rs])):>8} "
                  f"{f(analysis.median([r['flow']['lost'] for r in rs]), 0):>6} {f(analysis.median([r['lu_copies'] for r in rs]) if scheme.startswith('ilnp') else None, 0):>4} "
                  f"{f(analysis.median([r['ra_to_lu_ms'] for r in rs]), 2):>7} {sum(r['session_survived'] for r in rs)}/{len(rs):<6}")
        print(f"{'':8} (RTT old path via {old_router}: {f(analysis.median([r['rtt_ms'].get(old_router) for r in ok if r['move'] == move]), 2)} ms)")
    print("columns: RTT new = CN -> R3 ping (ms); LU->ack = first LU (on joining R3) sent -> ack at the MN (ms); "
          "ratio = LU->ack / RTT new; leave LU = the LU on leaving R2 (ms); interr. = the longer of the interruptions at "
          "join and leave (longest gap in TCP data delivered at the MN around each event, analysis.py; ms); lost = seed 000 §5.4 lost packets; LUs = LU packets sent by the MN in the run; RA->LU = new network's "
          "first RA -> first LU on the wire (ms)")
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
