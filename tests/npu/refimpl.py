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


def _tap_gather(x, in_zp, p, ky, kx):
    """(N, OH, OW, C) int64 of x - in_zp under tap (ky, kx); 0 outside the input."""
    h, w = x.shape[1:3]
    oh, ow = p["out_h"], p["out_w"]
    iy = np.arange(oh) * p["stride_h"] - p["pad_top"] + ky * p["dilation_h"]
    ix = np.arange(ow) * p["stride_w"] - p["pad_left"] + kx * p["dilation_w"]
    vy, vx = (iy >= 0) & (iy < h), (ix >= 0) & (ix < w)
    g = x[:, np.clip(iy, 0, h - 1)][:, :, np.clip(ix, 0, w - 1)].astype(np.int64) - in_zp
    return g * (vy[None, :, None, None] & vx[None, None, :, None])


def conv_acc(x, w, bias, in_zp, p):
    """int64 CONV_2D accumulators (N, OH, OW, O) straight from the reference loop structure."""
    kh, kw = w.shape[1:3]
    acc = 0
    for ky in range(kh):
        for kx in range(kw):
            acc = acc + np.einsum(
                "nyxc,oc->nyxo", _tap_gather(x, in_zp, p, ky, kx), w[:, ky, kx, :].astype(np.int64)
            )
    return acc + (0 if bias is None else bias.astype(np.int64))


def depthwise_acc(x, w, bias, in_zp, p):
    """int64 DEPTHWISE_CONV_2D accumulators (N, OH, OW, C*M)."""
    kh, kw = w.shape[1:3]
    m = p["depth_multiplier"]
    acc = 0
    for ky in range(kh):
        for kx in range(kw):
            g = np.repeat(_tap_gather(x, in_zp, p, ky, kx), m, axis=-1)
            acc = acc + g * w[0, ky, kx, :].astype(np.int64)
    return acc + (0 if bias is None else bias.astype(np.int64))
