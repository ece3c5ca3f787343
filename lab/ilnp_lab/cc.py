"""TCP congestion controls the kernel lacks, loaded as BPF struct_ops for a run.

Seed 000 §6.2 (Figs. 17-19) compares CUBIC with TCP Hybla and TCP Veno; kernels built
without tcp_hybla / tcp_veno get the lab's own implementations (`bpf/cc/hybla.c`,
`bpf/cc/veno.c`, registered under the same names). `loaded(names)` is the one place
that builds and registers them: for each requested name the kernel does not already
offer, it dumps this kernel's BTF to vmlinux.h (bpftool), compiles the source with
clang into a temporary directory, registers it (`bpftool struct_ops register`; the
kernel then lists the name in net.ipv4.tcp_available_congestion_control, in every
network namespace) and, on leaving the `with` (normal end, error, Ctrl-C, the lab's
SIGTERM), unregisters exactly the struct_ops map it registered, by id. A name the kernel
already offers (built in, a module, or registered by someone else) is used as is and
never unregistered by us.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import shutil
import tempfile
from pathlib import Path

from .testbed import StepError, run

CC_DIR = Path(__file__).resolve().parents[2] / "bpf" / "cc"
# congestion control name -> source (the name is the struct's .name in the source)
BPF_CCS = {"hybla": "hybla.c", "veno": "veno.c"}
BTF = Path("/sys/kernel/btf/vmlinux")


def available() -> set[str]:
    """The congestion controls the kernel offers now."""
    return set(Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split())


def can_load() -> str | None:
    """Why the BPF congestion controls cannot be loaded here (None: they can)."""
    for tool in ("clang", "bpftool"):
        if not shutil.which(tool):
            return f"{tool} not found (scripts/setup.sh installs it)"
    if not BTF.exists():
        return f"{BTF} missing (the kernel has no BTF)"
    if not all((CC_DIR / s).exists() for s in BPF_CCS.values()):
        return f"sources missing in {CC_DIR}"
    return None


def offered() -> set[str]:
    """What a run can use: the kernel's own plus those the lab can load."""
    return available() | (set(BPF_CCS) if can_load() is None else set())


def source_sha256(name: str) -> str:
    return hashlib.sha256((CC_DIR / BPF_CCS[name]).read_bytes()).hexdigest()


def build(name: str, workdir: Path) -> Path:
    """Compiles bpf/cc/<name>.c against this kernel's BTF; returns the object."""
    hdr = workdir / "vmlinux.h"
    if not hdr.exists():
        p = run(["bpftool", "btf", "dump", "file", str(BTF), "format", "c"])
        hdr.write_text(p.stdout)
    obj = workdir / f"{name}.o"
    run(["clang", "-O2", "-g", "-Wall", "-Werror", "-target", "bpf", f"-I{workdir}", f"-I{CC_DIR}",
         "-c", str(CC_DIR / BPF_CCS[name]), "-o", str(obj)], timeout=120)
    return obj


def register(obj: Path, name: str) -> int:
    """Registers the object's struct_ops; returns the map id (for unregister)."""
    p = run(["bpftool", "struct_ops", "register", str(obj)], check=False)
    out = (p.stdout + p.stderr).strip()
    m = re.search(rf"Registered tcp_congestion_ops {re.escape(name)} id (\d+)", out)
    if p.returncode != 0 or not m:
        raise StepError(f"bpftool struct_ops register {obj.name} failed ({p.returncode}): {out[-2000:]}")
    return int(m.group(1))


def unregister(map_id: int) -> None:
    run(["bpftool", "struct_ops", "unregister", "id", str(map_id)], check=False)


@contextlib.contextmanager
def loaded(names: list[str]):
    """Makes every name in `names` available for the duration of the `with`.
    Yields {name: how it is provided} for the names in BPF_CCS, e.g.
    {"hybla": "bpf struct_ops bpf/cc/hybla.c sha256 ..."} or {"veno": "kernel"}."""
    ours: list[int] = []
    impl: dict[str, str] = {}
    try:
        have = available()
        want = [n for n in dict.fromkeys(names) if n in BPF_CCS]
        todo = [n for n in want if n not in have]
        for n in want:
            if n in have:
                impl[n] = "kernel (already offered: built in, a module or registered outside the lab)"
        if todo:
            why = can_load()
            if why:
                raise StepError(f"congestion control {', '.join(todo)}: cannot load the BPF version: {why}")
            with tempfile.TemporaryDirectory(prefix="ilnp-cc-") as tmp:
                for n in todo:
                    ours.append(register(build(n, Path(tmp)), n))
                    impl[n] = f"bpf struct_ops bpf/cc/{BPF_CCS[n]} sha256 {source_sha256(n)[:16]}"
            missing = [n for n in todo if n not in available()]
            if missing:
                raise StepError(f"registered {', '.join(missing)} but the kernel does not list it")
        yield impl
    finally:
        for map_id in reversed(ours):
            unregister(map_id)
