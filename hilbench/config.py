"""Run configuration: one validated dataclass shared by the CLI, the pytest plugin and tests."""

from __future__ import annotations

import dataclasses
import math
import operator
import os
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hilbench.errors import ConfigError
from hilbench.link.serial_port import DEFAULT_BAUD  # the board's speed unless one is named

TIMING_MODEL_KEYS = ("m55", "npu")  # hilbench.npu.cost.TIMING_MODELS (not imported: light)
BAUD_RANGE = (50, 20_000_000)
ENV_BOARD = "HILBENCH_BOARD"
ENV_BAUD = "HILBENCH_BAUD"
#: The keys [tool.hilbench] in pyproject.toml may set, and what each does.
FILE_KEYS = {
    "board": "the board's port or pyserial URL when no backend option is given",
    "baud": "the board's serial speed",
}


@dataclass(frozen=True)
class BackendName:
    """One backend as the options name it: what ``hilbench run --NAME`` and ``pytest --NAME``
    say, and, for a backend that takes a value (``--board PORT``), the RunConfig field it fills."""

    run_help: str
    test_help: str
    port: bool = False  # the option takes a PORT, stored in RunConfig.port


#: Every backend, declared once: the CLI's device options, the pytest plugin's options, the
#: configuration's check and hilbench.backend.registry (one factory per name) read this table.
#: The first is the default.
BACKEND_NAMES: dict[str, BackendName] = {
    "emulate": BackendName(
        "the bit-exact device twin (default)",
        "use the bit-exact device twin (default)",
    ),
    "sil": BackendName(
        "the C firmware built for this host (software in loop)",
        "use the C firmware built for this host (software in the loop)",
    ),
    "qemu": BackendName(
        "the C firmware on a Cortex-M55 under qemu-system-arm -M mps3-an547 (UART on a "
        "local TCP port; durations are executed instructions)",
        "use the C firmware on a Cortex-M55 under qemu-system-arm -M mps3-an547 (one QEMU "
        "per session or xdist worker)",
    ),
    "board": BackendName(
        f"a board's serial port (/dev/ttyACM0, COM3) or a pyserial URL such as "
        f"socket://HOST:PORT (default: ${ENV_BOARD}, then [tool.hilbench] board)",
        "use a board: its port (/dev/ttyACM0), its ST-LINK's serial, auto (the one "
        "attached), or any pyserial URL such as socket://HOST:PORT",
        port=True,
    ),
}
BACKENDS = tuple(BACKEND_NAMES)


@dataclass(frozen=True)
class RunConfig:
    """Everything that decides what a run does; stored whole in the trace."""

    backend: str = "emulate"
    port: str | None = None  # pyserial URL for the board backend
    baud: int = DEFAULT_BAUD  # the board's serial speed (8N1)
    firmware: str | None = None  # SIL program / firmware image to run (None: build it)
    model: str = "mlp"
    dataset: str = "digits"
    # the vision models' size (0: the model's default): MobileNetV2's alpha or ResNet18's
    # channel width multiplier, and the image side the data are resized to
    width: float = 0.0
    resolution: int = 0
    # fixed q = 1 at lr 50: the widened study's best fixed q by training loss on its tuning seed
    # for the default task, the MLP from scratch on digits (docs/results/followup.md)
    scheduler: str = "fixed:1"
    budget: int = 30_000  # forward passes (one forward of one perturbed model on one batch)
    seed: int = 0
    lr: float = 50.0  # weight LSBs moved per (nat per LSB) of projected gradient
    eps: int = 2  # perturbation size in weight LSBs
    batch_size: int = 32
    eval_every: int = 2_000  # forward passes between test evaluations
    trace: Path | None = None
    live: bool = True
    link_faults: str = ""  # fault injection spec, e.g. "drop=0.01,reset=0.001,seed=1"
    # --- the ZO method (docs/zo-math.md); the device learns it from the blob's ZOCF section
    init: str = "random"  # or "pretrained": float pre-training on clean digits, quantized
    perturbation: str = "rademacher"  # rademacher | gaussian | uniform
    pool: int = 0  # PeZO reuse pool size (0: fresh random numbers every perturbation)
    scaling: str = "auto"  # auto (adaptive for uniform, fixed otherwise) | fixed | adaptive
    estimator: str = "two-point"  # or "one-sided"
    # how a step's q estimates become APPLY's coefficients (hilbench/zo/aggregate.py): mean
    # (average) or align (least squares over the q directions; the rate is then per query)
    aggregator: str = "mean"
    # the hybrid (docs/zo-math.md section 11): "last" trains the last layer by its exact
    # integer gradient on the device (HEAD_GRAD) and the layers before it by ZO; "none": ZO only
    hybrid: str = "none"
    head_lr: float = 0.0  # the exact head's rate (LSB^2 per nat); 0: the run's --lr
    rounding: str = "nearest"  # or "stochastic"
    master: str = "q16"  # q16 | int16 | int8
    layers: str = "weights"  # weights | biases | all | last:K | glob, comma-separated
    eps_mult: str = ""  # per-layer eps multipliers: "GLOB=X[,GLOB=X...]"
    eps_per_channel: bool = False  # scale-aware per-channel eps multipliers
    lr_schedule: str = "constant"  # constant | cosine[:FLOOR] | linear[:END] | step:F@X,...
    eps_schedule: str = "constant"
    # the cost model of the emulator's modeled durations (hilbench.npu.cost.TIMING_MODELS):
    # m55, what the firmware runs, or npu, a projection onto the Neural-ART
    timing_model: str = "m55"
    # when the run stops before its budget (hilbench.train.stopping): a wall-clock limit in
    # seconds (0: none) and stopping rules such as "accuracy>=0.9" (any one stops the run)
    time_limit_s: float = 0.0
    until: str = ""
    # how model and data reach the device: "uart" (the link) or "probe" (QEMU's GDB stub, a
    # board's probe: LOAD_STAGE / LOAD_COMMIT, hilbench/board/stage.py)
    upload: str = "uart"
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_text_fields(self)
        if self.backend not in BACKENDS:
            raise ConfigError(f"unknown backend '{self.backend}'", f"use one of {BACKENDS}")
        if self.backend == "board" and not (self.port or "").strip():
            raise ConfigError("the board backend needs a port", "pass --board PORT")
        if self.backend == "board":
            _check_bare_address(self.port or "")
        _check_range("baud", self.baud, *BAUD_RANGE)
        if self.timing_model not in TIMING_MODEL_KEYS:
            raise ConfigError(
                f"unknown timing model '{self.timing_model}'",
                f"use one of {', '.join(TIMING_MODEL_KEYS)}",
            )
        _check_upload(self.backend, self.upload)
        _check_vision_size(self.model, self.width, self.resolution)
        _check_range("budget", self.budget, 2, 10**9)
        _check_range("seed", self.seed, 0, 2**32 - 1)
        _check_range("eps", self.eps, 1, 127)
        _check_range("batch_size", self.batch_size, 1, 256)
        _check_range("eval_every", self.eval_every, 1, 10**9)
        if not (isinstance(self.lr, int | float) and 0.0 < self.lr <= 1e6):
            raise ConfigError(f"learning rate {self.lr} is out of range", "use 0 < lr <= 1e6")
        _, args = parse_scheduler(self.scheduler)
        q_first = int(args.get("q", args.get("q_min", 1)))
        first_step = q_first + 1 if self.estimator == "one-sided" else 2 * q_first
        if self.budget < first_step:
            raise ConfigError(
                f"budget {self.budget} is less than one step of {self.scheduler} "
                f"({first_step} forward passes)",
                f"use --budget >= {first_step}",
            )
        _check_choice("init", self.init, INITS)
        _check_choice("perturbation", self.perturbation, PERTURBATIONS)
        _check_choice("scaling", self.scaling, ("auto", "fixed", "adaptive"))
        _check_choice("estimator", self.estimator, ("two-point", "one-sided"))
        _check_choice("aggregator", self.aggregator, ("mean", "align"))
        _check_choice("hybrid", self.hybrid, ("none", "last"))
        if not (isinstance(self.head_lr, int | float) and 0.0 <= self.head_lr <= 1e9):
            raise ConfigError(
                f"head rate {self.head_lr} is out of range", "use 0 <= head_lr <= 1e9"
            )
        _check_choice("rounding", self.rounding, ("nearest", "stochastic"))
        _check_choice("master", self.master, ("q16", "int16", "int8"))
        _check_range("pool", self.pool, 0, 65536)
        if not self.layers.strip():
            raise ConfigError("the layer selection is empty", "use e.g. --layers weights")
        parse_eps_mult(self.eps_mult)
        rate_schedule(self.lr_schedule)
        rate_schedule(self.eps_schedule)
        check_stopping(self.time_limit_s, self.until)
        if self.link_faults:
            from hilbench.link.faults import FaultSpec

            FaultSpec.parse(self.link_faults)

    def replace(self, **changes: Any) -> RunConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["trace"] = str(self.trace) if self.trace else None
        return d


VISION_MODELS = ("mobilenet_v2", "resnet18")


_BARE_ADDRESS = re.compile(r"(\[[0-9A-Fa-f:]+\]|[A-Za-z0-9][A-Za-z0-9.-]*):(\d{1,5})")
_PORT_PREFIXES = ("labgrid:", "map:")  # board specs with a colon of their own


def _check_bare_address(port: str) -> None:
    """``--board 127.0.0.1:5555`` is a network address with its ``socket://`` forgotten, not
    a probe id: say so once, before anything looks for a board."""
    spec = port.strip()
    if spec.startswith(_PORT_PREFIXES) or not _BARE_ADDRESS.fullmatch(spec):
        return
    raise ConfigError(
        f"--board {spec} is a network address without a scheme",
        f"did you mean socket://{spec} (hilbench emulate --listen, a serial server)?",
    )


def _check_text_fields(config: RunConfig) -> None:
    """A setting typed as text is text: ``scheduler=4`` is refused naming the field, not met
    later by an AttributeError deep in the parser."""
    for f in dataclasses.fields(config):
        if f.type not in ("str", "str | None"):
            continue
        value = getattr(config, f.name)
        if f.type == "str | None" and (value is None or isinstance(value, os.PathLike)):
            continue  # (a firmware may be given as a Path)
        if not isinstance(value, str):
            example = {"scheduler": "fixed:4", "model": "mlp", "dataset": "digits"}.get(
                f.name, str(getattr(RunConfig, f.name, "") or "...")
            )
            raise ConfigError(
                f"{f.name} {value!r} is of type {type(value).__name__}, not text",
                f"pass a string, e.g. {f.name}={example!r}",
            )


UPLOAD_MODES = ("uart", "probe")


def _check_upload(backend: str, upload: str) -> None:
    if upload not in UPLOAD_MODES:
        raise ConfigError(f"unknown upload '{upload}'", f"use one of {', '.join(UPLOAD_MODES)}")
    if upload == "probe" and backend not in ("qemu", "board"):
        raise ConfigError(
            f"--upload probe needs a debugger, and the {backend} backend has none",
            "use it with --qemu (QEMU's GDB stub) or --board (the ST-LINK), or drop it",
        )


def _check_vision_size(model: str, width: float, resolution: int) -> None:
    if (width or resolution) and model not in VISION_MODELS:
        raise ConfigError(
            f"--width / --resolution size a vision model; {model} has neither",
            f"leave them out, or train one of {', '.join(VISION_MODELS)}",
        )
    if not (isinstance(width, int | float) and (width == 0 or 0.05 <= width <= 4.0)):
        raise ConfigError(f"width {width!r} is out of range", "use 0.05..4 (e.g. 0.35)")
    if resolution != 0:
        _check_range("resolution", resolution, 8, 224)


def _check_range(name: str, value: int, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):  # True is an int to Python
        raise ConfigError(
            f"{name} {value!r} is a {type(value).__name__}, not an integer",
            f"pass an int in [{lo:,}, {hi:,}], e.g. {name}={max(lo, min(hi, 1000))}",
        )
    if not lo <= value <= hi:
        raise ConfigError(f"{name} {value!r} is out of range", f"use an integer in [{lo}, {hi}]")


def int_arg(text: str) -> int:
    """An integer option as typed, also as ``--help`` prints numbers: ``30,000``, ``30_000``."""
    cleaned = text.strip().replace(",", "").replace("_", "")
    try:
        return int(cleaned)
    except ValueError:
        import argparse

        raise argparse.ArgumentTypeError(f"invalid integer {text!r}") from None


def width_arg(text: str) -> float:
    """``--width W``: a vision model's width multiplier as typed; 0 (what RunConfig uses for
    "the model's default") is refused, not silently the default."""
    import argparse

    try:
        value = float(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid width {text!r}: use e.g. 0.35") from None
    if not (math.isfinite(value) and 0.05 <= value <= 4.0):
        raise argparse.ArgumentTypeError(
            f"width {text} is out of range: use 0.05..4 (e.g. 0.35), or leave --width out for "
            "the model's default"
        )
    return value


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"unknown {name} '{value}'", f"use one of: {', '.join(choices)}")


INITS = ("random", "pretrained")
PERTURBATIONS = ("rademacher", "gaussian", "uniform")
EXTRA_SCHEDULERS: set[str] = set()  # names registered by hilbench.train.schedule.register
_QSCHED_INT = {
    "q_min",
    "q_max",
    "windows",
    "lookback",
    "rho_factor",
    "factor",
    "cooldown",
    "min_steps",
    "min_window",
}
_QSCHED_INT_DIM = {"dim"}  # the rate coupling's dimension d (0: d >> q)
_QSCHED_FLOAT = {"z_rise", "early", "rho_min", "z_rho", "warmup", "z_fall", "couple"}


def parse_scheduler(spec: str) -> tuple[str, dict[str, Any]]:
    """``fixed:Q`` -> ("fixed", {"q": Q}); ``qscheduler[:k=v,...]`` -> ("qscheduler", {...});
    a name registered with hilbench.train.schedule.register -> (name, {})."""
    kind, _, arg = spec.partition(":")
    if kind == "fixed":
        try:
            q = int(arg)
        except ValueError:
            q = -1
        if not 1 <= q <= 256:
            raise ConfigError(f"scheduler '{spec}' needs q in [1, 256]", "write e.g. fixed:4")
        return kind, {"q": q}
    if kind == "qscheduler":
        args: dict[str, Any] = {}
        for item in filter(None, arg.split(",")):
            key, _, value = item.partition("=")
            try:
                if key in _QSCHED_INT or key in _QSCHED_INT_DIM:
                    args[key] = int(value)
                elif key in _QSCHED_FLOAT:
                    args[key] = float(value)
                else:
                    raise ValueError
            except ValueError:
                known = ", ".join(sorted(_QSCHED_INT | _QSCHED_INT_DIM | _QSCHED_FLOAT))
                raise ConfigError(
                    f"scheduler '{spec}': bad setting '{item}'",
                    f"write qscheduler or qscheduler:KEY=VALUE,... with KEY one of {known}",
                ) from None
        q_min, q_max = args.get("q_min", 1), args.get("q_max", 32)
        if not 1 <= q_min <= q_max <= 256:
            raise ConfigError(
                f"scheduler '{spec}' needs 1 <= q_min <= q_max <= 256",
                "write e.g. qscheduler:q_min=1,q_max=32",
            )
        return kind, args
    if kind in EXTRA_SCHEDULERS:
        return kind, {}
    raise ConfigError(
        f"unknown scheduler '{spec}'", "use fixed:Q (e.g. fixed:4) or qscheduler[:KEY=VALUE,...]"
    )


def parse_eps_mult(spec: str) -> dict[str, float]:
    """``"fc0_*=0.5,fc1_w=2"`` -> {"fc0_*": 0.5, "fc1_w": 2.0} (multipliers in 1/16..15.9)."""
    out: dict[str, float] = {}
    for item in filter(None, (p.strip() for p in spec.split(","))):
        pattern, _, value = item.partition("=")
        try:
            mult = float(value)
        except ValueError:
            mult = -1.0
        if not pattern or not 1 / 16 <= mult <= 255 / 16:
            raise ConfigError(
                f"eps multiplier '{item}' is malformed or out of range",
                "write GLOB=X with 1/16 <= X <= 15.9, e.g. fc0_*=0.5",
            )
        out[pattern] = mult
    return out


def rate_schedule(spec: str) -> Callable[[float], float]:
    """A multiplier of the fraction of the budget spent: ``constant``, ``cosine[:FLOOR]``
    (half cosine from 1 to FLOOR, default 0), ``linear[:END]`` (1 to END, default 0) or
    ``step:F@X[,F@X...]`` (multiplier F from fraction X on)."""
    kind, _, arg = spec.partition(":")
    try:
        if kind == "constant" and not arg:
            return lambda frac: 1.0
        if kind == "cosine":
            floor = float(arg) if arg else 0.0
            return lambda frac: floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * frac))
        if kind == "linear":
            end = float(arg) if arg else 0.0
            return lambda frac: 1.0 + (end - 1.0) * frac
        if kind == "step" and arg:
            points = sorted((float(x), float(f)) for f, x in (p.split("@") for p in arg.split(",")))

            def step(frac: float) -> float:
                value = 1.0
                for x, f in points:
                    if frac >= x:
                        value = f
                return value

            return step
    except ValueError:
        pass
    raise ConfigError(
        f"unknown rate schedule '{spec}'",
        "use constant, cosine[:FLOOR], linear[:END] or step:F@X[,F@X...]",
    )


# ---------------------------------------------------------------- stopping early


#: What a rule may test, and when it is checked.
METRICS = {
    "accuracy": "the test accuracy (fraction, 0..1), at each test evaluation",
    "loss": "the test loss (nats), at each test evaluation",
    "train_loss": "the step's training loss (nats), after each step",
    "forward_passes": "forward passes spent, after each step",
    "steps": "steps taken, after each step",
}
EVAL_METRICS = ("accuracy", "loss")
_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
}
_RULE = re.compile(r"^\s*([a-z_]+)\s*(>=|<=|>|<)\s*([-+0-9.eE%_]+)\s*$")
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s|m|min|h)?\s*$")
_UNITS = {None: 1.0, "s": 1.0, "ms": 1e-3, "m": 60.0, "min": 60.0, "h": 3600.0}
MAX_TIME_LIMIT_S = 30 * 24 * 3600.0


def parse_duration(text: str) -> float:
    """``"30s"``, ``"5m"``, ``"1.5h"``, ``"250ms"`` or a bare number of seconds -> seconds."""
    match = _DURATION.match(str(text))
    seconds = float(match.group(1)) * _UNITS[match.group(2)] if match else -1.0
    if not 0 < seconds <= MAX_TIME_LIMIT_S:
        raise ConfigError(
            f"time limit {text!r} is not a duration",
            "write e.g. 30s, 5m, 1.5h or a number of seconds (at most 30 days)",
        )
    return seconds


def format_duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:g} h"
    if seconds >= 60:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


@dataclass(frozen=True)
class Rule:
    """One stopping rule: ``metric op value``."""

    metric: str
    op: str
    value: float

    def holds(self, observed: float) -> bool:
        return _OPS[self.op](observed, self.value)

    def __str__(self) -> str:
        return f"{self.metric}{self.op}{self.value:g}"


def parse_until(spec: str) -> tuple[Rule, ...]:
    """``"accuracy>=0.9"`` or ``"accuracy>=90%,loss<=0.3"`` -> rules (any one stops)."""
    rules = []
    for part in filter(None, (p.strip() for p in str(spec).split(","))):
        match = _RULE.match(part)
        metric = match.group(1) if match else ""
        if not match or metric not in METRICS:
            raise ConfigError(
                f"stopping rule {part!r} is not METRIC OP VALUE with a known metric",
                f"write e.g. accuracy>=0.9; metrics: {', '.join(METRICS)}; ops: >= <= > <",
            )
        raw = match.group(3).replace("_", "")
        try:
            value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
        except ValueError:
            raise ConfigError(
                f"stopping rule {part!r}: {match.group(3)!r} is not a number",
                "write e.g. accuracy>=0.9 or accuracy>=90%",
            ) from None
        rules.append(Rule(metric, match.group(2), value))
    return tuple(rules)


def check_stopping(time_limit_s: float, until: str) -> None:
    """Raise a ConfigError naming a bad limit or rule (RunConfig's check)."""
    if not isinstance(time_limit_s, int | float) or not 0 <= time_limit_s <= MAX_TIME_LIMIT_S:
        raise ConfigError(
            f"time limit {time_limit_s!r} s is out of range",
            "use 0 (none) or a number of seconds up to 30 days",
        )
    parse_until(until)


# ---------------------------------------------------------------- naming the board once


@dataclass(frozen=True)
class UserDefaults:
    """The board and baud a user named once: ``HILBENCH_BOARD`` / ``HILBENCH_BAUD``, else
    ``[tool.hilbench]`` in the nearest pyproject.toml that has it. The command line wins over
    both; ``sources`` says where each value came from (for messages)."""

    board: str | None = None
    baud: int = DEFAULT_BAUD
    sources: dict[str, str] = field(default_factory=dict)


def find_pyproject(start: Path | None = None) -> Path | None:
    """The nearest pyproject.toml at or above ``start`` (the working directory) that has a
    [tool.hilbench] table, or None."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file() and _hilbench_table(candidate) is not None:
            return candidate
    return None


def _hilbench_table(path: Path) -> dict[str, Any] | None:
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(
            f"cannot read {path}: {exc.strerror or exc}", "fix its permissions"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML ({exc})", "fix the file") from None
    table = data.get("tool", {}).get("hilbench") if isinstance(data.get("tool"), dict) else None
    if table is None:
        return None
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: tool.hilbench is not a table", "write [tool.hilbench]")
    return table


def user_defaults(
    start: Path | None = None, environ: dict[str, str] | os._Environ[str] | None = None
) -> UserDefaults:
    """Read the board and baud named in the environment and in pyproject.toml (see
    UserDefaults); a ConfigError names a blank, unknown or malformed value and where it is."""
    env = os.environ if environ is None else environ
    board: str | None = None
    baud = DEFAULT_BAUD
    sources: dict[str, str] = {}
    path = find_pyproject(start)
    if path is not None:
        table = _hilbench_table(path) or {}
        where = f"{path} [tool.hilbench]"
        unknown = sorted(set(table) - set(FILE_KEYS))
        if unknown:
            raise ConfigError(
                f"{where} has no setting {', '.join(map(repr, unknown))}",
                f"use {' and '.join(FILE_KEYS)}: "
                + "; ".join(f"{k}: {v}" for k, v in FILE_KEYS.items()),
            )
        if "board" in table:
            value = table["board"]
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(
                    f"{where} board = {value!r} names no port",
                    'write e.g. board = "/dev/ttyACM0", or remove the line to use the emulator',
                )
            board, sources["board"] = value.strip(), where
        if "baud" in table:
            baud, sources["baud"] = _baud(table["baud"], f"{where} baud"), where
    if ENV_BOARD in env:
        value = env[ENV_BOARD]
        if not value.strip():  # e.g. HILBENCH_BOARD=$PORT with PORT unset: never the emulator
            raise ConfigError(
                f"{ENV_BOARD} is set but empty",
                "set it to the board's port (e.g. /dev/ttyACM0), or unset it to use the emulator",
            )
        board, sources["board"] = value.strip(), ENV_BOARD
    if ENV_BAUD in env:
        baud, sources["baud"] = _baud(env[ENV_BAUD], ENV_BAUD), ENV_BAUD
    return UserDefaults(board=board, baud=baud, sources=sources)


def _baud(value: object, where: str) -> int:
    try:
        baud = int(value) if not isinstance(value, bool | float) else -1
    except (TypeError, ValueError):
        baud = -1
    if not BAUD_RANGE[0] <= baud <= BAUD_RANGE[1]:
        raise ConfigError(
            f"{where} = {value!r} is not a baud rate",
            f"give an integer in [{BAUD_RANGE[0]:,}, {BAUD_RANGE[1]:,}], e.g. 921600",
        )
    return baud


def parse_baud(text: str) -> int:
    """``--baud`` on a command line: an integer baud rate, or a ConfigError."""
    return _baud(text.strip().replace("_", ""), "--baud")
