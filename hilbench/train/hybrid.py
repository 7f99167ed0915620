"""The hybrid's exact head on the host side: the rates HEAD_GRAD carries (hilbench/zo/head.py,
docs/zo-math.md section 11), from the model's scales and the run's rate."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hilbench.npu.graph import Graph
from hilbench.zo import head

BIAS_GAIN = head.BIAS_GAIN


@dataclass(frozen=True)
class HeadSpec:
    """What the host needs to send HEAD_GRAD: the head's input scale, its filter's scale per
    output channel, and the head's base rate (LSB^2 per nat)."""

    input_scale: float
    weight_scales: np.ndarray  # (M,) float64
    lr: float
    bias_gain: int = BIAS_GAIN
    elements: int = 0  # the head's weights and biases: one rounding offset each per step

    @classmethod
    def of(cls, graph: Graph, lr: float) -> HeadSpec:
        """The head of ``graph`` (the one parsed from the blob the device gets, as replay's)."""
        s_in, s_w = head.scales(graph)
        op = graph.ops[-1]
        n = sum(graph.tensors[t].data.size for t in op.inputs[1:] if t)
        return cls(s_in, s_w, float(lr), elements=int(n))

    @property
    def fresh_words(self) -> int:
        """PRNG words a HEAD_GRAD draws for its rounding (a half-word per element)."""
        return (self.elements + 1) // 2

    def rates(self, factor: float, batch_size: int) -> np.ndarray:
        """The Q24 rates of a step whose rate schedule is at ``factor``."""
        return head.rates(self.lr * factor, self.input_scale, self.weight_scales, batch_size)

    def accumulator_bytes(self, k: int) -> int:
        return head.accumulator_bytes(len(self.weight_scales), k)
