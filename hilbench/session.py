"""Wiring one run: config -> data, model, backend, trainer, trace, view."""

from __future__ import annotations

import datetime as dt
import hashlib
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from hilbench import __version__, datasets
from hilbench.backends import Backend, make_backend
from hilbench.config import RunConfig
from hilbench.console import NullView, RunView
from hilbench.device.state import ModelState
from hilbench.npu import zoo
from hilbench.npu.blob import to_blob
from hilbench.npu.graph import Graph
from hilbench.protocol.frames import PROTOCOL_VERSION
from hilbench.target.client import Target
from hilbench.target.recovery import RecoveringTarget
from hilbench.trace import TraceWriter
from hilbench.train.schedule import make_schedule
from hilbench.train.trainer import TEST_SLOT, TRAIN_SLOT, Trainer, TrainSettings
from hilbench.zo.loss import LossTables
from hilbench.zo.perturb import words_needed

CALIBRATION_ITEMS = 256


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


@dataclass(frozen=True)
class PreparedModel:
    graph: Graph
    blob: bytes
    input_scale: float
    input_zero_point: int


def prepare_model(config: RunConfig, data: datasets.Dataset) -> PreparedModel:
    """Build and quantize the model, and pack it with its loss tables for the device."""
    graph = zoo.build(config.model, seed=config.seed, calibration=data.x_train[:CALIBRATION_ITEMS])
    out = graph.tensors[graph.output]
    tables = LossTables.for_scale(float(out.qparams.scale[0]))
    blob = to_blob(graph, {"LOSS": tables.to_bytes()})
    inp = graph.tensors[graph.input].qparams
    return PreparedModel(graph, blob, float(inp.scale[0]), int(inp.zero_point[0]))


def default_trace_path(config: RunConfig) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("traces") / f"{stamp}-{config.model}-{config.dataset}-s{config.seed}.h5"


def git_revision() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=2,
            cwd=Path(__file__).parent,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def run(
    config: RunConfig,
    *,
    view: RunView | None = None,
    target: Target | None = None,
    backend: Backend | None = None,
) -> RunResult:
    """Train once as ``config`` says; on ``target`` if given, else on a backend opened here."""
    started = time.perf_counter()
    view = view or NullView()
    data = datasets.load(config.dataset)
    model = prepare_model(config, data)
    schedule = make_schedule(config.scheduler)
    trace_path = Path(config.trace) if config.trace else default_trace_path(config)
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
    }
    owned = None
    with TraceWriter.create(
        trace_path, run_attrs, config.to_dict(), model_blob=model.blob
    ) as trace:
        if target is None:
            owned = backend or make_backend(config)
            target = owned.open()
        trainer = None
        target = RecoveringTarget(
            target,
            on_event=lambda kind, detail: trace.append_event(
                trainer.step if trainer is not None else 0, kind, detail
            ),
            shadow=ModelState.from_blob,  # the twin's semantics: what any device must compute
        )
        try:
            info = target.info or target.hello()
            trace.set_attrs(device_id=info.device_id, firmware=info.firmware)
            target.load_model(model.blob)
            x_train = datasets.quantize_inputs(
                data.x_train, model.input_scale, model.input_zero_point
            )
            x_test = datasets.quantize_inputs(
                data.x_test, model.input_scale, model.input_zero_point
            )
            target.load_data(TRAIN_SLOT, x_train, data.y_train, data.n_classes)
            target.load_data(TEST_SLOT, x_test, data.y_test, data.n_classes)
            initial_crc, _ = target.weights_crc()
            trace.set_attrs(initial_weights_crc=initial_crc)
            n_weights = [model.graph.tensors[n].data.size for n in model.graph.trainable()]
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
                ),
                trace,
                n_test=len(data.y_test),
                fresh_words_per_seed=sum(words_needed(n) for n in n_weights),
                view=view,
            )
            view.start(
                f"hilbench · {config.model} on {config.dataset} · {schedule.name} · "
                f"{config.backend} · {info.device_id}"
            )
            try:
                result = trainer.run()
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
    )
