"""The data set type every loader returns, and the quantization of its inputs for a model."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Dataset:
    """Float inputs in [0, 1] with integer labels, split into train and test."""

    name: str
    x_train: np.ndarray  # float32 (N, *input_shape)
    y_train: np.ndarray  # uint8 (N,)
    x_test: np.ndarray
    y_test: np.ndarray
    n_classes: int

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x_train.shape[1:])


def quantize_inputs(x: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """Float inputs to the model's int8 input quantization (round half away from zero)."""
    q = np.trunc(x / scale + np.copysign(0.5, x)) + zero_point
    return np.clip(q, -128, 127).astype(np.int8)
