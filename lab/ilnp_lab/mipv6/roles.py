"""The three roles beside a network (home agent on the home link's router, mobile node,
correspondent): their command lines, waiting until each is ready, and their event lines read
back. One home for both users: the lab's `mipv6` / `mipv6-ro` schemes (schemes.py) and the VM's
own checks (tests/system/mipv6_guest.py).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from . import phases

ROLES = ("ha", "mn", "cn")


def node_cmd(role: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "ilnp_lab.mipv6.node", role, *args]


def ha_cmd(home_if: str, ha: str, prefix: str) -> list[str]:
    return node_cmd("ha", "--home-if", home_if, "--ha", ha, "--prefix", prefix)


def mn_cmd(home_if: str, home_prefix: str, hoa: str, ha: str, cn: str | None, ro: bool) -> list[str]:
    return node_cmd("mn", "--home-if", home_if, "--home-prefix", home_prefix, "--hoa", hoa, "--ha", ha,
                    *(["--cn", cn] if cn else []), *(["--ro"] if ro else []))


def cn_cmd(addr: str) -> list[str]:
    return node_cmd("cn", "--addr", addr)


def home_address(prefix: str) -> str:
    """The MN's home address in its home prefix: ::100, as the seeds' testbed had a fixed one."""
    import ipaddress
    return str(ipaddress.IPv6Network(prefix)[0x100])


def wait_ready(paths: dict[str, Path], procs: dict, timeout: float = 60) -> None:
    """Until every role printed its `ready` line; a role that exits first or a timeout is an
    error naming the role and its last output."""
    end = time.time() + timeout
    while time.time() < end:
        for r, p in procs.items():
            if p.poll() is not None:
                raise RuntimeError(f"mipv6 role {r} exited ({p.returncode}): {Path(paths[r]).read_text()[-1500:]}")
        if all('"ready"' in Path(paths[r]).read_text() for r in paths):
            return
        time.sleep(0.1)
    late = [r for r in paths if '"ready"' not in Path(paths[r]).read_text()]
    raise RuntimeError(f"mipv6 roles not ready after {timeout:g} s: {', '.join(late)}")


def read_events(paths: dict[str, Path]) -> tuple[list[dict], dict[str, list[str]]]:
    """The roles' JSON event lines (one wall clock), and whatever else each printed (tracebacks)."""
    events, other = [], {}
    for r, path in paths.items():
        for line in Path(path).read_text().splitlines():
            if line.startswith("{"):
                events.append(json.loads(line))
            elif line.strip():
                other.setdefault(r, []).append(line)
    return sorted(events, key=lambda e: e["t"]), other


def summary(events: list[dict], ha: str, cn: str | None, t0: float = 0.0) -> dict:
    """What a run's scheme reports: the handoff's phases (phases.split), whether the HA and (RO)
    the CN accepted the binding, and when (s after t0) the handoff completed."""
    sp = phases.split(events, ha, cn)
    done = next((e for e in events if e["role"] == "mn" and e["ev"] == ("ro_active" if cn else "tunnel")), None)
    return {"phases": sp, "handoff_delay_ms": sp["handoff_delay_ms"],
            "ha_ba_accepted": any(e["role"] == "mn" and e["ev"] == "ba_rx" and e.get("peer") == ha and e.get("accepted")
                                  for e in events),
            "ro_active": any(e["role"] == "mn" and e["ev"] == "ro_active" for e in events) if cn else None,
            "done_at_s": round(done["t"] - t0, 4) if done else None}
