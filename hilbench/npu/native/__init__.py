"""The ``native`` backend: a whole network per C call (``_engine.c``), bit-exact with TFLM.

This package's face holds the engine's facts (its kernel tables, the op record's fields, the
GEMM kernel choice); :mod:`~hilbench.npu.native.lowering` is what each op's registration
uses to fill its record, and :mod:`~hilbench.npu.program` lowers a whole graph and
runs it.

A graph is lowered once (per layout of batched overrides) into a ``Plan``: a flat
int64 op list, per-channel requantization tables and an arena layout (activations share
memory by liveness). ``program.run`` then hands the engine the constants (the graph's own or
the overrides, as they are now), the input and the output buffer; the engine runs every op
for each of the S weight sets and N inputs, reading the weights and biases from those
arrays on every call, so a write into a weight array is always seen: with several sets
nothing derived from them is kept between calls; with one set the packed GEMMs' panels are
kept while their weights equal, byte for byte, a copy of those last packed (``Plan.kept``,
compared every call, per kernel table). The plan keeps the last arrays' buffers (a ``ViewCache``),
reused while the same array objects come again: those arrays stay alive and cannot be
resized in place until other arrays take their slots or the graph goes.

The engine holds one kernel table per ISA its build could compile (AVX-512 VNNI with and
without VBMI, AVX-VNNI, AVX2, ARM64 NEON dot products, portable C) and runs the best one
the CPU has (:func:`best_isa`); :func:`use_isa` (or ``HILBENCH_NPU_NATIVE_ISA=<name>``)
forces one, :func:`runnable_isas` lists those this CPU can run. Every table gives the same
bytes.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any

from hilbench.errors import ConfigError

try:
    from hilbench.npu.native import _engine
except ImportError as e:  # not built (no compiler at install time) or another platform
    _engine = None
    IMPORT_ERROR: str | None = (
        f"the C extension hilbench.npu.native._engine is not built or does not load ({e}); "
        "pip install -e . builds it (needs a C compiler and Python headers)"
    )
else:
    IMPORT_ERROR = None

# The engine's kernel tables, best first: (name, this CPU runs it, forced only). "auto" runs
# the first one the CPU runs that is not forced-only (the portable C compiled for AVX2,
# which a CPU that runs it runs slower than the AVX2 kernels).
_TABLES: tuple[tuple[str, bool, bool], ...] = _engine.isas() if _engine is not None else ()
# every ISA name of any build, best first (a build has those of its architecture)
KNOWN_ISAS = (
    "avx512vnni+vbmi", "avx512vnni", "avxvnni", "avx2", "portable-avx2", "neondot", "portable",
)  # fmt: skip
ISAS = ("auto", *(name for name, _, _ in _TABLES))  # what set_isa takes (this build)
_ISA_INDEX = {name: i for i, (name, _, _) in enumerate(_TABLES)}
_ENV_ISA = "HILBENCH_NPU_NATIVE_ISA"
_state: dict[str, str] = {"isa": os.environ.get(_ENV_ISA, "auto").strip().lower() or "auto"}
_BEST_ISA: str = _engine.best_isa() if _engine is not None else "none"  # the CPU does not change

OP_NOP, OP_GEMM, OP_DW, OP_ADD, OP_MAXPOOL, OP_AVGPOOL, OP_MEAN = range(7)
# the reduction length for which int32 accumulators of (x + 128) * w never wrap
MAX_K = (2**31 - 1) // (255 * 128)
ALIGN = 64

FIELDS: tuple[str, ...] = _engine.fields() if _engine is not None else ()
F = {n: i for i, n in enumerate(FIELDS)}
# the program header (record 0), as the C enum G_*
(G_NOPS, G_IN_OFF, G_IN_SIZE, G_OUT_OFF, G_OUT_SIZE, G_COL_OFF, G_BSCR_OFF, G_FIRST, G_ACC_OFF,
 G_KOFF_OFF, G_WIDE_OFF) = range(11)  # fmt: skip


class Unsupported(Exception):
    """The graph cannot run on the engine (the caller falls back to per-op kernels)."""


def available() -> bool:
    """Whether the compiled engine imports here."""
    return _engine is not None


def engine_module() -> Any:
    """The compiled extension ``_engine`` (None when it is not built)."""
    return _engine


def best_isa() -> str:
    """The kernels this CPU runs by default: 'avx512vnni+vbmi', 'avx512vnni', 'avxvnni',
    'avx2', 'neondot' or 'portable' ('none' without the engine)."""
    return _engine.best_isa() if _engine is not None else "none"


def isas() -> tuple[str, ...]:
    """Every kernel table of this build, best first (those of its architecture)."""
    return tuple(name for name, _, _ in _TABLES)


def runnable_isas() -> tuple[str, ...]:
    """The kernel tables this CPU runs, best first (forced-only test vehicles included)."""
    return tuple(name for name, runs, _ in _TABLES if runs)


def isa() -> str:
    """The ISA in force: 'auto' (the best this CPU runs) or a forced one."""
    return _state["isa"]


def active_isa() -> str:
    """The kernels a call runs now: the forced ISA, or the best one under 'auto'."""
    return best_isa() if _state["isa"] == "auto" else _state["isa"]


def set_isa(name: str) -> None:
    """Force the kernels of ``name`` (one of :func:`runnable_isas`) or 'auto'."""
    if name == "auto":
        _state["isa"] = name
        return
    if name not in _ISA_INDEX:
        known = "auto, " + ", ".join(isas()) if _TABLES else "auto"
        raise ValueError(
            f"unknown native ISA {name!r} for this build; use one of {known}"
            if name not in KNOWN_ISAS
            else f"native ISA {name!r} is not in this build (another architecture's, or a "
            f"compiler without it); use one of {known}"
        )
    if name not in runnable_isas():
        raise ValueError(
            f"this CPU does not run the native engine's {name!r} kernels; "
            f"it runs: {', '.join(runnable_isas())}"
        )
    _state["isa"] = name


@contextlib.contextmanager
def use_isa(name: str) -> Iterator[None]:
    """Run a block with the kernels of ``name`` forced ('auto': the best this CPU runs)."""
    before = isa()
    set_isa(name)
    try:
        yield
    finally:
        _state["isa"] = before


def round_up(n: int, m: int) -> int:
    """``n`` rounded up to a multiple of ``m``."""
    return -(-n // m) * m


def peak_macs_per_s(name: str | None = None, seconds: float = 0.05) -> float | None:
    """The int8 multiply-add peak of one thread with ``name``'s instruction (default: the
    active table): VPDPBUSD (AVX-512 VNNI, AVX-VNNI), VPMADDWD + VPADDD (AVX2), SDOT
    (ARM64), measured now on 12 independent accumulators, best of 5; None for the
    portable C (no single instruction)."""
    name = name or active_isa()
    if name not in runnable_isas():
        raise ValueError(f"this CPU does not run the native engine's {name!r} kernels")
    i = _ISA_INDEX[name]
    n = 1000
    while True:  # calibrate to about `seconds` per run
        t = time.perf_counter()
        if _engine.peak(i, n) is None:
            return None
        if time.perf_counter() - t > seconds / 4 or n > 1 << 40:
            break
        n *= 4
    best = 0.0
    for _ in range(5):
        t = time.perf_counter()
        macs = _engine.peak(i, n)
        best = max(best, macs / (time.perf_counter() - t))
    return best


# A GEMM runs "direct" (dot products on the weights as given, horizontal sums per output)
# when its reduction is long relative to the output pixels one weight set serves (pixels per
# input x inputs per call), K >= ratio * M * N: repacking its weights (once per set and
# call) would then cost more than the horizontal sums; otherwise "packed". The ratio is
# DIRECT_RATIO for the SIMD tables (measured on AVX-512 VNNI and AVX2: 16 to 96 within
# noise), PORTABLE_DIRECT_RATIO for the portable C (its repacking is byte by byte: 8 is
# best on MobileNetV2 and ResNet18); plans are made per ratio.
DIRECT_RATIO = 48
PORTABLE_DIRECT_RATIO = 8
DIRECT_K = 64
MAX_INPUTS_KEY = 64  # plans are made per number of inputs up to this (it only picks kernels)
# packed convs with dilation 1 along W read their padded input in place (SIMD tables)
IMPLICIT = True


def direct_ratio(isa_name: str | None = None) -> int:
    """The direct/packed ratio for ``isa_name`` (default: the active table)."""
    if isa_name is None and _state["isa"] == "auto":  # every call: the best table's
        isa_name = _BEST_ISA
    name = isa_name or active_isa()
    return PORTABLE_DIRECT_RATIO if name.startswith("portable") else DIRECT_RATIO


def use_direct(m: int, k: int, ratio: int | None = None) -> bool:
    """Whether a GEMM of ``m`` output pixels (over all inputs) and reduction ``k`` runs
    direct (``ratio``: default the active table's)."""
    return k >= DIRECT_K and k >= (direct_ratio() if ratio is None else ratio) * m


def isa_code() -> int:
    """The forced table's index for the engine (-1: the best); a forced name this CPU does
    not run (only possible from the environment variable) is refused in one line."""
    name = _state["isa"]
    if name == "auto":
        return -1
    if name in _ISA_INDEX and name in runnable_isas():
        return _ISA_INDEX[name]
    why = (
        "names no kernels of this build"
        if name not in _ISA_INDEX
        else "names kernels this CPU does not run"
    )
    raise ConfigError(
        f"{_ENV_ISA}={name!r} {why} (it runs: {', '.join(runnable_isas())})",
        "unset it for the best one, or set one of those",
    )


__all__ = [
    "FIELDS",
    "F",
    "Unsupported",
    "available",
    "best_isa",
    "engine_module",
    "isa",
    "isa_code",
    "isas",
    "runnable_isas",
    "set_isa",
    "use_isa",
]
