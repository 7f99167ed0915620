"""The per-step coefficient code (plain Python floats) must give, bit for bit, what the
vectorised definition in docs/zo-math.md gives."""

from __future__ import annotations

import numpy as np
import pytest

from hilbench.train.estimator import one_sided, two_point
from hilbench.zo.update import COEFF_LIMIT, FRAC_BITS


def reference(lp, lm, lr, eps, one=False):
    q = len(lp)
    diff = np.asarray(lp, dtype=np.float64) - np.asarray(lm, dtype=np.float64)
    grads = diff / ((1.0 if one else 2.0) * eps) / (1 << FRAC_BITS)
    coeffs = np.clip(np.rint(lr * grads * (1 << FRAC_BITS) / q), -COEFF_LIMIT, COEFF_LIMIT)
    mean = (np.mean(lp, dtype=np.float64) + np.mean(lm, dtype=np.float64)) / 2
    return grads, coeffs.astype(np.int32), mean / (1 << FRAC_BITS)


@pytest.mark.parametrize("seed", range(4))
def test_coefficients_match_the_vectorised_definition(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for trial in range(2500):
        q = int(rng.integers(1, 80))
        lr = float(rng.choice([1e-3, 0.5, 12.345, 200.0, 373.3, 4530.0, 1e7]))
        eps = int(rng.integers(1, 128))
        low = -(2**31) if trial % 3 == 0 else 0  # big differences saturate the coefficients
        lp = rng.integers(low, 2**31 - 1, q).astype(np.int32)
        lm = rng.integers(low, 2**20, q).astype(np.int32)
        grads, coeffs, loss = reference(lp, lm, lr, eps)
        est = two_point(lp, lm, lr=lr, eps=eps)
        np.testing.assert_array_equal(est.grads, grads)
        np.testing.assert_array_equal(est.coeffs, coeffs)
        assert est.coeffs.dtype == np.int32 and est.loss == loss
        grads, coeffs, _ = reference(lp, lm, lr, eps, one=True)
        est = one_sided(lp, lm, lr=lr, eps=eps)
        np.testing.assert_array_equal(est.grads, grads)
        np.testing.assert_array_equal(est.coeffs, coeffs)
