"""Helpers shared by the op modules: exact BLAS accumulation, requantization, padding,
im2col and parameter checks. Nothing here knows about a specific op."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from hilbench.errors import ModelError
from hilbench.npu.quant import (
    ACTIVATIONS,
    activation_range,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    wrap_int32,
)

if TYPE_CHECKING:
    from hilbench.npu.ir import GraphIR, Op, Tensor

F32_EXACT = 1 << 24
PADDINGS: tuple[str, ...] = ("SAME", "VALID")


# --- exact integer arithmetic through floating point ---------------------------------------
def exact_dtype(k: int, amax: int, wmax: int) -> type:
    """float32 when every partial sum of ``k`` products is provably below 2**24, else
    float64 (exact for any sum below 2**53)."""
    return np.float32 if k * amax * wmax <= F32_EXACT else np.float64


def absmax(a: np.ndarray, offset: int = 0) -> int:
    """max |a + offset| over the array (0 when empty)."""
    if not a.size:
        return 0
    return max(abs(int(a.min()) + offset), abs(int(a.max()) + offset))


def _bias_view(bias: np.ndarray, ndim: int, dtype: type) -> np.ndarray:
    b = np.asarray(bias, dtype=dtype)
    if b.ndim == 2:
        b = b.reshape(b.shape[0], *([1] * (ndim - 2)), b.shape[1])
    return b


def requantize(
    acc: np.ndarray,
    params: dict[str, Any],
    bias: np.ndarray | None = None,
    bound: int | None = None,
) -> np.ndarray:
    """Accumulators (channel last, integer-valued, any dtype) + bias -> int32 -> MBQM ->
    offset, clamp -> int8. ``bias`` is (C,) or (S, C); with (S, C) ``acc`` has a leading S
    axis (or 1).

    ``bound`` (a proven bound on |acc| before the bias) enables an exact float64 path: when
    every ``|acc + bias| * multiplier < 2**53`` and no shift is a left shift, the product
    is exact in float64 and ``floor((p + 2**30) / 2**31)`` then round-half-away by 2**-shift
    reproduce SaturatingRoundingDoublingHighMul and RoundingDivideByPOT bit for bit."""
    mult, shift = np.asarray(params["multiplier"]), np.asarray(params["shift"])
    bmax = 0 if bias is None else absmax(np.asarray(bias))
    if bound is not None and np.all(shift <= 0) and (bound + bmax) * (2**31) < 2**53:
        p = acc.astype(np.float64)
        if bias is not None:
            bv = _bias_view(bias, p.ndim, np.float64)
            if bv.ndim == p.ndim and bv.shape[0] > p.shape[0]:  # only the biases batched
                p = p + bv
            else:
                p += bv
        p *= mult.astype(np.float64)
        p += 2.0**30
        p *= 2.0**-31
        np.floor(p, out=p)
        if np.any(shift < 0):
            p *= np.exp2(shift.astype(np.float64))
            p += np.copysign(0.5, p)
            np.trunc(p, out=p)
        p += params["output_offset"]
        np.clip(p, params["act_min"], params["act_max"], out=p)
        return p.astype(np.int8)
    acc = acc.astype(np.int64)
    if bias is not None:
        acc = acc + _bias_view(bias, acc.ndim, np.int64)
    acc = wrap_int32(acc)  # the C accumulator is int32
    out = multiply_by_quantized_multiplier(acc, mult, shift)
    out = out.astype(np.int64)
    out += params["output_offset"]
    np.clip(out, params["act_min"], params["act_max"], out=out)
    return out.astype(np.int8)


# --- geometry ------------------------------------------------------------------------------
def out_size(padding: str, size: int, filt: int, stride: int, dilation: int = 1) -> int:
    """TFLite ``ComputeOutSize``."""
    eff = (filt - 1) * dilation + 1
    if padding == "SAME":
        return (size + stride - 1) // stride
    return (size + stride - eff) // stride


def pad_before(size: int, filt: int, stride: int, dilation: int, out: int) -> int:
    """TFLite ``ComputePaddingWithOffset``: padding before (top/left) = total // 2."""
    eff = (filt - 1) * dilation + 1
    return max((out - 1) * stride + eff - size, 0) // 2


def geometry(
    padding: str,
    in_hw: tuple[int, int],
    k_hw: tuple[int, int],
    stride: tuple[int, int],
    dilation: tuple[int, int] = (1, 1),
) -> tuple[int, int, int, int]:
    """(out_h, out_w, pad_top, pad_left) of a window op."""
    oh = out_size(padding, in_hw[0], k_hw[0], stride[0], dilation[0])
    ow = out_size(padding, in_hw[1], k_hw[1], stride[1], dilation[1])
    return (
        oh,
        ow,
        pad_before(in_hw[0], k_hw[0], stride[0], dilation[0], oh),
        pad_before(in_hw[1], k_hw[1], stride[1], dilation[1], ow),
    )


def padded(x: np.ndarray, p: dict[str, Any], k_hw: tuple[int, int], fill: float) -> np.ndarray:
    """Pad (..., H, W, C) so every window tap of the output grid is in range."""
    h, w = x.shape[-3], x.shape[-2]
    oh, ow = p["out_h"], p["out_w"]
    need_h = (oh - 1) * p["stride_h"] + (k_hw[0] - 1) * p.get("dilation_h", 1) + 1
    need_w = (ow - 1) * p["stride_w"] + (k_hw[1] - 1) * p.get("dilation_w", 1) + 1
    top, left = p["pad_top"], p["pad_left"]
    bottom, right = max(need_h - h - top, 0), max(need_w - w - left, 0)
    if not (top or left or bottom or right):
        return x
    widths = [(0, 0)] * (x.ndim - 3) + [(top, bottom), (left, right), (0, 0)]
    return np.pad(x, widths, constant_values=fill)


def taps(x: np.ndarray, p: dict[str, Any], k_hw: tuple[int, int]):
    """Yield ``(ky, kx, view)``: the (…, OH, OW, C) input view under each filter tap of an
    already padded (…, H, W, C) array."""
    sh, sw = p["stride_h"], p["stride_w"]
    dh, dw = p.get("dilation_h", 1), p.get("dilation_w", 1)
    oh, ow = p["out_h"], p["out_w"]
    for ky in range(k_hw[0]):
        y0 = ky * dh
        for kx in range(k_hw[1]):
            x0 = kx * dw
            yield (
                ky,
                kx,
                x[..., y0 : y0 + (oh - 1) * sh + 1 : sh, x0 : x0 + (ow - 1) * sw + 1 : sw, :],
            )


def valid_counts(p: dict[str, Any], in_hw: tuple[int, int], k_hw: tuple[int, int]) -> np.ndarray:
    """(OH, OW) number of filter taps that fall inside the input (TFLM pooling count)."""

    def axis(o: int, stride: int, pad: int, k: int, size: int) -> np.ndarray:
        origin = np.arange(o) * stride - pad
        start = np.maximum(0, -origin)
        end = np.minimum(k, size - origin)
        return np.maximum(end - start, 0)

    ch = axis(p["out_h"], p["stride_h"], p["pad_top"], k_hw[0], in_hw[0])
    cw = axis(p["out_w"], p["stride_w"], p["pad_left"], k_hw[1], in_hw[1])
    return np.outer(ch, cw).astype(np.int64)


# --- prepare -------------------------------------------------------------------------------
def conv_requant_params(
    input_scale: float,
    input_zero_point: int,
    weight_scales: np.ndarray,
    output_scale: float,
    output_zero_point: int,
    activation: str,
) -> dict[str, Any]:
    """Integer requantization params exactly as TFLM's conv/FC Prepare computes them:
    double ``input_scale * weight_scale / output_scale``, then QuantizeMultiplier."""
    ws = np.atleast_1d(np.asarray(weight_scales, dtype=np.float32))
    mult = np.empty(ws.shape, dtype=np.int32)
    shift = np.empty(ws.shape, dtype=np.int32)
    for i, s in enumerate(ws):
        real = float(np.float32(input_scale)) * float(s) / float(np.float32(output_scale))
        mult[i], shift[i] = quantize_multiplier(real)
    act_min, act_max = activation_range(activation, float(output_scale), int(output_zero_point))
    return {
        "input_offset": -int(input_zero_point),
        "output_offset": int(output_zero_point),
        "multiplier": mult,
        "shift": shift,
        "act_min": int(act_min),
        "act_max": int(act_max),
        "activation": activation,
    }


# --- checks --------------------------------------------------------------------------------
def bad(kind: str, op: Op, rule: str, fix: str) -> ModelError:
    out = op.outputs[0] if op.outputs else "?"
    return ModelError(f"{kind} op producing {out}: {rule}", fix)


def per_tensor_activation(kind: str, op: Op, t: Tensor) -> tuple[float, int]:
    if t.dtype != "int8" or t.data is not None:
        raise bad(
            kind,
            op,
            f"{t.name} must be an int8 activation, got {t.dtype}",
            "feed and produce int8 activations",
        )
    if t.qparams is None or t.qparams.scale.size != 1:
        raise bad(
            kind,
            op,
            f"activation {t.name} must be per-tensor quantized",
            "give it one scale and one zero point",
        )
    return float(t.qparams.scale[0]), int(t.qparams.zero_point[0])


def check_activation(kind: str, op: Op) -> str:
    act = op.params.get("activation", "NONE")
    if act not in ACTIVATIONS:
        raise bad(kind, op, f"unknown fused activation {act!r}", f"use one of {ACTIVATIONS}")
    return act


def check_params_equal(kind: str, op: Op, want: dict[str, Any]) -> None:
    """Every key of ``want`` must equal the op's param (arrays elementwise)."""
    for key, value in want.items():
        got = op.params.get(key)
        if isinstance(value, np.ndarray):
            g = np.asarray(got if got is not None else [])
            ok = g.shape == value.shape and bool(np.all(g == value))
        else:
            ok = got == value
        if not ok:
            raise bad(
                kind,
                op,
                f"param {key}={got!r} disagrees with the tensors' quantization "
                f"and shapes (expected {value!r})",
                "recompute the op params (prepare)",
            )


def check_filter_and_bias(
    kind: str, graph: GraphIR, op: Op, n_out: int, axis: int
) -> tuple[np.ndarray, Tensor]:
    """Constant int8 symmetric filter with per-tensor or per-channel (``axis``) scales and an
    optional int32 bias of scale input_scale * weight_scale. Returns (weight scales, filter)."""
    t = graph.tensors
    x, w = t[op.inputs[0]], t[op.inputs[1]]
    if w.data is None or w.dtype != "int8":
        raise bad(kind, op, f"filter {w.name} must be constant int8", "store it as int8 data")
    wq = w.qparams
    if wq is None:
        raise bad(kind, op, f"filter {w.name} has no quantization", "quantize the weights")
    nch = wq.scale.size
    if nch != 1 and (nch != n_out or wq.axis != axis):
        raise bad(
            kind,
            op,
            f"filter {w.name} must be per-tensor or per-channel on axis {axis} "
            f"with {n_out} scales, got {nch} on axis {wq.axis}",
            "quantize per output channel",
        )
    if len(op.inputs) > 2:
        b = t[op.inputs[2]]
        if b.data is None or b.dtype != "int32" or tuple(b.shape) != (n_out,):
            raise bad(
                kind,
                op,
                f"bias {b.name} must be constant int32 of shape ({n_out},)",
                "store the bias as int32 data",
            )
        bq = b.qparams
        if bq is None or bq.scale.size != nch or np.any(bq.zero_point != 0):
            raise bad(
                kind,
                op,
                f"bias {b.name} must have zero point 0 and one scale per filter scale",
                "quantize the bias with scale input_scale * weight_scale",
            )
        want = x.qparams.scale.astype(np.float64) * wq.scale.astype(np.float64)
        if not np.allclose(bq.scale.astype(np.float64), want, rtol=1e-5, atol=0.0):
            raise bad(
                kind,
                op,
                f"bias {b.name} scale must equal input_scale * weight_scale",
                "quantize the bias with scale input_scale * weight_scale",
            )
    return wq.scale, w


def check_same_qparams(kind: str, op: Op, a: Tensor, b: Tensor) -> None:
    qa, qb = a.qparams, b.qparams
    if (
        qa is None
        or qb is None
        or qa.scale.size != 1
        or qb.scale.size != 1
        or float(qa.scale[0]) != float(qb.scale[0])
        or int(qa.zero_point[0]) != int(qb.zero_point[0])
    ):
        raise bad(
            kind,
            op,
            f"input {a.name} and output {b.name} must have the same scale and "
            "zero point (TFLite int8 rule)",
            "give the output the input's quantization",
        )


# --- .tflite -------------------------------------------------------------------------------
def tflite_activation(tfl: Any, p: dict[str, Any]) -> int:
    """The op's fused activation as TFLite's ActivationFunctionType code."""
    return getattr(tfl.ActivationFunctionType, p.get("activation", "NONE"))


def tflite_padding(tfl: Any, p: dict[str, Any]) -> int:
    """The op's padding as TFLite's Padding code."""
    return getattr(tfl.Padding, p.get("padding", "VALID"))
