#!/usr/bin/env python3
"""ILCC admission benchmark (issue #11 "Numbers"). Prints numbers and ratios; asserts nothing.

1. Fast-path cost per packet at 1, 10^3, 10^5, 10^6 established entries: T (the CN of
   three_node) runs ilnpd with `admission = "open"` and a 1.1 M-entry bound; its ILCC is
   filled by `ilnp-flood` from R1 (one nonce-carrying UDP packet per random NID: each makes
   an established entry, in the core and in the BPF map, exactly as a correspondent's
   first packet would; no test hook). At each size an established TCP flow B -> T runs for
   `--seconds` and the cost per run of T's ingress (uplink) and egress (ilnp0) programs is
   read from `bpftool prog show` (run_time_ns / run_cnt, kernel.bpf_stats_enabled=1 for
   the measurement only, restored after). ilnpd's RSS and the `ilnp_ilcc` map's memlock
   are read at each size.
2. Goodput of an established TCP flow B -> T during a random-NID UDP flood to a closed
   port at the highest rate `ilnp-flood` reaches on this machine, vs without, interleaved
   (A B A B), T under `admission = "socket"`.

The slow path's cost per packet against the ILCC's size is measured without namespaces:
`cargo run --release -p ilnp-core --example ilcc_scale`.

    sudo .venv/bin/python bench/admission.py [--seconds 3] [--sizes 1,1000,100000,1000000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab"))

from ilnp_lab.addr import CN_NID, MN_NID, identifier_address  # noqa: E402
from ilnp_lab.bpfstats import daemon_progs, map_memlock, prog_stats, stats_enabled  # noqa: E402
from ilnp_lab.daemon import Ilnpd, Peer, binary  # noqa: E402
from ilnp_lab.fixtures import CN_L64, CN_WIRE, three_node  # noqa: E402
from ilnp_lab.testbed import Testbed, stop_process  # noqa: E402

CN_ID = identifier_address(CN_NID)
SPOOF = "2001:db8:f::"


def iperf(client, server_node, server, seconds):
    srv = server_node.spawn("iperf3", "-s", "-1", "-B", server)
    server_node.wait_listening(5201)
    r = client.run("iperf3", "-c", server, "-t", str(seconds), "-J", check=False, timeout=seconds + 40)
    srv.wait(timeout=15)
    if r.returncode != 0:
        return None
    return json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"] / 1e9


def rss_mib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return None


def flood(r1, count, pps, dport=9, dst=CN_WIRE):
    return r1.spawn(binary("ilnp-flood"), "--dst", dst, "--src-l64", SPOOF, "--count", str(count),
                    "--pps", str(pps), "--dport", str(dport), "--seed", str(int(time.time())),
                    stdout=subprocess.PIPE)


def fill(dt, r1, target, dst=CN_WIRE, deadline_s=None):
    """Random-NID packets from `r1` to `dst` until ilnpd `dt` holds `target` established
    entries (queues drop some), or `deadline_s` seconds have passed. Also bench/datapath.py's."""
    t0 = time.monotonic()
    while (have := dt.status()["admission"]["established"]) < target:
        if deadline_s is not None and time.monotonic() - t0 > deadline_s:
            break
        f = flood(r1, int((target - have) * 1.05) + 10, 40_000, dst=dst)
        f.wait(timeout=600)
        time.sleep(1)
    return dt.status()["admission"]["established"]


def fast_path_scale(args):
    sizes = [int(x) for x in args.sizes.split(",")]
    rows = []
    with Testbed() as bed:
        t, r1, b = three_node(bed)
        dt = Ilnpd(t, ["eth0"], nid=CN_NID, extra={"admission": "open", "ilcc_max_entries": max(sizes) + 100_000,
                                                     "log_level": "warn", "hello_rate_pps": 1, "hello_burst": 1}).start()
        db = Ilnpd(b, ["eth0"], nid=MN_NID, peers=[Peer("t", CN_NID, [(CN_L64, 10)])]).start()
        iperf(b, t, CN_ID, 1)  # B's session: its entry is the first
        progs = daemon_progs(dt.proc.pid)
        assert {"ilnp_ingress", "ilnp_egress"} <= set(progs), progs
        try:
            for n in sizes:
                have = fill(dt, r1, n)
                with stats_enabled():
                    s0 = prog_stats(progs)
                    gbps = iperf(b, t, CN_ID, args.seconds)
                    s1 = prog_stats(progs)
                per = {k: (s1[k][0] - s0[k][0]) / max(1, s1[k][1] - s0[k][1]) for k in progs}
                rows.append({"entries": have, "gbps": gbps, "ns_per_run": per,
                             "runs": {k: s1[k][1] - s0[k][1] for k in progs},
                             "rss_mib": rss_mib(dt.proc.pid),
                             "ilcc_map_memlock_mib": (map_memlock(dt.proc.pid, "ilnp_ilcc") or 0) / 2**20})
                print(json.dumps(rows[-1]), flush=True)
        finally:
            dt.stop()
            db.stop()
    base = rows[0]["ns_per_run"]
    print("\nentries    ingress ns/run (ratio)   egress ns/run (ratio)   TCP Gbit/s   ilnpd RSS MiB   ilnp_ilcc MiB")
    for r in rows:
        i, e = r["ns_per_run"].get("ilnp_ingress", 0), r["ns_per_run"].get("ilnp_egress", 0)
        print(f"{r['entries']:>8}   {i:>8.1f} ({i / max(base.get('ilnp_ingress', 1), 1e-9):.2f}x)"
              f"          {e:>8.1f} ({e / max(base.get('ilnp_egress', 1), 1e-9):.2f}x)"
              f"        {r['gbps'] or 0:>6.2f}       {r['rss_mib']:>8.1f}       {r['ilcc_map_memlock_mib']:>8.1f}")
    return rows


def goodput_under_flood(args):
    """A B A B: without flood, with a flood at `rate` pps (0 = as fast as ilnp-flood goes); the
    flood's rate is what reached T (its `ingress_no_socket` counter over the iperf3 run)."""
    res = {"without": [], "rates": {}}
    with Testbed() as bed:
        t, r1, b = three_node(bed)
        dt = Ilnpd(t, ["eth0"], nid=CN_NID, extra={"log_level": "warn"}).start()
        db = Ilnpd(b, ["eth0"], nid=MN_NID, peers=[Peer("t", CN_NID, [(CN_L64, 10)])]).start()
        iperf(b, t, CN_ID, 1)
        for _ in range(args.rounds):
            for rate in (0, 50_000):
                res["without"].append(iperf(b, t, CN_ID, args.seconds))
                f = flood(r1, 50_000_000, rate)
                time.sleep(0.3)
                c0, t0 = dt.status()["admission"]["counters"]["ingress_no_socket"], time.monotonic()
                g = iperf(b, t, CN_ID, args.seconds)
                c1, t1 = dt.status()["admission"]["counters"]["ingress_no_socket"], time.monotonic()
                stop_process(f)
                r = res["rates"].setdefault(rate, {"gbps": [], "pps_at_t": []})
                r["gbps"].append(g)
                r["pps_at_t"].append((c1 - c0) / (t1 - t0))
        res["status"] = dt.status()["admission"]
        dt.stop()
        db.stop()
    wo = [x or 0 for x in res["without"]]
    base = sum(wo) / len(wo)
    print(f"\nTCP B->T without flood: {[round(x, 2) for x in wo]} Gbit/s")
    for rate, r in res["rates"].items():
        g = [x or 0 for x in r["gbps"]]
        print(f"during a {'max-rate' if rate == 0 else str(rate) + ' pps'} flood ({[round(p) for p in r['pps_at_t']]} pps "
              f"reached T): {[round(x, 2) for x in g]} Gbit/s, {sum(g) / len(g) / max(base, 1e-9):.2f}x")
    print(f"T after: {res['status']}")
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--sizes", default="1,1000,100000,1000000")
    ap.add_argument("--skip-scale", action="store_true")
    ap.add_argument("--skip-goodput", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    out = {}
    if not args.skip_goodput:
        out["goodput"] = goodput_under_flood(args)
    if not args.skip_scale:
        out["scale"] = fast_path_scale(args)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
