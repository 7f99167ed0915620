"""A soak run: many short ZO runs over a faulty link, each checked against a clean twin."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

import numpy as np

from hilbench import data as datasets
from hilbench.backend.emulate import EmulatorBackend
from hilbench.client.recovery import RecoveringTarget
from hilbench.link.faults import FRAME_FAULTS, FaultSpec
from hilbench.npu import zoo
from hilbench.npu.blob import to_blob
from hilbench.zo.loss import LossTables
from hilbench.zo.update import quantize_coefficients

STEPS_PER_RUN = 40


@dataclass
class SoakResult:
    runs: int
    steps: int
    faults: Counter
    recoveries: int
    mismatches: list[tuple[int, int, int]]  # (run, clean CRC, faulty CRC)
    seconds: float


def tiny_workload() -> tuple[bytes, np.ndarray, np.ndarray]:
    """A 64-10 int8 classifier and 48 digits: cheap to reload after every reset."""
    data = datasets.load("digits")
    graph = zoo.build_mlp((64, 10), seed=1, calibration=data.x_train[:64])
    tables = LossTables.for_scale(float(graph.tensors[graph.output].qparams.scale[0]))
    qp = graph.tensors[graph.input].qparams
    x = datasets.quantize_inputs(data.x_train[:48], float(qp.scale[0]), int(qp.zero_point[0]))
    return to_blob(graph, {"LOSS": tables.to_bytes()}), x, data.y_train[:48]


def train(device: RecoveringTarget, workload, run: int) -> int:
    """A short ZO run whose seeds depend only on ``run``; returns the final weights CRC."""
    blob, x, y = workload
    device.load_model(blob)
    device.load_data(0, x, y, 10)
    rng = np.random.default_rng(run)
    for step in range(STEPS_PER_RUN):
        seeds = rng.integers(0, 2**32, 2, dtype=np.uint32)
        probe = device.probe(slot=0, batch_size=8, batch_seed=step, eps=2, seeds=seeds)
        _, coeffs = quantize_coefficients(probe.loss_plus, probe.loss_minus, 3000.0, 2)
        device.apply(seeds, coeffs)
    return device.weights_crc()[0]


def soak(
    spec: FaultSpec,
    max_runs: int,
    *,
    until: int | None = None,
    link: str = "memory",
    seed: int = 0,
) -> SoakResult:
    """Repeat one ZO run (run seed ``seed``) over a link with ``spec``'s faults, ``max_runs``
    times or until every kind the spec injects has been injected ``until`` times."""
    workload = tiny_workload()
    started = time.perf_counter()
    mismatches = []
    with EmulatorBackend(link=link) as clean, EmulatorBackend(faults=spec, link=link) as faulty:
        faulty.retries = 40  # at these fault rates a round trip can take many tries
        expected = train(RecoveringTarget(clean), workload, seed)
        device = RecoveringTarget(faulty, crc_every=10, max_in_a_row=500)
        kinds = [k for k in (*FRAME_FAULTS, "reset") if getattr(spec, k) > 0]
        runs = 0
        while runs < max_runs:
            got = train(device, workload, seed)
            if got != expected:
                mismatches.append((runs, expected, got))
            runs += 1
            if until is not None and all(faulty.port.counts[k] >= until for k in kinds):
                break
        return SoakResult(
            runs=runs,
            steps=runs * STEPS_PER_RUN,
            faults=Counter(faulty.port.counts),
            recoveries=device.recoveries,
            mismatches=mismatches,
            seconds=time.perf_counter() - started,
        )


if __name__ == "__main__":
    import sys

    result = soak(
        FaultSpec.parse(sys.argv[1]), int(sys.argv[2]), link=(sys.argv[3:4] or ["memory"])[0]
    )
    print(result)
