"""The wire protocol, declared once (docs/protocol.md): every number and layout both sides use.

Everything the host, the twin (``hilbench/device``) and the C firmware (``device_fw``) share
about the wire is declared here and nowhere else: the frame header, every message layout
(requests, responses, ERROR), type and error codes, capability bits, timing sources, limits,
the cross-field rules, and the templates of the messages a device sends when it refuses a
request. ``hilbench.protocol.messages`` takes its numbers and layouts from here;
``python -m hilbench.cgen`` renders this module into ``device_fw/core/gen/hb_wire.h`` (constants,
``HB_MSG_*`` templates, and the tables ``device_fw/core/msg.c`` walks to check a request).

Layouts are tuples of field descriptors:

- :class:`Scalar` ``(name, wire, lo, hi)``: one little-endian integer; ``lo``/``hi`` bound it
  (inclusive; an int or the name of a limit in :data:`LIMITS`; ``None`` = the wire type's
  bound). A scalar with neither bound is "any": it has no range check.
- :class:`Array` ``(name, elem, count)``: ``count`` elements of wire type ``elem``, where
  ``count`` names an earlier scalar of the same layout.
- :class:`Rest`: all remaining payload bytes (the last field of a top-level layout).
- :class:`Records` ``(name, layout, count)``: ``count`` instances of a nested flat layout, one
  after the other (APPLY_BATCH's steps are APPLY payloads).
- :class:`Embed` ``(name, layout)``: one instance of a nested flat layout (APPLY_PROBE carries a
  PROBE payload after its own fields).
- :class:`Rule` ``(rule, args)``: a cross-field rule, by name (:data:`RULES`), on earlier fields.

A flat layout holds only scalars, arrays and rules; only flat layouts are nested, so nesting is
one level deep (the C walks it without recursion).

A request is checked in two passes (docs/protocol.md "Device processing order", steps 6-7):
**length** -- walk the layout, reading each count as it stands, and refuse with ``BAD_LENGTH``
when the payload ends inside a field (``SHORT``) or has bytes after the last one
(``TRAILING``); then **ranges** -- each scalar's range and each rule, in table order (records in
order, each record's fields in order), refused with ``BAD_ARGUMENT`` naming the field. A field
inside a record is named ``FIELD_PATH % (records, index, field)``, e.g. ``steps[3].q``.
:func:`check_request` implements both passes; ``device_fw/core/msg.c`` is the same walk in C.

Message text: :data:`MESSAGES` maps a name to a Python %-format template (only ``%d %x %s %%``
and zero-padded widths), :data:`MESSAGE_CODES` to its error code. :func:`format_message`
formats one and cuts it at :data:`MAX_ERROR_MSG` bytes on a UTF-8 character boundary, exactly
as ``hb_fail`` does in C (device_fw/core/hb_status.c).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, NamedTuple

import numpy as np

# ---- framing ------------------------------------------------------------------------------------

PROTOCOL_VERSION = 1
MAX_PAYLOAD = 4096  # the largest payload any endpoint sends or accepts
MIN_DEVICE_PAYLOAD = 256  # a device announces max_payload in MIN_DEVICE_PAYLOAD..MAX_PAYLOAD
CRC_SIZE = 4  # the CRC-32 trailer of a frame body
# kinds of discarded frames (docs/protocol.md, "Receiving and resynchronisation"); a device's
# ERROR BAD_FRAME answer carries the kind as its message
FRAME_PROBLEMS = ("cobs", "short", "length", "crc", "oversize")
SEQ_WINDOW = 0x8000  # seq is newer than last_seq when 1 <= (seq - last_seq) mod 2^16 < SEQ_WINDOW


def newer(seq: int, last_seq: int) -> bool:
    """Whether ``seq`` comes after ``last_seq`` (docs/protocol.md, "Sequence numbers")."""
    return 1 <= (seq - last_seq) & 0xFFFF < SEQ_WINDOW


# ---- codes --------------------------------------------------------------------------------------


class MessageType(IntEnum):
    """Frame ``type`` byte of the requests; a response is ``request | RESPONSE_BIT``."""

    HELLO = 0x01
    LOAD_MODEL = 0x02
    LOAD_DATA = 0x03
    PROBE = 0x04
    APPLY = 0x05
    EVAL = 0x06
    WEIGHTS_CRC = 0x07
    RESET = 0x08
    APPLY_BATCH = 0x09
    APPLY_PROBED = 0x0A
    APPLY_PROBE = 0x0B
    INFER = 0x0C
    DEVICE_INFO = 0x0D
    LOAD_STAGE = 0x0E
    LOAD_COMMIT = 0x0F
    HEAD_GRAD = 0x10
    LOG = 0xFE  # device-initiated, seq 0, never an answer (docs/protocol.md, "Device log")
    ERROR = 0xFF


RESPONSE_BIT = 0x80
FIRST_REQUEST = MessageType.HELLO  # request types are FIRST_REQUEST..LAST_REQUEST
LAST_REQUEST = MessageType.HEAD_GRAD


class ErrorCode(IntEnum):
    """``code`` of an ERROR response (meanings in docs/protocol.md, "Error codes")."""

    BAD_FRAME = 1
    BAD_VERSION = 2
    UNKNOWN_TYPE = 3
    BAD_LENGTH = 4
    BAD_ARGUMENT = 5
    NO_MODEL = 6
    NO_DATA = 7
    MODEL_TOO_LARGE = 8
    BAD_MODEL = 9
    INTERNAL = 10
    NO_SESSION = 11


class LogKind(IntEnum):
    """``kind`` of a LOG frame: what the device is talking about (docs/protocol.md, "Device
    log"); a host shows a kind it does not know by its number."""

    BOOT = 1  # the boot banner: identity and the reset reason the port reports
    FAULT = 2  # a fault report (the restart that followed it)
    UART = 3  # the UART's error counters changed
    NOTE = 4  # anything else the firmware says


MAX_LOG_MSG = 120  # LOG msg, bytes of UTF-8 (cut at a character boundary, as ERROR's)
LOG_RING = 8  # lines a device holds until a session takes them (older ones are dropped)
# the lines the firmware and the twin both say, as %-templates (``hb_format`` in C)
LOG_TEXTS: dict[str, str] = {
    "BANNER": "boot: %s, firmware %s, reset %s",  # device_id, firmware, the port's reason
    "UART_COUNTERS": "uart errors: overrun %d, framing %d, noise %d, dropped %d",
}


class TimingSource(IntEnum):
    """Where a ``duration_ns`` came from (docs/protocol.md, "Timing")."""

    NONE = 0  # no timing (the SIL; QEMU without -icount)
    DEVICE = 1  # the device's cycle counter
    MODELED = 2  # a cost model (the twin)
    INSTRUCTIONS = 3  # executed instructions (QEMU -icount): a count, not a time


# HELLO capability bits (a host ignores bits it does not know).
CAP_CYCLE_COUNTER = 1 << 0  # durations come from the device's cycle counter
CAP_MODELED_TIMING = 1 << 1  # durations come from a cost model (the twin)
CAP_RESET = 1 << 2  # RESET reboots the device
CAP_APPLY_BATCH = 1 << 3  # APPLY_BATCH replays logged updates in one frame
CAP_APPLY_PROBED = 1 << 4  # APPLY_PROBED applies with the last PROBE's seeds (not re-sent)
CAP_APPLY_PROBE = 1 << 5  # APPLY_PROBE: APPLY_PROBED and the next PROBE in one round trip
CAP_INFER = 1 << 6  # INFER runs the model on one item or on an input in the request
CAP_DEVICE_INFO = 1 << 7  # DEVICE_INFO: clocks, caches, arena, watchdog, UART error counters
CAP_LOAD_STAGE = 1 << 8  # LOAD_STAGE / LOAD_COMMIT: uploads written by a debugger, CRC-checked
CAP_HEAD_GRAD = 1 << 9  # HEAD_GRAD: the last layer's exact integer gradient and update (hybrid)
CAPABILITIES = {
    "CAP_CYCLE_COUNTER": CAP_CYCLE_COUNTER,
    "CAP_MODELED_TIMING": CAP_MODELED_TIMING,
    "CAP_RESET": CAP_RESET,
    "CAP_APPLY_BATCH": CAP_APPLY_BATCH,
    "CAP_APPLY_PROBED": CAP_APPLY_PROBED,
    "CAP_APPLY_PROBE": CAP_APPLY_PROBE,
    "CAP_INFER": CAP_INFER,
    "CAP_DEVICE_INFO": CAP_DEVICE_INFO,
    "CAP_LOAD_STAGE": CAP_LOAD_STAGE,
    "CAP_HEAD_GRAD": CAP_HEAD_GRAD,
}

# ---- message-level limits -----------------------------------------------------------------------

N_SLOTS = 4  # data slots 0..N_SLOTS-1
STAGE_MODEL = N_SLOTS  # LOAD_STAGE / LOAD_COMMIT target: 0..N_SLOTS-1 a data slot, this the model
MAX_BATCH = 256  # PROBE batch_size 1..MAX_BATCH
MAX_HEAD_OUT = 1020  # HEAD_GRAD rates, one per output channel: 14 + 4 n <= MAX_PAYLOAD (4096)
MAX_BIAS_GAIN = 24  # HEAD_GRAD bias_gain 0..MAX_BIAS_GAIN (zo/head.py)
MAX_EPS = 127  # PROBE eps 1..MAX_EPS (weight LSBs)
MAX_STRING = 64  # HELLO device_id / firmware, bytes of UTF-8
MAX_ERROR_MSG = 256  # ERROR msg, bytes of UTF-8 (messages are cut at a character boundary)
DEFAULT_ARENA_BYTES = 4 * 1024 * 1024  # the twin's and the SIL's default arena (docs/firmware.md)

# ---- wire types ---------------------------------------------------------------------------------


class Wire(NamedTuple):
    """A little-endian integer type of the wire."""

    name: str
    size: int
    fmt: str  # struct format character
    dtype: str  # numpy dtype, little-endian
    lo: int
    hi: int


WIRES = {
    w.name: w
    for w in (
        Wire("u8", 1, "B", "u1", 0, 0xFF),
        Wire("i8", 1, "b", "i1", -(2**7), 2**7 - 1),
        Wire("u16", 2, "H", "<u2", 0, 0xFFFF),
        Wire("u32", 4, "I", "<u4", 0, 0xFFFFFFFF),
        Wire("i32", 4, "i", "<i4", -(2**31), 2**31 - 1),
        Wire("u64", 8, "Q", "<u8", 0, 2**64 - 1),
        Wire("i64", 8, "q", "<i8", -(2**63), 2**63 - 1),
    )
}

# ---- field descriptors --------------------------------------------------------------------------

Bound = int | str | None


@dataclass(frozen=True)
class Scalar:
    name: str
    wire: str
    lo: Bound = None  # None: the wire type's bound
    hi: Bound = None
    doc: str = ""

    @property
    def ranged(self) -> bool:
        return self.lo is not None or self.hi is not None


@dataclass(frozen=True)
class Array:
    name: str
    elem: str
    count: str  # an earlier Scalar of the same layout
    doc: str = ""


@dataclass(frozen=True)
class Rest:
    name: str
    doc: str = ""


@dataclass(frozen=True)
class Records:
    name: str
    layout: str  # key of a flat layout
    count: str
    doc: str = ""


@dataclass(frozen=True)
class Embed:
    name: str
    layout: str  # key of a flat layout
    doc: str = ""


@dataclass(frozen=True)
class Rule:
    rule: str  # a key of RULES
    args: tuple[str, ...]  # fields of this layout, in the rule's order

    @property
    def name(self) -> str:
        return "rule " + self.rule


Item = Scalar | Array | Rest | Records | Embed | Rule


class CrossRule(NamedTuple):
    """A rule between fields: ``broken(*values)`` is true when the request breaks it, and then
    ``args(layout_name, field_names, *values)`` are the arguments of ``template`` (a
    :data:`MESSAGES` key). The value of a Rest field is its length."""

    doc: str
    template: str
    broken: Any
    args: Any


RULES: dict[str, CrossRule] = {
    "chunk_end": CrossRule(
        "offset + len(chunk) <= total_len (args: total_len, offset, chunk)",
        "CHUNK_END",
        lambda total, offset, k: offset + k > total,
        lambda name, _, total, offset, k: (name, offset, k, offset + k, total),
    ),
    "span_2_32": CrossRule(
        "start + count <= 2^32 (args: start, count)",
        "SPAN_2_32",
        lambda start, count: start + count > 2**32,
        lambda name, names, start, count: (name, names[0], names[1], start + count),
    ),
    "inline_input": CrossRule(
        "a non-empty input needs slot 0 and index 0 (args: input, slot, index)",
        "INLINE_INPUT",
        lambda k, slot, index: k > 0 and (slot != 0 or index != 0),
        lambda name, _, k, slot, index: (name, slot, index),
    ),
}

# ---- layouts ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """One payload layout: ``key`` names it in C (``HB_L_<key>``), ``name`` in messages."""

    key: str
    name: str
    items: tuple[Item, ...]
    type: int | None = None  # frame type byte (None: the frame header, a data blob header)
    doc: str = ""

    def index(self, name: str) -> int:
        for i, item in enumerate(self.items):
            if item.name == name:
                return i
        raise KeyError(f"{self.name} has no field {name!r}")

    def item(self, name: str) -> Item:
        return self.items[self.index(name)]

    @property
    def flat(self) -> bool:
        return all(isinstance(it, Scalar | Array | Rule) for it in self.items)

    @property
    def min_size(self) -> int:
        """Bytes with every count 0 and an empty rest: the fixed part (all scalars)."""
        return sum(WIRES[it.wire].size if isinstance(it, Scalar) else 0 for it in self.items) + sum(
            LAYOUTS[it.layout].min_size for it in self.items if isinstance(it, Embed)
        )

    def per(self, count: str) -> int:
        """Bytes each unit of the count field ``count`` adds (its arrays' element sizes)."""
        return sum(
            WIRES[it.elem].size for it in self.items if isinstance(it, Array) and it.count == count
        )

    def size(self, **counts: int) -> int:
        """Bytes of a payload whose count fields have the values ``counts`` (flat layouts and
        embeds of flat layouts; no Rest, no Records)."""
        total = 0
        for it in self.items:
            if isinstance(it, Scalar):
                total += WIRES[it.wire].size
            elif isinstance(it, Array):
                total += WIRES[it.elem].size * counts[it.count]
            elif isinstance(it, Embed):
                total += LAYOUTS[it.layout].size(**counts)
            elif not isinstance(it, Rule):
                raise ValueError(f"{self.name}: the size depends on a {type(it).__name__}")
        return total

    def offset(self, name: str, **counts: int) -> int:
        """Offset of field ``name`` given the count fields before it."""
        pos = 0
        for it in self.items:
            if it.name == name:
                return pos
            if isinstance(it, Scalar):
                pos += WIRES[it.wire].size
            elif isinstance(it, Array):
                pos += WIRES[it.elem].size * counts[it.count]
            elif isinstance(it, Embed):
                pos += LAYOUTS[it.layout].size(**counts)
            elif not isinstance(it, Rule):
                raise ValueError(f"{self.name}: field {name!r} comes after a {type(it).__name__}")
        raise KeyError(f"{self.name} has no field {name!r}")

    def bounds(self, field: Scalar) -> tuple[int, int]:
        """The inclusive range of a scalar, limits resolved."""
        w = WIRES[field.wire]
        return (_bound(field.lo, w.lo), _bound(field.hi, w.hi))


def _bound(b: Bound, default: int) -> int:
    if b is None:
        return default
    return LIMITS[b] if isinstance(b, str) else b


def S(name: str, wire: str, lo: Bound = None, hi: Bound = None, doc: str = "") -> Scalar:
    return Scalar(name, wire, lo, hi, doc)


_TIMING = (
    S("duration_ns", "u64", doc="time spent computing, see Timing"),
    S("timing_source", "u8", 0, "LAST_TIMING_SOURCE", "a TimingSource"),
)

_LAYOUT_LIST = (
    Layout(
        "FRAME_HEADER",
        "frame header",
        (S("version", "u8"), S("type", "u8"), S("seq", "u16"), S("length", "u16")),
        doc="the 6 bytes before a payload; the body ends with the CRC-32 of header and payload",
    ),
    # ---- requests
    Layout(
        "HELLO",
        "HELLO request",
        (S("host_protocol_version", "u16"), S("session", "u32")),
        MessageType.HELLO,
    ),
    Layout(
        "LOAD_MODEL",
        "LOAD_MODEL request",
        (
            S("total_len", "u32", 1),
            S("offset", "u32"),
            Rest("chunk"),
            Rule("chunk_end", ("total_len", "offset", "chunk")),
        ),
        MessageType.LOAD_MODEL,
    ),
    Layout(
        "LOAD_DATA",
        "LOAD_DATA request",
        (
            S("slot", "u8", 0, "LAST_SLOT"),
            S("total_len", "u32", 1),
            S("offset", "u32"),
            Rest("chunk"),
            Rule("chunk_end", ("total_len", "offset", "chunk")),
        ),
        MessageType.LOAD_DATA,
    ),
    Layout(
        "PROBE",
        "PROBE request",
        (
            S("slot", "u8", 0, "LAST_SLOT"),
            S("batch_size", "u16", 1, "MAX_BATCH"),
            S("batch_seed", "u32"),
            S("eps", "u16", 1, "MAX_EPS"),
            S("q", "u16", 1, "MAX_Q"),
            Array("seeds", "u32", "q"),
        ),
        MessageType.PROBE,
    ),
    Layout(
        "APPLY",
        "APPLY request",
        (S("q", "u16", 1, "MAX_Q"), Array("seeds", "u32", "q"), Array("coeffs", "i32", "q")),
        MessageType.APPLY,
    ),
    Layout(
        "EVAL",
        "EVAL request",
        (
            S("slot", "u8", 0, "LAST_SLOT"),
            S("start", "u32"),
            S("count", "u32", 1),
            Rule("span_2_32", ("start", "count")),
        ),
        MessageType.EVAL,
    ),
    Layout("WEIGHTS_CRC", "WEIGHTS_CRC request", (), MessageType.WEIGHTS_CRC),
    Layout("RESET", "RESET request", (), MessageType.RESET),
    Layout(
        "APPLY_BATCH",
        "APPLY_BATCH request",
        (S("n_steps", "u16", 1, 0xFFFF), Records("steps", "APPLY", "n_steps")),
        MessageType.APPLY_BATCH,
    ),
    Layout(
        "APPLY_PROBED",
        "APPLY_PROBED request",
        (S("q", "u16", 1, "MAX_Q"), Array("coeffs", "i32", "q")),
        MessageType.APPLY_PROBED,
    ),
    Layout(
        "APPLY_PROBE",
        "APPLY_PROBE request",
        (
            S("q_apply", "u16", 1, "MAX_Q"),
            Array("coeffs", "i32", "q_apply"),
            Embed("probe", "PROBE"),
        ),
        MessageType.APPLY_PROBE,
    ),
    Layout(
        "INFER",
        "INFER request",
        (
            S("slot", "u8", 0, "LAST_SLOT"),
            S("index", "u32"),
            S("in_offset", "u32"),  # where `input` goes in the input tensor (a piece of it)
            S("out_offset", "u32"),  # the first output element to answer
            Rest("input"),
            Rule("inline_input", ("input", "slot", "index")),
        ),
        MessageType.INFER,
        doc="inputs and outputs of any size: the input in pieces, the output in parts",
    ),
    # ---- DEVICE_INFO, LOAD_STAGE, LOAD_COMMIT (docs/protocol.md "DEVICE_INFO", "Staged uploads")
    Layout("DEVICE_INFO", "DEVICE_INFO request", (), MessageType.DEVICE_INFO),
    Layout(
        "LOAD_STAGE",
        "LOAD_STAGE request",
        (S("target", "u8", 0, "STAGE_MODEL"), S("total_len", "u32", 1)),
        MessageType.LOAD_STAGE,
    ),
    Layout(
        "LOAD_COMMIT",
        "LOAD_COMMIT request",
        (S("target", "u8", 0, "STAGE_MODEL"), S("total_len", "u32", 1), S("crc32", "u32")),
        MessageType.LOAD_COMMIT,
    ),
    # ---- HEAD_GRAD (docs/protocol.md "HEAD_GRAD"; the math: hilbench/zo/head.py)
    Layout(
        "HEAD_GRAD",
        "HEAD_GRAD request",
        (
            S("slot", "u8", 0, "LAST_SLOT"),
            S("batch_size", "u16", 1, "MAX_BATCH"),
            S("batch_seed", "u32"),
            S("round_seed", "u32"),
            S("bias_gain", "u8", 0, "MAX_BIAS_GAIN"),
            S("n", "u16", 1, "MAX_HEAD_OUT"),
            Array("rates", "i32", "n"),
        ),
        MessageType.HEAD_GRAD,
    ),
    # ---- responses
    Layout(
        "HELLO_R",
        "HELLO response",
        (
            S("protocol_version", "u16"),
            S("max_payload", "u16", "MIN_DEVICE_PAYLOAD", "MAX_PAYLOAD"),
            S("boot_nonce", "u32"),
            S("capabilities", "u32"),
            S("device_id_len", "u8", 0, "MAX_STRING"),
            Array("device_id", "u8", "device_id_len"),
            S("firmware_len", "u8", 0, "MAX_STRING"),
            Array("firmware", "u8", "firmware_len"),
        ),
        MessageType.HELLO | RESPONSE_BIT,
    ),
    Layout(
        "LOAD_MODEL_R",
        "LOAD_MODEL response",
        (S("received", "u32"), S("complete", "u8", 0, 1), S("model_crc32", "u32")),
        MessageType.LOAD_MODEL | RESPONSE_BIT,
    ),
    Layout(
        "LOAD_DATA_R",
        "LOAD_DATA response",
        (
            S("slot", "u8", 0, "LAST_SLOT"),
            S("received", "u32"),
            S("complete", "u8", 0, 1),
            S("n_items", "u32"),
        ),
        MessageType.LOAD_DATA | RESPONSE_BIT,
    ),
    Layout(
        "PROBE_R",
        "PROBE response",
        (
            S("q", "u16", 1, "MAX_Q"),
            Array("loss_plus", "i32", "q"),
            Array("loss_minus", "i32", "q"),
            *_TIMING,
        ),
        MessageType.PROBE | RESPONSE_BIT,
    ),
    Layout(
        "APPLY_R",
        "APPLY response",
        (S("updates_applied", "u32"),),
        MessageType.APPLY | RESPONSE_BIT,
    ),
    Layout(
        "EVAL_R",
        "EVAL response",
        (
            S("count", "u32"),
            S("correct", "u32"),
            S("loss_sum_q16", "i64"),
            *_TIMING,
        ),
        MessageType.EVAL | RESPONSE_BIT,
    ),
    Layout(
        "WEIGHTS_CRC_R",
        "WEIGHTS_CRC response",
        (S("crc32", "u32"), S("updates_applied", "u32")),
        MessageType.WEIGHTS_CRC | RESPONSE_BIT,
    ),
    Layout("RESET_R", "RESET response", (), MessageType.RESET | RESPONSE_BIT),
    Layout(
        "APPLY_BATCH_R",
        "APPLY_BATCH response",
        (S("updates_applied", "u32"),),
        MessageType.APPLY_BATCH | RESPONSE_BIT,
    ),
    Layout(
        "APPLY_PROBED_R",
        "APPLY_PROBED response",
        (S("updates_applied", "u32"),),
        MessageType.APPLY_PROBED | RESPONSE_BIT,
    ),
    Layout(
        "APPLY_PROBE_R",
        "APPLY_PROBE response",
        (S("updates_applied", "u32"), Embed("probe", "PROBE_R")),
        MessageType.APPLY_PROBE | RESPONSE_BIT,
    ),
    Layout(
        "INFER_R",
        "INFER response",
        (
            S("total", "u32", 1),  # elements of the model's output tensor
            S("n", "u16", 0, "MAX_INFER_OUTPUT"),  # of them in this answer, from out_offset
            Array("output", "i8", "n"),
            *_TIMING,
        ),
        MessageType.INFER | RESPONSE_BIT,
    ),
    Layout(
        "DEVICE_INFO_R",
        "DEVICE_INFO response",
        (
            S("cpu_hz", "u32", doc="the CPU clock the firmware set; 0: not known"),
            S("caches", "u32", doc="bit 0 I-cache on, bit 1 D-cache on"),
            S("arena_bytes", "u32"),
            S("arena_base", "u64", doc="the arena's address in the device's memory"),
            S("uart_baud", "u32"),
            S("uart_kernel_hz", "u32"),
            S("uart_overrun", "u32"),
            S("uart_framing", "u32"),
            S("uart_noise", "u32"),
            S("uart_dropped", "u32"),
            S("watchdog_ms", "u32", doc="0: no watchdog"),
            S("reset_cause", "u32"),
            S("reset_flags", "u32"),
            S("bringup_errors", "u32"),
            S("ticks", "u64", doc="the tick counter when the answer was built"),
            S("tick_ns_q16", "u32", doc="ns per tick in Q16; 0: no timing"),
            S("timing_source", "u8", 0, "LAST_TIMING_SOURCE"),
        ),
        MessageType.DEVICE_INFO | RESPONSE_BIT,
    ),
    Layout(
        "LOAD_STAGE_R",
        "LOAD_STAGE response",
        (
            S("target", "u8", 0, "STAGE_MODEL"),
            S("offset", "u32", doc="where to write the bytes: arena_base + offset"),
            S("total_len", "u32"),
        ),
        MessageType.LOAD_STAGE | RESPONSE_BIT,
    ),
    Layout(
        "LOAD_COMMIT_R",
        "LOAD_COMMIT response",
        (
            S("target", "u8", 0, "STAGE_MODEL"),
            S("received", "u32"),
            S("model_crc32", "u32", doc="the model's, as LOAD_MODEL's; 0 for a data slot"),
            S("n_items", "u32", doc="the data slot's; 0 for the model"),
        ),
        MessageType.LOAD_COMMIT | RESPONSE_BIT,
    ),
    Layout(
        "HEAD_GRAD_R",
        "HEAD_GRAD response",
        (
            S("head_crc", "u32", doc="CRC-32 of the head's weights, then biases, after the update"),
            S("loss", "i32", doc="the batch's mean Q16 loss before the update"),
            S("grads_applied", "u32", doc="HEAD_GRAD commands run since the model load"),
            *_TIMING,
        ),
        MessageType.HEAD_GRAD | RESPONSE_BIT,
    ),
    Layout(
        "ERROR",
        "ERROR response",
        (
            S("code", "u16", 1, 0xFFFF),
            S("request_type", "u8"),
            S("msg_len", "u16", 0, "MAX_ERROR_MSG"),
            Array("msg", "u8", "msg_len"),
        ),
        MessageType.ERROR,
        doc="frozen across protocol versions",
    ),
    # ---- the LOAD_DATA blob's header (docs/protocol.md, "Data blob")
    Layout(
        "DATA_BLOB",
        "data blob",
        (
            S("n_items", "u32", 1),
            S("item_size", "u16", 1),
            S("n_classes", "u16", 1),
        ),
        doc="then i8 inputs[n_items * item_size], u8 labels[n_items] (each < n_classes)",
    ),
    # ---- what a device says on its own (docs/protocol.md, "Device log")
    Layout(
        "LOG",
        "LOG frame",
        (
            S("kind", "u8", doc="a LogKind (any value: a host shows an unknown one as a number)"),
            S("dropped", "u16", doc="lines the ring dropped before this one (it was full)"),
            S("msg_len", "u16", 0, "MAX_LOG_MSG"),
            Array("msg", "u8", "msg_len"),
        ),
        MessageType.LOG,
        doc="device-initiated, seq 0; a host that does not know it skips it",
    ),
)

LAYOUTS: dict[str, Layout] = {lay.key: lay for lay in _LAYOUT_LIST}
REQUEST_LAYOUTS: dict[int, Layout] = {
    lay.type: lay for lay in _LAYOUT_LIST if lay.type is not None and lay.type < RESPONSE_BIT
}
RESPONSE_LAYOUTS: dict[int, Layout] = {
    lay.type: lay for lay in _LAYOUT_LIST if lay.type is not None and lay.type >= RESPONSE_BIT
}

# Layout ids of the C tables (HB_L_<key>): the requests in type order first (so a request's id
# is its type - FIRST_REQUEST), then every other layout in declaration order.
LAYOUT_IDS: dict[str, int] = {
    key: i
    for i, key in enumerate(
        [REQUEST_LAYOUTS[t].key for t in sorted(REQUEST_LAYOUTS)]
        + [lay.key for lay in _LAYOUT_LIST if lay.type not in REQUEST_LAYOUTS]
    )
}

# ---- derived limits -----------------------------------------------------------------------------

HEADER_SIZE = LAYOUTS["FRAME_HEADER"].min_size  # 6
FRAME_OVERHEAD = HEADER_SIZE + CRC_SIZE  # body length = payload length + 10
MODEL_CHUNK_OVERHEAD = LAYOUTS["LOAD_MODEL"].min_size  # 8: LOAD_MODEL fields before the chunk
DATA_CHUNK_OVERHEAD = LAYOUTS["LOAD_DATA"].min_size  # 9
DATA_HEADER_BYTES = LAYOUTS["DATA_BLOB"].min_size  # 8


def max_q(max_payload: int = MAX_PAYLOAD) -> int:
    """Largest q whose PROBE response, APPLY request and PROBE request fit in ``max_payload``."""
    return min(
        (max_payload - LAYOUTS[k].min_size) // LAYOUTS[k].per("q")
        for k in ("PROBE_R", "APPLY", "PROBE")
    )


def max_model_chunk(max_payload: int = MAX_PAYLOAD) -> int:
    """Largest LOAD_MODEL chunk that fits in ``max_payload``."""
    return max_payload - MODEL_CHUNK_OVERHEAD


def max_data_chunk(max_payload: int = MAX_PAYLOAD) -> int:
    """Largest LOAD_DATA chunk that fits in ``max_payload``."""
    return max_payload - DATA_CHUNK_OVERHEAD


def max_infer_output(max_payload: int = MAX_PAYLOAD) -> int:
    """Most output elements an INFER response can carry in ``max_payload``."""
    return max_payload - LAYOUTS["INFER_R"].min_size


MAX_Q = max_q(MAX_PAYLOAD)  # 510
MAX_INFER_OUTPUT = max_infer_output(MAX_PAYLOAD)  # 4081

# Names a range may use (rendered as HB_<name> in the C tables).
LIMITS: dict[str, int] = {
    "LAST_SLOT": N_SLOTS - 1,
    "STAGE_MODEL": STAGE_MODEL,
    "MAX_BATCH": MAX_BATCH,
    "MAX_EPS": MAX_EPS,
    "MAX_HEAD_OUT": MAX_HEAD_OUT,
    "MAX_BIAS_GAIN": MAX_BIAS_GAIN,
    "MAX_Q": MAX_Q,
    "MAX_STRING": MAX_STRING,
    "MAX_ERROR_MSG": MAX_ERROR_MSG,
    "MAX_LOG_MSG": MAX_LOG_MSG,
    "MAX_PAYLOAD": MAX_PAYLOAD,
    "MIN_DEVICE_PAYLOAD": MIN_DEVICE_PAYLOAD,
    "MAX_INFER_OUTPUT": MAX_INFER_OUTPUT,
    "LAST_TIMING_SOURCE": max(TimingSource),
}


def probe_response_size(q: int) -> int:
    return LAYOUTS["PROBE_R"].size(q=q)


def apply_probe_response_size(q: int) -> int:
    return LAYOUTS["APPLY_PROBE_R"].size(q=q)


def infer_response_size(n: int) -> int:
    return LAYOUTS["INFER_R"].size(n=n)


# ---- message templates --------------------------------------------------------------------------

FIELD_PATH = "%s[%d].%s"  # a field of a record: records field, record index, field

MESSAGES: dict[str, str] = {
    # processing order, steps 1-5 (docs/protocol.md)
    "BAD_FRAME": "%s",  # the problem kind: cobs, short, length, crc, oversize
    "BAD_VERSION": "device speaks protocol version %d, frame is version %d",
    "UNKNOWN_TYPE": "unknown request type 0x%02x",
    "NO_SESSION": "no session: the device booted since the last HELLO; say HELLO and load again",
    # step 6, length
    "SHORT": "%s: payload is %d bytes and ends inside field '%s' (needs %d bytes at offset %d)",
    "TRAILING": "%s: %d trailing byte(s) after the last field (payload is %d bytes, expected %d)",
    # step 7, ranges and cross-field rules
    "RANGE": "%s: field '%s' = %d out of range %d..%d",
    "CHUNK_END": "%s: offset %d + chunk length %d = %d exceeds total_len %d",
    "SPAN_2_32": "%s: fields '%s' + '%s' = %d exceed 2**32",
    "INLINE_INPUT": "%s: an input is given, so slot and index must be 0 (got slot %d, index %d)",
    # step 8, state
    "NO_MODEL": "no model loaded: send LOAD_MODEL first",
    "NO_DATA": "data slot %d is empty: send LOAD_DATA first",
    "SLOT_ITEM_SIZE": "data slot %d holds items of %d bytes, the model's input is %d bytes",
    "SLOT_CLASSES": "data slot %d has %d classes, the model's output has %d",
    "EVAL_PAST_END": "%s: items %d..%d are past the end of data slot %d (%d items)",
    "INFER_INDEX": "%s: index %d is past the end of data slot %d (%d items)",
    "INFER_INPUT_SIZE": "%s: the input would be %d bytes, the model's input is %d bytes",
    "INFER_INPUT_OFFSET": "%s: input piece at in_offset %d, expected %d (or 0 to start again)",
    "INFER_OUT_OFFSET": "%s: out_offset %d is past the end of the model's output (%d elements)",
    "INFER_NOT_HELD": "%s: no output of slot %d item %d is held to read from out_offset %d: "
    "send INFER with out_offset 0 first",
    "ANSWER_TOO_LARGE": "%s: the answer would be %d bytes, max_payload is %d",
    "PROBED_NONE": "%s: no PROBE since the model load to take the seeds from: send APPLY",
    "PROBED_Q": "%s: %d coefficients, but the last PROBE had q = %d",
    "HEAD_NONE": "%s: the model's last op is not a FULLY_CONNECTED layer producing its output",
    "HEAD_TRAINED": "%s: the head's tensor %d is trained by ZO (ZOCF entry %d): "
    "leave the last layer out of the ZOCF",
    "HEAD_CHANNELS": "%s: %d rates, the head has %d output channels",
    "HEAD_MEMORY": "%s: the head's gradient needs %d bytes of int32 accumulators, "
    "%d of the arena are free",
    # bulk uploads (docs/protocol.md, "Bulk transfer")
    "BULK_NOT_STARTED": "%s: chunk at offset %d, but no upload is in progress: expected offset 0",
    "BULK_OFFSET": "%s: chunk at offset %d, expected offset %d",
    "BULK_TOTAL": "%s: total_len %d, but the upload in progress has total_len %d "
    "(expected offset %d)",
    "BLOB_TOO_LARGE": "%s: total_len %d needs %d bytes, %d of the %d-byte arena are free",
    "MODEL_MEMORY": "model needs %d bytes of working memory (activations %d, ZO state %d), "
    "%d of the %d-byte arena are free",
    # the data blob, checked when its last chunk arrives (docs/protocol.md, "Data blob")
    "DATA_SHORT": "data blob is %d bytes, shorter than its %d-byte header",
    "DATA_LENGTH": "data blob is %d bytes, its header says %d",
    "DATA_LABEL": "data blob: label %d of item %d is not below n_classes %d",
    # staged uploads (docs/protocol.md, "Staged uploads")
    "STAGE_NONE": "%s: no staged upload for target %d: send LOAD_STAGE first",
    "STAGE_TOTAL": "%s: total_len %d, but the staged upload of target %d has total_len %d",
    "STAGE_CRC": "%s: the %d staged bytes have CRC-32 0x%08x, expected 0x%08x: "
    "the debugger's write did not land",
    # a device-side failure that is not the host's fault
    "INTERNAL": "internal error: %s",
}

MESSAGE_CODES: dict[str, ErrorCode] = {
    "BAD_FRAME": ErrorCode.BAD_FRAME,
    "BAD_VERSION": ErrorCode.BAD_VERSION,
    "UNKNOWN_TYPE": ErrorCode.UNKNOWN_TYPE,
    "NO_SESSION": ErrorCode.NO_SESSION,
    "SHORT": ErrorCode.BAD_LENGTH,
    "TRAILING": ErrorCode.BAD_LENGTH,
    "NO_MODEL": ErrorCode.NO_MODEL,
    "NO_DATA": ErrorCode.NO_DATA,
    "BLOB_TOO_LARGE": ErrorCode.MODEL_TOO_LARGE,
    "MODEL_MEMORY": ErrorCode.MODEL_TOO_LARGE,
    "INTERNAL": ErrorCode.INTERNAL,
} | {
    name: ErrorCode.BAD_ARGUMENT
    for name in (
        "RANGE",
        "CHUNK_END",
        "SPAN_2_32",
        "INLINE_INPUT",
        "SLOT_ITEM_SIZE",
        "SLOT_CLASSES",
        "EVAL_PAST_END",
        "INFER_INDEX",
        "INFER_INPUT_SIZE",
        "INFER_INPUT_OFFSET",
        "INFER_OUT_OFFSET",
        "INFER_NOT_HELD",
        "ANSWER_TOO_LARGE",
        "PROBED_NONE",
        "PROBED_Q",
        "HEAD_NONE",
        "HEAD_TRAINED",
        "HEAD_CHANNELS",
        "HEAD_MEMORY",
        "BULK_NOT_STARTED",
        "BULK_OFFSET",
        "BULK_TOTAL",
        "DATA_SHORT",
        "DATA_LENGTH",
        "DATA_LABEL",
        "STAGE_NONE",
        "STAGE_TOTAL",
        "STAGE_CRC",
    )
}


def format_message(template: str, args: Sequence[object] = ()) -> str:
    """``template % args`` cut at MAX_ERROR_MSG bytes of UTF-8 on a character boundary (what
    ``hb_format`` in device_fw/core/hb_status.c produces from the same template and args)."""
    text = template % tuple(args)
    b = text.encode("utf-8")
    if len(b) <= MAX_ERROR_MSG:
        return text
    b = b[:MAX_ERROR_MSG]
    # drop a partial character at the end: back over continuation bytes to its lead byte
    i = len(b)
    while i > 0 and b[i - 1] & 0xC0 == 0x80:
        i -= 1
    if i > 0 and b[i - 1] >= 0x80:
        lead = b[i - 1]
        need = 2 if lead >> 5 == 6 else 3 if lead >> 4 == 14 else 4
        if len(b) - (i - 1) < need:
            b = b[: i - 1]
    return b.decode("utf-8")


class MessageError(ValueError):
    """A refused request: ``code`` is the ERROR code a device answers, ``str()`` its message."""

    def __init__(self, text: str, code: ErrorCode = ErrorCode.BAD_ARGUMENT) -> None:
        super().__init__(text)
        self.code = ErrorCode(code)

    @property
    def message(self) -> str:
        return self.args[0]


def refusal(name: str, *args: object) -> MessageError:
    """The MessageError of template ``name`` (a :data:`MESSAGES` key) with ``args``."""
    return MessageError(format_message(MESSAGES[name], args), MESSAGE_CODES[name])


# ---- the generic request checker (steps 6-7) ----------------------------------------------------


class _Plan:
    """A layout compiled for the two passes: ``steps`` read it (runs of scalars as one struct,
    arrays, the rest, nested layouts), ``checks`` are its ranges and rules in table order."""

    __slots__ = ("checks", "n", "steps")

    def __init__(self, layout: Layout) -> None:
        self.n = len(layout.items)
        self.steps: list[tuple] = []
        self.checks: list[tuple] = []
        idx = {it.name: i for i, it in enumerate(layout.items)}
        run: list[int] = []

        def flush() -> None:
            if run:
                items = [layout.items[i] for i in run]
                st = struct.Struct("<" + "".join(WIRES[it.wire].fmt for it in items))
                ends, pos = [], 0
                for it in items:
                    ends.append((it.name, pos, WIRES[it.wire].size))
                    pos += WIRES[it.wire].size
                self.steps.append(("run", st, tuple(run), tuple(ends)))
                run.clear()

        for i, it in enumerate(layout.items):
            if isinstance(it, Scalar):
                run.append(i)
                if it.ranged:
                    self.checks.append(("range", i, it.name, *layout.bounds(it)))
                continue
            flush()
            if isinstance(it, Array):
                w = WIRES[it.elem]
                self.steps.append(("array", i, it.name, np.dtype(w.dtype), w.size, idx[it.count]))
            elif isinstance(it, Rest):
                self.steps.append(("rest", i))
            elif isinstance(it, Records):
                sub = _plan(LAYOUTS[it.layout])
                self.steps.append(("records", i, it.name, sub, idx[it.count]))
                self.checks.append(("records", i, it.name, sub))
            elif isinstance(it, Embed):
                sub = _plan(LAYOUTS[it.layout])
                self.steps.append(("embed", i, it.name, sub))
                self.checks.append(("embed", i, it.name, sub))
            else:
                args = tuple(idx[a] for a in it.args)
                is_rest = tuple(isinstance(layout.items[j], Rest) for j in args)
                self.checks.append(("rule", it.args, RULES[it.rule], args, is_rest))
        flush()

    def read(self, data: bytes, pos: int, n: int, name: str, path: tuple | None) -> tuple:
        """(values by field index, end position) of one instance at ``pos``; SHORT when the
        payload (``n`` bytes) ends inside a field."""
        values: list[Any] = [None] * self.n
        for step in self.steps:
            kind = step[0]
            if kind == "run":
                st = step[1]
                if pos + st.size > n:
                    for field, off, size in step[3]:
                        if pos + off + size > n:
                            raise _short(name, n, path, field, size, pos + off)
                for i, v in zip(step[2], st.unpack_from(data, pos), strict=True):
                    values[i] = v
                pos += st.size
            elif kind == "array":
                _, i, field, dtype, size, ci = step
                count = values[ci]
                need = count * size
                if pos + need > n:
                    raise _short(name, n, path, field, need, pos)
                values[i] = np.frombuffer(data, dtype, count, pos)
                pos += need
            elif kind == "rest":
                values[step[1]] = data[pos:n]
                pos = n
            elif kind == "records":
                _, i, field, sub, ci = step
                records = []
                for r in range(values[ci]):
                    record, pos = sub.read(data, pos, n, name, (field, r))
                    records.append(record)
                values[i] = records
            else:  # embed: its fields are named as the outer layout's
                values[step[1]], pos = step[3].read(data, pos, n, name, path)
        return values, pos

    def write(self, values: Sequence[Any], out: bytearray) -> None:
        """Append the bytes of one instance's values to ``out`` (the inverse of :meth:`read`)."""
        for step in self.steps:
            kind = step[0]
            if kind == "run":
                out += step[1].pack(*[values[i] for i in step[2]])
            elif kind == "array":
                v, dtype = values[step[1]], step[3]
                if type(v) is np.ndarray and v.dtype == dtype:
                    out += v.tobytes()
                elif dtype.itemsize == 1 and isinstance(v, bytes | bytearray | memoryview):
                    out += v
                else:
                    out += np.asarray(v, dtype=dtype).tobytes()
            elif kind == "rest":
                out += bytes(values[step[1]])
            elif kind == "records":
                for record in values[step[1]]:
                    step[3].write(record, out)
            else:
                step[3].write(values[step[1]], out)

    def check(self, values: list[Any], name: str, path: tuple | None) -> None:
        """Ranges and rules in table order; RANGE (or the rule's template) on the first that
        fails."""
        for check in self.checks:
            kind = check[0]
            if kind == "range":
                _, i, field, lo, hi = check
                v = values[i]
                if not lo <= v <= hi:
                    raise refusal("RANGE", name, _path(path, field), v, lo, hi)
            elif kind == "records":
                sub, field = check[3], check[2]
                for r, record in enumerate(values[check[1]]):
                    sub.check(record, name, (field, r))
            elif kind == "embed":
                check[3].check(values[check[1]], name, path)
            else:
                _, names, rule, args, is_rest = check
                v = [len(values[j]) if r else values[j] for j, r in zip(args, is_rest, strict=True)]
                if rule.broken(*v):
                    raise refusal(rule.template, *rule.args(name, names, *v))


def _path(path: tuple | None, field: str) -> str:
    return field if path is None else FIELD_PATH % (path[0], path[1], field)


def _short(name: str, n: int, path: tuple | None, field: str, size: int, pos: int) -> MessageError:
    return refusal("SHORT", name, n, _path(path, field), size, pos)


_PLANS: dict[str, _Plan] = {}


def _plan(layout: Layout) -> _Plan:
    plan = _PLANS.get(layout.key)
    if plan is None:
        plan = _PLANS[layout.key] = _Plan(layout)
    return plan


def read_payload(layout: Layout, payload: bytes) -> list[Any]:
    """Step 6 alone: the field values of ``payload`` (a list by field index: ints, read-only
    little-endian numpy arrays, bytes for the rest, a list per record, a list for an embed);
    MessageError BAD_LENGTH (SHORT or TRAILING) when the length is not the layout's."""
    if not isinstance(payload, bytes):
        payload = bytes(payload)
    n = len(payload)
    values, end = _plan(layout).read(payload, 0, n, layout.name, None)
    if end != n:
        raise refusal("TRAILING", layout.name, n - end, n, end)
    return values


def check_values(layout: Layout, values: list[Any]) -> None:
    """Step 7 alone: ranges and rules of values read by :func:`read_payload`."""
    _plan(layout).check(values, layout.name, None)


def check_request(request_type: int, payload: bytes) -> list[Any]:
    """Steps 6-7 of the device processing order for a request: its length, then every range
    and rule in table order. Returns the values (see :func:`read_payload`); raises
    MessageError UNKNOWN_TYPE, BAD_LENGTH or BAD_ARGUMENT with the declared message."""
    layout = REQUEST_LAYOUTS.get(request_type)
    if layout is None:
        raise refusal("UNKNOWN_TYPE", request_type)
    values = read_payload(layout, payload)
    _plan(layout).check(values, layout.name, None)
    return values


def pack_payload(layout: Layout, values: Sequence[Any]) -> bytes:
    """The payload bytes of ``values`` (as :func:`read_payload` gives them; a ``u8`` array may
    be bytes), written as they stand: nothing is checked, so a count may disagree with its
    array (tests build malformed payloads this way)."""
    plan = _plan(layout)
    if len(values) != plan.n:
        raise ValueError(f"{layout.name}: {len(values)} values for {plan.n} fields")
    out = bytearray()
    plan.write(values, out)
    return bytes(out)


def check_data_blob(blob: bytes) -> tuple[int, int, int]:
    """``(n_items, item_size, n_classes)`` of a complete LOAD_DATA blob; MessageError
    BAD_ARGUMENT with the declared message otherwise. Checks, in order: the header's length,
    its fields' ranges, the total length, then each label (the first one not below
    n_classes is named)."""
    layout = LAYOUTS["DATA_BLOB"]
    n = len(blob)
    if n < DATA_HEADER_BYTES:
        raise refusal("DATA_SHORT", n, DATA_HEADER_BYTES)
    values, _ = _plan(layout).read(bytes(blob[:DATA_HEADER_BYTES]), 0, DATA_HEADER_BYTES, "", None)
    _plan(layout).check(values, layout.name, None)
    n_items, item_size, n_classes = values
    expected = DATA_HEADER_BYTES + n_items * item_size + n_items
    if n != expected:
        raise refusal("DATA_LENGTH", n, expected)
    labels = np.frombuffer(blob, np.uint8, n_items, DATA_HEADER_BYTES + n_items * item_size)
    bad = np.flatnonzero(labels >= n_classes)
    if len(bad):
        raise refusal("DATA_LABEL", int(labels[bad[0]]), int(bad[0]), n_classes)
    return n_items, item_size, n_classes


def _validate() -> None:
    """The declaration is self-consistent (checked at import: a bad edit fails at once)."""
    for lay in _LAYOUT_LIST:
        names = [it.name for it in lay.items]
        if len(set(names)) != len(names):
            raise ValueError(f"{lay.name}: duplicate field names")
        seen: dict[str, Item] = {}
        for k, it in enumerate(lay.items):
            if isinstance(it, Array | Records):
                c = seen.get(it.count)
                if not isinstance(c, Scalar) or c.wire not in ("u8", "u16", "u32"):
                    raise ValueError(f"{lay.name}.{it.name}: count must be an earlier unsigned")
            if isinstance(it, Records | Embed) and not LAYOUTS[it.layout].flat:
                raise ValueError(f"{lay.name}.{it.name}: only flat layouts nest")
            if isinstance(it, Records) and LAYOUTS[it.layout].min_size == 0:
                raise ValueError(f"{lay.name}.{it.name}: a record must be at least 1 byte")
            if (
                isinstance(it, Rest)
                and k != len(lay.items) - 1
                and not all(isinstance(x, Rule) for x in lay.items[k + 1 :])
            ):
                raise ValueError(f"{lay.name}.{it.name}: a Rest must be the last field")
            if isinstance(it, Rule) and (
                it.rule not in RULES or any(a not in seen for a in it.args)
            ):
                raise ValueError(f"{lay.name}: rule {it.rule} on unknown or later fields")
            if isinstance(it, Scalar) and it.ranged:
                lo, hi = lay.bounds(it)
                w = WIRES[it.wire]
                if not w.lo <= lo <= hi <= w.hi or hi >= 2**63:
                    raise ValueError(f"{lay.name}.{it.name}: range {lo}..{hi} outside {w.name}")
            seen[it.name] = it
    requests = sorted(REQUEST_LAYOUTS)
    if requests != list(range(FIRST_REQUEST, LAST_REQUEST + 1)):
        raise ValueError("request types must be FIRST_REQUEST..LAST_REQUEST without gaps")
    for name in MESSAGES:
        if name not in MESSAGE_CODES and name != "BAD_FRAME":
            raise ValueError(f"template {name} has no error code")
    for rule in RULES.values():
        if rule.template not in MESSAGES:
            raise ValueError(f"rule template {rule.template} is not declared")


_validate()
