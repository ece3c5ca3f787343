"""docs/guide.md, followed verbatim (issue 29 item 1).

The guide's hosts (a, b, ns) are network namespaces on a network the test builds as the
guide's § "The example network" describes it (router r, LAN 1 a bridge, LAN 2 b's second
uplink, radvd on both, the MAC addresses of the table). Each host also gets its own mount
namespace in which /etc, /run, /var/lib, /var/lib/bind and /var/cache/bind are overlays on
the real ones (writes stay in the test's directory) and /sys/fs/bpf is its own bpffs: so the
guide says /etc/ilnp/ilnpd.toml, /run/ilnp/ilnpd.sock and /etc/bind/... as on real hosts,
and the test runs those lines unchanged. a's and b's /var/lib/ilnp hold fixed NID secrets
(SECRET), so their NIDs are the guide's. ilnpd and ilnpctl are target/release's (first on
PATH).

The guide marks each block with an HTML comment before its fence (invisible on GitHub):

    <!-- test: ID host=H [bg|fails|standin|file=PATH] -->   run by this test
    <!-- not tested: REASON -->                              not run here (the reason says why)

* plain: `bash -e -o pipefail -c BLOCK` in H; must exit 0; the test asserts what the guide
  says the reader sees;
* bg: started and left running (a server, `ilnpctl monitor`: "in another terminal"), its
  output kept; stopped by pid at the end;
* fails: must exit non-zero (a documented error);
* file=PATH: the block's text is written to PATH in H, byte for byte;
* standin: systemd or another machine's tool the namespaces cannot run: the test checks
  the block's text is what it stands in for and does the equivalent (STANDINS below):
  `systemctl enable --now ilnpd` / `systemctl restart ilnpd` = `ilnpd --config
  /etc/ilnp/ilnpd.toml` started (and first stopped, SIGTERM) in H, the unit's ExecStart;
  the package under systemd is tests/system/test_systemd.py's; `scp` = copying the file
  between the hosts' overlays.

The blocks are run in the guide's order, each exactly once (`Guide.next` refuses to skip
one), and every ```sh block of the guide carries a marker. Files of § 6 (systemd-resolved,
NetworkManager) are written and parsed only: no resolved or NetworkManager runs here.
"""

from __future__ import annotations

import configparser
import hashlib
import hmac
import json
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from ilnp_lab.services import radvd
from ilnp_lab.testbed import REPO, bin_dir, wait_for

GUIDE = REPO / "docs" / "guide.md"
GRAFANA = REPO / "dist" / "grafana" / "ilnp.json"

MARK = re.compile(r"<!--\s*(test|not tested):\s*(.*?)\s*-->\s*\n```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)
FENCE = re.compile(r"^```(\w*)", re.M)

# the guide's network (§ The example network)
MAC = {("a", "eth0"): "02:00:00:00:00:0a", ("b", "eth0"): "02:00:00:00:00:0b",
       ("b", "eth1"): "02:00:00:00:01:0b", ("ns", "eth0"): "02:00:00:00:00:53"}
# nid = "auto": each host's NID is derived from the secret ilnpd draws at its first start; the
# test puts fixed ones in place (as it fixes the MACs), so the guide can show the NIDs they give
SECRET = {"a": bytes([0x0A]) * 32, "b": bytes([0x0B]) * 32}
NID_A, NID_B = "d436:3416:4383:5c1c", "e826:c43a:81f9:29c6"
ID_A, ID_B = "fd69:6c6e:7000:0:d436:3416:4383:5c1c", "fd69:6c6e:7000:0:e826:c43a:81f9:29c6"


def stable_privacy_nid(secret: bytes) -> str:
    """docs/architecture.md § Addressing, computed apart from ilnpd: HMAC-SHA-256 of the
    label and counter 0 keyed by the secret, its first 64 bits with the u and g bits cleared
    (a counter above 0 only for a NID ilnp-wire refuses, which these are not)."""
    d = bytearray(hmac.new(secret, b"ILNPv6 stable-privacy NID" + bytes(4), hashlib.sha256).digest()[:8])
    d[0] &= 0xFC
    return ":".join(d.hex()[i:i + 4] for i in range(0, 16, 4))
L1, L2 = "2001:0db8:0001:0000", "2001:0db8:0002:0000"

STANDINS = {
    "systemctl enable --now ilnpd": "start",
    "systemctl restart ilnpd": "restart",
    "scp ns:/etc/bind/ilnp-update.key /etc/ilnp/update.key": "copy-key",
}


@dataclass
class Block:
    id: str
    host: str
    kind: str  # run | bg | fails | standin | file
    path: str | None
    lang: str
    text: str
    line: int


def parse(md: str) -> tuple[list[Block], list[tuple[str, int]], int]:
    """The marked blocks in order; the reasons of the unmarked-for-test ones; every fence."""
    blocks, skipped = [], []
    for m in MARK.finditer(md):
        what, args, lang, text = m.groups()
        line = md[: m.start()].count("\n") + 1
        if what == "not tested":
            skipped.append((args, line))
            continue
        words = args.split()
        kw = dict(w.split("=", 1) for w in words[1:] if "=" in w)
        flags = [w for w in words[1:] if "=" not in w]
        kind = "file" if "file" in kw else (flags[0] if flags else "run")
        assert kind in ("run", "bg", "fails", "standin", "file"), f"guide line {line}: unknown kind {kind!r}"
        blocks.append(Block(words[0], kw["host"], kind, kw.get("file"), lang, text, line))
    return blocks, skipped, len(FENCE.findall(md)) // 2


class Host:
    """A guide host: a network namespace plus a mount namespace with its own /etc, /run,
    /var/lib/bind, /var/cache/bind (overlays) and bpffs, held by a `sleep` we started."""

    # /var/lib for ilnpd's state_dir (/var/lib/ilnp); /var/lib/bind an overlay of its own on
    # top, whose upper directory keeps bind's owner and mode (named writes its journal there)
    OVERLAID = ("/etc", "/run", "/var/lib", "/var/lib/bind", "/var/cache/bind")

    def __init__(self, node, root: Path):
        self.node, self.name, self.root = node, node.name, root
        mounts = []
        for d in self.OVERLAID:
            up, work = root / ("up" + d.replace("/", "_")), root / ("work" + d.replace("/", "_"))
            up.mkdir(parents=True)
            work.mkdir()
            st = os.stat(d)  # the overlay's root shows the upper directory's owner and mode
            os.chown(up, st.st_uid, st.st_gid)
            os.chmod(up, st.st_mode & 0o7777)
            mounts.append(f"mount -t overlay overlay -o lowerdir={d},upperdir={up},workdir={work} {d}")
        if node.name in SECRET:
            # ilnpd's state_dir, /var/lib/ilnp: the host's secret in place, the machine's own
            # /var/lib/ilnp (if any) hidden (an opaque directory of the overlay)
            state = root / "up_var_lib" / "ilnp"
            state.mkdir(mode=0o700)
            os.setxattr(state, "trusted.overlay.opaque", b"y")
            fd = os.open(state / "nid-secret", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, SECRET[node.name])
            os.close(fd)
        mounts.append("mount -t bpf bpf /sys/fs/bpf")
        # `ip netns exec` gives a mount namespace of its own with the namespace's sysfs
        self.holder = subprocess.Popen(
            node.cmd("sh", "-ec", " && ".join(mounts) + " && echo ready && exec sleep 3600"),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        line = self.holder.stdout.readline()
        assert line.strip() == "ready", f"{self.name}: mount namespace: {line}{self.holder.stdout.read()}"
        self.env = dict(os.environ, PATH=f"{bin_dir()}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        self.procs: list[subprocess.Popen] = []
        self.ilnpd: subprocess.Popen | None = None
        self.journal = root / "ilnpd.journal"

    def cmd(self, *args: str) -> list[str]:
        return ["nsenter", "-t", str(self.holder.pid), "-m", "-n", "--", *args]

    def sh(self, script: str, timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run(self.cmd("bash", "-e", "-o", "pipefail", "-c", script), capture_output=True,
                              text=True, timeout=timeout, env=self.env, cwd="/")

    def spawn(self, args: list[str], out: Path) -> subprocess.Popen:
        p = subprocess.Popen(self.cmd(*args), stdout=open(out, "ab"), stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, env=self.env, cwd="/", start_new_session=True)
        self.procs.append(p)
        return p

    def upper(self, path: str) -> Path:
        """Where a file the guide wrote under an overlaid directory is."""
        for d in sorted(self.OVERLAID, key=len, reverse=True):
            if path.startswith(d + "/"):
                return self.root / ("up" + d.replace("/", "_")) / path[len(d) + 1:]
        raise AssertionError(f"{path} is not under an overlaid directory")

    # ---- the stand-in for the unit's ExecStart
    def start_ilnpd(self) -> None:
        self.ilnpd = self.spawn(["ilnpd", "--config", "/etc/ilnp/ilnpd.toml"], self.journal)
        wait_for(lambda: self.ilnpd.poll() is not None or self.sh("ilnpctl status").returncode == 0, timeout=15,
                 what=f"ilnpd on {self.name}")
        assert self.ilnpd.poll() is None, f"ilnpd on {self.name} exited:\n{self.journal.read_text()[-2000:]}"

    def stop_ilnpd(self) -> None:
        if self.ilnpd is not None and self.ilnpd.poll() is None:
            os.kill(self.ilnpd.pid, signal.SIGTERM)
            assert self.ilnpd.wait(timeout=15) == 0, f"{self.name}: ilnpd's clean stop"
        self.ilnpd = None

    def close(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)  # its own session: the block's shell and what it runs
                except ProcessLookupError:
                    pass
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
        os.kill(self.holder.pid, signal.SIGTERM)
        self.holder.wait(timeout=10)
        self.holder.stdout.close()


class Guide:
    def __init__(self, bed, hosts: dict[str, Host], out: Path):
        self.blocks, self.skipped, self.fences = parse(GUIDE.read_text())
        self.pos, self.bed, self.hosts, self.out = 0, bed, hosts, out
        self.bg: dict[str, tuple[subprocess.Popen, Path]] = {}

    def seek(self, block_id: str) -> None:
        """Start at a section's first block (each test walks its own sections)."""
        ids = [b.id for b in self.blocks]
        assert block_id in ids, f"no block {block_id} in the guide"
        self.pos = ids.index(block_id)

    def next(self, block_id: str) -> Block:
        assert self.pos < len(self.blocks), f"the guide has no block after the last; expected {block_id}"
        b = self.blocks[self.pos]
        assert b.id == block_id, f"guide line {b.line}: next block is {b.id!r}, the test expected {block_id!r}"
        self.pos += 1
        return b

    def run(self, block_id: str, timeout: float = 30) -> str:
        b = self.next(block_id)
        h = self.hosts[b.host]
        if b.kind == "file":
            p = h.upper(b.path)
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(b.text)
            return b.text
        if b.kind == "standin":
            return self.standin(b, h)
        if b.kind == "bg":
            log = self.out / f"{b.id}.out"
            p = h.spawn(["bash", "-e", "-o", "pipefail", "-c", b.text], log)
            self.bg[b.id] = (p, log)
            return ""
        r = h.sh(b.text, timeout=timeout)
        out = r.stdout + r.stderr
        if b.kind == "fails":
            assert r.returncode != 0, f"guide line {b.line} ({b.id}) should fail:\n{out}"
        else:
            assert r.returncode == 0, f"guide line {b.line} ({b.id}) on {b.host} exited {r.returncode}:\n{b.text}\n---\n{out}"
        print(f"--- {b.id} ({b.host}):\n{out}")
        return out

    def standin(self, b: Block, h: Host) -> str:
        lines = [l.split("#")[0].strip() for l in b.text.splitlines() if l.split("#")[0].strip()]
        for line in lines:
            what = STANDINS.get(line)
            assert what, f"guide line {b.line}: no stand-in for {line!r}"
            if what == "start":
                h.start_ilnpd()
            elif what == "restart":
                h.stop_ilnpd()
                h.start_ilnpd()
            elif what == "copy-key":
                src = self.hosts["ns"].upper("/etc/bind/ilnp-update.key")
                dst = h.upper("/etc/ilnp/update.key")
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dst)
        return ""

    def bg_output(self, block_id: str) -> str:
        return self.bg[block_id][1].read_text(errors="replace")

    def wait_bg(self, block_id: str, timeout: float = 30) -> str:
        p, log = self.bg[block_id]
        p.wait(timeout=timeout)
        return log.read_text(errors="replace")

    def shown(self, block_id: str, out: str) -> None:
        """Every line of the guide's ```text block after the block (but `...`) is in the
        output, spaces collapsed; `...` inside a line stands for anything."""
        got = [" ".join(l.split()) for l in out.splitlines()]
        for want in self.text_after(block_id).splitlines():
            want = " ".join(want.split())
            if want in ("", "..."):
                continue
            pat = re.compile(".*?".join(re.escape(p.strip()) for p in want.split("...")))
            assert any(pat.fullmatch(l) for l in got), f"the guide shows {want!r} after {block_id}; got:\n{out}"

    def text_after(self, block_id: str) -> str:
        """The ```text block right after a marked block (what the guide says the reader sees)."""
        md = GUIDE.read_text()
        b = next(x for x in self.blocks if x.id == block_id)
        start = md.index(b.text, sum(len(l) + 1 for l in md.splitlines()[: b.line]))
        m = re.compile(r"^```text\n(.*?)^```", re.S | re.M).search(md, start + len(b.text))
        assert m, f"no ```text block after {block_id}"
        return m.group(1)


def build_network(bed) -> dict[str, Host]:
    """The guide's § The example network."""
    r = bed.add_node("r", router=True)
    a, b, ns = bed.add_node("a"), bed.add_node("b"), bed.add_node("ns")
    r.ip("link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
    for node, port in ((a, "lan-a"), (b, "lan-b"), (ns, "lan-ns")):
        bed.link(node, "eth0", r, port)
        r.ip("link", "set", port, "master", "br0")
    bed.link(b, "eth1", r, "lan2-b")
    r.ip("link", "set", "br0", "up")
    r.add_addr("br0", "2001:db8:1::1/64")
    r.add_addr("lan2-b", "2001:db8:2::1/64")
    for (name, dev), mac in MAC.items():
        n = bed.nodes[name]
        n.ip("link", "set", dev, "down")
        n.ip("link", "set", dev, "address", mac)
        n.ip("link", "set", dev, "up")
    ns.add_addr("eth0", "2001:db8:1::53/64")
    radvd(r, "br0", "2001:db8:1::/64", min_ra=3, max_ra=4, valid=86400, preferred=14400)
    radvd(r, "lan2-b", "2001:db8:2::/64", min_ra=3, max_ra=4, valid=86400, preferred=14400)
    for n, devs in ((a, ["eth0"]), (b, ["eth0", "eth1"]), (ns, ["eth0"])):
        for dev in devs:
            wait_for(lambda: "default" in n.ip("-6", "route", "show", "default", "dev", dev).stdout, timeout=15,
                     what=f"RA on {n.name}'s {dev}")
    root = bed.workdir / "hosts"
    return {n.name: Host(n, root / n.name) for n in (a, b, ns)}


@pytest.fixture
def guide(bed, tmp_path):
    hosts = build_network(bed)
    g = Guide(bed, hosts, tmp_path)
    yield g
    for h in hosts.values():
        h.close()


def test_every_shell_block_is_marked():
    """Each ```sh block is run by this test or says why not; ids are unique; the guide's
    own table of markers matches the parser."""
    md = GUIDE.read_text()
    blocks, skipped, _ = parse(md)
    ids = [b.id for b in blocks]
    assert len(ids) == len(set(ids)), "duplicate block ids"
    sh = [m.start() for m in re.finditer(r"^```sh\b", md, re.M)]
    starts = {md.rfind("```", 0, m.end(3)) for m in MARK.finditer(md)}
    unmarked = [md[: s].count("\n") + 1 for s in sh if s not in starts]
    assert not unmarked, f"```sh blocks at guide lines {unmarked} carry no <!-- test: ... --> or <!-- not tested: ... -->"
    assert all(reason for reason, _ in skipped)
    assert {b.host for b in blocks} <= {"a", "b", "ns"}


def test_the_guide_verbatim(guide):
    """§§ 1-8 in order, on one network: static peers, names, two uplinks, a move, the
    resolved/NetworkManager files (parsed), metrics (+ dist/grafana/ilnp.json), troubleshooting."""
    g, a, b, ns = guide, guide.hosts["a"], guide.hosts["b"], guide.hosts["ns"]
    # ---- 1. Install (package blocks: tests/system/test_systemd.py), config, start, status
    g.run("a-conf-min")
    g.run("b-conf-min")
    g.run("a-start")
    g.run("b-start")
    out = g.run("b-status")
    g.shown("b-status", out)
    assert [NID_A, NID_B] == [stable_privacy_nid(SECRET[h]) for h in "ab"]
    assert re.search(rf"NID\s+{NID_B} \(stable-privacy\)\n", out), out
    # ---- 2. static peers
    g.run("a-conf-peer")
    g.run("b-hosts")
    g.run("b-conf-peer")
    g.run("a-restart-peer")
    g.run("b-restart-peer")
    out = g.run("a-peer-show")
    g.shown("a-peer-show", out)
    assert NID_B in out and L1 in out, out
    g.run("b-http")
    b.node.wait_listening(8080)
    out = g.run("a-ping")
    assert "3 packets transmitted, 3 received" in out, out
    out = g.run("a-curl")
    g.shown("a-curl", out)
    assert out.strip() == f"200 {ID_B}", out
    out = g.run("b-ping-a")
    assert "1 received" in out, out
    out = g.run("a-ilcc")
    g.shown("a-ilcc", out)
    assert NID_B in out, out
    # ---- 3. names: BIND on ns, [dns] on a, [dns.update] on b
    g.run("ns-keygen")
    g.run("ns-zone")
    g.run("ns-named-local")
    out = g.run("ns-check")
    g.shown("ns-check", out)
    assert "OK" in out and "loaded serial 1" in out, out
    g.run("ns-named")
    try:
        wait_for(lambda: "running" in g.bg_output("ns-named"), timeout=20, what="named running")
    except TimeoutError:
        raise AssertionError(g.bg_output("ns-named")[-3000:])
    g.run("b-copy-key")
    g.run("b-conf-dns")
    g.run("b-restart-dns")
    try:
        wait_for(lambda: json.loads(b.sh("ilnpctl --json dns status").stdout)["update"]["state"] == "ok", timeout=10,
                 what="b's first update")
    except TimeoutError:
        raise AssertionError(b.sh("ilnpctl dns status").stdout + ns.sh("ss -lntu").stdout + g.bg_output("ns-named"))
    out = g.run("b-dns-status")
    g.shown("b-dns-status", out)
    g.run("a-conf-dns")
    g.run("a-resolv")
    g.run("a-restart-dns")
    out = g.run("a-dig-l64")
    g.shown("a-dig-l64", out)
    assert out.split() == ["10", "2001:db8:1:0"], out
    out = g.run("a-dig")
    g.shown("a-dig", out)
    assert out.split() == [ID_B], out
    out = g.run("a-dig-lp")
    assert out.split() == [ID_B], out
    out = g.run("a-curl-name")
    g.shown("a-curl-name", out)
    assert out.strip() == f"200 {ID_B}", out
    out = g.run("a-peer-dns")
    g.shown("a-peer-dns", out)
    assert "b.lab.example" in out and "dns" in out, out
    # ---- 4. two uplinks on b
    g.run("b-conf-2")
    g.run("b-restart-2")
    wait_for(lambda: L2 in b.sh("ilnpctl locator show").stdout, timeout=10, what="b's second locator")
    out = g.run("b-locators")
    g.shown("b-locators", out)
    assert "eth0" in out and "eth1" in out and L2 in out, out
    out = g.run("b-policy")
    g.shown("b-policy", out)
    assert "per-flow" in out, out
    g.run("b-weight")
    out = g.run("b-policy-peer")
    g.shown("b-policy-peer", out)
    assert "per-packet" in out, out
    # ---- 5. a move, watched
    g.run("b-monitor")
    g.run("a-ping-long")
    time.sleep(1.5)
    g.run("b-move")
    out = g.wait_bg("a-ping-long", timeout=30)
    m = re.search(r"(\d+) packets transmitted, (\d+) received", out)
    assert m and int(m.group(2)) >= int(m.group(1)) - 3, out
    wait_for(lambda: "lu_acked" in g.bg_output("b-monitor"), timeout=5, what="lu_acked in the monitor")
    g.shown("b-move", g.bg_output("b-monitor"))
    out = g.run("a-ilcc-after")
    g.shown("a-ilcc-after", out)
    assert L2 in out, out
    wait_for(lambda: "2001:db8:2:0" in ns.sh("dig @2001:db8:1::53 +short b.lab.example L64").stdout, timeout=10,
             what="b's update after the move")
    out = g.run("a-dig-after")
    g.shown("a-dig-after", out)
    assert out.split() == ["10", "2001:db8:2:0"], out

    # ---- 6. beside systemd-resolved and NetworkManager: written, parsed (neither runs here)
    g.run("a-resolved")
    g.run("a-nm")
    for path, section, keys in (("/etc/systemd/resolved.conf.d/ilnp.conf", "Resolve", {"DNS": "127.0.0.1",
                                                                                      "Domains": "~lab.example"}),
                                ("/etc/NetworkManager/conf.d/ilnp-dns.conf", "main", {"dns": "systemd-resolved"})):
        ini = configparser.ConfigParser(strict=True, interpolation=None)
        ini.optionxform = str  # systemd's keys are case-sensitive
        ini.read_string(a.upper(path).read_text())
        assert ini.sections() == [section] and dict(ini[section]) == keys, (path, {s: dict(ini[s]) for s in ini})
    # the proxy a's resolved would forward to: 127.0.0.1:53, not resolved's 127.0.0.53
    assert "127.0.0.1:53" in a.sh("ss -Hlun").stdout
    # ---- 7. metrics
    g.run("b-conf-metrics")
    g.run("b-restart-metrics")
    out = g.run("b-scrape")
    g.shown("b-scrape", out)
    assert a.sh(f"ping -c 2 {ID_B}").returncode == 0  # a correspondent: the per-peer series
    text = b.sh("curl -s http://127.0.0.1:9469/metrics").stdout
    series = {l.split("{")[0].split()[0] for l in text.splitlines() if l and not l.startswith("#")}
    assert "ilnp_peer_tx_packets_total" in series and "ilnp_lu_handshake_seconds_bucket" in series, sorted(series)
    for row in re.findall(r"^\| `(ilnp_[a-z_]+)", GUIDE.read_text(), re.M):
        assert any(s == row or s.startswith(row + "_") for s in series), f"the guide's table names {row}: not served"
    g.run("b-prom-conf")
    out = g.run("b-promtool")
    assert "SUCCESS" in out, out
    promql = re.search(r"^```promql\n(.*?)^```", GUIDE.read_text(), re.S | re.M).group(1).splitlines()
    dash = json.loads(GRAFANA.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert len(dash["panels"]) >= 4 and exprs
    rules = "groups:\n  - name: guide\n    rules:\n" + "".join(
        f"      - record: guide:q{i}\n        expr: {json.dumps(e.replace('$instance', '.*'))}\n" for i, e in enumerate(promql + exprs))
    (g.out / "rules.yml").write_text(rules)
    r = subprocess.run(["promtool", "check", "rules", str(g.out / "rules.yml")], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr  # every expression parses as PromQL
    for e in promql + exprs:
        for name in re.findall(r"\b(ilnp_[a-z_]+)", e):
            assert any(s == name or name.startswith(s + "_") or s.startswith(name) for s in series), f"{e}: {name} not served"
    # ---- 8. troubleshooting
    g.run("b-tcpdump")
    time.sleep(1)  # tcpdump listening
    out = g.run("a-curl-cksum")
    assert out.strip() == "200", out
    dump = g.wait_bg("b-tcpdump", timeout=10)
    g.shown("a-curl-cksum", dump)
    out = g.run("b-stats")
    assert "bad_nonce" in out, out
    out = g.run("a-second")
    pid = a.ilnpd.pid
    g.shown("a-second", out)
    assert f"another ilnpd (pid {pid})" in out, out
    assert g.pos == len(g.blocks), f"blocks left: {[x.id for x in g.blocks[g.pos:]]}"
    # the errors the guide quotes without a block: their texts, as ilnpd prints them
    md = GUIDE.read_text()
    cfg = g.out / "no-uplinks.toml"
    cfg.write_text('#uplinks = ["eth0"]\n')
    r = ns.sh(f"ilnpd --config {cfg}")
    want = "uplinks: at least one uplink interface is required"
    assert r.returncode != 0 and want in r.stderr + r.stdout and f"`{want}`" in md, r.stderr
    cfg.write_text(f'uplinks = ["eth0"]\npin_dir = "{g.out}/pins"\n')
    r = ns.sh(f"ilnpd --config {cfg}")
    want = f"pin directory {g.out}/pins is not on a bpf filesystem (mount one: mount -t bpf bpf /sys/fs/bpf)"
    assert r.returncode != 0 and want in r.stderr + r.stdout, r.stderr + r.stdout
    assert "is not on a bpf filesystem (mount one: mount -t bpf bpf\n  /sys/fs/bpf)" in md
