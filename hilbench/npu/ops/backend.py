"""Which kernels run the ops: ``native`` (the C engine in ``hilbench/npu/native``, a whole
network per call), ``jit`` (compiled with numba, ``jit.py``, one op at a time) or ``numpy``
(the reference path in each op module). All are bit-exact with TFLM; the oracle tests run
each of them.

The default is ``native`` when its extension imports (it runs the best kernels the CPU
has: AVX-512 VNNI, AVX-VNNI, AVX2, ARM64 dot products, or its portable C), else ``jit``
when numba imports, else ``numpy``; the environment variable
``HILBENCH_NPU_BACKEND=native|jit|numpy`` chooses, and :func:`use` switches for a block.
Under ``native``, ``Graph.run``/``run_all`` go to the engine (:func:`engine`); an op run on
its own (or a graph the engine refuses) uses the jit kernels.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from hilbench.errors import ModelError
from hilbench.npu import native

NAMES = ("native", "jit", "numpy")
_ENV = "HILBENCH_NPU_BACKEND"
_state: dict[str, Any] = {"name": None, "kernels": None, "engine": None}


def jit_available() -> bool:
    """Whether numba (and so the compiled kernels) can be imported here."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def native_available() -> bool:
    """Whether the native engine's compiled extension imports here."""
    return native.available()


def _check(name: str) -> str:
    if name not in NAMES:
        raise ModelError(f"unknown NPU backend {name!r}", f"use one of {', '.join(NAMES)}")
    if name == "jit" and not jit_available():
        raise ModelError(
            "NPU backend 'jit' needs numba, which does not import here",
            "pip install numba, or use the 'numpy' backend",
        )
    if name == "native" and not native_available():
        raise ModelError(
            f"NPU backend 'native' is not built here ({native.IMPORT_ERROR})",
            "reinstall with a C compiler (pip install -e .), or use the 'jit' backend",
        )
    return name


def check_env() -> None:
    """Refuse an unknown ``HILBENCH_NPU_BACKEND`` or a ``HILBENCH_NPU_NATIVE_ISA`` this build
    or CPU cannot run (a user's settings) before anything runs."""
    env = os.environ.get(_ENV, "").strip().lower()
    if env and env not in NAMES:
        raise ModelError(
            f"{_ENV}={env!r} names no NPU backend",
            f"set it to one of {', '.join(NAMES)}, or unset it for the default",
        )
    if native_available():
        native.isa_code()  # HILBENCH_NPU_NATIVE_ISA: refused now, not at the first EVAL


def _default() -> str:
    env = os.environ.get(_ENV, "").strip().lower()
    if env:
        return _check(env)
    if native_available():
        return "native"
    return "jit" if jit_available() else "numpy"


def name() -> str:
    """The active backend's name."""
    if _state["name"] is None:
        select(_default())
    return _state["name"]


def select(backend: str) -> None:
    """Make ``backend`` ('native', 'jit' or 'numpy') the active one."""
    _check(backend)
    kernels = engine = None
    if backend == "jit" or (backend == "native" and jit_available()):
        from hilbench.npu.ops import jit  # numba compiles on import: only when chosen

        kernels = jit
    if backend == "native":
        engine = native
    _state["name"], _state["kernels"], _state["engine"] = backend, kernels, engine


@contextlib.contextmanager
def use(backend: str) -> Iterator[None]:
    """Run a block with ``backend`` active, then restore the previous one."""
    before = name()
    select(backend)
    try:
        yield
    finally:
        select(before)


def kernels() -> ModuleType | None:
    """The compiled per-op kernel module when the jit (or native) backend is active, else
    None (numpy path)."""
    if _state["name"] is None:
        name()
    return _state["kernels"]


def engine() -> ModuleType | None:
    """The whole-network engine (``hilbench.npu.native``; ``Graph.run`` runs a graph on it
    through :mod:`hilbench.npu.program`) when the native backend is active, else
    None."""
    if _state["name"] is None:
        name()
    return _state["engine"]


def op_cache(op: Any) -> dict[str, Any]:
    """A small per-op dict the compiled kernels keep prepared weights in."""
    d = op.__dict__
    c = d.get("_kernel_cache")
    if c is None:
        c = d["_kernel_cache"] = {}
    return c
