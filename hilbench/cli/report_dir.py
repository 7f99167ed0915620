"""``hilbench report`` on many runs: ``report DIR`` (every run of a folder of traces),
``--html OUT`` (one self-contained page of them), ``--all-runs`` (every run of a file) and
``--events`` (a run's events, with ``--json`` the error text too)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from hilbench.errors import HilbenchError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--html",
        type=Path,
        metavar="OUT",
        help="write one self-contained HTML page (plots inline, nothing fetched) of every run "
        "in TRACE, a trace file or a folder of them",
    )
    p.add_argument(
        "--all-runs",
        action="store_true",
        help="one row per run of the file (a folder: of every file in it)",
    )
    p.add_argument(
        "--events", action="store_true", help="list the run's events (step, time, kind, detail)"
    )


def wants(args: argparse.Namespace) -> bool:
    """Whether this module answers: a folder, --html, --all-runs or --events."""
    return bool(args.html or args.all_runs or args.events or Path(args.trace).is_dir())


def handle(args: argparse.Namespace) -> int:
    if args.events and (args.html or args.all_runs):
        raise HilbenchError(
            "--events lists one run's events", "leave out --html / --all-runs, or --events"
        )
    if args.plot is not None and (args.html or args.all_runs or Path(args.trace).is_dir()):
        raise HilbenchError(
            "--plot draws one run", "use --html OUT for the plots of every run of a folder"
        )
    if args.events:
        return _events(args)
    if args.html:
        return _html(args)
    return _all_runs(args)


def _runs(args: argparse.Namespace) -> list[Any]:
    from hilbench.trace.html import read_folder
    from hilbench.trace.reader import Trace, open_runs

    path = Path(args.trace)
    if path.is_dir():
        folder = read_folder(path)
        for bad, why in folder.unreadable:
            print(f"hilbench: skipped {bad}: {why}", flush=True)
        if not folder.runs:
            raise HilbenchError(f"{path} holds no readable trace", "name a folder of .h5 traces")
        return folder.runs
    if args.run is not None:
        return [Trace.open(path, args.run)]
    return open_runs(path)


def _html(args: argparse.Namespace) -> int:
    from hilbench.trace import html

    src = Path(args.trace)
    if src.is_dir():
        out, folder = html.write(src, args.html)
    else:  # one file: the same page, of its runs
        folder = html.Folder(src.parent, runs=_runs(args))
        out = Path(args.html)
        try:
            out.write_text(html.render(folder), encoding="utf-8")
        except OSError as exc:
            raise HilbenchError(
                f"cannot write {out} ({exc.strerror or exc})", "choose a writable path for --html"
            ) from None
    if args.json:
        print(json.dumps({"html": str(out), "runs": len(folder.runs)}))
    else:
        print(f"wrote {out}: {len(folder.runs)} runs", flush=True)
    return 0


def stop_reason(trace: Any) -> str | None:
    """Why a complete run ended: "budget", or the time limit or rule (attr stop_reason);
    None for an unfinished run or a trace written before stopping rules."""
    reason = trace.attrs.get("stop_reason")
    return str(reason) if reason not in (None, "") else None


def run_row(trace: Any) -> dict[str, Any]:
    """One run's line of ``--all-runs``."""
    from hilbench.trace.html import config_text, status_text

    return {
        "path": str(trace.path),
        "run_id": trace.run_id,
        "status": trace.status,
        "status_text": status_text(trace),
        "stop_reason": stop_reason(trace),
        "error": trace.error,
        "backend": trace.backend,
        "model": trace.attrs.get("model"),
        "dataset": trace.attrs.get("dataset"),
        "config": config_text(trace),
        "final_accuracy": trace.final_accuracy,
        "forward_passes": trace.forward_passes,
        "steps": trace.n_steps,
        "weights_crc": trace.weights_crc,
        "events": trace.event_counts(),
    }


def _all_runs(args: argparse.Namespace) -> int:
    rows = [run_row(t) for t in _runs(args)]
    if args.json:
        print(json.dumps(rows, default=str))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{args.trace}: {len(rows)} runs")
    for col in ("file", "run", "backend", "model", "status", "accuracy", "forward passes", "CRC"):
        table.add_column(col, justify="right" if col in ("accuracy", "forward passes") else "left")
    for r in rows:
        acc = r["final_accuracy"]
        table.add_row(
            Path(r["path"]).name,
            r["run_id"],
            str(r["backend"] or "?"),
            f"{r['model']} on {r['dataset']}",
            r["status_text"],
            "-" if acc is None else f"{acc:.2%}",
            f"{r['forward_passes']:,}",
            "-" if r["weights_crc"] is None else f"0x{r['weights_crc']:08x}",
        )
    Console().print(table)
    return 0


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _events(args: argparse.Namespace) -> int:
    import datetime as dt

    from hilbench.trace import Trace

    trace = Trace.open(args.trace, args.run)
    events = [
        {
            "step": int(row["step"]),
            "time": dt.datetime.fromtimestamp(float(row["time"]), dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "kind": _text(row["kind"]),
            "detail": _text(row["detail"]),
        }
        for row in trace.events
    ]
    if args.json:
        print(
            json.dumps(
                {
                    "path": str(trace.path),
                    "run_id": trace.run_id,
                    "status": trace.status,
                    "error": trace.error,
                    "events": events,
                }
            )
        )
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{args.trace} · run {trace.run_id}: {len(events)} events ({trace.status})")
    for col in ("step", "time (UTC)", "kind", "detail"):
        table.add_column(col, justify="right" if col == "step" else "left", overflow="fold")
    for e in events:
        table.add_row(str(e["step"]), e["time"][11:], e["kind"], e["detail"])
    Console().print(table)
    if trace.error:
        print(f"ended by: {trace.error}", flush=True)
    return 0
