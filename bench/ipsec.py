#!/usr/bin/env python3
"""What authenticated sessions cost (issue #44 item 4): ESP over ILNPv6 (strongSwan, the guide's
swanctl.conf) against plain ILNPv6 and WireGuard between the same two hosts, in one run;
throughput and the interruption of a hard move, as ratios against plain ILNPv6.

    sudo .venv/bin/python bench/ipsec.py [--seconds 5] [--rounds 3] [--flow-s 32]

The schemes, the testbed and the definitions are lab/ilnp_lab/authsessions.py's (the lab's
`ilnp-lab run ipsec` runs the same and writes a report). Prints, asserts nothing. Where the
kernel lacks esp6 or the WireGuard module it says so: the rows are then strongSwan's
user-space libipsec and wireguard-go.
"""

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab"))

from ilnp_lab import authsessions  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--flow-s", type=int, default=32, help="the hard move's flows (WireGuard's keepalive is 25 s)")
    ap.add_argument("--outage-s", type=float, default=1.0)
    ap.add_argument("--out", type=Path, default=Path("/tmp") / f"ilnp-bench-ipsec-{os.getpid()}")
    a = ap.parse_args()
    cfg = {"schemes": list(authsessions.SCHEMES), "seconds": a.seconds, "rounds": a.rounds,
           "flow_s": a.flow_s, "outage_s": a.outage_s}
    print("backends:", authsessions.backends())
    res = authsessions.measure(cfg, a.out)
    print("\n".join(authsessions.table(res)))
    for r in res["runs"]:
        if not r["ok"]:
            print(f"{r['scheme']}: FAILED: {r.get('error')}")
    (a.out / "result.json").write_text(json.dumps(res, indent=1))
    print(f"(raw: {a.out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
