"""A misbehaving DNS server for the bad-input tests (BIND refuses to serve these
answers). Behaviour by the query name's first label:

  badnid   NID with a 5-byte RDATA, a good L64
  servfail SERVFAIL to everything
  spoof    first an answer with the wrong ID (NID ...:0666), then the right one (NID ...:0777)
  silent   no answer at all
  other    NXDOMAIN

usage: python3 fake_dns.py ADDR PORT
"""
import socket
import struct
import sys

NID, L64 = 104, 106


def question_end(q: bytes) -> int:
    i = 12
    while q[i]:
        i += 1 + q[i]
    return i + 5


def labels(q: bytes) -> list[str]:
    out, i = [], 12
    while q[i]:
        out.append(q[i + 1:i + 1 + q[i]].decode().lower())
        i += 1 + q[i]
    return out


def answer(q: bytes, rcode: int = 0, rrs=(), qid: int | None = None) -> bytes:
    end = question_end(q)
    qid = struct.unpack("!H", q[:2])[0] if qid is None else qid
    hdr = struct.pack("!HHHHHH", qid, 0x8580 | rcode, 1, len(rrs), 0, 0)
    body = q[12:end]
    for rtype, rdata in rrs:
        body += struct.pack("!HHHIH", 0xC00C, rtype, 1, 30, len(rdata)) + rdata
    return hdr + body


def rr_nid(last: int) -> tuple[int, bytes]:
    return NID, struct.pack("!H", 10) + bytes.fromhex("020000fffe00") + struct.pack("!H", last)


def rr_l64() -> tuple[int, bytes]:
    return L64, struct.pack("!H", 10) + bytes.fromhex("20010db8000b0000")


def main() -> None:
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.bind((sys.argv[1], int(sys.argv[2])))
    print("ready", flush=True)
    while True:
        q, peer = s.recvfrom(4096)
        try:
            name = labels(q)
            qtype = struct.unpack("!H", q[question_end(q) - 4:question_end(q) - 2])[0]
        except (IndexError, struct.error):
            continue
        first = name[0] if name else ""
        if first == "silent":
            continue
        if first == "servfail":
            s.sendto(answer(q, rcode=2), peer)
        elif first == "badnid":
            rrs = {NID: [(NID, b"\x00\x0a\x01\x02\x03")], L64: [rr_l64()]}.get(qtype, [])
            s.sendto(answer(q, rrs=rrs), peer)
        elif first == "spoof":
            good = {NID: [rr_nid(0x0777)], L64: [rr_l64()]}.get(qtype, [])
            bad = {NID: [rr_nid(0x0666)], L64: [rr_l64()]}.get(qtype, [])
            qid = struct.unpack("!H", q[:2])[0]
            s.sendto(answer(q, rrs=bad, qid=qid ^ 0xFFFF), peer)
            s.sendto(answer(q, rrs=good), peer)
        else:
            s.sendto(answer(q, rcode=3), peer)


if __name__ == "__main__":
    main()
