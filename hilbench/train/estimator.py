"""Turning loss pairs into an integer update: two-point (antithetic) or one-sided ZO estimates,
averaged over the q samples of a step through the quantized coefficients."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from hilbench.zo.loss import Q16
from hilbench.zo.update import COEFF_LIMIT, FRAC_BITS, quantize_coefficients


class Estimate(NamedTuple):  # a tuple: one per step
    """Per-sample projected gradients (nats/LSB), the Q16 coefficients sent, the mean loss."""

    grads: np.ndarray
    coeffs: np.ndarray
    loss: float


_new_estimate = tuple.__new__  # an Estimate of computed fields, without NamedTuple's __new__
_UNIT = float(1 << FRAC_BITS)  # Q16


def two_point(loss_plus: np.ndarray, loss_minus: np.ndarray, *, lr: float, eps: int) -> Estimate:
    """g_k = (L+ - L-) / 2eps for each sample, averaged over q through the coefficients; the
    step's loss is the mean of all 2q losses (:func:`two_point_lists`, as arrays)."""
    grads, coeffs, loss = two_point_lists(loss_plus.tolist(), loss_minus.tolist(), lr, eps)
    return _new_estimate(
        Estimate, (np.array(grads, dtype=np.float64), np.array(coeffs, dtype=np.int32), loss)
    )


def two_point_lists(
    plus: list[int], minus: list[int], lr: float, eps: int
) -> tuple[list[float], list[int], float]:
    """:func:`two_point` on plain lists: (grads, coefficients, loss). The trainer calls this
    one, every step: its lists go to the trace as they are (no array in and out).

    ``hilbench.zo.update.coefficients`` in plain floats, its IEEE operations in its order
    (tests/train/test_estimator_exact.py holds both to the vectorised definition), with the
    clip looked for in the same loop and made only when needed: this runs every step."""
    q = len(plus)
    if len(minus) != q:
        raise ValueError(f"{q} losses L+ but {len(minus)} L-: one pair per sample")
    div = 2.0 * eps
    unit, limit = _UNIT, COEFF_LIMIT
    grads: list[float] = []
    coeffs: list[int] = []
    clip = False
    for p, m in zip(plus, minus):  # noqa: B905 (lengths checked above; a keyword costs)
        g = (p - m) / div / unit  # p - m is exact: |L| < 2^31
        grads.append(g)
        c = round(lr * g * unit / q)  # left to right, as coefficients()
        coeffs.append(c)
        if c > limit or c < -limit:
            clip = True
    if clip:
        coeffs = [min(limit, max(-limit, c)) for c in coeffs]
    # Integer sums are exact, and int / int rounds once: the same float as np.mean's.
    mean = (sum(plus) / q + sum(minus) / q) / 2
    return grads, coeffs, mean / Q16


def one_sided(loss_plus: np.ndarray, loss_zero: np.ndarray, *, lr: float, eps: int) -> Estimate:
    """g_k = (L+ - L0) / eps, L0 the unperturbed loss the device returns as loss_minus; the
    step's loss is L0."""
    grads, coeffs = quantize_coefficients(loss_plus, loss_zero, lr, eps, one_sided=True)
    return Estimate(grads=grads, coeffs=coeffs, loss=float(loss_zero[0]) / Q16)


ESTIMATORS = {"two-point": two_point, "one-sided": one_sided}
#: the estimators with a plain-list form (:func:`two_point_lists`), which the trainer prefers
ON_LISTS = {"two-point": two_point_lists}


def forward_passes(estimator: str, q: int) -> int:
    """Forward passes one PROBE of q samples costs: 2q (two-point) or q + 1 (one-sided)."""
    return q + 1 if estimator == "one-sided" else 2 * q


def max_q(estimator: str, passes: int) -> int:
    """The largest q whose PROBE fits in ``passes`` forward passes (0 if none)."""
    return max(0, passes - 1) if estimator == "one-sided" else passes // 2
