"""The adversary suite as a lab plugin: its experiment file, the runs (one testbed per peer
mode, every attack on it) and the plugin's `run`.
"""

from __future__ import annotations

import grp
import subprocess
import sys
import time
from pathlib import Path

from .. import experiment
from ..testbed import Testbed
from .bed import MODES, Bed
from .catalogue import ATTACKS, DNS_CAP, ONCE, attack


class Spec(experiment.Spec):
    """experiments/attacks.toml: [experiment] = the full form, [quick] overrides it."""
    KEYS = {"modes", "attacks", "attempts", "flood", "flood_pps", "hijack_interval_s", "dns_clients"}

    def check(self, name: str, c: dict) -> None:
        for k, known in (("modes", MODES), ("attacks", ATTACKS)):
            bad = [x for x in c[k] if x not in known]
            if bad or not c[k]:
                raise ValueError(f"{self.path}: [{name}] {k} {bad or c[k]}: unknown or empty "
                                 f"(known: {', '.join(known)})")
        if c["attempts"] < 1 or c["flood"] < 1 or c["flood_pps"] < 0 or c["hijack_interval_s"] <= 0:
            raise ValueError(f"{self.path}: [{name}]: attempts, flood >= 1, flood_pps >= 0, hijack_interval_s > 0")
        if c["dns_clients"] <= DNS_CAP:
            raise ValueError(f"{self.path}: [{name}]: dns_clients > {DNS_CAP} (the proxy's cap)")


OPTIONS: set[str] = set()


def describe(spec: Spec) -> str:
    return f"{spec.title}  (attacks: {', '.join(spec.full['attacks'])}; peer: {', '.join(spec.full['modes'])})"


def ensure_group() -> bool:
    """Group ilnp (ilnpd gives its control socket to it), made if the host has none: True then."""
    try:
        grp.getgrnam("ilnp")
        return False
    except KeyError:
        subprocess.run(["groupadd", "--system", "ilnp"], check=True)
        return True


def run_experiment(cfg: dict, out: Path) -> dict:
    made = ensure_group()
    try:
        return _run(cfg, out)
    finally:
        if made:
            subprocess.run(["groupdel", "ilnp"], check=False)


def _run(cfg: dict, out: Path) -> dict:
    rows, notes = [], []
    t0 = time.monotonic()
    tag = experiment.run_tag("ia")
    for i, mode in enumerate(cfg["modes"]):
        rdir = out / mode
        rdir.mkdir(parents=True, exist_ok=True)
        names = [a for a in cfg["attacks"] if i == 0 or a not in ONCE]
        with Testbed(workdir=rdir, tag=f"{tag}{i}") as bed:
            try:
                b = Bed(bed, mode, v4="v4-replay" in names, dns="slow-dns" in names)
                for name in names:
                    rows.append(attack(b, name, cfg))
                b.stop.write_text("")
            except Exception as e:  # recorded: a failed testbed is a failed run
                notes.append(f"{mode}: {e}")
    return {"config": cfg, "rows": rows, "notes": notes, "elapsed_s": round(time.monotonic() - t0, 1)}


def run(spec: Spec, args, meta: dict) -> int:
    out = experiment.out_dir(spec, args)
    cfg = spec.cfg(args.quick)
    res = run_experiment(cfg, out)
    failed = len(res["notes"]) + sum(1 for r in res["rows"] if r["successes"])
    return experiment.finish(sys.modules[__package__], out, res, meta, args, failed)
