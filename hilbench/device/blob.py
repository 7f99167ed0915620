"""The device's model-blob parser: what a device checks in an ``HBM0`` blob, in Python.

docs/model-blob.md ("What a device checks") lists the rules in the order a device applies them;
:func:`parse` applies exactly those rules in exactly that order and refuses with exactly the
text the C firmware sends (device_fw/core/blob.c formats the same :data:`MESSAGES` templates,
rendered into gen/hb_blob.h as ``HB_MSG_HBM_*``). The twin's wire path (LOAD_MODEL) uses it,
so the twin accepts and refuses what the firmware does.

A device checks structure, lengths, counts, ranges of integer params, indices, dtypes, ranks,
the shapes its kernels rely on, data flow and its limits. It never looks at float scales, zero
point values or names: the host checks those when it builds a blob (``Graph.validate``, run by
:func:`hilbench.npu.blob.to_blob`). Three passes, each complete before the next starts:

1. **structure** -- header, every tensor, op and section record, each count, length, offset and
   index checked before it is used, every param field range-checked;
2. **graph** -- the graph input, then op by op: data flow, aliasing, dtypes, ranks, shapes,
   channel counts and window geometry; then that the graph output is computed;
3. **plan** -- the activation plan (:mod:`hilbench.device.plan`) fits the device's addressing.

The resulting :class:`~hilbench.npu.graph.Graph` runs on hilbench.npu without host validation.
Its tensors are named ``t<index>`` (a device does not read names) in blob order.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

import numpy as np

from hilbench.device import plan
from hilbench.errors import ModelError
from hilbench.npu import blob as B
from hilbench.npu import registry
from hilbench.npu.graph import Graph, Op, QParams, Tensor
from hilbench.npu.ops import common
from hilbench.npu.ops import record as R

# ---- device limits (docs/firmware.md, "Device limits"; gen/hb_blob.h) -------------------------
#: Tensors and ops a device's static tables hold: MobileNetV2 has 171 tensors and 64 ops,
#: ResNet18 74 and 31, at any width and resolution.
MAX_TENSORS = 256
MAX_OPS = 128
#: Extra sections (LOSS, ZOCF, ...) a model may carry.
MAX_SECTIONS = 16
#: The activation plan must fit in 32-bit offsets with room to spare.
MAX_ACT_BYTES = 1 << 31

#: Inputs (fewest, most) and outputs each op kind takes (from its registration).
ARITY: dict[str, tuple[int, int, int]] = {k: d.arity for k, d in registry.REGISTRY.items()}
#: Each op kind's param record (declared in its hilbench.npu.ops module).
RECORDS: dict[str, R.Record] = {k: d.record for k, d in registry.REGISTRY.items()}

#: Every refusal of a model blob a device sends (BAD_MODEL), in the order it checks them.
#: Python %-templates (%d %x %s); tensors and ops are named by index, never by name.
MESSAGES: dict[str, str] = {
    # pass 1: the blob as a whole
    "short": "model blob is %d bytes, shorter than its %d-byte header and %d-byte CRC",
    "magic": "model blob magic is %02x %02x %02x %02x, expected %02x %02x %02x %02x (HBM0)",
    "version": "model blob format version %d, this device reads version %d",
    "length": "model blob is %d bytes, not a multiple of %d",
    "crc": "model blob CRC-32 field is %08x, its bytes give %08x",
    "flags": "model blob header flags are %x, none are defined",
    "no_tensors": "model blob has no tensors",
    "tensors": "model has %d tensors, this device holds at most %d",
    "ops": "model has %d ops, this device holds at most %d",
    "sections": "model has %d sections, this device holds at most %d",
    "input_index": "model input tensor index %d >= tensor count %d",
    "output_index": "model output tensor index %d >= tensor count %d",
    "truncated": "model blob truncated: %s needs %d bytes at offset %d, %d left",
    "padding": "model blob: non-zero padding after %s at offset %d",
    # pass 1: tensor records
    "dtype": "tensor %d: dtype code %d unknown (0 int8, 1 int32)",
    "rank": "tensor %d: rank %d outside [1, %d]",
    "tensor_flags": "tensor %d: flags %x, only bit 0 (has data) is defined",
    "axis": "tensor %d: quantized axis %d outside [-1, %d]",
    "dim": "tensor %d: dim %d is 0",
    "elements": "tensor %d has more than %d elements",
    "axis_unquantized": "tensor %d: quantized axis %d but no scales",
    "scales_no_axis": "tensor %d: %d scales but no quantized axis",
    "scales_axis": "tensor %d: %d scales on axis %d of size %d",
    "data_length": "tensor %d: data length %d, its dims need %d",
    # pass 1: op records
    "opcode": "op %d: opcode %d unknown",
    "op_reserved": "op %d: reserved byte is %d, must be 0",
    "arity": "op %d (%s): %d inputs and %d outputs, it takes %d to %d inputs and %d output",
    "index": "op %d: tensor index %d >= tensor count %d",
    "params_align": "op %d: params length %d is not a multiple of 4",
    "params_short": "op %d (%s): params are %d bytes, shorter than the %d-byte record head",
    "field": "op %d (%s): %s = %d outside [%d, %d]",
    "act_range": "op %d (%s): act_min %d > act_max %d",
    "params_length": "op %d (%s): params are %d bytes, the record needs %d",
    "multiplier": "op %d (%s): multiplier[%d] = %d outside [%d, %d]",
    "shift": "op %d (%s): shift[%d] = %d outside [%d, %d]",
    # pass 1: sections, the end
    "tag": "section %d: tag bytes %02x %02x %02x %02x are not printable ASCII",
    "tag_twice": "section %d: tag %s appears twice",
    "trailing": "model blob has %d unexpected bytes after the last section",
    # pass 2: the graph
    "graph_input": "graph input tensor %d must be an int8 activation with one scale",
    "not_ready": "op %d (%s): input tensor %d is used before it is computed",
    "out_const": "op %d (%s): output tensor %d is a constant",
    "out_input": "op %d (%s): output tensor %d is the graph input",
    "out_twice": "op %d (%s): output tensor %d is already written by op %d",
    "shared": "op %d (%s): constant tensor %d is already used by op %d",
    "act_in": "op %d (%s): input tensor %d must be an int8 activation with one scale",
    "act_out": "op %d (%s): output tensor %d must be an int8 activation with one scale",
    "fc_weights": "op %d (%s): weights tensor %d must be a constant int8 matrix [M, K]",
    "fc_input": "op %d (%s): input tensor %d has %d elements, the weights take %d",
    "rank3": "op %d (%s): input tensor %d must have rank 3 (H, W, C), not %d",
    "conv_filter": "op %d (%s): filter tensor %d must be a constant int8 [O, KH, KW, %d]",
    "dw_filter": "op %d (%s): filter tensor %d must be a constant int8 [1, KH, KW, %d]",
    "filter_scales": (
        "op %d (%s): filter tensor %d has %d scales on axis %d, it needs 1, or %d on axis %d"
    ),
    "channels": "op %d (%s): params have %d channels, filter tensor %d has %d scales",
    "bias": (
        "op %d (%s): bias tensor %d must be a constant int32 vector of %d elements with %d scales"
    ),
    "geometry": (
        "op %d (%s): params give out %dx%d pad %d,%d; the geometry gives out %dx%d pad %d,%d"
    ),
    "mean_count": "op %d (%s): params count %d, the input has %d pixels",
    "shape1": "op %d (%s): output tensor %d must have shape (%d,)",
    "shape3": "op %d (%s): output tensor %d must have shape (%d, %d, %d)",
    "add_shapes": "op %d (%s): tensors %d, %d and %d must have one shape",
    "reshape": "op %d (%s): input tensor %d holds %d elements, output tensor %d holds %d",
    "output": "graph output tensor %d is never computed",
    # pass 3: the activation plan
    "act_bytes": "activations need %d bytes, more than the %d this device addresses",
}

#: The parts of a blob that ``truncated`` and ``padding`` name (formatted first, then passed
#: to those templates as their %s).
WHAT: dict[str, str] = {
    "name": "model name",
    "tensor": "tensor %d header",
    "dims": "tensor %d dims",
    "scales": "tensor %d scales",
    "zero_points": "tensor %d zero points",
    "tensor_name": "tensor %d name",
    "data_length": "tensor %d data length",
    "data": "tensor %d data",
    "op": "op %d header",
    "indices": "op %d tensor indices",
    "params_len": "op %d params length",
    "params": "op %d params",
    "section": "section %d header",
    "payload": "section %d payload",
}


class BlobError(ModelError):
    """A blob a device refuses (BAD_MODEL): ``message`` is ``MESSAGES[key] % args``."""

    def __init__(self, key: str, *args: int | str) -> None:
        self.key = key
        self.args_ = args
        self.message = MESSAGES[key] % args
        super().__init__(self.message)


# ---- pass 1: structure --------------------------------------------------------------------------

_FMT_SIGNED = {"i": True, "I": False, "h": True, "H": False, "b": True, "B": False}


@dataclass
class TensorRec:
    """One tensor record as a device reads it (offsets into the blob)."""

    dtype: int
    rank: int
    flags: int
    axis: int
    n_q: int
    dims: tuple[int, ...]
    elements: int
    q_offset: int  # scales (f32[n_q]) then zero points (i32[n_q])
    data_offset: int = -1  # -1: an activation

    @property
    def constant(self) -> bool:
        return self.data_offset >= 0


@dataclass
class OpRec:
    """One op record: kind, tensor indices and the range-checked param fields."""

    opcode: int
    kind: str
    inputs: list[int]
    outputs: list[int]
    params: bytes
    fields: dict[str, int] = field(default_factory=dict)
    n_channels: int = 0


@dataclass
class Parsed:
    """The blob's records after pass 1 (structure)."""

    data: bytes
    input: int
    output: int
    tensors: list[TensorRec]
    ops: list[OpRec]
    sections: dict[str, bytes]


class _Reader:
    """A cursor over the blob body that refuses to read past it."""

    def __init__(self, data: bytes, end: int) -> None:
        self.data, self.pos, self.end = data, 0, end

    def take(self, n: int, what: str, *args: int) -> bytes:
        left = self.end - self.pos
        if n > left:
            raise BlobError("truncated", WHAT[what] % args, n, self.pos, left)
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b

    def align(self, what: str, *args: int) -> None:
        # the body ends at a multiple of 4, so padding never runs past it
        start = self.pos
        pad = self.data[start : start + (-start % B.ALIGN)]
        self.pos += len(pad)
        if any(pad):
            raise BlobError("padding", WHAT[what] % args, start)


def _header(data: bytes) -> tuple[int, ...]:
    n = len(data)
    need = B._HEADER.size + B.CRC_SIZE
    if n < need:
        raise BlobError("short", n, B._HEADER.size, B.CRC_SIZE)
    if data[:4] != B.MAGIC:
        raise BlobError("magic", *data[:4], *B.MAGIC)
    version = struct.unpack_from("<H", data, B.field_offsets(B.HEADER_FIELDS)["version"])[0]
    if version != B.VERSION:
        raise BlobError("version", version, B.VERSION)
    if n % B.ALIGN:
        raise BlobError("length", n, B.ALIGN)
    body_end = n - B.CRC_SIZE
    field_crc = struct.unpack_from("<I", data, body_end)[0]
    crc = zlib.crc32(data[:body_end]) & 0xFFFFFFFF
    if field_crc != crc:
        raise BlobError("crc", field_crc, crc)
    _, _, flags, n_t, n_o, n_s, i_in, i_out, name_len = B._HEADER.unpack_from(data, 0)
    if flags != 0:
        raise BlobError("flags", flags)
    if n_t == 0:
        raise BlobError("no_tensors")
    if n_t > MAX_TENSORS:
        raise BlobError("tensors", n_t, MAX_TENSORS)
    if n_o > MAX_OPS:
        raise BlobError("ops", n_o, MAX_OPS)
    if n_s > MAX_SECTIONS:
        raise BlobError("sections", n_s, MAX_SECTIONS)
    if i_in >= n_t:
        raise BlobError("input_index", i_in, n_t)
    if i_out >= n_t:
        raise BlobError("output_index", i_out, n_t)
    return n_t, n_o, n_s, i_in, i_out, name_len


def _tensor(r: _Reader, ti: int) -> TensorRec:
    dt, rank, flags, axis, name_len, n_q = B._TENSOR.unpack(r.take(B._TENSOR.size, "tensor", ti))
    if dt not in B.DTYPE_NAMES:
        raise BlobError("dtype", ti, dt)
    if not 1 <= rank <= B.MAX_RANK:
        raise BlobError("rank", ti, rank, B.MAX_RANK)
    if flags & ~B.FLAG_HAS_DATA:
        raise BlobError("tensor_flags", ti, flags)
    if not -1 <= axis < rank:
        raise BlobError("axis", ti, axis, rank - 1)
    dims = struct.unpack(f"<{rank}I", r.take(4 * rank, "dims", ti))
    elements = 1
    for j, d in enumerate(dims):
        if d == 0:
            raise BlobError("dim", ti, j)
        elements *= d
        if elements > B.MAX_ELEMENTS:
            raise BlobError("elements", ti, B.MAX_ELEMENTS)
    if n_q == 0 and axis != -1:
        raise BlobError("axis_unquantized", ti, axis)
    if n_q > 1 and axis == -1:
        raise BlobError("scales_no_axis", ti, n_q)
    if n_q >= 1 and axis != -1 and dims[axis] != n_q:
        raise BlobError("scales_axis", ti, n_q, axis, dims[axis])
    q_offset = r.pos
    r.take(4 * n_q, "scales", ti)
    r.take(4 * n_q, "zero_points", ti)
    r.take(name_len, "tensor_name", ti)
    r.align("tensor_name", ti)
    rec = TensorRec(dt, rank, flags, axis, n_q, tuple(dims), elements, q_offset)
    if flags & B.FLAG_HAS_DATA:
        (nbytes,) = struct.unpack("<I", r.take(4, "data_length", ti))
        want = elements * B.ITEMSIZE[B.DTYPE_NAMES[dt]]
        if nbytes != want:
            raise BlobError("data_length", ti, nbytes, want)
        rec.data_offset = r.pos
        r.take(nbytes, "data", ti)
        r.align("data", ti)
    return rec


def _params(oi: int, kind: str, rec: R.Record, params: bytes, base: int) -> tuple[dict, int]:
    """Range-check one op's param record (pass 1); returns the head fields and C."""
    n = len(params)
    if n < rec.head.size:
        raise BlobError("params_short", oi, kind, n, rec.head.size)
    values: dict[str, int] = {}
    for f, off in rec.offsets():
        (v,) = struct.unpack_from("<" + f.fmt, params, off)
        if not f.lo <= v <= f.hi:
            raise BlobError("field", oi, kind, f.name, v, f.lo, f.hi)
        values[f.name] = v
    if "act_min" in values and "act_max" in values and values["act_min"] > values["act_max"]:
        raise BlobError("act_range", oi, kind, values["act_min"], values["act_max"])
    nch = values[rec.count] if rec.per_channel else 0
    used = rec.head.size + 5 * nch
    need = used + (-used % B.ALIGN)
    if n != need:
        raise BlobError("params_length", oi, kind, n, need)
    if rec.per_channel:
        mult = struct.unpack_from(f"<{nch}i", params, rec.head.size)
        shift = struct.unpack_from(f"<{nch}b", params, rec.head.size + 4 * nch)
        for c, m in enumerate(mult):
            if not R.MULTIPLIER[0] <= m <= R.MULTIPLIER[1]:
                raise BlobError("multiplier", oi, kind, c, m, *R.MULTIPLIER)
        for c, s in enumerate(shift):
            if not R.SHIFT[0] <= s <= R.SHIFT[1]:
                raise BlobError("shift", oi, kind, c, s, *R.SHIFT)
    if any(params[used:]):
        raise BlobError("padding", WHAT["params"] % oi, base + used)
    return values, nch


def _op(r: _Reader, oi: int, n_t: int) -> OpRec:
    opcode, n_in, n_out, res = B._OP.unpack(r.take(B._OP.size, "op", oi))
    if opcode not in registry.BY_OPCODE:
        raise BlobError("opcode", oi, opcode)
    if res != 0:
        raise BlobError("op_reserved", oi, res)
    kind = registry.BY_OPCODE[opcode].kind
    lo, hi, outs = ARITY[kind]
    if not (lo <= n_in <= hi and n_out == outs):
        raise BlobError("arity", oi, kind, n_in, n_out, lo, hi, outs)
    idx = struct.unpack(f"<{n_in + n_out}H", r.take(2 * (n_in + n_out), "indices", oi))
    for k in idx:
        if k >= n_t:
            raise BlobError("index", oi, k, n_t)
    r.align("indices", oi)
    (plen,) = struct.unpack("<I", r.take(4, "params_len", oi))
    if plen % B.ALIGN:
        raise BlobError("params_align", oi, plen)
    base = r.pos
    params = r.take(plen, "params", oi)
    rec = RECORDS[kind]
    values, nch = _params(oi, kind, rec, params, base)
    return OpRec(opcode, kind, list(idx[:n_in]), list(idx[n_in:]), params, values, nch)


def check_structure(data: bytes) -> Parsed:
    """Pass 1: the header, every record and section, the end at the CRC."""
    data = bytes(data)
    n_t, n_o, n_s, i_in, i_out, name_len = _header(data)
    r = _Reader(data, len(data) - B.CRC_SIZE)
    r.pos = B._HEADER.size
    r.take(name_len, "name")
    r.align("name")
    tensors = [_tensor(r, ti) for ti in range(n_t)]
    ops = [_op(r, oi, n_t) for oi in range(n_o)]
    sections: dict[str, bytes] = {}
    for si in range(n_s):
        tag, length = B._SECTION.unpack(r.take(B._SECTION.size, "section", si))
        if not all(0x21 <= c <= 0x7E for c in tag):
            raise BlobError("tag", si, *tag)
        payload = r.take(length, "payload", si)
        r.align("payload", si)
        if tag.decode() in sections:
            raise BlobError("tag_twice", si, tag.decode())
        sections[tag.decode()] = payload
    if r.pos != r.end:
        raise BlobError("trailing", r.end - r.pos)
    return Parsed(data, i_in, i_out, tensors, ops, sections)


# ---- pass 2: the graph --------------------------------------------------------------------------


def _is_activation(t: TensorRec) -> bool:
    return t.dtype == B.DTYPE_CODES["int8"] and not t.constant and t.n_q == 1


def _window(p: dict[str, int], in_hw: tuple[int, int], k_hw: tuple[int, int], dil) -> tuple:
    """(out_h, out_w, pad_top, pad_left) as TFLite computes them (integers only)."""
    padding = common.PADDINGS[p["padding"]]
    return common.geometry(padding, in_hw, k_hw, (p["stride_h"], p["stride_w"]), dil)


class GraphCheck:
    """Pass 2 over a parsed blob; each op's registration checks its own op through
    :meth:`act_in`, :meth:`act_out`, :meth:`rank3`, :meth:`filter`, :meth:`geometry` and
    :meth:`fail`."""

    #: the blob's dtype codes
    INT8 = B.DTYPE_CODES["int8"]
    INT32 = B.DTYPE_CODES["int32"]

    def __init__(self, parsed: Parsed) -> None:
        self.p = parsed
        self.t = parsed.tensors
        self.writer: dict[int, int] = {}  # activation -> op that writes it (-1: graph input)
        self.user: dict[int, int] = {}  # constant -> the op that uses it

    def run(self) -> None:
        p = self.p
        if not _is_activation(self.t[p.input]):
            raise BlobError("graph_input", p.input)
        self.writer[p.input] = -1
        for oi, op in enumerate(p.ops):
            self.op(oi, op)
        if p.output not in self.writer:
            raise BlobError("output", p.output)

    def op(self, oi: int, op: OpRec) -> None:
        t, kind = self.t, op.kind
        for k in op.inputs:
            if not t[k].constant and k not in self.writer:
                raise BlobError("not_ready", oi, kind, k)
        for k in op.outputs:
            if t[k].constant:
                raise BlobError("out_const", oi, kind, k)
            if k in self.writer:
                if self.writer[k] < 0:
                    raise BlobError("out_input", oi, kind, k)
                raise BlobError("out_twice", oi, kind, k, self.writer[k])
        for k in op.inputs:
            if t[k].constant:
                if k in self.user:
                    raise BlobError("shared", oi, kind, k, self.user[k])
                self.user[k] = oi
        registry.REGISTRY[kind].blob_check(self, oi, op)
        for k in op.outputs:
            self.writer[k] = oi

    # -- helpers for the ops' blob_check --
    @staticmethod
    def fail(key: str, *args: object) -> BlobError:
        """The refusal ``key`` of :data:`MESSAGES` with its values."""
        return BlobError(key, *args)

    def act_in(self, oi: int, op: OpRec, k: int) -> TensorRec:
        if not _is_activation(self.t[k]):
            raise BlobError("act_in", oi, op.kind, k)
        return self.t[k]

    def act_out(self, oi: int, op: OpRec) -> TensorRec:
        k = op.outputs[0]
        if not _is_activation(self.t[k]):
            raise BlobError("act_out", oi, op.kind, k)
        return self.t[k]

    def rank3(self, oi: int, op: OpRec, x: TensorRec) -> None:
        if x.rank != 3:
            raise BlobError("rank3", oi, op.kind, op.inputs[0], x.rank)

    def filter(self, oi: int, op: OpRec, n_out: int, axis: int) -> None:
        """Filter scales, the params' channel count, the optional bias."""
        wi = op.inputs[1]
        w = self.t[wi]
        if w.n_q != 1 and (w.n_q != n_out or w.axis != axis):
            raise BlobError("filter_scales", oi, op.kind, wi, w.n_q, w.axis, n_out, axis)
        if op.n_channels != w.n_q:
            raise BlobError("channels", oi, op.kind, op.n_channels, wi, w.n_q)
        if len(op.inputs) > 2:
            bi = op.inputs[2]
            b = self.t[bi]
            if not (b.constant and b.dtype == self.INT32 and b.dims == (n_out,) and b.n_q == w.n_q):
                raise BlobError("bias", oi, op.kind, bi, n_out, w.n_q)

    def geometry(self, oi, op, x, k_hw, dil, n_out) -> None:
        f = op.fields
        want = _window(f, (x.dims[0], x.dims[1]), k_hw, dil)
        got = (f["out_h"], f["out_w"], f["pad_top"], f["pad_left"])
        if got != want:
            raise BlobError("geometry", oi, op.kind, *got, *want)
        shape = (want[0], want[1], n_out)
        if self.t[op.outputs[0]].dims != shape:
            raise BlobError("shape3", oi, op.kind, op.outputs[0], *shape)


def check_graph(parsed: Parsed) -> None:
    """Pass 2: data flow, aliasing, dtypes, ranks, shapes and geometry, op by op."""
    GraphCheck(parsed).run()


# ---- the Graph the twin runs --------------------------------------------------------------------


def tensor_name(index: int) -> str:
    """The name :func:`parse` gives tensor ``index``."""
    return f"t{index}"


def _graph(p: Parsed) -> Graph:
    data = p.data
    tensors: dict[str, Tensor] = {}
    for i, t in enumerate(p.tensors):
        dtype = B.DTYPE_NAMES[t.dtype]
        q = None
        if t.n_q:
            scale = np.frombuffer(data, "<f4", t.n_q, t.q_offset).astype(np.float32)
            zp = np.frombuffer(data, "<i4", t.n_q, t.q_offset + 4 * t.n_q).astype(np.int32)
            q = QParams(scale, zp, None if t.axis < 0 else t.axis)
        arr = None
        if t.constant:
            arr = np.frombuffer(data, B.NP_LE[dtype], t.elements, t.data_offset)
            arr = arr.astype(dtype).reshape(t.dims)
        tensors[tensor_name(i)] = Tensor(tensor_name(i), t.dims, dtype, q, arr)
    ops = [
        Op(
            o.kind,
            [tensor_name(k) for k in o.inputs],
            [tensor_name(k) for k in o.outputs],
            RECORDS[o.kind].unpack(o.params),
        )
        for o in p.ops
    ]
    return Graph(tensors, ops, tensor_name(p.input), tensor_name(p.output), "model")


def parse(blob: bytes) -> tuple[Graph, dict[str, bytes]]:
    """Check ``blob`` as a device does and return its graph and extra sections by tag;
    :class:`BlobError` (``.key``, ``.message``) on the first rule it breaks."""
    parsed = check_structure(blob)
    check_graph(parsed)
    graph = _graph(parsed)
    need = plan.act_bytes(graph)
    if need > MAX_ACT_BYTES:
        raise BlobError("act_bytes", need, MAX_ACT_BYTES)
    return graph, parsed.sections
