"""Runs ilnpd inside a testbed node and talks to it with ilnpctl."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .addr import ID_NET
from .testbed import Node, StepError, binary, run, stop_process, wait_for

# The lab's bpf filesystem, mounted once in the host's mount namespace: ilnpd runs
# under `ip netns exec`, whose private /sys has no bpffs, and a bpffs ilnpd mounted
# there itself would vanish with the process, taking the pins (and the running fast
# path) with it; this one outlives a killed daemon, so its successor adopts the pins.
LAB_BPFFS = Path("/run/ilnp-lab/bpf")


def lab_bpffs() -> Path:
    """Mounts LAB_BPFFS if it is not a bpf filesystem yet (shared by all runs, left mounted)."""
    LAB_BPFFS.mkdir(parents=True, exist_ok=True)
    with open("/proc/self/mounts") as f:
        if any(line.split()[1:3] == [str(LAB_BPFFS), "bpf"] for line in f):
            return LAB_BPFFS
    run(["mount", "-t", "bpf", "bpf", str(LAB_BPFFS)])
    return LAB_BPFFS


@dataclass
class Peer:
    name: str
    nid: str
    locators: list[tuple[str, int]]  # (l64 "2001:0db8:000b:0000", pref)


@dataclass
class Ilnpd:
    node: Node
    uplinks: list[str]
    nid: str | None = None  # None → "auto": a stable-privacy NID from this daemon's state_dir
    datapath: str = "ebpf"
    nonce_bits: int = 32
    peers: list[Peer] = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    id_prefix: str = ID_NET
    proc: subprocess.Popen | None = None
    # every process start() made, with whether kill() ended it on purpose (a crash the
    # caller wanted): what exit_problems() judges at teardown
    runs: list[list] = field(default_factory=list)

    @property
    def dir(self) -> Path:
        d = self.node.bed.workdir / f"ilnpd-{self.node.name}"
        d.mkdir(parents=True, exist_ok=True)
        return d

    @property
    def socket(self) -> str:
        # a Unix socket path is at most 107 bytes: not under a deep output folder
        d = Path("/run/ilnp-lab")
        d.mkdir(exist_ok=True)
        return str(d / f"{self.node.ns}.sock")

    @property
    def log(self) -> Path:
        return self.dir / "ilnpd.log"

    @property
    def pin_dir(self) -> str:
        return str(lab_bpffs() / self.node.ns)

    @property
    def state_file(self) -> str:
        """ilnpd's default: the control socket's path with extension .state."""
        return str(Path(self.socket).with_suffix(".state"))

    @property
    def state_dir(self) -> str:
        """Its NID secret and record (nid = "auto"): one per daemon, kept across its restarts,
        never the host's /var/lib/ilnp (two daemons sharing one would share a NID)."""
        return str(self.dir / "state")

    def config_text(self) -> str:
        keys = {
            "uplinks": self.uplinks,
            "identifier_prefix": self.id_prefix,
            "nid": self.nid or "auto",
            # only where a NID is derived or recorded: a daemon given its NID runs with older
            # builds too (ILNP_BIN_DIR, the attack suite's "before" column), which refuse the key
            **({} if self.nid and ":" in self.nid else {"state_dir": self.state_dir}),
            "datapath": self.datapath,
            "nonce_bits": self.nonce_bits,
            "control_socket": self.socket,
            "log_level": "debug",
            "pin_dir": self.pin_dir,
        }
        keys.update(self.extra)
        lines = [f"{k} = {json.dumps(v)}" for k, v in keys.items() if not isinstance(v, dict)]
        for k, v in keys.items():  # tables (e.g. locator_pref) after the plain keys
            if isinstance(v, dict):
                lines += ["", f"[{k}]"] + [f"{json.dumps(sk)} = {json.dumps(sv)}" for sk, sv in v.items()]
        for p in self.peers:
            locs = ", ".join(f'{{ l64 = "{l}", pref = {pref} }}' for l, pref in p.locators)
            lines += ["", "[[peer]]", f'name = "{p.name}"', f'nid = "{p.nid}"', f"locators = [{locs}]"]
        return "\n".join(lines) + "\n"

    def start(self, wait: bool = True) -> "Ilnpd":
        cfg = self.dir / "ilnpd.toml"
        cfg.write_text(self.config_text())
        logf = open(self.log, "a")
        self.proc = self.node.spawn(binary("ilnpd"), "--config", str(cfg), stdout=logf, stderr=subprocess.STDOUT)
        self.runs.append([self.proc, False])
        started = self.node.bed.ilnpds
        if not any(d is self for d in started):
            started.append(self)
        if wait:
            try:
                wait_for(lambda: self.proc.poll() is not None or self._ready(), timeout=15, what=f"ilnpd on {self.node.name}")
            except TimeoutError:
                raise StepError(f"ilnpd on {self.node.name} did not become ready:\n{self.log.read_text()[-3000:]}")
            if self.proc.poll() is not None:
                raise StepError(f"ilnpd on {self.node.name} exited {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
        return self

    def kill(self) -> int | None:
        """A crash: SIGKILL, no cleanup (pins, ilnp0 and the state file stay for the next start).
        Marks this run as ended on purpose (exit_problems() does not count it)."""
        for r in self.runs:
            if r[0] is self.proc:
                r[1] = True
        rc = stop_process(self.proc, sig=signal.SIGKILL) if self.proc is not None else None
        if os.path.exists(self.socket):
            os.unlink(self.socket)  # the dead daemon's socket would fool _ready()
        return rc

    def _ready(self) -> bool:
        if not os.path.exists(self.socket):
            return False
        r = self.ctl_raw("--json", "status", check=False)
        return r.returncode == 0

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        dead = self.proc.poll() is not None
        rc = stop_process(self.proc)
        if dead:
            # it died (killed, crashed, failed to start) and nothing adopted its pins
            # and state: the lab removes them, as the daemon's clean stop would have
            self.remove_leftovers()
        return rc

    def exit_problems(self) -> list[str]:
        """What went wrong with this daemon's processes, once they have ended: an exit status
        other than 0 (SIGTERM's clean stop; 75 is SIGUSR2's handover, accepted when the log
        says so) for a process kill() did not end on purpose, and "panicked" anywhere in its
        log. Each item names the daemon and quotes its log's tail. Still running: not judged."""
        log = self.log.read_text(errors="replace") if self.log.exists() else ""
        tail = log[-3000:]
        out = []
        for proc, killed in self.runs:
            rc = proc.poll()
            if rc is None or killed or rc == 0 or (rc == 75 and "handed over" in log):
                continue
            out.append(f"ilnpd on {self.node.name} (pid {proc.pid}) exited {rc}, not 0; its log ({self.log}) ends:\n{tail}")
        if "panicked" in log:
            i = log.index("panicked")
            out.append(f"ilnpd on {self.node.name} panicked ({self.log}):\n{log[max(0, i - 1500):i + 1500]}")
        return out

    def remove_leftovers(self) -> None:
        shutil.rmtree(self.pin_dir, ignore_errors=True)
        Path(self.state_file).unlink(missing_ok=True)

    def ctl_raw(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return self.node.run(binary("ilnpctl"), "-s", self.socket, *args, check=check)

    def ctl(self, *args: str):
        """ilnpctl --json ARGS → the reply's data, parsed (shapes: docs/control-protocol.md).

        Requests are never built here: ilnpctl builds them from the typed schema
        (crates/ilnp-control) and prints the daemon's data unchanged."""
        out = self.ctl_raw("--json", *args).stdout
        return json.loads(out)

    def status(self) -> dict:
        """The `status` reply: nid, identifier_address, locators, ... (control-protocol.md § Status)."""
        return self.ctl("status")

    def stats(self) -> dict:
        """The `stats` reply: {"core": {name: count}, "datapath": {name: count}}."""
        return self.ctl("stats")

    def identifier_address(self) -> str:
        return self.status()["identifier_address"]


class Monitor:
    """`ilnpctl monitor` with each event stamped (time.monotonic()) on arrival."""

    def __init__(self, d: Ilnpd):
        self.proc = d.node.spawn(binary("ilnpctl"), "-s", d.socket, "--json", "monitor", stdout=subprocess.PIPE)
        self.events: list[tuple[float, dict]] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if isinstance(e, dict) and "event" in e:
                self.events.append((time.monotonic(), e))

    def of(self, kind: str, after: float = 0.0) -> list[tuple[float, dict]]:
        return [(t, e) for t, e in list(self.events) if e["event"] == kind and t >= after]

    def stop(self):
        stop_process(self.proc)
        self.thread.join(timeout=5)
