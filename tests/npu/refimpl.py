"""Slow scalar references written straight from the TFLite C++ sources (Python ints)."""

from __future__ import annotations

import numpy as np

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def wrap32(v: int) -> int:
    return ((v + 2**31) & 0xFFFFFFFF) - 2**31


def srdhm(a: int, b: int) -> int:
    """gemmlowp SaturatingRoundingDoublingHighMul."""
    if a == b == INT32_MIN:
        return INT32_MAX
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    t = ab + nudge
    q = abs(t) // (1 << 31)
    return wrap32(q if t >= 0 else -q)


def rdbypot(x: int, e: int) -> int:
    """gemmlowp RoundingDivideByPOT."""
    mask = (1 << e) - 1
    rem = x & mask
    thr = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> e) + (1 if rem > thr else 0)


def mbqm(x: int, m: int, shift: int) -> int:
    """TFLite MultiplyByQuantizedMultiplier (double rounding)."""
    left = shift if shift > 0 else 0
    right = -shift if shift < 0 else 0
    return rdbypot(srdhm(wrap32(x * (1 << left)), m), right)


def fc_reference(x, w, bias, input_offset, output_offset, mult, shift, act_min, act_max):
    """(N, K) int8 x, (M, K) w, (M,) bias -> (N, M) int8, integer-only."""
    acc = (x.astype(np.int64) + input_offset) @ w.astype(np.int64).T
    if bias is not None:
        acc = acc + bias.astype(np.int64)
    n, m = acc.shape
    mult = np.broadcast_to(np.asarray(mult), (m,))
    shift = np.broadcast_to(np.asarray(shift), (m,))
    out = np.empty((n, m), dtype=np.int8)
    for i in range(n):
        for j in range(m):
            v = mbqm(wrap32(int(acc[i, j])), int(mult[j]), int(shift[j])) + output_offset
            out[i, j] = min(max(v, act_min), act_max)
    return out
