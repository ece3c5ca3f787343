"""A misbehaving DNS server for the bad-input tests (BIND refuses to serve these
answers). Behaviour by the query name's first label:

  badnid   NID with a 5-byte RDATA, a good L64
  servfail SERVFAIL to everything
  spoof    first an answer with the wrong ID (NID ...:0666), then the right one (NID ...:0777)
  silent   no answer at all
  trunc    over UDP an empty answer with TC set; over TCP NID ...:0888 and a good L64
  other    NXDOMAIN

usage: python3 fake_dns.py ADDR PORT
"""
import socket
import struct
import sys
import threading

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


def qinfo(q: bytes) -> tuple[str, int]:
    name = labels(q)
    return (name[0] if name else ""), struct.unpack("!H", q[question_end(q) - 4:question_end(q) - 2])[0]


def serve_tcp(addr: str, port: int) -> None:
    t = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    t.bind((addr, port))
    t.listen(16)
    while True:
        c, _ = t.accept()
        with c:
            n = struct.unpack("!H", c.recv(2))[0]
            q = b""
            while len(q) < n:
                q += c.recv(n - len(q))
            first, qtype = qinfo(q)
            rrs = {NID: [rr_nid(0x0888)], L64: [rr_l64()]}.get(qtype, []) if first == "trunc" else []
            a = answer(q, rrs=rrs)
            c.sendall(struct.pack("!H", len(a)) + a)


def main() -> None:
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.bind((sys.argv[1], int(sys.argv[2])))
    threading.Thread(target=serve_tcp, args=(sys.argv[1], int(sys.argv[2])), daemon=True).start()
    print("ready", flush=True)
    while True:
        q, peer = s.recvfrom(4096)
        try:
            first, qtype = qinfo(q)
        except (IndexError, struct.error):
            continue
        if first == "trunc":
            a = bytearray(answer(q))
            a[2] |= 0x02  # TC
            s.sendto(bytes(a), peer)
            continue
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
