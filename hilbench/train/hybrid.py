"""The hybrid's exact head on the host side: the rates HEAD_GRAD carries (hilbench/zo/head.py,
docs/zo-math.md section 11), from the model's scales and the run's rate."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hilbench.npu.graph import Graph
from hilbench.zo import head, zocf

#: the bias gain g: a bias moves as ZO moves a bias of unit shift U = 8 (2U bits of rate)
BIAS_GAIN = 2 * zocf.BIAS_UNIT_SHIFT


@dataclass(frozen=True)
class HeadSpec:
    """What the host needs to send HEAD_GRAD: the head's input scale, its filter's scale per
    output channel, and the head's base rate (LSB^2 per nat)."""

    input_scale: float
    weight_scales: np.ndarray  # (M,) float64
    lr: float
    bias_gain: int = BIAS_GAIN

    @classmethod
    def of(cls, graph: Graph, lr: float) -> HeadSpec:
        op = graph.ops[-1]
        w = graph.tensors[op.inputs[1]]
        m = int(w.shape[0])
        s = np.broadcast_to(np.asarray(w.qparams.scale, dtype=np.float64).reshape(-1), (m,))
        s_in = float(graph.tensors[op.inputs[0]].qparams.scale[0])
        return cls(s_in, np.array(s, dtype=np.float64), float(lr))

    def rates(self, factor: float, batch_size: int) -> np.ndarray:
        """The Q24 rates of a step whose rate schedule is at ``factor``."""
        return head.rates(self.lr * factor, self.input_scale, self.weight_scales, batch_size)

    def accumulator_bytes(self, k: int) -> int:
        return head.accumulator_bytes(len(self.weight_scales), k)
