"""Messages: one frozen dataclass per request and response (docs/protocol.md, "Messages").

Every number and layout comes from :mod:`hilbench.protocol.spec`, the single declaration of the
wire. Every message has ``pack() -> bytes`` and ``unpack(payload) -> message`` (strict: a wrong
length, trailing bytes or an out-of-range field raise :class:`MessageError` with the
:class:`ErrorCode` and the declared message a device answers with). Arrays are little-endian
numpy arrays, read-only. ``encode(seq)`` gives the wire bytes of the message in one frame.

:func:`decode_request` is what a device does with a request frame: the version, the type, then
the length and the ranges by walking the declared layout (:func:`spec.check_request`, the same
walk as ``device_fw/core/msg.c``). Each request class's own ``unpack`` is a second, hand-written
reader of the same layout; tests hold the two to the same answers.
"""

from __future__ import annotations

import dataclasses
import struct
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from hilbench.protocol import spec
from hilbench.protocol.frames import Frame, encode_frame
from hilbench.protocol.spec import (
    CAP_APPLY_BATCH,
    CAP_APPLY_PROBE,
    CAP_APPLY_PROBED,
    CAP_CYCLE_COUNTER,
    CAP_INFER,
    CAP_MODELED_TIMING,
    CAP_RESET,
    MAX_BATCH,
    MAX_EPS,
    MAX_ERROR_MSG,
    MAX_INFER_OUTPUT,
    MAX_PAYLOAD,
    MAX_Q,
    MAX_STRING,
    MESSAGES,
    MIN_DEVICE_PAYLOAD,
    N_SLOTS,
    PROTOCOL_VERSION,
    RESPONSE_BIT,
    ErrorCode,
    MessageError,
    MessageType,
    TimingSource,
    format_message,
    max_data_chunk,
    max_infer_output,
    max_model_chunk,
    max_q,
    refusal,
)

__all__ = [
    "CAP_APPLY_BATCH",
    "CAP_APPLY_PROBE",
    "CAP_APPLY_PROBED",
    "CAP_CYCLE_COUNTER",
    "CAP_INFER",
    "CAP_MODELED_TIMING",
    "CAP_RESET",
    "ERROR",
    "MAX_BATCH",
    "MAX_EPS",
    "MAX_ERROR_MSG",
    "MAX_INFER_OUTPUT",
    "MAX_Q",
    "MAX_STRING",
    "MESSAGES",
    "MIN_DEVICE_PAYLOAD",
    "N_SLOTS",
    "REQUESTS",
    "RESPONSES",
    "RESPONSE_BIT",
    "ApplyBatchRequest",
    "ApplyBatchResponse",
    "ApplyProbeRequest",
    "ApplyProbeResponse",
    "ApplyProbedRequest",
    "ApplyProbedResponse",
    "ApplyRequest",
    "ApplyResponse",
    "ErrorCode",
    "ErrorResponse",
    "EvalRequest",
    "EvalResponse",
    "HelloRequest",
    "HelloResponse",
    "InferRequest",
    "InferResponse",
    "LoadDataRequest",
    "LoadDataResponse",
    "LoadModelRequest",
    "LoadModelResponse",
    "Message",
    "MessageError",
    "MessageType",
    "ProbeRequest",
    "ProbeResponse",
    "ResetRequest",
    "ResetResponse",
    "TimingSource",
    "WeightsCrcRequest",
    "WeightsCrcResponse",
    "apply_probe_payload",
    "apply_probed_payload",
    "decode_request",
    "decode_response",
    "error_response",
    "format_message",
    "max_data_chunk",
    "max_infer_output",
    "max_model_chunk",
    "max_q",
    "probe_payload",
    "refusal",
    "response_type",
    "type_name",
]

ERROR = MessageType.ERROR


def response_type(request_type: int) -> int:
    """Frame type of the (non-error) response to ``request_type``."""
    return request_type | RESPONSE_BIT


def type_name(frame_type: int) -> str:
    """Readable name of a frame type: "PROBE", "PROBE response", "ERROR" or "type 0x42"."""
    name = _TYPE_NAMES.get(frame_type)
    if name is None:
        name = _TYPE_NAMES[frame_type] = _type_name(frame_type)
    return name


_TYPE_NAMES: dict[int, str] = {}  # type byte -> name (every command names its type)


def _type_name(frame_type: int) -> str:
    if frame_type in MessageType._value2member_map_:
        return MessageType(frame_type).name
    base = frame_type & ~RESPONSE_BIT
    if frame_type & RESPONSE_BIT and base in MessageType._value2member_map_:
        return f"{MessageType(base).name} response"
    return f"type 0x{frame_type:02x}"


# ---- layouts from the declaration -------------------------------------------------------------

_L = spec.LAYOUTS


def _prefix(key: str) -> struct.Struct:
    """The struct of a layout's leading scalars (up to its first array, rest or nested part)."""
    fmt = "<"
    for it in _L[key].items:
        if not isinstance(it, spec.Scalar):
            break
        fmt += spec.WIRES[it.wire].fmt
    return struct.Struct(fmt)


def _bounds(key: str, name: str) -> tuple[int, int]:
    """The declared range of scalar ``name`` of layout ``key``."""
    lay = _L[key]
    return lay.bounds(lay.item(name))  # type: ignore[arg-type]


def _rule_args(key: str) -> tuple[str, ...]:
    """The field names the (one) rule of layout ``key`` applies to."""
    (rule,) = (it for it in _L[key].items if isinstance(it, spec.Rule))
    return rule.args


_U8 = struct.Struct("<B")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")
_U64 = struct.Struct("<Q")

_PROBE_REQ_FIXED = _L["PROBE"].min_size
_PROBE_RESP_FIXED = _L["PROBE_R"].min_size

_RANGES = {name: (w.lo, w.hi) for name, w in spec.WIRES.items()}


# ---- helpers ----------------------------------------------------------------------------------


class _Reader:
    """Strict little-endian reader over one payload (the length pass: SHORT / TRAILING)."""

    __slots__ = ("data", "name", "pos")

    def __init__(self, data: bytes, name: str) -> None:
        self.data = data
        self.name = name
        self.pos = 0

    def _take(self, n: int, field: str) -> int:
        pos = self.pos
        if pos + n > len(self.data):
            raise refusal("SHORT", self.name, len(self.data), field, n, pos)
        self.pos = pos + n
        return pos

    def scalar(self, st: struct.Struct, field: str) -> int:
        return st.unpack_from(self.data, self._take(st.size, field))[0]

    def raw(self, n: int, field: str) -> bytes:
        pos = self._take(n, field)
        return self.data[pos : pos + n]

    def array(self, dtype: str, n: int, field: str) -> np.ndarray:
        size = np.dtype(dtype).itemsize
        pos = self._take(n * size, field)
        return np.frombuffer(self.data, dtype=dtype, count=n, offset=pos)

    def rest(self) -> bytes:
        pos, self.pos = self.pos, len(self.data)
        return self.data[pos:]

    def done(self) -> None:
        extra = len(self.data) - self.pos
        if extra:
            raise refusal("TRAILING", self.name, extra, len(self.data), self.pos)


def _in_range(name: str, field: str, value: int, lo: int, hi: int) -> None:
    """The range pass for one value read from the wire (RANGE, BAD_ARGUMENT)."""
    if not lo <= value <= hi:
        raise refusal("RANGE", name, field, value, lo, hi)


def _int(msg: Message, field: str, lo: int, hi: int) -> int:
    """Validate ``msg.field`` as an integer in lo..hi and store it as a plain int."""
    value = getattr(msg, field)
    if type(value) is int and lo <= value <= hi:  # the common case, already a plain int
        return value
    try:
        v = int(value.__index__())
    except (AttributeError, TypeError):
        raise MessageError(
            f"{msg.NAME}: field '{field}' must be an integer, got {value!r}"
        ) from None
    _in_range(msg.NAME, field, v, lo, hi)
    object.__setattr__(msg, field, v)
    return v


def _kind(msg: Message, field: str, kind: str) -> int:
    return _int(msg, field, *_RANGES[kind])


def _ranged(msg: Message, key: str, field: str) -> int:
    """Validate ``msg.field`` against the declared range of ``field`` in layout ``key``."""
    return _int(msg, field, *_bounds(key, field))


_IINFO: dict[np.dtype, np.iinfo] = {}


def int_array(value: object, dtype: str | type, where: str) -> np.ndarray:
    """``value`` as a 1-D integer array of ``dtype``: refused (MessageError naming ``where``)
    when it is not 1-D integers or a value is outside the dtype's range, never wrapped. An
    array that already is one is returned as it is."""
    dt = np.dtype(dtype)
    if isinstance(value, np.ndarray) and value.dtype == dt and value.ndim == 1:
        return value
    a = np.asarray(value)
    if a.ndim != 1:
        raise MessageError(f"{where} must be 1-D, got shape {a.shape}")
    if a.size and a.dtype.kind not in "iub":
        raise MessageError(f"{where} must hold integers, got {a.dtype}")
    if a.size:
        info = _IINFO.get(dt) or _IINFO.setdefault(dt, np.iinfo(dt))
        lo, hi = int(a.min()), int(a.max())
        if lo < info.min or hi > info.max:
            raise MessageError(
                f"{where} has values in {lo}..{hi}, outside {dt.name} range {info.min}..{info.max}"
            )
    return a.astype(dt)


def _array(msg: Message, field: str, dtype: str) -> np.ndarray:
    """Validate ``msg.field`` as a 1-D integer array fitting ``dtype``; store it read-only."""
    given = getattr(msg, field)
    value = int_array(given, dtype, f"{msg.NAME}: field '{field}'")
    if value.flags.writeable:
        if value is given:  # the caller's own array: frozen as a copy
            value = value.copy()
        value.flags.writeable = False
    object.__setattr__(msg, field, value)
    return value


def _bytes(msg: Message, field: str, max_len: int) -> bytes:
    value = getattr(msg, field)
    if isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype.itemsize == 1:
        value = value.tobytes()  # an int8 / uint8 tensor, e.g. an INFER input
    if not isinstance(value, bytes | bytearray | memoryview):
        raise MessageError(f"{msg.NAME}: field '{field}' must be bytes, got {type(value).__name__}")
    b = bytes(value)
    if len(b) > max_len:
        raise MessageError(
            f"{msg.NAME}: field '{field}' is {len(b)} bytes, the limit is {max_len}",
            ErrorCode.BAD_LENGTH,
        )
    object.__setattr__(msg, field, b)
    return b


def _text(msg: Message, field: str, max_len: int) -> bytes:
    """Validate ``msg.field`` as a str of at most ``max_len`` UTF-8 bytes; return the bytes."""
    value = getattr(msg, field)
    if not isinstance(value, str):
        raise MessageError(f"{msg.NAME}: field '{field}' must be str, got {type(value).__name__}")
    b = value.encode("utf-8")
    if len(b) > max_len:
        raise MessageError(
            f"{msg.NAME}: field '{field}' is {len(b)} UTF-8 bytes, the limit is {max_len}"
        )
    return b


def _utf8(name: str, field: str, b: bytes) -> str:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MessageError(f"{name}: field '{field}' is not valid UTF-8 ({exc.reason})") from None


def _flag(msg: Message, key: str, field: str) -> bool:
    v = _ranged(msg, key, field)
    object.__setattr__(msg, field, bool(v))
    return bool(v)


_TIMING_SOURCES = tuple(TimingSource)  # indexed by value: cheaper than TimingSource(v)


def _timing(msg: Message, field: str = "timing_source") -> TimingSource:
    v = _int(msg, field, 0, len(_TIMING_SOURCES) - 1)
    t = _TIMING_SOURCES[v]
    object.__setattr__(msg, field, t)
    return t


def _trusted(cls: type[Message], **fields: object) -> Any:
    """A message from fields already checked (skips ``__post_init__``): by
    :func:`decode_request` after the declared checks, and by the hot responses' ``unpack``,
    where the wire layout bounds every integer but q and timing_source, checked there."""
    msg = object.__new__(cls)
    for name, value in fields.items():
        object.__setattr__(msg, name, value)
    return msg


_Q_RANGE = _bounds("PROBE", "q")


def _q(msg: Message, n: int, array_field: str) -> None:
    """Check q (the array length) and a ``q=`` given by the caller; store it."""
    given = getattr(msg, "q", None)
    if given is not None and given != n:
        raise MessageError(f"{msg.NAME}: field 'q' = {given} but '{array_field}' has {n} values")
    _in_range(msg.NAME, "q", n, *_Q_RANGE)
    object.__setattr__(msg, "q", n)


class Message:
    """Base of all messages: ``TYPE`` (frame type byte), ``NAME``, pack/unpack/encode."""

    TYPE: ClassVar[int]
    NAME: ClassVar[str]
    __hash__ = None  # type: ignore[assignment]  # holds arrays

    def pack(self) -> bytes:
        raise NotImplementedError

    @classmethod
    def unpack(cls, payload: bytes) -> Any:
        raise NotImplementedError

    def encode(self, seq: int) -> bytes:
        """Wire bytes of this message in one frame with sequence number ``seq``."""
        return encode_frame(self.TYPE, seq, self.pack())

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            a, b = getattr(self, f.name), getattr(other, f.name)
            if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
                if not np.array_equal(a, b):
                    return False
            elif a != b:
                return False
        return True


def _reader(cls: type[Message], payload: bytes) -> _Reader:
    if not isinstance(payload, bytes):
        payload = bytes(payload)
    return _Reader(payload, cls.NAME)


# ---- HELLO ------------------------------------------------------------------------------------

_HELLO_REQ = _prefix("HELLO")
_HELLO_RESP = _prefix("HELLO_R")  # up to device_id_len


@dataclass(frozen=True, eq=False)
class HelloRequest(Message):
    """``u16 host_protocol_version, u32 session`` (a token the host draws once per connection)."""

    TYPE: ClassVar[int] = MessageType.HELLO
    NAME: ClassVar[str] = "HELLO request"
    host_protocol_version: int = PROTOCOL_VERSION
    session: int = 0

    def __post_init__(self) -> None:
        _kind(self, "host_protocol_version", "u16")
        _kind(self, "session", "u32")

    def pack(self) -> bytes:
        return _HELLO_REQ.pack(self.host_protocol_version, self.session)

    @classmethod
    def unpack(cls, payload: bytes) -> HelloRequest:
        r = _reader(cls, payload)
        v = r.scalar(_U16, "host_protocol_version")
        session = r.scalar(_U32, "session")
        r.done()
        return cls(v, session)

    @classmethod
    def _from_values(cls, v: list) -> HelloRequest:
        return _trusted(cls, host_protocol_version=v[0], session=v[1])


@dataclass(frozen=True, eq=False)
class HelloResponse(Message):
    """``u16 protocol_version, u16 max_payload, u32 boot_nonce, u32 capabilities,
    u8 device_id_len, device_id, u8 firmware_len, firmware`` (UTF-8, <= 64 bytes each)."""

    TYPE: ClassVar[int] = response_type(MessageType.HELLO)
    NAME: ClassVar[str] = "HELLO response"
    protocol_version: int
    max_payload: int
    boot_nonce: int
    capabilities: int
    device_id: str
    firmware: str

    def __post_init__(self) -> None:
        _kind(self, "protocol_version", "u16")
        _ranged(self, "HELLO_R", "max_payload")
        _kind(self, "boot_nonce", "u32")
        _kind(self, "capabilities", "u32")
        _text(self, "device_id", _bounds("HELLO_R", "device_id_len")[1])
        _text(self, "firmware", _bounds("HELLO_R", "firmware_len")[1])

    def pack(self) -> bytes:
        dev = self.device_id.encode("utf-8")
        fw = self.firmware.encode("utf-8")
        head = _HELLO_RESP.pack(
            self.protocol_version, self.max_payload, self.boot_nonce, self.capabilities, len(dev)
        )
        return head + dev + bytes([len(fw)]) + fw

    @classmethod
    def unpack(cls, payload: bytes) -> HelloResponse:
        r = _reader(cls, payload)
        pv = r.scalar(_U16, "protocol_version")
        mp = r.scalar(_U16, "max_payload")
        nonce = r.scalar(_U32, "boot_nonce")
        caps = r.scalar(_U32, "capabilities")
        dev = r.raw(r.scalar(_U8, "device_id_len"), "device_id")
        fw = r.raw(r.scalar(_U8, "firmware_len"), "firmware")
        r.done()
        return cls(
            pv, mp, nonce, caps, _utf8(cls.NAME, "device_id", dev), _utf8(cls.NAME, "firmware", fw)
        )


# ---- LOAD_MODEL / LOAD_DATA (bulk) ------------------------------------------------------------

_CHUNK_END = spec.RULES["chunk_end"]
_CHUNK_ARGS = _rule_args("LOAD_MODEL")


def _check_chunk(msg: Message, key: str) -> None:
    total = _ranged(msg, key, "total_len")
    offset = _kind(msg, "offset", "u32")
    k = len(_bytes(msg, "chunk", MAX_PAYLOAD - _L[key].min_size))
    if _CHUNK_END.broken(total, offset, k):
        raise refusal(
            _CHUNK_END.template, *_CHUNK_END.args(msg.NAME, _CHUNK_ARGS, total, offset, k)
        )


_MODEL_REQ = _prefix("LOAD_MODEL")


@dataclass(frozen=True, eq=False)
class LoadModelRequest(Message):
    """``u32 total_len, u32 offset, chunk`` (chunk = the rest of the payload)."""

    TYPE: ClassVar[int] = MessageType.LOAD_MODEL
    NAME: ClassVar[str] = "LOAD_MODEL request"
    total_len: int
    offset: int
    chunk: bytes

    def __post_init__(self) -> None:
        _check_chunk(self, "LOAD_MODEL")

    def pack(self) -> bytes:
        return _MODEL_REQ.pack(self.total_len, self.offset) + self.chunk

    @classmethod
    def unpack(cls, payload: bytes) -> LoadModelRequest:
        r = _reader(cls, payload)
        total = r.scalar(_U32, "total_len")
        offset = r.scalar(_U32, "offset")
        return cls(total, offset, r.rest())

    @classmethod
    def _from_values(cls, v: list) -> LoadModelRequest:
        return _trusted(cls, total_len=v[0], offset=v[1], chunk=v[2])


_MODEL_RESP = _prefix("LOAD_MODEL_R")


@dataclass(frozen=True, eq=False)
class LoadModelResponse(Message):
    """``u32 received, u8 complete, u32 model_crc32`` (crc is 0 unless complete)."""

    TYPE: ClassVar[int] = response_type(MessageType.LOAD_MODEL)
    NAME: ClassVar[str] = "LOAD_MODEL response"
    received: int
    complete: bool
    model_crc32: int = 0

    def __post_init__(self) -> None:
        _kind(self, "received", "u32")
        _flag(self, "LOAD_MODEL_R", "complete")
        _kind(self, "model_crc32", "u32")
        if not self.complete and self.model_crc32 != 0:
            raise MessageError(f"{self.NAME}: field 'model_crc32' must be 0 while not complete")

    def pack(self) -> bytes:
        return _MODEL_RESP.pack(self.received, self.complete, self.model_crc32)

    @classmethod
    def unpack(cls, payload: bytes) -> LoadModelResponse:
        r = _reader(cls, payload)
        received = r.scalar(_U32, "received")
        complete = r.scalar(_U8, "complete")
        crc = r.scalar(_U32, "model_crc32")
        r.done()
        return cls(received, complete, crc)  # type: ignore[arg-type]


_DATA_REQ = _prefix("LOAD_DATA")


@dataclass(frozen=True, eq=False)
class LoadDataRequest(Message):
    """``u8 slot, u32 total_len, u32 offset, chunk`` (chunk = the rest of the payload)."""

    TYPE: ClassVar[int] = MessageType.LOAD_DATA
    NAME: ClassVar[str] = "LOAD_DATA request"
    slot: int
    total_len: int
    offset: int
    chunk: bytes

    def __post_init__(self) -> None:
        _ranged(self, "LOAD_DATA", "slot")
        _check_chunk(self, "LOAD_DATA")

    def pack(self) -> bytes:
        return _DATA_REQ.pack(self.slot, self.total_len, self.offset) + self.chunk

    @classmethod
    def unpack(cls, payload: bytes) -> LoadDataRequest:
        r = _reader(cls, payload)
        slot = r.scalar(_U8, "slot")
        total = r.scalar(_U32, "total_len")
        offset = r.scalar(_U32, "offset")
        return cls(slot, total, offset, r.rest())

    @classmethod
    def _from_values(cls, v: list) -> LoadDataRequest:
        return _trusted(cls, slot=v[0], total_len=v[1], offset=v[2], chunk=v[3])


_DATA_RESP = _prefix("LOAD_DATA_R")


@dataclass(frozen=True, eq=False)
class LoadDataResponse(Message):
    """``u8 slot, u32 received, u8 complete, u32 n_items`` (n_items is 0 unless complete)."""

    TYPE: ClassVar[int] = response_type(MessageType.LOAD_DATA)
    NAME: ClassVar[str] = "LOAD_DATA response"
    slot: int
    received: int
    complete: bool
    n_items: int = 0

    def __post_init__(self) -> None:
        _ranged(self, "LOAD_DATA_R", "slot")
        _kind(self, "received", "u32")
        _flag(self, "LOAD_DATA_R", "complete")
        _kind(self, "n_items", "u32")
        if not self.complete and self.n_items != 0:
            raise MessageError(f"{self.NAME}: field 'n_items' must be 0 while not complete")

    def pack(self) -> bytes:
        return _DATA_RESP.pack(self.slot, self.received, self.complete, self.n_items)

    @classmethod
    def unpack(cls, payload: bytes) -> LoadDataResponse:
        r = _reader(cls, payload)
        slot = r.scalar(_U8, "slot")
        received = r.scalar(_U32, "received")
        complete = r.scalar(_U8, "complete")
        n_items = r.scalar(_U32, "n_items")
        r.done()
        return cls(slot, received, complete, n_items)  # type: ignore[arg-type]


# ---- PROBE ------------------------------------------------------------------------------------

_PROBE_REQ = _prefix("PROBE")
_PROBE_RESP_TAIL = struct.Struct("<QB")  # duration_ns, timing_source (the _TIMING fields)
_PROBE_RANGES = tuple(
    (name, *_bounds("PROBE", name)) for name in ("slot", "batch_size", "eps", "q")
)
_SLOT, _BATCH, _EPS, _ = (r[1:] for r in _PROBE_RANGES)


@dataclass(frozen=True, eq=False)
class ProbeRequest(Message):
    """``u8 slot, u16 batch_size, u32 batch_seed, u16 eps, u16 q, u32 seeds[q]``."""

    TYPE: ClassVar[int] = MessageType.PROBE
    NAME: ClassVar[str] = "PROBE request"
    slot: int
    batch_size: int
    batch_seed: int
    eps: int
    seeds: np.ndarray
    q: int = field(default=None, kw_only=True)  # type: ignore[assignment]  # = len(seeds)

    def __post_init__(self) -> None:
        _int(self, "slot", *_SLOT)
        _int(self, "batch_size", *_BATCH)
        _kind(self, "batch_seed", "u32")
        _int(self, "eps", *_EPS)
        _q(self, len(_array(self, "seeds", "<u4")), "seeds")

    def pack(self) -> bytes:
        head = _PROBE_REQ.pack(self.slot, self.batch_size, self.batch_seed, self.eps, self.q)
        return head + self.seeds.tobytes()

    @classmethod
    def unpack(cls, payload: bytes) -> ProbeRequest:
        r = _reader(cls, payload)
        slot = r.scalar(_U8, "slot")
        batch_size = r.scalar(_U16, "batch_size")
        batch_seed = r.scalar(_U32, "batch_seed")
        eps = r.scalar(_U16, "eps")
        q = r.scalar(_U16, "q")
        seeds = r.array("<u4", q, "seeds")
        r.done()
        return cls(slot, batch_size, batch_seed, eps, seeds)

    @classmethod
    def _from_values(cls, v: list) -> ProbeRequest:
        return _trusted(
            cls, slot=v[0], batch_size=v[1], batch_seed=v[2], eps=v[3], q=v[4], seeds=v[5]
        )


@dataclass(frozen=True, eq=False)
class ProbeResponse(Message):
    """``u16 q, i32 loss_plus[q], i32 loss_minus[q], u64 duration_ns, u8 timing_source``.

    Losses are mean cross-entropy over the batch in Q16 (docs/protocol.md, "Loss").
    """

    TYPE: ClassVar[int] = response_type(MessageType.PROBE)
    NAME: ClassVar[str] = "PROBE response"
    loss_plus: np.ndarray
    loss_minus: np.ndarray
    duration_ns: int
    timing_source: TimingSource
    q: int = field(default=None, kw_only=True)  # type: ignore[assignment]  # = len(loss_plus)

    def __post_init__(self) -> None:
        n = len(_array(self, "loss_plus", "<i4"))
        if len(_array(self, "loss_minus", "<i4")) != n:
            raise MessageError(
                f"{self.NAME}: fields 'loss_plus' ({n}) and 'loss_minus' "
                f"({len(self.loss_minus)}) differ in length"
            )
        _q(self, n, "loss_plus")
        _kind(self, "duration_ns", "u64")
        _timing(self)

    def pack(self) -> bytes:
        return b"".join(
            (
                _U16.pack(self.q),
                self.loss_plus.tobytes(),
                self.loss_minus.tobytes(),
                _PROBE_RESP_TAIL.pack(self.duration_ns, self.timing_source),
            )
        )

    @classmethod
    def unpack(cls, payload: bytes) -> ProbeResponse:
        if isinstance(payload, bytes) and len(payload) >= 2:  # the hot path: one per ZO step
            (q,) = _U16.unpack_from(payload)
            if len(payload) == _PROBE_RESP_FIXED + 8 * q and 1 <= q <= MAX_Q:
                duration, source = _PROBE_RESP_TAIL.unpack_from(payload, 2 + 8 * q)
                if source < len(_TIMING_SOURCES):
                    return _trusted(  # read-only arrays of the right dtype, in-range integers
                        cls,
                        loss_plus=np.frombuffer(payload, "<i4", q, 2),
                        loss_minus=np.frombuffer(payload, "<i4", q, 2 + 4 * q),
                        duration_ns=duration,
                        timing_source=_TIMING_SOURCES[source],
                        q=q,
                    )
        r = _reader(cls, payload)  # anything else: field by field, to say what is wrong
        q = r.scalar(_U16, "q")
        plus = r.array("<i4", q, "loss_plus")
        minus = r.array("<i4", q, "loss_minus")
        duration = r.scalar(_U64, "duration_ns")
        source = r.scalar(_U8, "timing_source")
        r.done()
        return cls(plus, minus, duration, source)  # type: ignore[arg-type]


# ---- APPLY ------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class _UpdatesApplied(Message):
    """``u32 updates_applied``: updates applied since the model was loaded (after this one)."""

    updates_applied: int

    def __post_init__(self) -> None:
        _kind(self, "updates_applied", "u32")

    def pack(self) -> bytes:
        return _U32.pack(self.updates_applied)

    @classmethod
    def unpack(cls, payload: bytes) -> Any:
        r = _reader(cls, payload)
        n = r.scalar(_U32, "updates_applied")
        r.done()
        return _trusted(cls, updates_applied=n)  # any u32 is valid


@dataclass(frozen=True, eq=False)
class ApplyRequest(Message):
    """``u16 q, u32 seeds[q], i32 coeffs[q]``."""

    TYPE: ClassVar[int] = MessageType.APPLY
    NAME: ClassVar[str] = "APPLY request"
    seeds: np.ndarray
    coeffs: np.ndarray
    q: int = field(default=None, kw_only=True)  # type: ignore[assignment]  # = len(seeds)

    def __post_init__(self) -> None:
        n = len(_array(self, "seeds", "<u4"))
        if len(_array(self, "coeffs", "<i4")) != n:
            raise MessageError(
                f"{self.NAME}: fields 'seeds' ({n}) and 'coeffs' ({len(self.coeffs)}) "
                "differ in length"
            )
        _q(self, n, "seeds")

    def pack(self) -> bytes:
        return _U16.pack(self.q) + self.seeds.tobytes() + self.coeffs.tobytes()

    @classmethod
    def unpack(cls, payload: bytes) -> ApplyRequest:
        r = _reader(cls, payload)
        q = r.scalar(_U16, "q")
        seeds = r.array("<u4", q, "seeds")
        coeffs = r.array("<i4", q, "coeffs")
        r.done()
        return cls(seeds, coeffs)

    @classmethod
    def _from_values(cls, v: list) -> ApplyRequest:
        return _trusted(cls, q=v[0], seeds=v[1], coeffs=v[2])


@dataclass(frozen=True, eq=False)
class ApplyResponse(_UpdatesApplied):
    """``u32 updates_applied`` (APPLY commands applied since the model was loaded)."""

    TYPE: ClassVar[int] = response_type(MessageType.APPLY)
    NAME: ClassVar[str] = "APPLY response"


# ---- EVAL -------------------------------------------------------------------------------------

_EVAL_REQ = _prefix("EVAL")
_SPAN = spec.RULES["span_2_32"]
_SPAN_ARGS = _rule_args("EVAL")


@dataclass(frozen=True, eq=False)
class EvalRequest(Message):
    """``u8 slot, u32 start, u32 count`` (items start..start+count-1 of the slot)."""

    TYPE: ClassVar[int] = MessageType.EVAL
    NAME: ClassVar[str] = "EVAL request"
    slot: int
    start: int
    count: int

    def __post_init__(self) -> None:
        _ranged(self, "EVAL", "slot")
        _kind(self, "start", "u32")
        _ranged(self, "EVAL", "count")
        if _SPAN.broken(self.start, self.count):
            raise refusal(
                _SPAN.template, *_SPAN.args(self.NAME, _SPAN_ARGS, self.start, self.count)
            )

    def pack(self) -> bytes:
        return _EVAL_REQ.pack(self.slot, self.start, self.count)

    @classmethod
    def unpack(cls, payload: bytes) -> EvalRequest:
        r = _reader(cls, payload)
        slot = r.scalar(_U8, "slot")
        start = r.scalar(_U32, "start")
        count = r.scalar(_U32, "count")
        r.done()
        return cls(slot, start, count)

    @classmethod
    def _from_values(cls, v: list) -> EvalRequest:
        return _trusted(cls, slot=v[0], start=v[1], count=v[2])


_EVAL_RESP = _prefix("EVAL_R")


@dataclass(frozen=True, eq=False)
class EvalResponse(Message):
    """``u32 count, u32 correct, i64 loss_sum_q16, u64 duration_ns, u8 timing_source``."""

    TYPE: ClassVar[int] = response_type(MessageType.EVAL)
    NAME: ClassVar[str] = "EVAL response"
    count: int
    correct: int
    loss_sum_q16: int
    duration_ns: int
    timing_source: TimingSource

    def __post_init__(self) -> None:
        _kind(self, "count", "u32")
        _int(self, "correct", 0, self.count)
        _kind(self, "loss_sum_q16", "i64")
        _kind(self, "duration_ns", "u64")
        _timing(self)

    def pack(self) -> bytes:
        return _EVAL_RESP.pack(
            self.count, self.correct, self.loss_sum_q16, self.duration_ns, self.timing_source
        )

    @classmethod
    def unpack(cls, payload: bytes) -> EvalResponse:
        r = _reader(cls, payload)
        count = r.scalar(_U32, "count")
        correct = r.scalar(_U32, "correct")
        loss = r.scalar(_I64, "loss_sum_q16")
        duration = r.scalar(_U64, "duration_ns")
        source = r.scalar(_U8, "timing_source")
        r.done()
        return cls(count, correct, loss, duration, source)  # type: ignore[arg-type]


# ---- WEIGHTS_CRC ------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class WeightsCrcRequest(Message):
    """Empty payload."""

    TYPE: ClassVar[int] = MessageType.WEIGHTS_CRC
    NAME: ClassVar[str] = "WEIGHTS_CRC request"

    def pack(self) -> bytes:
        return b""

    @classmethod
    def unpack(cls, payload: bytes) -> WeightsCrcRequest:
        _reader(cls, payload).done()
        return cls()

    @classmethod
    def _from_values(cls, v: list) -> WeightsCrcRequest:
        return cls()


_CRC_RESP = _prefix("WEIGHTS_CRC_R")


@dataclass(frozen=True, eq=False)
class WeightsCrcResponse(Message):
    """``u32 crc32, u32 updates_applied``."""

    TYPE: ClassVar[int] = response_type(MessageType.WEIGHTS_CRC)
    NAME: ClassVar[str] = "WEIGHTS_CRC response"
    crc32: int
    updates_applied: int

    def __post_init__(self) -> None:
        _kind(self, "crc32", "u32")
        _kind(self, "updates_applied", "u32")

    def pack(self) -> bytes:
        return _CRC_RESP.pack(self.crc32, self.updates_applied)

    @classmethod
    def unpack(cls, payload: bytes) -> WeightsCrcResponse:
        r = _reader(cls, payload)
        crc = r.scalar(_U32, "crc32")
        n = r.scalar(_U32, "updates_applied")
        r.done()
        return cls(crc, n)


# ---- ERROR ------------------------------------------------------------------------------------

_ERR_HEAD = _prefix("ERROR")


@dataclass(frozen=True, eq=False)
class ErrorResponse(Message):
    """``u16 code, u8 request_type, u16 msg_len, msg`` (UTF-8, <= 256 bytes).

    ``code`` is an :class:`ErrorCode` when known, else the raw int (a newer device).
    """

    TYPE: ClassVar[int] = MessageType.ERROR
    NAME: ClassVar[str] = "ERROR response"
    code: ErrorCode | int
    request_type: int
    message: str = ""

    def __post_init__(self) -> None:
        code = _ranged(self, "ERROR", "code")
        if code in ErrorCode._value2member_map_:
            object.__setattr__(self, "code", ErrorCode(code))
        _kind(self, "request_type", "u8")
        _text(self, "message", _bounds("ERROR", "msg_len")[1])

    def pack(self) -> bytes:
        msg = self.message.encode("utf-8")
        return _ERR_HEAD.pack(self.code, self.request_type, len(msg)) + msg

    @classmethod
    def unpack(cls, payload: bytes) -> ErrorResponse:
        r = _reader(cls, payload)
        code = r.scalar(_U16, "code")
        request_type = r.scalar(_U8, "request_type")
        msg = r.raw(r.scalar(_U16, "msg_len"), "msg")
        r.done()
        return cls(code, request_type, _utf8(cls.NAME, "msg", msg))

    def __str__(self) -> str:
        name = self.code.name if isinstance(self.code, ErrorCode) else f"code {self.code}"
        try:
            req = MessageType(self.request_type).name
        except ValueError:
            req = f"type 0x{self.request_type:02x}"
        return f"{name} (request {req}): {self.message}"


def error_response(request_type: int, exc: MessageError) -> ErrorResponse:
    """The ERROR a device answers for ``exc`` (its code and message, already cut to 256 bytes
    when it was formatted from a template; cut here otherwise)."""
    return ErrorResponse(exc.code, request_type, format_message("%s", (str(exc),)))


# ---- RESET ------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ResetRequest(Message):
    """Empty: reboot. The device answers, then resets (new boot nonce, nothing kept)."""

    TYPE: ClassVar[int] = MessageType.RESET
    NAME: ClassVar[str] = "RESET request"

    def pack(self) -> bytes:
        return b""

    @classmethod
    def unpack(cls, payload: bytes) -> ResetRequest:
        _reader(cls, payload).done()
        return cls()

    @classmethod
    def _from_values(cls, v: list) -> ResetRequest:
        return cls()


@dataclass(frozen=True, eq=False)
class ResetResponse(Message):
    """Empty: sent just before the device resets."""

    TYPE: ClassVar[int] = response_type(MessageType.RESET)
    NAME: ClassVar[str] = "RESET response"

    def pack(self) -> bytes:
        return b""

    @classmethod
    def unpack(cls, payload: bytes) -> ResetResponse:
        _reader(cls, payload).done()
        return cls()


# ---- APPLY_BATCH ------------------------------------------------------------------------------

_N_STEPS = _bounds("APPLY_BATCH", "n_steps")
_STEP_Q = _bounds("APPLY", "q")


@dataclass(frozen=True, eq=False)
class ApplyBatchRequest(Message):
    """``u16 n_steps``, then per step ``u16 q, u32 seeds[q], i32 coeffs[q]``.

    The steps are applied in order, exactly as n APPLY commands would be; the whole payload is
    checked before any step is applied. Used to replay a log after a reset.
    """

    TYPE: ClassVar[int] = MessageType.APPLY_BATCH
    NAME: ClassVar[str] = "APPLY_BATCH request"
    steps: tuple[ApplyRequest, ...]

    def __post_init__(self) -> None:
        steps = tuple(self.steps)
        _in_range(self.NAME, "n_steps", len(steps), *_N_STEPS)
        for step in steps:
            if not isinstance(step, ApplyRequest):
                raise MessageError(f"{self.NAME}: steps must be APPLY requests, got {step!r}")
        object.__setattr__(self, "steps", steps)

    def pack(self) -> bytes:
        return _U16.pack(len(self.steps)) + b"".join(s.pack() for s in self.steps)

    @classmethod
    def unpack(cls, payload: bytes) -> ApplyBatchRequest:
        r = _reader(cls, payload)
        n = r.scalar(_U16, "n_steps")
        raw = []
        for i in range(n):  # the whole length first ...
            path = f"steps[{i}]."
            q = r.scalar(_U16, path + "q")
            raw.append((q, r.array("<u4", q, path + "seeds"), r.array("<i4", q, path + "coeffs")))
        r.done()
        _in_range(cls.NAME, "n_steps", n, *_N_STEPS)  # ... then the ranges, in table order
        for i, (q, _, _) in enumerate(raw):
            _in_range(cls.NAME, spec.FIELD_PATH % ("steps", i, "q"), q, *_STEP_Q)
        return cls(tuple(ApplyRequest(seeds, coeffs) for _, seeds, coeffs in raw))

    @classmethod
    def _from_values(cls, v: list) -> ApplyBatchRequest:
        return _trusted(cls, steps=tuple(ApplyRequest._from_values(s) for s in v[1]))

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return len(self.steps) == len(other.steps) and all(
            a == b for a, b in zip(self.steps, other.steps, strict=True)
        )


@dataclass(frozen=True, eq=False)
class ApplyBatchResponse(_UpdatesApplied):
    """``u32 updates_applied`` after the whole batch."""

    TYPE: ClassVar[int] = response_type(MessageType.APPLY_BATCH)
    NAME: ClassVar[str] = "APPLY_BATCH response"


# ---- APPLY_PROBED -----------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ApplyProbedRequest(Message):
    """``u16 q, i32 coeffs[q]``: APPLY with the seeds of the last PROBE the device executed."""

    TYPE: ClassVar[int] = MessageType.APPLY_PROBED
    NAME: ClassVar[str] = "APPLY_PROBED request"
    coeffs: np.ndarray
    q: int = field(default=None, kw_only=True)  # type: ignore[assignment]  # = len(coeffs)

    def __post_init__(self) -> None:
        _q(self, len(_array(self, "coeffs", "<i4")), "coeffs")

    def pack(self) -> bytes:
        return _U16.pack(self.q) + self.coeffs.tobytes()

    @classmethod
    def unpack(cls, payload: bytes) -> ApplyProbedRequest:
        r = _reader(cls, payload)
        q = r.scalar(_U16, "q")
        coeffs = r.array("<i4", q, "coeffs")
        r.done()
        return cls(coeffs)

    @classmethod
    def _from_values(cls, v: list) -> ApplyProbedRequest:
        return _trusted(cls, q=v[0], coeffs=v[1])


@dataclass(frozen=True, eq=False)
class ApplyProbedResponse(_UpdatesApplied):
    """``u32 updates_applied``, as APPLY's."""

    TYPE: ClassVar[int] = response_type(MessageType.APPLY_PROBED)
    NAME: ClassVar[str] = "APPLY_PROBED response"


# ---- APPLY_PROBE -------------------------------------------------------------------------------

_Q_APPLY = _bounds("APPLY_PROBE", "q_apply")


@dataclass(frozen=True, eq=False)
class ApplyProbeRequest(Message):
    """``u16 q_apply, i32 coeffs[q_apply]``, then a PROBE request payload: APPLY_PROBED and the
    next step's PROBE in one round trip."""

    TYPE: ClassVar[int] = MessageType.APPLY_PROBE
    NAME: ClassVar[str] = "APPLY_PROBE request"
    coeffs: np.ndarray
    probe: ProbeRequest

    def __post_init__(self) -> None:
        n = len(_array(self, "coeffs", "<i4"))
        _in_range(self.NAME, "q_apply", n, *_Q_APPLY)
        if not isinstance(self.probe, ProbeRequest):
            raise MessageError(f"{self.NAME}: 'probe' must be a PROBE request")

    @property
    def q_apply(self) -> int:
        return len(self.coeffs)

    def pack(self) -> bytes:
        return _U16.pack(len(self.coeffs)) + self.coeffs.tobytes() + self.probe.pack()

    @classmethod
    def unpack(cls, payload: bytes) -> ApplyProbeRequest:
        r = _reader(cls, payload)  # one reader: the PROBE part's fields are named as this one's
        q_apply = r.scalar(_U16, "q_apply")
        coeffs = r.array("<i4", q_apply, "coeffs")
        slot = r.scalar(_U8, "slot")
        batch_size = r.scalar(_U16, "batch_size")
        batch_seed = r.scalar(_U32, "batch_seed")
        eps = r.scalar(_U16, "eps")
        q = r.scalar(_U16, "q")
        seeds = r.array("<u4", q, "seeds")
        r.done()
        _in_range(cls.NAME, "q_apply", q_apply, *_Q_APPLY)
        for (name, lo, hi), value in zip(_PROBE_RANGES, (slot, batch_size, eps, q), strict=True):
            _in_range(cls.NAME, name, value, lo, hi)
        return cls(coeffs, ProbeRequest(slot, batch_size, batch_seed, eps, seeds))

    @classmethod
    def _from_values(cls, v: list) -> ApplyProbeRequest:
        return _trusted(cls, coeffs=v[1], probe=ProbeRequest._from_values(v[2]))


@dataclass(frozen=True, eq=False)
class ApplyProbeResponse(Message):
    """``u32 updates_applied`` (after the APPLY part), then a PROBE response payload."""

    TYPE: ClassVar[int] = response_type(MessageType.APPLY_PROBE)
    NAME: ClassVar[str] = "APPLY_PROBE response"
    updates_applied: int
    probe: ProbeResponse

    def __post_init__(self) -> None:
        _kind(self, "updates_applied", "u32")
        if not isinstance(self.probe, ProbeResponse):
            raise MessageError(f"{self.NAME}: 'probe' must be a PROBE response")

    @property
    def duration_ns(self) -> int:
        """The PROBE part's duration (the APPLY part's is not measured)."""
        return self.probe.duration_ns

    @property
    def timing_source(self) -> TimingSource:
        return self.probe.timing_source

    def pack(self) -> bytes:
        return _U32.pack(self.updates_applied) + self.probe.pack()

    @classmethod
    def unpack(cls, payload: bytes) -> ApplyProbeResponse:
        if not isinstance(payload, bytes):
            payload = bytes(payload)
        if len(payload) < 4:
            _reader(cls, payload).scalar(_U32, "updates_applied")  # says what is missing
        (applied,) = _U32.unpack_from(payload)
        return _trusted(cls, updates_applied=applied, probe=ProbeResponse.unpack(payload[4:]))


# ---- INFER -------------------------------------------------------------------------------------

_INFER_REQ = _prefix("INFER")
_INLINE = spec.RULES["inline_input"]


@dataclass(frozen=True, eq=False)
class InferRequest(Message):
    """``u8 slot, u32 index, u8 input[rest]``: the model's int8 output for item ``index`` of
    data slot ``slot`` (``input`` empty), or for ``input`` itself (then slot and index are 0).
    ``input`` may be given as bytes or as a 1-byte integer array (an int8 tensor)."""

    TYPE: ClassVar[int] = MessageType.INFER
    NAME: ClassVar[str] = "INFER request"
    slot: int = 0
    index: int = 0
    input: bytes = b""

    def __post_init__(self) -> None:
        slot = _ranged(self, "INFER", "slot")
        index = _kind(self, "index", "u32")
        k = len(_bytes(self, "input", MAX_PAYLOAD - _L["INFER"].min_size))
        if _INLINE.broken(k, slot, index):
            raise refusal(_INLINE.template, *_INLINE.args(self.NAME, (), k, slot, index))

    def pack(self) -> bytes:
        return _INFER_REQ.pack(self.slot, self.index) + self.input

    @classmethod
    def unpack(cls, payload: bytes) -> InferRequest:
        r = _reader(cls, payload)
        slot = r.scalar(_U8, "slot")
        index = r.scalar(_U32, "index")
        return cls(slot, index, r.rest())

    @classmethod
    def _from_values(cls, v: list) -> InferRequest:
        return _trusted(cls, slot=v[0], index=v[1], input=v[2])


_INFER_N = _bounds("INFER_R", "n")


@dataclass(frozen=True, eq=False)
class InferResponse(Message):
    """``u16 n, i8 output[n], u64 duration_ns, u8 timing_source``: the model's int8 output
    (its output tensor, row-major) and the time the forward pass took."""

    TYPE: ClassVar[int] = response_type(MessageType.INFER)
    NAME: ClassVar[str] = "INFER response"
    output: np.ndarray
    duration_ns: int
    timing_source: TimingSource
    n: int = field(default=None, kw_only=True)  # type: ignore[assignment]  # = len(output)

    def __post_init__(self) -> None:
        n = len(_array(self, "output", "i1"))
        if self.n is not None and self.n != n:
            raise MessageError(f"{self.NAME}: field 'n' = {self.n} but 'output' has {n} values")
        _in_range(self.NAME, "n", n, *_INFER_N)
        object.__setattr__(self, "n", n)
        _kind(self, "duration_ns", "u64")
        _timing(self)

    def pack(self) -> bytes:
        return (
            _U16.pack(self.n)
            + self.output.tobytes()
            + _PROBE_RESP_TAIL.pack(self.duration_ns, self.timing_source)
        )

    @classmethod
    def unpack(cls, payload: bytes) -> InferResponse:
        r = _reader(cls, payload)
        n = r.scalar(_U16, "n")
        output = r.array("i1", n, "output")
        duration = r.scalar(_U64, "duration_ns")
        source = r.scalar(_U8, "timing_source")
        r.done()
        return cls(output, duration, source)  # type: ignore[arg-type]


# ---- the per-step hot path ----------------------------------------------------------------------

_SEED_DTYPE = np.dtype("<u4")
_COEFF_DTYPE = np.dtype("<i4")
_SLOT_HI, _BATCH_LO, _BATCH_HI, _EPS_LO, _EPS_HI = _SLOT[1], *_BATCH, *_EPS
_Q_LO, _Q_HI = _Q_RANGE


def probe_payload(
    slot: int, batch_size: int, batch_seed: int, eps: int, seeds: np.ndarray
) -> bytes | None:
    """``ProbeRequest(...).pack()`` for arguments that are already valid plain ints and a 1-D
    uint32 array, without building the message; None otherwise (build ``ProbeRequest``, which
    says what is wrong). One call per ZO step, so it skips the dataclass."""
    if (
        type(seeds) is np.ndarray
        and seeds.dtype == _SEED_DTYPE
        and seeds.ndim == 1
        and _Q_LO <= len(seeds) <= _Q_HI
        and type(slot) is int
        and type(batch_size) is int
        and type(batch_seed) is int
        and type(eps) is int
        and 0 <= slot <= _SLOT_HI
        and _BATCH_LO <= batch_size <= _BATCH_HI
        and 0 <= batch_seed <= 0xFFFFFFFF
        and _EPS_LO <= eps <= _EPS_HI
    ):
        return _PROBE_REQ.pack(slot, batch_size, batch_seed, eps, len(seeds)) + seeds.tobytes()
    return None


def apply_probe_payload(
    coeffs: np.ndarray,
    slot: int,
    batch_size: int,
    batch_seed: int,
    eps: int,
    seeds: np.ndarray,
) -> bytes | None:
    """``ApplyProbeRequest(...).pack()`` for valid plain arguments; None otherwise."""
    head = apply_probed_payload(coeffs)
    probe = probe_payload(slot, batch_size, batch_seed, eps, seeds)
    return None if head is None or probe is None else head + probe


def apply_probed_payload(coeffs: np.ndarray) -> bytes | None:
    """``ApplyProbedRequest(coeffs).pack()`` for a valid 1-D int32 array; None otherwise."""
    if (
        type(coeffs) is np.ndarray
        and coeffs.dtype == _COEFF_DTYPE
        and coeffs.ndim == 1
        and _Q_LO <= len(coeffs) <= _Q_HI
    ):
        return _U16.pack(len(coeffs)) + coeffs.tobytes()
    return None


# ---- registries -------------------------------------------------------------------------------

REQUESTS: dict[int, type[Message]] = {
    cls.TYPE: cls
    for cls in (
        HelloRequest,
        LoadModelRequest,
        LoadDataRequest,
        ProbeRequest,
        ApplyRequest,
        EvalRequest,
        WeightsCrcRequest,
        ResetRequest,
        ApplyBatchRequest,
        ApplyProbedRequest,
        ApplyProbeRequest,
        InferRequest,
    )
}
RESPONSES: dict[int, type[Message]] = {
    cls.TYPE: cls
    for cls in (
        HelloResponse,
        LoadModelResponse,
        LoadDataResponse,
        ProbeResponse,
        ApplyResponse,
        EvalResponse,
        WeightsCrcResponse,
        ResetResponse,
        ApplyBatchResponse,
        ApplyProbedResponse,
        ApplyProbeResponse,
        InferResponse,
        ErrorResponse,
    )
}
_FROM_VALUES = {t: cls._from_values for t, cls in REQUESTS.items()}  # type: ignore[attr-defined]
_check_request = spec.check_request


def decode_request(frame: Frame) -> Message:
    """The request in ``frame``, checked as a device checks it: the version (BAD_VERSION), the
    type (UNKNOWN_TYPE), then the payload's length (BAD_LENGTH) and its fields' ranges and rules
    in table order (BAD_ARGUMENT), by walking the declared layout (``spec.check_request``).
    Raises MessageError with the code and the declared message a device answers."""
    if frame.version != PROTOCOL_VERSION:
        raise refusal("BAD_VERSION", PROTOCOL_VERSION, frame.version)
    values = _check_request(frame.type, frame.payload)
    return _FROM_VALUES[frame.type](values)


def decode_response(frame: Frame) -> Message:
    """The response in ``frame`` (an ErrorResponse for type 0xFF, read in any version)."""
    if frame.type == MessageType.ERROR:  # ERROR's layout is the same in every version
        return ErrorResponse.unpack(frame.payload)
    if frame.version != PROTOCOL_VERSION:
        raise MessageError(
            f"device answered in protocol version {frame.version}; this host speaks "
            f"version {PROTOCOL_VERSION}",
            ErrorCode.BAD_VERSION,
        )
    cls = RESPONSES.get(frame.type)
    if cls is None:
        raise MessageError(f"unknown response type 0x{frame.type:02x}", ErrorCode.UNKNOWN_TYPE)
    return cls.unpack(frame.payload)
