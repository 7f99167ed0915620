"""Frames: header, CRC-32, COBS and the 0x00 delimiter (docs/protocol.md, "Framing").

Body (before COBS), little-endian::

    u8 version | u8 type | u16 seq | u16 length | payload[length] | u32 crc32(version..payload)

On the wire: ``cobs(body) + b"\\x00"``.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from cobs import cobs

from hilbench.protocol import spec

try:  # the firmware's framing compiled for the host (setup.py), for the host's per-step frames
    from hilbench.protocol import _framing
except ImportError as e:  # not built (no C compiler at install time): the Python codec only
    _framing = None
    NATIVE_ERROR: str | None = str(e)
else:
    NATIVE_ERROR = None
from hilbench.protocol.spec import (
    CRC_SIZE,
    FRAME_OVERHEAD,
    HEADER_SIZE,
    MAX_PAYLOAD,
    PROTOCOL_VERSION,
)

__all__ = [
    "CRC_SIZE",
    "FRAME_OVERHEAD",
    "HEADER_SIZE",
    "MAX_ENCODED_LEN",
    "MAX_PAYLOAD",
    "PROBLEM_KINDS",
    "PROTOCOL_VERSION",
    "Frame",
    "FrameDecoder",
    "FrameError",
    "FrameProblem",
    "encode_frame",
    "max_encoded_len",
    "wire_frame",
]

_HEADER = struct.Struct(
    "<" + "".join(spec.WIRES[f.wire].fmt for f in spec.LAYOUTS["FRAME_HEADER"].items)
)  # version, type, seq, length
_CRC = struct.Struct("<I")
assert _HEADER.size == HEADER_SIZE and _CRC.size == CRC_SIZE

PROBLEM_KINDS = spec.FRAME_PROBLEMS
_BYTES = (bytes, bytearray)  # a tuple built once: ``bytes | bytearray`` is a new union per call
#: CRC-32 of any bytes followed by their own CRC-32 (little-endian): one pass checks a body
#: (a 4-byte tail is right exactly when this comes out: appending it is one-to-one)
_CRC_RESIDUE = zlib.crc32(_CRC.pack(zlib.crc32(b"")))


def max_encoded_len(max_payload: int = MAX_PAYLOAD) -> int:
    """Longest COBS-encoded body (delimiter excluded) for payloads up to ``max_payload``."""
    body = max_payload + FRAME_OVERHEAD
    return body + body // 254 + 1


MAX_ENCODED_LEN = max_encoded_len(MAX_PAYLOAD)  # 4123


class FrameError(ValueError):
    """A frame could not be built (a field out of range, a payload too long)."""


class Frame(NamedTuple):  # a tuple: one is built per frame received
    """One decoded frame. ``version`` is delivered as received; the message layer checks it."""

    version: int
    type: int
    seq: int
    payload: bytes

    def encode(self) -> bytes:
        """Wire bytes of this frame (COBS body + delimiter)."""
        return encode_frame(self.type, self.seq, self.payload, version=self.version)


_new_frame = tuple.__new__  # a Frame of checked fields, without NamedTuple's __new__ call


@dataclass(frozen=True, slots=True)
class FrameProblem:
    """A discarded run of bytes: ``kind`` in PROBLEM_KINDS, ``nbytes`` raw (encoded) length."""

    kind: str
    nbytes: int
    detail: str


def encode_frame(
    type: int, seq: int, payload: bytes = b"", version: int = PROTOCOL_VERSION
) -> bytes:
    """Build the wire bytes of one frame: ``cobs(body) + b"\\x00"``."""
    if not (0 <= version <= 0xFF and 0 <= type <= 0xFF and 0 <= seq <= 0xFFFF):
        _out_of_range(version, type, seq)  # one test for the three on every frame
    if not isinstance(payload, bytes):
        payload = bytes(payload)
    n = len(payload)
    if n > MAX_PAYLOAD:
        raise FrameError(f"frame payload is {n} bytes, the limit is MAX_PAYLOAD={MAX_PAYLOAD}")
    body = _HEADER.pack(version, type, seq, n) + payload
    return cobs.encode(body + _CRC.pack(zlib.crc32(body))) + b"\x00"


_native_wire = _framing.wire if _framing is not None else None


def wire_frame(type: int, seq: int, payload: bytes = b"", version: int = PROTOCOL_VERSION) -> bytes:
    """What a host writes for one frame: ``b"\x00" + encode_frame(...)`` (the delimiter
    first ends any noise before it). Built by the firmware's own encoder (device_fw/core/
    frame.c, compiled for the host) when it is built, else by :func:`encode_frame`, which also
    says what is wrong with a field out of range."""
    if _native_wire is not None:
        out = _native_wire(version, type, seq, payload)
        if out is not None:
            return out
    return b"\x00" + encode_frame(type, seq, payload, version)


def _out_of_range(version: int, type: int, seq: int) -> None:
    """The FrameError of the first header field out of its range (version, type, seq)."""
    if not 0 <= version <= 0xFF:
        raise FrameError(f"frame version {version} out of range 0..255")
    if not 0 <= type <= 0xFF:
        raise FrameError(f"frame type {type} out of range 0..255")
    raise FrameError(f"frame seq {seq} out of range 0..65535")


class FrameDecoder:
    """Streaming decoder: ``feed(bytes) -> list[Frame]``; never raises on bad input.

    Every discarded run of bytes is counted in ``error_counts``, appended to ``errors`` (the
    most recent ``max_recorded`` are kept) and passed to ``on_error`` if given. The decoder
    resynchronises at the next 0x00. Empty frames (two delimiters in a row) are ignored. A run
    longer than ``max_encoded`` is dropped as it arrives (memory stays bounded) and reported
    once, as "oversize", when the 0x00 that ends it arrives.

    ``native``: a read that is exactly one intact frame is checked by the firmware's own
    decoder, compiled for the host (``_framing.one``), when it is built: the same frame, with
    fewer Python steps. The host's client asks for it; the twin keeps the Python codec, so the
    differential tests keep two independent framings on the two sides of a link.
    """

    def __init__(
        self,
        on_error: Callable[[FrameProblem], None] | None = None,
        *,
        max_payload: int = MAX_PAYLOAD,
        max_recorded: int = 1000,
        native: bool = False,
    ) -> None:
        if not 0 <= max_payload <= MAX_PAYLOAD:
            raise FrameError(f"decoder max_payload {max_payload} out of range 0..{MAX_PAYLOAD}")
        self.on_error = on_error
        self.max_payload = max_payload
        self.max_encoded = max_encoded_len(max_payload)
        self.max_recorded = max_recorded
        self.errors: list[FrameProblem] = []
        self.error_counts: dict[str, int] = dict.fromkeys(PROBLEM_KINDS, 0)
        self.frames_decoded = 0
        self._buf = bytearray()
        self._discarded = 0  # > 0 inside an oversize run: bytes dropped so far
        # native: one whole intact frame read on its own is checked by the firmware's code
        # (the host client's every answer); anything else by the Python codec below
        self._one = _framing.one if native and _framing is not None else None

    @property
    def n_errors(self) -> int:
        """Total number of problems seen since construction (or the last reset)."""
        return sum(self.error_counts.values())

    @property
    def pending(self) -> int:
        """Bytes buffered while waiting for a delimiter (always <= ``max_encoded``)."""
        return len(self._buf)

    @property
    def discarding(self) -> bool:
        """True inside an oversize run (bytes are dropped up to the next 0x00)."""
        return self._discarded > 0

    def reset(self) -> None:
        """Drop any partial frame or oversize run silently (counters are kept)."""
        self._buf.clear()
        self._discarded = 0

    def feed(self, data: bytes) -> list[Frame]:
        """Consume ``data``; return the frames completed by it, in order."""
        if not isinstance(data, _BYTES):
            data = bytes(data)
        if not self._buf and not self._discarded:  # the common case: one whole frame,
            # nothing buffered before it, perhaps after the delimiter a sender puts first
            if self._one is not None:
                fields = self._one(data, self.max_payload)
                if fields is not None:
                    self.frames_decoded += 1
                    return [_new_frame(Frame, fields)]
            end = len(data) - 1
            start = 1 if end > 0 and data[0] == 0 else 0
            if 0 < end - start <= self.max_encoded and data.find(b"\x00", start) == end:
                frame = self._decode(data[start:end])
                return [] if frame is None else [frame]
        frames: list[Frame] = []
        buf = self._buf
        limit = self.max_encoded
        start = 0
        end = len(data)
        while start < end:
            i = data.find(b"\x00", start)
            stop = end if i < 0 else i
            if self._discarded:  # inside an oversize run: count, do not keep
                self._discarded += stop - start
            elif len(buf) + stop - start > limit:  # this run is too long: drop it
                self._discarded = len(buf) + stop - start
                buf.clear()
            elif i < 0:  # no delimiter yet: keep the tail (bounded by ``limit``)
                buf += data[start:end]
            elif buf:
                buf += data[start:i]
                frame = self._decode(bytes(buf))
                buf.clear()
                if frame is not None:
                    frames.append(frame)
            elif i > start:
                frame = self._decode(data[start:i])
                if frame is not None:
                    frames.append(frame)
            if i < 0:
                break
            if self._discarded:  # the delimiter ends the oversize run: report it once
                self._problem(
                    "oversize",
                    self._discarded,
                    f"{self._discarded} bytes without a delimiter, the limit is {limit}",
                )
                self._discarded = 0
            start = i + 1
        return frames

    def _decode(self, raw: bytes | bytearray) -> Frame | None:
        try:
            body = cobs.decode(raw)
        except cobs.DecodeError as exc:
            self._problem("cobs", len(raw), f"COBS decoding failed: {exc}")
            return None
        n = len(body)
        if n < FRAME_OVERHEAD:
            self._problem("short", len(raw), f"body is {n} bytes, the minimum is {FRAME_OVERHEAD}")
            return None
        if zlib.crc32(body) != _CRC_RESIDUE:  # the CRC over the body and its own CRC
            self._problem("crc", len(raw), "CRC-32 mismatch")
            return None
        version, type_, seq, length = _HEADER.unpack_from(body)
        if length != n - FRAME_OVERHEAD:
            self._problem(
                "length",
                len(raw),
                f"length field says {length} payload bytes, the frame carries {n - FRAME_OVERHEAD}",
            )
            return None
        if length > self.max_payload:
            self._problem(
                "oversize", len(raw), f"payload is {length} bytes, the limit is {self.max_payload}"
            )
            return None
        self.frames_decoded += 1
        return _new_frame(Frame, (version, type_, seq, body[HEADER_SIZE : n - CRC_SIZE]))

    def _problem(self, kind: str, nbytes: int, detail: str) -> None:
        problem = FrameProblem(kind, nbytes, detail)
        self.error_counts[kind] += 1
        self.errors.append(problem)
        if len(self.errors) > self.max_recorded:
            del self.errors[: len(self.errors) - self.max_recorded]
        if self.on_error is not None:
            self.on_error(problem)
