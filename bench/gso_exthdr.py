#!/usr/bin/env python3
"""Minimal reproducer (no ilnpd, no BPF): Linux IPv6 forwarding measures a GSO
packet that carries an extension header by reading that header as TCP.

Topology: h1 ── r ── h2 (veth, MTU 1500, r forwards). A TCP sender in h1 puts a
16-byte Destination Options header on every packet with the ordinary socket
option (IPV6_DSTOPTS), holding one skippable experimental option (type 0x1e,
RFC 4727) whose data byte at header offset 12 is chosen (`--byte12`). The hosts
keep their default offloads (veth: TSO/GSO on), so r receives 64 KB GSO packets.

What the kernel does (v6.18, net/ipv6/ip6_output.c, net/core/gso.c):
  ip6_rcv_core():  skb->transport_header = network_header + sizeof(ipv6hdr)
                   (extension headers are not parsed on a forwarded packet)
  ip6_forward() -> ip6_pkt_too_big(skb, mtu):
      skb->len > mtu, skb_is_gso(skb) && skb_gso_validate_network_len(skb, mtu)
  skb_gso_validate_network_len() -> skb_gso_network_seglen():
      (transport_header - network_header) + skb_gso_transport_seglen()
      = 40 + tcp_hdrlen(skb) + gso_size  for SKB_GSO_TCPV6,
  and tcp_hdrlen() = doff * 4 read from byte 12 of the "transport header", which
  is byte 12 of the first extension header. The real segment is
  40 + ext + tcp + gso_size. When 4 * (byte12 >> 4) > ext + tcp, every GSO
  packet is answered with Packet Too Big (MTU 1500, no help to the sender: its
  path MTU already is 1500) and dropped; only single-segment retransmissions get
  through. With byte12 >> 4 small the check under-counts and passes.
  The same holds for GRO-built packets (router ingress with GRO on): GRO pulls
  the extension header (ipv6_gro_receive -> ipv6_gro_pull_exthdrs) but
  ip6_rcv_core resets the transport header before forwarding. UDP GSO is not
  affected (its transport length is sizeof(struct udphdr), a constant).

Usage (root):  python3 bench/gso_exthdr.py [--seconds 2] [--json]
Prints one row per case; asserts nothing (tests/test_gso_exthdr.py does).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

PORT = 5301
IPV6_DSTOPTS = 59
H1, H2 = "fd00:a::1", "fd00:b::2"

SINK = r"""
import socket, sys, time
s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1)
print("ready", flush=True)
c, _ = s.accept(); n = 0; buf = bytearray(1 << 20)
end = time.monotonic() + float(sys.argv[3])
while time.monotonic() < end:
    c.settimeout(max(0.01, end - time.monotonic()))
    try:
        k = c.recv_into(buf)
    except socket.timeout:
        break
    if not k: break
    n += k
print(n, flush=True)
"""

SOURCE = r"""
import socket, sys, time
dst, port, secs, opt = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
if opt != "none":
    s.setsockopt(socket.IPPROTO_IPV6, 59, bytes.fromhex(opt))
s.settimeout(5); s.connect((dst, port)); s.settimeout(0.2)
buf = b"\0" * (1 << 20); end = time.monotonic() + secs
while time.monotonic() < end:
    try: s.send(buf)
    except socket.timeout: pass
    except OSError: break
s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, bytes(8))  # close = RST, no drain
s.close()
"""


def dstopts(byte12: int) -> str:
    """16-byte DestOpts header: Next Header (filled by the kernel), Hdr Ext Len 1,
    option 0x1e (experimental, act 00 = skip) with 12 data bytes; header byte 12
    is data byte 8."""
    hdr = bytearray([0, 1, 0x1E, 12] + [0] * 12)
    hdr[12] = byte12
    return hdr.hex()


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(args, check=check, capture_output=True, text=True)


def nsx(ns: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return sh("ip", "netns", "exec", ns, *args, check=check)


class Net:
    """h1 ── r ── h2, names unique per process."""

    def __init__(self) -> None:
        tag = f"gx{os.getpid() % 100000}"
        self.h1, self.r, self.h2 = f"{tag}h1", f"{tag}r", f"{tag}h2"
        self.ns = [self.h1, self.r, self.h2]
        for n in self.ns:
            sh("ip", "netns", "add", n)
        try:
            self._links(tag)
        except BaseException:
            self.close()
            raise

    def _links(self, tag: str) -> None:
        for host, peer, pfx, hid in ((self.h1, "a", "fd00:a::", 1), (self.h2, "b", "fd00:b::", 2)):
            dev_h, dev_r = f"{tag}{peer}h", f"{tag}{peer}r"
            sh("ip", "link", "add", dev_h, "netns", host, "type", "veth", "peer", "name", dev_r, "netns", self.r)
            nsx(host, "ip", "link", "set", dev_h, "name", "eth0")
            nsx(self.r, "ip", "link", "set", dev_r, "name", f"eth{peer}")
            nsx(host, "ip", "-6", "addr", "add", f"{pfx}{hid}/64", "dev", "eth0", "nodad")
            nsx(self.r, "ip", "-6", "addr", "add", f"{pfx}ff/64", "dev", f"eth{peer}", "nodad")
            nsx(host, "ip", "link", "set", "eth0", "up")
            nsx(host, "ip", "link", "set", "lo", "up")
            nsx(self.r, "ip", "link", "set", f"eth{peer}", "up")
            nsx(host, "ip", "-6", "route", "add", "default", "via", f"{pfx}ff")
        nsx(self.r, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
        # resolve the neighbours first: a SYN queued behind ND costs a second
        nsx(self.h1, "ping", "-c", "2", "-i", "0.2", "-W", "2", H2, check=False)

    def offloads(self, host_tso: bool, router_gro: bool) -> None:
        for h in (self.h1, self.h2):
            nsx(h, "ethtool", "-K", "eth0", "tso", "on" if host_tso else "off")
        for d in ("etha", "ethb"):
            nsx(self.r, "ethtool", "-K", d, "gro", "on" if router_gro else "off")

    def ptb_sent(self) -> int:
        for line in nsx(self.r, "cat", "/proc/net/snmp6").stdout.splitlines():
            k, _, v = line.partition(" ")
            if k == "Icmp6OutPktTooBigs":
                return int(v.strip())
        raise RuntimeError("no Icmp6OutPktTooBigs in the router's /proc/net/snmp6")

    def close(self) -> None:
        for n in self.ns:
            sh("ip", "netns", "del", n, check=False)


def transfer(net: Net, opt: str, seconds: float) -> dict:
    """One TCP transfer h1 -> h2: bytes h2 received in `seconds` from the
    connection's start, and the Packet Too Big messages the router sent."""
    ptb0 = net.ptb_sent()
    sink = subprocess.Popen(
        ["ip", "netns", "exec", net.h2, sys.executable, "-c", SINK, H2, str(PORT), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert sink.stdout is not None
        if sink.stdout.readline().strip() != "ready":
            raise RuntimeError("sink did not start")
        nsx(net.h1, sys.executable, "-c", SOURCE, H2, str(PORT), str(seconds + 0.5), opt)
        out, _ = sink.communicate(timeout=30)
    finally:
        if sink.poll() is None:
            sink.kill()
            sink.wait()
    got = int(out.strip().splitlines()[-1])
    return {"bytes": got, "gbit_s": got * 8 / seconds / 1e9, "ptb": net.ptb_sent() - ptb0}


# (name, header (None = plain IPv6), host TSO, router GRO)
CASES = [
    ("plain, TSO", None, True, False),
    ("dstopts byte12=0xf0, TSO", 0xF0, True, False),
    ("dstopts byte12=0x70, TSO", 0x70, True, False),
    ("dstopts byte12=0x00, TSO", 0x00, True, False),
    ("dstopts byte12=0xf0, TSO off, router GRO", 0xF0, False, True),
    ("dstopts byte12=0x70, TSO off, router GRO", 0x70, False, True),
    ("dstopts byte12=0xf0, TSO off, no GRO", 0xF0, False, False),
]


def run(seconds: float, cases=CASES) -> list[dict]:
    net = Net()
    rows = []
    try:
        for name, b12, tso, gro in cases:
            net.offloads(tso, gro)
            r = transfer(net, "none" if b12 is None else dstopts(b12), seconds)
            rows.append({"case": name, "byte12": b12, "host_tso": tso, "router_gro": gro, **r})
    finally:
        net.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows = run(a.seconds)
    if a.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'case':44} {'Gbit/s':>8} {'PTB sent by r':>14}")
    for r in rows:
        print(f"{r['case']:44} {r['gbit_s']:8.2f} {r['ptb']:14d}")


if __name__ == "__main__":
    main()
