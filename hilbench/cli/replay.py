"""``hilbench replay TRACE [--run ID]``: rebuild the final weights from the model and the logged
updates, and check them against the weights CRC the device reported."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_MISMATCH = 1


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "replay",
        help="rebuild a run's final weights from its trace and check the device's weights CRC",
        description="Replays every logged APPLY (seeds and coefficients) on the model stored in "
        "the trace and compares the CRC-32 of the rebuilt weights with the one the device "
        "reported. Exit 0 on a match, 1 on a mismatch, 2 when the trace cannot be checked.",
    )
    p.add_argument("trace", type=Path)
    p.add_argument("--run", help="run id (default: the last run in the file)")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from hilbench import session
    from hilbench.errors import TraceError
    from hilbench.trace import Trace
    from hilbench.trace.replay import replay

    trace = Trace.open(args.trace, args.run)
    if trace.weights_crc is None:
        raise TraceError(
            f"{args.trace} run {trace.run_id} records no final weights CRC (status "
            f"{trace.status!r}), so a replay has nothing to check against",
            "replay a run that finished; an interrupted run can be resumed with "
            "hilbench run --resume",
        )
    result = replay(trace, head_data=session.head_data(trace))
    if result.matches:
        print(result.message())
        return 0
    print(f"hilbench: {result.message()}", file=sys.stderr)
    return EXIT_MISMATCH
