"""`ilnp-lab`: the laboratory's command line.

    ilnp-lab demo                         the README demo (a TCP session surviving a move)
    ilnp-lab list                         the shipped experiments and their plugins
    ilnp-lab check FILE|NAME              validate an experiment file, create nothing
    ilnp-lab run NAME|FILE [--quick] [--runs N] [--out DIR] [--json] [--seed N] [plugin options]
    ilnp-lab report DIR [--reanalyse]     rebuild report.md, CSV and plots from DIR/results.json

Every experiment is a plugin named by what it measures (experiment.py): mobility (moves on a
timeline, the default; options --scenario MOVE, --scheme S, --cc, --jobs, --dad, --dad-transmits,
--assoc-delay, --sysctl), balancing (seed002-lb), admission (seed004-ilcc; --scenario
transport|network, --scheme socket|open, --no-scale), signalling (signalling-scale; --scheme
ilnp|mptcp), aggregation, v4v6 (dime-v4v6). An option a plugin does not honour is refused.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

from . import experiment, provenance
from .topology import DAD_MODES, EXPERIMENTS, SCHEMES, load


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="ilnp-lab", description="ILNPv6 laboratory: namespaced testbeds, experiments, reports",
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("demo", help="two namespaced hosts, an unmodified app over ILNPv6, a move mid-flow", add_help=False)
    sub.add_parser("list", help="list the shipped experiments")
    c = sub.add_parser("check", help="validate an experiment file (nothing is created)")
    c.add_argument("experiment", help="a shipped experiment's name or a .toml path")
    r = sub.add_parser("run", help="run an experiment and write results, plots and report.md")
    r.add_argument("experiment", help="a shipped experiment's name (see `list`) or a .toml path")
    r.add_argument("--quick", action="store_true", help="short flows, one run per cell (the file's [quick] table)")
    r.add_argument("--runs", type=int, help="runs per cell (default: the file's runs)")
    r.add_argument("--scenario", action="append", metavar="MOVE", help="only this move (repeatable), e.g. lan-wan")
    r.add_argument("--scheme", action="append", metavar="S", help="only this scheme (repeatable): " + ", ".join(SCHEMES))
    r.add_argument("--cc", action="append", metavar="NAME",
                   help="TCP congestion control (repeatable; default: the file's [traffic] cc), e.g. cubic, bbr, hybla, veno "
                        "(hybla/veno: loaded as BPF struct_ops when the kernel lacks them)")
    r.add_argument("--out", type=Path, help="output folder (default out/<experiment>)")
    r.add_argument("--jobs", type=int, default=1, help="testbeds run at once (each run is independent)")
    r.add_argument("--seed", type=int, default=1, help="seed for nonces and link loss (run i uses seed+i)")
    r.add_argument("--dad", choices=DAD_MODES, default="optimistic",
                   help="Duplicate Address Detection on the hosts' SLAAC interfaces (default optimistic, RFC 4429)")
    r.add_argument("--dad-transmits", type=int, default=1, metavar="N", help="DAD probes per address (default 1)")
    r.add_argument("--assoc-delay", type=float, default=0.0, metavar="S",
                   help="seconds between the MN's 'join' event and its link coming up (Wi-Fi association; default 0)")
    r.add_argument("--sysctl", action="append", metavar="NODE:KEY=VALUE",
                   help="set a network-namespace sysctl in one node of the testbed after it is built (repeatable; "
                        "a diagnosis, recorded in the report), e.g. cn:net.ipv4.tcp_frto=0")
    r.add_argument("--drop-captures", action="store_true",
                   help="delete each run's packet captures once its results are written (a long campaign on a "
                        "small disk, e.g. the VM's /tmp in RAM; `report --reanalyse` then cannot recompute)")
    r.add_argument("--json", action="store_true", help="print the per-run results as JSON on stdout")
    r.add_argument("--no-scale", action="store_true", help="seed004-ilcc: without the extra row at this machine's rate")
    rp = sub.add_parser("report", help="rebuild report.md, results.csv and plots from a run folder")
    rp.add_argument("dir", type=Path)
    rp.add_argument("--reanalyse", action="store_true", help="recompute every run's results from its captures first")
    args, rest = ap.parse_known_args(argv)
    if args.cmd == "demo":
        from .demo import main as demo
        return demo(rest)
    if rest:
        ap.error(f"unrecognized arguments: {' '.join(rest)}")
    try:
        if args.cmd == "list":
            for p in sorted(EXPERIMENTS.glob("*.toml")):
                mod, spec = experiment.load(p)
                print(f"{spec.name:16} {mod.describe(spec)}  [{experiment.plugin_of(mod)}]")
            return 0
        if args.cmd == "report":
            return report(args)
        mod, spec = experiment.load(experiment.experiment_path(args.experiment))
        if args.cmd == "check":
            print(f"{spec.path}: ok: {experiment.plugin_of(mod)} plugin: {mod.describe(spec)}")
            return 0
        defaults = vars(r.parse_args([args.experiment]))  # every run option's default: which ones were given
        del defaults["experiment"]
        return experiment.run((mod, spec), args, defaults)
    except ValueError as e:  # topology.SpecError too: every refusal names the file and the item
        print(f"ilnp-lab: {e}", file=sys.stderr)
        return 2


def report(args) -> int:
    results = json.loads((args.dir / "results.json").read_text())
    meta = json.loads((args.dir / "meta.json").read_text())
    mod = experiment.plugin_of_run(meta)
    if args.reanalyse:
        if experiment.plugin_of(mod) != "mobility":
            print(f"ilnp-lab report --reanalyse: {args.dir} is a {meta['experiment']} run "
                  f"({experiment.plugin_of(mod)} plugin): nothing to reanalyse from captures; "
                  "`ilnp-lab report DIR` rebuilds its report", file=sys.stderr)
            return 2
        if meta.get("drop_captures"):
            print(f"ilnp-lab report --reanalyse: {args.dir} was run with --drop-captures: its captures are gone; "
                  "`ilnp-lab report DIR` rebuilds its report from results.json", file=sys.stderr)
            return 2
        ex = load(meta["file"])
        ex.dad, ex.dad_transmits = meta.get("dad", ex.dad), meta.get("dad_transmits", ex.dad_transmits)
        results = mod.reanalyse(args.dir, results, ex)
        (args.dir / "results.json").write_text(json.dumps(results, indent=1))
        # the data is the run's; the analysis is this checkout's: say which
        prov = provenance.provenance()
        meta["reanalysed"] = {"at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                              "commit": prov["commit"], "clean": prov["clean"]}
        (args.dir / "meta.json").write_text(json.dumps(meta, indent=1))
    print(mod.report(args.dir, results, meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
