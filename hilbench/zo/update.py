"""Integer weight updates with a Q16 master copy, identical on host and device.

Each trainable int8 tensor ``w`` has an int32 master ``m = w << 16``. APPLY(seeds, c) does
``m = clamp(m - sum_k c_k * u(seed_k), -127<<16, 127<<16)`` (sum exact in int64) and then
``w = (m + (1 << 15)) >> 16`` (round half up). Perturbed forward passes use
``clamp(w ± eps*u, -127, 127)`` on a scratch copy, so ``w`` itself is never disturbed by a probe.
"""

from __future__ import annotations

import numpy as np

from hilbench.zo.perturb import directions

FRAC_BITS = 16
MASTER_LIMIT = 127 << FRAC_BITS
COEFF_LIMIT = (1 << 24) - 1


def master_from_weights(w: np.ndarray) -> np.ndarray:
    """The Q16 master copy of int8 weights."""
    return w.astype(np.int32) << FRAC_BITS


def weights_from_master(master: np.ndarray) -> np.ndarray:
    """Round the Q16 master to int8 weights (half up)."""
    return ((master.astype(np.int64) + (1 << (FRAC_BITS - 1))) >> FRAC_BITS).astype(np.int8)


def perturbed(w: np.ndarray, u: np.ndarray, eps: int) -> np.ndarray:
    """``clamp(w + eps*u, -127, 127)`` for a stack of directions ``u`` (k, *w.shape).

    The clamp keeps perturbed int8 weights symmetric, as TFLite's rules want."""
    return np.clip(w.astype(np.int16) + np.int16(eps) * u.astype(np.int16), -127, 127).astype(
        np.int8
    )


def apply_update(
    master: np.ndarray, seeds: np.ndarray, coeffs: np.ndarray, tensor: int
) -> np.ndarray:
    """The new master after ``m -= sum_k coeffs[k] * u(seeds[k])``, clamped."""
    u = directions(seeds, tensor, master.shape).astype(np.int64)
    delta = np.tensordot(np.asarray(coeffs, dtype=np.int64), u, axes=(0, 0))
    return np.clip(master.astype(np.int64) - delta, -MASTER_LIMIT, MASTER_LIMIT).astype(np.int32)


def quantize_coefficients(
    loss_plus: np.ndarray, loss_minus: np.ndarray, lr: float, eps: int
) -> tuple[np.ndarray, np.ndarray]:
    """Projected gradients (nats per LSB) and the Q16 coefficients sent in APPLY.

    ``g_k = (L+ - L-) / (2 eps)`` and ``c_k = round(2^16 * lr * g_k / q)``, clipped to ±(2^24-1).
    """
    q = len(loss_plus)
    diff = np.asarray(loss_plus, dtype=np.float64) - np.asarray(loss_minus, dtype=np.float64)
    grads = diff / (2.0 * eps) / (1 << FRAC_BITS)
    coeffs = np.rint(lr * grads * (1 << FRAC_BITS) / q)
    return grads, np.clip(coeffs, -COEFF_LIMIT, COEFF_LIMIT).astype(np.int32)
