"""int8 MAX_POOL_2D, TFLM reference-kernel semantics (``reference_integer_ops::MaxPool``):
the largest int8 input under the window taps inside the input, clamped to the activation
range."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from hilbench.npu import native
from hilbench.npu.ops import _pool, backend
from hilbench.npu.ops import common as c
from hilbench.npu.ops import record as r
from hilbench.npu.ops.registration import OpRegistration

if TYPE_CHECKING:
    from hilbench.npu.ir import GraphIR, Op

KIND = "MAX_POOL_2D"
OPCODE = 5
RECORD = r.Record(KIND, _pool.FIELDS, per_channel=False)
prepare = _pool.prepare


def max_pool2d(x: np.ndarray, p: dict[str, Any]) -> np.ndarray:
    """x (S, N, H, W, C) int8 -> (S, N, OH, OW, C) int8 (padding never wins: -128)."""
    k_hw = (p["filter_h"], p["filter_w"])
    xp = c.padded(x, p, k_hw, -128)
    out = None
    for _, _, view in c.taps(xp, p, k_hw):
        out = view.copy() if out is None else np.maximum(out, view, out=out)
    return np.clip(out, p["act_min"], p["act_max"]).astype(np.int8)


def run(op: Op, inputs: list[np.ndarray | None]) -> np.ndarray:
    k = backend.kernels()
    if k is not None:
        return k.max_pool2d(inputs[0], op.params)
    return max_pool2d(inputs[0], op.params)


def check(graph: GraphIR, op: Op) -> None:
    _pool.check(KIND, graph, op)


REGISTRATION = OpRegistration(
    kind=KIND, opcode=OPCODE, record=RECORD, arity=(1, 1, 1), run=run, check=check,
    lower=_pool.lower_as(native.OP_MAXPOOL), macs=_pool.macs, cpu_rate="pool",
    tflite_export=_pool.tflite_export, tflite_import=_pool.tflite_importer(prepare, KIND),
    blob_check=_pool.blob_check,
)  # fmt: skip
