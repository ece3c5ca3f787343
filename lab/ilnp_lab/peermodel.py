"""What the lab's correspondent models share (`freebsd`: the authors' FreeBSD 14 ILNP6,
`linux49`: their Linux 4.9 prototype): the model process's sockets, its control loop,
and the test side that starts it in a namespace and drives it.

A model runs in a network namespace. It receives with an AF_PACKET socket (everything
on its interface, before netfilter) and sends with a raw IPPROTO_RAW socket (`mark`:
an SO_MARK for a model whose own stack's routes point elsewhere); an nftables rule keeps
the Linux stack of its namespace from answering ILNP packets arriving on that interface
itself (the kernel would send a Parameter Problem for option 0x8B). It is controlled over
a Unix datagram socket with JSON commands (`{"op": ...}` -> `{"ok": true, ...}`); `quit`
ends it, `log` returns what it noted.
"""

from __future__ import annotations

import ipaddress
import json
import os
import select
import socket
import sys
import threading
import time
import traceback
from pathlib import Path

from .addr import address, groups64

ETH_P_IPV6 = 0x86DD
PACKET_OUTGOING = 4
SO_MARK = 36


class ModelNode:
    """The model process's side: sockets, the log (`self.log`), and hooks for `serve`, which
    answers the `state` (`self.state()`) and `log` commands of every model itself."""

    def open_sockets(self, iface: str, mark: int = 0) -> None:
        self.tx = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
        if mark:
            self.tx.setsockopt(socket.SOL_SOCKET, SO_MARK, mark)
        self.rx = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_IPV6))
        self.rx.bind((iface, ETH_P_IPV6))

    def send(self, pkt: bytes) -> None:
        self.tx.sendto(pkt, (str(ipaddress.IPv6Address(pkt[24:40])), 0))

    def note(self, **kw) -> None:
        kw["t"] = time.monotonic()
        if isinstance(kw.get("nid"), int):
            kw["nid"] = groups64(kw["nid"])
        self.log.append(kw)

    def recv(self) -> tuple[bytes, tuple]:
        return self.rx.recvfrom(65535)

    def fds(self) -> list:
        """More file descriptors `serve` waits on (`readable` is called for each)."""
        return []

    def readable(self, fd) -> None:
        pass

    def tick(self) -> None:
        pass


def serve(node: ModelNode, control: str) -> None:
    """The model's loop: packets in, commands in, timers; until `quit`."""
    if os.path.exists(control):
        os.unlink(control)
    ctl = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    ctl.bind(control)
    while True:
        extra = node.fds()
        r, _, _ = select.select([node.rx, ctl, *extra], [], [], 0.05)
        try:
            if node.rx in r:
                pkt, info = node.recv()
                if info[2] != PACKET_OUTGOING:
                    node.input(pkt)
            for fd in extra:
                if fd in r:
                    node.readable(fd)
            node.tick()
        except Exception as ex:  # a model bug: said in its log and on stderr, the model goes on
            traceback.print_exc()
            node.note(kind="model_error", error=f"{type(ex).__name__}: {ex}")
        if ctl in r:
            data, peer = ctl.recvfrom(65535)
            c = json.loads(data)
            if c.get("op") == "quit":
                ctl.sendto(b"{}", peer)
                return
            try:
                # what every model answers alike: its state and its log; the rest is its own
                op = c.get("op")
                got = node.state() if op == "state" else {"log": node.log} if op == "log" else node.command(c)
                reply = {"ok": True, **got}
            except Exception as ex:  # an error for the test to read, not a dead peer
                reply = {"ok": False, "error": f"{type(ex).__name__}: {ex}"}
            ctl.sendto(json.dumps(reply).encode(), peer)


class ModelPeer:
    """The test side: the model (`python -m MODULE`) in `node` (a lab Node), at `l64:nid`
    on `iface`, driven over its control socket."""

    module = ""  # e.g. "ilnp_lab.freebsd"
    tag = ""  # names its control socket, log file and nftables table

    def __init__(self, node, iface: str, nid: str, l64: str, args: list[str] | None = None):
        self.node, self.iface, self.nid, self.l64 = node, iface, nid, l64
        self.args = list(args or [])
        self.control = f"/run/ilnp-lab/{self.tag}-{node.ns}.sock"
        self.proc = None

    @property
    def wire(self) -> str:
        return address(self.l64, self.nid)

    def start(self):
        Path("/run/ilnp-lab").mkdir(exist_ok=True)
        self.add_locator(self.l64)
        log = open(self.node.bed.workdir / f"{self.tag}-{self.node.name}.log", "w")
        self.proc = self.node.spawn(sys.executable, "-m", self.module, "--iface", self.iface, "--nid", self.nid,
                                    "--l64", self.l64, "--control", self.control, *self.args,
                                    stderr=log, env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)})
        deadline = time.monotonic() + 10
        while not os.path.exists(self.control):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.tag} peer did not start: {log.name}")
            time.sleep(0.05)
        return self

    def add_locator(self, l64: str) -> None:
        """`L64:NID` on the interface (ND answers for it) and the stack kept out of what
        arrives for it there."""
        a = address(l64, self.nid)
        self.node.add_addr(self.iface, f"{a}/64")
        t, i = self.tag, self.iface
        self.node.sh(f"nft add table ip6 {t}; nft add chain ip6 {t} in '{{ type filter hook input priority -300 ; }}'; "
                     f"nft add rule ip6 {t} in ip6 daddr {a} icmpv6 type '{{ nd-neighbor-solicit, nd-neighbor-advert }}' accept; "
                     f"nft add rule ip6 {t} in iifname {i} ip6 daddr {a} drop")

    def cmd(self, op: str, timeout: float = 5, **kw) -> dict:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        me = f"{self.control}.{os.getpid()}.{threading.get_ident()}"
        if os.path.exists(me):
            os.unlink(me)
        s.bind(me)
        try:
            s.settimeout(timeout)
            s.sendto(json.dumps({"op": op, **kw}).encode(), self.control)
            reply = json.loads(s.recv(1 << 20))
        finally:
            s.close()
            os.unlink(me)
        if op != "quit" and not reply.get("ok"):
            raise RuntimeError(f"{self.tag} peer: {op}: {reply.get('error')}")
        return reply

    def log(self, kind: str | None = None) -> list[dict]:
        return [e for e in self.cmd("log")["log"] if kind is None or e["kind"] == kind]

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            try:
                self.cmd("quit", timeout=2)
            except OSError:
                pass
            self.proc.wait(timeout=5)
