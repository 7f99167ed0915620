"""int8 MEAN over H and W (global average pool), TFLM reference-kernel semantics.

TFLM's MEAN for int8 runs ``reference_ops::QuantizedMeanOrSum``: int32 sums over the axes,
``shifted = sum - input_zero_point * count``, then ``MultiplyByQuantizedMultiplier`` with the
input/output scale multiplier re-scaled by 1/count (``(m << shift) / count``, shift =
floor(log2(count)) clamped to <= 32 and <= 31 + the multiplier's shift), ``+ output zero
point``, clamp to [-128, 127]. We precompute the re-scaled multiplier: the shapes are static.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hilbench.npu import native
from hilbench.npu.ir import GraphIR, Op
from hilbench.npu.native import lowering
from hilbench.npu.ops import backend
from hilbench.npu.ops import common as c
from hilbench.npu.ops import record as r
from hilbench.npu.ops.registration import OpRegistration, TfliteExport
from hilbench.npu.quant import multiply_by_quantized_multiplier, quantize_multiplier

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
    k = backend.kernels()
    if k is not None:
        return k.mean(inputs[0], op.params)
    return mean(inputs[0], op.params)


def check(graph: GraphIR, op: Op) -> None:
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


# --- native engine, cost, .tflite, blob checker ------------------------------------------
def lower(lw: lowering.Lowering, i: int, op: Op, f: np.ndarray) -> None:
    p = op.params
    h, wd, ch = lw.tensors[op.inputs[0]].shape
    f[native.F["KIND"]] = native.OP_MEAN
    lw.o16_max = max(lw.o16_max, native.round_up(ch, 16))  # its sums use the acc scratch
    if h * wd * 255 >= 2**32:
        raise native.Unsupported(f"MEAN over {h}x{wd} pixels: uint32 sums could wrap")
    lowering.set_fields(
        f, H=h, W=wd, C=ch, M1=p["multiplier"], S1=p["shift"], ZP=p["input_zero_point"],
        COUNT=p["count"], OO=p["output_offset"],
    )  # fmt: skip


def macs(graph: GraphIR, op: Op) -> int:
    return math.prod(graph.tensors[op.inputs[0]].shape)


def tflite_export(tfl: Any, p: dict[str, Any], out_shape: tuple[int, ...]) -> TfliteExport:
    o = tfl.ReducerOptionsT()
    o.keepDims = bool(p["keep_dims"])
    return TfliteExport(tfl.BuiltinOptions.ReducerOptions, o, (("axis", np.array([1, 2], "<i4")),))


def tflite_import(t: Any) -> Op:
    axis_t = t.tensors[t.names[1]]
    axes = sorted(int(a) % 4 for a in np.asarray(axis_t.data).reshape(-1))
    if axis_t.data is None or axes != [1, 2] or len(t.xs) != 3:
        raise t.fail(
            f"{t.layer}: MEAN over axes {axes} of a {len(t.xs) + 1}-D tensor is unsupported",
            "reduce a 4-D NHWC tensor over axes [1, 2]",
        )
    keep = bool(getattr(t.opts, "keepDims", False))
    p = prepare(t.in_s, t.in_zp, t.out_s, t.out_zp, in_hw=t.xs[:2], keep_dims=keep)
    return Op(KIND, [t.x], [t.y], p)


def blob_check(chk: Any, oi: int, op: Any) -> None:
    x = chk.act_in(oi, op, op.inputs[0])
    y = chk.act_out(oi, op)
    chk.rank3(oi, op, x)
    pixels = x.dims[0] * x.dims[1]
    if op.fields["count"] != pixels:
        raise chk.fail("mean_count", oi, op.kind, op.fields["count"], pixels)
    ch = x.dims[2]
    if op.fields["keep_dims"]:
        if y.dims != (1, 1, ch):
            raise chk.fail("shape3", oi, op.kind, op.outputs[0], 1, 1, ch)
    elif y.dims != (ch,):
        raise chk.fail("shape1", oi, op.kind, op.outputs[0], ch)


REGISTRATION = OpRegistration(
    kind=KIND, opcode=OPCODE, record=RECORD, arity=(1, 1, 1), run=run, check=check,
    lower=lower, macs=macs, cpu_rate="elementwise", tflite_export=tflite_export,
    tflite_import=tflite_import, blob_check=blob_check,
)  # fmt: skip
