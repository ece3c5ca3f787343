"""`ilnp-lab` command. Today: `demo`. The experiment runner is issue #4."""
import argparse
import sys


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="ilnp-lab", description="ILNPv6 laboratory")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("demo", help="two namespaced hosts, an unmodified app over ILNPv6, the capture decoded", add_help=False)
    args, rest = ap.parse_known_args(argv)
    if args.cmd == "demo":
        from .demo import main as demo
        return demo(rest)
    return 2


if __name__ == "__main__":
    sys.exit(main())
