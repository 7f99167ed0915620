"""What a resumed run continues from, read from its trace: the public API for ``--resume``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hilbench.errors import TraceError
from hilbench.trace.reader import Trace, run_infos


@dataclass(frozen=True)
class LoggedUpdate:
    """One whole step as its trace recorded it: what a resumed run gives the device again
    (seeds, coeffs) and what its host replays (the rest)."""

    step: int
    q: int
    batch_seed: int
    seeds: np.ndarray  # u32, one per sample
    coeffs: np.ndarray  # i32: the quantized update the device applied
    grads: np.ndarray  # f64: the projected gradients
    loss: float  # the step's mean loss (nats)
    forward_passes: int  # cumulative, after this step
    lr: float
    eps: int


@dataclass(frozen=True)
class ResumePoint:
    """An unfinished run read back from its trace (whole steps only)."""

    path: Path
    run_id: str
    status: str  # running (writer gone), interrupted or failed
    model_blob: bytes
    config: dict[str, Any]  # the stored run config
    updates: list[LoggedUpdate]
    last_eval: tuple[int, float, float] | None  # last test eval: (forward passes, acc, loss)
    #: settings an earlier resume changed (its ``resumed_<name>`` run attributes, by name)
    resumed: dict[str, Any] = field(default_factory=dict)

    @property
    def next_step(self) -> int:
        """The step number to continue with."""
        return self.updates[-1].step + 1 if self.updates else 0


def logged_updates(trace: Trace) -> list[LoggedUpdate]:
    """Every whole step of ``trace`` with its samples, in order."""
    samples = trace.samples
    seeds = samples["seed"].astype(np.uint32)
    coeffs = samples["coeff"].astype(np.int32)
    grads = samples["grad"].astype(np.float64)
    out = []
    for row in trace.steps:
        start, q = int(row["sample_start"]), int(row["q"])
        out.append(
            LoggedUpdate(
                step=int(row["step"]),
                q=q,
                batch_seed=int(row["batch_seed"]),
                seeds=seeds[start : start + q],
                coeffs=coeffs[start : start + q],
                grads=grads[start : start + q],
                loss=float(row["loss"]),
                forward_passes=int(row["forward_passes"]),
                lr=float(row["lr"]),
                eps=int(row["eps"]),
            )
        )
    return out


def last_test_eval(trace: Trace) -> tuple[int, float, float] | None:
    """(forward passes, accuracy, loss) of the run's last test evaluation, None if none."""
    tests = trace.evals[trace.evals["split"] == "test"]
    if not len(tests):
        return None
    last = tests[-1]
    return int(last["forward_passes"]), float(last["accuracy"]), float(last["loss"])


def damaged_steps(trace: Trace) -> str | None:
    """What makes the run's whole steps unfit to continue from, None if nothing: a resumed
    run replays them in order on the device, so they must be steps 0, 1, 2... with forward
    passes that only grow and at least one sample each."""
    steps = trace.steps
    if not len(steps):
        return None
    numbers = steps["step"].astype(np.int64)
    gaps = np.flatnonzero(numbers != np.arange(len(numbers)))
    if len(gaps):
        i = int(gaps[0])
        return f"row {i} holds step {int(numbers[i])}, not {i}"
    fp = steps["forward_passes"].astype(np.int64)
    back = np.flatnonzero(np.diff(fp) <= 0)
    if len(back) or fp[0] <= 0:
        i = int(back[0]) + 1 if len(back) else 0
        return f"step {i} has {int(fp[i]):,} forward passes, no more than the step before"
    empty = np.flatnonzero(steps["q"] <= 0)
    if len(empty):
        return f"step {int(empty[0])} has q = {int(steps['q'][empty[0]])}"
    return None


def resume_point(path: str | Path, run: str | int | None = None) -> ResumePoint:
    """Run ``run`` of ``path`` (default: the last run that did not complete) as a resumed run
    needs it; a TraceError if there is nothing to resume."""
    path = Path(path)
    if run is None:
        infos = run_infos(path)
        unfinished = [i for i in infos if i.resumable]
        if not unfinished:
            statuses = ", ".join(f"{i.run_id} {i.status}" for i in infos) or "no runs"
            raise TraceError(
                f"every run of {path} finished ({statuses}): there is nothing to resume",
                "start a new run without --resume",
            )
        run = unfinished[-1].run_id
    trace = Trace.open(path, run)
    if not trace.resume_state().resumable:  # interrupted, SIGTERMed and failed runs resume
        raise TraceError(
            f"run {trace.run_id} of {path} is {trace.status}: there is nothing to resume",
            "start a new run without --resume",
        )
    if trace.model_blob is None:
        raise TraceError(f"{path} holds no model blob", "it cannot be resumed")
    damage = damaged_steps(trace)
    if damage:
        raise TraceError(
            f"run {trace.run_id} of {path} cannot be resumed: its steps are damaged ({damage})",
            "start a new run without --resume (the trace keeps this run as it is)",
        )
    return ResumePoint(
        path=path,
        run_id=trace.run_id,
        status=trace.status,
        model_blob=trace.model_blob,
        config=dict(trace.config),
        updates=logged_updates(trace),
        last_eval=last_test_eval(trace),
        resumed={
            k[len("resumed_") :]: v for k, v in trace.attrs.items() if k.startswith("resumed_")
        },
    )
