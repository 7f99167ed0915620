"""Geometry, params and checks shared by AVERAGE_POOL_2D and MAX_POOL_2D (TFLite rules:
int8 in and out with the same scale and zero point; the fused activation only clamps)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hilbench.npu.ops import _common as c
from hilbench.npu.ops import _record as r
from hilbench.npu.quant import activation_range

if TYPE_CHECKING:
    from hilbench.npu.graph import Graph, Op

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


def check(kind: str, graph: Graph, op: Op) -> None:
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
