"""Op registry: one module per op kind, each a plain mirror of a TFLM reference kernel.

An op module provides ``KIND`` (name), ``OPCODE`` (blob byte), ``run(op, inputs)``,
``check(graph, op)``, ``pack_params(params)``, ``unpack_params(data)`` and which inputs are
the trainable weights and biases (``WEIGHT_INPUT``, ``BIAS_INPUT``, or None).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

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


@dataclass(frozen=True)
class OpDef:
    """What the graph and the blob need to know about one op kind."""

    kind: str
    opcode: int
    run: Callable[..., np.ndarray]
    check: Callable[..., None]
    pack_params: Callable[[dict[str, Any]], bytes]
    unpack_params: Callable[[bytes], dict[str, Any]]
    weight_input: int | None
    bias_input: int | None


def _from_module(mod: ModuleType) -> OpDef:
    return OpDef(
        mod.KIND,
        mod.OPCODE,
        mod.run,
        mod.check,
        mod.pack_params,
        mod.unpack_params,
        getattr(mod, "WEIGHT_INPUT", None),
        getattr(mod, "BIAS_INPUT", None),
    )


REGISTRY: dict[str, OpDef] = {
    d.kind: d
    for d in map(
        _from_module,
        [fully_connected, conv2d, depthwise_conv2d, average_pool2d, max_pool2d, mean, add, reshape],
    )
}
BY_OPCODE: dict[int, OpDef] = {d.opcode: d for d in REGISTRY.values()}


def get(kind: str) -> OpDef:
    """The op definition for ``kind``; ModelError naming the supported ops otherwise."""
    try:
        return REGISTRY[kind]
    except KeyError:
        raise ModelError(
            f"unsupported op {kind!r}", f"use one of: {', '.join(sorted(REGISTRY))}"
        ) from None
