#!/usr/bin/env python3
"""Writes fuzz/seeds/dns_proxy/: a client's query, the upstream's plain answer and its
answers to the lookup's questions (NID, L64, L32 of the name, then LP and the targets'
L64), each a 2-byte length and the message (fuzz_targets/dns_proxy.rs documents the
format). The messages are what BIND sends for tests/test_dns.py's zone (names
compressed against the question). Deterministic:
    python3 fuzz/make-dns-seeds.py"""
import ipaddress
import struct
from pathlib import Path

DEST = Path(__file__).resolve().parent / "seeds" / "dns_proxy"
A, AAAA, CNAME, OPT = 1, 28, 5, 41
NID, L32, L64, LP = 104, 105, 106, 107
QNAME = 0xC00C  # pointer to the question's name


def name(n):
    return b"".join(bytes([len(l)]) + l.encode() for l in n.rstrip(".").split(".")) + b"\0"


def header(id_, flags, qd, an, ar=0):
    return struct.pack(">HHHHHH", id_, flags, qd, an, 0, ar)


def rr(owner, rtype, ttl, rdata):
    o = struct.pack(">H", owner) if isinstance(owner, int) else name(owner)
    return o + struct.pack(">HHIH", rtype, 1, ttl, len(rdata)) + rdata


def opt(size):
    return b"\0" + struct.pack(">HHIH", OPT, size, 0, 0)


def query(id_, qname, qtype, edns=None):
    m = header(id_, 0x0100, 1, 0, 1 if edns else 0) + name(qname) + struct.pack(">HH", qtype, 1)
    return m + (opt(edns) if edns else b"")


def answer(id_, qname, qtype, records, rcode=0):
    return header(id_, 0x8180 | rcode, 1, len(records)) + name(qname) + struct.pack(">HH", qtype, 1) + b"".join(records)


def l64(pref, loc):
    return struct.pack(">H", pref) + ipaddress.IPv6Address(loc).packed[:8]


def nid(pref, n):
    return struct.pack(">HQ", pref, n)


def lp(pref, fqdn):
    return struct.pack(">H", pref) + name(fqdn)


def seed(*msgs):
    return b"".join(struct.pack(">H", len(m)) + m for m in msgs)


MN = "mn.lab.example."
q = query(0x1234, MN, AAAA, edns=1232)
plain = answer(0x1234, MN, AAAA, [rr(QNAME, AAAA, 30, ipaddress.IPv6Address("2001:db8:3::1").packed)])
nid_ans = answer(0, MN, NID, [rr(QNAME, NID, 30, nid(10, 0x5A5A_0000_0000_0042))])
empty = lambda qn, t: answer(0, qn, t, [])  # noqa: E731
seeds = {
    # NID + L64 of the name: the identifier address
    "aaaa-nid-l64": seed(q, plain, nid_ans, answer(0, MN, L64, [rr(QNAME, L64, 5, l64(10, "2001:db8:3::"))]), empty(MN, L32)),
    # no L64: the LP leads to net.lab.example's L64s
    "aaaa-lp": seed(
        q,
        plain,
        nid_ans,
        empty(MN, L64),
        empty(MN, L32),
        answer(0, MN, LP, [rr(QNAME, LP, 60, lp(10, "net.lab.example."))]),
        answer(0, "net.lab.example.", L64, [rr(QNAME, L64, 20, l64(10, "2001:db8:c::")), rr(QNAME, L64, 20, l64(20, "2001:db8:d::"))]),
    ),
    # an alias: the CNAME chain is answered before the identifier address; an L32 beside the L64
    "aaaa-cname-l32": seed(
        query(0x0077, "www.lab.example.", AAAA),
        answer(0x0077, "www.lab.example.", AAAA, [rr(QNAME, CNAME, 300, name(MN))]),
        answer(0, "www.lab.example.", NID, [rr(QNAME, CNAME, 300, name(MN)), rr(MN, NID, 30, nid(10, 0x42))]),
        answer(0, "www.lab.example.", L64, [rr(QNAME, CNAME, 300, name(MN)), rr(MN, L64, 30, l64(10, "2001:db8:3::"))]),
        answer(0, "www.lab.example.", L32, [rr(QNAME, CNAME, 300, name(MN)), rr(MN, L32, 30, struct.pack(">H", 20) + bytes([192, 0, 2, 10]))]),
    ),
    # not ours: an A query passed through; the upstream's answer is over 512 bytes (truncated)
    "a-pass-through": seed(
        query(0x0A0A, "cn.lab.example.", A),
        answer(0x0A0A, "cn.lab.example.", A, [rr(QNAME, A, 30, bytes([192, 0, 2, i])) for i in range(40)]),
        answer(0, MN, NID, [], rcode=3),
    ),
    # an answer over 512 bytes that hickory cannot read (the last RDATA length runs past the
    # end): truncated to its header and the question (found by this target: it was sent whole)
    "a-unreadable-answer-over-512": seed(
        query(0x0C0C, "cn.lab.example.", A),
        answer(0x0C0C, "cn.lab.example.", A, [rr(QNAME, A, 30, bytes([192, 0, 2, i])) for i in range(40)])[:-6]
        + b"\xff\xff\xc0\x00\x02\x27",
    ),
    # the upstream fails every question: SERVFAIL for the client
    "aaaa-upstream-fails": seed(query(0x0BAD, MN, AAAA), b""),
}
DEST.mkdir(parents=True, exist_ok=True)
for k, v in seeds.items():
    (DEST / k).write_bytes(v)
print(f"{len(seeds)} seeds in {DEST}")
