"""STM32N6 cost model (first cut): MAC counts and modeled NPU latency.

Every duration from here is *modeled*, never measured; callers must label it so.
Calibration against published figures is the job of a later revision (see docs/npu.md).
"""

from __future__ import annotations

import numpy as np

NPU_PEAK_MACS_PER_S = 300e9  # Neural-ART: about 600 GOPS int8 = 300 G MAC/s at 1 GHz
NPU_EFFICIENCY = 0.25  # fraction of peak small layers reach (placeholder until calibrated)
NPU_OVERHEAD_S = 5e-6  # per inference: epoch setup, DMA programming


def forward_macs(graph) -> int:
    """Multiply-accumulates of one forward pass of one input."""
    total = 0
    for op in graph.ops:
        if op.kind == "FULLY_CONNECTED":
            w = graph.tensors[op.inputs[1]]
            total += int(np.prod(w.shape))
    return total


def npu_latency_s(macs_per_input: int, inputs: int, passes: int = 1) -> float:
    """Modeled NPU time for ``passes`` forward passes of a batch of ``inputs``."""
    per_pass = NPU_OVERHEAD_S + macs_per_input * inputs / (NPU_PEAK_MACS_PER_S * NPU_EFFICIENCY)
    return passes * per_pass
