"""The adversary suite's programs that run inside the testbed's namespaces (`python -c`):
the CN's echo service, the peers' clients, the attacker's sender and replayer, the slow DNS
clients, the CN's local DNS client and the proxy's upstream. Each prints or logs what the
suite reads; the arguments are documented above each one.
"""

# The CN's application: a UDP echo service that logs what reached it, one line a datagram.
ECHO = r"""
import socket, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
out = open(sys.argv[3], "a", buffering=1)
while True:
    d, a = s.recvfrom(2048)
    out.write(d[:32].decode(errors="replace") + "\n")
    s.sendto(d, a)
"""
# The MN's client: RATE datagrams/s "PREFIX N" ("real N") to the CN while the file STOP does not exist.
CLIENT = r"""
import os, socket, sys, time
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 0)); s.setblocking(False)
dst, rate, stop = (sys.argv[2], int(sys.argv[3])), float(sys.argv[4]), sys.argv[5]
prefix = (sys.argv[6] if len(sys.argv) > 6 else "real").encode()
n = 0
while not os.path.exists(stop):
    try:
        s.sendto(b"%s %d" % (prefix, n), dst)
    except OSError:
        pass
    n += 1
    try:
        while s.recv(2048): pass
    except OSError:
        pass
    time.sleep(1 / rate)
"""
# The attacker's sender: packets (hex, one a line) at RATE per second through a raw socket.
SENDER = r"""
import socket, sys, time
pkts = [bytes.fromhex(l) for l in open(sys.argv[1]) if l.strip()]
rate = float(sys.argv[2])
s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
t0 = time.monotonic()
for i, p in enumerate(pkts):
    if rate > 0:
        delay = t0 + i / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    dst = socket.inet_ntop(socket.AF_INET6, p[24:40])
    s.sendto(p, (dst, 0))
"""
# v4-replay, on X: the captured datagram (an IPv6 packet, the UDP payload) sent to the CN's
# v4 port from X_V4, one new port per replay, GAP s apart; every Echo Request that comes back
# to one of those ports is answered from it, with the nonce seen (its Destination Options
# header, hex). Prints what it did (JSON).
V4_REPLAYER = r"""
import json, select, socket, struct, sys, time
replay, cn4, dopt = bytes.fromhex(sys.argv[1]), sys.argv[2], bytes.fromhex(sys.argv[3])
x4, port0, n, gap, linger = sys.argv[4], int(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7]), float(sys.argv[8])
def csum(b):
    if len(b) % 2: b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b)); s = (s >> 16) + (s & 0xffff); s += s >> 16
    return ~s & 0xffff
socks, out = [], {"replays": 0, "received": 0, "echo_requests": 0, "answered": 0}
t0 = time.monotonic()
while True:
    now = time.monotonic()
    if len(socks) < n and now >= t0 + len(socks) * gap:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((x4, port0 + len(socks)))
        s.sendto(replay, (cn4, 6740)); socks.append(s); out["replays"] += 1
        continue
    if len(socks) == n and now >= t0 + (n - 1) * gap + linger:
        break
    for s in select.select(socks, [], [], 0.02)[0]:
        d, a = s.recvfrom(4000)
        out["received"] += 1
        if len(d) < 64 or d[0] >> 4 != 6 or d[6] != 60:
            continue
        off = 40 + (d[41] + 1) * 8  # after the Destination Options header
        if d[40] != 58 or len(d) < off + 8 or d[off] != 128:
            continue
        out["echo_requests"] += 1
        src, dst = d[24:40], d[8:24]  # the reply: from the peer's address to the CN
        icmp = bytearray(d[off:]); icmp[0] = 129; icmp[2:4] = b"\0\0"
        icmp[2:4] = struct.pack("!H", csum(src + dst + struct.pack("!I3xB", len(icmp), 58) + bytes(icmp)))
        s.sendto(struct.pack("!IHBB", 6 << 28, len(dopt) + len(icmp), 60, 64) + src + dst + dopt + bytes(icmp), a)
        out["answered"] += 1
print(json.dumps(out))
"""
# slow-dns, on X: N TCP connections to the proxy, each sent a length prefix and one byte of
# a 40-byte message, then nothing; when each was closed (s after its connect; null: open
# after HOLD s). Prints JSON.
SLOW_DNS = r"""
import json, select, socket, sys, time
host, n, hold = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
conns, closed = [], []
for i in range(n):
    t = time.monotonic()
    try:
        s = socket.create_connection((host, 53), timeout=2)
        s.sendall(b"\x00\x28\x12")
        s.setblocking(False)
        conns.append((s, t)); closed.append(None)
    except OSError:
        conns.append((None, t)); closed.append(0.0)
end = time.monotonic() + hold
while time.monotonic() < end and any(c is None for c in closed):
    live = {s: i for i, ((s, _), c) in enumerate(zip(conns, closed)) if c is None}
    for s in select.select(list(live), [], [], 0.05)[0]:
        try:
            d = s.recv(64)
        except OSError:
            d = b""
        if not d:
            i = live[s]
            closed[i] = round(time.monotonic() - conns[i][1], 3)
            s.close()
print(json.dumps({"closed_after_s": closed}))
"""
# slow-dns, on the CN: a local client of the proxy at 127.0.0.1:53 while the attack runs:
# one TCP query, then a UDP query every 0.5 s for DURATION s (each waits 1 s for its answer).
DNS_CLIENT = r"""
import json, socket, struct, sys, time
duration = float(sys.argv[1])
def query(i):
    return struct.pack("!HHHHHH", i, 0x0100, 1, 0, 0, 0) + b"\x05other\x03lab\x07example\x00" + struct.pack("!HH", 1, 1)
def tcp(i):
    try:
        s = socket.create_connection(("127.0.0.1", 53), timeout=1); s.settimeout(1)
        q = query(i); s.sendall(struct.pack("!H", len(q)) + q)
        h = s.recv(2)
        return len(h) == 2
    except OSError:
        return False
out = {"tcp_during": tcp(1), "udp_sent": 0, "udp_answered": 0, "udp_slowest_s": 0.0}
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(1)
t0 = time.monotonic()
while time.monotonic() < t0 + duration:
    t = time.monotonic(); out["udp_sent"] += 1
    u.sendto(query(100 + out["udp_sent"]), ("127.0.0.1", 53))
    try:
        u.recv(512); out["udp_answered"] += 1
        out["udp_slowest_s"] = max(out["udp_slowest_s"], round(time.monotonic() - t, 3))
    except OSError:
        pass
    time.sleep(max(0.0, t + 0.5 - time.monotonic()))
if len(sys.argv) > 2:
    while not __import__("os").path.exists(sys.argv[2]):
        time.sleep(0.05)
    out["tcp_after"] = tcp(2)
print(json.dumps(out))
"""
# slow-dns: the proxy's upstream on the CN, [::1]:PORT over UDP: NXDOMAIN to everything
UPSTREAM = r"""
import socket, struct, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.bind(("::1", int(sys.argv[1])))
print("ready", flush=True)
while True:
    q, a = s.recvfrom(4096)
    i = 12
    while i < len(q) and q[i]:
        i += 1 + q[i]
    s.sendto(q[:2] + struct.pack("!HHHHH", 0x8183, 1, 0, 0, 0) + q[12:i + 5], a)
"""
