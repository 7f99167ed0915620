"""Integer weight updates, identical on host and device (spec: docs/zo-math.md).

APPLY(seeds, c) on one trainable tensor, with unit directions ``u_k`` (Q8, see perturb.py),
eps multiplier ``M`` (Q4), unit shift ``U`` and a master with ``f`` fractional bits::

    acc   = sum_k clamp(c_k, +-COEFF_LIMIT) * u_k          (int64, exact)
    x     = acc * M
    s     = 28 - f - U                                     (16 coeff + 8 unit + 4 mult bits)
    step  = (x + R) >> s      R = 2^(s-1) (nearest) or R uniform in [0, 2^s) (stochastic)
    m     = clamp(m - step, -LIMIT, LIMIT)

Masters: ``q16`` int32 with f = 16, ``int16`` with f = 8, ``int8`` (the weights themselves,
f = 0); LIMIT = 127 << f. Bias tensors (int32) are their own master (f = 0, LIMIT = 2^30,
so ``b +- delta`` with |delta| < 2^30 never overflows: a perturbed bias never saturates).
The int8 weights are ``(m + 2^(f-1)) >> f``. A probe uses ``clamp(w +- delta, -127, 127)``
and never writes the weights (the twin perturbs copies; the firmware produces each perturbed
row as its kernels read it), so they are unchanged whatever saturates.
With the defaults (Rademacher, M = 1.0, U = 0, q16) this is ``m -= sum_k c_k * u_k``.
"""

from __future__ import annotations

import numpy as np

from hilbench.zo import perturb
from hilbench.zo.rng import STREAM_ROUNDING, stream_words

FRAC_BITS = 16
WEIGHT_LIMIT = 127  # int8 weights, their masters (<< f) and perturbed copies stay within +-this
MASTER_LIMIT = WEIGHT_LIMIT << FRAC_BITS
COEFF_LIMIT = (1 << 24) - 1
COEFF_FRAC = 16
UPDATE_SHIFT = COEFF_FRAC + perturb.UNIT_FRAC + perturb.MULT_FRAC  # 28
MIN_UPDATE_SHIFT = UPDATE_SHIFT - FRAC_BITS  # 12: a q16 master (biases: 28 - 12 = 16)
INT32_MAX = (1 << 31) - 1
BIAS_LIMIT = 1 << 30

MASTER_Q16, MASTER_INT16, MASTER_INT8 = 0, 1, 2
MASTERS = {"q16": MASTER_Q16, "int16": MASTER_INT16, "int8": MASTER_INT8}
MASTER_NAMES = {v: k for k, v in MASTERS.items()}
MASTER_FRAC = {MASTER_Q16: 16, MASTER_INT16: 8, MASTER_INT8: 0}
MASTER_DTYPE = {MASTER_Q16: np.int32, MASTER_INT16: np.int16, MASTER_INT8: np.int8}
MASTER_BYTES = {MASTER_Q16: 4, MASTER_INT16: 2, MASTER_INT8: 0}  # extra bytes per weight

NEAREST, STOCHASTIC = 0, 1
ROUNDINGS = {"nearest": NEAREST, "stochastic": STOCHASTIC}


# --- masters --------------------------------------------------------------------------------
def master_from_weights(w: np.ndarray, fmt: int = MASTER_Q16) -> np.ndarray:
    """The master copy of int8 weights (``w << f`` in the format's integer type)."""
    f = MASTER_FRAC[fmt]
    return (w.astype(np.int32) << f).astype(MASTER_DTYPE[fmt])


def weights_from_master(master: np.ndarray, fmt: int = MASTER_Q16) -> np.ndarray:
    """Round a master to int8 weights (half up)."""
    f = MASTER_FRAC[fmt]
    if f == 0:
        return master.astype(np.int8)
    return ((master.astype(np.int64) + (1 << (f - 1))) >> f).astype(np.int8)


# --- probes ---------------------------------------------------------------------------------
def perturbed(w: np.ndarray, u: np.ndarray, eps: int) -> np.ndarray:
    """``clamp(w + eps*u, -127, 127)`` for a stack of ±1 directions ``u`` (k, *w.shape)."""
    return perturb_weights(w, np.int64(eps) * u.astype(np.int64))


def perturb_weights(w: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """``clamp(w + delta, -127, 127)`` (int8) for stacked integer deltas (k, *w.shape)."""
    return np.clip(w.astype(np.int64) + delta, -WEIGHT_LIMIT, WEIGHT_LIMIT).astype(np.int8)


def perturb_bias(b: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """Saturating int32 ``b + delta`` for stacked deltas (what QADD does on a Cortex-M)."""
    return np.clip(b.astype(np.int64) + delta, -INT32_MAX - 1, INT32_MAX).astype(np.int32)


# --- updates --------------------------------------------------------------------------------
def accumulate(u: np.ndarray, coeffs: np.ndarray) -> np.ndarray:
    """``sum_k clamp(c_k) * u_k`` (int64) for stacked unit directions ``u`` (k, *shape)."""
    c = np.clip(np.asarray(coeffs, dtype=np.int64), -COEFF_LIMIT, COEFF_LIMIT)
    return np.tensordot(c, u.astype(np.int64), axes=(0, 0))


def rounding_offsets(seed: int, tensor: int, n: int, shift: int) -> np.ndarray:
    """Stochastic rounding offsets R in [0, 2^shift) from 16-bit halves of the rounding stream
    ``(seed, STREAM_ROUNDING)``, tensor ``tensor``: element i uses half i % 2 of word i // 2."""
    words = stream_words(seed, STREAM_ROUNDING, tensor, (n + 1) // 2)
    h = np.stack([words & np.uint32(0xFFFF), words >> np.uint32(16)], axis=-1).reshape(-1)[:n]
    h = h.astype(np.int64)
    return h >> (16 - shift) if shift <= 16 else h << (shift - 16)


def rounding_words(n: int) -> int:
    """PRNG words stochastic rounding draws for a tensor of ``n`` elements."""
    return (n + 1) // 2


def step_from_acc(
    acc: np.ndarray,
    mult: np.ndarray | int,
    shift: int,
    rounding: int = NEAREST,
    r: np.ndarray | None = None,
) -> np.ndarray:
    """``(acc * M + R) >> shift`` (int64, arithmetic shift = floor); ``mult`` a scalar or an
    array broadcastable to ``acc`` (one per row: ``perturb.row_mults``). ``shift`` is
    ``28 - f - U``, in 12..28 for every master and unit shift the ZOCF check allows."""
    if not MIN_UPDATE_SHIFT <= shift <= UPDATE_SHIFT:
        raise ValueError(f"update shift {shift} outside {MIN_UPDATE_SHIFT}..{UPDATE_SHIFT}")
    x = acc * np.asarray(mult, dtype=np.int64)
    if rounding == STOCHASTIC:
        assert r is not None
        return (x + r.reshape(x.shape)) >> shift
    return (x + (1 << (shift - 1))) >> shift


def clamp_master(m: np.ndarray, limit: int, dtype: type) -> np.ndarray:
    return np.clip(m, -limit, limit).astype(dtype)


def apply_update(
    master: np.ndarray, seeds: np.ndarray, coeffs: np.ndarray, tensor: int
) -> np.ndarray:
    """The default rule (Rademacher, Q16 master, M = 1.0): ``m -= sum_k c_k u_k``, clamped."""
    r = perturb.draw(seeds, tensor, master.shape, perturb.RADEMACHER)
    u = perturb.units(r, perturb.scales(r, perturb.RADEMACHER, perturb.FIXED))
    step = step_from_acc(accumulate(u, coeffs), 1 << perturb.MULT_FRAC, UPDATE_SHIFT - FRAC_BITS)
    return clamp_master(master.astype(np.int64) - step, MASTER_LIMIT, np.int32)


def quantize_coefficients(
    loss_plus: np.ndarray,
    loss_minus: np.ndarray,
    lr: float,
    eps: int,
    *,
    one_sided: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Projected gradients (nats per LSB) and the Q16 coefficients sent in APPLY.

    Two-point: ``g_k = (L+ - L-) / (2 eps)``; one-sided (``L-`` is the unperturbed loss):
    ``g_k = (L+ - L0) / eps``. ``c_k = round(2^16 * lr * g_k / q)``, clipped to ±(2^24-1)."""
    grads, coeffs = coefficients(_ints(loss_plus), _ints(loss_minus), lr, eps, one_sided)
    return np.array(grads, dtype=np.float64), np.array(coeffs, dtype=np.int32)


def coefficients(
    loss_plus: list[int], loss_minus: list[int], lr: float, eps: int, one_sided: bool = False
) -> tuple[list[float], list[int]]:
    """``quantize_coefficients`` on plain lists: the same IEEE operations, in the same order,
    as the vectorised form, at a fraction of numpy's per-call cost (this runs every step)."""
    q = len(loss_plus)
    div = (1.0 if one_sided else 2.0) * eps
    unit = float(1 << FRAC_BITS)
    scale = lr  # c = round(lr * g * 2^16 / q), evaluated left to right
    grads, coeffs = [], []
    for p, m in zip(loss_plus, loss_minus, strict=True):
        g = (p - m) / div / unit  # p - m is exact: |L| < 2^31
        grads.append(g)
        coeffs.append(min(COEFF_LIMIT, max(-COEFF_LIMIT, round(scale * g * unit / q))))
    return grads, coeffs


def _ints(values: np.ndarray) -> list[int]:
    return values.tolist() if isinstance(values, np.ndarray) else list(values)
