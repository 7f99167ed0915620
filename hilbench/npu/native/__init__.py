"""The ``native`` backend: a whole network per C call (``_engine.c``), bit-exact with TFLM.

A graph is lowered once (per layout of batched overrides) into a :class:`Plan`: a flat
int64 op list, per-channel requantization tables and an arena layout (activations share
memory by liveness). :func:`run` then hands the engine the constants (the graph's own or
the overrides, as they are now), the input and the output buffer; the engine runs every op
for each of the S weight sets and N inputs, reading the weights and biases from those
arrays on every call (nothing derived from them is kept between calls, so a write into a
weight array is always seen). The plan keeps the last arrays' buffers (a ``ViewCache``),
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
import math
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from hilbench.npu.graph import Graph

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


def _up(n: int, m: int) -> int:
    return -(-n // m) * m


def peak_macs_per_s(name: str | None = None, seconds: float = 0.05) -> float | None:
    """The int8 multiply-add peak of one thread with ``name``'s instruction (default: the
    active table): VPDPBUSD (AVX-512 VNNI, AVX-VNNI), VPMADDWD + VPADDD (AVX2), SDOT
    (ARM64), measured now on 12 independent accumulators, best of 5; None for the
    portable C (no single instruction)."""
    import time

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


# --- lowering ---------------------------------------------------------------------------------
@dataclass
class Plan:
    prog: np.ndarray
    qp: np.ndarray
    slots: np.ndarray
    slot_names: list[str]
    packed: np.ndarray
    rowsum: np.ndarray
    arena: np.ndarray
    out_shapes: list[tuple[int, ...]]
    sets: int
    views: Any = None  # _engine.ViewCache: the constants' buffers, kept while they are reused
    # the engine releases the GIL while it computes; one call at a time uses a plan's arena
    lock: threading.Lock = field(default_factory=threading.Lock)
    extra: dict[str, Any] = field(default_factory=dict)


class _Arena:
    """First-fit allocation of 64-byte aligned blocks (each with 64 bytes of slack, which
    the kernels may read past a tensor's end)."""

    def __init__(self) -> None:
        self.live: dict[str, tuple[int, int]] = {}
        self.end = 0

    def alloc(self, key: str, size: int) -> int:
        size = _up(size, ALIGN) + ALIGN
        off = 0
        for o, s in sorted(self.live.values()):
            if o - off >= size:
                break
            off = max(off, o + s)
        self.live[key] = (off, size)
        self.end = max(self.end, off + size)
        return off

    def free(self, key: str) -> None:
        self.live.pop(key, None)


def _requant_table(mult: Any, shift: Any, o: int, o16: int) -> np.ndarray:
    m = np.zeros(o16, np.int64)
    sh = np.zeros(o16, np.int64)
    m[:o] = np.broadcast_to(np.asarray(mult, np.int64).reshape(-1), (o,))
    sh[:o] = np.broadcast_to(np.asarray(shift, np.int64).reshape(-1), (o,))
    if np.any(m < 0) or np.any(m > 2**31 - 1) or np.any(sh < -31) or np.any(sh > 30):
        raise Unsupported("requantization multiplier or shift out of TFLite's range")
    ls = np.maximum(sh, 0)
    rs = np.maximum(-sh, 0)
    mask = (np.int64(1) << rs) - 1
    # the merged-rounding tables (used when every channel has rs >= 1, see the C code)
    rsf = np.where(np.arange(o16) < o, rs, 1)
    add = (np.int64(1) << 30) + (np.int64(1) << (30 + rsf))
    blocks = add.reshape(-1, 16)
    add_eo = np.concatenate([blocks[:, 0::2], blocks[:, 1::2]], axis=1).reshape(-1)
    table = np.concatenate([m, sh, ls, rs, mask, mask >> 1, rsf - 1]).astype(np.int32)
    # the adds again, channel by channel (the portable kernels' layout)
    return np.concatenate([table, add_eo.view(np.int32), add.view(np.int32)])


def _fast_requant(mult: Any, shift: Any) -> bool:
    """Every channel rounds right (shift <= -1): the merged-rounding path applies."""
    return bool(np.all(np.asarray(shift) <= -1))


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
    name = isa_name or active_isa()
    return PORTABLE_DIRECT_RATIO if name.startswith("portable") else DIRECT_RATIO


def use_direct(m: int, k: int, ratio: int | None = None) -> bool:
    """Whether a GEMM of ``m`` output pixels (over all inputs) and reduction ``k`` runs
    direct (``ratio``: default the active table's)."""
    return k >= DIRECT_K and k >= (direct_ratio() if ratio is None else ratio) * m


def lower(
    graph: Graph, batched: frozenset[str], sets: int, inputs: int = 1, ratio: int | None = None
) -> Plan:
    """Lower ``graph`` for ``sets`` weight sets, the constants in ``batched`` having one
    array per set (the others shared), and ``inputs`` inputs per call (any number runs;
    this and the direct ``ratio``, default the active table's, only pick the GEMM
    kernels). Raises :class:`Unsupported`."""
    if _engine is None:
        raise Unsupported(f"native engine not built: {IMPORT_ERROR}")
    t = graph.tensors
    nf = len(FIELDS)
    recs: list[np.ndarray] = []
    qps: list[np.ndarray] = []
    qp_len = 0
    slot_index: dict[str, int] = {}
    slot_rows: list[tuple[int, int]] = []
    packed_len = rs_len = 0
    col_max = pad_max = o16_max = koff_max = wide_max = 0

    def size_of(name: str) -> int:
        return math.prod(t[name].shape)

    producer = {op.outputs[0]: i for i, op in enumerate(graph.ops)}

    def graph_index(name: str) -> int:
        return producer.get(name, -1)

    # liveness: buffers by tensor name, RESHAPE outputs alias their input's buffer
    buf = {graph.input: graph.input}
    last: dict[str, int] = {}
    for i, op in enumerate(graph.ops):
        for n in op.inputs:
            if t[n].data is None:
                last[buf[n]] = i
        buf[op.outputs[0]] = buf[op.inputs[0]] if op.kind == "RESHAPE" else op.outputs[0]
    last[buf[graph.output]] = len(graph.ops)
    # ops before the first one reading a batched constant compute the same for every set:
    # with one input the engine runs them for set 0 only, so whatever they produce for later
    # ops is kept (never freed), as are the first batched op's im2col rows
    first = next(
        (i for i, op in enumerate(graph.ops) if any(n in batched for n in op.inputs)),
        len(graph.ops),
    )
    for op in graph.ops[first:]:
        for n in op.inputs:
            if t[n].data is None and (n == graph.input or graph_index(n) < first):
                last[buf[n]] = len(graph.ops)
    arena = _Arena()
    offs = {graph.input: arena.alloc(graph.input, size_of(graph.input))}

    def slot(name: str) -> int:
        if name not in slot_index:
            slot_index[name] = len(slot_rows)
            nb = t[name].data.nbytes
            slot_rows.append((nb, sets if name in batched else 1))
        return slot_index[name]

    for i, op in enumerate(graph.ops):
        p = op.params
        f = np.zeros(nf, np.int64)
        x = op.inputs[0]
        out = op.outputs[0]
        if op.kind == "RESHAPE":
            offs[out] = offs[x]
        else:
            offs[out] = arena.alloc(out, size_of(out))
        f[F["IN"]] = offs[x]
        f[F["OUT"]] = offs[out]
        f[F["OUT_SIZE"]] = size_of(out)
        f[F["BSLOT"]] = -1
        xs = t[x].shape
        if op.kind in ("CONV_2D", "FULLY_CONNECTED", "DEPTHWISE_CONV_2D"):
            w = t[op.inputs[1]]
            if op.kind == "FULLY_CONNECTED":
                oc, k = w.shape
                h = wd = kh = kw = sh = sw = 1
                c, oh, ow, pt, pl, dh, dw = k, 1, 1, 0, 0, 1, 1
            else:
                h, wd, c = xs
                kh, kw = w.shape[1], w.shape[2]
                oc = w.shape[0] if op.kind == "CONV_2D" else w.shape[3]
                oh, ow = p["out_h"], p["out_w"]
                sh, sw = p["stride_h"], p["stride_w"]
                dh, dw = p.get("dilation_h", 1), p.get("dilation_w", 1)
                pt, pl = p["pad_top"], p["pad_left"]
                k = kh * kw * c
            o16 = _up(oc, 16)
            o16_max = max(o16_max, o16)
            f[F["KIND"]] = OP_DW if op.kind == "DEPTHWISE_CONV_2D" else OP_GEMM
            for key, v in dict(
                H=h, W=wd, C=c, OH=oh, OW=ow, OC=oc, KH=kh, KW=kw, SH=sh, SW=sw, DH=dh, DW=dw,
                PT=pt, PL=pl, O16=o16, IO=p["input_offset"], OO=p["output_offset"],
                LO=p["act_min"], HI=p["act_max"],
            ).items():  # fmt: skip
                f[F[key]] = v
            ws = slot(op.inputs[1])
            f[F["WSLOT"]] = ws
            if len(op.inputs) > 2:
                f[F["BSLOT"]] = slot(op.inputs[2])
            if op.kind == "DEPTHWISE_CONV_2D":
                dm = p["depth_multiplier"]
                hp = (oh - 1) * sh + (kh - 1) * dh + 1
                wp = (ow - 1) * sw + (kw - 1) * dw + 1
                f[F["DM"]], f[F["HP"]], f[F["WP"]] = dm, hp, wp
                pad_max = max(pad_max, hp * wp * oc)
                if kh * kw * 255 * 128 > 2**31 - 1:
                    raise Unsupported(f"depthwise kernel {kh}x{kw} too large")
            else:
                if k > MAX_K:
                    raise Unsupported(f"reduction length {k} > {MAX_K}: int32 could wrap")
                rows_in_place = kh == kw == 1 and sh == sw == 1 and pt == pl == 0
                rows_in_place = rows_in_place and oh == h and ow == wd  # 1x1 convs and FC
                direct = use_direct(oh * ow * inputs, k, ratio)
                # packed convs with dilation 1 along W read the padded input in place
                # ("implicit" im2col): each filter row's KW*C bytes padded to 4
                implicit = IMPLICIT and not rows_in_place and not direct and dw == 1
                k4 = kh * _up(kw * c, 4) if implicit else _up(k, 4)
                f[F["K"]], f[F["K4"]] = k, k4
                f[F["IM2COL"]] = 0 if rows_in_place else 1
                f[F["IMPLICIT"]] = int(implicit)
                if not rows_in_place and i == first:  # its own rows, kept across sets
                    f[F["KEEP"]] = 1
                    f[F["COLS"]] = arena.alloc("__cols_first", oh * ow * k4)
                elif not rows_in_place:
                    col_max = max(col_max, oh * ow * k4)
                    f[F["COLS"]] = -1  # the shared scratch, placed below
                wide_max = max(wide_max, 16 * o16)  # int32 sums of 4 rows (direct GEMMs)
                if not rows_in_place and dw == 1:  # a padded copy (implicit im2col, AVX-512)
                    hp = (oh - 1) * sh + (kh - 1) * dh + 1
                    wp = (ow - 1) * sw + kw
                    f[F["IM2COL"]], f[F["HP"]], f[F["WP"]] = 2, hp, wp
                    pad_max = max(pad_max, hp * wp * c)
                f[F["BEFF_OFF"]] = rs_len  # effective biases, per set (kept across inputs)
                rs_len += o16
                koff_max = max(koff_max, 4 * k4)  # int32 offsets per k (portable) or group
                if direct:
                    f[F["DIRECT"]] = 1
                else:  # packed per call (one set at a time) into the engine's panels
                    f[F["PK_OFF"]] = packed_len
                    # panels of 16 channels (SIMD tables) or 32 (portable C) x K4 bytes
                    packed_len += _up(_up(oc, 32) * k4, ALIGN)
                    f[F["RS_OFF"]] = rs_len
                    rs_len += o16
                    if implicit and k4 != k:  # the weights with padded filter rows
                        f[F["WX_OFF"]] = packed_len
                        packed_len += _up(oc * k4, ALIGN)
            table = _requant_table(p["multiplier"], p["shift"], oc, o16)
            f[F["ANYLS"]] = int(np.any(table[2 * o16 : 3 * o16] > 0))
            f[F["FASTRQ"]] = int(_fast_requant(p["multiplier"], p["shift"]))
            f[F["QP_OFF"]] = qp_len
            qps.append(table)
            qp_len += table.size
        elif op.kind == "ADD":
            f[F["KIND"]] = OP_ADD
            f[F["IN2"]] = offs[op.inputs[1]]
            for key, name in (
                ("IO", "input1_offset"), ("IO2", "input2_offset"), ("OO", "output_offset"),
                ("LO", "act_min"), ("HI", "act_max"), ("LSH", "left_shift"),
                ("M1", "input1_multiplier"), ("S1", "input1_shift"),
                ("M2", "input2_multiplier"), ("S2", "input2_shift"),
                ("MO", "output_multiplier"), ("SO", "output_shift"),
            ):  # fmt: skip
                f[F[key]] = int(p[name])
            for m in ("input1_multiplier", "input2_multiplier", "output_multiplier"):
                if not 0 <= int(p[m]) <= 2**31 - 1:
                    raise Unsupported("ADD multiplier out of range")
        elif op.kind in ("MAX_POOL_2D", "AVERAGE_POOL_2D"):
            f[F["KIND"]] = OP_MAXPOOL if op.kind == "MAX_POOL_2D" else OP_AVGPOOL
            h, wd, c = xs
            for key, v in dict(
                H=h, W=wd, C=c, OH=p["out_h"], OW=p["out_w"], KH=p["filter_h"],
                KW=p["filter_w"], SH=p["stride_h"], SW=p["stride_w"], PT=p["pad_top"],
                PL=p["pad_left"], LO=p["act_min"], HI=p["act_max"],
            ).items():  # fmt: skip
                f[F[key]] = v
        elif op.kind == "MEAN":
            f[F["KIND"]] = OP_MEAN
            h, wd, c = xs
            o16_max = max(o16_max, _up(c, 16))  # its per-channel sums use the acc scratch
            if h * wd * 255 >= 2**32:
                raise Unsupported(f"MEAN over {h}x{wd} pixels: uint32 sums could wrap")
            for key, v in dict(
                H=h, W=wd, C=c, M1=p["multiplier"], S1=p["shift"], ZP=p["input_zero_point"],
                COUNT=p["count"], OO=p["output_offset"],
            ).items():  # fmt: skip
                f[F[key]] = int(v)
        elif op.kind == "RESHAPE":
            f[F["KIND"]] = OP_NOP
        else:
            raise Unsupported(f"op {op.kind}")
        recs.append(f)
        for n in op.inputs:
            if t[n].data is None and last.get(buf[n]) == i:
                arena.free(buf[n])
    hdr = np.zeros(nf, np.int64)
    # scratch after every activation (the allocator reuses freed blocks, scratch must not)
    col_off = arena.end
    pad_off = col_off + _up(col_max, ALIGN) + ALIGN
    bscr_off = pad_off + _up(pad_max, ALIGN) + 3 * ALIGN  # 3x3 VBMI reads 128 bytes ahead
    acc_off = bscr_off + _up(4 * o16_max, ALIGN) + ALIGN  # MEAN's per-channel sums
    koff_off = acc_off + _up(4 * o16_max, ALIGN) + ALIGN  # implicit im2col group offsets
    wide_off = koff_off + _up(koff_max, ALIGN) + ALIGN
    arena.end = wide_off + _up(wide_max, ALIGN) + ALIGN
    for f in recs:
        if f[F["KIND"]] == OP_DW or f[F["IM2COL"]] == 2:
            f[F["PAD_OFF"]] = pad_off
        if f[F["IM2COL"]] and not f[F["KEEP"]]:
            f[F["COLS"]] = col_off
    hdr[G_NOPS] = len(recs)
    hdr[G_IN_OFF] = offs[graph.input]
    hdr[G_IN_SIZE] = size_of(graph.input)
    hdr[G_OUT_OFF] = offs[graph.output]
    hdr[G_OUT_SIZE] = size_of(graph.output)
    hdr[G_COL_OFF] = col_off
    hdr[G_BSCR_OFF] = bscr_off
    hdr[G_FIRST] = first
    hdr[G_ACC_OFF] = acc_off
    hdr[G_KOFF_OFF] = koff_off
    hdr[G_WIDE_OFF] = wide_off
    prog = np.ascontiguousarray(np.stack([hdr, *recs]))
    return Plan(
        prog=prog,
        qp=np.concatenate(qps) if qps else np.zeros(1, np.int32),
        slots=np.array(slot_rows, np.int64).reshape(-1, 2),
        slot_names=list(slot_index),
        packed=np.zeros(max(packed_len, 1), np.uint8),
        rowsum=np.zeros(max(rs_len, 1), np.int32),
        arena=np.zeros(arena.end + ALIGN, np.uint8),
        out_shapes=[t[op.outputs[0]].shape for op in graph.ops],
        sets=sets,
        views=_engine.ViewCache(len(slot_index)),
    )


# --- running ----------------------------------------------------------------------------------
def _isa_code() -> int:
    """The forced table's index for the engine (-1: the best); a forced name this CPU does
    not run (only possible from the environment variable) is refused in one line."""
    name = _state["isa"]
    if name == "auto":
        return -1
    if name in _ISA_INDEX and name in runnable_isas():
        return _ISA_INDEX[name]
    from hilbench.errors import ConfigError

    why = (
        "names no kernels of this build"
        if name not in _ISA_INDEX
        else "names kernels this CPU does not run"
    )
    raise ConfigError(
        f"{_ENV_ISA}={name!r} {why} (it runs: {', '.join(runnable_isas())})",
        "unset it for the best one, or set one of those",
    )


def _plan(graph: Graph, ov: dict[str, np.ndarray], s: int | None, n: int) -> Plan:
    t = graph.tensors
    batched = frozenset(name for name, a in ov.items() if a.ndim > len(t[name].shape))
    inputs = max(1, min(n, MAX_INPUTS_KEY))
    ratio = direct_ratio()
    key = (s or 1, batched, inputs, len(graph.ops), ratio)
    plans = graph.__dict__.setdefault("_native_plans", {})
    plan = plans.get(key)
    if plan is None:
        plan = plans[key] = lower(graph, batched, s or 1, inputs, ratio)
    return plan


def _forward(graph: Graph, x: np.ndarray, ov: dict[str, np.ndarray], s: int | None, dumps):
    plan = _plan(graph, ov, s, x.shape[0])
    t = graph.tensors
    if ov:
        consts = tuple([ov[n] if n in ov else t[n].data for n in plan.slot_names])
    else:
        consts = tuple([t[n].data for n in plan.slot_names])
    sets = plan.sets
    n = x.shape[0]
    out = np.empty((sets, n, *graph.tensors[graph.output].shape), np.int8)
    if dumps:
        dumps = tuple(np.empty((sets, n, *shape), np.int8) for shape in plan.out_shapes)
    isa_code = _isa_code()
    args = (plan.packed, plan.rowsum, plan.arena)
    if not x.flags.c_contiguous:
        x = np.ascontiguousarray(x)
    with plan.lock:
        try:
            _engine.forward(plan.prog, plan.qp, plan.slots, consts, *args, x, out, sets, n,
                            isa_code, dumps, plan.views)  # fmt: skip
        except (BufferError, ValueError):  # a non-contiguous constant (numpy: ValueError)
            if all(a.flags.c_contiguous for a in consts):
                raise
            consts = tuple(np.ascontiguousarray(a) for a in consts)  # temporary: not cached
            _engine.forward(plan.prog, plan.qp, plan.slots, consts, *args, x, out, sets, n,
                            isa_code, dumps, None)  # fmt: skip
    return out, dumps


def run(graph: Graph, x: np.ndarray, ov: dict[str, np.ndarray], s: int | None):
    """Graph.run on the engine (x and overrides already checked); None if unsupported."""
    try:
        out, _ = _forward(graph, x, ov, s, None)
    except Unsupported:
        return None
    return out if s is not None else out[0]


def run_all(graph: Graph, x: np.ndarray, ov: dict[str, np.ndarray], s: int | None):
    """Graph.run_all on the engine: every activation by name; None if unsupported."""
    try:
        _, dumps = _forward(graph, x, ov, s, True)
    except Unsupported:
        return None
    res = {graph.input: x if s is None else np.broadcast_to(x[None], (s, *x.shape))}
    for op, d in zip(graph.ops, dumps, strict=True):
        res[op.outputs[0]] = d[0] if s is None else d
    return res


__all__ = ["Plan", "Unsupported", "available", "lower", "run", "run_all", "use_isa"]
