"""The INT8 graph IR: plain data (tensors, ops by kind name, integer params) and the checks
of what a caller hands it (an input, weight overrides). It imports no op: what an op kind
means lives in its registration (:mod:`hilbench.npu.registry`), and validation and
execution in :mod:`hilbench.npu.graph`, above both.

Op params hold the *integer* kernel parameters, computed once at build time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Self

import numpy as np

from hilbench.errors import ModelError

DTYPES: dict[str, type] = {"int8": np.int8, "int32": np.int32}


@dataclass
class QParams:
    """Affine quantization: ``real = scale * (q - zero_point)``; ``axis`` None = per-tensor."""

    scale: np.ndarray
    zero_point: np.ndarray
    axis: int | None = None

    def __post_init__(self) -> None:
        self.scale = np.atleast_1d(np.asarray(self.scale, dtype=np.float32))
        self.zero_point = np.atleast_1d(np.asarray(self.zero_point, dtype=np.int32))
        if self.zero_point.size == 1 and self.scale.size > 1:
            self.zero_point = np.zeros(self.scale.shape, dtype=np.int32) + self.zero_point


@dataclass
class Tensor:
    """A tensor; ``shape`` excludes the batch axis; ``data`` is set for constants."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    qparams: QParams | None = None
    data: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.shape = tuple(int(d) for d in self.shape)

    @property
    def is_constant(self) -> bool:
        return self.data is not None


@dataclass
class Op:
    """One op: ``kind`` from the registry, tensor names in and out, integer params."""

    kind: str
    inputs: list[str]
    outputs: list[str]
    params: dict[str, Any] = field(default_factory=dict)


def _model_error(cause: str, fix: str) -> ModelError:
    return ModelError(cause, fix)


@dataclass
class GraphIR:
    """Tensors by name, ops in execution order, one input and one output tensor (plain
    data; :class:`hilbench.npu.graph.Graph` adds validation and execution)."""

    tensors: dict[str, Tensor]
    ops: list[Op]
    input: str
    output: str
    name: str = "model"

    def constants(self) -> dict[str, np.ndarray]:
        """Every constant tensor's data by name (not copied)."""
        return {n: t.data for n, t in self.tensors.items() if t.data is not None}

    # --- what a caller hands the graph ----------------------------------------------------
    def check_input(self, x: np.ndarray) -> np.ndarray:
        t = self.tensors[self.input]
        want = f"int8 array of shape (N, {', '.join(map(str, t.shape))})"
        if not isinstance(x, np.ndarray):
            raise _model_error(
                f"model {self.name}: input is {type(x).__name__}, expected an {want}",
                "pass a numpy int8 array",
            )
        if x.dtype != np.int8:
            raise _model_error(
                f"model {self.name}: input dtype is {x.dtype}, expected {want}",
                "quantize the input to int8 first",
            )
        if x.ndim != len(t.shape) + 1 or tuple(x.shape[1:]) != t.shape:
            raise _model_error(
                f"model {self.name}: input shape is {x.shape}, expected {want}",
                "reshape the input; the first axis is the batch",
            )
        return x

    def check_overrides(
        self, overrides: dict[str, np.ndarray] | None
    ) -> tuple[dict[str, np.ndarray], int | None]:
        if not overrides:
            return {}, None
        s: int | None = None
        out: dict[str, np.ndarray] = {}
        for name, arr in overrides.items():
            t = self.tensors.get(name)
            if t is None or t.data is None:
                raise _model_error(
                    f"override {name!r} is not a constant tensor of model {self.name}",
                    f"override one of {sorted(self.constants())}",
                )
            a = np.asarray(arr)
            if a.dtype != DTYPES[t.dtype]:
                raise _model_error(
                    f"override {name}: dtype {a.dtype}, expected {t.dtype}",
                    f"pass a {t.dtype} array",
                )
            if tuple(a.shape) == t.shape:
                pass
            elif a.ndim == len(t.shape) + 1 and tuple(a.shape[1:]) == t.shape and a.shape[0]:
                if s is not None and a.shape[0] != s:
                    raise _model_error(
                        f"override {name}: {a.shape[0]} weight sets, other overrides have {s}",
                        "give every override the same S",
                    )
                s = int(a.shape[0])
            else:
                raise _model_error(
                    f"override {name}: shape {a.shape}, expected {t.shape} or "
                    f"(S, {', '.join(map(str, t.shape))})",
                    "match the tensor's shape, with an optional leading S axis",
                )
            out[name] = a
        return out, s

    # --- helpers --------------------------------------------------------------------------
    @property
    def input_shape(self) -> tuple[int, ...]:
        return self.tensors[self.input].shape

    @property
    def output_shape(self) -> tuple[int, ...]:
        return self.tensors[self.output].shape

    def first_reader(self, names: set[str] | frozenset[str]) -> int:
        """The index of the first op reading any of ``names`` (len(ops): none does)."""
        return next(
            (j for j, op in enumerate(self.ops) if any(n in names for n in op.inputs)),
            len(self.ops),
        )

    def cut(self, first: int) -> tuple[int, str] | None:
        """The frozen prefix's boundary (device_fw/core/graph.c hb_graph_cut, the same rule):
        the last op boundary ``c`` in 1..first across which exactly one activation lives
        (produced by an op before ``c``, or the graph input, and read by an op from ``c`` on,
        the graph output counting as read at the end), and that activation; None if there is
        none, or if it is the graph input (ops before ``c`` then feed nothing later)."""
        n = len(self.ops)
        first = min(first, n)
        born: dict[str, int] = {self.input: -1}
        last: dict[str, int] = {}
        for j, op in enumerate(self.ops):
            for name in op.inputs:
                last[name] = j
            for name in op.outputs:
                born[name] = j
        last[self.output] = n
        acts = [(t, b) for t, b in born.items() if self.tensors[t].data is None]
        for c in range(first, 0, -1):
            crossing = [t for t, b in acts if b < c and last.get(t, -(2**31)) >= c]
            if len(crossing) == 1:
                return None if crossing[0] == self.input else (c, crossing[0])
        return None

    def split(self, c: int, tensor: str) -> tuple[Self, Self]:
        """The graph as two: ops ``[0, c)`` from the input to ``tensor``, and ops ``[c, n)``
        from ``tensor`` to the output (a :meth:`cut`'s boundary). Both share this graph's
        tensor table (the same Tensor objects: new weights are seen by both)."""
        prefix = type(self)(self.tensors, self.ops[:c], self.input, tensor, f"{self.name}[:{c}]")
        suffix = type(self)(self.tensors, self.ops[c:], tensor, self.output, f"{self.name}[{c}:]")
        return prefix, suffix

    def with_constants(self, values: dict[str, np.ndarray]) -> Self:
        """A copy whose constant tensors in ``values`` hold new data (same shape and dtype)."""
        ov, s = self.check_overrides(values)
        if s is not None:
            raise _model_error("with_constants got a batched (S, ...) array", "pass one weight set")
        tensors = {
            n: Tensor(t.name, t.shape, t.dtype, t.qparams, np.array(ov[n]) if n in ov else t.data)
            for n, t in self.tensors.items()
        }
        return type(self)(
            tensors,
            [Op(o.kind, list(o.inputs), list(o.outputs), dict(o.params)) for o in self.ops],
            self.input,
            self.output,
            self.name,
        )
