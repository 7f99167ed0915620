"""Replay: rebuild a run's final weights from its initial model and its logged updates.

The trace holds the exact model blob sent to the device (with its ZOCF section: which
tensors train, perturbation, master format, rounding...) and, per step, the seeds and the
quantized coefficients of the APPLY. Replaying every APPLY on the host with the shared ZO
math (``hilbench.zo`` through the device state model) must give the weights the device
reported (WEIGHTS_CRC) bit for bit: design invariant 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hilbench.config import rate_schedule
from hilbench.device import ModelState
from hilbench.errors import TraceError
from hilbench.trace.reader import Trace
from hilbench.zo import head
from hilbench.zo.rng import batch_indices

#: (training inputs int8 (N, *input shape), labels) of a hybrid run: its HEAD_GRAD steps read
#: them, so its replay needs them (hilbench replay rebuilds them from the run's config)
HeadData = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class ReplayResult:
    path: Path
    run_id: str
    steps: int  # APPLYs replayed
    weights_crc: int  # CRC-32 of the rebuilt trained tensors, as WEIGHTS_CRC computes it
    recorded_crc: int | None  # what the device reported at the end of the run (None: unknown)
    head_crc: int | None = None  # a hybrid run: the rebuilt head's CRC (zo/head.py)
    recorded_head_crc: int | None = None  # and the device's last HEAD_GRAD answer's

    @property
    def matches(self) -> bool:
        head_ok = self.head_crc == self.recorded_head_crc
        return self.recorded_crc is not None and self.weights_crc == self.recorded_crc and head_ok

    def message(self) -> str:
        """One line saying what replay found."""
        where = f"{self.path} run {self.run_id}"
        if self.recorded_crc is None:
            return (
                f"replayed {self.steps} steps of {where}: weights CRC 0x{self.weights_crc:08x}; "
                "the trace records no final CRC to check it against"
            )
        hc = "" if self.head_crc is None else f" and head CRC 0x{self.head_crc:08x}"
        if self.matches:
            return (
                f"replay OK: {self.steps} steps of {where} rebuild weights CRC "
                f"0x{self.weights_crc:08x}{hc}, as the device reported"
            )
        if self.head_crc is not None and self.head_crc != self.recorded_head_crc:
            rec = self.recorded_head_crc
            return (
                f"replay MISMATCH: {self.steps} steps of {where} rebuild head CRC "
                f"0x{self.head_crc:08x} but the device reported "
                + ("none" if rec is None else f"0x{rec:08x}")
            )
        return (
            f"replay MISMATCH: {self.steps} steps of {where} rebuild weights CRC "
            f"0x{self.weights_crc:08x} but the device reported 0x{self.recorded_crc:08x}"
        )


def _initial_state(trace: Trace) -> ModelState:
    if trace.model_blob is None:
        raise TraceError(
            f"{trace.path} run {trace.run_id} holds no model blob, so it cannot be replayed",
            "record runs with hilbench >= 0.1, which stores the model sent to the device",
        )
    try:
        return ModelState.from_blob(trace.model_blob)
    except (ValueError, KeyError, IndexError) as exc:
        raise TraceError(
            f"the model blob in {trace.path} run {trace.run_id} cannot be loaded ({exc})",
            "re-copy the trace from its source, or record the run again",
        ) from None


def is_hybrid(trace: Trace) -> bool:
    """A run whose last layer trained by HEAD_GRAD (``--hybrid last``)."""
    return trace.config.get("hybrid", "none") == "last"


def _head_steps(trace: Trace, state: ModelState, data: HeadData):
    """Per step, the HEAD_GRAD the trainer sent before its APPLY (hilbench/train/trainer.py):
    PROBE's batch, round seed = batch seed, rates from the blob's scales and the rate schedule
    at the fraction of the budget spent before the step."""
    cfg = trace.config
    x, y = data
    s_in, s_w = head.scales(state.graph)
    lr_at = rate_schedule(cfg.get("lr_schedule", "constant"))
    base = float(cfg.get("head_lr") or 0.0) or float(cfg["lr"])
    budget, batch = int(cfg["budget"]), int(cfg["batch_size"])
    shape = state.graph.tensors[state.graph.input].shape
    done = 0
    for row in trace.steps:
        seed = int(row["batch_seed"])
        idx = batch_indices(seed, len(y), batch)
        rates = head.rates(base * lr_at(done / budget), s_in, s_w, batch)
        yield x[idx].reshape((batch, *shape)), y[idx], rates, seed
        done = int(row["forward_passes"])


def replay_state(trace: Trace, upto_step: int | None = None, head_data: HeadData | None = None):
    """The device model state after replaying the logged APPLYs (steps < ``upto_step`` if
    given, else all whole steps): what a resumed run must bring the device back to. A hybrid
    run's HEAD_GRAD steps are replayed too, on ``head_data`` (TraceError without it)."""
    state = _initial_state(trace)
    heads = None
    if is_hybrid(trace):
        if head_data is None:
            raise TraceError(
                f"{trace.path} run {trace.run_id} is a hybrid run: its replay needs the "
                "training data its HEAD_GRAD steps read",
                "use hilbench replay, which rebuilds them from the run's config",
            )
        heads = _head_steps(trace, state, head_data)
    for step, seeds, coeffs in trace.updates():
        if upto_step is not None and step >= upto_step:
            break
        if heads is not None:
            x, y, rates, seed = next(heads)
            state.head_grad(x, y, rates, head.BIAS_GAIN, seed)
        state.apply(seeds, coeffs)
    return state


def replay_weights(trace: Trace, upto_step: int | None = None) -> tuple[list[np.ndarray], int]:
    """The trained tensors after the logged APPLYs, and how many steps were applied."""
    state = replay_state(trace, upto_step)
    return [state.weights(i).copy() for i in range(len(state.trained))], state.updates_applied


def replay(
    trace: Trace | str | Path, run: str | int | None = None, head_data: HeadData | None = None
) -> ReplayResult:
    """Replay ``trace`` (a Trace, or a path and optional run) and compare with the weights
    CRC the device reported (a hybrid run: and the head's CRC, on ``head_data``)."""
    if not isinstance(trace, Trace):
        trace = Trace.open(trace, run)
    state = replay_state(trace, head_data=head_data)
    hybrid = is_hybrid(trace)
    recorded_head = trace.attrs.get("head_crc")
    return ReplayResult(
        path=trace.path,
        run_id=trace.run_id,
        steps=state.updates_applied,
        weights_crc=state.weights_crc(),
        recorded_crc=trace.weights_crc,
        head_crc=state.head_crc() if hybrid else None,
        recorded_head_crc=int(recorded_head) & 0xFFFFFFFF if recorded_head is not None else None,
    )
