"""Which code produced a run: one home for the provenance every experiment records.

`provenance()` is taken at the start and the end of `ilnp-lab run` (experiment.start_meta,
finish_meta); `reference_check` says why a run folder is not a reference run (one commit, clean
tree, one ilnpd build from it, not --quick, no more testbeds than cores, nothing failed);
`provenance_line` is the sentence every report's header carries (experiment.header).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from pathlib import Path

from .testbed import binary, netem_available

LAB_DIR = Path(__file__).resolve().parents[1]


def built_from(repo: Path, ilnpd: Path, tracked: list[str]) -> list[Path]:
    """The tracked sources `ilnpd` is built from: the Rust files cargo's dep-info (`ilnpd.d`
    beside the binary) lists for it, when every one of them is in `repo` (so test-only modules,
    which are not compiled into the binary, do not count), plus the eBPF sources build.rs
    compiles and the manifests; without usable dep-info, every tracked file under crates/ and
    bpf/. bpf/cc/ is not built into ilnpd (the lab compiles it at load time: cc.py)."""
    listed = None
    try:
        text = ilnpd.with_name(ilnpd.name + ".d").read_text()
        deps = [Path(x) for x in text.split(":", 1)[1].replace("\\\n", " ").split()]
        if deps and all(d.is_relative_to(repo) for d in deps):
            listed = {str(d.relative_to(repo)) for d in deps}
    except (OSError, IndexError, ValueError):
        pass
    out = []
    for f in tracked:
        if f.startswith("bpf/cc/") or not (repo / f).exists():
            continue
        if listed is None or f in listed or f.startswith("bpf/") or f.endswith(("Cargo.toml", "Cargo.lock", "build.rs")):
            out.append(repo / f)
    return out


def provenance() -> dict:
    """Which code a run used: the commit, whether the work tree was clean (tracked files),
    the ilnpd binary (sha256) and whether it is newer than every tracked source it is built
    from. Taken at the start and the end of `ilnp-lab run`: a reference run is one commit,
    clean, with one binary built from it (`reference_check`). In a VM the lab was shipped into,
    the host's record made when it packed the lab and the binaries (`ILNP_HOST_PROVENANCE`: a
    JSON file, with `vm`: the accelerator, kernel package, qemu)."""
    import hashlib

    repo = LAB_DIR.parent
    host = os.environ.get("ILNP_HOST_PROVENANCE")
    if host:  # a lab shipped into a VM without its git (qemu-debian12.sh --lab): the packing host's facts
        return json.loads(Path(host).read_text())

    def git(*a: str) -> str:
        try:
            return subprocess.run(["git", "-C", str(repo), *a], capture_output=True, text=True, timeout=20).stdout
        except (OSError, subprocess.TimeoutExpired):
            return ""
    dirty = [l[3:] for l in git("status", "--porcelain", "--untracked-files=no").splitlines() if l.strip()]
    ilnpd = Path(binary("ilnpd"))
    sources = built_from(repo, ilnpd, git("ls-files", "crates", "bpf", "Cargo.lock", "Cargo.toml").split())
    newest = max((f.stat().st_mtime for f in sources), default=0.0)
    return {"commit": git("rev-parse", "HEAD").strip() or None, "clean": not dirty and bool(sources),
            "dirty_files": dirty[:20], "ilnpd": str(ilnpd), "ilnpd_sha256": hashlib.sha256(ilnpd.read_bytes()).hexdigest(),
            "ilnpd_newer_than_sources": ilnpd.stat().st_mtime >= newest}


def reference_check(meta: dict) -> list[str]:
    """Why a run folder is not a reference run (empty: it is one)."""
    why = []
    a, b = meta.get("provenance_start") or {}, meta.get("provenance_end") or {}
    if not a or not b:
        why.append("no provenance recorded")
    else:
        if not (a["clean"] and b["clean"]):
            why.append(f"work tree not clean ({', '.join(a['dirty_files'] or b['dirty_files']) or 'no tracked sources'})")
        if a["commit"] != b["commit"]:
            why.append(f"the commit changed during the run ({a['commit']} -> {b['commit']})")
        if a["ilnpd_sha256"] != b["ilnpd_sha256"]:
            why.append("ilnpd was rebuilt during the run (mixed builds)")
        if not a["ilnpd_newer_than_sources"]:
            why.append("ilnpd is older than the sources it is built from (run `cargo build --release`)")
    if meta.get("quick"):
        why.append("--quick")
    if meta.get("jobs", 1) > (meta.get("cores") or 1):
        why.append(f"{meta['jobs']} testbeds at once on {meta.get('cores')} cores")
    if meta.get("runs_failed"):
        why.append(f"{meta['runs_failed']} runs failed")
    if meta.get("interrupted"):
        why.append("interrupted")
    return why


def versions() -> dict:
    def first_line(cmd):
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
            return (p.stdout or p.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return "unavailable"
    git = first_line(["git", "-C", str(LAB_DIR.parent), "describe", "--always", "--dirty"])
    return {"kernel": platform.release(), "python": platform.python_version(), "git": git,
            "ilnpd": first_line([binary("ilnpd"), "--version"]), "iperf3": first_line(["iperf3", "--version"]),
            "radvd": first_line(["radvd", "--version"]), "tcpdump": first_line(["tcpdump", "--version"]),
            "mptcpize": "present" if shutil.which("mptcpize") else "absent",
            "link_emulation": "netem" if netem_available() else "ilnp-delayline (this kernel has no netem)"}


def provenance_line(meta: dict) -> str:
    """The report line saying which code produced the numbers and whether it is a reference run."""
    p = meta.get("provenance_start") or {}
    why = meta.get("reference_not_because")
    if why is None:
        return "Provenance: not recorded (a run from before the lab recorded it)."
    state = "reference run" if not why else "not a reference run: " + "; ".join(why)
    return f"Commit {(p.get('commit') or '?')[:12]}{'' if p.get('clean') else ' (dirty)'}: {state}."
