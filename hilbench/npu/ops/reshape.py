"""RESHAPE: the same int8 bytes under a new shape (TFLite rule: same scale and zero point)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from hilbench.npu.ops import _common as c
from hilbench.npu.ops import _record as r

if TYPE_CHECKING:
    from hilbench.npu.graph import Graph, Op

KIND = "RESHAPE"
OPCODE = 8
RECORD = r.Record(KIND, [], per_channel=False)


def run(op: Op, inputs: list[np.ndarray | None]) -> np.ndarray:
    x = inputs[0]
    return x.reshape(x.shape[0], x.shape[1], -1)


def check(graph: Graph, op: Op) -> None:
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


def pack_params(params: dict[str, Any]) -> bytes:
    return RECORD.pack(params)


def unpack_params(data: bytes) -> dict[str, Any]:
    return RECORD.unpack(data)
