"""Turning loss pairs into an integer update: two-point (antithetic) ZO estimator."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hilbench.zo.loss import Q16
from hilbench.zo.update import quantize_coefficients


@dataclass(frozen=True)
class Estimate:
    """Per-sample projected gradients (nats/LSB), the Q16 coefficients sent, the mean loss."""

    grads: np.ndarray
    coeffs: np.ndarray
    loss: float


def two_point(loss_plus: np.ndarray, loss_minus: np.ndarray, *, lr: float, eps: int) -> Estimate:
    """g_k = (L+ - L-) / 2eps for each sample, averaged over q through the coefficients."""
    grads, coeffs = quantize_coefficients(loss_plus, loss_minus, lr, eps)
    mean = (np.mean(loss_plus, dtype=np.float64) + np.mean(loss_minus, dtype=np.float64)) / 2
    return Estimate(grads=grads, coeffs=coeffs, loss=mean / Q16)
