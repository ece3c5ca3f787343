"""The adversary suite's quick form (issue #42 item 7): `ilnp-lab run attacks --quick`.

Every attack of docs/security.md, the real peer live, lossy (30 % each way) and silent
(its stack drops Echo Requests): no attack succeeds, every attack packet is counted under
the reason that names it, no ILCC entry is created, the CN sends at most one packet toward
the real peer (a challenge echo) per attacker packet and, under a flood, no more than the
challenge limits allow (one open per NID, a 1 s hold-off after each: docs/architecture.md
§ Peer restart), and the live peer's own datagrams keep arriving throughout."""

import json
import subprocess
import sys

LAB = [sys.executable, "-m", "ilnp_lab.cli"]


def test_attacks_quick(tmp_path):
    out = tmp_path / "attacks"
    r = subprocess.run([*LAB, "run", "attacks", "--quick", "--out", str(out)], capture_output=True, text=True,
                       timeout=1200)
    res = json.loads((out / "results.json").read_text())
    assert not res["notes"], res["notes"]
    assert r.returncode == 0, r.stderr[-3000:]
    cfg = res["config"]
    rows = {(x["attack"], x["peer"]): x for x in res["rows"]}
    assert set(rows) == {(a, m) for a in cfg["attacks"] for m in cfg["modes"]}, set(rows)
    for key, x in rows.items():
        assert x["successes"] == 0, (key, x)
        assert x["counted"] == x["attempts"], (key, x)
        assert x["entries_created"] == 0 and x["toward_attacker"] == 0, (key, x)
        assert x["toward_third_parties"] <= x["attempts"], (key, x)
        # one challenge open per NID, then a 1 s hold-off: at most one per second (+1)
        assert x["challenges"] <= x["window_s"] + 1, (key, x)
        if x["peer"] == "live":
            # the live peer sends 20/s: at least half of that reached the application
            assert x["real_peer_delivered"] >= 0.5 * 20 * x["window_s"], (key, x)
    assert "**0 successes**" in (out / "report.md").read_text()
