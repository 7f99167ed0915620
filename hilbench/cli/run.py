"""``hilbench run``: train a model with zeroth-order steps on a device."""

from __future__ import annotations

import argparse
from pathlib import Path

from hilbench.config import RunConfig
from hilbench.errors import ConfigError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="train a model with zeroth-order steps on a device")
    p.set_defaults(handler=handle)
    where = p.add_mutually_exclusive_group()
    where.add_argument("--emulate", action="store_true", help="the bit-exact device twin (default)")
    where.add_argument(
        "--sil", action="store_true", help="the C firmware built for this host (software in loop)"
    )
    where.add_argument("--qemu", action="store_true", help="the firmware under qemu-system-arm")
    where.add_argument("--board", metavar="PORT", help="a board or socket:// URL (pyserial)")
    p.add_argument(
        "--fw",
        metavar="PATH",
        help="with --sil: the SIL program to run (default: build device_fw/ with make)",
    )
    d = RunConfig()
    p.add_argument("--model", default=d.model, help=f"model name (default {d.model})")
    p.add_argument("--dataset", default=d.dataset, help=f"data set (default {d.dataset})")
    p.add_argument(
        "--scheduler",
        default=d.scheduler,
        help=f"fixed:Q or qscheduler[:KEY=VALUE,...] (default {d.scheduler})",
    )
    p.add_argument(
        "--budget",
        type=int,
        default=d.budget,
        metavar="FORWARD_PASSES",
        help=f"forward passes to spend (default {d.budget})",
    )
    p.add_argument("--seed", type=int, default=d.seed, help="run seed (default 0)")
    p.add_argument("--lr", type=float, default=d.lr, help=f"learning rate (default {d.lr})")
    p.add_argument("--eps", type=int, default=d.eps, help=f"perturbation in LSBs (default {d.eps})")
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument("--eval-every", type=int, default=d.eval_every, metavar="FORWARD_PASSES")
    p.add_argument("--trace", type=Path, help="HDF5 trace to write (default traces/<time>-...)")
    p.add_argument("--no-live", action="store_true", help="plain progress lines, no live panel")
    p.add_argument(
        "--resume",
        type=Path,
        metavar="TRACE",
        help="continue the interrupted last run of TRACE in the same file (its settings apply)",
    )
    zo = p.add_argument_group("zeroth-order method (docs/zo-math.md)")
    zo.add_argument(
        "--init",
        default=d.init,
        help="random init, or float pre-training on the clean digits, quantized",
    )
    zo.add_argument("--perturbation", default=d.perturbation, help="rademacher|gaussian|uniform")
    zo.add_argument(
        "--pool", type=int, default=d.pool, metavar="P", help="PeZO reuse pool size (0: fresh)"
    )
    zo.add_argument("--scaling", default=d.scaling, help="auto|fixed|adaptive")
    zo.add_argument("--estimator", default=d.estimator, help="two-point|one-sided")
    zo.add_argument("--rounding", default=d.rounding, help="nearest|stochastic")
    zo.add_argument("--master", default=d.master, help="weight master copy: q16|int16|int8")
    zo.add_argument(
        "--layers",
        default=d.layers,
        help="what trains: weights|biases|all|last:K|GLOB, comma-separated (default weights)",
    )
    zo.add_argument("--eps-mult", default=d.eps_mult, metavar="GLOB=X,...")
    zo.add_argument(
        "--eps-per-channel", action="store_true", help="scale-aware per-channel eps multipliers"
    )
    zo.add_argument(
        "--lr-schedule",
        default=d.lr_schedule,
        help="constant|cosine[:FLOOR]|linear[:END]|step:F@X,...",
    )
    zo.add_argument("--eps-schedule", default=d.eps_schedule, help="as --lr-schedule")
    p.add_argument(
        "--link-faults",
        default="",
        metavar="SPEC",
        help="inject link faults, e.g. drop=0.01,corrupt=0.01,duplicate=0.01,delay=0.01,"
        "truncate=0.01,reset=0.001,seed=1",
    )


def config_from(args: argparse.Namespace) -> RunConfig:
    backend = _backend_name(args)
    return RunConfig(
        backend=backend,
        port=args.board,
        firmware=args.fw,
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
        init=args.init,
        perturbation=args.perturbation,
        pool=args.pool,
        scaling=args.scaling,
        estimator=args.estimator,
        rounding=args.rounding,
        master=args.master,
        layers=args.layers,
        eps_mult=args.eps_mult,
        eps_per_channel=args.eps_per_channel,
        lr_schedule=args.lr_schedule,
        eps_schedule=args.eps_schedule,
        link_faults=args.link_faults,
    )


def handle(args: argparse.Namespace) -> int:
    from rich.console import Console

    from hilbench import datasets, session
    from hilbench.console import make_view
    from hilbench.npu import zoo

    console = Console()
    if args.resume:
        result = session.resume(
            args.resume, view=make_view(not args.no_live, console), backend=_backend_override(args)
        )
        _print_summary(console, result)
        return 0
    config = config_from(args)
    if config.model not in zoo.MODELS:
        known = ", ".join(sorted(zoo.MODELS))
        raise ConfigError(f"unknown model '{config.model}'", f"use one of: {known}")
    data = datasets.load(config.dataset)  # fail on an unknown name before any device is touched
    session.prepare_model(config, data)  # and on a layer selection or pool that does not fit
    result = session.run(config, view=make_view(config.live, console))
    _print_summary(console, result)
    return 0


def _backend_name(args: argparse.Namespace) -> str:
    if args.qemu:
        return "qemu"
    if args.sil:
        return "sil"
    return "board" if args.board is not None else "emulate"


def _backend_override(args: argparse.Namespace):
    """With --resume, a backend named on the command line replaces the trace's."""
    kind = _backend_name(args)
    if kind == "emulate":
        return None
    from hilbench.backends import make_backend

    return make_backend(
        RunConfig(backend=kind, port=args.board, firmware=args.fw, link_faults=args.link_faults)
    )


def _print_summary(console, result) -> None:
    from rich.table import Table

    table = Table(title="hilbench run", show_header=False)
    table.add_row("final test accuracy", f"{result.final_accuracy:.2%}")
    table.add_row("forward passes", f"{result.forward_passes:,}")
    table.add_row("steps", f"{result.steps:,}")
    table.add_row("backend", result.backend)
    table.add_row("weights CRC-32", f"0x{result.weights_crc:08x}")
    table.add_row("wall time", f"{result.wall_s:.1f} s (host)")
    console.print(table)
    print(f"trace written to {result.trace_path} (run {result.run_id})", flush=True)
