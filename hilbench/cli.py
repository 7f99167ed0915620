"""``hilbench`` command line: run, report, emulate. Thin: parsing, wiring, printing."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from hilbench import __version__
from hilbench.config import RunConfig
from hilbench.errors import ConfigError, HilbenchError

EXIT_USAGE = 2


def _add_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="train a model with zeroth-order steps on a device")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--emulate", action="store_true", help="the bit-exact device twin (default)")
    where.add_argument("--qemu", action="store_true", help="the firmware under qemu-system-arm")
    where.add_argument("--board", metavar="PORT", help="a board or socket:// URL (pyserial)")
    d = RunConfig()
    p.add_argument("--model", default=d.model, help=f"model name (default {d.model})")
    p.add_argument("--dataset", default=d.dataset, help=f"data set (default {d.dataset})")
    p.add_argument("--scheduler", default=d.scheduler, help=f"fixed:Q (default {d.scheduler})")
    p.add_argument(
        "--budget", type=int, default=d.budget, metavar="FORWARD_PASSES",
        help=f"forward passes to spend (default {d.budget})",
    )
    p.add_argument("--seed", type=int, default=d.seed, help="run seed (default 0)")
    p.add_argument("--lr", type=float, default=d.lr, help=f"learning rate (default {d.lr})")
    p.add_argument("--eps", type=int, default=d.eps, help=f"perturbation in LSBs (default {d.eps})")
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument("--eval-every", type=int, default=d.eval_every, metavar="FORWARD_PASSES")
    p.add_argument("--trace", type=Path, help="HDF5 trace to write (default traces/<time>-...)")
    p.add_argument("--no-live", action="store_true", help="plain progress lines, no live panel")


def _config_from(args: argparse.Namespace) -> RunConfig:
    backend = "qemu" if args.qemu else "board" if args.board else "emulate"
    return RunConfig(
        backend=backend,
        port=args.board,
        model=args.model,
        dataset=args.dataset,
        scheduler=args.scheduler,
        budget=args.budget,
        seed=args.seed,
        lr=args.lr,
        eps=args.eps,
        batch_size=args.batch_size,
        eval_every=args.eval_every,
        trace=args.trace,
        live=not args.no_live,
    )


def cmd_run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from hilbench import datasets, session
    from hilbench.console import make_view
    from hilbench.npu import zoo

    config = _config_from(args)
    if config.model not in zoo.MODELS:
        known = ", ".join(sorted(zoo.MODELS))
        raise ConfigError(f"unknown model '{config.model}'", f"use one of: {known}")
    datasets.load(config.dataset)  # fail on an unknown name before any device is touched
    console = Console()
    result = session.run(config, view=make_view(config.live, console))
    table = Table(title="hilbench run", show_header=False)
    table.add_row("final test accuracy", f"{result.final_accuracy:.2%}")
    table.add_row("forward passes", f"{result.forward_passes:,}")
    table.add_row("steps", f"{result.steps:,}")
    table.add_row("backend", result.backend)
    table.add_row("weights CRC-32", f"0x{result.weights_crc:08x}")
    table.add_row("wall time", f"{result.wall_s:.1f} s (host)")
    table.add_row("trace", f"{result.trace_path} (run {result.run_id})")
    console.print(table)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
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
                name, str(row.get("source", "")), str(row["count"]),
                *(f"{row[p] * 1e3:.3f} ms" for p in ("p50", "p90", "p99")),
            )
        Console().print(t)
    return 0


def cmd_emulate(args: argparse.Namespace) -> int:
    from hilbench.device.server import serve_tcp
    from hilbench.device.twin import DeviceTwin

    host, sep, port = args.listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise HilbenchError(
            f"--listen '{args.listen}' is not HOST:PORT", "write e.g. --listen 127.0.0.1:5555"
        )

    def announce(h: str, p: int) -> None:
        print(f"hilbench emulate: listening on socket://{h}:{p}", flush=True)

    try:
        serve_tcp(host or "127.0.0.1", int(port), DeviceTwin(), on_listening=announce)
    except OSError as exc:
        raise HilbenchError(
            f"cannot listen on {args.listen}: {exc.strerror or exc}",
            "choose a free port, or 0 to let the system pick one",
        ) from None
    except KeyboardInterrupt:
        pass
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hilbench", description=__doc__)
    parser.add_argument("--version", action="version", version=f"hilbench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_run(sub)
    rp = sub.add_parser("report", help="summarise a trace")
    rp.add_argument("trace", type=Path)
    rp.add_argument("--json", action="store_true", help="one JSON object on stdout")
    ep = sub.add_parser("emulate", help="serve the device twin over TCP")
    ep.add_argument("--listen", required=True, metavar="HOST:PORT")
    return parser


COMMANDS = {"run": cmd_run, "report": cmd_report, "emulate": cmd_emulate}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except HilbenchError as exc:
        print(f"hilbench: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("hilbench: interrupted; the trace is valid up to the last flushed step", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
