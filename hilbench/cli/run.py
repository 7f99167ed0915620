"""``hilbench run``: train a model with zeroth-order steps on a device."""

from __future__ import annotations

import argparse
import contextlib
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from hilbench.config import (
    BACKEND_NAMES,
    ENV_BAUD,
    INITS,
    PERTURBATIONS,
    RunConfig,
    int_arg,
    parse_baud,
    user_defaults,
    width_arg,
)
from hilbench.errors import ConfigError, HilbenchError

if TYPE_CHECKING:
    from hilbench.trace import RunInfo

#: Exit statuses after a signal ended the run (128 + the signal's number, as shells report).
EXIT_SIGINT = 130
EXIT_SIGTERM = 143
#: Models ``run`` trains; the vision models train on the colour image data sets.
TRAINABLE = ("mlp", "cnn", "mobilenet_v2", "resnet18")
DATASETS = ("digits", "digits-rot20", "fashion-mnist", "fashion-mnist-shift")
#: A vision model's defaults where the digits' would not do: its fine-tuning task, from the
#: weights pre-trained on the source task, the last blocks only (a step fits an MCU's SRAM).
VISION_DEFAULTS = {"dataset": "fashion-mnist-shift", "init": "pretrained", "layers": "last:1"}

DESCRIPTION = """\
Train a model on a device with zeroth-order (ZO) steps: the host picks perturbation seeds and
q, the device runs the int8 forward passes and applies integer updates. The run is shown live
(plain lines when the output is not a terminal) and recorded in an HDF5 trace that `hilbench
report`, `watch`, `compare`, `replay` and `export` read.

The device: one of --emulate (default), --sil, --qemu, --board PORT. A board named once in
the environment (HILBENCH_BOARD, HILBENCH_BAUD) or in pyproject.toml's [tool.hilbench] table
(board = "/dev/ttyACM0", baud = 921600) is used when no backend option is given; the command
line wins over the environment, which wins over the file.
"""

EPILOG = """\
budget: a forward pass is one forward of one (perturbed) model on one batch; a two-point step
with q samples costs 2q, a one-sided step q + 1.

Ctrl-C or SIGTERM ends the run as "interrupted" (exit 130 or 143); `hilbench run --resume
TRACE` continues it in the same file and ends it as an uninterrupted run would have ended.
A trace file holding an interrupted run is not appended to: resume it, or write to another
file. Errors are one line naming the cause and the fix (exit 2).

examples:
  hilbench run                                       the default MLP on the emulator
  hilbench run --board /dev/ttyACM0 --budget 12000   a board at 921600 baud
  hilbench run --model cnn --scheduler qscheduler --trace cnn.h5
  hilbench run --model mobilenet_v2 --width 0.35 --resolution 24 --budget 3000
                                  fine-tune a pre-trained MobileNetV2 on fashion-mnist-shift
  hilbench run --model resnet18 --dataset stl10:~/data/stl10_binary --resolution 32
  hilbench run --link-faults drop=0.01,reset=0.001,seed=1
  hilbench run --resume cnn.h5
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="train a model with zeroth-order steps on a device",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(handler=handle)
    d = RunConfig()
    device = p.add_argument_group("the device (one of)")
    where = device.add_mutually_exclusive_group()
    for name, backend in BACKEND_NAMES.items():  # the one table of backends (pytest's too)
        if backend.port:
            where.add_argument(f"--{name}", metavar="PORT", help=backend.run_help)
        else:
            where.add_argument(f"--{name}", action="store_true", help=backend.run_help)
    device.add_argument(
        "--fw",
        metavar="PATH",
        help="with --sil: the SIL program to run; with --qemu: the an547 firmware ELF "
        "(default: build device_fw/ with make)",
    )
    device.add_argument(
        "--baud",
        metavar="RATE",
        help=f"the board's serial speed, 8N1 (default {d.baud}, or ${ENV_BAUD}, then "
        "[tool.hilbench] baud)",
    )
    device.add_argument(
        "--link-faults",
        default=None,
        metavar="SPEC",
        help="inject faults into every frame, both ways, and device resets: "
        "KIND=PROBABILITY,... with KIND drop, corrupt, duplicate, delay, truncate, reset, "
        "and seed=N, e.g. drop=0.01,reset=0.001,seed=1 (the run must end with the same weights)",
    )

    device.add_argument(
        "--upload",
        default=d.upload,
        choices=("uart", "probe"),
        help="how the model and data reach the device: uart, over the link (default), or "
        "probe, written through QEMU's GDB stub (--qemu) or the board's ST-LINK (--board) and "
        "CRC-checked by the device (docs/protocol.md, Staged uploads)",
    )
    device.add_argument(
        "--timing-model",
        default=d.timing_model,
        choices=("m55", "npu"),
        help="the emulator's modeled durations: m55, the firmware's kernels on the Cortex-M55 "
        "at 600 MHz (default: what every hilbench firmware runs), or npu, a projection onto "
        "the Neural-ART (docs/npu.md)",
    )

    what = p.add_argument_group("what trains")
    what.add_argument(
        "--model",
        default=d.model,
        metavar="{" + ",".join(TRAINABLE) + "}",
        help="mlp: a 64-32-10 MLP; cnn: a small 8x8 CNN; mobilenet_v2, resnet18: int8 vision "
        f"models sized by --width and --resolution (default {d.model})",
    )
    what.add_argument(
        "--width",
        type=width_arg,
        default=d.width,
        metavar="W",
        help="MobileNetV2's alpha (default 0.35) or ResNet18's channel width (default 0.25)",
    )
    what.add_argument(
        "--resolution",
        type=int,
        default=d.resolution,
        metavar="PIXELS",
        help="a vision model's image side; the data are resized to it (default 24)",
    )
    what.add_argument(
        "--dataset",
        metavar="{" + ",".join(DATASETS) + ",eurosat:DIR,stl10:DIR}",
        help="scikit-learn's 8x8 digits, or the same rotated by up to 20 degrees (default "
        f"{d.dataset}); for a vision model: Fashion-MNIST (Debian's dataset-fashion-mnist) "
        "as published or recoloured on textured backgrounds (the default, "
        f"{VISION_DEFAULTS['dataset']}), EuroSAT RGB or STL-10 from a folder (DIR@N: at most "
        "N items of each split, so that they fit the device's memory)",
    )
    what.add_argument(
        "--init",
        metavar="{" + ",".join(INITS) + "}",
        help="random int8 weights, or float pre-training (the digits' models: on the clean "
        "digits; the vision models: on Fashion-MNIST's source items, cached), then quantized "
        f"(default {d.init}; a vision model: {VISION_DEFAULTS['init']})",
    )
    what.add_argument(
        "--layers",
        help="what trains: weights, biases, all, last:K (the last K layers) or a GLOB over "
        f"tensor names, comma-separated (default {d.layers}; a vision model: "
        f"{VISION_DEFAULTS['layers']})",
    )

    how = p.add_argument_group("how long and how fast")
    how.add_argument(
        "--budget",
        type=int_arg,
        default=None,
        metavar="FORWARD_PASSES",
        help=f"forward passes to spend (default {d.budget:,})",
    )
    how.add_argument(
        "--time-limit",
        metavar="DURATION",
        help="stop after this much wall clock (30s, 5m, 1.5h): the run ends as complete, its "
        "final weights evaluated, the reason in the trace (stop_reason)",
    )
    how.add_argument(
        "--until",
        metavar="RULE",
        help='stop as soon as a rule holds, e.g. "accuracy>=0.9" (checked at each test '
        'evaluation; also loss, train_loss, steps, forward_passes; "a>=x,b<=y": any one)',
    )
    how.add_argument(
        "--scheduler",
        default=d.scheduler,
        help="q, the perturbations per step: fixed:Q (1..256), or qscheduler[:KEY=VALUE,...] "
        f"(adapts q to progress; docs/zo-math.md) (default {d.scheduler})",
    )
    how.add_argument(
        "--lr", type=float, default=d.lr, help=f"learning rate in weight LSBs (default {d.lr:g})"
    )
    how.add_argument(
        "--eps",
        type=int,
        default=d.eps,
        help=f"perturbation size in weight LSBs, 1..127 (default {d.eps})",
    )
    how.add_argument(
        "--lr-schedule",
        default=d.lr_schedule,
        metavar="SCHEDULE",
        help="the learning rate over the budget: constant, cosine[:FLOOR], linear[:END] or "
        f"step:F@X[,F@X...] (factor F from fraction X on) (default {d.lr_schedule})",
    )
    how.add_argument(
        "--eps-schedule",
        default=d.eps_schedule,
        metavar="SCHEDULE",
        help=f"eps over the budget, as --lr-schedule (default {d.eps_schedule})",
    )
    how.add_argument(
        "--batch-size",
        type=int,
        default=d.batch_size,
        metavar="N",
        help=f"training items per forward pass, 1..256 (default {d.batch_size})",
    )
    how.add_argument("--seed", type=int_arg, default=d.seed, help=f"run seed (default {d.seed})")
    how.add_argument(
        "--eval-every",
        type=int,
        default=d.eval_every,
        metavar="FORWARD_PASSES",
        help=f"forward passes between test-set evaluations (default {d.eval_every:,}); the "
        "weights are also evaluated at the start and at the end",
    )

    zo = p.add_argument_group("the zeroth-order method (docs/zo-math.md)")
    zo.add_argument(
        "--perturbation",
        default=d.perturbation,
        metavar="{" + ",".join(PERTURBATIONS) + "}",
        help=f"the distribution of the perturbation directions (default {d.perturbation})",
    )
    zo.add_argument(
        "--pool",
        type=int,
        default=d.pool,
        metavar="P",
        help="PeZO: draw perturbations from a reused pool of P numbers, 0..65536 "
        f"(default {d.pool}: fresh numbers)",
    )
    zo.add_argument(
        "--scaling",
        default=d.scaling,
        metavar="{auto,fixed,adaptive}",
        help=f"perturbation scaling; auto is adaptive for uniform (default {d.scaling})",
    )
    zo.add_argument(
        "--estimator",
        default=d.estimator,
        metavar="{two-point,one-sided}",
        help=f"gradient estimate from L(+eps) and L(-eps), or from L(+eps) and L "
        f"(default {d.estimator})",
    )
    zo.add_argument(
        "--aggregator",
        default=d.aggregator,
        metavar="{mean,align}",
        help="how the q estimates of a step are combined: their mean, or align (least squares "
        f"over the q directions, rate per query) (default {d.aggregator})",
    )
    zo.add_argument(
        "--hybrid",
        default=d.hybrid,
        metavar="{none,last}",
        help="last: the last layer trains by its exact int8 gradient on the device (HEAD_GRAD), "
        f"the layers before it by ZO (default {d.hybrid})",
    )
    zo.add_argument(
        "--head-lr",
        type=float,
        default=d.head_lr,
        metavar="LR",
        help="with --hybrid last: the exact head's learning rate in weight LSBs (default: --lr)",
    )
    zo.add_argument(
        "--rounding",
        default=d.rounding,
        metavar="{nearest,stochastic}",
        help=f"rounding of the integer update (default {d.rounding})",
    )
    zo.add_argument(
        "--master",
        default=d.master,
        metavar="{q16,int16,int8}",
        help=f"the device's master copy of the trained weights (default {d.master})",
    )
    zo.add_argument(
        "--eps-mult",
        default=d.eps_mult,
        metavar="GLOB=X,...",
        help="per-layer eps multipliers, 1/16..15.9, e.g. fc0_*=0.5",
    )
    zo.add_argument(
        "--eps-per-channel", action="store_true", help="scale-aware per-channel eps multipliers"
    )

    out = p.add_argument_group("the trace and the console")
    out.add_argument(
        "--trace",
        type=Path,
        help="the HDF5 trace to write; an existing trace gets a new run (default "
        "traces/<date>-<time>-<model>-<dataset>-s<seed>.h5)",
    )
    out.add_argument(
        "--resume",
        type=Path,
        metavar="TRACE",
        help="continue the interrupted run of TRACE in the same file (its settings apply; a "
        "backend option given here replaces its device)",
    )
    out.add_argument(
        "--run",
        metavar="ID",
        help="with --resume: the run to continue (default: the last one that did not finish)",
    )
    out.add_argument(
        "--no-live",
        action="store_true",
        help="plain progress lines instead of the live panel (the default off a terminal)",
    )


def _model_default(args: argparse.Namespace, name: str) -> str:
    """An option left out: the vision default for a vision model, else RunConfig's."""
    given = getattr(args, name)
    if given is not None:
        return given
    if args.model in VISION_DEFAULTS_FOR:
        return VISION_DEFAULTS[name]
    return getattr(RunConfig(), name)


VISION_DEFAULTS_FOR = ("mobilenet_v2", "resnet18")


def config_from(args: argparse.Namespace) -> RunConfig:
    backend, port, baud = _device(args)
    return RunConfig(
        backend=backend,
        port=port,
        baud=baud,
        firmware=args.fw,
        model=args.model,
        dataset=_model_default(args, "dataset"),
        width=args.width,
        resolution=args.resolution,
        scheduler=args.scheduler,
        budget=RunConfig.budget if args.budget is None else args.budget,
        seed=args.seed,
        lr=args.lr,
        eps=args.eps,
        batch_size=args.batch_size,
        eval_every=args.eval_every,
        trace=args.trace,
        live=not args.no_live,
        init=_model_default(args, "init"),
        perturbation=args.perturbation,
        pool=args.pool,
        scaling=args.scaling,
        estimator=args.estimator,
        aggregator=args.aggregator,
        hybrid=args.hybrid,
        head_lr=args.head_lr,
        rounding=args.rounding,
        master=args.master,
        layers=_model_default(args, "layers"),
        eps_mult=args.eps_mult,
        eps_per_channel=args.eps_per_channel,
        lr_schedule=args.lr_schedule,
        eps_schedule=args.eps_schedule,
        link_faults=args.link_faults or "",
        timing_model=args.timing_model,
        time_limit_s=_time_limit(args),
        until=args.until or "",
        upload=args.upload,
    )


def _time_limit(args: argparse.Namespace) -> float:
    from hilbench.config import parse_duration

    return parse_duration(args.time_limit) if args.time_limit is not None else 0.0


def _resume_limits(args: argparse.Namespace) -> dict:
    """The budget and limits given with --resume (None: the trace's stays)."""
    return {
        "budget": args.budget,
        "time_limit_s": _time_limit(args) if args.time_limit is not None else None,
        "until": args.until,
    }


def handle(args: argparse.Namespace) -> int:
    from rich.console import Console

    from hilbench import session
    from hilbench.console import make_view
    from hilbench.npu import zoo

    console = Console()
    check_flags(args)
    if args.run is not None and args.resume is None:
        raise ConfigError("--run picks the run --resume continues", "add --resume TRACE")
    if args.resume:
        trace_path = args.resume
        chosen = args.run or _last_resumable(trace_path)
        limits = _resume_limits(args)
        for change in session.resume_limits(trace_path, args.run, limits):
            _say(f"hilbench: resuming with {change}")
        try:
            result = session.resume(
                args.resume,
                view=make_view(not args.no_live, console),
                backend=_backend_override(args),
                run=args.run,
                limits=limits,
                overrides=_resume_overrides(args),
            )
        except KeyboardInterrupt as exc:
            return _interrupted(exc, trace_path, lambda i: i.run_id == chosen)
        _print_summary(console, result)
        return 0
    config = config_from(args)
    if config.model not in zoo.MODELS:
        raise ConfigError(f"unknown model '{config.model}'", f"use one of: {', '.join(TRAINABLE)}")
    view = make_view(config.live, console)
    with session.said_if_slow(view, session.preparing(config)):  # no blank screen meanwhile
        data = session.load_data(config)  # fail on an unknown name before a device is touched
        session.prepare_model(config, data)  # and on a layer selection or pool that does not fit
    config = config.replace(trace=config.trace or session.default_trace_path(config))
    _refuse_orphaning(config.trace)
    _check_trace_room(config)
    before = _run_ids(config.trace)
    try:
        result = session.run(config, view=view)
    except KeyboardInterrupt as exc:
        return _interrupted(exc, config.trace, lambda i: i.run_id not in before)
    _print_summary(console, result)
    return 0


#: A trace's size, measured (MLP on digits, two-point; `hilbench run` at 1,200 and 4,800
#: forward passes: 39,153 and 88,929 bytes at fixed:1, 32,225 and 63,669 at fixed:4): ~23 KB of
#: model blob, attributes and evaluations, then ~14 bytes a step and ~14 bytes a sample (one
#: of the step's q perturbations).
TRACE_FIXED_BYTES = 23_000
TRACE_BYTES_PER_STEP = 14.0
TRACE_BYTES_PER_SAMPLE = 14.0
#: A run whose trace may grow past this is told its size before it starts.
SAY_TRACE_SIZE = 64 << 20


def trace_bytes_per_step(q: int) -> float:
    """About how many bytes a step of ``q`` samples adds to a trace."""
    return TRACE_BYTES_PER_STEP + q * TRACE_BYTES_PER_SAMPLE


def expected_trace_bytes(budget: int, q: int = 1) -> int:
    """About how large a run's trace grows if it spends ``budget`` forward passes at ``q``
    samples a step (2q forward passes; q = 1 writes the most per forward pass)."""
    return int(TRACE_FIXED_BYTES + budget / (2 * q) * trace_bytes_per_step(q))


def _first_q(config: RunConfig) -> int:
    """The q a run's schedule starts at (a QScheduler's q_min)."""
    from hilbench.train.schedule import make_schedule

    return make_schedule(config.scheduler).next_q(0)


def _check_trace_room(config: RunConfig) -> None:
    """Say a long run's expected trace size before it starts; refuse one that cannot fit on
    the disk unless a time limit or rule may end it sooner (then warn)."""
    import shutil

    q = _first_q(config)
    size = expected_trace_bytes(config.budget, q)
    here = Path(config.trace).resolve().parent
    while not here.exists() and here != here.parent:
        here = here.parent
    disk = shutil.disk_usage(here)
    free = disk.free
    if disk.total == 0 or (size < SAY_TRACE_SIZE and size < free // 2):
        return  # (a pseudo file system such as /proc: the writer says what is wrong)
    said = (
        f"the trace of {config.budget:,} forward passes grows to about {_size(size)} "
        f"(~{trace_bytes_per_step(q):.0f} bytes a step of {2 * q} forward passes); "
        f"{_size(free)} free in {here}"
    )
    if size > free and not (config.time_limit_s or config.until):
        raise HilbenchError(
            f"{said}: it would fill the disk",
            "lower --budget, set --time-limit or --until, or write the trace elsewhere (--trace)",
        )
    _say(f"hilbench: {said}")


def _size(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n:,.0f} B"


#: Backends that run a firmware --fw names.
FW_BACKENDS = ("sil", "qemu")


def check_flags(args: argparse.Namespace) -> None:
    """Options that would be ignored, or are malformed, refused before any work: --fw where
    no firmware runs, a blank or repeated --link-faults, --resume with what a resumed run
    keeps from its trace (its seed, its file)."""
    chosen = _chosen(args)
    if args.fw is not None:
        backend = chosen[0] if chosen else ("the trace's" if args.resume else "emulate")
        if backend not in FW_BACKENDS:
            raise ConfigError(
                f"--fw names the firmware --sil or --qemu runs; the {backend} backend runs "
                "none, so it would be ignored",
                "leave out --fw, or add --sil or --qemu",
            )
    if args.link_faults is not None:
        spec = args.link_faults.strip()
        if not spec:
            raise ConfigError(
                "--link-faults is blank (an unset variable?)",
                "give KIND=PROBABILITY,... e.g. drop=0.01, or leave --link-faults out",
            )
        keys = [part.split("=", 1)[0].strip() for part in spec.split(",") if part.strip()]
        repeated = sorted({k for k in keys if keys.count(k) > 1})
        if repeated:
            raise ConfigError(
                f"--link-faults gives {', '.join(repeated)} more than once ({spec})",
                "give each kind once",
            )
    if args.resume is not None:
        d = RunConfig()
        if args.trace is not None:
            raise ConfigError(
                f"--trace with --resume: the resumed run continues in its own file {args.resume}",
                "leave out --trace (copy the file first to keep the interrupted one)",
            )
        if args.seed != d.seed:
            raise ConfigError(
                "--seed with --resume: a resumed run keeps its trace's seed (its steps replay it)",
                "leave out --seed, or start a new run without --resume",
            )


def _resume_overrides(args: argparse.Namespace) -> dict[str, object]:
    """What a resumed run takes from this command line besides its limits (_resume_limits):
    the port of a board named here."""
    out: dict[str, object] = {}
    chosen = _chosen(args)
    if chosen is not None and chosen[1] is not None:
        out["port"] = chosen[1]
    return out


def _chosen(args: argparse.Namespace) -> tuple[str, str | None] | None:
    """The backend option given (its name, and its PORT if it takes one); None if none."""
    for name, backend in BACKEND_NAMES.items():
        value = getattr(args, name)
        if value is not None and value is not False:
            return name, value if backend.port else None
    return None


def _device(args: argparse.Namespace) -> tuple[str, str | None, int]:
    """(backend, port, baud) from the options, then the environment, then pyproject.toml."""
    defaults = user_defaults()
    baud = parse_baud(args.baud) if args.baud is not None else defaults.baud
    chosen = _chosen(args)
    if chosen is None:  # the default: the board named once, else the twin
        chosen = ("emulate", None) if defaults.board is None else ("board", defaults.board)
    backend, port = chosen
    if args.baud is not None and backend != "board":
        raise ConfigError(
            f"--baud sets a board's serial speed; the {backend} backend has none",
            "leave out --baud, or give --board PORT",
        )
    return backend, port, baud


def _backend_override(args: argparse.Namespace):
    """With --resume, a backend named on the command line replaces the trace's."""
    chosen = _chosen(args)
    if chosen is None:  # the trace's backend stays
        if args.baud is not None:
            raise ConfigError(
                "--baud with --resume needs --board PORT", "name the board the run goes on with"
            )
        return None
    kind, port, baud = _device(args)
    from hilbench.backend.registry import make_backend

    return make_backend(
        RunConfig(
            backend=kind, port=port, baud=baud, firmware=args.fw, link_faults=args.link_faults or ""
        )
    )


def _run_ids(path: Path) -> list[str]:
    from hilbench.trace import list_runs

    try:
        return list_runs(path) if Path(path).is_file() else []
    except HilbenchError:
        return []  # not a trace: the run itself says what is wrong with the file


def _refuse_orphaning(path: Path) -> None:
    """A new run after an unfinished one would leave it behind: say how to continue it."""
    from hilbench.session import unfinished_run

    try:
        info = unfinished_run(path)
    except HilbenchError:
        return  # a foreign or broken file: the writer says so, in one line
    if info is None:
        return
    of = f" of {info.budget:,}" if info.budget else ""
    run = "" if info.run_id == _last_resumable(path) else f" --run {info.run_id}"
    raise HilbenchError(
        f"{path} holds run {info.run_id}, {info.status} after {info.steps:,} steps "
        f"({info.forward_passes:,}{of} forward passes); a new run would leave it unfinished",
        f"continue it with `hilbench run --resume {shlex.quote(str(path))}{run}`, or write "
        "the new run to another file (--trace)",
    )


def _last_resumable(path: Path) -> str | None:
    from hilbench.trace import run_infos

    try:
        ids = [i.run_id for i in run_infos(path) if i.resumable]
    except HilbenchError:
        return None  # session.resume says what is wrong with the file
    return ids[-1] if ids else None


def _interrupted(exc: KeyboardInterrupt, path: Path, ours: Callable[[RunInfo], bool]) -> int:
    """Say what Ctrl-C or SIGTERM left on disk and how to continue; the exit status."""
    from hilbench.trace import Terminated, run_infos

    signal_name, status = ("SIGTERM", EXIT_SIGTERM)
    if not isinstance(exc, Terminated):
        signal_name, status = ("Ctrl-C", EXIT_SIGINT)
    try:
        infos = run_infos(path) if Path(path).is_file() else []
    except HilbenchError:
        infos = []
    mine = [i for i in infos if ours(i)]
    if not mine:
        _say(f"hilbench: {signal_name}: stopped before the run started; nothing was written")
        return status
    info = mine[-1]
    run = "" if info.run_id == _last_resumable(path) else f" --run {info.run_id}"
    of = f" of {info.budget:,}" if info.budget else ""
    _say(
        f"hilbench: {signal_name}: run {info.run_id} of {path} stopped after {info.steps:,} "
        f"steps ({info.forward_passes:,}{of} forward passes), all on disk; continue it with "
        f"`hilbench run --resume {shlex.quote(str(path))}{run}`"
    )
    return status


def _say(line: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr, flush=True)


def _device_time(result) -> str:
    """The device's time for the run's commands, per source (the emulator's is modeled by the
    STM32N6 cost model; QEMU's instructions are a count, not time), or ""."""
    from hilbench.trace import Trace

    try:
        tr = Trace.open(result.trace_path, result.run_id)
    except (HilbenchError, OSError):
        return ""
    t, model = tr.timing, str(tr.attrs.get("timing_model", "") or "")
    parts = []
    for src in dict.fromkeys(t["source"].tolist()):
        name = src.decode() if isinstance(src, bytes) else str(src)
        total = float(t["duration_s"][t["source"] == src].sum())
        if name == "modeled" and model:
            parts.append(f"{total:.3f} s (modeled: {model})")
        elif name in ("modeled", "device"):
            parts.append(f"{total:.3f} s ({name})")
        elif name == "instr":
            parts.append(f"{total:,.0f} instructions (QEMU)")
    return ", ".join(parts)


def _fit(result) -> str:
    """Where the run's ZO step fits on the STM32N6 (hilbench.analysis), or ""."""
    from hilbench.analysis import fit_line_of_blob
    from hilbench.trace import Trace

    try:
        blob = Trace.open(result.trace_path, result.run_id).model_blob
        return fit_line_of_blob(blob) if blob else ""
    except (HilbenchError, OSError, ValueError):
        return ""


def _stopped_by(result) -> str:
    reason = getattr(result, "stop_reason", "budget")
    return "the budget (spent)" if reason == "budget" else reason


def _print_summary(console, result) -> None:
    from rich.table import Table

    from hilbench.console import format_events

    table = Table(title="hilbench run", show_header=False)
    table.add_row("final test accuracy", f"{result.final_accuracy:.2%}")
    table.add_row("forward passes", f"{result.forward_passes:,}")
    table.add_row("steps", f"{result.steps:,}")
    table.add_row("stopped by", _stopped_by(result))
    table.add_row("backend", result.backend)
    table.add_row("weights CRC-32", f"0x{result.weights_crc:08x}")
    table.add_row("events", format_events(result.events))
    table.add_row("wall time", f"{result.wall_s:.1f} s (host)")
    device = _device_time(result)
    if device:
        table.add_row("device time", device)
    fit = _fit(result)
    if fit:
        table.add_row("STM32N6 memory", fit)
    try:
        console.print(table)
        print(f"trace written to {result.trace_path} (run {result.run_id})", flush=True)
    except (OSError, SystemExit):  # the output is gone (a closed pipe; rich exits on one):
        from hilbench.console import detach_stdout  # the run is complete all the same

        detach_stdout()
