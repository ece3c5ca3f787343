"""ilnpd as its users run it (issue #24): the README's minimal config verbatim, with every
default (control socket /run/ilnp/ilnpd.sock, pins under /sys/fs/bpf/ilnp, state file beside
the socket), in the host's mount namespace (as a systemd unit runs it: `nsenter --net`) and
under `ip netns exec`; one instance per control socket; a start that fails at any step, on
bad input or on request (ILNPD_FAIL_AT), leaves the host as it was; a closed stderr is no
crash; SIGUSR2 hands a running session over to the next ilnpd.

These tests use the real default paths of the machine they run on: they refuse to run (skip)
if an ilnpd already answers on /run/ilnp/ilnpd.sock, and check that they leave nothing there.
The default state_dir /var/lib/ilnp (the NID secret and record of nid = "auto") outlives a
clean stop by design: the machine's own is set aside for the test and put back after it.
"""

import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import time
from pathlib import Path

import pytest

from ilnp_lab.addr import identifier_address
from ilnp_lab.daemon import Ilnpd, Peer, binary
from ilnp_lab.fixtures import MN_L64, three_node
from ilnp_lab.testbed import stop_process, wait_for
from ilnp_test_util import CN_L64, CN_NID, host_snapshot, ilnp_pair, snapshot_diff

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SOCKET = "/run/ilnp/ilnpd.sock"
DEFAULT_STATE = "/run/ilnp/ilnpd.state"
DEFAULT_STATE_DIR = Path("/var/lib/ilnp")


def readme_config() -> str:
    """The README's minimal config, verbatim (its first ```toml block)."""
    m = re.search(r"```toml\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    assert m, "README.md has no ```toml block"
    text = m.group(1)
    assert 'uplinks = ["eth0"]' in text, text
    return text


@pytest.fixture
def default_paths():
    """The machine's default ilnpd paths are free before, and empty after, the test."""
    if os.path.exists(DEFAULT_SOCKET):
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(DEFAULT_SOCKET)
            pytest.skip(f"an ilnpd answers on {DEFAULT_SOCKET}: these tests need the default paths")
        except OSError:
            pass
        finally:
            s.close()
    # the machine's /var/lib/ilnp (a real installation's NID) is set aside, the test's removed
    saved = DEFAULT_STATE_DIR.with_name(f"ilnp.test-saved-{os.getpid()}")
    if DEFAULT_STATE_DIR.exists():
        DEFAULT_STATE_DIR.rename(saved)
    try:
        yield
    finally:
        shutil.rmtree(DEFAULT_STATE_DIR, ignore_errors=True)
        if saved.exists():
            saved.rename(DEFAULT_STATE_DIR)
    left = [str(p) for d in ("/run/ilnp", "/sys/fs/bpf/ilnp") if os.path.exists(d) for p in [d, *Path(d).rglob("*")]]
    assert not left, f"left behind: {left}"


class DefaultIlnpd:
    """ilnpd started the way the README says: `ilnpd --config FILE`, nothing else set.
    `how`: "host-mount-ns" (nsenter --net: the host's /run and /sys, as under systemd) or
    "netns-exec" (ip netns exec: a private /sys without bpffs, as the lab runs it)."""

    def __init__(self, node, config_text: str, how: str = "host-mount-ns", name: str = "ilnpd"):
        self.node, self.how = node, how
        d = node.bed.workdir / f"{name}-{node.name}"
        d.mkdir(parents=True, exist_ok=True)
        self.config = d / "ilnpd.toml"
        self.config.write_text(config_text)
        self.log = d / "ilnpd.log"
        self.proc: subprocess.Popen | None = None

    def argv(self) -> list[str]:
        run = [binary("ilnpd"), "--config", str(self.config)]
        if self.how == "netns-exec":
            return self.node.cmd(*run)
        return ["nsenter", f"--net=/run/netns/{self.node.ns}", *run]

    def spawn(self, env=None, stderr=None) -> subprocess.Popen:
        out = open(self.log, "a")
        self.proc = subprocess.Popen(self.argv(), stdout=out, stderr=stderr if stderr is not None else subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        out.close()
        self.node.bed.procs.append(self.proc)  # the testbed stops it (by pid) if a test fails
        return self.proc

    def start(self) -> "DefaultIlnpd":
        self.spawn()
        wait_for(lambda: self.proc.poll() is not None or ctl("status", check=False).returncode == 0,
                 timeout=15, what="ilnpd answering on the default control socket")
        assert self.proc.poll() is None, f"ilnpd exited {self.proc.returncode}:\n{self.log.read_text()[-3000:]}"
        return self

    def run_to_exit(self, env=None, timeout: float = 20) -> tuple[int, str]:
        """A start expected to fail: its exit status and what it printed."""
        before = self.log.read_text() if self.log.exists() else ""
        p = self.spawn(env=env)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_process(p)
            raise AssertionError(f"ilnpd did not exit:\n{self.log.read_text()[-3000:]}")
        return rc, self.log.read_text()[len(before):]

    def stop(self, sig=signal.SIGTERM) -> int | None:
        return stop_process(self.proc, sig=sig)


def ctl(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """ilnpctl with its defaults (the default control socket)."""
    return subprocess.run([binary("ilnpctl"), *args], capture_output=True, text=True, check=check, timeout=15)


def fail_steps() -> list[str]:
    """The start-up steps, as ilnpd names them (an unknown step name lists them)."""
    r = subprocess.run([binary("ilnpd"), "--uplink", "lo"], env=dict(os.environ, ILNPD_FAIL_AT="?"),
                       capture_output=True, text=True, timeout=10)
    m = re.search(r"the steps are: (.*)", r.stderr)
    assert r.returncode != 0 and m, r.stderr
    steps = m.group(1).split()
    assert {"lock", "tun", "datapath", "locators", "control-socket"} <= set(steps), steps
    return steps


def echo_session(cn, mn, mn_id: str, port: int = 7000) -> str:
    """One TCP exchange from the CN to an echo server on the MN's identifier address."""
    if not mn.listening(port):
        mn.spawn("socat", f"TCP6-LISTEN:{port},reuseaddr,fork", "EXEC:cat")
        mn.wait_listening(port)
    r = cn.sh(f"printf 'ilnp-hello\\n' | socat -T 5 - 'TCP6:[{mn_id}]:{port},connect-timeout=5'", check=False, timeout=20)
    return r.stdout


@pytest.mark.parametrize("how", ["host-mount-ns", "netns-exec"])
def test_readme_config_verbatim_starts_carries_a_session_and_stops_clean(bed, default_paths, how):
    cn, r1, mn = three_node(bed)
    before = host_snapshot(mn)
    d = DefaultIlnpd(mn, readme_config(), how=how).start()
    st = json.loads(ctl("--json", "status").stdout)
    mn_id = st["identifier_address"]
    # nid = "auto": a stable-privacy NID from a secret in the default state_dir, not the MAC's
    mac = json.loads(mn.ip("-j", "link", "show", "dev", "eth0").stdout)[0]["address"].replace(":", "")
    eui64 = f"{int(mac[:2], 16) ^ 2:02x}{mac[2:6]}fffe{mac[6:]}"
    assert st["nid_source"] == "stable-privacy" and st["nid"].replace(":", "") != eui64, st
    secret = DEFAULT_STATE_DIR / "nid-secret"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600 and secret.stat().st_size == 32
    assert (DEFAULT_STATE_DIR / "nid").read_text().split()[-2:] == [st["nid"], "stable-privacy"]
    # the README's [dns] section: the resolver proxy answers on 127.0.0.1:53 in the MN
    assert "127.0.0.1:53 " in mn.run("ss", "-Hlun", check=False).stdout
    assert os.path.exists(DEFAULT_STATE), "no state file at its default place"
    if how == "host-mount-ns":
        pins = list(Path("/sys/fs/bpf/ilnp").iterdir())
        assert [p.name for p in pins] == ["run_ilnp_ilnpd_sock"], pins
    dcn = Ilnpd(cn, ["eth0"], nid=CN_NID, peers=[Peer("mn", st["nid"], [(MN_L64, 10)])]).start()
    assert echo_session(cn, mn, mn_id) == "ilnp-hello\n"
    # ILNPv6 carried it, not plain IPv6: the MN's ilnpd knows the CN
    nids = [e["nid"] for e in json.loads(ctl("--json", "ilcc", "show").stdout)]
    assert CN_NID in nids, nids
    assert d.stop() == 0, d.log.read_text()[-3000:]
    log = d.log.read_text()
    assert "\x1b[" not in log, "ANSI escape codes in a log that is not a terminal"
    assert re.search(r"\bINFO\b.*ilnpd up", log), log[-2000:]
    dcn.stop()
    assert snapshot_diff(before, host_snapshot(mn)) == {}


def test_second_instance_with_the_default_socket_is_refused_and_harms_nothing(bed, default_paths):
    cn, r1, mn = three_node(bed)
    first = DefaultIlnpd(mn, readme_config(), how="netns-exec").start()
    state = Path(DEFAULT_STATE).read_bytes()
    before_cn = host_snapshot(cn)
    rc, out = DefaultIlnpd(cn, readme_config(), how="netns-exec", name="second").run_to_exit()
    assert rc == 1 and "is in use" in out and "nothing was changed" in out, out
    assert f"pid {first.proc.pid}" in out, out
    assert snapshot_diff(before_cn, host_snapshot(cn)) == {}
    # the first one is still managed and keeps its crash-recovery state
    assert ctl("status").returncode == 0
    assert os.path.exists(DEFAULT_SOCKET) and Path(DEFAULT_STATE).read_bytes() == state
    assert first.stop() == 0


def test_a_failed_start_at_any_step_leaves_the_host_as_it_was(bed, default_paths):
    cn, r1, mn = three_node(bed)
    steps = fail_steps()
    d = DefaultIlnpd(mn, readme_config(), how="host-mount-ns")
    before = host_snapshot(mn)
    for step in steps:
        rc, out = d.run_to_exit(env=dict(os.environ, ILNPD_FAIL_AT=step))
        assert rc == 1 and f"start-up step {step}: failing on request" in out, (step, out)
        assert snapshot_diff(before, host_snapshot(mn)) == {}, step
    # a failed start after a crash leaves the crashed run's state for the next attempt,
    # which adopts it; its clean stop then removes everything (also what the crashed run made)
    d.start()
    d.stop(sig=signal.SIGKILL)
    crashed = host_snapshot(mn)
    kept = ("addr", "sysctl", "files", "bpf_mounts", "tc_filter")
    for step in steps:
        rc, out = d.run_to_exit(env=dict(os.environ, ILNPD_FAIL_AT=step))
        assert rc == 1 and f"start-up step {step}" in out, (step, out)
        diff = snapshot_diff(crashed, host_snapshot(mn))
        # the dead daemon's control socket is stale: binding ours replaced it, the undo removed ours
        diff["files"] = [f for f in diff.get("files", []) if f != DEFAULT_SOCKET]
        assert {k: v for k, v in diff.items() if k in kept and v} == {}, (step, diff)
    d.start()
    assert "adopting it" in d.log.read_text()
    assert d.stop() == 0
    assert snapshot_diff(before, host_snapshot(mn)) == {}


def test_bad_input_is_named_and_leaves_nothing(bed, default_paths, tmp_path):
    cn, r1, mn = three_node(bed)
    before = host_snapshot(mn)
    base = 'uplinks = ["eth0"]\n'
    ro = tmp_path / "robpf"
    ro.mkdir()
    subprocess.run(["mount", "-t", "bpf", "-o", "ro", "bpf", str(ro)], check=True)
    port53 = mn.spawn("python3", "-c", "import socket,time; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                      "s.bind(('127.0.0.1', 53)); time.sleep(60)")
    try:
        wait_for(lambda: "127.0.0.1:53 " in mn.run("ss", "-Hlun", check=False).stdout, what="port 53 taken")
        cases = [
            ('uplinks = ["eth0", "eth0"]\n', 2, ['line 1', 'uplinks: "eth0" is listed twice']),
            (base + 'identifier_prefix = "ff02::/64"\n', 2, ["line 2", "identifier_prefix: ff02::", "multicast"]),
            ('uplinks = ["eth9"]\n', 1, ['uplinks: "eth9"', "no such interface"]),
            (base + '[dns]\nupstream = "2001:db8:53::53"\n', 1, ["dns listen: UDP 127.0.0.1:53", "in use"]),
            (base + f'pin_dir = "{ro}/x"\n', 1, [f"pin directory {ro}/x", "Read-only file system"]),
        ]
        for text, want_rc, words in cases:
            rc, out = DefaultIlnpd(mn, text, how="host-mount-ns").run_to_exit()
            assert rc == want_rc and all(w in out for w in words), (text, rc, out)
            assert snapshot_diff(before, host_snapshot(mn)) == {}, text
    finally:
        stop_process(port53)
        subprocess.run(["umount", str(ro)], check=False)


def test_a_closed_stderr_is_no_crash(bed, default_paths):
    """Whoever read ilnpd's stderr went away (a pipe closed): logging fails with EPIPE,
    which must neither panic (exit 101, nothing cleaned up) nor stop the daemon."""
    cn, r1, mn = three_node(bed)
    before = host_snapshot(mn)
    d = DefaultIlnpd(mn, readme_config(), how="host-mount-ns")
    d.spawn(stderr=subprocess.PIPE)
    d.proc.stderr.close()  # the reader is gone before the first line
    wait_for(lambda: d.proc.poll() is not None or ctl("status", check=False).returncode == 0, timeout=15,
             what="ilnpd answering")
    assert d.proc.poll() is None, f"ilnpd died with its stderr closed: exit {d.proc.returncode}"
    assert ctl("stats").returncode == 0
    assert d.stop() == 0  # "SIGTERM: cleaning up" is logged into the closed pipe
    assert snapshot_diff(before, host_snapshot(mn)) == {}


def test_sigusr2_hands_a_running_session_over_to_the_next_ilnpd(bed, tmp_path):
    """An upgrade: SIGUSR2 → exit 75 with the fast path, ilnp0, pins and state kept; the next
    ilnpd adopts them; TCP and UDP through the daemon's whole absence lose nothing."""
    cn, r1, mn, dcn, dmn = ilnp_pair(bed)
    mn_id = identifier_address(dmn.status()["nid"])
    mn.spawn("iperf3", "-s", "-1", "-B", mn_id, "-p", "5201")
    mn.spawn("iperf3", "-s", "-1", "-B", mn_id, "-p", "5202")
    mn.wait_listening(5201)
    mn.wait_listening(5202)
    tcp = cn.spawn("iperf3", "-c", mn_id, "-p", "5201", "-t", "6", "-b", "200M", "-i", "0.5", "-J",
                   stdout=open(tmp_path / "tcp.json", "w"))
    udp = cn.spawn("iperf3", "-c", mn_id, "-p", "5202", "-u", "-b", "10M", "-t", "6", "-J",
                   stdout=open(tmp_path / "udp.json", "w"))
    time.sleep(2)
    os.kill(dmn.proc.pid, signal.SIGUSR2)
    assert dmn.proc.wait(timeout=10) == 75, dmn.log.read_text()[-2000:]
    assert "handed over" in dmn.log.read_text()
    time.sleep(1.5)  # the daemon is down; the pinned fast path carries the traffic
    dmn.start()
    log = dmn.log.read_text()
    assert "adopting it" in log and "restored 1 ILCC entries" in log, log[-3000:]
    assert tcp.wait(timeout=30) == 0 and udp.wait(timeout=30) == 0
    rt = json.loads((tmp_path / "tcp.json").read_text())
    ru = json.loads((tmp_path / "udp.json").read_text())
    per = [i["sum"]["bytes"] for i in rt["intervals"]]
    assert all(b > 0 for b in per), per
    assert ru["end"]["sum"]["lost_packets"] == 0, ru["end"]["sum"]
    print(f"handover: TCP {rt['end']['sum_received']['bytes']} B, min {min(per)} B per 0.5 s; "
          f"UDP {ru['end']['sum']['packets']} sent, {ru['end']['sum']['lost_packets']} lost")
    assert dmn.stop() == 0 and dcn.stop() == 0
