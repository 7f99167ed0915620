"""A small INT8 graph IR with batched execution over weight sets.

Activations run as ``(S, N, *shape)``: S weight sets (perturbed copies of the model, given as
overrides with a leading axis) times N samples. S is 1 when nothing is batched, and ``run``
then drops it. Op params hold the *integer* kernel parameters, computed once at build time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hilbench.errors import ModelError
from hilbench.npu import ops as _ops
from hilbench.npu.ops import _backend

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
class Graph:
    """Tensors by name, ops in execution order, one input and one output tensor."""

    tensors: dict[str, Tensor]
    ops: list[Op]
    input: str
    output: str
    name: str = "model"

    # --- introspection --------------------------------------------------------------------
    def weight_tensors(self) -> list[tuple[str, str | None]]:
        """``(weight, bias or None)`` for every op with trainable weights, execution order."""
        out: list[tuple[str, str | None]] = []
        for op in self.ops:
            d = _ops.get(op.kind)
            if d.weight_input is None or d.weight_input >= len(op.inputs):
                continue
            bias = (
                op.inputs[d.bias_input]
                if (d.bias_input is not None and d.bias_input < len(op.inputs))
                else None
            )
            out.append((op.inputs[d.weight_input], bias))
        return out

    def trainable(self) -> list[str]:
        """Names of the int8 weight (filter) tensors, in execution order."""
        return [w for w, _ in self.weight_tensors()]

    def constants(self) -> dict[str, np.ndarray]:
        """Every constant tensor's data by name (not copied)."""
        return {n: t.data for n, t in self.tensors.items() if t.data is not None}

    # --- validation -----------------------------------------------------------------------
    def validate(self) -> None:
        """Check shapes and TFLite quantization rules; ModelError naming rule and tensor."""
        fix_q = "requantize the model following the TFLite int8 rules"
        for name, t in self.tensors.items():
            if name != t.name:
                raise _model_error(
                    f"tensor key {name!r} holds tensor named {t.name!r}",
                    "key tensors by their own name",
                )
            if t.dtype not in DTYPES:
                raise _model_error(
                    f"tensor {name}: dtype {t.dtype!r} unsupported", "use int8 or int32"
                )
            if any(d <= 0 for d in t.shape):
                raise _model_error(
                    f"tensor {name}: shape {t.shape} has a non-positive dim",
                    "give every dim a positive size",
                )
            if t.data is not None and (
                t.data.dtype != DTYPES[t.dtype] or tuple(t.data.shape) != t.shape
            ):
                raise _model_error(
                    f"tensor {name}: data is {t.data.dtype} {t.data.shape}, declared "
                    f"{t.dtype} {t.shape}",
                    "store data matching the declared shape and dtype",
                )
            q = t.qparams
            if q is None:
                continue
            if q.scale.shape != q.zero_point.shape or q.scale.ndim != 1:
                raise _model_error(f"tensor {name}: scale and zero point counts differ", fix_q)
            if not np.all(np.isfinite(q.scale)) or np.any(q.scale <= 0):
                raise _model_error(f"tensor {name}: scales must be finite and > 0", fix_q)
            if q.axis is None and q.scale.size != 1:
                raise _model_error(f"tensor {name}: several scales but no quantized axis", fix_q)
            if q.axis is not None and not (
                0 <= q.axis < len(t.shape) and t.shape[q.axis] == q.scale.size
            ):
                raise _model_error(
                    f"tensor {name}: per-channel axis {q.axis} does not match "
                    f"{q.scale.size} scales for shape {t.shape}",
                    fix_q,
                )
            if t.dtype == "int8" and (np.any(q.zero_point < -128) or np.any(q.zero_point > 127)):
                raise _model_error(f"tensor {name}: int8 zero point outside [-128, 127]", fix_q)
        weights = {w for w, _ in self.weight_tensors()}
        biases = {b for _, b in self.weight_tensors() if b is not None}
        for w in weights:
            t = self.tensors.get(w, None)
            if t is None:
                continue
            if t.qparams is None or np.any(t.qparams.zero_point != 0):
                raise _model_error(f"weights {w}: must be symmetric (zero point 0)", fix_q)
            if t.data is not None and t.data.size and int(t.data.min()) < -127:
                raise _model_error(f"weights {w}: values must lie in [-127, 127]", fix_q)
        for b in biases:
            t = self.tensors.get(b)
            if t is not None and t.dtype != "int32":
                raise _model_error(f"bias {b}: must be int32", fix_q)
        # data flow
        if self.input not in self.tensors or self.output not in self.tensors:
            raise _model_error(
                f"graph input {self.input!r} or output {self.output!r} is not a tensor",
                "name existing tensors as input and output",
            )
        xin = self.tensors[self.input]
        if xin.data is not None or xin.dtype != "int8" or xin.qparams is None:
            raise _model_error(
                f"graph input {self.input}: must be a quantized int8 activation", fix_q
            )
        ready = {self.input}
        for op in self.ops:
            d = _ops.get(op.kind)
            for n in op.inputs:
                if n not in self.tensors:
                    raise _model_error(
                        f"{op.kind} op: input {n!r} is not a tensor",
                        "declare every tensor an op uses",
                    )
                if self.tensors[n].data is None and n not in ready:
                    raise _model_error(
                        f"{op.kind} op: input {n} is used before it is computed",
                        "order ops so producers come first",
                    )
            for n in op.outputs:
                if n not in self.tensors:
                    raise _model_error(
                        f"{op.kind} op: output {n!r} is not a tensor",
                        "declare every tensor an op uses",
                    )
                if n in ready or self.tensors[n].data is not None:
                    raise _model_error(
                        f"{op.kind} op: output {n} is written twice or is a constant",
                        "give every op output its own tensor",
                    )
                ready.add(n)
            d.check(self, op)
        if self.output not in ready:
            raise _model_error(
                f"graph output {self.output} is never computed",
                "make the last op write the output tensor",
            )

    # --- execution ------------------------------------------------------------------------
    def _check_input(self, x: np.ndarray) -> np.ndarray:
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

    def _check_overrides(
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

    def _execute(
        self, x: np.ndarray, overrides: dict[str, np.ndarray] | None
    ) -> tuple[dict[str, np.ndarray], int | None]:
        x = self._check_input(x)
        ov, s = self._check_overrides(overrides)
        env: dict[str, np.ndarray] = {self.input: x[None]}
        for op in self.ops:
            d = _ops.get(op.kind)
            ins: list[np.ndarray | None] = []
            for n in op.inputs:
                if n in env:
                    ins.append(env[n])
                elif n in ov:
                    ins.append(ov[n])
                else:
                    ins.append(self.tensors[n].data)
            y = d.run(op, ins)
            env[op.outputs[0]] = y.reshape(y.shape[:2] + self.tensors[op.outputs[0]].shape)
        return env, s

    def run(self, x: np.ndarray, overrides: dict[str, np.ndarray] | None = None) -> np.ndarray:
        """Run on int8 ``x`` (N, *input_shape). With batched overrides (leading S axis) the
        result is (S, N, *out_shape), otherwise (N, *out_shape)."""
        engine = _backend.engine()
        if engine is not None:  # the native backend: the whole network in one call
            ov, s = self._check_overrides(overrides)
            y = engine.run(self, self._check_input(x), ov, s)
            if y is not None:
                return y
        env, s = self._execute(x, overrides)
        y = env[self.output]
        if s is None:
            return y[0]
        return np.broadcast_to(y, (s, *y.shape[1:])) if y.shape[0] != s else y

    def run_all(
        self, x: np.ndarray, overrides: dict[str, np.ndarray] | None = None
    ) -> dict[str, np.ndarray]:
        """Every activation (input included) by name, shaped like :meth:`run`'s result."""
        engine = _backend.engine()
        if engine is not None:
            ov, s = self._check_overrides(overrides)
            env = engine.run_all(self, self._check_input(x), ov, s)
            if env is not None:
                return env
        env, s = self._execute(x, overrides)
        if s is None:
            return {n: a[0] for n, a in env.items()}
        return {
            n: (a if a.shape[0] == s else np.broadcast_to(a, (s, *a.shape[1:])))
            for n, a in env.items()
        }

    # --- helpers --------------------------------------------------------------------------
    @property
    def input_shape(self) -> tuple[int, ...]:
        return self.tensors[self.input].shape

    @property
    def output_shape(self) -> tuple[int, ...]:
        return self.tensors[self.output].shape

    def with_constants(self, values: dict[str, np.ndarray]) -> Graph:
        """A copy whose constant tensors in ``values`` hold new data (same shape and dtype)."""
        ov, s = self._check_overrides(values)
        if s is not None:
            raise _model_error("with_constants got a batched (S, ...) array", "pass one weight set")
        tensors = {
            n: Tensor(t.name, t.shape, t.dtype, t.qparams, np.array(ov[n]) if n in ov else t.data)
            for n, t in self.tensors.items()
        }
        return Graph(
            tensors,
            [Op(o.kind, list(o.inputs), list(o.outputs), dict(o.params)) for o in self.ops],
            self.input,
            self.output,
            self.name,
        )

    def num_parameters(self) -> int:
        """Number of trainable weight and bias elements."""
        names = [n for pair in self.weight_tensors() for n in pair if n is not None]
        return sum(math.prod(self.tensors[n].shape) for n in names)
