"""Experiments with their own runner: one home for how `ilnp-lab` finds and starts them.

Most experiments are *mobility* experiments: moves on a timeline × schemes × runs, captures
analysed for handoff gaps (`topology.py` parses them, `runner.py` runs them). Some are not —
a load sweep (seed 004), a balancing/overhead test with no move (seed 002) — and forcing them
into runner.py's model would bend it. Such an experiment file says so in its first table:

    [experiment]
    name = "seed004-ilcc"
    runner = "seed004"        # a key of RUNNERS below

and `cli.py` hands it to that module. A runner module provides:

    Spec(path)               parse and validate the file; ValueError naming the bad item;
                             attributes .name, .title, .path
    describe(spec) -> str    what `ilnp-lab list` / `check` print after the name
    OPTIONS                  the `ilnp-lab run` options it honours besides the common ones
                             (--quick, --out, --json, --seed); any other option given is refused
    run(spec, args, meta) -> int
                             run it, write out/results.json, meta.json and report.md; `meta`
                             comes from `start_meta` (command, time, provenance) and the module
                             calls `finish_meta` before writing it
    report(out, results, meta) -> Path
                             (re)write report.md and plots from results (`ilnp-lab report DIR`)

so every such experiment records the same provenance (commit, clean tree, ilnpd build) as the
mobility runner and the same `reference_not_because` verdict.
"""

from __future__ import annotations

import datetime
import importlib
import json
import os
import shlex
import sys
import tomllib
from pathlib import Path

from .topology import EXPERIMENTS

RUNNERS = {"aggregation": "ilnp_lab.aggregation", "seed002": "ilnp_lab.seed002", "seed004": "ilnp_lab.seed004",
           "signalling": "ilnp_lab.signalling", "v4v6": "ilnp_lab.v4v6"}
COMMON = {"quick", "out", "json", "seed"}
# `ilnp-lab run` options and their defaults, to tell which ones the user gave
RUN_DEFAULTS = {"runs": None, "scenario": None, "scheme": None, "cc": None, "jobs": 1, "dad": "optimistic",
                "dad_transmits": 1, "assoc_delay": 0.0, "sysctl": None, "no_scale": False}


def experiment_path(name: str) -> Path:
    return Path(name) if name.endswith(".toml") else EXPERIMENTS / f"{name}.toml"


def runner_name(path: Path) -> str | None:
    """The `runner` an experiment file names, None for a mobility experiment (or no file)."""
    try:
        r = tomllib.loads(path.read_text()).get("experiment", {}).get("runner")
    except (OSError, tomllib.TOMLDecodeError):
        return None
    if r is not None and r not in RUNNERS:
        raise ValueError(f"{path}: [experiment] runner = {r!r}: unknown (known: {', '.join(sorted(RUNNERS))})")
    return r


def load(path: Path):
    """(module, spec) for an experiment file with its own runner, None otherwise."""
    r = runner_name(path)
    if r is None:
        return None
    mod = importlib.import_module(RUNNERS[r])
    return mod, mod.Spec(path)


def read_tables(path: Path, keys: set[str]) -> tuple[str, str, dict, dict]:
    """An own-runner file's name, title, [experiment] parameters (the full form) and [quick]
    overrides, each checked against the runner's known `keys` (ValueError naming the bad one)."""
    d = tomllib.loads(path.read_text())
    e = dict(d["experiment"])
    name, title = e.pop("name"), e.pop("title")
    e.pop("runner", None)
    q = dict(d.get("quick", {}))
    for table, given in (("experiment", e), ("quick", q)):
        bad = set(given) - keys
        if bad:
            raise ValueError(f"{path}: [{table}] {', '.join(sorted(bad))}: unknown (known: {', '.join(sorted(keys))})")
    return name, title, e, q


class TableSpec:
    """An own-runner file whose [experiment] table is the full form and whose [quick] table
    overrides it (`read_tables`); subclasses name their KEYS and check the two forms in
    `check(name, cfg)`."""
    KEYS: set[str] = set()

    def __init__(self, path: Path):
        self.path = path
        self.name, self.title, e, q = read_tables(path, self.KEYS)
        self.full = e
        self.quick = {**e, **q}
        for name, c in (("experiment", self.full), ("quick", self.quick)):
            self.check(name, c)

    def check(self, name: str, cfg: dict) -> None:
        """Raise ValueError naming the file, the table and the bad value."""

    def cfg(self, quick: bool) -> dict:
        return dict(self.quick if quick else self.full)


def refused_options(mod, args) -> list[str]:
    """The options the user gave that this runner does not honour."""
    given = [k for k, d in RUN_DEFAULTS.items() if getattr(args, k, d) != d]
    return ["--" + k.replace("_", "-") for k in given if k not in mod.OPTIONS]


def start_meta(spec, args) -> dict:
    from . import runner
    return {"experiment": spec.name, "title": spec.title, "file": str(spec.path),
            "command": shlex.join(["ilnp-lab", "run", *sys.argv[2:]] if sys.argv[1:2] == ["run"] else sys.argv),
            "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"), "quick": args.quick,
            "cores": os.cpu_count(), "seed": args.seed, "jobs": 1,
            "versions": runner.versions(), "provenance_start": runner.provenance()}


def finish_meta(meta: dict, failed: int = 0) -> dict:
    from . import runner
    meta["runs_failed"] = failed
    meta["provenance_end"] = runner.provenance()
    meta["reference_not_because"] = runner.reference_check(meta)
    return meta


def provenance_line(meta: dict) -> str:
    """The report line saying which code produced the numbers and whether it is a reference run."""
    p = meta.get("provenance_start") or {}
    why = meta.get("reference_not_because")
    if why is None:
        return "Provenance: not recorded (a run from before the lab recorded it)."
    state = "reference run" if not why else "not a reference run: " + "; ".join(why)
    return f"Commit {(p.get('commit') or '?')[:12]}{'' if p.get('clean') else ' (dirty)'}: {state}."


def finish(mod, out: Path, res, meta: dict, args, failed: int, json_out=None) -> int:
    """The end of every own runner's `run`: provenance, results.json, meta.json, report.md,
    then `json_out` (default: the module's summary and the results) with --json, else where
    the files are. Exit status 1 if any run failed, else 0 (one rule for every runner)."""
    finish_meta(meta, failed=failed)
    (out / "results.json").write_text(json.dumps(res, indent=1))
    (out / "meta.json").write_text(json.dumps(meta, indent=1))
    path = mod.report(out, res, meta)
    if args.json:
        print(json.dumps({"summary": mod.summarise(res), **res} if json_out is None else json_out, indent=1))
    else:
        print(f"results: {out / 'results.json'}; report: {path}")
    return 1 if failed else 0


def run(own, args) -> int:
    """Run `own` = (module, spec) from `load` with the `ilnp-lab run` arguments."""
    mod, spec = own
    bad = refused_options(mod, args)
    if bad:
        print(f"ilnp-lab run {spec.name}: {', '.join(bad)} do(es) not apply to this experiment "
              f"({mod.__name__.rsplit('.', 1)[1]} runner; it honours {', '.join(sorted(COMMON | set(mod.OPTIONS)))})",
              file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("ilnp-lab run: needs root (network namespaces, BPF)", file=sys.stderr)
        return 2
    if getattr(args, "runs", None) is not None and args.runs < 1:
        print(f"ilnp-lab run: --runs {args.runs}: must be at least 1", file=sys.stderr)
        return 2
    return mod.run(spec, args, start_meta(spec, args))


def of_run_folder(meta: dict):
    """(module, spec) when a run folder's meta.json names an own-runner experiment, else None."""
    f = meta.get("file")
    if f and Path(f).is_file():
        return load(Path(f))
    p = EXPERIMENTS / f"{meta.get('experiment')}.toml"  # folders written before meta recorded the file
    return load(p) if p.is_file() else None
