"""The op registry: kind (and blob opcode) -> the op's :class:`OpRegistration`.

It sits above the op modules and below everything that runs, checks, lowers, costs, imports
or exports a graph. A new op is one module in ``hilbench/npu/ops/`` ending with a
``REGISTRATION`` and one line in :data:`OP_MODULES`.
"""

from __future__ import annotations

from hilbench.errors import ModelError
from hilbench.npu.ops import (
    add,
    average_pool2d,
    conv2d,
    depthwise_conv2d,
    fully_connected,
    max_pool2d,
    mean,
    reshape,
)
from hilbench.npu.ops.registration import OpRegistration

#: every op module, in the order errors and the generated header list them
OP_MODULES = (
    fully_connected,
    conv2d,
    depthwise_conv2d,
    average_pool2d,
    max_pool2d,
    mean,
    add,
    reshape,
)

REGISTRY: dict[str, OpRegistration] = {m.REGISTRATION.kind: m.REGISTRATION for m in OP_MODULES}
BY_OPCODE: dict[int, OpRegistration] = {d.opcode: d for d in REGISTRY.values()}
if len(BY_OPCODE) != len(REGISTRY):
    raise ImportError("hilbench.npu.registry: two ops share an opcode")

#: the old name of a registration (hilbench.npu.ops.OpDef)
OpDef = OpRegistration


def get(kind: str) -> OpRegistration:
    """The registration of ``kind``; ModelError naming the supported ops otherwise."""
    try:
        return REGISTRY[kind]
    except KeyError:
        raise ModelError(
            f"unsupported op {kind!r}", f"use one of: {', '.join(sorted(REGISTRY))}"
        ) from None
