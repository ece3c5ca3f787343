"""`ilnp-lab`: the laboratory's command line.

    ilnp-lab demo                         the README demo (a TCP session surviving a move)
    ilnp-lab list                         the shipped experiments
    ilnp-lab check FILE|NAME              validate an experiment file, create nothing
    ilnp-lab run NAME|FILE [--quick] [--runs N] [--scenario MOVE] [--scheme S] [--out DIR]
    ilnp-lab run seed002-lb [--quick] [--runs N] [--out DIR]
                                          seed 002 balancing + overhead + reordering (own runner: seed002.py)
    ilnp-lab run seed004-ilcc [--quick] [--scenario transport|network] [--scheme socket|open] [--no-scale]
                                          seed 004 ILCC under random-NID load (own runner: seed004.py)
    ilnp-lab run dime-handoff [--quick] [--scheme S]
                                          seed 003 soft/hard handoff: latencies and goodput (moves soft, hard)
    ilnp-lab run signalling-scale [--quick] [--scheme ilnp|mptcp] [--runs N]
                                          seed 003 Table III: control messages vs correspondents (own runner: signalling.py)
    ilnp-lab run dime-v4v6 [--quick] [--runs N]
                                          IPv6 -> IPv4 behind a NAT -> IPv6, soft and hard: ILNPv6's v4 path vs
                                          plain IPv6 and MPTCP with v4 and v6 subflows (own runner: v4v6.py)
    ilnp-lab report DIR                   rebuild report.md, CSV and plots from DIR/results.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import sys
from pathlib import Path

from . import runners
from .topology import DAD_MODES, EXPERIMENTS, SCHEMES, SpecError, load, parse_sysctl


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
                own = runners.load(p)
                if own:
                    print(f"{own[1].name:16} {own[0].describe(own[1])}")
                    continue
                ex = load(p)
                print(f"{ex.name:16} {ex.title}  (moves: {', '.join(ex.moves)}; schemes: {', '.join(ex.schemes)})")
            return 0
        own = runners.load(runners.experiment_path(args.experiment)) if args.cmd in ("check", "run") else None
        if own and args.cmd == "check":
            mod, spec = own
            print(f"{spec.path}: ok: {mod.__name__.rsplit('.', 1)[1]} runner: {mod.describe(spec)}")
            return 0
        if own:
            # not a mobility experiment: its own runner (runners.py)
            return runners.run(own, args)
        if args.cmd == "check":
            ex = load(args.experiment)
            print(f"{ex.path}: ok: {len(ex.nodes)} nodes, {len(ex.links)} links, {len(ex.all_events())} events, "
                  f"moves {', '.join(ex.moves)}, schemes {', '.join(ex.schemes)}")
            return 0
        if args.cmd == "report":
            from . import report
            results = json.loads((args.dir / "results.json").read_text())
            meta = json.loads((args.dir / "meta.json").read_text())
            own = runners.of_run_folder(meta)
            if own and args.reanalyse:
                print(f"ilnp-lab report --reanalyse: {args.dir} is a {own[1].name} run (its own runner): nothing to "
                      "reanalyse from captures; `ilnp-lab report DIR` rebuilds its report", file=sys.stderr)
                return 2
            if own:
                print(own[0].report(args.dir, results, meta))
                return 0
            if args.reanalyse:
                from . import runner
                ex = load(meta["file"])
                ex.dad, ex.dad_transmits = meta.get("dad", ex.dad), meta.get("dad_transmits", ex.dad_transmits)
                results = runner.reanalyse(args.dir, results, ex)
                (args.dir / "results.json").write_text(json.dumps(results, indent=1))
                # the data is the run's; the analysis is this checkout's: say which
                prov = runner.provenance()
                meta["reanalysed"] = {"at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                                      "commit": prov["commit"], "clean": prov["clean"]}
                (args.dir / "meta.json").write_text(json.dumps(meta, indent=1))
            print(report.write(args.dir, results, meta))
            return 0
        return run(args)
    except SpecError as e:
        print(f"ilnp-lab: {e}", file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"ilnp-lab: {e}", file=sys.stderr)
        return 2


def run(args) -> int:
    from . import cc, report, runner

    ex = load(args.experiment)
    if os.geteuid() != 0:
        print("ilnp-lab run: needs root (network namespaces, BPF)", file=sys.stderr)
        return 2
    if args.runs is not None and args.runs < 1:
        print(f"ilnp-lab run: --runs {args.runs}: must be at least 1", file=sys.stderr)
        return 2
    if args.dad_transmits < 1 or args.assoc_delay < 0:
        print(f"ilnp-lab run: --dad-transmits {args.dad_transmits} / --assoc-delay {args.assoc_delay}: "
              "need at least 1 / at least 0", file=sys.stderr)
        return 2
    cores = os.cpu_count() or 1
    if args.jobs > cores:
        print(f"ilnp-lab run: --jobs {args.jobs} is more than this machine's {cores} cores: timed testbeds would "
              f"compete for the CPUs (use --jobs {cores} or fewer)", file=sys.stderr)
        return 2
    if args.cc:
        ex.ccs = args.cc
    ex.dad, ex.dad_transmits, ex.assoc_delay_s = args.dad, args.dad_transmits, args.assoc_delay
    ex.sysctls = [parse_sysctl(ex, s) for s in args.sysctl or ()]
    todo, notes = runner.cells(ex, args.scenario, args.scheme)
    if not todo:
        print(f"ilnp-lab run: nothing to run: {'; '.join(notes)}", file=sys.stderr)
        return 2
    duration = ex.quick_duration_s if args.quick else ex.duration_s
    runs = args.runs or (ex.quick_runs if args.quick else ex.runs)
    out = args.out or Path("out") / ex.name
    out.mkdir(parents=True, exist_ok=True)
    runner.install_sigterm()
    meta = {"experiment": ex.name, "title": ex.title, "file": str(ex.path),
            "command": shlex.join(["ilnp-lab", "run", *sys.argv[2:]] if sys.argv[1:2] == ["run"] else sys.argv),
            "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"), "quick": args.quick,
            "duration_s": duration, "runs_per_cell": runs, "jobs": args.jobs, "cores": cores, "seed": args.seed,
            "dad": args.dad, "dad_transmits": args.dad_transmits, "assoc_delay_s": args.assoc_delay,
            "sysctls": [f"{n}:{k}={v}" for n, k, v in ex.sysctls],
            "versions": runner.versions(), "provenance_start": runner.provenance(), "notes": notes}
    for n in notes:
        print(f"note: {n}", file=sys.stderr)
    try:
        # hybla/veno the kernel lacks: registered as BPF struct_ops for this run, removed after
        with cc.loaded(sorted({c.cc for c in todo})) as impl:
            meta["cc_impl"] = impl
            results, interrupted = runner.run_all(ex, todo, runs, duration, out, args.seed, max(1, args.jobs))
    except runner.StepError as e:
        print(f"ilnp-lab run: {e}", file=sys.stderr)
        return 1
    meta["runs_done"] = len(results)
    meta["runs_failed"] = sum(1 for r in results if not r.get("ok"))
    meta["interrupted"] = interrupted
    meta["provenance_end"] = runner.provenance()
    meta["reference_not_because"] = runner.reference_check(meta)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    path = report.write(out, results, meta)
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        print(f"results: {out / 'results.json'}, {out / 'results.csv'}; report: {path}")
    return 130 if interrupted else (1 if meta["runs_failed"] else 0)


if __name__ == "__main__":
    sys.exit(main())
