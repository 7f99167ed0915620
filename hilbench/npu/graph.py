"""The graph that validates and runs: :class:`Graph`, the IR (:mod:`hilbench.npu.ir`) plus
what its op kinds mean, looked up in :mod:`hilbench.npu.registry`, with batched execution
over weight sets.

Activations run as ``(S, N, *shape)``: S weight sets (perturbed copies of the model, given as
overrides with a leading axis) times N samples. S is 1 when nothing is batched, and ``run``
then drops it. Under the ``native`` backend a whole network runs in one engine call
(:mod:`hilbench.npu.program`); otherwise op by op through each registration's ``run``.
"""

from __future__ import annotations

import math

import numpy as np

from hilbench.errors import ModelError
from hilbench.npu import program, registry
from hilbench.npu.ir import DTYPES, GraphIR, Op, QParams, Tensor
from hilbench.npu.ops import backend

__all__ = ["DTYPES", "Graph", "Op", "QParams", "Tensor"]


class Graph(GraphIR):
    """Tensors by name, ops in execution order, one input and one output tensor."""

    # --- introspection --------------------------------------------------------------------
    def weight_tensors(self) -> list[tuple[str, str | None]]:
        """``(weight, bias or None)`` for every op with trainable weights, execution order."""
        out: list[tuple[str, str | None]] = []
        for op in self.ops:
            d = registry.get(op.kind)
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

    # --- validation -----------------------------------------------------------------------
    def validate(self) -> None:
        """Check shapes and TFLite quantization rules; ModelError naming rule and tensor."""
        fix_q = "requantize the model following the TFLite int8 rules"
        for name, t in self.tensors.items():
            if name != t.name:
                raise ModelError(
                    f"tensor key {name!r} holds tensor named {t.name!r}",
                    "key tensors by their own name",
                )
            if t.dtype not in DTYPES:
                raise ModelError(
                    f"tensor {name}: dtype {t.dtype!r} unsupported", "use int8 or int32"
                )
            if any(d <= 0 for d in t.shape):
                raise ModelError(
                    f"tensor {name}: shape {t.shape} has a non-positive dim",
                    "give every dim a positive size",
                )
            if t.data is not None and (
                t.data.dtype != DTYPES[t.dtype] or tuple(t.data.shape) != t.shape
            ):
                raise ModelError(
                    f"tensor {name}: data is {t.data.dtype} {t.data.shape}, declared "
                    f"{t.dtype} {t.shape}",
                    "store data matching the declared shape and dtype",
                )
            q = t.qparams
            if q is None:
                continue
            if q.scale.shape != q.zero_point.shape or q.scale.ndim != 1:
                raise ModelError(f"tensor {name}: scale and zero point counts differ", fix_q)
            if not np.all(np.isfinite(q.scale)) or np.any(q.scale <= 0):
                raise ModelError(f"tensor {name}: scales must be finite and > 0", fix_q)
            if q.axis is None and q.scale.size != 1:
                raise ModelError(f"tensor {name}: several scales but no quantized axis", fix_q)
            if q.axis is not None and not (
                0 <= q.axis < len(t.shape) and t.shape[q.axis] == q.scale.size
            ):
                raise ModelError(
                    f"tensor {name}: per-channel axis {q.axis} does not match "
                    f"{q.scale.size} scales for shape {t.shape}",
                    fix_q,
                )
            if t.dtype == "int8" and (np.any(q.zero_point < -128) or np.any(q.zero_point > 127)):
                raise ModelError(f"tensor {name}: int8 zero point outside [-128, 127]", fix_q)
        weights = {w for w, _ in self.weight_tensors()}
        biases = {b for _, b in self.weight_tensors() if b is not None}
        for w in weights:
            t = self.tensors.get(w, None)
            if t is None:
                continue
            if t.qparams is None or np.any(t.qparams.zero_point != 0):
                raise ModelError(f"weights {w}: must be symmetric (zero point 0)", fix_q)
            if t.data is not None and t.data.size and int(t.data.min()) < -127:
                raise ModelError(f"weights {w}: values must lie in [-127, 127]", fix_q)
        for b in biases:
            t = self.tensors.get(b)
            if t is not None and t.dtype != "int32":
                raise ModelError(f"bias {b}: must be int32", fix_q)
        # data flow
        if self.input not in self.tensors or self.output not in self.tensors:
            raise ModelError(
                f"graph input {self.input!r} or output {self.output!r} is not a tensor",
                "name existing tensors as input and output",
            )
        xin = self.tensors[self.input]
        if xin.data is not None or xin.dtype != "int8" or xin.qparams is None:
            raise ModelError(
                f"graph input {self.input}: must be a quantized int8 activation", fix_q
            )
        ready = {self.input}
        for op in self.ops:
            d = registry.get(op.kind)
            for n in op.inputs:
                if n not in self.tensors:
                    raise ModelError(
                        f"{op.kind} op: input {n!r} is not a tensor",
                        "declare every tensor an op uses",
                    )
                if self.tensors[n].data is None and n not in ready:
                    raise ModelError(
                        f"{op.kind} op: input {n} is used before it is computed",
                        "order ops so producers come first",
                    )
            for n in op.outputs:
                if n not in self.tensors:
                    raise ModelError(
                        f"{op.kind} op: output {n!r} is not a tensor",
                        "declare every tensor an op uses",
                    )
                if n in ready or self.tensors[n].data is not None:
                    raise ModelError(
                        f"{op.kind} op: output {n} is written twice or is a constant",
                        "give every op output its own tensor",
                    )
                ready.add(n)
            d.check(self, op)
        if self.output not in ready:
            raise ModelError(
                f"graph output {self.output} is never computed",
                "make the last op write the output tensor",
            )

    def _execute(
        self, x: np.ndarray, overrides: dict[str, np.ndarray] | None
    ) -> tuple[dict[str, np.ndarray], int | None]:
        x = self.check_input(x)
        ov, s = self.check_overrides(overrides)
        env: dict[str, np.ndarray] = {self.input: x[None]}
        for op in self.ops:
            d = registry.get(op.kind)
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
        if backend.engine() is not None:  # the native backend: the whole network in one call
            ov, s = self.check_overrides(overrides)
            y = program.run(self, self.check_input(x), ov, s)
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
        if backend.engine() is not None:
            ov, s = self.check_overrides(overrides)
            env = program.run_all(self, self.check_input(x), ov, s)
            if env is not None:
                return env
        env, s = self._execute(x, overrides)
        if s is None:
            return {n: a[0] for n, a in env.items()}
        return {
            n: (a if a.shape[0] == s else np.broadcast_to(a, (s, *a.shape[1:])))
            for n, a in env.items()
        }

    def num_parameters(self) -> int:
        """Number of trainable weight and bias elements."""
        names = [n for pair in self.weight_tensors() for n in pair if n is not None]
        return sum(math.prod(self.tensors[n].shape) for n in names)
