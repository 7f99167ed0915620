"""TFLite / TFLM reference fixed-point math, vectorised in numpy.

Every function mirrors the C++ reference in ``tensorflow/lite/kernels/internal/common.{h,cc}``
and ``tensorflow/lite/kernels/kernel_util.cc``; intermediates are int64 so nothing overflows
where the C code does not. Where the C code relies on two's-complement wrap-around (a left
shift of the accumulator), we wrap to int32 explicitly, as the firmware's C does on Cortex-M.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from hilbench.errors import ModelError

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
INT8_MIN = -128
INT8_MAX = 127

Activation = Literal["NONE", "RELU", "RELU6"]
ACTIVATIONS: tuple[str, ...] = ("NONE", "RELU", "RELU6")


def round_half_away(v: np.ndarray | float) -> np.ndarray:
    """Round to nearest, ties away from zero (C ``std::round``), keeping the float dtype."""
    a = np.asarray(v)
    mag = np.abs(a)
    fl = np.floor(mag)
    # mag - fl is exact for every float (fl is mag with the fraction bits cleared).
    r = fl + (mag - fl >= 0.5)
    return np.copysign(r, a).astype(a.dtype if a.dtype.kind == "f" else np.float64)


def wrap_int32(x: np.ndarray) -> np.ndarray:
    """Two's-complement wrap of an int64 array to the int32 range (kept as int64)."""
    x = np.asarray(x, dtype=np.int64)
    return ((x + 2**31) & 0xFFFFFFFF) - 2**31


def quantize_multiplier(real: float) -> tuple[int, int]:
    """TFLite ``QuantizeMultiplier``: ``real ≈ multiplier * 2**(shift - 31)``, Q31 multiplier.

    Returns ``(multiplier, shift)`` with multiplier in ``[2**30, 2**31 - 1]`` (or 0) and
    shift > 0 meaning a left shift. A shift below -31 becomes ``(0, 0)`` as in TFLite.
    """
    real = float(real)
    if real == 0.0:
        return 0, 0
    if not math.isfinite(real):
        raise ModelError(
            f"requantization multiplier {real!r} is not finite",
            "give every tensor a finite, positive scale",
        )
    q, shift = math.frexp(real)
    q_fixed = int(round_half_away(q * float(1 << 31)))
    if q_fixed == (1 << 31):
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return q_fixed, shift


def multiply_by_quantized_multiplier(
    acc: np.ndarray, multiplier: int | np.ndarray, shift: int | np.ndarray
) -> np.ndarray:
    """TFLM ``MultiplyByQuantizedMultiplier`` (default double rounding), elementwise.

    ``SaturatingRoundingDoublingHighMul(acc << max(shift, 0), multiplier)`` followed by
    ``RoundingDivideByPOT(·, max(-shift, 0))``. Per-channel ``multiplier``/``shift`` arrays
    broadcast against the LAST axis of ``acc``. Returns int32.
    """
    x = np.asarray(acc, dtype=np.int64)
    m = np.asarray(multiplier, dtype=np.int64)
    s = np.asarray(shift, dtype=np.int64)
    if m.size == 1:
        m = m.reshape(())
    if s.size == 1:
        s = s.reshape(())
    if np.any(s > 0):
        x = wrap_int32(x << np.maximum(s, 0))
    right = np.maximum(-s, 0)
    # SaturatingRoundingDoublingHighMul: (a*b + nudge) / 2**31 truncated toward zero, where
    # nudge = 2**30 (ab >= 0) or 1 - 2**30 (ab < 0), equals floor((a*b + 2**30) / 2**31).
    # The only result above INT32_MAX is INT32_MIN * INT32_MIN, which saturates.
    high = x * m
    high += 1 << 30
    high >>= 31
    np.minimum(high, INT32_MAX, out=high)
    # RoundingDivideByPOT(high, right): round half away from zero, as
    # (high >> e) + (remainder > (mask >> 1) + (high < 0)).
    half = (np.int64(1) << right) >> 1
    high += half
    high -= (high < half) & (right > 0)  # high < half  <=>  the original high < 0
    high >>= right
    return high.astype(np.int32)


def _quantize_scalar_float32(f: float, scale: float, zero_point: int) -> int:
    """TFLite ``Quantize`` helper of kernel_util: float32 ``round(f / scale) + zero_point``."""
    tmp = round_half_away(np.float32(f) / np.float32(scale))
    if not (float(INT32_MIN) <= float(tmp) <= float(INT32_MAX)):
        raise ModelError(
            f"activation bound {f} / scale {scale} overflows int32",
            "use a larger output scale",
        )
    return int(zero_point) + int(tmp)


def activation_range(kind: str, scale: float, zero_point: int) -> tuple[int, int]:
    """TFLite ``CalculateActivationRangeQuantized`` for an int8 output tensor."""
    lo, hi = INT8_MIN, INT8_MAX
    if kind == "NONE":
        return lo, hi
    if kind == "RELU":
        return max(lo, _quantize_scalar_float32(0.0, scale, zero_point)), hi
    if kind == "RELU6":
        return (
            max(lo, _quantize_scalar_float32(0.0, scale, zero_point)),
            min(hi, _quantize_scalar_float32(6.0, scale, zero_point)),
        )
    raise ModelError(f"unknown fused activation {kind!r}", f"use one of {', '.join(ACTIVATIONS)}")


def quantize(
    x_float: np.ndarray, scale: float | np.ndarray, zero_point: int | np.ndarray
) -> np.ndarray:
    """Float -> int8 as TFLM's QUANTIZE: float32 ``round(x / scale) + zp``, saturated."""
    x = np.asarray(x_float, dtype=np.float32)
    q = round_half_away(x / np.asarray(scale, dtype=np.float32)).astype(np.int64)
    q = q + np.asarray(zero_point, dtype=np.int64)
    return np.clip(q, INT8_MIN, INT8_MAX).astype(np.int8)


def dequantize(
    q: np.ndarray, scale: float | np.ndarray, zero_point: int | np.ndarray
) -> np.ndarray:
    """Int -> float32: ``(q - zp) * scale``."""
    d = np.asarray(q, dtype=np.int64) - np.asarray(zero_point, dtype=np.int64)
    return d.astype(np.float32) * np.asarray(scale, dtype=np.float32)
