"""Which kernels run the ops: ``jit`` (compiled with numba, ``_jit.py``) or ``numpy`` (the
reference path in each op module). Both are bit-exact with TFLM; the oracle tests run both.

The default is ``jit`` when numba imports, else ``numpy``; the environment variable
``HILBENCH_NPU_BACKEND=numpy`` (or ``jit``) chooses, and :func:`use` switches for a block.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from hilbench.errors import ModelError

NAMES = ("jit", "numpy")
_ENV = "HILBENCH_NPU_BACKEND"
_state: dict[str, Any] = {"name": None, "kernels": None}


def jit_available() -> bool:
    """Whether numba (and so the compiled kernels) can be imported here."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def _check(name: str) -> str:
    if name not in NAMES:
        raise ModelError(f"unknown NPU backend {name!r}", f"use one of {', '.join(NAMES)}")
    if name == "jit" and not jit_available():
        raise ModelError(
            "NPU backend 'jit' needs numba, which does not import here",
            "pip install numba, or use the 'numpy' backend",
        )
    return name


def _default() -> str:
    env = os.environ.get(_ENV, "").strip().lower()
    if env:
        return _check(env)
    return "jit" if jit_available() else "numpy"


def name() -> str:
    """The active backend's name."""
    if _state["name"] is None:
        select(_default())
    return _state["name"]


def select(backend: str) -> None:
    """Make ``backend`` ('jit' or 'numpy') the active one."""
    _check(backend)
    kernels = None
    if backend == "jit":
        from hilbench.npu.ops import _jit

        kernels = _jit
    _state["name"], _state["kernels"] = backend, kernels


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
    """The compiled kernel module when the jit backend is active, else None (numpy path)."""
    if _state["name"] is None:
        name()
    return _state["kernels"]


def op_cache(op: Any) -> dict[str, Any]:
    """A small per-op dict the compiled kernels keep prepared weights in."""
    d = op.__dict__
    c = d.get("_kernel_cache")
    if c is None:
        c = d["_kernel_cache"] = {}
    return c
