"""A whole graph on the native engine: :func:`lower` turns it into a :class:`Plan` (the
program header, one record per op filled by that op's registration, the arena layout),
:func:`run` and :func:`run_all` execute it (``Graph.run`` and ``Graph.run_all`` under the
``native`` backend)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from hilbench.npu import native, registry
from hilbench.npu.native import (
    ALIGN,
    FIELDS,
    G_ACC_OFF,
    G_BSCR_OFF,
    G_COL_OFF,
    G_FIRST,
    G_IN_OFF,
    G_IN_SIZE,
    G_KOFF_OFF,
    G_NOPS,
    G_OUT_OFF,
    G_OUT_SIZE,
    G_WIDE_OFF,
    MAX_INPUTS_KEY,
    OP_DW,
    F,
    Unsupported,
    round_up,
)
from hilbench.npu.native.lowering import Lowering

if TYPE_CHECKING:
    from hilbench.npu.ir import GraphIR


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
    kept: np.ndarray | None = None  # one set: the packed weights' copy (see lower)
    # the engine releases the GIL while it computes; one call at a time uses a plan's arena
    lock: threading.Lock = field(default_factory=threading.Lock)
    extra: dict[str, Any] = field(default_factory=dict)


def lower(
    graph: GraphIR, batched: frozenset[str], sets: int, inputs: int = 1, ratio: int | None = None
) -> Plan:
    """Lower ``graph`` for ``sets`` weight sets, the constants in ``batched`` having one
    array per set (the others shared), and ``inputs`` inputs per call (any number runs;
    this and the direct ``ratio``, default the active table's, only pick the GEMM
    kernels). Raises :class:`Unsupported`."""
    if native.engine_module() is None:
        raise Unsupported(f"native engine not built: {native.IMPORT_ERROR}")
    t = graph.tensors
    regs = []
    for op in graph.ops:
        if op.kind not in registry.REGISTRY:
            raise Unsupported(f"op {op.kind}")
        regs.append(registry.REGISTRY[op.kind])
    lw = Lowering(graph, batched, sets, inputs, ratio)
    producer = {op.outputs[0]: i for i, op in enumerate(graph.ops)}
    # liveness: buffers by tensor name, outputs that alias their input share its buffer
    buf = {graph.input: graph.input}
    last: dict[str, int] = {}
    for i, (op, reg) in enumerate(zip(graph.ops, regs, strict=True)):
        for n in op.inputs:
            if t[n].data is None:
                last[buf[n]] = i
        buf[op.outputs[0]] = buf[op.inputs[0]] if reg.aliases_input else op.outputs[0]
    last[buf[graph.output]] = len(graph.ops)
    # ops before the first one reading a batched constant compute the same for every set:
    # with one input the engine runs them for set 0 only, so whatever they produce for later
    # ops is kept (never freed), as are the first batched op's im2col rows
    first = lw.first = next(
        (i for i, op in enumerate(graph.ops) if any(n in batched for n in op.inputs)),
        len(graph.ops),
    )
    for op in graph.ops[first:]:
        for n in op.inputs:
            if t[n].data is None and (n == graph.input or producer.get(n, -1) < first):
                last[buf[n]] = len(graph.ops)
    arena, offs = lw.arena, lw.offs
    offs[graph.input] = arena.alloc(graph.input, lw.size_of(graph.input))
    recs: list[np.ndarray] = []
    for i, (op, reg) in enumerate(zip(graph.ops, regs, strict=True)):
        f = np.zeros(len(FIELDS), np.int64)
        x, out = op.inputs[0], op.outputs[0]
        offs[out] = offs[x] if reg.aliases_input else arena.alloc(out, lw.size_of(out))
        f[F["IN"]] = offs[x]
        f[F["OUT"]] = offs[out]
        f[F["OUT_SIZE"]] = lw.size_of(out)
        f[F["BSLOT"]] = -1
        reg.lower(lw, i, op, f)
        recs.append(f)
        for n in op.inputs:
            if t[n].data is None and last.get(buf[n]) == i:
                arena.free(buf[n])
    hdr = np.zeros(len(FIELDS), np.int64)
    # scratch after every activation (the allocator reuses freed blocks, scratch must not)
    col_off = arena.end
    pad_off = col_off + round_up(lw.col_max, ALIGN) + ALIGN
    bscr_off = pad_off + round_up(lw.pad_max, ALIGN) + 3 * ALIGN  # 3x3 VBMI reads 128 ahead
    acc_off = bscr_off + round_up(4 * lw.o16_max, ALIGN) + ALIGN  # MEAN's per-channel sums
    koff_off = acc_off + round_up(4 * lw.o16_max, ALIGN) + ALIGN  # implicit im2col offsets
    wide_off = koff_off + round_up(lw.koff_max, ALIGN) + ALIGN
    arena.end = wide_off + round_up(lw.wide_max, ALIGN) + ALIGN
    for f in recs:
        if f[F["KIND"]] == OP_DW or f[F["IM2COL"]] == 2:
            f[F["PAD_OFF"]] = pad_off
        if f[F["IM2COL"]] and not f[F["KEEP"]]:
            f[F["COLS"]] = col_off
    hdr[G_NOPS] = len(recs)
    hdr[G_IN_OFF] = offs[graph.input]
    hdr[G_IN_SIZE] = lw.size_of(graph.input)
    hdr[G_OUT_OFF] = offs[graph.output]
    hdr[G_OUT_SIZE] = lw.size_of(graph.output)
    hdr[G_COL_OFF] = col_off
    hdr[G_BSCR_OFF] = bscr_off
    hdr[G_FIRST] = first
    hdr[G_ACC_OFF] = acc_off
    hdr[G_KOFF_OFF] = koff_off
    hdr[G_WIDE_OFF] = wide_off
    prog = np.ascontiguousarray(np.stack([hdr, *recs]))
    slot_rows = np.array(lw.slot_rows, np.int64).reshape(-1, 2)
    # one weight set: a copy of the packed GEMMs' weights as last packed (a header first),
    # so that the engine repacks only weights that changed since (compared byte for byte)
    kept = None
    if sets == 1:
        sizes = [
            round_up(int(slot_rows[f[F["WSLOT"]], 0]), 64)
            for f in recs
            if f[F["KIND"]] == native.OP_GEMM and not f[F["DIRECT"]]
        ]
        if sizes:
            kept = np.zeros(64 + sum(sizes), np.uint8)
    return Plan(
        prog=prog,
        qp=np.concatenate(lw.qps) if lw.qps else np.zeros(1, np.int32),
        slots=slot_rows,
        slot_names=list(lw.slot_index),
        packed=np.zeros(max(lw.packed_len, 1), np.uint8),
        rowsum=np.zeros(max(lw.rs_len, 1), np.int32),
        arena=np.zeros(arena.end + ALIGN, np.uint8),
        out_shapes=[t[op.outputs[0]].shape for op in graph.ops],
        sets=sets,
        views=native.engine_module().ViewCache(len(lw.slot_index)),
        kept=kept,
    )


_NONE: frozenset[str] = frozenset()


def _plan(graph: GraphIR, ov: dict[str, np.ndarray], s: int | None, n: int) -> Plan:
    t = graph.tensors
    batched = (
        frozenset(name for name, a in ov.items() if a.ndim > len(t[name].shape)) if ov else _NONE
    )
    inputs = n if 1 <= n <= MAX_INPUTS_KEY else max(1, min(n, MAX_INPUTS_KEY))
    ratio = native.direct_ratio()
    key = (s or 1, batched, inputs, len(graph.ops), ratio)
    plans = graph.__dict__.get("_native_plans")
    if plans is None:
        plans = graph.__dict__["_native_plans"] = {}
    plan = plans.get(key)
    if plan is None:
        plan = plans[key] = lower(graph, batched, s or 1, inputs, ratio)
        # per call: the constants' tensors in slot order, the output's shape after (S, N)
        plan.extra["slot_tensors"] = [t[name] for name in plan.slot_names]
        plan.extra["out_shape"] = t[graph.output].shape
    return plan


def _forward(graph: GraphIR, x: np.ndarray, ov: dict[str, np.ndarray], s: int | None, dumps):
    plan = _plan(graph, ov, s, x.shape[0])
    t = graph.tensors
    if ov:
        consts = tuple([ov[n] if n in ov else t[n].data for n in plan.slot_names])
    else:
        consts = tuple([ts.data for ts in plan.extra["slot_tensors"]])
    sets = plan.sets
    n = x.shape[0]
    out = np.empty((sets, n, *plan.extra["out_shape"]), np.int8)
    if dumps:
        dumps = tuple(np.empty((sets, n, *shape), np.int8) for shape in plan.out_shapes)
    isa_code = native.isa_code()
    engine = native.engine_module()
    args = (plan.packed, plan.rowsum, plan.arena)
    if not x.flags.c_contiguous:
        x = np.ascontiguousarray(x)
    with plan.lock:
        try:
            engine.forward(plan.prog, plan.qp, plan.slots, consts, *args, x, out, sets, n,
                            isa_code, dumps, plan.views,
                            *(() if plan.kept is None else (plan.kept,)))  # fmt: skip
        except (BufferError, ValueError):  # a non-contiguous constant (numpy: ValueError)
            if all(a.flags.c_contiguous for a in consts):
                raise
            consts = tuple(np.ascontiguousarray(a) for a in consts)  # temporary: not cached
            engine.forward(plan.prog, plan.qp, plan.slots, consts, *args, x, out, sets, n,
                            isa_code, dumps, None,
                            *(() if plan.kept is None else (plan.kept,)))  # fmt: skip
    return out, dumps


def run(graph: GraphIR, x: np.ndarray, ov: dict[str, np.ndarray], s: int | None):
    """Graph.run on the engine (x and overrides already checked); None if unsupported."""
    try:
        out, _ = _forward(graph, x, ov, s, None)
    except Unsupported:
        return None
    return out if s is not None else out[0]


def run_all(graph: GraphIR, x: np.ndarray, ov: dict[str, np.ndarray], s: int | None):
    """Graph.run_all on the engine: every activation by name; None if unsupported."""
    try:
        _, dumps = _forward(graph, x, ov, s, True)
    except Unsupported:
        return None
    res = {graph.input: x if s is None else np.broadcast_to(x[None], (s, *x.shape))}
    for op, d in zip(graph.ops, dumps, strict=True):
        res[op.outputs[0]] = d[0] if s is None else d
    return res
