"""The ``hilbench`` command line. Each subcommand lives in its own module with
``add_parser(sub)``; this module only dispatches and turns user errors into one line."""

from __future__ import annotations

import argparse
import contextlib
import difflib
import sys
import warnings
from typing import NoReturn

from hilbench.cli import (
    analyze,
    board,
    cache,
    compare,
    data,
    doctor,
    emulate,
    export,
    infer,
    quantize,
    replay,
    report,
    run,
    selftest,
    validate,
    watch,
)
from hilbench.errors import HilbenchError

EXIT_USAGE = 2
EXIT_SIGINT = 130
EXIT_SIGTERM = 143
SUBCOMMANDS = (
    run,
    report,
    watch,
    compare,
    replay,
    export,
    emulate,
    infer,
    board,
    analyze,
    validate,
    data,
    quantize,
    doctor,
    cache,
    selftest,
)


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors naming the subcommand (``hilbench run: error: ...``)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}. see `{self.prog} --help`\n")


class _Version(argparse.Action):
    """``--version``: the release, and the git commit when run from a checkout (computed only
    when asked: it runs git)."""

    def __init__(self, option_strings: list[str], dest: str, **kw: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="show the version and exit")

    def __call__(self, parser, namespace, values, option_string=None) -> NoReturn:
        from hilbench.version import version_line

        print(version_line())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="hilbench",
        description="Hardware-in-the-loop bench for zeroth-order training on INT8 NPUs.",
        epilog="`hilbench COMMAND --help` describes a command's options.",
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in SUBCOMMANDS:
        module.add_parser(sub)
    return parser


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices.get(name, parser)
    return parser


def _unrecognized(parser: argparse.ArgumentParser, extras: list[str]) -> str:
    """``unrecognized argument --budjet (did you mean --budget?)``."""
    options = [o for o in parser._option_string_actions if o.startswith("--")]
    for arg in extras:
        if arg.startswith("-"):
            name = arg.split("=", 1)[0]
            close = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]}?)" if close else ""
            return f"unrecognized option {name}{hint}"
    return f"unexpected argument {extras[0]!r}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    if not argv:
        parser.print_help()
        return EXIT_USAGE
    warnings.formatwarning = _warning_line
    args, extras = parser.parse_known_args(argv)
    if extras:  # the subcommand's own parser says it, with its usage and a suggestion
        _subparser(parser, args.command).error(
            _unrecognized(_subparser(parser, args.command), extras)
        )
    try:
        return args.handler(args)
    except HilbenchError as exc:
        _say(f"hilbench: error: {exc}")
        return EXIT_USAGE
    except KeyboardInterrupt as exc:
        from hilbench.trace import Terminated

        terminated = isinstance(exc, Terminated)
        _say(f"hilbench: {'SIGTERM' if terminated else 'Ctrl-C'}: stopped")
        return EXIT_SIGTERM if terminated else EXIT_SIGINT
    except BrokenPipeError:  # `hilbench report T | head`: the reader is gone, not an error
        from hilbench.console import detach_stdout

        detach_stdout()
        return 0


def _warning_line(message, category, filename, lineno, line=None) -> str:
    """A warning of hilbench's own as one line (``hilbench: warning: ...``), not Python's
    two lines naming the source file; other packages' warnings as Python formats them."""
    if category.__module__.startswith("hilbench"):
        return f"hilbench: warning: {message}\n"
    return _PYTHON_FORMATWARNING(message, category, filename, lineno, line)


_PYTHON_FORMATWARNING = warnings.formatwarning


def _say(line: str) -> None:
    with contextlib.suppress(OSError, ValueError):  # stderr gone too
        print(line, file=sys.stderr, flush=True)
