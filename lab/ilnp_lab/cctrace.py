"""A TCP bulk sender that records its own congestion window, and the analysis of what
it records: how the lab checks a congestion control against its published behaviour
(tests/test_cc.py: Hybla's window growth, Veno's back-off after random vs congestive loss).

    python3 -m ilnp_lab.cctrace sink PORT
    python3 -m ilnp_lab.cctrace send DST PORT CC SECONDS OUT.json [INTERVAL_MS]

`send` sets the congestion control on its socket (TCP_CONGESTION) before connecting,
writes as fast as the window allows for SECONDS and samples getsockopt(TCP_INFO) every
INTERVAL_MS (default 2) from a second thread: the window and ssthresh as the kernel holds
them, with no capture or `ss` polling in between. `sink` reads and discards one connection.
"""

from __future__ import annotations

import json
import socket
import struct
import sys
import threading
import time

# struct tcp_info (include/uapi/linux/tcp.h): 8 one-byte fields, then u32s
_INFO = struct.Struct("=8B24I")
CA_OPEN, CA_DISORDER, CA_CWR, CA_RECOVERY, CA_LOSS = range(5)


def tcp_info(sock: socket.socket) -> dict:
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _INFO.size)
    f = _INFO.unpack(raw[:_INFO.size])
    # u32s: rto ato snd_mss rcv_mss unacked sacked lost retrans fackets, 4 x last_*, pmtu
    # rcv_ssthresh rtt rttvar snd_ssthresh snd_cwnd advmss reordering rcv_rtt rcv_space total_retrans
    u = f[8:]
    return {"ca_state": f[1], "mss": u[2], "rtt_us": u[15], "ssthresh": u[17], "cwnd": u[18], "retrans": u[23]}


def send(dst: str, port: int, cc: str, seconds: float, out: str, interval_ms: float = 2.0) -> None:
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    s.connect((dst, port))
    used = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).split(b"\0")[0].decode()
    t0 = time.monotonic()
    samples, stop = [], threading.Event()

    def sample():
        while not stop.is_set():
            samples.append({"t": round(time.monotonic() - t0, 4)} | tcp_info(s))
            time.sleep(interval_ms / 1000)
    th = threading.Thread(target=sample, daemon=True)
    th.start()
    buf = bytes(65536)
    while time.monotonic() - t0 < seconds:
        s.send(buf)
    stop.set()
    th.join()
    # abort (RST) rather than leave an orphan draining the send buffer: the orphan would hold
    # the congestion control (for a BPF one, its struct_ops map) until it timed out
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    with open(out, "w") as f:
        json.dump({"cc": used, "samples": samples}, f)


def sink(port: int) -> None:
    ls = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("::", port))
    ls.listen(1)
    c, _ = ls.accept()
    try:
        while c.recv(1 << 20):
            pass
    except ConnectionResetError:
        pass  # the sender aborts at the end


# ---------- analysis (pure functions over the samples)

def ca_slopes(samples: list[dict], min_s: float = 0.5) -> list[float]:
    """Window growth in congestion avoidance, in segments per second: one least-squares
    slope per stretch in the Open state with cwnd >= ssthresh lasting at least min_s."""
    out, run = [], []

    def close():
        if len(run) >= 5 and run[-1]["t"] - run[0]["t"] >= min_s:
            n = len(run)
            mt = sum(r["t"] for r in run) / n
            mc = sum(r["cwnd"] for r in run) / n
            var = sum((r["t"] - mt) ** 2 for r in run)
            out.append(sum((r["t"] - mt) * (r["cwnd"] - mc) for r in run) / var)
    for r in samples:
        if r["ca_state"] == CA_OPEN and r["cwnd"] >= r["ssthresh"]:
            run.append(r)
        else:
            close()
            run = []
    close()
    return out


def backoffs(samples: list[dict]) -> list[float]:
    """ssthresh / cwnd at each entry into fast recovery: the multiplicative decrease the
    congestion control chose (ssthresh as set on entry, over the window just before)."""
    out = []
    for a, b in zip(samples, samples[1:]):
        if a["ca_state"] in (CA_OPEN, CA_DISORDER) and b["ca_state"] == CA_RECOVERY and a["cwnd"] >= 4:
            out.append(b["ssthresh"] / a["cwnd"])
    return out


def median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return (s[n // 2] + s[(n - 1) // 2]) / 2 if n else float("nan")


def main(argv: list[str]) -> int:
    if argv[:1] == ["sink"] and len(argv) == 2:
        sink(int(argv[1]))
    elif argv[:1] == ["send"] and len(argv) in (6, 7):
        send(argv[1], int(argv[2]), argv[3], float(argv[4]), argv[5], *(float(x) for x in argv[6:]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
