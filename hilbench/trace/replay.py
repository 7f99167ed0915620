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

from hilbench.device import ModelState
from hilbench.errors import TraceError
from hilbench.trace.reader import Trace


@dataclass(frozen=True)
class ReplayResult:
    path: Path
    run_id: str
    steps: int  # APPLYs replayed
    weights_crc: int  # CRC-32 of the rebuilt trained tensors, as WEIGHTS_CRC computes it
    recorded_crc: int | None  # what the device reported at the end of the run (None: unknown)

    @property
    def matches(self) -> bool:
        return self.recorded_crc is not None and self.weights_crc == self.recorded_crc

    def message(self) -> str:
        """One line saying what replay found."""
        where = f"{self.path} run {self.run_id}"
        if self.recorded_crc is None:
            return (
                f"replayed {self.steps} steps of {where}: weights CRC 0x{self.weights_crc:08x}; "
                "the trace records no final CRC to check it against"
            )
        if self.matches:
            return (
                f"replay OK: {self.steps} steps of {where} rebuild weights CRC "
                f"0x{self.weights_crc:08x}, as the device reported"
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


def replay_state(trace: Trace, upto_step: int | None = None):
    """The device model state after replaying the logged APPLYs (steps < ``upto_step`` if
    given, else all whole steps): what a resumed run must bring the device back to."""
    state = _initial_state(trace)
    for step, seeds, coeffs in trace.updates():
        if upto_step is not None and step >= upto_step:
            break
        state.apply(seeds, coeffs)
    return state


def replay_weights(trace: Trace, upto_step: int | None = None) -> tuple[list[np.ndarray], int]:
    """The trained tensors after the logged APPLYs, and how many steps were applied."""
    state = replay_state(trace, upto_step)
    return [state.weights(i).copy() for i in range(len(state.trained))], state.updates_applied


def replay(trace: Trace | str | Path, run: str | int | None = None) -> ReplayResult:
    """Replay ``trace`` (a Trace, or a path and optional run) and compare with the weights
    CRC the device reported."""
    if not isinstance(trace, Trace):
        trace = Trace.open(trace, run)
    state = replay_state(trace)
    return ReplayResult(
        path=trace.path,
        run_id=trace.run_id,
        steps=state.updates_applied,
        weights_crc=state.weights_crc(),
        recorded_crc=trace.weights_crc,
    )
