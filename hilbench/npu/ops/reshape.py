"""RESHAPE: the same int8 bytes under a new shape (TFLite rule: same scale and zero point)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hilbench.npu import native
from hilbench.npu.ir import GraphIR, Op
from hilbench.npu.ops import common as c
from hilbench.npu.ops import record as r
from hilbench.npu.ops.registration import OpRegistration, TfliteExport

KIND = "RESHAPE"
OPCODE = 8
RECORD = r.Record(KIND, [], per_channel=False)


def run(op: Op, inputs: list[np.ndarray | None]) -> np.ndarray:
    x = inputs[0]
    return x.reshape(x.shape[0], x.shape[1], -1)


def check(graph: GraphIR, op: Op) -> None:
    if len(op.inputs) != 1 or len(op.outputs) != 1:
        raise c.bad(KIND, op, "needs one input and one output", "fix the op")
    x, out = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    c.per_tensor_activation(KIND, op, x)
    c.per_tensor_activation(KIND, op, out)
    c.check_same_qparams(KIND, op, x, out)
    if math.prod(x.shape) != math.prod(out.shape):
        raise c.bad(
            KIND,
            op,
            f"{x.shape} and {out.shape} hold different element counts",
            "keep the element count",
        )


# --- native engine, cost, .tflite, blob checker ------------------------------------------
def lower(lw: Any, i: int, op: Op, f: np.ndarray) -> None:
    """Nothing to run: the output is the input's bytes (``aliases_input``)."""
    f[native.F["KIND"]] = native.OP_NOP


def macs(graph: GraphIR, op: Op) -> int:
    return 0


def tflite_export(tfl: Any, p: dict[str, Any], out_shape: tuple[int, ...]) -> TfliteExport:
    o = tfl.ReshapeOptionsT()
    o.newShape = list(out_shape)
    shape = np.array(out_shape, "<i4")
    return TfliteExport(tfl.BuiltinOptions.ReshapeOptions, o, (("shape", shape),))


def tflite_import(t: Any) -> Op:
    return Op(KIND, [t.x], [t.y], {})


def blob_check(chk: Any, oi: int, op: Any) -> None:
    x = chk.act_in(oi, op, op.inputs[0])
    y = chk.act_out(oi, op)
    if x.elements != y.elements:
        raise chk.fail("reshape", oi, op.kind, op.inputs[0], x.elements, op.outputs[0], y.elements)


REGISTRATION = OpRegistration(
    kind=KIND, opcode=OPCODE, record=RECORD, arity=(1, 1, 1), run=run, check=check,
    lower=lower, macs=macs, cpu_rate="elementwise", tflite_export=tflite_export,
    tflite_import=tflite_import, blob_check=blob_check, aliases_input=True,
)  # fmt: skip
