"""int8 CONV_2D, TFLM reference-kernel semantics, batched over weight sets.

Reference: ``reference_integer_ops::ConvPerChannel``: for every output pixel and channel,
``acc = sum w[oc, ky, kx, ic] * (x[y, x, ic] + input_offset)`` over the taps inside the input
(padding contributes nothing), ``+ bias[oc]``, ``MultiplyByQuantizedMultiplier`` with the
channel's multiplier and shift, ``+ output_offset``, clamp to the fused activation range.

Activations are NHWC with a leading weight-set axis: (S, N, H, W, C). The filter is TFLite's
``[out, kh, kw, in]``, optionally with a leading S axis. The sums run as im2col + one BLAS
matmul in float32 when every partial sum is provably below 2**24, else in float64: exact.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hilbench.npu.ir import GraphIR, Op
from hilbench.npu.native import lowering
from hilbench.npu.ops import backend
from hilbench.npu.ops import common as c
from hilbench.npu.ops import record as r
from hilbench.npu.ops.registration import OpRegistration, TfliteExport

KIND = "CONV_2D"
OPCODE = 2
WEIGHT_INPUT = 1
BIAS_INPUT = 2

GEOMETRY_FIELDS = [
    r.Field("stride_h", "B", 1, 255),
    r.Field("stride_w", "B", 1, 255),
    r.Field("dilation_h", "B", 1, 255),
    r.Field("dilation_w", "B", 1, 255),
    r.Field("pad_top", "B", 0, 255),
    r.Field("pad_left", "B", 0, 255),
    r.Field("out_h", "H", 1, 65535),
    r.Field("out_w", "H", 1, 65535),
    r.enum("padding", c.PADDINGS),
    r.enum("activation", ("NONE", "RELU", "RELU6")),
]
RECORD = r.Record(
    KIND,
    [r.INPUT_OFFSET, r.OUTPUT_OFFSET, r.ACT_MIN, r.ACT_MAX, *GEOMETRY_FIELDS],
    per_channel=True,
)


def im2col(xf: np.ndarray, p: dict[str, Any], k_hw: tuple[int, int]) -> np.ndarray:
    """(…, H, W, C) offset-applied float input -> (…, OH, OW, KH*KW*C), taps (ky, kx, c)."""
    xp = c.padded(xf, p, k_hw, 0.0)
    if k_hw == (1, 1) and p["stride_h"] == p["stride_w"] == 1:
        return xp
    return np.concatenate([v for _, _, v in c.taps(xp, p, k_hw)], axis=-1)


def batched_matmul(cols: np.ndarray, wf: np.ndarray) -> np.ndarray:
    """cols (Sx, N, OH, OW, K) @ filter (O, K) or (S, O, K) -> (S', N, OH, OW, O)."""
    sx, k = cols.shape[0], cols.shape[-1]
    lead = cols.shape[1:-1]
    o = wf.shape[-2]
    if wf.ndim == 2:
        return (cols.reshape(-1, k) @ wf.T).reshape(sx, *lead, o)
    s = wf.shape[0]
    if sx == 1:
        acc = cols.reshape(-1, k) @ wf.reshape(s * o, k).T
        return np.moveaxis(acc.reshape(*lead, s, o), -2, 0)
    return np.matmul(cols.reshape(sx, -1, k), wf.transpose(0, 2, 1)).reshape(sx, *lead, o)


def conv2d(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, p: dict[str, Any]) -> np.ndarray:
    """x (Sx, N, H, W, C) int8; w (O, KH, KW, C) or (S, O, KH, KW, C) int8; bias (O,) or
    (S, O) int32 or None -> (S', N, OH, OW, O) int8."""
    o, kh, kw, cin = w.shape[-4:]
    io = p["input_offset"]
    amax, wmax = c.absmax(x, io), c.absmax(w)
    ft = c.exact_dtype(kh * kw * cin, amax, wmax)
    xf = x.astype(ft)
    xf += ft(io)
    cols = im2col(xf, p, (kh, kw))
    wf = w.astype(ft).reshape(*w.shape[:-4], o, kh * kw * cin)
    acc = batched_matmul(cols, wf)
    return c.requantize(acc, p, bias, bound=kh * kw * cin * amax * wmax)


def prepare(
    input_scale: float,
    input_zero_point: int,
    weight_scales: np.ndarray,
    output_scale: float,
    output_zero_point: int,
    activation: str,
    *,
    in_hw: tuple[int, int],
    k_hw: tuple[int, int],
    stride: tuple[int, int] = (1, 1),
    dilation: tuple[int, int] = (1, 1),
    padding: str = "SAME",
) -> dict[str, Any]:
    """Integer params as TFLM's Prepare computes them, plus the static geometry."""
    p = c.conv_requant_params(
        input_scale, input_zero_point, weight_scales, output_scale, output_zero_point, activation
    )
    oh, ow, pt, pl = c.geometry(padding, in_hw, k_hw, stride, dilation)
    p.update(
        padding=padding,
        stride_h=stride[0],
        stride_w=stride[1],
        dilation_h=dilation[0],
        dilation_w=dilation[1],
        pad_top=pt,
        pad_left=pl,
        out_h=oh,
        out_w=ow,
    )
    return p


def run(op: Op, inputs: list[np.ndarray | None]) -> np.ndarray:
    bias = inputs[2] if len(inputs) > 2 else None
    k = backend.kernels()
    if k is not None:
        return k.conv2d(inputs[0], inputs[1], bias, op.params, backend.op_cache(op))
    return conv2d(inputs[0], inputs[1], bias, op.params)


def check(graph: GraphIR, op: Op) -> None:
    if len(op.inputs) not in (2, 3) or len(op.outputs) != 1:
        raise c.bad(KIND, op, "needs inputs (input, filter[, bias]) and one output", "fix the op")
    t = graph.tensors
    x, w, out = t[op.inputs[0]], t[op.inputs[1]], t[op.outputs[0]]
    in_s, in_zp = c.per_tensor_activation(KIND, op, x)
    out_s, out_zp = c.per_tensor_activation(KIND, op, out)
    if len(w.shape) != 4 or len(x.shape) != 3 or w.shape[3] != x.shape[2]:
        raise c.bad(
            KIND,
            op,
            f"filter {w.name} {w.shape} must be [out, kh, kw, in] over input "
            f"{x.name} (H, W, C) {x.shape}",
            "match the filter's depth to the input",
        )
    wscale, _ = c.check_filter_and_bias(KIND, graph, op, w.shape[0], 0)
    check_geometry(
        KIND, op, x.shape, out.shape, w.shape[1:3], w.shape[0], in_s, in_zp, wscale, out_s, out_zp
    )


def check_geometry(
    kind: str,
    op: Op,
    xs: tuple[int, ...],
    outs: tuple[int, ...],
    k_hw: tuple[int, int],
    n_out: int,
    in_s: float,
    in_zp: int,
    wscale: np.ndarray,
    out_s: float,
    out_zp: int,
) -> None:
    """Shared by CONV_2D and DEPTHWISE_CONV_2D: geometry and integer params."""
    p = op.params
    act = c.check_activation(kind, op)
    if p.get("padding") not in c.PADDINGS:
        raise c.bad(kind, op, f"padding {p.get('padding')!r} unknown", f"use {c.PADDINGS}")
    try:
        stride = (int(p["stride_h"]), int(p["stride_w"]))
        dil = (int(p["dilation_h"]), int(p["dilation_w"]))
    except KeyError as e:
        raise c.bad(kind, op, f"param {e} missing", "recompute the op params (prepare)") from None
    if min(stride + dil) < 1:
        raise c.bad(
            kind,
            op,
            f"strides {stride} and dilations {dil} must be >= 1",
            "use positive strides and dilations",
        )
    want = prepare(
        in_s,
        in_zp,
        wscale,
        out_s,
        out_zp,
        act,
        in_hw=(xs[0], xs[1]),
        k_hw=k_hw,
        stride=stride,
        dilation=dil,
        padding=p["padding"],
    )
    if tuple(outs) != (want["out_h"], want["out_w"], n_out):
        raise c.bad(
            kind,
            op,
            f"output shape {tuple(outs)} should be {(want['out_h'], want['out_w'], n_out)}",
            "fix the output tensor shape",
        )
    want.pop("activation")
    want.pop("padding")
    c.check_params_equal(kind, op, want)


# --- native engine, cost, .tflite, blob checker ------------------------------------------
def lower(lw: lowering.Lowering, i: int, op: Op, f: np.ndarray) -> None:
    p = op.params
    w = lw.tensors[op.inputs[1]].shape
    lowering.lower_conv(
        lw, i, op, f, depthwise=False, hwc=lw.tensors[op.inputs[0]].shape,
        kernel=(w[1], w[2], w[0]),
        window=(p["out_h"], p["out_w"], p["stride_h"], p["stride_w"], p.get("dilation_h", 1),
                p.get("dilation_w", 1), p["pad_top"], p["pad_left"]),
    )  # fmt: skip


def tflite_window_options(tfl: Any, o: Any, p: dict[str, Any]) -> Any:
    """Padding, activation, strides and dilations into a conv's .tflite options ``o``."""
    o.padding, o.fusedActivationFunction = c.tflite_padding(tfl, p), c.tflite_activation(tfl, p)
    o.strideH, o.strideW = p["stride_h"], p["stride_w"]
    o.dilationHFactor, o.dilationWFactor = p["dilation_h"], p["dilation_w"]
    return o


def tflite_export(tfl: Any, p: dict[str, Any], out_shape: tuple[int, ...]) -> TfliteExport:
    o = tflite_window_options(tfl, tfl.Conv2DOptionsT(), p)
    return TfliteExport(tfl.BuiltinOptions.Conv2DOptions, o)


def tflite_geometry(t: Any, w: Any) -> dict[str, Any]:
    """The window arguments of ``prepare`` from a .tflite op's options."""
    if len(t.xs) != 3:
        raise t.fail(f"{t.layer}: input '{t.x}' must be NHWC", "use 4-D activations")
    o = t.opts
    return {
        "in_hw": t.xs[:2],
        "k_hw": w.shape[1:3],
        "padding": t.padding,
        "stride": (int(o.strideH), int(o.strideW)),
        "dilation": (int(o.dilationHFactor or 1), int(o.dilationWFactor or 1)),
    }


def macs(graph: GraphIR, op: Op) -> int:
    t = graph.tensors
    return math.prod(t[op.outputs[0]].shape) * math.prod(t[op.inputs[1]].shape[1:])


def tflite_import(t: Any) -> Op:
    names, w = t.filter_inputs()
    act = t.activation()
    geo = tflite_geometry(t, w)
    p = prepare(t.in_s, t.in_zp, w.qparams.scale, t.out_s, t.out_zp, act, **geo)
    return Op(KIND, names, [t.y], p)


def blob_check(chk: Any, oi: int, op: Any) -> None:
    x = chk.act_in(oi, op, op.inputs[0])
    chk.act_out(oi, op)
    chk.rank3(oi, op, x)
    w = chk.t[op.inputs[1]]
    cin = x.dims[2]
    if not (w.constant and w.dtype == chk.INT8 and w.rank == 4 and w.dims[3] == cin):
        raise chk.fail("conv_filter", oi, op.kind, op.inputs[1], cin)
    chk.filter(oi, op, w.dims[0], 0)
    dil = (op.fields["dilation_h"], op.fields["dilation_w"])
    chk.geometry(oi, op, x, (w.dims[1], w.dims[2]), dil, w.dims[0])


REGISTRATION = OpRegistration(
    kind=KIND, opcode=OPCODE, record=RECORD, arity=(2, 3, 1), run=run, check=check,
    lower=lower, macs=macs, cpu_rate="dense", tflite_export=tflite_export,
    tflite_import=tflite_import, blob_check=blob_check,
    weight_input=WEIGHT_INPUT, bias_input=BIAS_INPUT,
)  # fmt: skip
