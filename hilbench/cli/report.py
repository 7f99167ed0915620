"""``hilbench report TRACE [--run ID] [--json] [--plot DIR]``: summarise a trace."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

#: Summary keys shown in the table, in order (the JSON has them all).
TABLE_KEYS = (
    "status",
    "stop_reason",
    "backend",
    "model",
    "dataset",
    "scheduler",
    "seed",
    "final_accuracy",
    "final_loss",
    "train_loss",
    "forward_passes",
    "steps",
    "weights_crc",
    "timing_model",
    "n6_memory",
    "device_id",
    "firmware",
    "model_hash",
    "git_revision",
    "events",
    "start_time",
    "end_time",
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report", help="summarise a trace or a folder of them (table, JSON, PNG plots, HTML)"
    )
    p.add_argument("trace", type=Path, help="a trace file, or a folder of them")
    p.add_argument("--run", help="run id (default: the last run in the file)")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument(
        "--plot",
        type=Path,
        metavar="DIR",
        help="write accuracy.png, loss.png, q.png and timing.png into DIR (needs matplotlib)",
    )
    from hilbench.cli import report_dir

    report_dir.add_arguments(p)  # DIR, --html, --all-runs, --events
    p.set_defaults(handler=handle)


def _n6_memory(trace: Any) -> str | None:
    """Where the run's ZO step fits on the STM32N6 (hilbench.analysis), if the trace
    holds its model blob."""
    from hilbench.analysis import fit_line_of_blob
    from hilbench.errors import HilbenchError

    try:
        return fit_line_of_blob(trace.model_blob) if trace.model_blob else None
    except (HilbenchError, ValueError):
        return None


def report_dict(trace: Any) -> dict[str, Any]:
    """The summary plus timing percentiles per command and source (plain JSON values)."""
    out = trace.summary()
    out["timing_model"] = str(trace.attrs.get("timing_model", "") or "") or None
    out["n6_memory"] = _n6_memory(trace)
    from hilbench.cli.report_dir import stop_reason

    out["stop_reason"] = stop_reason(trace)
    out["timing"] = [
        {"command": cmd, "source": src, **stats}
        for (cmd, src), stats in trace.timing_percentiles().items()
    ]
    out["device_log"] = _device_log(trace)
    return out


DEVICE_LINES = 10  # the device's last lines `report` shows (the JSON has them all)


def _device_log(trace: Any) -> list[dict[str, Any]]:
    """What the device said on its own (LOG lines, console bytes), with step and time."""
    from hilbench.trace.device_lines import device_words

    return [said._asdict() for said in device_words(trace)]


def _fmt(key: str, value: Any) -> str:
    if value is None:
        return "-"
    if key == "weights_crc" and isinstance(value, int):
        return f"0x{value:08x}"
    if key == "final_accuracy" and isinstance(value, float):
        return f"{value:.2%}"
    if isinstance(value, float):
        return f"{value:.4f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}" if key != "seed" else str(value)
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items()) or "none"
    if key == "model_hash" and isinstance(value, str) and len(value) > 16:
        return value[:16] + "…"
    return str(value)


def _status(data: dict[str, Any]) -> str:
    """The status, and for a run still "running" whether its writer is there."""
    status = str(data.get("status"))
    if data.get("writer") == "gone":
        return (
            f"{status}: its writer is gone (killed, or its disk failed); "
            "it resumes with hilbench run --resume"
        )
    if data.get("writer") == "alive":
        return f"{status} (its writer is at work)"
    return status


def _fmt_duration(value: float, source: str) -> str:
    """Seconds as ms; QEMU's executed instructions (source instr) as a count. The unit is in
    the row's source column (:func:`_source_unit`), so the cells are bare numbers."""
    return f"{value:,.0f}" if source == "instr" else f"{value * 1e3:.3f}"


def _source_unit(source: str) -> str:
    """The source column of a timing row: who measured it and the unit of its durations."""
    return "instr (count)" if source == "instr" else f"{source} ms"


def handle(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from hilbench.cli import report_dir
    from hilbench.trace import Trace

    if report_dir.wants(args):
        return report_dir.handle(args)
    trace = Trace.open(args.trace, args.run)
    plots = []
    if args.plot is not None:
        from hilbench.trace.plots import report_plots

        plots = report_plots(trace, args.plot)
    data = report_dict(trace)
    if args.json:
        if plots:
            data["plots"] = [str(p) for p in plots]
        print(json.dumps(data, default=str))
        return 0
    console = Console()
    table = Table(title=f"{args.trace} · run {trace.run_id}", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for key in TABLE_KEYS:
        table.add_row(key, _status(data) if key == "status" else _fmt(key, data.get(key)))
        if key == "status" and data.get("error"):
            table.add_row("error", str(data["error"]))
    console.print(table)
    if data["timing"]:
        t = Table(title="command timing (each duration says who measured it)")
        # 80 columns hold the table; a name is never cut, a number only folded (no digit lost)
        longest = max(len(row["command"]) for row in data["timing"])
        t.add_column("command", no_wrap=True, min_width=longest)
        t.add_column("source", overflow="fold")
        for col in ("count", "p50", "p90", "p99", "max"):
            t.add_column(col, justify="right", overflow="fold")
        for row in data["timing"]:
            t.add_row(
                row["command"],
                _source_unit(row["source"]),
                f"{row['count']:,}",
                *(_fmt_duration(row[p], row["source"]) for p in ("p50", "p90", "p99", "max")),
            )
        console.print(t)
    said = data["device_log"]
    if said:
        import shutil
        import textwrap

        from hilbench.trace.device_lines import Said, format_said

        shown = said[-DEVICE_LINES:]
        print(f"the device's own words (last {len(shown)} of {len(said)}):")
        width = max(40, shutil.get_terminal_size().columns)  # long lines wrap, never cut
        for row in shown:
            print(
                textwrap.fill(
                    format_said(Said(**row)),
                    width,
                    initial_indent="  ",
                    subsequent_indent="      ",
                    break_long_words=False,
                )
            )
    for p in plots:
        print(f"wrote {p}")
    return 0
