"""Ephemeral NIDs with the protocol authors' FreeBSD 14 ILNP6 (issue #44 item 5), against
its model (`ilnp_lab.freebsd`: `localnid_add_ephemeral`, `ilnp6.c`: 8 random bytes, not zero,
not the reserved subnet-anycast range, not a local NID, no u/g rule; its L64:NID on every
local interface) and ilnpd's temporary NIDs (`[privacy]`, design/privacy.md), in both roles.

Topology and helpers: tests/test_freebsd_interop.py (ilnpd on the CN, the FreeBSD-behaviour
node on the "mn" namespace).
"""

import pytest

from ilnp_lab.testbed import wait_for
from test_freebsd_interop import (CN_PORT, FB_ID, FB_L64_2, FB_NID, FB_PORT, ask, assert_no_nonce_trouble,
                                  echo_server, entry, setup)
from ilnp_test_util import CN_L64, CN_NID


def u_g(nid: str) -> tuple[int, int]:
    first = int(nid[:2], 16)
    return (first >> 1) & 1, first & 1


@pytest.mark.parametrize("lnid", [None, "0301:0203:0405:0607"], ids=["drawn", "group-bit"])
def test_freebsd_initiates_from_an_ephemeral_nid(bed, tmp_path, lnid):
    """FreeBSD connects from a NID of its ephemeral pool; ilnpd answers it, and takes its
    LU when it moves. FreeBSD does not clear the g bit (`group-bit`: one such NID). An
    ephemeral NID cannot be named in `peer_nonce` (it is new each time): a host that serves
    FreeBSD clients says `responder_nonce = "adopt"` for all (docs/interop.md)."""
    cn, r1, mn, dcn, fb = setup(bed, extra={"responder_nonce": "adopt"})
    try:
        echo_server(cn, tmp_path)
        kw = {"lnid": lnid} if lnid else {"ephemeral": True}
        eph = fb.cmd("connect", nid=CN_NID, l64s=[CN_L64], sport=5555, **kw)["lnid"]
        assert eph != FB_NID and eph in fb.cmd("state")["ephemeral"]
        fb.cmd("send", nid=CN_NID, sport=5555, dport=CN_PORT, payload="from an ephemeral nid")
        wait_for(lambda: fb.log("udp"), what="the CN's application answers the ephemeral NID")
        assert entry(dcn, eph) is not None and entry(dcn, FB_NID) is None, dcn.ctl("ilcc", "show")
        # an unknown NID's entry is embryonic until its next packet shows it heard us
        # (admission): only then does an LU move it (before, lu_embryonic)
        fb.cmd("send", nid=CN_NID, sport=5555, dport=CN_PORT, payload="second")
        wait_for(lambda: len(fb.log("udp")) >= 2, what="the second answer")
        # FreeBSD moves: its LU from the ephemeral NID moves the session
        fb.add_locator(FB_L64_2)
        fb.cmd("move", l64s=[FB_L64_2])
        wait_for(lambda: FB_L64_2 in [r["l64"] for r in entry(dcn, eph)["remote_locators"]],
                 what="the CN learns the move of the ephemeral NID")
        fb.cmd("send", nid=CN_NID, sport=5555, dport=CN_PORT, payload="after the move")
        wait_for(lambda: len(fb.log("udp")) >= 3, what="data after the move")
        assert_no_nonce_trouble(dcn)
    finally:
        fb.stop()
        dcn.stop()


def test_ilnpd_initiates_from_a_temporary_nid(bed, tmp_path):
    """ilnpd with [privacy] opens a session to FreeBSD: FreeBSD sees (and answers) the
    temporary NID, not the CN's stable one; the stable one still reaches FreeBSD when asked
    for by binding to it."""
    cn, r1, mn, dcn, fb = setup(bed, extra={"privacy": {"period_s": 600}})
    try:
        wait_for(lambda: len([a for a in cn.ip("-6", "addr", "show", "dev", "ilnp0").stdout.splitlines()
                              if "fd69" in a]) >= 2, what="a temporary identifier address")
        fb.cmd("listen", port=FB_PORT)
        assert ask(cn, "::", FB_ID, FB_PORT, "hello from a temporary nid") == "hello from a temporary nid"
        seen = fb.log("udp")[0]["nid"]
        assert seen != CN_NID and u_g(seen) == (0, 0), seen
        assert seen in fb.cmd("state")["entries"]
        assert_no_nonce_trouble(dcn)
    finally:
        fb.stop()
        dcn.stop()
