#!/usr/bin/env python3
"""Does this kernel's IPv6 TCP undo its RTO backoff on an ICMPv6 "no route" (RFC 6069,
TCP-LD)? Issue #15: the fix in reach for ILNP's hard handoff (docs/experiments.md, "Seed 003
(DIME)"). Prints numbers; asserts nothing. Needs root, ip, tcpdump; no ilnpd.

Two namespaces A — B (veth, ~0 ms RTT, so the sender's RTO starts at the 200 ms minimum).
A sends 1000 B every 10 ms over TCP to B. At t0, B black-holes its route to A (B's acks
die, A's segments still reach B's capture): A goes into exponential RTO backoff. After
`--outage` s the route is restored (the "LU acked" moment of a hard handoff). Then, per
mode:
  none   nothing: A resumes at its next retransmission timer;
  icmp   `--icmps` ICMPv6 Destination Unreachable, code 0 (no route), quoting
         (A, B, sport, dport, seq = snd_una), sent by a raw ICMPv6 socket *inside A to
         A's own address* (it loops back and reaches tcp_v6_err like a router's error);
  wrong  the same with seq = snd_una + 1000 (RFC 6069 requires seq == snd_una: a control).
snd_una is the seq of A's latest retransmission in B's capture (the head segment).
Per run: restore → A's first data segment after it (from B's capture), and for icmp/wrong
the ICMP send → that segment.

    sudo python3 bench/rfc6069_probe.py [--runs 3] [--outage 5] [--icmps 1]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

A_ADDR, B_ADDR, PORT = "fd00:6069::1", "fd00:6069::2", 5001

INJECT = r"""
import socket, struct, sys, time
a, b, sport, dport, seq, ack, n = sys.argv[1:8]
inner_tcp = struct.pack('!HHIIBBHHH', int(sport), int(dport), int(seq), int(ack), 0x50, 0x10, 65535, 0, 0)
inner_ip = struct.pack('!IHBB', 6 << 28, len(inner_tcp), 6, 64) + socket.inet_pton(socket.AF_INET6, a) \
    + socket.inet_pton(socket.AF_INET6, b)
icmp = struct.pack('!BBHI', 1, 0, 0, 0) + inner_ip + inner_tcp  # type 1 code 0; the kernel fills the checksum
r = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
print(time.time(), flush=True)
for _ in range(int(n)):
    r.sendto(icmp, (a, 0))
"""
RECV = f"import socket\ns=socket.socket(socket.AF_INET6);s.bind(('{B_ADDR}',{PORT}));s.listen()\nc,_=s.accept()\nwhile c.recv(65536): pass"
SEND = f"import socket,time\ns=socket.create_connection(('{B_ADDR}',{PORT}))\nwhile True:\n s.send(b'x'*1000);time.sleep(0.01)"
SEG = re.compile(r"^(\d+\.\d+) IP6 \S+\.(\d+) > \S+: Flags \[[^\]]*\], seq (\d+):\d+, ack (\d+)", re.M)


def sh(cmd: str, check: bool = True) -> str:
    return subprocess.run(cmd, shell=True, check=check, capture_output=True, text=True).stdout


def data_segments(cap: str) -> list[tuple[float, int, int, int]]:
    """(time, sport, seq, ack) of A's data segments in B's capture."""
    out = sh(f"tcpdump -r {cap} -S -nn -tt 'src {A_ADDR} and tcp dst port {PORT} and ip6[4:2] > 32' 2>/dev/null")
    return [(float(m[1]), int(m[2]), int(m[3]), int(m[4])) for m in SEG.finditer(out)]


def one_run(tag: str, mode: str, outage: float, icmps: int) -> dict:
    a, b = f"{tag}a", f"{tag}b"
    cap = f"/tmp/{tag}.pcap"
    procs: list[subprocess.Popen] = []
    try:
        sh(f"ip netns add {a} && ip netns add {b}")
        sh(f"ip link add va netns {a} type veth peer name vb netns {b}")
        for ns, dev, addr in ((a, "va", A_ADDR), (b, "vb", B_ADDR)):
            sh(f"ip -n {ns} link set lo up && ip -n {ns} addr add {addr}/64 dev {dev} nodad && ip -n {ns} link set {dev} up")
        procs.append(subprocess.Popen(f"exec ip netns exec {b} tcpdump -i vb -w {cap} -U -s 128 tcp",
                                      shell=True, stderr=subprocess.DEVNULL))
        procs.append(subprocess.Popen(["ip", "netns", "exec", b, sys.executable, "-c", RECV]))
        time.sleep(1.0)
        procs.append(subprocess.Popen(["ip", "netns", "exec", a, sys.executable, "-c", SEND]))
        time.sleep(1.5)
        sh(f"ip -n {b} -6 route add blackhole {A_ADDR}/128")
        time.sleep(outage)
        sh(f"ip -n {b} -6 route del blackhole {A_ADDR}/128")
        t_restore = time.time()
        ss = sh(f"ip netns exec {a} ss -tin dst [{B_ADDR}]")
        backoff = re.search(r"backoff:(\d+)", ss)
        rto = re.search(r"\brto:(\d+)", ss)
        res = {"mode": mode, "backoff": int(backoff[1]) if backoff else 0, "rto_ms": int(rto[1]) if rto else None}
        t_icmp = None
        if mode != "none":
            time.sleep(0.05)
            t, sport, seq, ack = data_segments(cap)[-1]  # the latest retransmission: seq == snd_una
            if mode == "wrong":
                seq = (seq + 1000) % 2**32
            out = sh(f"ip netns exec {a} {sys.executable} -c \"{INJECT}\" {A_ADDR} {B_ADDR} {sport} {PORT} {seq} {ack} {icmps}")
            t_icmp = float(out.split()[0])
        time.sleep(max(4.0, outage))
        after = [s for s in data_segments(cap) if s[0] > t_restore]
        res["restore_to_data_ms"] = round((after[0][0] - t_restore) * 1000, 1) if after else None
        if t_icmp is not None:
            res["icmp_to_data_ms"] = round((after[0][0] - t_icmp) * 1000, 1) if after else None
        return res
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()
        sh(f"ip netns del {a}", check=False)
        sh(f"ip netns del {b}", check=False)
        if os.path.exists(cap):
            os.unlink(cap)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--outage", type=float, default=5.0)
    ap.add_argument("--icmps", type=int, default=1)
    args = ap.parse_args()
    print(f"kernel {os.uname().release}; outage {args.outage} s; {args.icmps} ICMP(s) per injection")
    results: dict[str, list[dict]] = {"none": [], "icmp": [], "wrong": []}
    for i in range(args.runs):
        for mode in results:
            r = one_run(f"r69{os.getpid() % 10000}{i}{mode[0]}", mode, args.outage, args.icmps)
            results[mode].append(r)
            print(r, flush=True)
    for mode, rs in results.items():
        vals = [r["restore_to_data_ms"] for r in rs if r["restore_to_data_ms"] is not None]
        med = statistics.median(vals) if vals else float("nan")
        print(f"{mode:6s} restore -> first data segment: median {med:.1f} ms over {len(vals)} runs {vals}")


if __name__ == "__main__":
    main()
