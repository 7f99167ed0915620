"""Data sets that ship offline: scikit-learn's 8x8 digits (1,797 images, 10 classes)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hilbench.errors import ConfigError

TEST_FRACTION = 0.2
SPLIT_SEED = 20261129  # fixed: every run, backend and session sees the same split


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


def _digits() -> Dataset:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = (bunch.data / 16.0).astype(np.float32)
    y = bunch.target.astype(np.uint8)
    order = np.random.default_rng(SPLIT_SEED).permutation(len(y))
    n_test = round(len(y) * TEST_FRACTION)
    test, train = order[:n_test], order[n_test:]
    return Dataset("digits", x[train], y[train], x[test], y[test], 10)


DATASETS = {"digits": _digits}


def load(name: str) -> Dataset:
    """The data set called ``name``."""
    try:
        return DATASETS[name]()
    except KeyError:
        known = ", ".join(sorted(DATASETS))
        raise ConfigError(f"unknown dataset '{name}'", f"use one of: {known}") from None


def quantize_inputs(x: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """Float inputs to the model's int8 input quantization (round half away from zero)."""
    q = np.trunc(x / scale + np.copysign(0.5, x)) + zero_point
    return np.clip(q, -128, 127).astype(np.int8)
