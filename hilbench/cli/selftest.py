"""``hilbench selftest``: first-contact diagnostics (hilbench/selftest), a JSON report and a
readable summary; exit 0 when no check failed, 1 when one did."""

from __future__ import annotations

import argparse
from pathlib import Path

from hilbench.errors import ConfigError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "selftest",
        help="first-contact diagnostics of a board, QEMU or the SIL (run it first)",
        description="Open the device's port before loading (the boot banner is kept), load, "
        "check HELLO and DEVICE_INFO, time round trips, measure the device's clock against "
        "the host's, write and read back the whole arena, time one forward pass and one ZO "
        "step against the cost model, and read the UART's error counters. Each check passes, "
        "fails or does not apply, and says what to try when it fails (docs/board.md, The "
        "first day with a board).",
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--board", metavar="PORT", help="a board: auto (the attached one), its port or probe id"
    )
    where.add_argument("--qemu", action="store_true", help="the an547 firmware under QEMU")
    where.add_argument("--sil", action="store_true", help="the firmware built for this host")
    p.add_argument("--fw", metavar="PATH", help="the firmware to load (default: build it)")
    p.add_argument(
        "--json",
        metavar="PATH",
        type=Path,
        default=Path("hilbench-selftest.json"),
        help="where the report goes (default hilbench-selftest.json; attach it to a bug report)",
    )
    p.add_argument(
        "--clock-seconds",
        type=float,
        default=3.0,
        metavar="S",
        help="how long the clock check counts (default 3)",
    )
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from hilbench.selftest import open_backend, run_selftest

    if not 0.5 <= args.clock_seconds <= 600:
        raise ConfigError(
            f"--clock-seconds {args.clock_seconds:g} is out of range", "give 0.5 to 600 seconds"
        )
    kind = "board" if args.board else "qemu" if args.qemu else "sil"
    report = run_selftest(open_backend(kind, args.board, args.fw), clock_seconds=args.clock_seconds)
    report.write_json(args.json)
    print(report.summary())
    print(f"report written to {args.json}")
    return 1 if report.failed else 0
