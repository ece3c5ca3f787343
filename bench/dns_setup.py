#!/usr/bin/env python3
"""Connection set-up by name (issue #13): resolve + TCP connect + first byte, ILNPv6
through ilnpd's resolver proxy vs plain IPv6 with the same BIND, in one run, interleaved.

    sudo .venv/bin/python bench/dns_setup.py [--n 30]

Topology: CN — R1 — MN, PC — R1 (a plain IPv6 client), NS — R1 (BIND). The ILNP client (CN)
resolves mn.lab.example through its proxy (NID + L64 → identifier address); the plain client
(PC, no ilnpd) resolves plain.lab.example (AAAA of MN's plain address) straight from BIND;
both connect to the same server on MN, which sends one byte on accept. Cells:
  ilnp-first: both ILCCs flushed before each try (new session: slow path, entry creation)
  ilnp-warm:  the session to MN exists (fast path)
  plain:      plain IPv6
Prints medians [IQR] in ms and ILNP minus plain (target: <= 1 ms). Numbers, no assertions.
"""

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab"))

from ilnp_lab.addr import CN_NID, MN_NID, identifier_address  # noqa: E402
from ilnp_lab.bind import Bind, Host, resolv_conf  # noqa: E402
from ilnp_lab.daemon import Ilnpd  # noqa: E402
from ilnp_lab.fixtures import CN_L64, DNS_ADDR, MN_L64, dns_server, three_node  # noqa: E402
from ilnp_lab.testbed import Testbed  # noqa: E402

CLIENT = r"""
import socket, sys, time
name, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for _ in range(n):
    sys.stdin.readline()  # go
    t = time.perf_counter()
    ai = socket.getaddrinfo(name, port, socket.AF_INET6, socket.SOCK_STREAM)
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.connect(ai[0][4])
    assert s.recv(1) == b"!"
    print(f"{(time.perf_counter() - t) * 1e3:.4f} {ai[0][4][0]}", flush=True)
    s.close()
"""

SERVER = r"""
import socket
s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("::", 9000)); s.listen(64)
print("ready", flush=True)
while True:
    c, _ = s.accept(); c.sendall(b"!"); c.close()
"""


def q(xs):
    xs = sorted(xs)
    qs = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
    return f"{statistics.median(xs):7.3f} [{qs[0]:.3f}-{qs[2]:.3f}]"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=30, help="tries per cell")
    a = ap.parse_args()
    with Testbed() as bed:
        cn, r1, mn = three_node(bed)
        ns = dns_server(bed, r1)
        pc = bed.add_node("pc")
        bed.link(pc, "eth0", r1, "eth-pc")
        r1.add_addr("eth-pc", "2001:db8:c1::1/64")
        pc.add_addr("eth0", "2001:db8:c1::c/64")
        pc.add_route("default", "2001:db8:c1::1")
        Bind(ns, DNS_ADDR, [Host("mn", nid=MN_NID, l64s=[(MN_L64, 10)]), Host("cn", nid=CN_NID, l64s=[(CN_L64, 10)]),
                            Host("plain", aaaa=["2001:db8:b::d"])]).start()
        dcn = Ilnpd(cn, ["eth0"], nid=CN_NID, extra={"dns": {"upstream": f"[{DNS_ADDR}]:53"}}).start()
        dmn = Ilnpd(mn, ["eth0"], nid=MN_NID).start()
        resolv_conf(cn, "127.0.0.1")
        resolv_conf(pc, DNS_ADDR)
        srv = mn.spawn("python3", "-c", SERVER, stdout=subprocess.PIPE)
        assert srv.stdout.readline().strip() == b"ready"
        cells = {"ilnp-first": (cn, "mn.lab.example"), "ilnp-warm": (cn, "mn.lab.example"),
                 "plain": (pc, "plain.lab.example")}
        # the clients are driven through stdin ("go" per try), so not bed.spawn (no stdin pipe)
        procs = {k: subprocess.Popen(node.cmd("python3", "-c", CLIENT, name, "9000", str(a.n)),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                 for k, (node, name) in cells.items()}
        res = {k: [] for k in cells}
        addrs = {}
        try:
            for i in range(a.n):
                for k in cells:  # interleaved: A B C A B C
                    if k == "ilnp-first":  # both ends: a live entry on MN would refuse CN's new nonce
                        dcn.ctl("ilcc", "flush")
                        dmn.ctl("ilcc", "flush")
                    time.sleep(0.02)
                    procs[k].stdin.write("go\n")
                    procs[k].stdin.flush()
                    ms, addr = procs[k].stdout.readline().split()
                    res[k].append(float(ms))
                    addrs[k] = addr
        finally:
            for p in procs.values():
                p.kill()
                p.wait()
        print(f"connection set-up by name (resolve + connect + first byte), {a.n} tries per cell, ms:")
        for k in cells:
            print(f"  {k:10s} {q(res[k])}   ({addrs.get(k)})")
        plain = statistics.median(res["plain"])
        for k in ("ilnp-first", "ilnp-warm"):
            print(f"  added by ILNP ({k}): {statistics.median(res[k]) - plain:+.3f} ms (target <= 1 ms)")
        assert addrs["ilnp-warm"] == identifier_address(MN_NID)
    return 0


if __name__ == "__main__":
    sys.exit(main())
