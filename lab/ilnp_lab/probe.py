"""Sequence-numbered UDP probe: sends `rate` datagrams/s to the peer for `secs` seconds
and records every sequence number it receives from the peer (run one at each end).

    python3 -m ilnp_lab.probe ME PEER PORT SECS RATE OUT.json    (PEER: an address or a name)

Standard library only: it runs with the namespace's system python3. OUT.json:
{"sent": N, "send_errors": N, "got": [seq, ...], "arrivals": [[seq, t], ...], "t0": T} where t
is the first arrival of seq in seconds since the probe's start T (CLOCK_MONOTONIC, the same
clock in every process and namespace of the host), for measuring interruptions. A send that fails (no route) counts as sent: the datagram is lost. Both
ends start 0.5 s after launch so each is listening before the first datagram.
"""

import json
import select
import socket
import sys
import time


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
    t0 = time.monotonic() + 0.5
    nxt = t0
    while time.monotonic() < t0:
        time.sleep(0.01)
    while time.monotonic() - t0 < secs + 1.0:
        now = time.monotonic()
        if now >= nxt and now - t0 < secs:
            try:
                s.sendto(seq.to_bytes(4, "big"), (peer, port))
                sent += 1
            except OSError:
                errors += 1  # e.g. no route after the network left: the datagram counts as sent and lost
                sent += 1
            seq += 1
            nxt += 1.0 / rate
        r, _, _ = select.select([s], [], [], 0.001)
        while r:
            try:
                d, _a = s.recvfrom(64)
                got.setdefault(int.from_bytes(d[:4], "big"), round(time.monotonic() - t0, 6))
            except BlockingIOError:
                break
    with open(out, "w") as f:
        json.dump({"sent": sent, "send_errors": errors, "got": sorted(got), "t0": t0,
                   "arrivals": sorted(([q, t] for q, t in got.items()), key=lambda x: x[1])}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
