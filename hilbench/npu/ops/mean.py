"""int8 MEAN over H and W (global average pool), TFLM reference-kernel semantics.

TFLM's MEAN for int8 runs ``reference_ops::QuantizedMeanOrSum``: int32 sums over the axes,
``shifted = sum - input_zero_point * count``, then ``MultiplyByQuantizedMultiplier`` with the
input/output scale multiplier re-scaled by 1/count (``(m << shift) / count``, shift =
floor(log2(count)) clamped to <= 32 and <= 31 + the multiplier's shift), ``+ output zero
point``, clamp to [-128, 127]. We precompute the re-scaled multiplier: the shapes are static.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from hilbench.npu.ops import _backend
from hilbench.npu.ops import _common as c
from hilbench.npu.ops import _record as r
from hilbench.npu.quant import multiply_by_quantized_multiplier, quantize_multiplier

if TYPE_CHECKING:
    from hilbench.npu.graph import Graph, Op

KIND = "MEAN"
OPCODE = 6
RECORD = r.Record(
    KIND,
    [
        r.Field("input_zero_point", "i", *r.I8),
        r.OUTPUT_OFFSET,
        r.Field("multiplier", "i", 0, 2**31 - 1),
        r.Field("shift", "i", -31, 30),
        # count <= 2**23 keeps sum - input_zero_point * count inside int32 (255 * 2**23 < 2**31),
        # where TFLM, hilbench.npu and the C firmware compute the same bytes
        r.Field("count", "I", 1, 2**23),
        r.Field("keep_dims", "B", 0, 1),
    ],
    per_channel=False,
)


def prepare(
    input_scale: float,
    input_zero_point: int,
    output_scale: float,
    output_zero_point: int,
    *,
    in_hw: tuple[int, int],
    keep_dims: bool = False,
) -> dict[str, Any]:
    """Params of a mean over an (H, W) window, as TFLM's Prepare + Eval compute them."""
    real = float(np.float32(input_scale)) / float(np.float32(output_scale))
    m, s = quantize_multiplier(real)
    count = int(in_hw[0]) * int(in_hw[1])
    sh = min(count.bit_length() - 1, 32, 31 + s)
    return {
        "input_zero_point": int(input_zero_point),
        "output_offset": int(output_zero_point),
        "multiplier": int((m << sh) // count),
        "shift": int(s - sh),
        "count": count,
        "keep_dims": int(bool(keep_dims)),
    }


def mean(x: np.ndarray, p: dict[str, Any]) -> np.ndarray:
    """x (S, N, H, W, C) int8 -> (S, N, C) int8 (the graph reshapes for keep_dims)."""
    total = x.sum(axis=(-3, -2), dtype=np.int64)
    total -= p["input_zero_point"] * p["count"]
    out = multiply_by_quantized_multiplier(total, p["multiplier"], p["shift"]).astype(np.int64)
    out += p["output_offset"]
    return np.clip(out, -128, 127).astype(np.int8)


def run(op: Op, inputs: list[np.ndarray | None]) -> np.ndarray:
    k = _backend.kernels()
    if k is not None:
        return k.mean(inputs[0], op.params)
    return mean(inputs[0], op.params)


def check(graph: Graph, op: Op) -> None:
    if len(op.inputs) != 1 or len(op.outputs) != 1:
        raise c.bad(KIND, op, "needs one input and one output", "fix the op")
    x, out = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    in_s, in_zp = c.per_tensor_activation(KIND, op, x)
    out_s, out_zp = c.per_tensor_activation(KIND, op, out)
    if len(x.shape) != 3:
        raise c.bad(
            KIND,
            op,
            f"input {x.name} must be (H, W, C), got {x.shape}",
            "average NHWC activations over H and W",
        )
    keep = bool(op.params.get("keep_dims", 0))
    want_shape = (1, 1, x.shape[2]) if keep else (x.shape[2],)
    if tuple(out.shape) != want_shape:
        raise c.bad(
            KIND,
            op,
            f"output shape {out.shape} should be {want_shape}",
            "fix the output tensor shape",
        )
    c.check_params_equal(
        KIND, op, prepare(in_s, in_zp, out_s, out_zp, in_hw=x.shape[:2], keep_dims=keep)
    )


def pack_params(params: dict[str, Any]) -> bytes:
    return RECORD.pack(params)


def unpack_params(data: bytes) -> dict[str, Any]:
    return RECORD.unpack(data)
