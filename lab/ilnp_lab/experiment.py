"""The lab's experiment framework: every experiment is a plugin module, found here.

An experiment file names its plugin in its first table (a file without `plugin` is a mobility
experiment: moves on a timeline x schemes x runs, `mobility.py`):

    [experiment]
    name = "seed004-ilcc"
    plugin = "admission"      # a key of PLUGINS below: what the experiment measures

and `ilnp-lab` hands it to that module. A plugin provides:

    Spec(path)               parse and validate the file, refusing unknown tables and keys
                             (ValueError naming the file, the table and the key); attributes
                             .name, .title, .path. Most plugins subclass `Spec` below.
    describe(spec) -> str    what `ilnp-lab list` / `check` print after the name
    OPTIONS                  the `ilnp-lab run` options it honours besides the common ones
                             (--quick, --out, --json, --seed); any other option given is refused
    run(spec, args, meta) -> int
                             run it and end with `finish` (results.json, meta.json, report.md,
                             one exit-code rule); `meta` comes from `start_meta`
    report(out, results, meta) -> Path
                             (re)write report.md and plots from results (`ilnp-lab report DIR`),
                             opening with `header(meta, ...)`

so every experiment records the same provenance (provenance.py) and reports it the same way.
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

from . import provenance

from .topology import EXPERIMENTS

PLUGINS = {"mobility": "ilnp_lab.mobility", "balancing": "ilnp_lab.balancing", "admission": "ilnp_lab.admission",
           "signalling": "ilnp_lab.signalling", "aggregation": "ilnp_lab.aggregation", "v4v6": "ilnp_lab.v4v6",
           "attacks": "ilnp_lab.attacks", "authsessions": "ilnp_lab.authsessions"}
COMMON = {"quick", "out", "json", "seed"}


def experiment_path(name: str | Path) -> Path:
    name = str(name)
    return Path(name) if name.endswith(".toml") else EXPERIMENTS / f"{name}.toml"


def plugin_name(path: Path) -> str:
    """The plugin an experiment file names ("mobility" when it names none, or when the file
    cannot be read: the mobility parser then says what is wrong with it)."""
    try:
        e = tomllib.loads(path.read_text()).get("experiment", {})
    except (OSError, tomllib.TOMLDecodeError):
        return "mobility"
    if "runner" in e:
        raise ValueError(f"{path}: [experiment] runner = {e['runner']!r}: the key is now `plugin` "
                         f"(known: {', '.join(sorted(PLUGINS))})")
    p = e.get("plugin", "mobility")
    if p not in PLUGINS:
        raise ValueError(f"{path}: [experiment] plugin = {p!r}: unknown (known: {', '.join(sorted(PLUGINS))})")
    return p


def load(path: Path):
    """(plugin module, its Spec of the file) for an experiment file."""
    mod = importlib.import_module(PLUGINS[plugin_name(path)])
    return mod, mod.Spec(path)


def plugin_of(mod) -> str:
    return mod.__name__.rsplit(".", 1)[1]


class Spec:
    """An experiment file whose [experiment] table is the full form (after name, title and
    plugin) and whose [quick] table overrides it; further tables only as the plugin names them
    in TABLES (their keys, or None for a table passed on as it is, e.g. an ilnpd config that
    ilnpd checks). Unknown tables and keys are refused. A subclass names its KEYS, the full
    form's DEFAULTS and the quick form's QUICK_DEFAULTS, and checks each form in `check`."""
    KEYS: set[str] = set()
    DEFAULTS: dict = {}
    QUICK_DEFAULTS: dict = {}
    TABLES: dict[str, set[str] | None] = {}
    REQUIRED: dict[str, set[str]] = {}  # keys a table must have ("experiment": the full form's)

    def __init__(self, path: Path):
        self.path = path
        d = tomllib.loads(path.read_text())
        bad = set(d) - {"experiment", "quick", *self.TABLES}
        if bad:
            raise ValueError(f"{path}: table(s) {', '.join(sorted(bad))}: unknown (known: "
                             f"{', '.join(['experiment', 'quick', *sorted(self.TABLES)])})")
        e = dict(d.get("experiment", {}))
        missing = {"name", "title"} - set(e)
        if missing:
            raise ValueError(f"{path}: [experiment] needs {' and '.join(sorted(missing))}")
        self.name, self.title = e.pop("name"), e.pop("title")
        e.pop("plugin", None)
        q = dict(d.get("quick", {}))
        self.tables = {t: dict(d.get(t, {})) for t in self.TABLES}
        given = [("experiment", e, self.KEYS), ("quick", q, self.KEYS)]
        given += [(t, self.tables[t], keys) for t, keys in self.TABLES.items() if keys is not None]
        for table, have, keys in given:
            unknown = set(have) - keys
            if unknown:
                raise ValueError(f"{path}: [{table}] {', '.join(sorted(unknown))}: unknown "
                                 f"(known: {', '.join(sorted(keys))})")
        self.full = {**self.DEFAULTS, **e}
        self.quick = {**self.full, **self.QUICK_DEFAULTS, **q}
        for table, keys in self.REQUIRED.items():
            missing = keys - set(self.full if table == "experiment" else self.tables[table])
            if missing:
                raise ValueError(f"{path}: [{table}] needs {', '.join(sorted(missing))}")
        for name, c in (("experiment", self.full), ("quick", self.quick)):
            try:
                self.check(name, c)
            except KeyError as k:
                raise ValueError(f"{path}: [{name}] needs {k.args[0]}") from None

    def check(self, name: str, cfg: dict) -> None:
        """Raise ValueError naming the file, the table and the bad value."""

    def cfg(self, quick: bool, **given) -> dict:
        """The quick or the full form, with the options the user `given` (those not None)."""
        return {**(self.quick if quick else self.full), **{k: v for k, v in given.items() if v is not None}}


def refused_options(mod, args, defaults: dict) -> list[str]:
    """The options the user gave that this plugin does not honour (`defaults`: every `ilnp-lab run`
    option's default, the command line's; a common option is always honoured)."""
    given = [k for k, d in defaults.items() if k not in COMMON and getattr(args, k, d) != d]
    return ["--" + k.replace("_", "-") for k in given if k not in mod.OPTIONS]


def start_meta(spec, args) -> dict:
    return {"experiment": spec.name, "title": spec.title, "file": str(spec.path),
            "command": shlex.join(["ilnp-lab", "run", *sys.argv[2:]] if sys.argv[1:2] == ["run"] else sys.argv),
            "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"), "quick": args.quick,
            "cores": os.cpu_count(), "seed": args.seed, "jobs": getattr(args, "jobs", 1),
            "versions": provenance.versions(), "provenance_start": provenance.provenance()}


def finish_meta(meta: dict, failed: int = 0) -> dict:
    meta["runs_failed"] = failed
    meta["provenance_end"] = provenance.provenance()
    meta["reference_not_because"] = provenance.reference_check(meta)
    return meta


def header(meta: dict, *facts: str) -> list[str]:
    """The opening lines of every report: title, command, when, which form, the machine,
    `facts` the plugin adds (durations, tests, elapsed time), and the provenance line."""
    form = "QUICK FORM (not a reference run)" if meta.get("quick") else "full form"
    said = ", ".join([f"Started {meta['started']}", form, f"{meta.get('cores')} cores", *facts])
    return [f"# {meta.get('title') or meta['experiment']}", "", f"Command: `{meta['command']}`  ", said + ".",
            provenance.provenance_line(meta), ""]


def out_dir(spec, args) -> Path:
    """Where a run writes: --out, else out/<experiment>; created."""
    out = args.out or Path("out") / spec.name
    out.mkdir(parents=True, exist_ok=True)
    return out


def run_tag(prefix: str) -> str:
    """A short prefix of this run's own namespace and device names (unique per run)."""
    return f"{prefix}{os.getpid() % 1000}{os.urandom(1).hex()}"


def rotations(cases: list, runs: int):
    """(run index, case): `runs` rounds of every case, each round starting one case later than
    the one before (interleaved: a slow drift of the machine spreads over every case)."""
    for i in range(runs):
        k = i % len(cases)
        for case in cases[k:] + cases[:k]:
            yield i, case


def finish(mod, out: Path, res, meta: dict, args, failed: int, json_out=None, interrupted: bool = False) -> int:
    """The end of every plugin's `run`: provenance, results.json, meta.json, report.md, then
    `json_out` (default: the module's summary and the results) with --json, else where the
    files are. Exit status 130 when interrupted, 1 if any run failed, else 0 (one rule for
    every experiment)."""
    if interrupted:
        meta["interrupted"] = True
    finish_meta(meta, failed=failed)
    (out / "results.json").write_text(json.dumps(res, indent=1))
    (out / "meta.json").write_text(json.dumps(meta, indent=1))
    path = mod.report(out, res, meta)
    if args.json:
        print(json.dumps({"summary": mod.summarise(res), **res} if json_out is None else json_out, indent=1))
    else:
        print(f"results: {out / 'results.json'}; report: {path}")
    return 130 if interrupted else (1 if failed else 0)


def run(loaded, args, defaults: dict) -> int:
    """Run `loaded` = (module, spec) from `load` with the `ilnp-lab run` arguments (`defaults`: their
    defaults, to tell which ones the user gave)."""
    mod, spec = loaded
    bad = refused_options(mod, args, defaults)
    if bad:
        print(f"ilnp-lab run {spec.name}: {', '.join(bad)} do(es) not apply to this experiment "
              f"({plugin_of(mod)} plugin; it honours {', '.join(sorted(COMMON | set(mod.OPTIONS)))})",
              file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("ilnp-lab run: needs root (network namespaces, BPF)", file=sys.stderr)
        return 2
    if getattr(args, "runs", None) is not None and args.runs < 1:
        print(f"ilnp-lab run: --runs {args.runs}: must be at least 1", file=sys.stderr)
        return 2
    return mod.run(spec, args, start_meta(spec, args))


def plugin_of_run(meta: dict):
    """The plugin module of the experiment a run folder's meta.json names (its report needs
    no more: `report(out, results, meta)`)."""
    shipped = experiment_path(meta["experiment"])  # this checkout's file (meta's may be another checkout's)
    path = shipped if shipped.is_file() else Path(meta.get("file") or shipped)
    return importlib.import_module(PLUGINS[plugin_name(path)])
