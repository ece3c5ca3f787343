"""The README demo: a TCP session survives a move between two networks.

Testbed (seed 000 Fig. 8): CN — R1 — {R2, R3} — MN. R2 and R3 are plain Linux
routers advertising 2001:db8:2::/64 and 2001:db8:3::/64 with radvd. The MN runs
an unmodified iperf3 server, the CN an unmodified iperf3 client, both through
ilnpd. Mid-flow the MN joins R3's network and then leaves R2's: ilnpd sends a
nonce-protected Locator Update, the CN acknowledges it, and the flow goes on.

    sudo scripts/demo.sh              # eBPF fast path
    sudo scripts/demo.sh --userspace  # userspace reference data path
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from .addr import CN_NID, MN_NID, l64
from .capture import Capture
from .daemon import Ilnpd, Peer, binary
from .fixtures import mobility_topology
from .services import radvd
from .testbed import Testbed, stop_process, wait_for


def say(msg: str) -> None:
    print(f"\033[1m==> {msg}\033[0m", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ilnp-demo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--userspace", action="store_true", help="use the userspace reference data path")
    ap.add_argument("--seconds", type=int, default=10, help="length of the TCP flow")
    args = ap.parse_args(argv)
    mode = "userspace" if args.userspace else "ebpf"
    secs = max(args.seconds, 6)

    with Testbed() as bed:
        say(f"testbed {bed.tag}: CN — R1 — {{R2, R3}} — MN; routers are plain Linux, R2/R3 run radvd")
        t = mobility_topology(bed)
        cn, r1, mn = t["cn"], t["r1"], t["mn"]
        radvd(t["r2"], "eth-mn", "2001:db8:2::/64")
        radvd(t["r3"], "eth-mn", "2001:db8:3::/64")
        wait_for(lambda: "2001:db8:2:" in mn.ip("-6", "addr", "show", "eth-r2").stdout, timeout=15, what="SLAAC")
        dcn = Ilnpd(cn, ["eth0"], nid=CN_NID, datapath=mode, peers=[Peer("mn", MN_NID, [(l64("2001:db8:2::/64"), 10)])]).start()
        dmn = Ilnpd(mn, ["eth-r2", "eth-r3"], nid=MN_NID, datapath=mode,
                    peers=[Peer("cn", CN_NID, [(l64("2001:db8:a::/64"), 10)])]).start()
        cn_id, mn_id = dcn.identifier_address(), dmn.identifier_address()
        say(f"ilnpd on CN and MN ({mode} data path); MN identifier address {mn_id}")
        print(dmn.ctl_raw("locator", "show").stdout)

        cap = bed.workdir / "r1.pcap"
        tcpd = Capture(r1, cap, "ip6[6] == 60 and ip6[40] == 58", iface="eth-cn")  # ICMPv6 behind a Destination Options header
        mon = subprocess.Popen(mn.cmd(binary("ilnpctl"), "-s", dmn.socket, "monitor"), stdout=subprocess.PIPE,
                               text=True, start_new_session=True)
        bed.procs.append(mon)
        srv = mn.spawn("iperf3", "-s", "-1", "-B", mn_id)
        mn.wait_listening(5201)
        say(f"unmodified iperf3: CN [{cn_id}] → MN [{mn_id}] for {secs}s")
        cli = subprocess.Popen(cn.cmd("iperf3", "-c", mn_id, "-t", str(secs), "-b", "200M", "-i", "1", "--forceflush"),
                               stdout=subprocess.PIPE, text=True, start_new_session=True)
        bed.procs.append(cli)
        t0 = time.monotonic()
        moves = [(2, "MN joins R3's network (eth-r3 up)", lambda: mn.ip("link", "set", "eth-r3", "up")),
                 (secs / 2 + 1, "MN leaves R2's network (eth-r2 down)", lambda: mn.ip("link", "set", "eth-r2", "down"))]
        lines = []
        import selectors
        sel = selectors.DefaultSelector()
        sel.register(cli.stdout, selectors.EVENT_READ, "iperf3")
        sel.register(mon.stdout, selectors.EVENT_READ, "ilnpd")
        while cli.poll() is None or any(k.fileobj is cli.stdout for k in sel.get_map().values()):
            now = time.monotonic() - t0
            if moves and now >= moves[0][0]:
                _, what, act = moves.pop(0)
                say(f"t={now:4.1f}s {what}")
                act()
            for key, _ in sel.select(timeout=0.1):
                line = key.fileobj.readline()
                if not line:
                    sel.unregister(key.fileobj)
                    continue
                if key.data == "iperf3":
                    lines.append(line)
                    print(f"    iperf3 | {line.rstrip()}")
                elif any(w in line for w in ("lu_", "local_locators", "remote_locator")):
                    print(f"    ilnpd  | {line.rstrip()}")
            if time.monotonic() - t0 > secs + 20:
                break
        srv.wait(timeout=10)
        stop_process(mon)
        tcpd.stop()
        ok = cli.returncode == 0 and any("receiver" in l for l in lines)
        say("the Locator Updates R1 forwarded, decoded by tshark (ICMPv6 type 156):")
        r = r1.run("tshark", "-r", str(cap), "-Y", "icmpv6.type == 156", "-T", "fields", "-e", "frame.time_relative",
                   "-e", "ipv6.src", "-e", "ipv6.dst", "-e", "ipv6.opt.ilnp_nonce", "-e", "icmpv6.ilnp.nb_locs",
                   "-e", "icmpv6.ilnp.nb_locator", check=False)
        for line in r.stdout.splitlines()[:8]:
            print("    " + line)
        say("CN's ILCC entry for the MN now:")
        print(dcn.ctl_raw("ilcc", "show").stdout)
        dcn.stop()
        dmn.stop()
        if ok:
            say("the TCP session survived the move between networks; testbed removed")
            return 0
        say("the TCP session did NOT survive")
        return 1


if __name__ == "__main__":
    sys.exit(main())
