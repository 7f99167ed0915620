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

from typing import TYPE_CHECKING, Any

import numpy as np

from hilbench.npu.ops import _backend, conv2d
from hilbench.npu.ops import _common as c
from hilbench.npu.ops import _record as r

if TYPE_CHECKING:
    from hilbench.npu.graph import Graph, Op

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
    k = _backend.kernels()
    if k is not None:
        return k.depthwise_conv2d(inputs[0], inputs[1], bias, op.params)
    return depthwise_conv2d(inputs[0], inputs[1], bias, op.params)


def check(graph: Graph, op: Op) -> None:
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


def pack_params(params: dict[str, Any]) -> bytes:
    return RECORD.pack(params)


def unpack_params(data: bytes) -> dict[str, Any]:
    return RECORD.unpack(data)
