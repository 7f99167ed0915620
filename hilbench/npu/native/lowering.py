"""What an op's ``lower`` uses to fill its engine record: the :class:`Lowering` of one graph
(its arena, constant slots, scratch sizes and requantization tables) and the record
builders shared by several ops (:func:`lower_conv` for the GEMM and depthwise kernels,
:func:`set_fields`). :mod:`hilbench.npu.program` drives it op by op."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from hilbench.npu import native
from hilbench.npu.native import (
    ALIGN,
    MAX_K,
    OP_DW,
    OP_GEMM,
    F,
    Unsupported,
    round_up,
    use_direct,
)

if TYPE_CHECKING:
    from hilbench.npu.ir import GraphIR, Op


class Arena:
    """First-fit allocation of 64-byte aligned blocks (each with 64 bytes of slack, which
    the kernels may read past a tensor's end)."""

    def __init__(self) -> None:
        self.live: dict[str, tuple[int, int]] = {}
        self.end = 0

    def alloc(self, key: str, size: int) -> int:
        size = round_up(size, ALIGN) + ALIGN
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


def requant_table(mult: Any, shift: Any, o: int, o16: int) -> np.ndarray:
    """The engine's per-channel requantization table of ``o`` channels padded to ``o16``."""
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


def fast_requant(mult: Any, shift: Any) -> bool:
    """Every channel rounds right (shift <= -1): the merged-rounding path applies."""
    return bool(np.all(np.asarray(shift) <= -1))


class Lowering:
    """The state of lowering one graph: tensors, arena offsets, constant slots, and the
    sizes of the scratch areas and tables the records point into."""

    def __init__(
        self, graph: GraphIR, batched: frozenset[str], sets: int, inputs: int, ratio: int | None
    ) -> None:
        self.tensors = graph.tensors
        self.batched, self.sets, self.inputs, self.ratio = batched, sets, inputs, ratio
        self.arena = Arena()
        self.offs: dict[str, int] = {}
        self.slot_index: dict[str, int] = {}
        self.slot_rows: list[tuple[int, int]] = []
        self.qps: list[np.ndarray] = []
        self.qp_len = self.packed_len = self.rs_len = 0
        self.col_max = self.pad_max = self.o16_max = self.koff_max = self.wide_max = 0
        self.first = len(graph.ops)  # the first op reading a batched constant

    def size_of(self, name: str) -> int:
        return math.prod(self.tensors[name].shape)

    def slot(self, name: str) -> int:
        """The constant ``name``'s slot (one array per set when batched)."""
        if name not in self.slot_index:
            self.slot_index[name] = len(self.slot_rows)
            nb = self.tensors[name].data.nbytes
            self.slot_rows.append((nb, self.sets if name in self.batched else 1))
        return self.slot_index[name]

    def requant(self, f: np.ndarray, p: dict[str, Any], oc: int, o16: int) -> None:
        """Append the op's per-channel table and point its record at it."""
        table = requant_table(p["multiplier"], p["shift"], oc, o16)
        f[F["ANYLS"]] = int(np.any(table[2 * o16 : 3 * o16] > 0))
        f[F["FASTRQ"]] = int(fast_requant(p["multiplier"], p["shift"]))
        f[F["QP_OFF"]] = self.qp_len
        self.qps.append(table)
        self.qp_len += table.size


def set_fields(f: np.ndarray, **values: int) -> None:
    """Record fields by name (the C enum F_*)."""
    for key, v in values.items():
        f[F[key]] = int(v)


def lower_conv(
    lw: Lowering,
    i: int,
    op: Op,
    f: np.ndarray,
    *,
    depthwise: bool,
    hwc: tuple[int, int, int],
    kernel: tuple[int, int, int],
    window: tuple[int, int, int, int, int, int, int, int],
) -> None:
    """A GEMM (FULLY_CONNECTED, CONV_2D) or depthwise record: input (H, W, C), kernel (KH,
    KW, OC), window (OH, OW, SH, SW, DH, DW, PT, PL)."""
    p = op.params
    h, wd, c = hwc
    kh, kw, oc = kernel
    oh, ow, sh, sw, dh, dw, pt, pl = window
    k = kh * kw * c
    o16 = round_up(oc, 16)
    lw.o16_max = max(lw.o16_max, o16)
    f[F["KIND"]] = OP_DW if depthwise else OP_GEMM
    set_fields(
        f, H=h, W=wd, C=c, OH=oh, OW=ow, OC=oc, KH=kh, KW=kw, SH=sh, SW=sw, DH=dh, DW=dw,
        PT=pt, PL=pl, O16=o16, IO=p["input_offset"], OO=p["output_offset"],
        LO=p["act_min"], HI=p["act_max"],
    )  # fmt: skip
    f[F["WSLOT"]] = lw.slot(op.inputs[1])
    if len(op.inputs) > 2:
        f[F["BSLOT"]] = lw.slot(op.inputs[2])
    if depthwise:
        dm = p["depth_multiplier"]
        hp = (oh - 1) * sh + (kh - 1) * dh + 1
        wp = (ow - 1) * sw + (kw - 1) * dw + 1
        f[F["DM"]], f[F["HP"]], f[F["WP"]] = dm, hp, wp
        lw.pad_max = max(lw.pad_max, hp * wp * oc)
        if kh * kw * 255 * 128 > 2**31 - 1:
            raise Unsupported(f"depthwise kernel {kh}x{kw} too large")
    else:
        _lower_gemm(lw, i, f, hwc, kernel, k, o16, window)
    lw.requant(f, p, oc, o16)


def _lower_gemm(
    lw: Lowering,
    i: int,
    f: np.ndarray,
    hwc: tuple[int, int, int],
    kernel: tuple[int, int, int],
    k: int,
    o16: int,
    window: tuple[int, int, int, int, int, int, int, int],
) -> None:
    """The GEMM part of a record: im2col, direct or packed weights, their scratch."""
    h, wd, c = hwc
    kh, kw, oc = kernel
    oh, ow, sh, sw, dh, dw, pt, pl = window
    if k > MAX_K:
        raise Unsupported(f"reduction length {k} > {MAX_K}: int32 could wrap")
    rows_in_place = kh == kw == 1 and sh == sw == 1 and pt == pl == 0
    rows_in_place = rows_in_place and oh == h and ow == wd  # 1x1 convs and FC
    direct = use_direct(oh * ow * lw.inputs, k, lw.ratio)
    # packed convs with dilation 1 along W read the padded input in place
    # ("implicit" im2col): each filter row's KW*C bytes padded to 4
    # the first op reading a batched constant, with one input for several sets: every set
    # reads the same input, so its explicit im2col rows (K rounded up to 4 once, not per
    # filter row) are made for the first set only and kept (F_KEEP below)
    shared_rows = i == lw.first and lw.sets > 1 and lw.inputs == 1
    implicit = native.IMPLICIT and not rows_in_place and not direct and dw == 1
    implicit = implicit and not shared_rows
    k4 = kh * round_up(kw * c, 4) if implicit else round_up(k, 4)
    f[F["K"]], f[F["K4"]] = k, k4
    f[F["IM2COL"]] = 0 if rows_in_place else 1
    f[F["IMPLICIT"]] = int(implicit)
    if not rows_in_place and i == lw.first:  # its own rows, kept across sets
        f[F["KEEP"]] = 1
        f[F["COLS"]] = lw.arena.alloc("__cols_first", oh * ow * k4)
    elif not rows_in_place:
        lw.col_max = max(lw.col_max, oh * ow * k4)
        f[F["COLS"]] = -1  # the shared scratch, placed below
    lw.wide_max = max(lw.wide_max, 16 * o16)  # int32 sums of 4 rows (direct GEMMs)
    if not rows_in_place and dw == 1:  # a padded copy (implicit im2col, AVX-512)
        hp = (oh - 1) * sh + (kh - 1) * dh + 1
        wp = (ow - 1) * sw + kw
        f[F["IM2COL"]], f[F["HP"]], f[F["WP"]] = 2, hp, wp
        lw.pad_max = max(lw.pad_max, hp * wp * c)
    f[F["BEFF_OFF"]] = lw.rs_len  # effective biases, per set (kept across inputs)
    lw.rs_len += o16
    lw.koff_max = max(lw.koff_max, 4 * k4)  # int32 offsets per k (portable) or group
    if direct:
        f[F["DIRECT"]] = 1
    else:  # packed per call (one set at a time) into the engine's panels
        f[F["PK_OFF"]] = lw.packed_len
        # panels of 16 channels (SIMD tables) or 32 (portable C) x K4 bytes
        lw.packed_len += round_up(round_up(oc, 32) * k4, ALIGN)
        f[F["RS_OFF"]] = lw.rs_len
        lw.rs_len += o16
        if implicit and k4 != k:  # the weights with padded filter rows
            f[F["WX_OFF"]] = lw.packed_len
            lw.packed_len += round_up(oc * k4, ALIGN)
