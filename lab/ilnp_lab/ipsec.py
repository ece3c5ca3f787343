"""IKEv2 + ESP (strongSwan from Debian) between two ILNP hosts' identifier addresses, and
WireGuard between the same hosts for comparison (issue #44 item 4; docs/design/ipsec.md).

`Strongswan(node, dir, local_id, peer_id)` runs one charon-systemd per namespace with its own
strongswan.conf (STRONGSWAN_CONF), its own vici socket and log, and loads the swanctl.conf a
user writes (docs/guide.md § Authenticated sessions with IPsec: `guide_swanctl_conf` reads it
from the guide, so the lab and the test use that text verbatim).

The ESP backend (`esp`: "kernel" or "libipsec"; by default "kernel" where the kernel has
esp6, `kernel_esp()`): on a kernel with esp6 (Debian's, as in the Debian 12 VM,
tests/system/esp_guest.py) charon's kernel-netlink backend installs the SAs and the policies
in the kernel's XFRM (ESP straight after ILNP's Destination Options; a packet from the peer's
identifier address that is not ESP with the SA's keys is dropped by the inbound policy), and
the swanctl.conf is the guide's, unchanged. This project's kernels (and CI's) are built
without CONFIG_INET6_ESP (and without WireGuard, and without module loading), so there
charon's ESP runs in user space: strongSwan's kernel-libipsec plugin (a TUN device, ESP in UDP
4500, routes in table 220; IKE and ESP leave with a firewall mark so that they are not routed
into the tunnel themselves). The kernel's XFRM policy engine is there (CONFIG_XFRM_USER) and
does what it does for kernel ESP: `require_esp` installs inbound policies that make the kernel
drop any packet from the peer's identifier address that did not come out of the tunnel
(XfrmInTmplMismatch in /proc/net/xfrm_stat).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from .testbed import Node, StepError, run, stop_process, wait_for

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide.md"

# charon-systemd's own settings in the lab: the plugins it loads (no /etc/strongswan.d;
# kernel-libipsec only for user-space ESP), its vici socket and its log; for libipsec the
# guide's `charon { ... }` block follows verbatim, and charon-systemd reads the `charon`
# section where its own has no value
STRONGSWAN_CONF = """\
charon-systemd {{
    load_modular = no
    load = random nonce openssl pem pkcs1 x509 pubkey hmac sha2 aes gcm kdf {libipsec}kernel-netlink socket-default vici
    plugins {{
        vici {{
            socket = unix://{vici}
        }}
    }}
    journal {{
        default = -1
    }}
    filelog {{
        charon {{
            path = {log}
            default = 1
            ike = 2
            time_format = %T
            append = no
            flush_line = yes
        }}
    }}
}}
"""


def _guide_section() -> str:
    text = GUIDE.read_text()
    return text[text.index("Authenticated sessions with IPsec\n"):]


def _guide_block(start: str, what: str) -> str:
    """The fenced block of the guide's § 9 whose text starts with `start`."""
    m = re.search(r"```\w*\n(" + re.escape(start) + r".*?)```", _guide_section(), re.S)
    if not m:
        raise StepError(f"docs/guide.md § Authenticated sessions with IPsec: no {what} block")
    return m.group(1)


def guide_swanctl_conf(local_id: str, peer_id: str, psk: str) -> str:
    """The guide's swanctl.conf, verbatim, with the two identifier addresses and the key."""
    return (_guide_block("connections {", "swanctl.conf").replace("LOCAL_ID", local_id)
            .replace("PEER_ID", peer_id).replace("0sREPLACE_WITH_A_KEY", psk))


def guide_strongswan_conf() -> str:
    """The guide's strongswan.conf block for libipsec (kernels without esp6), verbatim."""
    return _guide_block("charon {", "strongswan.conf")


def guide_inbound_policy(local_id: str, peer_id: str) -> str:
    """The guide's commands for libipsec's inbound check, verbatim, with the two addresses."""
    return _guide_block("ip link set ipsec0", "inbound policy").replace("LOCAL_ID", local_id).replace("PEER_ID", peer_id)


class Strongswan:
    """One charon-systemd in `node`'s namespace, its files under `dir`."""

    def __init__(self, node: Node, dir: Path, local_id: str, peer_id: str, psk: str, esp: str | None = None):
        self.node, self.dir, self.local_id, self.peer_id = node, Path(dir), local_id, peer_id
        self.esp = esp or ("kernel" if kernel_esp() else "libipsec")
        if self.esp not in ("kernel", "libipsec"):
            raise StepError(f"esp = {esp!r}: kernel or libipsec")
        self.dir.mkdir(parents=True, exist_ok=True)
        # a Unix socket path is at most 107 bytes: not under a deep output folder
        self.vici = Path("/run/ilnp-lab") / f"{node.ns}.vici"
        self.vici.parent.mkdir(exist_ok=True)
        self.log = self.dir / "charon.log"
        self.conf = self.dir / "strongswan.conf"
        libipsec = self.esp == "libipsec"
        self.conf.write_text(STRONGSWAN_CONF.format(vici=self.vici, log=self.log, libipsec="kernel-libipsec " * libipsec)
                             + (guide_strongswan_conf() if libipsec else ""))
        self.swanctl_conf = self.dir / "swanctl.conf"
        self.swanctl_conf.write_text(guide_swanctl_conf(local_id, peer_id, psk))
        self.proc: subprocess.Popen | None = None

    def start(self, inbound_policy: bool = True) -> "Strongswan":
        """charon with the configuration loaded; `inbound_policy`: and, with libipsec, the
        guide's inbound check (`require_esp`; without it libipsec's ESP protects what goes
        through the tunnel but nothing stops a forged packet that does not). Kernel ESP: the
        inbound policy is charon's own, installed with the SA."""
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "STRONGSWAN_CONF": str(self.conf)}
        self.proc = self.node.spawn("charon-systemd", env=env,
                                    stderr=open(self.dir / "charon.stderr", "w"))
        # (30 s: charon under qemu's TCG, the Debian 12 VM)
        wait_for(lambda: self.vici.exists() or self.proc.poll() is not None, timeout=30, what="charon's vici socket")
        try:
            if self.proc.poll() is not None:
                raise StepError(f"charon-systemd exited: {(self.dir / 'charon.stderr').read_text()}")
            self.swanctl("--load-all", "--file", str(self.swanctl_conf))
            if inbound_policy and self.esp == "libipsec":
                self.require_esp()
        except BaseException:
            self.stop()  # no charon and no socket left behind
            raise
        return self

    def swanctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return self.node.run("swanctl", *args, "--uri", f"unix://{self.vici}", check=check, timeout=30)

    def require_esp(self) -> None:
        """The kernel's inbound policy for the peer's identifier address, as the guide says for
        libipsec (its commands run verbatim): only what came out of the tunnel (marked on its
        way in) or IKE/ESP-in-UDP itself; all else is dropped and counted (XfrmInTmplMismatch).
        What charon's kernel-netlink backend installs itself with kernel ESP."""
        if self.esp != "libipsec":
            raise StepError("require_esp is libipsec's: with kernel ESP charon installs the inbound policy")
        tun = self.tun()
        if tun != "ipsec0":
            raise StepError(f"libipsec's TUN device is {tun}, the guide says ipsec0")
        self.node.sh("set -e\n" + guide_inbound_policy(self.local_id, self.peer_id))

    def tun(self) -> str:
        """kernel-libipsec's TUN device, as charon names it in its log (ilnp0 is a TUN too)."""
        find = lambda: re.findall(r"created TUN device: (\S+)", self.log.read_text() if self.log.exists() else "")  # noqa: E731
        wait_for(find, timeout=10, what="libipsec's TUN device")
        return find()[0]

    def initiate(self, child: str = "ilnp") -> None:
        self.swanctl("--initiate", "--child", child, "--timeout", "20")

    def sas(self) -> list[dict]:
        """`swanctl --list-sas --raw`, parsed: one dict per IKE_SA with its CHILD_SAs' SPIs."""
        out = self.swanctl("--list-sas", "--raw").stdout
        sas = []
        for line in out.splitlines():
            m = re.match(r"list-sa event \{(\S+) \{(.*)\}\}$", line.strip())
            if not m:
                continue
            body = m.group(2)
            sas.append({
                "name": m.group(1),
                "state": _field(body, "state"),
                "uniqueid": _field(body, "uniqueid"),
                "local_host": _field(body, "local-host"),
                "remote_host": _field(body, "remote-host"),
                "spi_in": re.findall(r"spi-in=([0-9a-f]+)", body),
                "spi_out": re.findall(r"spi-out=([0-9a-f]+)", body),
                "child_uniqueids": re.findall(r"\{[^{}]*?uniqueid=(\d+) reqid", body),
                "bytes_in": sum(int(x) for x in re.findall(r"bytes-in=(\d+)", body)),
                "packets_in": sum(int(x) for x in re.findall(r"packets-in=(\d+)", body)),
            })
        return sas

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None
        self.vici.unlink(missing_ok=True)


def _field(body: str, key: str) -> str | None:
    m = re.search(rf"(?:^|[ {{]){re.escape(key)}=(\S+?)(?=[ }}]|$)", body)
    return m.group(1) if m else None


def xfrm_stat(node: Node) -> dict[str, int]:
    """/proc/net/xfrm_stat of the node's namespace."""
    out = node.run("cat", "/proc/net/xfrm_stat").stdout
    return {k: int(v) for k, v in (l.split() for l in out.splitlines() if l.strip())}


def kernel_has(option: str) -> bool:
    """Whether the running kernel was built with CONFIG_<option> (=y or =m); False if unknown."""
    try:
        out = run(["sh", "-c", "zcat /proc/config.gz 2>/dev/null || cat /boot/config-$(uname -r)"], check=False).stdout
    except OSError:
        return False
    return re.search(rf"^CONFIG_{option}=[ym]$", out, re.M) is not None


def kernel_esp() -> bool:
    """Whether this kernel does ESP over IPv6 itself: esp6 built in, loaded, or loadable."""
    if kernel_has("INET6_ESP") or Path("/sys/module/esp6").exists():
        return True
    try:
        return run(["modprobe", "-n", "-q", "esp6"], check=False).returncode == 0
    except OSError:  # no modprobe
        return False


def xfrm_states(node: Node) -> list[dict]:
    """`ip -s xfrm state` of the node's namespace: per SA its src, dst, proto, SPI and the
    kernel's byte and packet counters ("lifetime current")."""
    out, sas = node.run("ip", "-s", "xfrm", "state").stdout, []
    for block in re.split(r"\n(?=src )", out.strip()):
        m = re.match(r"src (\S+) dst (\S+)\s+proto (\S+) spi (0x[0-9a-f]+)", block)
        c = re.search(r"lifetime current:\s+(\d+)\(bytes\), (\d+)\(packets\)", block)
        if m:
            sas.append({"src": m.group(1), "dst": m.group(2), "proto": m.group(3), "spi": m.group(4),
                        "bytes": int(c.group(1)) if c else 0, "packets": int(c.group(2)) if c else 0})
    return sas


class Wireguard:
    """WireGuard on `node` as its users set it up: `ip link add wg0 type wireguard` where the
    kernel has the module, else wireguard-go (the user-space implementation, same protocol,
    same `wg` configuration); then `wg set` with the peer's key, its allowed IP and, on the
    side that knows where the other is, its endpoint (the other side learns it and follows the
    peer when it roams: WireGuard's own mobility)."""

    def __init__(self, node: Node, dir: Path, inner: str, port: int = 51820):
        # wireguard-go's control socket is /var/run/wireguard/IFACE.sock, shared by all
        # namespaces: the interface's name is unique per run (the bed's tag and the node)
        self.iface = ("wg" + node.ns[-7:])[:15]
        self.node, self.dir, self.inner, self.port = node, Path(dir), inner, port
        self.dir.mkdir(parents=True, exist_ok=True)
        self.key = self.dir / "private.key"
        self.key.write_text(run(["wg", "genkey"]).stdout)
        self.key.chmod(0o600)
        self.public = run(["wg", "pubkey"], input=self.key.read_text()).stdout.strip()
        self.proc: subprocess.Popen | None = None
        self.userspace = not kernel_has("WIREGUARD")

    def start(self) -> "Wireguard":
        if self.userspace:
            # -f: in the foreground, a process we track by pid
            self.proc = self.node.spawn("wireguard-go", "-f", self.iface,
                                        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
                                             "WG_PROCESS_FOREGROUND": "1"},
                                        stderr=open(self.dir / "wireguard-go.log", "w"))
            wait_for(lambda: self.node.ip("link", "show", self.iface, check=False).returncode == 0,
                     timeout=10, what="wireguard-go's interface")
        else:
            self.node.ip("link", "add", self.iface, "type", "wireguard")
        self.node.run("wg", "set", self.iface, "listen-port", str(self.port), "private-key", str(self.key))
        self.node.ip("addr", "add", f"{self.inner}/64", "dev", self.iface, "nodad")
        self.node.ip("link", "set", self.iface, "mtu", "1280", "up")
        return self

    def add_peer(self, public: str, inner: str, endpoint: str | None = None, keepalive: int = 25) -> None:
        args = ["wg", "set", self.iface, "peer", public, "allowed-ips", f"{inner}/128"]
        if endpoint:
            args += ["endpoint", endpoint, "persistent-keepalive", str(keepalive)]
        self.node.run(*args)

    def endpoint(self) -> str:
        return self.node.run("wg", "show", self.iface, "endpoints").stdout.split()[-1]

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None
        else:
            self.node.ip("link", "del", self.iface, check=False)
