"""What an op kind registers: one :class:`OpRegistration` per op, built at the end of its own
module (TFLM's ``Register_ADD`` bundles init/prepare/eval the same way) and collected by
:mod:`hilbench.npu.registry`.

The object carries everything the rest of hilbench needs to know about the op, so adding one
touches its module and the registry's list, not the IR, the engine or the twin:

- the IR and the blob: ``kind``, ``opcode``, the param ``record``, the trainable inputs;
- execution: ``run`` (the reference or jit kernels) and ``check`` (TFLite's int8 rules);
- the native engine: ``lower`` (fills the op's engine record, see
  :mod:`hilbench.npu.native.lowering`);
- the cost model: ``macs`` and ``cpu_rate``;
- .tflite: ``tflite_export`` and ``tflite_import``;
- the twin's blob checker: ``arity`` and ``blob_check`` (what a device checks, in the order
  docs/model-blob.md gives).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from hilbench.npu.ir import GraphIR, Op
    from hilbench.npu.ops.record import Record

#: the Cortex-M55 cost classes of :mod:`hilbench.npu.cost`
CPU_RATES = ("dense", "depthwise", "pool", "elementwise")


@dataclass(frozen=True)
class TfliteExport:
    """How one op is written to .tflite: its BuiltinOptions type and object, and the int32
    constants TFLite takes as extra inputs (suffix of the tensor name, data)."""

    options_type: int
    options: Any
    constants: tuple[tuple[str, np.ndarray], ...] = ()


@dataclass(frozen=True)
class OpRegistration:
    """One op kind, everything about it in one object."""

    kind: str  # the TFLite builtin name
    opcode: int  # the HBM0 blob's op byte
    record: Record  # the blob's param record
    arity: tuple[int, int, int]  # inputs (fewest, most) and outputs
    run: Callable[[Op, list[np.ndarray | None]], np.ndarray]
    check: Callable[[GraphIR, Op], None]
    lower: Callable[[Any, int, Op, np.ndarray], None]
    macs: Callable[[GraphIR, Op], int]
    cpu_rate: str
    tflite_export: Callable[[Any, dict[str, Any], tuple[int, ...]], TfliteExport]
    tflite_import: Callable[[Any], Op]
    blob_check: Callable[[Any, int, Any], None]
    weight_input: int | None = None  # trainable filter (ZO perturbs it)
    bias_input: int | None = None
    activation_inputs: int = 1  # leading inputs that are activations (.tflite import)
    aliases_input: bool = False  # the output is the input's bytes (the engine's arena)

    def __post_init__(self) -> None:
        if self.cpu_rate not in CPU_RATES:
            raise ValueError(f"{self.kind}: cpu_rate {self.cpu_rate!r} not in {CPU_RATES}")

    def pack_params(self, params: dict[str, Any]) -> bytes:
        return self.record.pack(params)

    def unpack_params(self, data: bytes) -> dict[str, Any]:
        return self.record.unpack(data)
