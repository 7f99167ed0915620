"""Geometry, params and checks shared by AVERAGE_POOL_2D and MAX_POOL_2D (TFLite rules:
int8 in and out with the same scale and zero point; the fused activation only clamps)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from hilbench.npu import native
from hilbench.npu.ir import GraphIR, Op
from hilbench.npu.native import lowering
from hilbench.npu.ops import common as c
from hilbench.npu.ops import record as r
from hilbench.npu.ops.registration import TfliteExport
from hilbench.npu.quant import activation_range

FIELDS = [
    r.ACT_MIN,
    r.ACT_MAX,
    r.Field("stride_h", "B", 1, 255),
    r.Field("stride_w", "B", 1, 255),
    r.Field("filter_h", "B", 1, 255),
    r.Field("filter_w", "B", 1, 255),
    r.Field("pad_top", "B", 0, 255),
    r.Field("pad_left", "B", 0, 255),
    r.Field("out_h", "H", 1, 65535),
    r.Field("out_w", "H", 1, 65535),
    r.enum("padding", c.PADDINGS),
    r.enum("activation", ("NONE", "RELU", "RELU6")),
]


def prepare(
    scale: float,
    zero_point: int,
    activation: str,
    *,
    in_hw: tuple[int, int],
    filter_hw: tuple[int, int],
    stride: tuple[int, int],
    padding: str = "VALID",
) -> dict[str, Any]:
    """Static pooling params for an int8 tensor of quantization (scale, zero_point)."""
    oh, ow, pt, pl = c.geometry(padding, in_hw, filter_hw, stride)
    lo, hi = activation_range(activation, float(scale), int(zero_point))
    return {
        "act_min": int(lo),
        "act_max": int(hi),
        "activation": activation,
        "padding": padding,
        "stride_h": int(stride[0]),
        "stride_w": int(stride[1]),
        "filter_h": int(filter_hw[0]),
        "filter_w": int(filter_hw[1]),
        "pad_top": pt,
        "pad_left": pl,
        "out_h": oh,
        "out_w": ow,
    }


def check(kind: str, graph: GraphIR, op: Op) -> None:
    if len(op.inputs) != 1 or len(op.outputs) != 1:
        raise c.bad(kind, op, "needs one input and one output", "fix the op")
    x, out = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    s, zp = c.per_tensor_activation(kind, op, x)
    c.per_tensor_activation(kind, op, out)
    c.check_same_qparams(kind, op, x, out)
    act = c.check_activation(kind, op)
    p = op.params
    if len(x.shape) != 3:
        raise c.bad(
            kind, op, f"input {x.name} must be (H, W, C), got {x.shape}", "pool NHWC activations"
        )
    if p.get("padding") not in c.PADDINGS:
        raise c.bad(kind, op, f"padding {p.get('padding')!r} unknown", f"use {c.PADDINGS}")
    try:
        want = prepare(
            s,
            zp,
            act,
            in_hw=x.shape[:2],
            filter_hw=(p["filter_h"], p["filter_w"]),
            stride=(p["stride_h"], p["stride_w"]),
            padding=p["padding"],
        )
    except KeyError as e:
        raise c.bad(kind, op, f"param {e} missing", "recompute the op params (prepare)") from None
    if min(want["stride_h"], want["stride_w"], want["filter_h"], want["filter_w"]) < 1:
        raise c.bad(kind, op, "strides and filter sizes must be >= 1", "fix the op params")
    if tuple(out.shape) != (want["out_h"], want["out_w"], x.shape[2]):
        raise c.bad(
            kind,
            op,
            f"output shape {out.shape} should be {(want['out_h'], want['out_w'], x.shape[2])}",
            "fix the output tensor shape",
        )
    c.check_params_equal(kind, op, want)


# --- native engine, cost, .tflite, blob checker ------------------------------------------
def lower_as(kind_code: int) -> Callable[[Any, int, Op, np.ndarray], None]:
    """The engine record of a pool run by the engine's op ``kind_code``."""

    def lower(lw: Any, i: int, op: Op, f: np.ndarray) -> None:
        p = op.params
        h, wd, ch = lw.tensors[op.inputs[0]].shape
        f[native.F["KIND"]] = kind_code
        lowering.set_fields(
            f, H=h, W=wd, C=ch, OH=p["out_h"], OW=p["out_w"], KH=p["filter_h"],
            KW=p["filter_w"], SH=p["stride_h"], SW=p["stride_w"], PT=p["pad_top"],
            PL=p["pad_left"], LO=p["act_min"], HI=p["act_max"],
        )  # fmt: skip

    return lower


def macs(graph: GraphIR, op: Op) -> int:
    n_out = math.prod(graph.tensors[op.outputs[0]].shape)
    return n_out * op.params["filter_h"] * op.params["filter_w"]


def tflite_export(tfl: Any, p: dict[str, Any], out_shape: tuple[int, ...]) -> TfliteExport:
    o = tfl.Pool2DOptionsT()
    o.padding, o.fusedActivationFunction = c.tflite_padding(tfl, p), c.tflite_activation(tfl, p)
    o.strideH, o.strideW = p["stride_h"], p["stride_w"]
    o.filterHeight, o.filterWidth = p["filter_h"], p["filter_w"]
    return TfliteExport(tfl.BuiltinOptions.Pool2DOptions, o)


def tflite_importer(prep: Callable[..., dict[str, Any]], kind: str) -> Callable[[Any], Op]:
    """A pool's .tflite import, its params made by ``prep``."""

    def tflite_import(t: Any) -> Op:
        o = t.opts
        p = prep(
            t.in_s,
            t.in_zp,
            t.activation(),
            in_hw=t.xs[:2],
            filter_hw=(int(o.filterHeight), int(o.filterWidth)),
            stride=(int(o.strideH), int(o.strideW)),
            padding=t.padding,
        )
        return Op(kind, [t.x], [t.y], p)

    return tflite_import


def blob_check(chk: Any, oi: int, op: Any) -> None:
    x = chk.act_in(oi, op, op.inputs[0])
    chk.act_out(oi, op)
    chk.rank3(oi, op, x)
    f = op.fields
    chk.geometry(oi, op, x, (f["filter_h"], f["filter_w"]), (1, 1), x.dims[2])
