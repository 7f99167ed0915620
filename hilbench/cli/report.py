"""``hilbench report TRACE [--json]``: summarise a trace."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="summarise a trace")
    p.add_argument("trace", type=Path)
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from hilbench.trace import Trace

    trace = Trace.open(args.trace)
    summary = trace.summary()
    if args.json:
        print(json.dumps(summary, default=str))
        return 0
    table = Table(title=f"{args.trace} · run {trace.run_id}", show_header=False)
    for key, value in summary.items():
        if isinstance(value, float):
            value = f"{value:.4f}"
        elif key == "weights_crc" and isinstance(value, int):
            value = f"0x{value:08x}"
        table.add_row(key, str(value))
    Console().print(table)
    timing = trace.timing_summary()
    if timing:
        t = Table(title="command timing")
        for col in ("command", "source", "count", "p50", "p90", "p99"):
            t.add_column(col)
        for key, row in sorted(timing.items(), key=lambda kv: str(kv[0])):
            name = key if isinstance(key, str) else "/".join(key)
            t.add_row(
                name,
                str(row.get("source", "")),
                str(row["count"]),
                *(f"{row[p] * 1e3:.3f} ms" for p in ("p50", "p90", "p99")),
            )
        Console().print(t)
    return 0
