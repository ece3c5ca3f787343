"""tcpdump in a testbed node: the one way the lab, the demo and the tests start a capture.

A capture is written as packets arrive (`-U --immediate-mode`), so a run cut short still
leaves a readable pcap, and `Capture(...)` returns only once tcpdump says it is listening:
packets sent after that are in the file.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from .addr import ID_NET
from .testbed import StepError, stop_process


class Capture:
    """tcpdump on `iface` of `node` ("any": every interface) into `path`, with the filter
    `filt`; `direction` "in"/"out"/"inout" (tcpdump -Q; None: its default), `snaplen` bytes
    of each packet (0: all of it)."""

    def __init__(self, node, path: str | Path, filt: str = "ip6", iface: str = "any", direction: str | None = None,
                 snaplen: int = 0):
        self.node, self.iface, self.path = node, iface, str(path)
        args = ["tcpdump", "-i", iface, *(["-Q", direction] if direction else []), "-U", "--immediate-mode", "-n",
                "-s", str(snaplen), "-w", self.path, filt]
        self.proc: subprocess.Popen = node.spawn(*args, stderr=subprocess.PIPE)
        seen = []
        for _ in range(3):  # "data link type ..." may come before "listening on ..."
            seen.append(self.proc.stderr.readline().decode().strip())
            if "listening" in seen[-1]:
                return
        stop_process(self.proc)
        raise StepError(f"tcpdump on {node.name}/{iface} did not start: {' / '.join(s for s in seen if s)}")

    def stop(self, settle_s: float = 0.3) -> str:
        """Stop after `settle_s` (the last packets in flight reach the file); the pcap's path."""
        time.sleep(settle_s)
        stop_process(self.proc)
        return self.path


def wire_capture(node, path: str | Path, snaplen: int = 160) -> Capture:
    """What a node sends and receives on the wire: every interface but ilnp0, headers only
    (`snaplen`). ilnp0 is left out: besides identifier-form packets it carries, a second time,
    every wire packet the ingress program hands to ilnpd (LUs, stale-locator packets), which
    would count twice."""
    filt = f"ip6 and not net {ID_NET}"
    if node.nl.link_lookup(ifname="ilnp0"):
        filt += f" and not ifindex {node.index('ilnp0')}"
    return Capture(node, path, filt, snaplen=snaplen)
