"""The ``hilbench`` command line. Each subcommand lives in its own module with
``add_parser(sub)``; this module only dispatches and turns user errors into one line."""

from __future__ import annotations

import argparse
import sys

from hilbench import __version__
from hilbench.cli import compare, emulate, infer, replay, report, run, watch
from hilbench.errors import HilbenchError

EXIT_USAGE = 2
SUBCOMMANDS = (run, report, watch, compare, replay, emulate, infer)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hilbench",
        description="Hardware-in-the-loop bench for zeroth-order training on INT8 NPUs.",
    )
    parser.add_argument("--version", action="version", version=f"hilbench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in SUBCOMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except HilbenchError as exc:
        print(f"hilbench: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("hilbench: interrupted; the trace is valid up to its last flush", file=sys.stderr)
        return 130
