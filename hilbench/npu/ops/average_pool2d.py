"""int8 AVERAGE_POOL_2D, TFLM reference-kernel semantics (``reference_integer_ops::AveragePool``).

Per output pixel and channel: the sum of the raw int8 inputs under the window taps that lie
inside the input, divided by the number of such taps with rounding half away from zero
(``(sum ± count / 2) / count`` in C integer division), clamped to the activation range.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from hilbench.npu import native
from hilbench.npu.ops import _pool
from hilbench.npu.ops import common as c
from hilbench.npu.ops import record as r
from hilbench.npu.ops.registration import OpRegistration

if TYPE_CHECKING:
    from hilbench.npu.ir import GraphIR, Op

KIND = "AVERAGE_POOL_2D"
OPCODE = 4
RECORD = r.Record(KIND, _pool.FIELDS, per_channel=False)
prepare = _pool.prepare


def average_pool2d(x: np.ndarray, p: dict[str, Any]) -> np.ndarray:
    """x (S, N, H, W, C) int8 -> (S, N, OH, OW, C) int8."""
    k_hw = (p["filter_h"], p["filter_w"])
    xp = c.padded(x.astype(np.int32), p, k_hw, 0)
    acc = None
    for _, _, view in c.taps(xp, p, k_hw):
        acc = view.copy() if acc is None else acc + view
    count = c.valid_counts(p, x.shape[-3:-1], k_hw)[:, :, None]
    acc = acc.astype(np.int64)
    half = count // 2
    q = np.where(acc > 0, (acc + half) // count, -((half - acc) // count))
    return np.clip(q, p["act_min"], p["act_max"]).astype(np.int8)


def run(op: Op, inputs: list[np.ndarray | None]) -> np.ndarray:
    return average_pool2d(inputs[0], op.params)


def check(graph: GraphIR, op: Op) -> None:
    _pool.check(KIND, graph, op)


REGISTRATION = OpRegistration(
    kind=KIND, opcode=OPCODE, record=RECORD, arity=(1, 1, 1), run=run, check=check,
    lower=_pool.lower_as(native.OP_AVGPOOL), macs=_pool.macs, cpu_rate="pool",
    tflite_export=_pool.tflite_export, tflite_import=_pool.tflite_importer(prepare, KIND),
    blob_check=_pool.blob_check,
)  # fmt: skip
