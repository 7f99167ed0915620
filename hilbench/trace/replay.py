"""Replay: rebuild a run's final weights from its initial model and its logged updates."""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from hilbench.errors import TraceError
from hilbench.npu.blob import from_blob
from hilbench.zo import update


@dataclass(frozen=True)
class ReplayResult:
    steps: int
    weights_crc: int  # CRC-32 of the rebuilt trainable weights, as WEIGHTS_CRC computes it
    recorded_crc: int | None  # what the device reported at the end of the run

    @property
    def matches(self) -> bool:
        return self.recorded_crc is not None and self.weights_crc == self.recorded_crc


def replay_weights(trace) -> tuple[list[np.ndarray], int]:
    """The trainable int8 weights after every logged APPLY, and how many steps were applied."""
    if trace.model_blob is None:
        raise TraceError(
            f"{trace.path} holds no model blob, so it cannot be replayed",
            "record runs with hilbench >= 0.1, which stores the model sent to the device",
        )
    graph, _ = from_blob(trace.model_blob)
    names = graph.trainable()
    masters = [update.master_from_weights(graph.tensors[n].data) for n in names]
    samples = trace.samples
    steps = trace.steps
    for row in steps:
        start, q = int(row["sample_start"]), int(row["q"])
        seeds = samples["seed"][start : start + q].astype(np.uint32)
        coeffs = samples["coeff"][start : start + q].astype(np.int32)
        for i, master in enumerate(masters):
            masters[i] = update.apply_update(master, seeds, coeffs, i)
    return [update.weights_from_master(mm) for mm in masters], len(steps)


def replay(trace) -> ReplayResult:
    """Replay ``trace`` and compare with the weights CRC the device reported."""
    weights, steps = replay_weights(trace)
    crc = 0
    for w in weights:
        crc = zlib.crc32(np.ascontiguousarray(w).tobytes(), crc)
    return ReplayResult(steps=steps, weights_crc=crc, recorded_crc=trace.weights_crc)
