"""Wiring one run: config -> data, model, backend, trainer, trace, view."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from hilbench import __version__, datasets, version
from hilbench.backends import Backend, EmulatorBackend, make_backend
from hilbench.board.lifecycle import Lifecycle, Stage
from hilbench.config import RunConfig, parse_eps_mult
from hilbench.console import (
    NullView,
    RunView,
    view_event,
    view_status,
    view_title,
    view_transfer,
)
from hilbench.device import DeviceTwin, FrameEndpoint, ModelState
from hilbench.errors import ConfigError, HilbenchError
from hilbench.link.memory import MemoryPort
from hilbench.npu import cost, zoo
from hilbench.npu.blob import to_blob
from hilbench.npu.graph import Graph
from hilbench.npu.ops import backend as npu_backend
from hilbench.protocol import data_blob
from hilbench.protocol.frames import PROTOCOL_VERSION
from hilbench.target.client import Target
from hilbench.target.recovery import RecoveringTarget, UpdateLog
from hilbench.trace import Trace, TraceWriter
from hilbench.trace.reader import RunInfo, run_infos
from hilbench.train.schedule import Scheduler, make_schedule
from hilbench.train.trainer import TEST_SLOT, TRAIN_SLOT, LoggedStep, Trainer, TrainSettings
from hilbench.zo import zocf
from hilbench.zo.loss import LossTables

CALIBRATION_ITEMS = 256
PRETRAIN_DATASET = "digits"  # --init pretrained: float pre-training on the clean digits
POOL_SEED_SALT = 0x504F4F4C  # "POOL": the pool seed is the run seed xor this
# A random-init MLP's int8 weights use +-64 of int8's +-127 (each row's largest weight at 64
# LSBs), so training can grow them 2x: at the full range no weight can outgrow its init
# maximum (docs/results.md). Pre-trained weights keep the full range. The CNN's converter
# (npu/convert.py) has no such setting yet.
RANDOM_INIT_WEIGHT_RANGE = 64


def direct_target(twin: DeviceTwin | None = None) -> Target:
    """A connected Target on an in-process twin, for studies: no pty, no thread, the same bytes
    and device code as the emulator backend (``EmulatorBackend(link="memory")``'s link)."""
    port = MemoryPort(FrameEndpoint(twin or DeviceTwin()).feed, name="in-process")
    target = Target(port, name="emulator (in-process)", min_rto=EmulatorBackend.MEMORY_MIN_RTO_S)
    target.hello()
    return target


@dataclass(frozen=True)
class RunResult:
    """What a finished run reports; the trace holds the rest."""

    trace_path: Path
    run_id: str
    backend: str
    final_accuracy: float
    forward_passes: int
    steps: int
    weights_crc: int
    wall_s: float
    events: dict[str, int] = dataclasses.field(default_factory=dict)  # trace events by kind

    def __repr__(self) -> str:
        return (
            f"<RunResult run {self.run_id} of {self.trace_path}: accuracy "
            f"{self.final_accuracy:.2%}, {self.forward_passes:,} forward passes, "
            f"{self.steps:,} steps>"
        )


@dataclass(frozen=True)
class PreparedModel:
    graph: Graph
    blob: bytes
    input_scale: float
    input_zero_point: int
    zo: zocf.ZoConfig
    trained: list[zocf.Trainable]

    def fresh_words(self, q: int) -> int:
        """PRNG words the device draws in a step of q samples (PROBE + APPLY)."""
        return zocf.fresh_words_per_step(self.zo, self.trained, q)

    def fresh_numbers(self, q: int) -> int:
        """Random numbers the device draws in a step of q samples (PROBE + APPLY)."""
        return zocf.fresh_numbers_per_step(self.zo, self.trained, q)


_PRETRAINED: dict[tuple[str, int], list] = {}


def pretrained_float_weights(model: str, seed: int) -> list:
    """Float weights of ``model`` pre-trained on the clean digits (cached per process)."""
    from hilbench.npu import pretrain

    key = (model, seed)
    if key not in _PRETRAINED:
        clean = datasets.load(PRETRAIN_DATASET)
        _PRETRAINED[key] = pretrain.pretrain(model, clean.x_train, clean.y_train, seed=seed)
    return _PRETRAINED[key]


VISION_DEFAULTS = {"mobilenet_v2": ("alpha", 0.35), "resnet18": ("width", 0.25)}


def arch_kwargs(config: RunConfig) -> dict:
    """The architecture's size for a vision model (alpha or width, resolution), else {}."""
    if config.model not in VISION_DEFAULTS:
        return {}
    key, default = VISION_DEFAULTS[config.model]
    return {key: config.width or default, "resolution": data_resolution(config)}


def data_resolution(config: RunConfig) -> int | None:
    """The side images are resized to (vision models), None for the digits' models."""
    if config.model not in VISION_DEFAULTS:
        return None
    return config.resolution or datasets.VISION_RESOLUTION


def load_data(config: RunConfig) -> datasets.Dataset:
    """The run's data set, at the vision model's resolution when it is an image data set."""
    res = data_resolution(config) if datasets.is_image_dataset(config.dataset) else None
    return datasets.load(config.dataset, res)


def build_graph(config: RunConfig, data: datasets.Dataset) -> Graph:
    """The int8 model: random init calibrated on the run's data, or (``init=pretrained``)
    pre-trained in float on the clean digits and quantized with clean calibration data (a
    vision model: on the Fashion-MNIST source task, hilbench.data.pretrained)."""
    arch = arch_kwargs(config)
    if arch:
        arch["classes"] = data.n_classes
        if config.init == "pretrained":
            from hilbench.data import pretrained

            weights, source = pretrained.vision_weights(config.model, arch)
            return zoo.build(
                config.model,
                seed=config.seed,
                calibration=source.x_train[:CALIBRATION_ITEMS],
                float_weights=weights,
                **arch,
            )
        return zoo.build(
            config.model, seed=config.seed, calibration=data.x_train[:CALIBRATION_ITEMS], **arch
        )
    if config.init == "pretrained":
        clean = datasets.load(PRETRAIN_DATASET)
        return zoo.build(
            config.model,
            seed=config.seed,
            calibration=clean.x_train[:CALIBRATION_ITEMS],
            float_weights=pretrained_float_weights(config.model, config.seed),
        )
    kw = {"weight_range": RANDOM_INIT_WEIGHT_RANGE} if config.model == "mlp" else {}
    return zoo.build(
        config.model, seed=config.seed, calibration=data.x_train[:CALIBRATION_ITEMS], **kw
    )


def zo_config(config: RunConfig, graph: Graph) -> zocf.ZoConfig:
    """The ZOCF section ``config`` asks for; ConfigError naming the setting otherwise."""
    try:
        return zocf.build(
            graph,
            layers=config.layers,
            distribution=config.perturbation,
            scaling=None if config.scaling == "auto" else config.scaling,
            estimator=config.estimator,
            rounding=config.rounding,
            master=config.master,
            pool_size=config.pool,
            pool_seed=(config.seed ^ POOL_SEED_SALT) & 0xFFFFFFFF,
            eps_mults=parse_eps_mult(config.eps_mult),
            per_channel=config.eps_per_channel,
        )
    except ValueError as exc:
        raise ConfigError(
            f"{config.model}: {exc}",
            "pick --layers / --pool / --eps-mult that fit the model (see docs/zo-math.md)",
        ) from None


def check_model_fits(config: RunConfig, data: datasets.Dataset) -> None:
    """A ConfigError saying what to do when ``config.model`` cannot take ``data``'s items
    (e.g. ResNet18's 64x64 colour images against the digits' 8x8 grey ones)."""
    from hilbench.npu import nets

    if config.model not in nets.ARCHITECTURES:
        return  # zoo.build names the known models
    if config.model in VISION_DEFAULTS and not datasets.is_image_dataset(config.dataset):
        items = "x".join(map(str, data.input_shape))
        raise ConfigError(
            f"model {config.model} takes colour images and the items of {config.dataset} are "
            f"{items} grey values",
            "train it on an image data set: --dataset fashion-mnist-shift (or fashion-mnist, "
            "eurosat:DIR, stl10:DIR)",
        )
    if config.model in VISION_DEFAULTS:
        return  # the images are resized to the model's resolution
    if datasets.is_image_dataset(config.dataset):
        raise ConfigError(
            f"model {config.model} takes the digits' 8x8 values, not the colour images of "
            f"{config.dataset}",
            f"train mobilenet_v2 or resnet18 on {config.dataset} (--model mobilenet_v2)",
        )
    size = int(np.prod(data.input_shape))

    def takes(name: str) -> tuple[int, ...]:
        return tuple(nets.float_model(name, 0).input_shape)

    shape = takes(config.model)
    if int(np.prod(shape)) == size:
        return
    fits = [n for n in nets.ARCHITECTURES if int(np.prod(takes(n))) == size]
    items = "x".join(map(str, data.input_shape))
    fix = f"train {' or '.join(fits)} (--model {fits[0]})" if fits else "choose another --model"
    raise ConfigError(
        f"model {config.model} takes {'x'.join(map(str, shape))} images and the items of "
        f"{config.dataset} are {items} values: hilbench ships no data set {config.model} can "
        "train on yet",
        f"{fix}; {config.model}'s inference speed is measured by benchmarks/bench_npu.py",
    )


def prepare_model(config: RunConfig, data: datasets.Dataset) -> PreparedModel:
    """Build and quantize the model, and pack it with its loss tables and ZOCF section."""
    check_model_fits(config, data)
    graph = build_graph(config, data)
    out = graph.tensors[graph.output]
    tables = LossTables.for_scale(float(out.qparams.scale[0]))
    zo = zo_config(config, graph)
    blob = to_blob(graph, {"LOSS": tables.to_bytes(), "ZOCF": zo.to_bytes()})
    inp = graph.tensors[graph.input].qparams
    return PreparedModel(
        graph, blob, float(inp.scale[0]), int(inp.zero_point[0]), zo, zocf.resolve(zo, graph)
    )


def default_trace_path(config: RunConfig) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("traces") / f"{stamp}-{config.model}-{config.dataset}-s{config.seed}.h5"


def git_revision() -> str:
    """The commit hilbench runs from (``-dirty`` if modified), "" outside its checkout."""
    return version.git_revision()


def npu_in_use(config: RunConfig) -> tuple[str, str]:
    """(NPU backend, kernel table) computing this run's forward passes when this process is
    the device (the emulator): e.g. ("native", "avx2"), ("jit", ""); ("", "") when another
    program or a board computes them."""
    if config.backend != "emulate":
        return "", ""
    name = npu_backend.name()
    if name != "native":
        return name, ""
    from hilbench.npu import native

    return name, native.active_isa()


def unfinished_run(path: Path) -> RunInfo | None:
    """The last run of the trace at ``path`` that did not finish and has steps on disk (work a
    new run in the same file would orphan), or None (also when there is no file yet)."""
    if not Path(path).exists():
        return None
    for info in reversed(run_infos(path)):
        if info.resumable and info.steps:
            return info
    return None


def run(
    config: RunConfig,
    *,
    view: RunView | None = None,
    target: Target | None = None,
    backend: Backend | None = None,
    schedule: Scheduler | None = None,
) -> RunResult:
    """Train once as ``config`` says; on ``target`` if given, else on a backend opened here."""
    # The twin's int8 kernels are small BLAS calls: extra BLAS threads only contend (10x
    # slower on a busy 2-core machine) and cannot change a result (every sum is exact).
    with threadpool_limits(limits=1, user_api="blas"):
        return _run(config, view=view, target=target, backend=backend, schedule=schedule)


@dataclass(frozen=True)
class _Resumed:
    """An interrupted run read back from its trace."""

    model_blob: bytes
    steps: list[LoggedStep]
    updates: list[tuple[np.ndarray, np.ndarray]]
    run_id: str = ""
    last_eval: tuple[int, float, float] | None = None  # (forward passes, accuracy, loss)


def resume(
    trace_path: Path,
    *,
    view: RunView | None = None,
    backend: Backend | None = None,
    target: Target | None = None,
    run: str | None = None,
) -> RunResult:
    """Continue an interrupted run of ``trace_path`` in the same file: ``run`` (an id such as
    '0002'), by default the last run of the file that did not complete.

    The device is reloaded and given the logged updates; the host replays its seeds and
    scheduler up to the last step on disk, so the run ends as an uninterrupted one would.
    """
    trace_path = Path(trace_path)
    infos = run_infos(trace_path)
    if run is None:
        open_runs = [i for i in infos if i.resumable]
        if not open_runs:
            statuses = ", ".join(f"{i.run_id} {i.status}" for i in infos) or "no runs"
            raise HilbenchError(
                f"every run of {trace_path} finished ({statuses}): there is nothing to resume",
                "start a new run without --resume",
            )
        run = open_runs[-1].run_id
    trace = Trace.open(trace_path, run)
    if not trace.resume_state().resumable:  # interrupted, SIGTERMed and failed runs resume
        raise HilbenchError(
            f"run {trace.run_id} of {trace_path} is {trace.status}: there is nothing to resume",
            "start a new run without --resume",
        )
    if trace.model_blob is None:
        raise HilbenchError(f"{trace_path} holds no model blob", "it cannot be resumed")
    stored = dict(trace.config)
    stored["trace"] = Path(trace_path)
    known = {f.name for f in dataclasses.fields(RunConfig)}
    config = RunConfig(**{k: v for k, v in stored.items() if k in known})
    if backend is not None:
        config = config.replace(backend=backend.kind)
    samples = trace.samples
    steps, updates = [], []
    for row in trace.steps:
        start, q = int(row["sample_start"]), int(row["q"])
        seeds = samples["seed"][start : start + q].astype(np.uint32)
        updates.append((seeds, samples["coeff"][start : start + q].astype(np.int32)))
        steps.append(
            LoggedStep(
                q=q,
                batch_seed=int(row["batch_seed"]),
                seeds=seeds,
                loss=float(row["loss"]),
                forward_passes=int(row["forward_passes"]),
                lr=float(row["lr"]),
                eps=int(row["eps"]),
                grads=samples["grad"][start : start + q].astype(np.float64),
            )
        )
    tests = trace.evals[trace.evals["split"] == "test"]
    last_eval = None
    if len(tests):
        last = tests[-1]
        last_eval = (int(last["forward_passes"]), float(last["accuracy"]), float(last["loss"]))
    resumed = _Resumed(
        model_blob=trace.model_blob,
        steps=steps,
        updates=updates,
        run_id=trace.run_id,
        last_eval=last_eval,
    )
    with threadpool_limits(limits=1, user_api="blas"):
        return _run(
            config, view=view, target=target, backend=backend, schedule=None, resumed=resumed
        )


def _run(
    config: RunConfig,
    *,
    view: RunView | None,
    target: Target | None,
    backend: Backend | None,
    schedule: Scheduler | None,
    resumed: _Resumed | None = None,
) -> RunResult:
    started = time.perf_counter()
    npu_backend.check_env()  # a user's setting: say so now, not as a device failure later
    view = view or NullView()
    data = load_data(config)
    model = prepare_model(config, data)
    if resumed is not None and resumed.model_blob != model.blob:
        raise HilbenchError(
            "this hilbench builds a different model blob than the one in the trace",
            "resume with the hilbench version that wrote the trace",
        )
    schedule = schedule or make_schedule(config.scheduler)
    trace_path = Path(config.trace) if config.trace else default_trace_path(config)
    npu_name, npu_isa = npu_in_use(config)
    npu = f" · NPU {npu_name}" + (f" {npu_isa}" if npu_isa else "") if npu_name else ""
    run_attrs = {
        "hilbench_version": __version__,
        "protocol_version": PROTOCOL_VERSION,
        "backend": config.backend,
        "device_id": "",
        "firmware": "",
        "model": config.model,
        "model_hash": hashlib.sha256(model.blob).hexdigest(),
        "dataset": config.dataset,
        "split": "train/test",
        "seed": config.seed,
        "start_time": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "git_revision": git_revision(),
        "npu_backend": npu_name,
        "npu_isa": npu_isa,
        "timing_model": cost.timing_model(config.timing_model).name,
    }
    what = f"{config.model} on {config.dataset} · {schedule.name} · {config.backend}"
    view.start(f"hilbench · {what}{npu}")
    try:  # the view is finished however the run ends (a panel must not stay half drawn)
        # Events before the trace exists (HELLO retries) are kept and written once it does.
        early: list[tuple[str, str]] = []
        writer: TraceWriter | None = None

        def on_event(kind: str, detail: str) -> None:
            view_event(view, kind, detail)
            if writer is None:
                early.append((kind, detail))
            else:  # stamped with the step in progress (after a resume: the next step on disk)
                writer.event(kind, detail)

        owned = None
        trainer = None
        try:
            if target is None:  # connect first: a wrong port leaves no failed run in the trace
                owned = backend or make_backend(config)
                view_status(view, _connecting(config))
                if hasattr(owned, "load_progress"):  # a board: the firmware's bar
                    owned.load_progress = lambda done, total: view_transfer(
                        view, "loading the firmware", done, total
                    )
                target = owned.open()
            inner = target
            target = RecoveringTarget(
                target,
                on_event=on_event,
                # The twin's semantics are what any device must compute: check a board or QEMU
                # against them. The emulator is the twin itself, so there it would check nothing.
                shadow=ModelState.from_blob if config.backend != "emulate" else None,
            )
            # where it ran: a farm board's place, exporter host, probe id, firmware hash
            where = dict(getattr(inner, "location", None) or {})
            if resumed is None:
                writer = TraceWriter.create(
                    trace_path, {**run_attrs, **where}, config.to_dict(), model_blob=model.blob
                )
            else:
                writer = TraceWriter.resume(trace_path, resumed.run_id or None)
                if where:
                    writer.set_attrs(**where)
        except BaseException:
            if owned is not None:
                owned.close()
            elif target is not None and isinstance(target, RecoveringTarget):
                target.detach()
            raise
        with writer as trace:
            for kind, detail in early:
                trace.event(kind, detail)
            try:
                info = target.info or target.hello()
                trace.set_attrs(device_id=info.device_id, firmware=info.firmware)
                if resumed is not None:  # the attributes of this hilbench and host
                    trace.set_attrs(npu_backend=npu_name, npu_isa=npu_isa)
                view_title(view, f"hilbench · {what} · {info.device_id}{npu}")
                view_status(
                    view,
                    f"connected to {info.device_id} (firmware {info.firmware}, "
                    f"protocol {info.protocol_version})",
                )
                x_train = datasets.quantize_inputs(
                    data.x_train, model.input_scale, model.input_zero_point
                )
                x_test = datasets.quantize_inputs(
                    data.x_test, model.input_scale, model.input_zero_point
                )
                life = getattr(inner, "lifecycle", None)  # a board's stages, timed and logged
                with _UploadStatus(view, inner) as uploads, _moving(life, Stage.MODEL_LOADED):
                    if resumed is None:
                        uploads.expect("the model", len(model.blob))
                        target.load_model(model.blob)
                        uploads.expect(f"{len(data.y_train):,} training items", x_train.nbytes)
                        target.load_data(TRAIN_SLOT, x_train, data.y_train, data.n_classes)
                        uploads.expect(f"{len(data.y_test):,} test items", x_test.nbytes)
                        target.load_data(TEST_SLOT, x_test, data.y_test, data.n_classes)
                        initial_crc, _ = target.weights_crc()
                        trace.set_attrs(initial_weights_crc=initial_crc)
                        view_status(view, "evaluating the initial weights")
                    else:  # a fresh device: reload, then replay the updates the trace logged
                        slots = {
                            TRAIN_SLOT: data_blob.encode(x_train, data.y_train, data.n_classes),
                            TEST_SLOT: data_blob.encode(x_test, data.y_test, data.n_classes),
                        }
                        uploads.expect(
                            f"the model and data, then replaying {len(resumed.updates):,} updates",
                            len(model.blob) + sum(len(b) for b in slots.values()),
                        )
                        target.restore(model.blob, slots, UpdateLog(steps=list(resumed.updates)))
                if life is not None:
                    life.enter(Stage.TRAINING, detail=f"{config.model} on {config.dataset}")
                trainer = Trainer(
                    target,
                    schedule,
                    TrainSettings(
                        budget=config.budget,
                        lr=config.lr,
                        eps=config.eps,
                        batch_size=config.batch_size,
                        eval_every=config.eval_every,
                        seed=config.seed,
                        estimator=config.estimator,
                        lr_schedule=config.lr_schedule,
                        eps_schedule=config.eps_schedule,
                    ),
                    trace,
                    n_test=len(data.y_test),
                    fresh_words=model.fresh_words,
                    fresh_numbers=model.fresh_numbers,
                    view=view,
                )
                try:
                    with _moving(life, Stage.MODEL_LOADED, "the run ended"):
                        result = trainer.run(
                            resume=resumed.steps if resumed else None,
                            last_eval=resumed.last_eval if resumed else None,
                        )
                finally:
                    view.finish()
            finally:
                target.detach()
                if owned is not None:
                    owned.close()
            trace.finish(
                "complete",
                final_accuracy=result.final_accuracy,
                forward_passes=result.forward_passes,
                steps=result.steps,
                weights_crc=result.weights_crc,
            )
            run_id = trace.run_id
        return RunResult(
            trace_path=trace_path,
            run_id=run_id,
            backend=config.backend,
            final_accuracy=result.final_accuracy,
            forward_passes=result.forward_passes,
            steps=result.steps,
            weights_crc=result.weights_crc,
            wall_s=time.perf_counter() - started,
            events=Trace.open(trace_path, run_id).event_counts(),
        )

    finally:
        view.finish()


def _connecting(config: RunConfig) -> str:
    if config.backend == "board":
        return f"connecting to {config.port} at {config.baud:,} baud"
    return {
        "emulate": "starting the emulator",
        "sil": "starting the SIL firmware",
        "qemu": "starting the firmware under QEMU",
    }.get(config.backend, f"connecting to the {config.backend} device")


class _UploadStatus:
    """Says on the view what the device is being sent and how much of it the device has
    acknowledged (the client's ``on_upload``, given back when the ``with`` block ends,
    however it ends); a phase of several blobs (a resume: model and data) counts as one."""

    def __init__(self, view: RunView, target: Target) -> None:
        self.view = view
        self.target = target
        self.what = ""
        self.size = 0
        self._base = 0  # bytes of the phase's blobs already sent
        self._blob_done = 0
        self._before = target.on_upload
        target.on_upload = self._progress

    def expect(self, what: str, size: int) -> None:
        """The next upload: ``what`` (the view says it as its first bytes go), ``size`` bytes
        or more (a phase of several blobs: all of them)."""
        self.what, self.size, self._base, self._blob_done = what, size, 0, 0

    def _progress(self, done: int, total: int) -> None:
        if done == 0 and self._blob_done:  # the phase's next blob
            self._base += self._blob_done
        self._blob_done = done
        whole = max(self.size, self._base + total)
        view_transfer(self.view, f"uploading {self.what}", self._base + done, whole)

    def __enter__(self) -> _UploadStatus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.target.on_upload = self._before


def _moving(life: Lifecycle | None, stage: Stage, detail: str = "") -> AbstractContextManager:
    """The block timed as the board's move to ``stage`` (nothing without a lifecycle)."""
    return nullcontext() if life is None else life.moving_to(stage, detail)
