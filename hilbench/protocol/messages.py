"""Messages: one frozen dataclass per request and response (docs/protocol.md, "Messages").

Every layout is declared once, in :mod:`hilbench.protocol.spec`. A class here binds a layout
(``@message("PROBE")``) and names its Python attributes -- types, defaults, docs, any check a
host makes beyond the declared ranges (``_check``); :class:`~hilbench.protocol.codec.Codec`
derives the field table, ``pack() -> bytes``, ``unpack(payload) -> message`` and the checks
every message goes through when it is built. ``unpack`` is strict: a wrong length, trailing
bytes or an out-of-range field raise :class:`MessageError` with the :class:`ErrorCode` and the
declared message a device answers with. Arrays are little-endian numpy arrays, read-only.
``encode(seq)`` gives the wire bytes of the message in one frame. A request or response layout
no class binds gets a generated class (:func:`generated_class`), so a new command with plain
fields needs no code here.

:func:`decode_request` is what a device does with a request frame: the version, the type, then
the length and the ranges by walking the declared layout (:func:`spec.check_request`, the same
walk as ``device_fw/core/msg.c``). The per-step codecs (PROBE, APPLY_PROBED and APPLY_PROBE
payloads from plain arguments, the PROBE and APPLY_PROBE answers) have fast paths that
:mod:`hilbench.protocol.fast` generates from the same field tables.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, ClassVar, TypeVar

import numpy as np

from hilbench.protocol import fast, spec
from hilbench.protocol.codec import WIRE, Codec, check_int, int_array, render
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
    "ApplyProbeValues",
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
    "LogFrame",
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
    "apply_probe_values",
    "apply_probed_payload",
    "decode_request",
    "decode_response",
    "error_response",
    "format_message",
    "int_array",
    "log_frame",
    "max_data_chunk",
    "max_infer_output",
    "max_model_chunk",
    "max_q",
    "message",
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


# ---- the base class and the binding of a layout -------------------------------------------------


class Message:
    """Base of all messages: ``TYPE`` (frame type byte), ``NAME``, pack/unpack/encode."""

    TYPE: ClassVar[int]
    NAME: ClassVar[str]
    LAYOUT: ClassVar[spec.Layout]
    _codec: ClassVar[Codec]
    __hash__ = None  # type: ignore[assignment]  # holds arrays

    def __post_init__(self) -> None:
        self._codec.validate(self)

    def _check(self) -> None:
        """A class's checks beyond the declared ranges and rules (after them)."""

    def pack(self) -> bytes:
        return self._codec.pack(self)

    @classmethod
    def unpack(cls, payload: bytes) -> Any:
        return cls._codec.unpack(payload)

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


_CLASSES: dict[str, type[Message]] = {}  # layout key -> the class bound to it
M = TypeVar("M", bound=type[Message])


def message(key: str | spec.Layout, *, fast_path: bool = False) -> Callable[[M], M]:
    """Bind a class to layout ``key`` (a key of :data:`spec.LAYOUTS`, or a layout): a frozen
    dataclass whose ``TYPE``, ``NAME``, codec and docstring's layout line come from the
    declaration (``fast_path``: a per-step message, with a generated packer and decoder, the
    decoder tried before the generic one)."""

    def bind(cls: M) -> M:
        layout = spec.LAYOUTS[key] if isinstance(key, str) else key
        cls.TYPE, cls.NAME, cls.LAYOUT = layout.type, layout.name, layout  # type: ignore[misc]
        doc = cls.__dict__.get("__doc__")
        doc = f"\n\n{inspect.cleandoc(doc)}" if doc else ""
        cls.__doc__ = f"{layout.name}: ``{render(layout)}``.{doc}"
        cls = dataclass(frozen=True, eq=False)(cls)  # type: ignore[assignment]
        cls._codec = Codec(cls, layout, _CLASSES)
        if fast_path:
            cls._codec.fast_pack = fast.packer(cls._codec)
            cls._codec.fast_unpack = fast.decoder(cls._codec)
        _CLASSES[layout.key] = cls
        return cls

    return bind


def _count() -> Any:
    """A count attribute: the caller may give it (it must match its array's length)."""
    return field(default=None, kw_only=True)


# ---- HELLO --------------------------------------------------------------------------------------


@message("HELLO")
class HelloRequest(Message):
    """``session`` is a token the host draws once per connection."""

    host_protocol_version: int = PROTOCOL_VERSION
    session: int = 0


@message("HELLO_R")
class HelloResponse(Message):
    """``device_id`` and ``firmware`` are UTF-8 text, at most 64 bytes each."""

    protocol_version: int
    max_payload: int
    boot_nonce: int
    capabilities: int
    device_id: str
    firmware: str


# ---- LOAD_MODEL / LOAD_DATA (bulk) --------------------------------------------------------------


@message("LOAD_MODEL")
class LoadModelRequest(Message):
    """``chunk`` is the rest of the payload."""

    total_len: int
    offset: int
    chunk: bytes


@message("LOAD_MODEL_R")
class LoadModelResponse(Message):
    """``model_crc32`` is 0 unless ``complete``."""

    received: int
    complete: bool
    model_crc32: int = 0

    def _check(self) -> None:
        if not self.complete and self.model_crc32 != 0:
            raise MessageError(f"{self.NAME}: field 'model_crc32' must be 0 while not complete")


@message("LOAD_DATA")
class LoadDataRequest(Message):
    """``chunk`` is the rest of the payload."""

    slot: int
    total_len: int
    offset: int
    chunk: bytes


@message("LOAD_DATA_R")
class LoadDataResponse(Message):
    """``n_items`` is 0 unless ``complete``."""

    slot: int
    received: int
    complete: bool
    n_items: int = 0

    def _check(self) -> None:
        if not self.complete and self.n_items != 0:
            raise MessageError(f"{self.NAME}: field 'n_items' must be 0 while not complete")


# ---- PROBE --------------------------------------------------------------------------------------


@message("PROBE", fast_path=True)
class ProbeRequest(Message):
    slot: int
    batch_size: int
    batch_seed: int
    eps: int
    seeds: np.ndarray
    q: int = _count()  # = len(seeds)


@message("PROBE_R", fast_path=True)
class ProbeResponse(Message):
    """Losses are mean cross-entropy over the batch in Q16 (docs/protocol.md, "Loss")."""

    loss_plus: np.ndarray
    loss_minus: np.ndarray
    duration_ns: int
    timing_source: TimingSource
    q: int = _count()  # = len(loss_plus)


# ---- APPLY --------------------------------------------------------------------------------------


@message("APPLY")
class ApplyRequest(Message):
    seeds: np.ndarray
    coeffs: np.ndarray
    q: int = _count()  # = len(seeds)


@message("APPLY_R")
class ApplyResponse(Message):
    """APPLY commands applied since the model was loaded (this one included)."""

    updates_applied: int


# ---- EVAL ---------------------------------------------------------------------------------------


@message("EVAL")
class EvalRequest(Message):
    """Items ``start .. start + count - 1`` of the slot."""

    slot: int
    start: int
    count: int


@message("EVAL_R")
class EvalResponse(Message):
    count: int
    correct: int
    loss_sum_q16: int
    duration_ns: int
    timing_source: TimingSource

    def _check(self) -> None:
        check_int(self, "correct", 0, self.count)


# ---- WEIGHTS_CRC --------------------------------------------------------------------------------


@message("WEIGHTS_CRC")
class WeightsCrcRequest(Message):
    pass


@message("WEIGHTS_CRC_R")
class WeightsCrcResponse(Message):
    crc32: int
    updates_applied: int


# ---- ERROR --------------------------------------------------------------------------------------


@message("ERROR")
class ErrorResponse(Message):
    """``message`` is UTF-8 text of at most 256 bytes (the wire's ``msg``); ``code`` is an
    :class:`ErrorCode` when known, else the raw int (a newer device)."""

    code: ErrorCode | int
    request_type: int
    message: str = field(default="", metadata={WIRE: "msg"})

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


# ---- LOG ----------------------------------------------------------------------------------------


@message("LOG")
class LogFrame(Message):
    """A line the device says on its own (seq 0, never an answer): ``kind`` is a
    :class:`~hilbench.protocol.spec.LogKind` when known, else the raw int; ``dropped`` the lines
    its ring lost before this one; ``message`` UTF-8 text of at most MAX_LOG_MSG bytes."""

    kind: int
    dropped: int
    message: str = field(default="", metadata={WIRE: "msg"})

    @property
    def kind_name(self) -> str:
        known = spec.LogKind._value2member_map_.get(self.kind)
        return known.name.lower() if known is not None else f"kind {self.kind}"


def log_frame(kind: int, text: str, dropped: int = 0) -> LogFrame:
    """The LOG frame of ``text``, cut at MAX_LOG_MSG bytes on a character boundary."""
    return LogFrame(kind, dropped, cut_text(text, spec.MAX_LOG_MSG))


def cut_text(text: str, limit: int) -> str:
    """``text`` cut at ``limit`` bytes of UTF-8 on a character boundary."""
    b = text.encode("utf-8")
    if len(b) <= limit:
        return text
    return b[:limit].decode("utf-8", "ignore")


# ---- RESET --------------------------------------------------------------------------------------


@message("RESET")
class ResetRequest(Message):
    """Reboot. The device answers, then resets (new boot nonce, nothing kept)."""


@message("RESET_R")
class ResetResponse(Message):
    """Sent just before the device resets."""


# ---- APPLY_BATCH --------------------------------------------------------------------------------


@message("APPLY_BATCH")
class ApplyBatchRequest(Message):
    """The steps are applied in order, exactly as n APPLY commands would be; the whole payload
    is checked before any step is applied. Used to replay a log after a reset."""

    steps: tuple[ApplyRequest, ...]


@message("APPLY_BATCH_R")
class ApplyBatchResponse(Message):
    """Updates applied after the whole batch."""

    updates_applied: int


# ---- APPLY_PROBED -------------------------------------------------------------------------------


@message("APPLY_PROBED", fast_path=True)
class ApplyProbedRequest(Message):
    """APPLY with the seeds of the last PROBE the device executed."""

    coeffs: np.ndarray
    q: int = _count()  # = len(coeffs)


@message("APPLY_PROBED_R")
class ApplyProbedResponse(Message):
    """As APPLY's."""

    updates_applied: int


# ---- APPLY_PROBE --------------------------------------------------------------------------------


@message("APPLY_PROBE", fast_path=True)
class ApplyProbeRequest(Message):
    """APPLY_PROBED and the next step's PROBE in one round trip."""

    coeffs: np.ndarray
    probe: ProbeRequest

    @property
    def q_apply(self) -> int:
        return len(self.coeffs)


@message("APPLY_PROBE_R", fast_path=True)
class ApplyProbeResponse(Message):
    """``updates_applied`` counts the APPLY part; ``probe`` is the PROBE part's answer."""

    updates_applied: int
    probe: ProbeResponse

    # read from every step's answer: C getters (operator.attrgetter), no Python frame
    duration_ns = property(
        attrgetter("probe.duration_ns"),
        doc="The PROBE part's duration (the APPLY part's is not measured).",
    )
    timing_source = property(attrgetter("probe.timing_source"), doc="The PROBE part's source.")


# ---- INFER --------------------------------------------------------------------------------------


@message("INFER")
class InferRequest(Message):
    """The model's int8 output for item ``index`` of data slot ``slot`` (``input`` empty), or
    for ``input`` itself (then slot and index are 0). ``input`` may be given as bytes or as a
    1-byte integer array (an int8 tensor); it may be a piece of the input tensor, put at
    ``in_offset``. The answer carries the output from element ``out_offset`` on (an
    ``out_offset`` > 0 with an empty input reads the output the device holds)."""

    slot: int = 0
    index: int = 0
    input: bytes = b""
    in_offset: int = 0
    out_offset: int = 0


@message("INFER_R")
class InferResponse(Message):
    """A part of the model's int8 output (its output tensor, row-major): ``output`` holds
    elements ``out_offset ..`` of ``total`` (none after an input piece that does not complete
    the input), and the time the forward pass took (0, source none, when it ran none)."""

    output: np.ndarray
    duration_ns: int
    timing_source: TimingSource
    total: int
    n: int = _count()  # = len(output)


# ---- layouts no class binds ---------------------------------------------------------------------


def class_name(layout: spec.Layout) -> str:
    """``PROBE`` -> ``ProbeRequest``, ``APPLY_PROBE_R`` -> ``ApplyProbeResponse``."""
    key, kind = layout.key, "Request"
    if key.endswith("_R"):
        key, kind = key[:-2], "Response"
    return "".join(w.capitalize() for w in key.split("_")) + kind


def generated_class(layout: spec.Layout) -> type[Message]:
    """A message class for a layout of scalars (ints), arrays (numpy, counts implied), a rest
    (bytes), records and embeds of bound layouts: what ``@message`` makes of the plainest
    declaration of each field."""
    counts = {it.count for it in layout.items if isinstance(it, spec.Array | spec.Records)}
    fields: list[tuple[str, object]] = []
    for it in layout.items:
        if isinstance(it, spec.Scalar) and it.name not in counts:
            fields.append((it.name, int))
        elif isinstance(it, spec.Array):
            fields.append((it.name, np.ndarray))
        elif isinstance(it, spec.Rest):
            fields.append((it.name, bytes))
        elif isinstance(it, spec.Embed):
            fields.append((it.name, _CLASSES[it.layout]))
        elif isinstance(it, spec.Records):
            fields.append((it.name, tuple))
    cls = type(
        class_name(layout), (Message,), {"__annotations__": dict(fields), "__module__": __name__}
    )
    return message(layout)(cls)


for _layout in (*spec.REQUEST_LAYOUTS.values(), *spec.RESPONSE_LAYOUTS.values()):
    if _layout.key not in _CLASSES:
        globals()[class_name(_layout)] = generated_class(_layout)

REQUESTS: dict[int, type[Message]] = {
    t: _CLASSES[lay.key] for t, lay in sorted(spec.REQUEST_LAYOUTS.items())
}
RESPONSES: dict[int, type[Message]] = {
    t: _CLASSES[lay.key] for t, lay in sorted(spec.RESPONSE_LAYOUTS.items())
}


# ---- the per-step fast paths --------------------------------------------------------------------

probe_payload = fast.encoder(ProbeRequest._codec, "probe_payload")
apply_probed_payload = fast.encoder(ApplyProbedRequest._codec, "apply_probed_payload")
apply_probe_payload = fast.encoder(ApplyProbeRequest._codec, "apply_probe_payload")
#: an APPLY_PROBE answer's values, flat, the losses as lists (what the trainer reads each step)
apply_probe_values = fast.decoder(ApplyProbeResponse._codec, lists=True)
ApplyProbeValues = fast.flat_type(ApplyProbeResponse._codec)  # what it returns


# ---- frames -------------------------------------------------------------------------------------

_check_request = spec.check_request


def decode_request(frame: Frame) -> Message:
    """The request in ``frame``, checked as a device checks it: the version (BAD_VERSION), the
    type (UNKNOWN_TYPE), then the payload's length (BAD_LENGTH) and its fields' ranges and rules
    in table order (BAD_ARGUMENT), by walking the declared layout (``spec.check_request``).
    Raises MessageError with the code and the declared message a device answers."""
    if frame.version != PROTOCOL_VERSION:
        raise refusal("BAD_VERSION", PROTOCOL_VERSION, frame.version)
    cls = REQUESTS.get(frame.type)
    fast_unpack = None if cls is None else cls._codec.fast_unpack
    if fast_unpack is not None:
        msg = fast_unpack(frame.payload)
        if msg is not None:
            return msg
    values = _check_request(frame.type, frame.payload)
    return REQUESTS[frame.type]._codec.build(values, trusted=True)


#: type byte -> the generated decoder of a per-step response (tried first: decode_response)
_FAST_RESPONSES: dict[int, Callable[[bytes], Any]] = {
    t: cls._codec.fast_unpack
    for t, cls in RESPONSES.items()
    if cls._codec.fast_unpack is not None and t != MessageType.ERROR
}


def fast_response_decoder(frame_type: int) -> Callable[[bytes], Any] | None:
    """The generated decoder of a response type's payload (the message of an exactly valid
    payload of this protocol version, None for anything else: ``decode_response`` then says
    what is wrong); None for a type without one."""
    return _FAST_RESPONSES.get(frame_type)


def decode_response(frame: Frame) -> Message:
    """The response in ``frame`` (an ErrorResponse for type 0xFF, read in any version)."""
    version, type_, _, payload = frame
    if version == PROTOCOL_VERSION:
        fast = _FAST_RESPONSES.get(type_)
        if fast is not None:
            msg = fast(payload)
            if msg is not None:
                return msg
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
