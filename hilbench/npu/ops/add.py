"""int8 ADD of two same-shape activations, TFLM reference-kernel semantics.

Reference (``reference_integer_ops::Add``, Prepare in ``add_common.cc``), left_shift = 20::

    a = MBQM((x1 + input1_offset) << 20, input1_multiplier, input1_shift)
    b = MBQM((x2 + input2_offset) << 20, input2_multiplier, input2_shift)
    out = clamp(MBQM(a + b, output_multiplier, output_shift) + output_offset, act_min, act_max)

with real multipliers ``s1 / 2max``, ``s2 / 2max`` and ``2max / (2**20 * s_out)`` where
``2max = 2 * max(s1, s2)``; each must be below 1 (TFLite's rule for int8 ADD).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hilbench.errors import ModelError
from hilbench.npu import native
from hilbench.npu.ir import GraphIR, Op
from hilbench.npu.native import lowering
from hilbench.npu.ops import backend
from hilbench.npu.ops import common as c
from hilbench.npu.ops import record as r
from hilbench.npu.ops.registration import OpRegistration, TfliteExport
from hilbench.npu.quant import activation_range, multiply_by_quantized_multiplier
from hilbench.npu.quant import quantize_multiplier as _qm

KIND = "ADD"
OPCODE = 7
LEFT_SHIFT = 20
_M = (0, 2**31 - 1)
_S = (-31, 0)
RECORD = r.Record(
    KIND,
    [
        r.Field("input1_offset", "i", -127, 128),
        r.Field("input2_offset", "i", -127, 128),
        r.OUTPUT_OFFSET,
        r.ACT_MIN,
        r.ACT_MAX,
        r.Field("left_shift", "i", 0, 20),
        r.Field("input1_multiplier", "i", *_M),
        r.Field("input1_shift", "i", *_S),
        r.Field("input2_multiplier", "i", *_M),
        r.Field("input2_shift", "i", *_S),
        r.Field("output_multiplier", "i", *_M),
        r.Field("output_shift", "i", *_S),
        r.enum("activation", ("NONE", "RELU", "RELU6")),
    ],
    per_channel=False,
)


def _smaller_than_one(real: float, what: str) -> tuple[int, int]:
    if not 0.0 < real < 1.0:
        raise ModelError(
            f"ADD: {what} multiplier {real:.6g} must lie in (0, 1) (TFLite int8 "
            "ADD rule: output scale > 2 * max(input scales) / 2**20)",
            "use a larger output scale",
        )
    return _qm(real)


def prepare(
    s1: float, zp1: int, s2: float, zp2: int, s_out: float, zp_out: int, activation: str = "NONE"
) -> dict[str, Any]:
    f1, f2, fo = (float(np.float32(v)) for v in (s1, s2, s_out))
    twice_max = 2.0 * max(f1, f2)
    m1, sh1 = _smaller_than_one(f1 / twice_max, "input 1")
    m2, sh2 = _smaller_than_one(f2 / twice_max, "input 2")
    mo, sho = _smaller_than_one(twice_max / ((1 << LEFT_SHIFT) * fo), "output")
    lo, hi = activation_range(activation, fo, int(zp_out))
    return {
        "input1_offset": -int(zp1),
        "input2_offset": -int(zp2),
        "output_offset": int(zp_out),
        "act_min": int(lo),
        "act_max": int(hi),
        "left_shift": LEFT_SHIFT,
        "input1_multiplier": m1,
        "input1_shift": sh1,
        "input2_multiplier": m2,
        "input2_shift": sh2,
        "output_multiplier": mo,
        "output_shift": sho,
        "activation": activation,
    }


def add(x1: np.ndarray, x2: np.ndarray, p: dict[str, Any]) -> np.ndarray:
    """Two (S?, N, ...) int8 arrays (S broadcast) -> int8."""
    a = (x1.astype(np.int64) + p["input1_offset"]) << p["left_shift"]
    b = (x2.astype(np.int64) + p["input2_offset"]) << p["left_shift"]
    a = multiply_by_quantized_multiplier(a, p["input1_multiplier"], p["input1_shift"])
    b = multiply_by_quantized_multiplier(b, p["input2_multiplier"], p["input2_shift"])
    raw = a.astype(np.int64) + b
    out = multiply_by_quantized_multiplier(raw, p["output_multiplier"], p["output_shift"])
    out = out.astype(np.int64) + p["output_offset"]
    return np.clip(out, p["act_min"], p["act_max"]).astype(np.int8)


def run(op: Op, inputs: list[np.ndarray | None]) -> np.ndarray:
    k = backend.kernels()
    if k is not None:
        return k.add(inputs[0], inputs[1], op.params)
    return add(inputs[0], inputs[1], op.params)


def check(graph: GraphIR, op: Op) -> None:
    if len(op.inputs) != 2 or len(op.outputs) != 1:
        raise c.bad(KIND, op, "needs two inputs and one output", "fix the op")
    t = graph.tensors
    x1, x2, out = t[op.inputs[0]], t[op.inputs[1]], t[op.outputs[0]]
    q = [c.per_tensor_activation(KIND, op, a) for a in (x1, x2, out)]
    if not x1.shape == x2.shape == out.shape:
        raise c.bad(
            KIND,
            op,
            f"shapes {x1.shape}, {x2.shape} -> {out.shape} must be equal (no broadcasting)",
            "add tensors of one shape",
        )
    act = c.check_activation(KIND, op)
    want = prepare(*q[0], *q[1], *q[2], act)
    want.pop("activation")
    c.check_params_equal(KIND, op, want)


# --- native engine, cost, .tflite, blob checker ------------------------------------------
def lower(lw: lowering.Lowering, i: int, op: Op, f: np.ndarray) -> None:
    p = op.params
    f[native.F["KIND"]] = native.OP_ADD
    f[native.F["IN2"]] = lw.offs[op.inputs[1]]
    lowering.set_fields(
        f, IO=p["input1_offset"], IO2=p["input2_offset"], OO=p["output_offset"],
        LO=p["act_min"], HI=p["act_max"], LSH=p["left_shift"],
        M1=p["input1_multiplier"], S1=p["input1_shift"],
        M2=p["input2_multiplier"], S2=p["input2_shift"],
        MO=p["output_multiplier"], SO=p["output_shift"],
    )  # fmt: skip
    for m in ("input1_multiplier", "input2_multiplier", "output_multiplier"):
        if not 0 <= int(p[m]) <= 2**31 - 1:
            raise native.Unsupported("ADD multiplier out of range")


def macs(graph: GraphIR, op: Op) -> int:
    return math.prod(graph.tensors[op.outputs[0]].shape)


def tflite_export(tfl: Any, p: dict[str, Any], out_shape: tuple[int, ...]) -> TfliteExport:
    o = tfl.AddOptionsT()
    o.fusedActivationFunction = c.tflite_activation(tfl, p)
    return TfliteExport(tfl.BuiltinOptions.AddOptions, o)


def tflite_import(t: Any) -> Op:
    s2, zp2 = t.qparams(t.names[1])
    p = prepare(t.in_s, t.in_zp, s2, zp2, t.out_s, t.out_zp, t.activation())
    return Op(KIND, t.names[:2], [t.y], p)


def blob_check(chk: Any, oi: int, op: Any) -> None:
    a = chk.act_in(oi, op, op.inputs[0])
    b = chk.act_in(oi, op, op.inputs[1])
    y = chk.act_out(oi, op)
    if not a.dims == b.dims == y.dims:
        raise chk.fail("add_shapes", oi, op.kind, *op.inputs, op.outputs[0])


REGISTRATION = OpRegistration(
    kind=KIND, opcode=OPCODE, record=RECORD, arity=(2, 2, 1), run=run, check=check,
    lower=lower, macs=macs, cpu_rate="elementwise", tflite_export=tflite_export,
    tflite_import=tflite_import, blob_check=blob_check, activation_inputs=2,
)  # fmt: skip
