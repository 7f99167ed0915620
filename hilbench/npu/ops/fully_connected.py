"""int8 FULLY_CONNECTED, TFLM reference-kernel semantics, batched over weight sets.

Reference: ``tensorflow/lite/kernels/internal/reference/integer_ops/fully_connected.h``::

    acc = sum_k w[m, k] * (x[n, k] + input_offset)      (int32, weights symmetric: zp 0)
    acc += bias[m]
    acc = MultiplyByQuantizedMultiplier(acc, multiplier[m], shift[m])
    out = clamp(acc + output_offset, act_min, act_max)

The dot products go through BLAS in floating point, which is exact: float32 while every
partial sum is below 2**24 (checked per call from the actual data), float64 otherwise
(|sum| <= K * 255 * 128 < 2**53 for any K this project meets).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hilbench.errors import ModelError
from hilbench.npu.ir import GraphIR, Op
from hilbench.npu.native import lowering
from hilbench.npu.ops import backend
from hilbench.npu.ops import common as c
from hilbench.npu.ops import record as r
from hilbench.npu.ops.common import conv_requant_params
from hilbench.npu.ops.registration import OpRegistration, TfliteExport
from hilbench.npu.quant import (
    ACTIVATIONS,
    multiply_by_quantized_multiplier,
    wrap_int32,
)

KIND = "FULLY_CONNECTED"
OPCODE = 1
WEIGHT_INPUT = 1
BIAS_INPUT = 2

_F32_EXACT = 1 << 24


def fully_connected(
    x: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray | None,
    *,
    input_offset: int,
    output_offset: int,
    multiplier: int | np.ndarray,
    shift: int | np.ndarray,
    act_min: int,
    act_max: int,
) -> np.ndarray:
    """int8 FC. ``x`` (S, N, K) int8; ``w`` (M, K) or (S, M, K) int8; ``bias`` (M,) or (S, M)
    int32 or None; per-tensor scalars or per-channel (M,) ``multiplier``/``shift``.
    Returns (S, N, M) int8 (S broadcast between activation, weights and bias)."""
    x = np.asarray(x)
    w = np.asarray(w)
    if x.ndim == 2:
        x = x[None]
    s_x, n, k = x.shape
    m = w.shape[-2]
    if x.size:
        lo, hi = int(x.min()) + input_offset, int(x.max()) + input_offset
        amax = max(abs(lo), abs(hi))
    else:
        amax = 0
    wmax = max(abs(int(w.min())), abs(int(w.max()))) if w.size else 0
    ft = np.float32 if k * amax * wmax <= _F32_EXACT else np.float64
    xf = x.astype(ft)
    xf += ft(input_offset)
    wf = w.astype(ft)
    if w.ndim == 2:
        acc_f = (xf.reshape(s_x * n, k) @ wf.T).reshape(s_x, n, m)
    elif s_x == 1:
        s_w = w.shape[0]
        acc_f = (xf[0] @ wf.reshape(s_w * m, k).T).reshape(n, s_w, m).transpose(1, 0, 2)
    else:
        acc_f = np.matmul(xf, wf.transpose(0, 2, 1))
    acc = acc_f.astype(np.int64)
    if bias is not None:
        b = np.asarray(bias, dtype=np.int64)
        acc = acc + (b[:, None, :] if b.ndim == 2 else b)
    acc = wrap_int32(acc)  # the C accumulator is int32
    out = multiply_by_quantized_multiplier(acc, multiplier, shift).astype(np.int64)
    out += output_offset
    np.clip(out, act_min, act_max, out=out)
    return out.astype(np.int8)


def prepare(
    input_scale: float,
    input_zero_point: int,
    weight_scales: np.ndarray,
    output_scale: float,
    output_zero_point: int,
    activation: str,
) -> dict[str, Any]:
    """Integer kernel params from float32 scales, as TFLM's FC Prepare computes them
    (the same computation as conv's: ``common.conv_requant_params``)."""
    return conv_requant_params(
        input_scale, input_zero_point, weight_scales, output_scale, output_zero_point, activation
    )


def run(op: Op, inputs: list[np.ndarray | None]) -> np.ndarray:
    """Graph entry: ``inputs[0]`` (S, N, *in_shape) activation, then weights, optional bias."""
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    k = w.shape[-1]
    x = x.reshape(x.shape[0], x.shape[1], k)
    p = op.params
    kern = backend.kernels()
    if kern is not None:
        return kern.fully_connected(x, w, bias, p, backend.op_cache(op))
    return fully_connected(
        x,
        w,
        bias,
        input_offset=p["input_offset"],
        output_offset=p["output_offset"],
        multiplier=p["multiplier"],
        shift=p["shift"],
        act_min=p["act_min"],
        act_max=p["act_max"],
    )


def _bad(rule: str, where: str, fix: str) -> ModelError:
    return ModelError(f"{where}: {rule}", fix)


def check(graph: GraphIR, op: Op) -> None:
    """Shapes, TFLite quantization rules and integer params of one FC op."""
    where = f"{KIND} op producing {op.outputs[0] if op.outputs else '?'}"
    if len(op.inputs) not in (2, 3) or len(op.outputs) != 1:
        raise _bad("needs inputs (input, weights[, bias]) and one output", where, "fix the op")
    t = graph.tensors
    x, w, out = t[op.inputs[0]], t[op.inputs[1]], t[op.outputs[0]]
    b = t[op.inputs[2]] if len(op.inputs) == 3 else None
    if w.data is None or w.dtype != "int8" or len(w.shape) != 2:
        raise _bad(
            f"weights {w.name} must be a constant int8 [out, in] matrix",
            where,
            "store the filter as int8 data of rank 2",
        )
    m, k = w.shape
    if x.dtype != "int8" or int(np.prod(x.shape)) != k:
        raise _bad(
            f"input {x.name} must be int8 with {k} elements per sample, got {x.dtype} {x.shape}",
            where,
            "match the input size to the weights' columns",
        )
    if out.dtype != "int8" or tuple(out.shape) != (m,):
        raise _bad(
            f"output {out.name} must be int8 of shape ({m},), got {out.dtype} {out.shape}",
            where,
            "match the output size to the weights' rows",
        )
    for a in (x, out):
        if a.qparams is None or a.qparams.scale.size != 1:
            raise _bad(
                f"activation {a.name} must be per-tensor quantized",
                where,
                "give it one scale and one zero point",
            )
    wq = w.qparams
    if wq is None:
        raise _bad(f"weights {w.name} have no quantization", where, "quantize the weights")
    nch = wq.scale.size
    if nch != 1 and (nch != m or wq.axis != 0):
        raise _bad(
            f"weights {w.name} must be per-tensor or per-channel on axis 0 with {m} "
            f"scales, got {nch} on axis {wq.axis}",
            where,
            "quantize per output row",
        )
    if b is not None:
        if b.data is None or b.dtype != "int32" or tuple(b.shape) != (m,):
            raise _bad(
                f"bias {b.name} must be constant int32 of shape ({m},)",
                where,
                "store the bias as int32 data",
            )
        bq = b.qparams
        if bq is None or bq.scale.size != nch or np.any(bq.zero_point != 0):
            raise _bad(
                f"bias {b.name} must have zero point 0 and one scale per weight scale",
                where,
                "quantize the bias with scale input_scale * weight_scale",
            )
        want = x.qparams.scale.astype(np.float64) * wq.scale.astype(np.float64)
        if not np.allclose(bq.scale.astype(np.float64), want, rtol=1e-5, atol=0.0):
            raise _bad(
                f"bias {b.name} scale must equal input_scale * weight_scale",
                where,
                "quantize the bias with scale input_scale * weight_scale",
            )
    p = op.params
    act = p.get("activation", "NONE")
    if act not in ACTIVATIONS:
        raise _bad(f"unknown fused activation {act!r}", where, f"use one of {ACTIVATIONS}")
    want_p = prepare(
        float(x.qparams.scale[0]),
        int(x.qparams.zero_point[0]),
        wq.scale,
        float(out.qparams.scale[0]),
        int(out.qparams.zero_point[0]),
        act,
    )
    for key in ("input_offset", "output_offset", "act_min", "act_max"):
        if int(p.get(key, 1 << 40)) != want_p[key]:
            raise _bad(
                f"param {key}={p.get(key)} disagrees with the tensors' quantization "
                f"(expected {want_p[key]})",
                where,
                "recompute the op params (prepare)",
            )
    for key in ("multiplier", "shift"):
        got = np.asarray(p.get(key, []))
        if got.shape != want_p[key].shape or np.any(got != want_p[key]):
            raise _bad(
                f"param {key} disagrees with the tensors' quantization",
                where,
                "recompute the op params (prepare)",
            )


# --- blob params --------------------------------------------------------------------------
# i32 input_offset, i32 output_offset, i32 act_min, i32 act_max,
# u16 n_channels, u8 activation (0 NONE, 1 RELU, 2 RELU6), u8 reserved (0),
# i32 multiplier[n_channels], i8 shift[n_channels], zero padding to a multiple of 4.
RECORD = r.Record(
    KIND,
    [
        r.INPUT_OFFSET,
        r.OUTPUT_OFFSET,
        r.ACT_MIN,
        r.ACT_MAX,
        r.CHANNELS,
        r.enum("activation", ACTIVATIONS),
        r.Field("reserved", "B", 0, 0),
    ],
    per_channel=True,
    count=r.CHANNELS.name,
)


# --- native engine, cost, .tflite, blob checker ------------------------------------------
def lower(lw: lowering.Lowering, i: int, op: Op, f: np.ndarray) -> None:
    """A GEMM of one output pixel: the reduction is the whole input."""
    oc, k = lw.tensors[op.inputs[1]].shape
    lowering.lower_conv(
        lw, i, op, f, depthwise=False, hwc=(1, 1, k), kernel=(1, 1, oc),
        window=(1, 1, 1, 1, 1, 1, 0, 0),
    )  # fmt: skip


def macs(graph: GraphIR, op: Op) -> int:
    t = graph.tensors
    return math.prod(t[op.outputs[0]].shape) * math.prod(t[op.inputs[1]].shape[1:])


def tflite_export(tfl: Any, p: dict[str, Any], out_shape: tuple[int, ...]) -> TfliteExport:
    o = tfl.FullyConnectedOptionsT()
    o.fusedActivationFunction = c.tflite_activation(tfl, p)
    o.weightsFormat = tfl.FullyConnectedOptionsWeightsFormat.DEFAULT
    o.keepNumDims = False
    return TfliteExport(tfl.BuiltinOptions.FullyConnectedOptions, o)


def tflite_import(t: Any) -> Op:
    names, w = t.filter_inputs()
    act = t.activation()
    if getattr(t.opts, "keepNumDims", False):
        t.tensors[t.y].shape = (t.tensors[t.y].shape[-1],)
    p = prepare(t.in_s, t.in_zp, w.qparams.scale, t.out_s, t.out_zp, act)
    return Op(KIND, names, [t.y], p)


def blob_check(chk: Any, oi: int, op: Any) -> None:
    x = chk.act_in(oi, op, op.inputs[0])
    y = chk.act_out(oi, op)
    w = chk.t[op.inputs[1]]
    if not (w.constant and w.dtype == chk.INT8 and w.rank == 2):
        raise chk.fail("fc_weights", oi, op.kind, op.inputs[1])
    m, k = w.dims
    if x.elements != k:
        raise chk.fail("fc_input", oi, op.kind, op.inputs[0], x.elements, k)
    if y.dims != (m,):
        raise chk.fail("shape1", oi, op.kind, op.outputs[0], m)
    chk.filter(oi, op, m, 0)


REGISTRATION = OpRegistration(
    kind=KIND, opcode=OPCODE, record=RECORD, arity=(2, 3, 1), run=run, check=check,
    lower=lower, macs=macs, cpu_rate="dense", tflite_export=tflite_export,
    tflite_import=tflite_import, blob_check=blob_check,
    weight_input=WEIGHT_INPUT, bias_input=BIAS_INPUT,
)  # fmt: skip
