"""The README demo: two namespaced hosts, unmodified apps over ILNPv6, the capture decoded.

    sudo scripts/demo.sh            # eBPF fast path
    sudo scripts/demo.sh --userspace
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from .daemon import Ilnpd, Peer
from .testbed import Testbed, three_node


def say(msg: str) -> None:
    print(f"\033[1m==> {msg}\033[0m", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ilnp-demo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--userspace", action="store_true", help="use the userspace reference data path")
    ap.add_argument("--seconds", type=int, default=3, help="iperf3 duration")
    args = ap.parse_args(argv)
    mode = "userspace" if args.userspace else "ebpf"

    cn_nid, mn_nid = "0200:00ff:fe00:000c", "0200:00ff:fe00:000d"
    with Testbed() as bed:
        say(f"testbed {bed.tag}: CN — R1 (plain IPv6 router) — MN")
        cn, r1, mn = three_node(bed)
        dcn = Ilnpd(cn, ["eth0"], nid=cn_nid, datapath=mode, peers=[Peer("mn", mn_nid, [("2001:0db8:000b:0000", 10)])]).start()
        dmn = Ilnpd(mn, ["eth0"], nid=mn_nid, datapath=mode, peers=[Peer("cn", cn_nid, [("2001:0db8:000a:0000", 10)])]).start()
        cn_id, mn_id = dcn.identifier_address(), dmn.identifier_address()
        say(f"ilnpd running ({mode}); CN identifier address {cn_id}, MN {mn_id}")
        print(dcn.ctl_raw("locator", "show").stdout)

        cap = bed.workdir / "r1.pcap"
        tcpd = r1.spawn("tcpdump", "-i", "eth-mn", "-U", "--immediate-mode", "-n", "-s", "200", "-w", str(cap), "ip6")
        time.sleep(0.5)
        say(f"unmodified iperf3: CN → [{mn_id}] for {args.seconds}s")
        srv = mn.spawn("iperf3", "-s", "-1", "-B", mn_id)
        time.sleep(0.3)
        r = cn.run("iperf3", "-c", mn_id, "-t", str(args.seconds), "-J", check=False, timeout=args.seconds + 30)
        srv.wait(timeout=10)
        if r.returncode != 0:
            print(r.stdout[-2000:], r.stderr[-2000:], file=sys.stderr)
            return 1
        gbps = json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"] / 1e9
        print(f"    TCP goodput over ILNPv6: {gbps:.2f} Gbit/s")
        from .testbed import stop_process

        time.sleep(0.3)
        stop_process(tcpd)

        say("what R1 saw (tshark decodes the ILNPv6 nonce option):")
        t = r1.run("tshark", "-r", str(cap), "-Y", "ipv6.opt.ilnp_nonce", "-c", "6", "-T", "fields",
                   "-e", "ipv6.src", "-e", "ipv6.dst", "-e", "ipv6.opt.ilnp_nonce", "-e", "_ws.col.Protocol", check=False)
        print("    src\t\t\t\tdst\t\t\t\tnonce\t\tproto")
        for line in t.stdout.splitlines():
            print("    " + line)
        say("CN's ILCC (ilnpctl ilcc show):")
        print(dcn.ctl_raw("ilcc", "show").stdout)
        say("CN's counters (ilnpctl stats):")
        print(dcn.ctl_raw("stats").stdout)
        dcn.stop()
        dmn.stop()
        say("done; testbed removed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
