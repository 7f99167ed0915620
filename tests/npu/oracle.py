"""The bit-exactness oracle: run .tflite models (exported by hilbench.npu.tflite) on TFLM's
Python interpreter (reference kernels), whole or tensor by tensor."""

from __future__ import annotations

import contextlib
import platform
import sys
from collections.abc import Iterator

import numpy as np
import pytest

from tests.needs import need_module

runtime = need_module("tflite_micro.python.tflite_micro.runtime")

from hilbench.npu import native  # noqa: E402
from hilbench.npu.graph import Graph  # noqa: E402
from hilbench.npu.ops import backend  # noqa: E402
from hilbench.npu.tflite import export_tflite, export_tflite_indexed  # noqa: E402

# CI (x86-64 Linux) builds the native engine: there its absence is a failure, not a skip.
NATIVE_REQUIRED = sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64")

# Every oracle comparison runs our graph once per backend variant: the native C engine with
# each kernel table this CPU runs forced in turn (native.runnable_isas(): e.g. AVX2, the
# portable C compiled for AVX2 and for the baseline here), the compiled per-op kernels
# (jit) and the numpy reference path must each match TFLM byte for byte.
_NATIVE: tuple[str, ...] = ()
if NATIVE_REQUIRED or native.available():
    _NATIVE = tuple(f"native-{isa}" for isa in native.runnable_isas())
BACKENDS: tuple[str, ...] = _NATIVE + tuple(b for b in backend.NAMES if b != "native")


@contextlib.contextmanager
def use(variant: str) -> Iterator[None]:
    """Run a block under one backend variant: ``native-<isa>`` (native, that ISA's kernels
    forced) or a backend name."""
    if variant.startswith("native-"):
        with backend.use("native"), native.use_isa(variant.removeprefix("native-")):
            yield
    else:
        with backend.use(variant), native.use_isa("auto"):
            yield


def run_each(graph: Graph, x: np.ndarray, overrides=None) -> dict[str, np.ndarray]:
    """``graph.run(x, overrides)`` under every backend variant, by name."""
    out = {}
    for b in BACKENDS:
        with use(b):
            out[b] = graph.run(x, overrides)
    return out


def graph_to_tflite(graph: Graph, batch: int) -> bytes:
    """Export a graph as a .tflite flatbuffer with a fixed batch size."""
    return export_tflite(graph, batch)


def _arena(model: bytes, x: np.ndarray) -> int:
    return max(1 << 16, 16 * len(model) + 64 * x.size)


def run_tflite(model: bytes, x: np.ndarray) -> np.ndarray:
    """Run a single-input, single-output model once on TFLM's reference kernels."""
    it = runtime.Interpreter.from_bytes(model, arena_size=_arena(model, x))
    it.set_input(x, 0)
    it.invoke()
    return np.asarray(it.get_output(0))


def run_tflite_all(graph: Graph, x: np.ndarray) -> dict[str, np.ndarray]:
    """Every activation of ``graph`` as TFLM computes it (interpreter preserving all tensors),
    shaped like Graph.run_all's."""
    model, index = export_tflite_indexed(graph, x.shape[0])
    it = runtime.Interpreter.from_bytes(
        model,
        arena_size=_arena(model, x)
        + 2
        * sum(x.shape[0] * int(np.prod(t.shape)) for t in graph.tensors.values() if t.data is None),
        intrepreter_config=runtime.InterpreterConfig.kPreserveAllTensors,
    )
    it.set_input(x, 0)
    it.invoke()
    out = {}
    for name, t in graph.tensors.items():
        if t.data is None:
            got = it.GetTensor(index[name], 0)
            data = np.asarray(got["tensor_data"] if isinstance(got, dict) else got)
            out[name] = data.reshape(x.shape[0], *t.shape)
    return out


def assert_graph_matches_tflm(
    graph: Graph, x: np.ndarray, what: str = "", exported: Graph | None = None
) -> None:
    """Whole-graph output must equal TFLM byte for byte; on a mismatch, name the first op
    whose output differs (per-layer comparison). TFLM runs ``exported`` (default: graph)."""
    ref = graph if exported is None else exported
    want = None
    for variant in BACKENDS:
        with use(variant):
            got = graph.run(x)
            if want is None:
                want = run_tflite(graph_to_tflite(ref, x.shape[0]), x).reshape(got.shape)
            if np.array_equal(got, want):
                continue
            ours = graph.run_all(x)
        theirs = run_tflite_all(ref, x)
        for op in graph.ops:
            name = op.outputs[0]
            a, b = ours[name], theirs[name]
            if not np.array_equal(a, b):
                idx = np.argwhere(a != b)[:3].tolist()
                pytest.fail(
                    f"{what} {graph.name} ({variant} backend): first mismatch at {op.kind} -> "
                    f"{name}, {int((a != b).sum())} of {a.size} bytes differ, e.g. at {idx}: "
                    f"ours {[int(a[tuple(i)]) for i in idx]} vs TFLM "
                    f"{[int(b[tuple(i)]) for i in idx]}"
                )
        pytest.fail(f"{what} {graph.name} ({variant} backend): outputs differ but no layer does")
