"""One run, in named steps: plan it, connect, open the trace, greet the device, upload the
model and data, train, finish the trace.

:func:`run` trains once as a configuration says; :func:`resume` continues an interrupted run
of a trace in the same file. Model preparation lives in :mod:`hilbench.train.prepare`, the
backends in :mod:`hilbench.backend`; what the device and the backend announce (incidents,
uploads, a firmware load, command timings) reaches the view and the trace as events.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import threading
import time
import warnings
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from hilbench import __version__, version
from hilbench import data as datasets
from hilbench.backend.base import Backend, Connection
from hilbench.backend.emulate import EmulatorBackend
from hilbench.backend.registry import make_backend
from hilbench.board.lifecycle import Lifecycle, Stage
from hilbench.client import device_info, device_log
from hilbench.client.device_client import DeviceClient
from hilbench.client.events import DeviceLine, Incident, Transfer
from hilbench.client.recovery import RecoveringTarget, UpdateLog
from hilbench.config import RunConfig
from hilbench.console import (
    NullView,
    RunView,
    view_early,
    view_event,
    view_status,
    view_title,
    view_transfer,
)
from hilbench.device import BANNER_REASONS, DeviceTwin, FrameEndpoint, ModelState
from hilbench.errors import HilbenchError
from hilbench.link.memory import MemoryPort
from hilbench.npu import cost
from hilbench.npu.ops import backend as npu_backend
from hilbench.protocol import data_blob
from hilbench.protocol.frames import PROTOCOL_VERSION
from hilbench.protocol.spec import CAP_DEVICE_INFO
from hilbench.trace import LoggedUpdate, ResumePoint, Trace, TraceWriter, resume_point
from hilbench.trace.reader import RunInfo, run_infos
from hilbench.trace.run_setup import free_space_problem
from hilbench.trace.writer import TraceWarning
from hilbench.train.prepare import PreparedModel, load_data, prepare_model
from hilbench.train.schedule import Scheduler, make_schedule
from hilbench.train.trainer import TEST_SLOT, TRAIN_SLOT, LoggedStep, Trainer, TrainSettings

__all__ = [
    "RunResult",
    "direct_target",
    "load_data",
    "prepare_model",
    "resume",
    "run",
    "unfinished_run",
]


def direct_target(twin: DeviceTwin | None = None) -> DeviceClient:
    """A connected DeviceClient on an in-process twin, for studies: no pty, no thread, the
    same bytes and device code as the emulator backend (``EmulatorBackend(link="memory")``'s
    link)."""
    twin = twin or DeviceTwin(**BANNER_REASONS)
    port = MemoryPort(FrameEndpoint(twin).feed, name="in-process")
    target = DeviceClient(
        port, name="emulator (in-process)", min_rto=EmulatorBackend.MEMORY_MIN_RTO_S
    )
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
    stop_reason: str = "budget"  # hilbench.train.stopping: the budget spent, or a limit/rule

    def __repr__(self) -> str:
        return (
            f"<RunResult run {self.run_id} of {self.trace_path}: accuracy "
            f"{self.final_accuracy:.2%}, {self.forward_passes:,} forward passes, "
            f"{self.steps:,} steps>"
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
    # imported here: the compiled NPU engine, loaded only when the emulator computes with it
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
    target: DeviceClient | Connection | None = None,
    backend: Backend | None = None,
    schedule: Scheduler | None = None,
) -> RunResult:
    """Train once as ``config`` says; on ``target`` (a client, or an opened backend's
    connection) if given, else on a backend opened here."""
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
    limits: dict = dataclasses.field(default_factory=dict)  # resumed_* attrs to record


def resume(
    trace_path: Path,
    *,
    view: RunView | None = None,
    backend: Backend | None = None,
    target: DeviceClient | Connection | None = None,
    run: str | None = None,
    limits: dict | None = None,
    overrides: Mapping[str, object] | None = None,
) -> RunResult:
    """Continue an interrupted run of ``trace_path`` in the same file: ``run`` (an id such as
    '0002'), by default the last run of the file that did not complete. ``limits`` may set a
    new ``budget``, ``time_limit_s`` or ``until`` (see :func:`resume_limits`); ``overrides``
    replace other stored settings (the port of the board it goes on).

    The device is reloaded and given the logged updates; the host replays its seeds and
    scheduler up to the last step on disk, so the run ends as an uninterrupted one would.
    """
    point = resume_point(Path(trace_path), run)  # the one reader of what a resume needs
    config = _stored_config(point, Path(trace_path))
    if backend is not None:
        config = config.replace(backend=backend.kind, **dict(overrides or {}))
    elif overrides:
        config = config.replace(**{k: v for k, v in overrides.items() if k != "port"})
    config, changed = _with_limits(config, limits or {})
    if config.hybrid != "none":  # the head's steps are not replayed onto a reloaded device
        raise HilbenchError(
            f"run {point.run_id} of {trace_path} is a hybrid run (--hybrid {config.hybrid}), "
            "which cannot be resumed yet",
            "start the run again",
        )
    _check_budget(point, config)
    resumed = _Resumed(
        point.model_blob,
        [_logged_step(u) for u in point.updates],
        [(u.seeds, u.coeffs) for u in point.updates],
        point.run_id,
        point.last_eval,
        changed,
    )
    with threadpool_limits(limits=1, user_api="blas"):
        return _run(
            config, view=view, target=target, backend=backend, schedule=None, resumed=resumed
        )


#: The settings a resume may change: the RunConfig field, how a message says its value.
RESUME_LIMITS = ("budget", "time_limit_s", "until")


def resume_limits(trace_path: Path, run: str | None, limits: dict) -> list[str]:
    """What a resume with ``limits`` changes, one sentence each (``budget 60,000 (was
    30,000)``); [] when nothing changes. Raises as the resume would on a bad value."""
    point = resume_point(Path(trace_path), run)
    config = _stored_config(point, Path(trace_path))
    new, _ = _with_limits(config, limits)
    _check_budget(point, new)
    said = []
    for key in RESUME_LIMITS:
        old_value, new_value = getattr(config, key), getattr(new, key)
        if old_value != new_value:
            was = f"{old_value:,}" if key == "budget" else _limit_text(key, old_value)
            said.append(f"{_limit_text(key, new_value)} (was {was})")
    return said


def _check_budget(point: ResumePoint, config: RunConfig) -> None:
    """A resume's budget covers the forward passes its run already spent."""
    spent = point.updates[-1].forward_passes if point.updates else 0
    if config.budget < spent:
        raise HilbenchError(
            f"budget {config.budget:,} is below the {spent:,} forward passes run "
            f"{point.run_id} already spent",
            f"give --budget above {spent:,}, or leave it out",
        )


def _limit_text(key: str, value: object) -> str:
    if key == "budget":
        return f"budget {value:,} forward passes"
    if key == "time_limit_s":
        from hilbench.config import format_duration

        return f"time limit {format_duration(float(value))}" if value else "no time limit"
    return f"until {value}" if value else "no stopping rule"


def _with_limits(config: RunConfig, limits: dict) -> tuple[RunConfig, dict]:
    """``config`` with a resume's new limits, and the resumed_* attributes to record."""
    unknown = sorted(set(limits) - set(RESUME_LIMITS))
    if unknown:
        raise HilbenchError(
            f"a resume cannot change {', '.join(unknown)}", f"change only {RESUME_LIMITS}"
        )
    changes = {k: v for k, v in limits.items() if v is not None}
    if not changes:
        return config, {}
    new = config.replace(**changes)  # RunConfig checks the values
    return new, {f"resumed_{k}": getattr(new, k) for k in changes}


def _stored_config_of(stored: Mapping[str, object]) -> RunConfig:
    """A RunConfig from a trace's stored config (keys this version does not know dropped)."""
    known = {f.name for f in dataclasses.fields(RunConfig)}
    return RunConfig(**{k: v for k, v in stored.items() if k in known and k != "trace"})


def head_data(trace: Trace):
    """A hybrid run's training items as the run uploaded them (rebuilt from its stored
    config), which the replay of its HEAD_GRAD steps reads; None for a ZO-only run."""
    from hilbench.trace.replay import is_hybrid

    if not is_hybrid(trace):
        return None
    config = _stored_config_of(trace.config)
    data = load_data(config)
    model = prepare_model(config, data)
    x = datasets.quantize_inputs(data.x_train, model.input_scale, model.input_zero_point)
    return x, data.y_train


def _stored_config(point: ResumePoint, trace_path: Path) -> RunConfig:
    """The run's configuration as its trace stored it, writing to the same file (with the
    limits an earlier resume set, ``resumed_*`` attributes)."""
    stored = dict(point.config)
    for key in RESUME_LIMITS:
        if key in point.resumed:
            value = point.resumed[key]  # numpy scalars from HDF5: plain values
            stored[key] = {"budget": int, "time_limit_s": float}.get(key, str)(value)
    stored["trace"] = trace_path
    known = {f.name for f in dataclasses.fields(RunConfig)}
    return RunConfig(**{k: v for k, v in stored.items() if k in known})


def _logged_step(u: LoggedUpdate) -> LoggedStep:
    """A step read back by resume_point as the trainer replays it."""
    return LoggedStep(
        q=u.q,
        batch_seed=u.batch_seed,
        seeds=u.seeds,
        loss=u.loss,
        forward_passes=u.forward_passes,
        lr=u.lr,
        eps=u.eps,
        grads=u.grads,
    )


# ---------------------------------------------------------------- the run's steps


def _run(
    config: RunConfig,
    *,
    view: RunView | None,
    target: DeviceClient | Connection | None,
    backend: Backend | None,
    schedule: Scheduler | None,
    resumed: _Resumed | None = None,
) -> RunResult:
    started = time.perf_counter()
    npu_backend.check_env()  # a user's setting: say so now, not as a device failure later
    view = view or NullView()
    with said_if_slow(view, preparing(config)):
        plan = _plan(config, schedule, resumed)
    view.start(f"hilbench · {plan.what}{plan.npu}")
    try:  # the view is finished however the run ends (a panel must not stay half drawn)
        # connect first: a wrong port leaves no failed run in the trace
        device = _RunDevice(config, view)
        try:
            device.connect(target, backend)
            writer = _open_trace(plan, device.where, resumed)
        except BaseException:
            device.release()
            raise
        with writer as trace:
            device.trace_into(trace)
            try:
                _greet(plan, device, trace, view, resumed)
                _upload(plan, device, trace, view, resumed)
                result = _train(plan, device, trace, view, resumed)
            finally:
                device.release()
            if result.stop_reason != "budget":  # a limit or rule: said as an event too
                trace.event("stop", result.stop_reason)
                view_status(view, f"stopped: {result.stop_reason}")
            trace.finish(
                "complete",
                final_accuracy=result.final_accuracy,
                forward_passes=result.forward_passes,
                steps=result.steps,
                weights_crc=result.weights_crc,
                stop_reason=result.stop_reason,
                **({} if result.head_crc is None else {"head_crc": result.head_crc}),
            )
            run_id = trace.run_id
        return RunResult(
            trace_path=plan.trace_path,
            run_id=run_id,
            backend=config.backend,
            final_accuracy=result.final_accuracy,
            forward_passes=result.forward_passes,
            steps=result.steps,
            weights_crc=result.weights_crc,
            wall_s=time.perf_counter() - started,
            events=Trace.open(plan.trace_path, run_id).event_counts(),
            stop_reason=result.stop_reason,
        )
    finally:
        view.finish()


@dataclass(frozen=True)
class _Plan:
    """What a run will do, known before any device is reached."""

    config: RunConfig
    data: datasets.Dataset
    model: PreparedModel
    schedule: Scheduler
    trace_path: Path
    run_attrs: dict
    npu_name: str
    npu_isa: str

    @property
    def what(self) -> str:
        c = self.config
        return f"{c.model} on {c.dataset} · {self.schedule.name} · {c.backend}"

    @property
    def npu(self) -> str:
        if not self.npu_name:
            return ""
        return f" · NPU {self.npu_name}" + (f" {self.npu_isa}" if self.npu_isa else "")


#: Seconds of silence before the screen says what the run is preparing (issue 26, item 14).
SLOW_START_S = 2.0


def preparing(config: RunConfig) -> str:
    """What ``_plan`` is doing, for a user who would otherwise see a blank screen."""
    from hilbench.config import VISION_MODELS
    from hilbench.data import cache

    what = f"preparing {config.model} on {config.dataset}"
    if config.model in VISION_MODELS or config.init == "pretrained":
        what += (
            ": loading the data and pre-training the float model (done once, then cached "
            f"in {cache.root()})"
        )
    return what + "..."


@contextlib.contextmanager
def said_if_slow(view: object, text: str, after_s: float = SLOW_START_S):
    """Say ``text`` on ``view`` (``view.early``) if the block runs longer than ``after_s``."""
    timer = threading.Timer(after_s, view_early, args=(view, text))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _plan(config: RunConfig, schedule: Scheduler | None, resumed: _Resumed | None) -> _Plan:
    """Step 1: the data, the model blob, the schedule, the trace file and its attributes."""
    data = load_data(config)
    model = prepare_model(config, data)
    if resumed is not None and resumed.model_blob != model.blob:
        raise HilbenchError(
            "this hilbench builds a different model blob than the one in the trace",
            "resume with the hilbench version that wrote the trace",
        )
    npu_name, npu_isa = npu_in_use(config)
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
    return _Plan(
        config=config,
        data=data,
        model=model,
        schedule=schedule or make_schedule(config.scheduler),
        trace_path=Path(config.trace) if config.trace else default_trace_path(config),
        run_attrs=run_attrs,
        npu_name=npu_name,
        npu_isa=npu_isa,
    )


class _RunDevice:
    """Step 2: the run's device. Opened here (or the caller's client or connection), wrapped
    so that a reset costs time, never correctness; its incidents go to the view and, once it
    exists, to the trace (those from before are kept and written then), and a board's
    firmware load to the view. ``release()`` lets go of all of it (the caller's client
    outlives the run; a backend opened here is closed)."""

    def __init__(self, config: RunConfig, view: RunView) -> None:
        self.config = config
        self.view = view
        self.owned: Backend | None = None
        self.connection: Connection | None = None
        self.client: DeviceClient | None = None
        self.target: RecoveringTarget | None = None
        self.arena_bytes = 0  # the device's arena (DEVICE_INFO), 0: not told
        self._trace: TraceWriter | None = None
        self._early: list[tuple[str, str]] = []
        self._console_noted = False  # the port's bytes before its first frame are recorded

    def connect(self, target: DeviceClient | Connection | None, backend: Backend | None) -> None:
        if isinstance(target, Connection):  # an opened backend's: where, and a lifecycle
            self.connection, target = target, target.client
        elif target is None:
            self.owned = backend or make_backend(self.config)
            view_status(self.view, _connecting(self.config))
            with self.owned.events.load.subscribed(self._on_load):
                self.connection = self.owned.open()
            target = self.connection.client
        self.client = target
        target.events.incident.subscribe(self._on_incident)
        for line in target.device_log.claim():  # said before this run listened (HELLO)
            self._early.append(("device", str(line)))
        target.events.device.subscribe(self._on_device_line)
        self.target = RecoveringTarget(
            target,
            # The twin's semantics are what any device must compute: check a board or QEMU
            # against them. The emulator is the twin itself, so there it would check nothing.
            shadow=ModelState.from_blob if self.config.backend != "emulate" else None,
        )

    @property
    def where(self) -> dict[str, str]:
        """Where it runs: a farm board's place, exporter host, probe id, firmware hash."""
        return dict(self.connection.location) if self.connection is not None else {}

    @property
    def lifecycle(self) -> Lifecycle | None:
        """A board's stages, timed and logged; None for the other backends."""
        return self.connection.lifecycle if self.connection is not None else None

    def trace_into(self, trace: TraceWriter) -> None:
        self._note_console()
        for kind, detail in self._early:
            trace.event(kind, detail)
        self._trace = trace

    def _on_device_line(self, line: DeviceLine) -> None:
        """A LOG line of the device: an event ``device`` (docs/trace-format.md)."""
        self._note_console()
        self.client.device_log.claim()  # taken by this run
        self._record("device", str(line))

    def _note_console(self) -> None:
        """Once: the bytes the port sent before its first frame (a board that printed something
        else first), an event ``console``; known once a frame delimiter came (a line, a
        resync, the trace's start after HELLO)."""
        if self._console_noted or self.client is None:
            return
        raw = self.client.device_log.raw_before_hello
        if raw:
            self._console_noted = True
            self._record("console", device_log.console_detail(raw))

    def _record(self, kind: str, detail: str) -> None:
        if self._trace is None:
            self._early.append((kind, detail))
        else:
            self._trace.event(kind, detail)

    def _on_incident(self, incident: Incident) -> None:
        self._note_console()  # a resync: junk before the first frame, most likely
        kind, detail = incident
        view_event(self.view, kind, detail)
        if self._trace is None:
            self._early.append((kind, detail))
        else:  # stamped with the step in progress (after a resume: the next step on disk)
            self._trace.event(kind, detail)

    def _on_load(self, load: Transfer) -> None:
        view_transfer(self.view, "loading the firmware", load.done, load.total)

    def release(self) -> None:
        if self.client is not None:
            self.client.settle()  # retries still unsettled are reported while traced
            self.client.events.incident.unsubscribe(self._on_incident)
            self.client.events.device.unsubscribe(self._on_device_line)
        if self.owned is not None:
            self.owned.close()


def _open_trace(plan: _Plan, where: dict[str, str], resumed: _Resumed | None) -> TraceWriter:
    """Step 3: a new run in the trace file, or the resumed run opened again."""
    if resumed is None:
        problem = free_space_problem(plan.trace_path, plan.config.budget)
        if problem:  # said before the hours of a run, not at the full disk
            warnings.warn(problem, TraceWarning, stacklevel=2)
        return TraceWriter.create(
            plan.trace_path,
            {**plan.run_attrs, **where},
            plan.config.to_dict(),
            model_blob=plan.model.blob,
        )
    writer = TraceWriter.resume(plan.trace_path, resumed.run_id or None)
    if where or resumed.limits:
        writer.set_attrs(**where, **resumed.limits)
    return writer


def _greet(
    plan: _Plan, device: _RunDevice, trace: TraceWriter, view: RunView, resumed: _Resumed | None
) -> None:
    """Step 4: the device's identity into the trace and onto the view."""
    target = device.target
    assert target is not None
    info = target.info or target.hello()
    trace.set_attrs(device_id=info.device_id, firmware=info.firmware)
    what_set = _device_info(device, trace)
    if resumed is not None:  # the attributes of this hilbench and host
        trace.set_attrs(npu_backend=plan.npu_name, npu_isa=plan.npu_isa)
    view_title(view, f"hilbench · {plan.what} · {info.device_id}{plan.npu}")
    view_status(
        view,
        f"connected to {info.device_id} (firmware {info.firmware}, "
        f"protocol {info.protocol_version}){what_set}",
    )


def _device_info(device: _RunDevice, trace: TraceWriter) -> str:
    """What the firmware set (DEVICE_INFO, when it has the command) into the trace's
    ``device_info_json``; its summary for the status line ("" without one)."""
    client = device.client
    if client is None or client.info is None:
        return ""
    if not client.info.capabilities & CAP_DEVICE_INFO:
        return ""
    answer = client.device_info()
    device.arena_bytes = answer.arena_bytes
    trace.set_attrs(device_info_json=device_info.to_json(answer))
    return f"; {device_info.summary(answer)}"


def _upload(
    plan: _Plan, device: _RunDevice, trace: TraceWriter, view: RunView, resumed: _Resumed | None
) -> None:
    """Step 5: model and data to the device (a resume: reloaded, the logged updates
    replayed), the upload's progress on the view; a board moves to "model loaded"."""
    target, data, model = device.target, plan.data, plan.model
    assert target is not None and device.client is not None
    x_train = datasets.quantize_inputs(data.x_train, model.input_scale, model.input_zero_point)
    x_test = datasets.quantize_inputs(data.x_test, model.input_scale, model.input_zero_point)
    with (
        _UploadStatus(view, device.client) as uploads,
        _moving(device.lifecycle, Stage.MODEL_LOADED),
    ):
        if resumed is None:
            uploads.expect("the model", len(model.blob))
            target.load_model(model.blob)
            uploads.expect(f"{len(data.y_train):,} training items", x_train.nbytes)
            target.load_data(TRAIN_SLOT, x_train, data.y_train, data.n_classes)
            uploads.expect(f"{len(data.y_test):,} test items", x_test.nbytes)
            target.load_data(TEST_SLOT, x_test, data.y_test, data.n_classes)
            initial_crc, _ = target.weights_crc()
            trace.set_attrs(initial_weights_crc=initial_crc)
            cache = _prefix_cache_line(model.blob, device.arena_bytes, x_train, x_test)
            view_status(view, "evaluating the initial weights" + cache)
            return
        slots = {  # a fresh device: reload, then replay the updates the trace logged
            TRAIN_SLOT: data_blob.encode(x_train, data.y_train, data.n_classes),
            TEST_SLOT: data_blob.encode(x_test, data.y_test, data.n_classes),
        }
        uploads.expect(
            f"the model and data, then replaying {len(resumed.updates):,} updates",
            len(model.blob) + sum(len(b) for b in slots.values()),
        )
        target.restore(model.blob, slots, UpdateLog(steps=list(resumed.updates)))


def _cache_parts(blob: bytes, arena_bytes: int, x_train, x_test) -> list:
    """The parts of the firmware's prefix cache for this run (hilbench.device.plan.
    prefix_cache on the free bytes the model and both slots leave in ``arena_bytes``; the test
    slot is read first, by the first EVAL, then the training slot by the first PROBE); [] with
    no frozen prefix."""
    from hilbench.device import plan as device_plan
    from hilbench.device.store import Arena
    from hilbench.npu.blob import from_blob
    from hilbench.zo import zocf

    graph, sections = from_blob(blob)
    cfg = zocf.ZoConfig.from_sections(sections)
    trained = zocf.resolve(cfg, graph)
    arena = Arena(arena_bytes)
    arena.start_model(len(blob))
    arena.finish_model(device_plan.act_bytes(graph), zocf.zo_work_bytes(cfg, trained))
    for slot, x in ((TRAIN_SLOT, x_train), (TEST_SLOT, x_test)):
        arena.start_slot(slot, data_blob.HEADER_BYTES + x.nbytes + len(x))  # + labels
    return device_plan.prefix_cache(
        graph, trained, arena.free(), [(TEST_SLOT, len(x_test)), (TRAIN_SLOT, len(x_train))]
    )


def _prefix_cache_line(blob: bytes, arena_bytes: int, x_train, x_test) -> str:
    """What the firmware's prefix cache keeps in the device's free arena (:func:`_cache_parts`),
    for the status line; "" without a frozen prefix or an arena size."""
    if not arena_bytes:
        return ""
    try:
        parts = _cache_parts(blob, arena_bytes, x_train, x_test)
    except (HilbenchError, ValueError):
        return ""
    if not parts:
        return ""
    kept = ", ".join(
        f"{p.cap:,} of {p.n_items:,} {'test' if p.slot == TEST_SLOT else 'training'} items"
        for p in parts
    )
    total = sum(p.bytes for p in parts)
    return (
        f" (the device keeps the activations at the frozen prefix's cut, {parts[0].entry:,} B "
        f"each, of {kept}: {total / 1024:,.1f} KiB of its free arena)"
    )


def _train(
    plan: _Plan, device: _RunDevice, trace: TraceWriter, view: RunView, resumed: _Resumed | None
):
    """Step 6: the training loop until the budget is spent (a board: "training", and back to
    "model loaded" when it ends); the view is finished however it ends."""
    config, life = plan.config, device.lifecycle
    assert device.target is not None
    if life is not None:
        life.enter(Stage.TRAINING, detail=f"{config.model} on {config.dataset}")
    trainer = Trainer(
        device.target,
        plan.schedule,
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
            time_limit_s=config.time_limit_s,
            until=config.until,
            aggregator=config.aggregator,
            timing_model=cost.timing_model(config.timing_model).name,
        ),
        trace,
        n_test=len(plan.data.y_test),
        fresh_words=plan.model.fresh_words,
        fresh_numbers=plan.model.fresh_numbers,
        view=view,
        gram=_gram_of(plan.model) if config.aggregator != "mean" else None,
        head=_head_of(plan, view),
    )
    try:
        with _moving(life, Stage.MODEL_LOADED, "the run ended"):
            return trainer.run(
                resume=resumed.steps if resumed else None,
                last_eval=resumed.last_eval if resumed else None,
            )
    finally:
        view.finish()


def _head_of(plan: _Plan, view: RunView):
    """The hybrid's head (None: ZO only); its accumulators' bytes said on the view."""
    config = plan.config
    if config.hybrid != "last":
        return None
    from hilbench.npu.blob import from_blob
    from hilbench.train.hybrid import HeadSpec

    g, _ = from_blob(plan.model.blob)  # the scales as the blob carries them (replay's too)
    spec = HeadSpec.of(g, config.head_lr or config.lr)
    k = int(g.tensors[g.ops[-1].inputs[1]].shape[1])
    view_status(
        view,
        f"hybrid: {g.ops[-1].inputs[1]} trains by HEAD_GRAD, "
        f"{spec.accumulator_bytes(k):,} B of int32 accumulators",
    )
    return spec


def _gram_of(model):
    """The Gram matrix of a step's directions from its seeds (the aligned aggregator)."""
    from hilbench.zo.aggregate import Directions

    return Directions(model.zo, model.trained).gram


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
    acknowledged (a subscriber of the client's ``upload`` event while the ``with`` block
    runs, however it ends); a phase of several blobs (a resume: model and data) counts as
    one."""

    def __init__(self, view: RunView, target: DeviceClient) -> None:
        self.view = view
        self.target = target
        self.what = ""
        self.size = 0
        self._base = 0  # bytes of the phase's blobs already sent
        self._blob_done = 0
        target.events.upload.subscribe(self._progress)

    def expect(self, what: str, size: int) -> None:
        """The next upload: ``what`` (the view says it as its first bytes go), ``size`` bytes
        or more (a phase of several blobs: all of them)."""
        self.what, self.size, self._base, self._blob_done = what, size, 0, 0

    def _progress(self, upload: Transfer) -> None:
        done, total = upload
        if done == 0 and self._blob_done:  # the phase's next blob
            self._base += self._blob_done
        self._blob_done = done
        whole = max(self.size, self._base + total)
        view_transfer(self.view, f"uploading {self.what}", self._base + done, whole)

    def __enter__(self) -> _UploadStatus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.target.events.upload.unsubscribe(self._progress)


def _moving(life: Lifecycle | None, stage: Stage, detail: str = "") -> AbstractContextManager:
    """The block timed as the board's move to ``stage`` (nothing without a lifecycle)."""
    return nullcontext() if life is None else life.moving_to(stage, detail)
