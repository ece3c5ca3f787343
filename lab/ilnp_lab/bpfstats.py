"""What an ilnpd process's eBPF programs and maps cost, read with bpftool: the objects a
given daemon holds (found through its fds, because bpftool lists every namespace's), the
programs' run_time_ns / run_cnt, a map's locked memory. Used by `admission.py` and
`bench/admission.py`. `kernel.bpf_stats_enabled` (machine-wide) must be 1 while run times
are taken: `stats_enabled()` sets it and puts the old value back, and also holds a
`BPF_ENABLE_STATS` fd (the kernel counts its holders apart from the sysctl), so another
process that sets the sysctl back to 0 meanwhile (a concurrent bench, seed 004) does not
stop the counting: seen as measurements with no runs on the shared machine."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import platform
import subprocess
from pathlib import Path

BPF_STATS = Path("/proc/sys/kernel/bpf_stats_enabled")
PROGS = ("ilnp_ingress", "ilnp_egress", "ilnp_route_xmit")


def bpftool(*args: str) -> dict:
    return json.loads(subprocess.run(["bpftool", "-j", *args], capture_output=True, text=True, check=True).stdout)


def fd_ids(pid: int, key: str) -> set[int]:
    """BPF object ids (`prog_id` or `map_id`) process `pid` holds open (its fdinfo)."""
    ids = set()
    for f in Path(f"/proc/{pid}/fdinfo").iterdir():
        try:
            for line in f.read_text().splitlines():
                if line.startswith(key + ":"):
                    ids.add(int(line.split()[1]))
        except OSError:
            pass
    return ids


def daemon_progs(pid: int) -> dict[str, int]:
    """The data-path programs ilnpd `pid` holds (tc ingress and egress, the identifier
    route's lwt xmit program): name -> prog id."""
    out = {}
    for i in fd_ids(pid, "prog_id"):
        p = bpftool("prog", "show", "id", str(i))
        if p.get("name") in PROGS:
            out[p["name"]] = i
    return out


def prog_stats(progs: dict[str, int]) -> dict[str, tuple[int, int]]:
    """name -> (run_time_ns, run_cnt) now."""
    out = {}
    for name, i in progs.items():
        p = bpftool("prog", "show", "id", str(i))
        out[name] = (p.get("run_time_ns", 0), p.get("run_cnt", 0))
    return out


def map_memlock(pid: int, name: str) -> int | None:
    """bytes_memlock of map `name` that ilnpd `pid` holds (None: not held)."""
    for m in fd_ids(pid, "map_id"):
        mm = bpftool("map", "show", "id", str(m))
        if mm.get("name") == name:
            return mm.get("bytes_memlock")
    return None


SYS_BPF = {"x86_64": 321, "aarch64": 280}.get(platform.machine())
BPF_ENABLE_STATS = 32  # enum bpf_cmd (linux/bpf.h)
BPF_STATS_RUN_TIME = 0


def enable_stats_fd() -> int | None:
    """An fd whose lifetime keeps run-time statistics on (bpf(BPF_ENABLE_STATS)); None if
    the kernel or architecture does not offer it."""
    if SYS_BPF is None:
        return None
    attr = (ctypes.c_uint32 * 2)(BPF_STATS_RUN_TIME, 0)
    fd = ctypes.CDLL(None, use_errno=True).syscall(SYS_BPF, BPF_ENABLE_STATS, ctypes.byref(attr),
                                                    ctypes.sizeof(attr))
    return fd if fd >= 0 else None


@contextlib.contextmanager
def stats_enabled():
    """kernel.bpf_stats_enabled = 1 inside (and a BPF_ENABLE_STATS fd held), the previous
    value restored after."""
    old = BPF_STATS.read_text().strip()
    BPF_STATS.write_text("1")
    fd = enable_stats_fd()
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)
        BPF_STATS.write_text(old)
