"""Sequence-numbered UDP probe: sends `rate` datagrams/s to the peer for `secs` seconds
and records every sequence number it receives from the peer (run one at each end).

    python3 -m ilnp_lab.probe ME PEER PORT SECS RATE OUT.json    (PEER: an address or a name)

Standard library only: it runs with the namespace's system python3. OUT.json:
{"sent": N, "send_errors": N, "got": [seq, ...], "arrivals": [[seq, t], ...], "t0": T, "peer_end": N} where t
is the first arrival of seq in seconds since the probe's start T (CLOCK_MONOTONIC, the same
clock in every process and namespace of the host), for measuring interruptions. A send that fails (no route) counts as sent: the datagram is lost. Both
ends start 0.5 s after launch so each is listening before the first datagram.

After its last datagram each end sends an end mark (sequence number END, then its count
sent), once; it listens for the peer's datagrams until 1 s after its own sending
ended, or less: until the peer's end mark came with every datagram the peer sent, or
0.25 s after the mark came (a datagram arriving later still would have been overtaken by
the mark sent after it by more than 0.25 s). The mark is not counted in `got`;
`peer_end` is the count the peer's mark gave (null: no mark came).
"""

import json
import select
import socket
import sys
import time

END = 0xFFFFFFFF  # the sequence number of the end mark


def main(argv: list[str]) -> int:
    if len(argv) != 6:
        print(__doc__, file=sys.stderr)
        return 2
    me, peer, port, secs, rate, out = argv[0], argv[1], int(argv[2]), float(argv[3]), int(argv[4]), argv[5]
    # PEER may be a name: resolved once, by the system resolver, as an application would
    peer = socket.getaddrinfo(peer, port, socket.AF_INET6, socket.SOCK_DGRAM)[0][4][0]
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.bind((me, port))
    s.setblocking(False)
    got: dict[int, float] = {}
    sent, errors, seq = 0, 0, 0
    marked = False  # our end mark sent
    peer_end: tuple[float, int] | None = None  # when the peer's end mark came, the count it gave
    t0 = time.monotonic() + 0.5
    nxt = t0
    while time.monotonic() < t0:
        time.sleep(0.01)
    while (now := time.monotonic()) - t0 < secs + 1.0:
        if now >= nxt and now - t0 < secs:
            try:
                s.sendto(seq.to_bytes(4, "big"), (peer, port))
                sent += 1
            except OSError:
                errors += 1  # e.g. no route after the network left: the datagram counts as sent and lost
                sent += 1
            seq += 1
            nxt += 1.0 / rate
        elif now - t0 >= secs and not marked:
            marked = True
            try:
                s.sendto(END.to_bytes(4, "big") + sent.to_bytes(4, "big"), (peer, port))
            except OSError:
                pass  # lost like a datagram: the peer listens its full second
        if marked and peer_end and (len(got) >= peer_end[1] or now - peer_end[0] >= 0.25):
            break
        r, _, _ = select.select([s], [], [], 0.001)
        while r:
            try:
                d, _a = s.recvfrom(64)
                q = int.from_bytes(d[:4], "big")
                if q == END:
                    if peer_end is None and len(d) >= 8:
                        peer_end = (time.monotonic(), int.from_bytes(d[4:8], "big"))
                    continue
                got.setdefault(q, round(time.monotonic() - t0, 6))
            except BlockingIOError:
                break
    with open(out, "w") as f:
        json.dump({"sent": sent, "send_errors": errors, "got": sorted(got), "t0": t0,
                   "peer_end": peer_end and peer_end[1],
                   "arrivals": sorted(([q, t] for q, t in got.items()), key=lambda x: x[1])}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
