"""int8 DEPTHWISE_CONV_2D, TFLM reference-kernel semantics, batched over weight sets.

Reference: ``reference_integer_ops::DepthwiseConvPerChannel``: output channel
``oc = ic * depth_multiplier + m`` sums ``w[0, ky, kx, oc] * (x[y, x, ic] + input_offset)``
over the taps inside the input, adds ``bias[oc]``, requantizes with channel ``oc``'s
multiplier and shift, adds ``output_offset`` and clamps.

The filter is TFLite's ``[1, kh, kw, in * depth_multiplier]`` (optionally with a leading S
axis). The taps are accumulated elementwise in float32, exact: kh * kw * 255 * 127 < 2**24
for any kernel up to 22x22 (float64 beyond).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hilbench.npu.ir import GraphIR, Op
from hilbench.npu.native import lowering
from hilbench.npu.ops import backend, conv2d
from hilbench.npu.ops import common as c
from hilbench.npu.ops import record as r
from hilbench.npu.ops.registration import OpRegistration, TfliteExport

KIND = "DEPTHWISE_CONV_2D"
OPCODE = 3
WEIGHT_INPUT = 1
BIAS_INPUT = 2

RECORD = r.Record(
    KIND,
    [
        r.INPUT_OFFSET,
        r.OUTPUT_OFFSET,
        r.ACT_MIN,
        r.ACT_MAX,
        *conv2d.GEOMETRY_FIELDS,
        r.Field("depth_multiplier", "H", 1, 65535),
    ],
    per_channel=True,
)


def depthwise_conv2d(
    x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, p: dict[str, Any]
) -> np.ndarray:
    """x (Sx, N, H, W, C) int8; w (1, KH, KW, C*M) or (S, 1, KH, KW, C*M) int8; bias (C*M,)
    or (S, C*M) int32 or None -> (S', N, OH, OW, C*M) int8."""
    kh, kw, oc = w.shape[-3:]
    mult = p["depth_multiplier"]
    io = p["input_offset"]
    amax, wmax = c.absmax(x, io), c.absmax(w)
    ft = c.exact_dtype(kh * kw, amax, wmax)
    xf = x.astype(ft)
    xf += ft(io)
    if mult > 1:
        xf = np.repeat(xf, mult, axis=-1)
    xp = c.padded(xf, p, (kh, kw), 0.0)
    wf = w.astype(ft)
    batched = w.ndim == 5
    acc = tmp = None
    for ky, kx, view in c.taps(xp, p, (kh, kw)):
        tap = wf[:, 0, ky, kx, :].reshape(-1, 1, 1, 1, oc) if batched else wf[0, ky, kx, :]
        if acc is None:
            acc = view * tap
            tmp = np.empty_like(acc)
        else:
            np.multiply(view, tap, out=tmp)
            acc += tmp
    return c.requantize(acc, p, bias, bound=kh * kw * amax * wmax)


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
    depth_multiplier: int = 1,
    stride: tuple[int, int] = (1, 1),
    dilation: tuple[int, int] = (1, 1),
    padding: str = "SAME",
) -> dict[str, Any]:
    p = conv2d.prepare(
        input_scale,
        input_zero_point,
        weight_scales,
        output_scale,
        output_zero_point,
        activation,
        in_hw=in_hw,
        k_hw=k_hw,
        stride=stride,
        dilation=dilation,
        padding=padding,
    )
    p["depth_multiplier"] = int(depth_multiplier)
    return p


def run(op: Op, inputs: list[np.ndarray | None]) -> np.ndarray:
    bias = inputs[2] if len(inputs) > 2 else None
    k = backend.kernels()
    if k is not None:
        return k.depthwise_conv2d(inputs[0], inputs[1], bias, op.params)
    return depthwise_conv2d(inputs[0], inputs[1], bias, op.params)


def check(graph: GraphIR, op: Op) -> None:
    if len(op.inputs) not in (2, 3) or len(op.outputs) != 1:
        raise c.bad(KIND, op, "needs inputs (input, filter[, bias]) and one output", "fix the op")
    t = graph.tensors
    x, w, out = t[op.inputs[0]], t[op.inputs[1]], t[op.outputs[0]]
    in_s, in_zp = c.per_tensor_activation(KIND, op, x)
    out_s, out_zp = c.per_tensor_activation(KIND, op, out)
    m = int(op.params.get("depth_multiplier", 0))
    if (
        len(w.shape) != 4
        or len(x.shape) != 3
        or w.shape[0] != 1
        or m < 1
        or w.shape[3] != x.shape[2] * m
    ):
        raise c.bad(
            KIND,
            op,
            f"filter {w.name} {w.shape} must be [1, kh, kw, in * "
            f"depth_multiplier] over input {x.name} {x.shape} with depth_multiplier {m}",
            "match the filter to the input depth and multiplier",
        )
    wscale, _ = c.check_filter_and_bias(KIND, graph, op, w.shape[3], 3)
    conv2d.check_geometry(
        KIND, op, x.shape, out.shape, w.shape[1:3], w.shape[3], in_s, in_zp, wscale, out_s, out_zp
    )


# --- native engine, cost, .tflite, blob checker ------------------------------------------
def lower(lw: lowering.Lowering, i: int, op: Op, f: np.ndarray) -> None:
    p = op.params
    w = lw.tensors[op.inputs[1]].shape
    lowering.lower_conv(
        lw, i, op, f, depthwise=True, hwc=lw.tensors[op.inputs[0]].shape,
        kernel=(w[1], w[2], w[3]),
        window=(p["out_h"], p["out_w"], p["stride_h"], p["stride_w"], p.get("dilation_h", 1),
                p.get("dilation_w", 1), p["pad_top"], p["pad_left"]),
    )  # fmt: skip


def tflite_export(tfl: Any, p: dict[str, Any], out_shape: tuple[int, ...]) -> TfliteExport:
    o = conv2d.tflite_window_options(tfl, tfl.DepthwiseConv2DOptionsT(), p)
    o.depthMultiplier = p["depth_multiplier"]
    return TfliteExport(tfl.BuiltinOptions.DepthwiseConv2DOptions, o)


def macs(graph: GraphIR, op: Op) -> int:
    t = graph.tensors
    w = t[op.inputs[1]].shape
    return math.prod(t[op.outputs[0]].shape) * w[1] * w[2]


def tflite_import(t: Any) -> Op:
    names, w = t.filter_inputs()
    act = t.activation()
    geo = conv2d.tflite_geometry(t, w)
    m = max(1, w.shape[3] // max(1, t.xs[2]))
    p = prepare(t.in_s, t.in_zp, w.qparams.scale, t.out_s, t.out_zp, act, depth_multiplier=m, **geo)
    return Op(KIND, names, [t.y], p)


def blob_check(chk: Any, oi: int, op: Any) -> None:
    x = chk.act_in(oi, op, op.inputs[0])
    chk.act_out(oi, op)
    chk.rank3(oi, op, x)
    w = chk.t[op.inputs[1]]
    cd = x.dims[2] * op.fields["depth_multiplier"]
    if not (
        w.constant and w.dtype == chk.INT8 and w.rank == 4 and w.dims[0] == 1 and w.dims[3] == cd
    ):
        raise chk.fail("dw_filter", oi, op.kind, op.inputs[1], cd)
    chk.filter(oi, op, cd, 3)
    dil = (op.fields["dilation_h"], op.fields["dilation_w"])
    chk.geometry(oi, op, x, (w.dims[1], w.dims[2]), dil, cd)


REGISTRATION = OpRegistration(
    kind=KIND, opcode=OPCODE, record=RECORD, arity=(2, 3, 1), run=run, check=check,
    lower=lower, macs=macs, cpu_rate="depthwise", tflite_export=tflite_export,
    tflite_import=tflite_import, blob_check=blob_check,
    weight_input=WEIGHT_INPUT, bias_input=BIAS_INPUT,
)  # fmt: skip
