"""``hilbench compare A.h5 B.h5 ... [--all-runs] [--at N] [--json] [--plot FILE.png]``:
runs side by side (one column each) and, with --plot, one figure of all of them."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="lay several runs side by side (table, one plot)")
    p.add_argument("traces", type=Path, nargs="+", metavar="TRACE")
    p.add_argument(
        "--all-runs", action="store_true", help="every run of each file (default: the last one)"
    )
    p.add_argument(
        "--at",
        type=int,
        metavar="FORWARD_PASSES",
        help="also compare test accuracy at this many forward passes "
        "(default: the smallest budget among the runs)",
    )
    p.add_argument("--json", action="store_true", help="a JSON list, one object per run")
    p.add_argument("--plot", type=Path, metavar="FILE", help="write one PNG comparing the runs")
    p.set_defaults(handler=handle)


def row(trace: Any, at: int) -> dict[str, Any]:
    final = trace.final
    snap = trace.at(at)
    timing = trace.timing_percentiles((50,))
    probe = next(  # a step's PROBE travels in APPLY_PROBE after the first step (protocol v1)
        (
            (src, stats["p50"])
            for name in ("APPLY_PROBE", "PROBE")
            for src in ("device", "modeled", "host")
            for (cmd, s), stats in timing.items()
            if cmd == name and s == src
        ),
        None,
    )
    return {
        "path": str(trace.path),
        "run_id": trace.run_id,
        "status": trace.status,
        "backend": trace.backend,
        "model": trace.attrs.get("model"),
        "dataset": trace.attrs.get("dataset"),
        "scheduler": trace.config.get("scheduler"),
        "seed": trace.attrs.get("seed"),
        "lr": trace.config.get("lr"),
        "eps": trace.config.get("eps"),
        "final_accuracy": final.accuracy,
        "final_loss": final.loss,
        "train_loss": final.train_loss,
        "forward_passes": final.forward_passes,
        "steps": final.steps,
        "at_forward_passes": at,
        "accuracy_at": snap.accuracy,
        "probe_p50_s": probe[1] if probe else None,
        "probe_source": probe[0] if probe else None,
        "weights_crc": final.weights_crc,
        "events": trace.event_counts(),
    }


def _fmt(key: str, value: Any) -> str:
    if value is None:
        return "-"
    if key in ("final_accuracy", "accuracy_at"):
        return f"{value:.2%}"
    if key == "weights_crc":
        return f"0x{value:08x}"
    if key == "probe_p50_s":
        return f"{value * 1e3:.3f} ms"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, int) and not isinstance(value, bool) and key != "seed":
        return f"{value:,}"
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items()) or "none"
    return str(value)


def handle(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from hilbench.errors import ConfigError
    from hilbench.trace import Trace, open_runs

    traces = []
    for path in args.traces:
        traces.extend(open_runs(path) if args.all_runs else [Trace.open(path)])
    if args.at is not None and args.at < 0:
        raise ConfigError(f"--at {args.at} is negative", "give a number of forward passes")
    at = args.at if args.at is not None else min(t.forward_passes for t in traces)
    rows = [row(t, at) for t in traces]
    plot = None
    if args.plot is not None:
        from hilbench.trace.plots import compare_plot

        plot = compare_plot(traces, args.plot)
    if args.json:
        print(json.dumps(rows, default=str))
        return 0
    names, common = distinguishing_names([t.path.name for t in traces])
    title = f"{len(rows)} runs side by side"
    if common:
        title += f" (trace names: {common})"
    table = Table(title=title)
    table.add_column("", style="bold", overflow="fold")
    for name, t in zip(names, traces, strict=True):  # folded if need be, never cut
        table.add_column(f"{name}\nrun {t.run_id}", justify="right", overflow="fold")
    shown = [
        ("status", "status"),
        ("backend", "backend"),
        ("model", "model"),
        ("dataset", "dataset"),
        ("scheduler", "scheduler"),
        ("seed", "seed"),
        ("lr", "lr"),
        ("eps", "eps (LSB)"),
        ("final_accuracy", "final test accuracy"),
        ("accuracy_at", f"test accuracy at {at:,} fwd"),
        ("final_loss", "final test loss (nats)"),
        ("train_loss", "train loss, last steps (nats)"),
        ("forward_passes", "forward passes"),
        ("steps", "steps"),
        ("probe_p50_s", "PROBE p50 (per step)"),
        ("probe_source", "PROBE timed by"),
        ("weights_crc", "weights CRC-32"),
        ("events", "events"),
    ]
    for key, name in shown:
        table.add_row(name, *(_fmt(key, r[key]) for r in rows))
    Console().print(table)
    if plot is not None:
        print(f"wrote {plot}")
    return 0


def _common_start(texts: list[str]) -> str:
    first, last = min(texts), max(texts)
    n = next((i for i, (a, b) in enumerate(zip(first, last, strict=False)) if a != b), len(first))
    return first[:n]


def distinguishing_names(names: list[str]) -> tuple[list[str], str]:
    """The part of each trace name that tells it from the others (``20261201-192001-a.h5``
    and ``20261201-192001-b.h5`` -> ``…a``, ``…b``), and the pattern they share
    (``20261201-192001-….h5``), or the names unchanged and "" when nothing is shared."""
    if len(set(names)) < len(names) or len(names) < 2:
        return names, ""
    prefix = _common_start(names)
    suffix = _common_start([n[::-1] for n in names])[::-1]
    # cut at a separator, so a shared digit stays with its number
    prefix = prefix[: max((prefix.rfind(c) + 1 for c in "-_. "), default=0)]
    suffix = suffix[min((i for i, c in enumerate(suffix) if c in "-_. "), default=len(suffix)) :]
    if len(prefix) + len(suffix) < 6:
        return names, ""
    short = [n[len(prefix) : len(n) - len(suffix)] for n in names]
    if any(not part for part in short):
        return names, ""
    marked = [("…" if prefix else "") + part for part in short]
    return marked, f"{prefix}…{suffix}"
