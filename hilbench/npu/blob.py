"""The device's model format (``HBM0``), carried by LOAD_MODEL; see docs/model-blob.md.

Little-endian, every record 4-byte aligned, a trailing CRC-32 (zlib / IEEE 802.3) of all bytes
before it. :func:`from_blob` trusts no count, length or index: each is bounds-checked and a
malformed blob raises ModelError naming the field.
"""

from __future__ import annotations

import math
import struct
import zlib

import numpy as np

from hilbench.errors import ModelError
from hilbench.npu import registry
from hilbench.npu.graph import Graph, Op, QParams, Tensor

MAGIC = b"HBM0"
VERSION = 1
DTYPE_CODES: dict[str, int] = {"int8": 0, "int32": 1}
DTYPE_NAMES: dict[int, str] = {v: k for k, v in DTYPE_CODES.items()}
ITEMSIZE: dict[str, int] = {"int8": 1, "int32": 4}
NP_LE: dict[str, str] = {"int8": "i1", "int32": "<i4"}
MAX_RANK = 6
MAX_ELEMENTS = 1 << 26  # per tensor; far above anything a 4.2 MB SRAM device could hold
FLAG_HAS_DATA = 0x01

CRC_SIZE = 4  # the trailing u32 CRC-32
ALIGN = 4  # every record starts at a multiple of 4; padding is zero

# The fixed parts of the records, as (field, struct code) in wire order (docs/model-blob.md);
# the device parser (hilbench.device.blob) and gen/hb_blob.h read the same declaration.
HEADER_FIELDS = (
    ("magic", "4s"),
    ("version", "H"),
    ("flags", "H"),
    ("n_tensors", "H"),
    ("n_ops", "H"),
    ("n_sections", "H"),
    ("input", "H"),
    ("output", "H"),
    ("name_len", "H"),
)
TENSOR_FIELDS = (
    ("dtype", "B"),
    ("rank", "B"),
    ("flags", "B"),
    ("axis", "b"),
    ("name_len", "H"),
    ("n_q", "H"),
)
OP_FIELDS = (("opcode", "B"), ("n_inputs", "B"), ("n_outputs", "B"), ("reserved", "B"))
SECTION_FIELDS = (("tag", "4s"), ("length", "I"))


def _struct(fields: tuple[tuple[str, str], ...]) -> struct.Struct:
    return struct.Struct("<" + "".join(code for _, code in fields))


def field_offsets(fields: tuple[tuple[str, str], ...]) -> dict[str, int]:
    """Byte offset of each field of a record declared as (field, struct code) pairs."""
    out, pos = {}, 0
    for name, code in fields:
        out[name] = pos
        pos += struct.calcsize("<" + code)
    return out


_HEADER = _struct(HEADER_FIELDS)  # 20 bytes
_TENSOR = _struct(TENSOR_FIELDS)  # 8 bytes
_OP = _struct(OP_FIELDS)  # 4 bytes
_SECTION = _struct(SECTION_FIELDS)  # 8 bytes
_FIX = "rebuild the blob with hilbench.npu.blob.to_blob"


def _pad(b: bytes) -> bytes:
    return b + b"\0" * (-len(b) % 4)


def to_blob(graph: Graph, extra_sections: dict[str, bytes] | None = None) -> bytes:
    """Serialise a validated graph (plus named extra sections) to ``HBM0`` bytes."""
    graph.validate()
    extra = dict(extra_sections or {})
    names = list(graph.tensors)
    index = {n: i for i, n in enumerate(names)}
    if len(names) > 0xFFFF or len(graph.ops) > 0xFFFF or len(extra) > 0xFFFF:
        raise ModelError("model has more than 65535 tensors, ops or sections", "split the model")
    gname = graph.name.encode()
    out = bytearray(
        _HEADER.pack(
            MAGIC,
            VERSION,
            0,
            len(names),
            len(graph.ops),
            len(extra),
            index[graph.input],
            index[graph.output],
            len(gname),
        )
    )
    out += _pad(gname)
    for n in names:
        t = graph.tensors[n]
        q = t.qparams
        nq = 0 if q is None else q.scale.size
        axis = -1 if q is None or q.axis is None else q.axis
        tname = n.encode()
        rec = _TENSOR.pack(
            DTYPE_CODES[t.dtype],
            len(t.shape),
            FLAG_HAS_DATA if t.data is not None else 0,
            axis,
            len(tname),
            nq,
        )
        rec += struct.pack(f"<{len(t.shape)}I", *t.shape)
        if q is not None:
            rec += q.scale.astype("<f4").tobytes() + q.zero_point.astype("<i4").tobytes()
        rec = _pad(rec + tname)
        if t.data is not None:
            data = np.ascontiguousarray(t.data).astype(NP_LE[t.dtype]).tobytes()
            rec += _pad(struct.pack("<I", len(data)) + data)
        out += rec
    for op in graph.ops:
        d = registry.get(op.kind)
        rec = _OP.pack(d.opcode, len(op.inputs), len(op.outputs), 0)
        rec += struct.pack(
            f"<{len(op.inputs) + len(op.outputs)}H", *(index[n] for n in op.inputs + op.outputs)
        )
        params = d.pack_params(op.params)
        out += _pad(rec) + struct.pack("<I", len(params)) + params
    for tag, payload in extra.items():
        tb = tag.encode("ascii", "replace")
        if len(tb) != 4 or not tb.isascii() or not all(32 < c < 127 for c in tb):
            raise ModelError(
                f"section tag {tag!r} is not 4 printable ASCII characters", "use a tag like 'LOSS'"
            )
        out += _pad(tb + struct.pack("<I", len(payload)) + bytes(payload))
    out += struct.pack("<I", zlib.crc32(bytes(out)) & 0xFFFFFFFF)
    return bytes(out)


class _Reader:
    """Bounds-checked little-endian cursor over the blob body."""

    def __init__(self, data: bytes, end: int) -> None:
        self.data, self.pos, self.end = data, 0, end

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise ModelError(
                f"model blob truncated: {what} needs {n} bytes at offset "
                f"{self.pos}, only {self.end - self.pos} left",
                _FIX,
            )
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b

    def unpack(self, st: struct.Struct, what: str) -> tuple:
        return st.unpack(self.take(st.size, what))

    def align(self, what: str) -> None:
        pad = self.take(-self.pos % 4, f"padding after {what}")
        if any(pad):
            raise ModelError(f"model blob: non-zero padding after {what}", _FIX)


def _bad(what: str) -> ModelError:
    return ModelError(f"model blob malformed: {what}", _FIX)


def from_blob(data: bytes) -> tuple[Graph, dict[str, bytes]]:
    """Parse ``HBM0`` bytes into a validated graph and its extra sections."""
    data = bytes(data)
    if len(data) < _HEADER.size + 4:
        raise ModelError(
            f"model blob truncated: {len(data)} bytes, a header and CRC need {_HEADER.size + 4}",
            _FIX,
        )
    if data[:4] != MAGIC:
        raise ModelError(f"not a model blob: magic is {data[:4]!r}, expected {MAGIC!r}", _FIX)
    version = struct.unpack_from("<H", data, 4)[0]
    if version != VERSION:
        raise ModelError(
            f"model blob format version {version}, this build reads {VERSION}",
            "rebuild the blob with this version of hilbench",
        )
    if len(data) % 4:
        raise ModelError(f"model blob truncated: length {len(data)} is not a multiple of 4", _FIX)
    body_end = len(data) - 4
    crc = struct.unpack_from("<I", data, body_end)[0]
    if zlib.crc32(data[:body_end]) & 0xFFFFFFFF != crc:
        raise ModelError("model blob CRC-32 mismatch (corrupted or truncated)", _FIX)
    r = _Reader(data, body_end)
    _, _, flags, n_t, n_o, n_s, i_in, i_out, name_len = r.unpack(_HEADER, "header")
    if flags != 0:
        raise _bad(f"header flags {flags:#x} (none are defined)")
    name = _text(r.take(name_len, "model name"), "model name")
    r.align("model name")
    if n_t == 0:
        raise _bad("no tensors")
    tensors: list[Tensor] = []
    for ti in range(n_t):
        tensors.append(_read_tensor(r, ti))
    tnames = [t.name for t in tensors]
    if len(set(tnames)) != len(tnames):
        raise _bad("duplicate tensor names")
    for what, idx in (("input", i_in), ("output", i_out)):
        if idx >= n_t:
            raise _bad(f"{what} tensor index {idx} >= tensor count {n_t}")
    ops: list[Op] = []
    for oi in range(n_o):
        opcode, n_in, n_out, res = r.unpack(_OP, f"op {oi} header")
        if opcode not in registry.BY_OPCODE:
            raise _bad(f"op {oi}: unknown opcode {opcode}")
        if res != 0:
            raise _bad(f"op {oi}: reserved byte is {res}")
        d = registry.BY_OPCODE[opcode]
        idx = struct.unpack(f"<{n_in + n_out}H", r.take(2 * (n_in + n_out), f"op {oi} indices"))
        for k in idx:
            if k >= n_t:
                raise _bad(f"op {oi}: tensor index {k} >= tensor count {n_t}")
        r.align(f"op {oi} indices")
        (plen,) = r.unpack(struct.Struct("<I"), f"op {oi} params length")
        if plen % 4:
            raise _bad(f"op {oi}: params length {plen} is not a multiple of 4")
        params = d.unpack_params(r.take(plen, f"op {oi} params"))
        ops.append(
            Op(d.kind, [tnames[k] for k in idx[:n_in]], [tnames[k] for k in idx[n_in:]], params)
        )
    sections: dict[str, bytes] = {}
    for si in range(n_s):
        tag = r.take(4, f"section {si} tag")
        if not all(32 < c < 127 for c in tag):
            raise _bad(f"section {si}: tag {tag!r} is not printable ASCII")
        (slen,) = r.unpack(struct.Struct("<I"), f"section {si} length")
        payload = r.take(slen, f"section {si} ({tag.decode()}) payload")
        r.align(f"section {si}")
        if tag.decode() in sections:
            raise _bad(f"section {tag.decode()} appears twice")
        sections[tag.decode()] = payload
    if r.pos != body_end:
        raise _bad(f"{body_end - r.pos} unexpected bytes after the last section")
    g = Graph({t.name: t for t in tensors}, ops, tnames[i_in], tnames[i_out], name)
    g.validate()
    return g, sections


def _text(b: bytes, what: str) -> str:
    try:
        return b.decode()
    except UnicodeDecodeError:
        raise _bad(f"{what} is not UTF-8") from None


def _read_tensor(r: _Reader, ti: int) -> Tensor:
    dt, rank, flags, axis, name_len, nq = r.unpack(_TENSOR, f"tensor {ti} header")
    if dt not in DTYPE_NAMES:
        raise _bad(f"tensor {ti}: unknown dtype code {dt}")
    if not 1 <= rank <= MAX_RANK:
        raise _bad(f"tensor {ti}: rank {rank} outside [1, {MAX_RANK}]")
    if flags & ~FLAG_HAS_DATA:
        raise _bad(f"tensor {ti}: unknown flags {flags:#x}")
    dims = struct.unpack(f"<{rank}I", r.take(4 * rank, f"tensor {ti} dims"))
    if any(d == 0 for d in dims) or math.prod(dims) > MAX_ELEMENTS:
        raise _bad(f"tensor {ti}: dims {dims} empty or larger than {MAX_ELEMENTS} elements")
    qp = None
    if nq:
        scale = np.frombuffer(r.take(4 * nq, f"tensor {ti} scales"), "<f4").astype(np.float32)
        zp = np.frombuffer(r.take(4 * nq, f"tensor {ti} zero points"), "<i4").astype(np.int32)
        if axis != -1 and not 0 <= axis < rank:
            raise _bad(f"tensor {ti}: quantized axis {axis} outside rank {rank}")
        qp = QParams(scale, zp, None if axis == -1 else int(axis))
    elif axis != -1:
        raise _bad(f"tensor {ti}: quantized axis {axis} without quantization")
    name = _text(r.take(name_len, f"tensor {ti} name"), f"tensor {ti} name")
    if not name:
        raise _bad(f"tensor {ti}: empty name")
    r.align(f"tensor {ti} name")
    dtype = DTYPE_NAMES[dt]
    data = None
    if flags & FLAG_HAS_DATA:
        (nbytes,) = r.unpack(struct.Struct("<I"), f"tensor {ti} ({name}) data length")
        want = math.prod(dims) * ITEMSIZE[dtype]
        if nbytes != want:
            raise _bad(f"tensor {ti} ({name}): data length {nbytes}, dims need {want}")
        raw = r.take(nbytes, f"tensor {ti} ({name}) data")
        data = np.frombuffer(raw, NP_LE[dtype]).astype(dtype).reshape(dims)
        r.align(f"tensor {ti} data")
    return Tensor(name, tuple(dims), dtype, qp, data)
