"""The local NID (issue #44 item 1), through the real daemon in namespaces.

`nid = "auto"` (the default) is a stable-privacy NID: a keyed hash of a host secret in the
daemon's state_dir, not the modified EUI-64 of the uplink's MAC, with u = g = 0; the same
after a restart and after a kill -9; the same in another network namespace, on another
network and behind another MAC when the same state_dir is used (nothing of the network or
the hardware goes in). An upgrade from the MAC default (SIGUSR2 handover, the package's
postinst) keeps the MAC NID and the session, records it, and a deleted record moves the host
to a private NID. Each daemon gets its own state_dir from the lab (`Ilnpd.state_dir`).
"""

import json
import os
import signal
import stat
from pathlib import Path

from ilnp_lab.addr import identifier_address
from ilnp_lab.daemon import Ilnpd, Peer
from ilnp_lab.fixtures import MN_L64, three_node
from ilnp_test_util import CN_L64, CN_NID
from test_startup import echo_session as echo


def eui64(node, dev: str) -> str:
    """The modified EUI-64 of the interface's MAC (RFC 4291 App. A), as ilnpd writes a NID."""
    mac = json.loads(node.ip("-j", "link", "show", "dev", dev).stdout)[0]["address"]
    b = bytes.fromhex(mac.replace(":", ""))
    e = bytes([b[0] ^ 0x02, b[1], b[2], 0xFF, 0xFE, b[3], b[4], b[5]]).hex()
    return ":".join(e[i:i + 4] for i in range(0, 16, 4))


def u_g(nid: str) -> tuple[int, int]:
    first = int(nid[:2], 16)
    return (first >> 1) & 1, first & 1


def test_auto_nid_is_private_stable_and_not_derived_from_the_network(bed):
    cn, r1, mn = three_node(bed)
    mac_mn, mac_cn = eui64(mn, "eth0"), eui64(cn, "eth0")
    assert mac_mn != mac_cn
    d = Ilnpd(mn, ["eth0"]).start()
    st = d.status()
    nid = st["nid"]
    assert nid != mac_mn, f"the NID is the MAC's EUI-64 ({mac_mn}): a hardware identifier in every packet"
    assert u_g(nid) == (0, 0), f"{nid}: u/g bits {u_g(nid)}, want u = 0 (local) and g = 0 (unicast)"
    assert st["nid_source"] == "stable-privacy", st
    assert st["identifier_address"] == identifier_address(nid)
    state = Path(d.state_dir)
    secret = state / "nid-secret"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600 and secret.stat().st_size == 32
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert f"{nid} stable-privacy" in (state / "nid").read_text()
    log = d.log.read_text()
    assert f"NID {nid}: stable-privacy" in log, log[-2000:]
    assert secret.read_bytes().hex() not in log.lower(), "the secret is in the log"
    # ilnpctl shows where the NID came from
    assert f"{nid} (stable-privacy)" in d.ctl_raw("status").stdout
    # a restart (clean stop) and a crash (kill -9, the next one adopts)
    assert d.stop() == 0
    d.start()
    assert d.status()["nid"] == nid, "another NID after a restart"
    d.kill()
    d.start()
    assert "adopting it" in d.log.read_text()
    assert d.status()["nid"] == nid, "another NID after a kill -9"
    assert d.stop() == 0
    # another namespace, on another network (2001:db8:a::/64), behind another MAC, with the
    # same state_dir: the same NID
    other = Ilnpd(cn, ["eth0"], extra={"state_dir": d.state_dir}).start()
    assert other.status()["nid"] == nid, "the NID depends on the network or the hardware"
    assert other.stop() == 0
    # and with a state_dir of its own, a NID of its own
    own = Ilnpd(cn, ["eth0"]).start()
    assert own.status()["nid"] not in (nid, mac_cn)
    assert own.stop() == 0


def test_an_upgrade_from_the_mac_nid_keeps_it_and_the_session(bed):
    """The previous version's "auto" was the MAC's EUI-64 (now `nid = "eui64"`); the package's
    upgrade hands over with SIGUSR2 and the new ilnpd starts with the shipped default."""
    cn, r1, mn = three_node(bed)
    mac_nid = eui64(mn, "eth0")
    dmn = Ilnpd(mn, ["eth0"], nid="eui64", peers=[Peer("cn", CN_NID, [(CN_L64, 10)])]).start()
    st = dmn.status()
    assert (st["nid"], st["nid_source"]) == (mac_nid, "eui64"), st
    dcn = Ilnpd(cn, ["eth0"], nid=CN_NID, peers=[Peer("mn", mac_nid, [(MN_L64, 10)])]).start()
    mn_id = identifier_address(mac_nid)
    assert echo(cn, mn, mn_id) == "ilnp-hello\n"
    record = Path(dmn.state_dir) / "nid"
    assert not record.exists(), "eui64 records nothing"
    os.kill(dmn.proc.pid, signal.SIGUSR2)
    assert dmn.proc.wait(timeout=10) == 75, dmn.log.read_text()[-2000:]
    dmn.nid = None  # nid = "auto"
    dmn.start()
    st = dmn.status()
    assert (st["nid"], st["nid_source"]) == (mac_nid, "kept-from-upgrade"), st
    log = dmn.log.read_text()
    assert "kept from the previous run's state file" in log and "restored 1 ILCC entries" in log, log[-3000:]
    assert f"delete {record}" in log, log[-3000:]
    assert f"{mac_nid} kept-from-upgrade" in record.read_text()
    assert not (Path(dmn.state_dir) / "nid-secret").exists(), "a secret made that nothing needed"
    assert echo(cn, mn, mn_id) == "ilnp-hello\n", "the session to the MAC NID broke"
    # later starts (no state file after a clean stop): the record
    assert dmn.stop() == 0
    dmn.start()
    assert (dmn.status()["nid"], dmn.status()["nid_source"]) == (mac_nid, "kept-from-upgrade")
    # the documented move to a private NID: stop, delete the record, start
    assert dmn.stop() == 0
    record.unlink()
    dmn.start()
    st = dmn.status()
    assert st["nid_source"] == "stable-privacy" and st["nid"] != mac_nid and u_g(st["nid"]) == (0, 0), st
    assert dmn.stop() == 0 and dcn.stop() == 0
