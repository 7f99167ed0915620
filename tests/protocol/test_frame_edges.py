"""Frame layer corner cases: lone delimiters, exact problem reports, limits at their edges.

Written against the survivors of a mutation run (tools/mutation.py frames): each test pins a
number or a text that a changed decoder would get wrong.
"""

from __future__ import annotations

import struct
import zlib

import pytest
from cobs import cobs

from hilbench.protocol.frames import (
    FRAME_OVERHEAD,
    MAX_PAYLOAD,
    PROTOCOL_VERSION,
    Frame,
    FrameDecoder,
    FrameError,
    encode_frame,
    max_encoded_len,
)


def zero_free_frame(n: int) -> bytes:
    """Wire bytes of a frame with an ``n``-byte payload whose body has no 0x00 at all (the
    longest COBS encoding for its size): the seq is searched until the CRC has no zero byte."""
    for seq in range(0x0101, 0xFFFF):
        if seq & 0xFF == 0 or seq >> 8 == 0:
            continue
        wire = encode_frame(0x11, seq, b"\x5a" * n)
        body = cobs.decode(wire[:-1])
        if 0 not in body:
            return wire
    raise AssertionError("no zero-free frame found")


def body_with(length_field: int, payload: bytes, crc_ok: bool = True) -> bytes:
    body = struct.pack("<BBHH", PROTOCOL_VERSION, 7, 9, length_field) + payload
    crc = zlib.crc32(body) if crc_ok else zlib.crc32(body) ^ 1
    return cobs.encode(body + struct.pack("<I", crc)) + b"\x00"


def test_a_lone_delimiter_is_no_problem_on_every_path() -> None:
    """A byte-at-a-time reader sees each frame's 0x00 alone: nothing is reported, nothing kept."""
    d = FrameDecoder()
    for data in (b"\x00", bytearray(b"\x00"), b"\x00\x00\x00", [0]):
        assert d.feed(data) == []
    assert d.n_errors == 0 and d.errors == [] and d.pending == 0 and not d.discarding
    f = Frame(PROTOCOL_VERSION, 3, 0x1234, b"reply")
    got = []
    for _ in range(5):
        for byte in f.encode():
            got += d.feed(bytes([byte]))
            got += d.feed(b"")
    assert got == [f] * 5 and d.n_errors == 0 and d.frames_decoded == 5


def test_frames_decoded_counts_every_frame() -> None:
    d = FrameDecoder()
    frames = [Frame(PROTOCOL_VERSION, 1, s, bytes([s])) for s in range(1, 4)]
    assert d.feed(b"".join(f.encode() for f in frames)) == frames
    assert d.feed(frames[0].encode()) == [frames[0]]
    assert d.frames_decoded == 4


def test_fresh_decoder_state() -> None:
    d = FrameDecoder()
    assert d.discarding is False and d.pending == 0 and d.n_errors == 0
    assert d.max_recorded == 1000 and d.max_payload == MAX_PAYLOAD
    assert d.error_counts == {"cobs": 0, "short": 0, "length": 0, "crc": 0, "oversize": 0}


def test_default_record_keeps_the_last_thousand() -> None:
    d = FrameDecoder()
    d.feed(b"\x05\x00" * 1001)
    assert len(d.errors) == 1000 and d.error_counts["cobs"] == 1001


def test_record_keeps_exactly_max_recorded_most_recent() -> None:
    seen = []
    d = FrameDecoder(seen.append, max_recorded=3)
    d.feed(b"\x05\x00" * 3)
    assert len(d.errors) == 3  # exactly at the limit: nothing dropped yet
    d.feed(b"\x02\x01\x00")  # cobs decodes to 1 byte: short
    assert [p.kind for p in d.errors] == ["cobs", "cobs", "short"]
    assert [p.kind for p in seen] == ["cobs"] * 3 + ["short"]


def test_each_problem_reports_its_raw_size_and_its_reason() -> None:
    d = FrameDecoder()
    d.feed(b"\x07ab\x00")
    short = cobs.encode(b"\x01\x02\x03")
    d.feed(short + b"\x00")
    bad_crc = body_with(3, b"xyz", crc_ok=False)
    d.feed(bad_crc)
    liar = body_with(5, b"xyz")
    d.feed(liar)
    p = d.errors
    assert p[0].kind == "cobs" and p[0].nbytes == 3
    assert p[0].detail.startswith("COBS decoding failed: ")
    assert (p[1].kind, p[1].nbytes) == ("short", len(short))
    assert p[1].detail == f"body is 3 bytes, the minimum is {FRAME_OVERHEAD}"
    assert (p[2].kind, p[2].nbytes, p[2].detail) == ("crc", len(bad_crc) - 1, "CRC-32 mismatch")
    assert (p[3].kind, p[3].nbytes) == ("length", len(liar) - 1)
    assert p[3].detail == "length field says 5 payload bytes, the frame carries 3"


def test_a_payload_over_the_decoders_limit_whose_run_fits_is_oversize() -> None:
    """A body with zeros encodes one byte longer than itself: under a 300-byte limit a
    301-byte payload of zeros fits the run bound (312) and is refused by its length field."""
    d = FrameDecoder(max_payload=300)
    assert d.max_encoded == 312
    wire = encode_frame(1, 1, bytes(301))
    assert len(wire) - 1 == 312
    assert d.feed(wire) == []
    (p,) = d.errors
    assert (p.kind, p.nbytes) == ("oversize", 312)
    assert p.detail == "payload is 301 bytes, the limit is 300"
    ok = Frame(PROTOCOL_VERSION, 1, 1, bytes(300))
    assert d.feed(ok.encode()) == [ok]


def test_an_oversize_run_after_delimiters_counts_only_its_own_bytes() -> None:
    d = FrameDecoder(max_payload=0)
    limit = d.max_encoded
    good = Frame(PROTOCOL_VERSION, 2, 2, b"")
    assert d.feed(b"\x00\x00\x00" + b"\x01" * (limit + 1) + b"\x00" + good.encode()) == [good]
    (p,) = d.errors
    assert (p.kind, p.nbytes) == ("oversize", limit + 1)
    assert p.detail == f"{limit + 1} bytes without a delimiter, the limit is {limit}"


@pytest.mark.parametrize("n", [257, 498, 499, 500, 752, 753, 1006, 1007, MAX_PAYLOAD - 1])
def test_the_longest_encoding_of_each_size_is_accepted(n: int) -> None:
    """max_encoded_len(n) bounds the COBS encoding of any n-byte payload: a zero-free body
    (one code byte per 254 data bytes) at the sizes where a group boundary falls (a length
    field with no zero byte: n >= 257, n % 256 != 0)."""
    wire = zero_free_frame(n)
    assert len(wire) - 1 <= max_encoded_len(n) <= len(wire)
    d = FrameDecoder(max_payload=n)
    (f,) = d.feed(wire)
    assert f.payload == b"\x5a" * n and d.n_errors == 0
    assert FrameDecoder(max_payload=n).feed(b"\x00" + wire) == [f]  # general loop too


def test_decoder_limits_range() -> None:
    d = FrameDecoder(max_payload=0)
    empty = Frame(PROTOCOL_VERSION, 1, 1, b"")
    assert d.feed(empty.encode()) == [empty]
    for bad in (-1, MAX_PAYLOAD + 1):
        with pytest.raises(FrameError) as e:
            FrameDecoder(max_payload=bad)
        assert str(e.value) == f"decoder max_payload {bad} out of range 0..{MAX_PAYLOAD}"
    FrameDecoder(max_payload=MAX_PAYLOAD)


def test_encode_defaults_and_edges() -> None:
    assert FrameDecoder().feed(encode_frame(5, 6)) == [Frame(PROTOCOL_VERSION, 5, 6, b"")]
    top = encode_frame(255, 0xFFFF, b"", version=255)
    assert FrameDecoder().feed(top) == [Frame(255, 255, 0xFFFF, b"")]
    assert encode_frame(1, 2, [1, 2, 3]) == encode_frame(1, 2, b"\x01\x02\x03")
    assert encode_frame(1, 2, (x for x in b"ab")) == encode_frame(1, 2, b"ab")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"version": 256}, "frame version 256 out of range 0..255"),
        ({"version": -1}, "frame version -1 out of range 0..255"),
        ({"type": 256}, "frame type 256 out of range 0..255"),
        ({"seq": 0x10000}, "frame seq 65536 out of range 0..65535"),
        (
            {"payload": bytes(MAX_PAYLOAD + 1)},
            f"frame payload is {MAX_PAYLOAD + 1} bytes, the limit is MAX_PAYLOAD={MAX_PAYLOAD}",
        ),
    ],
)
def test_encode_refusals_say_what_is_wrong(kwargs: dict, message: str) -> None:
    args = {"type": 1, "seq": 1, **kwargs}
    with pytest.raises(FrameError) as e:
        encode_frame(**args)
    assert str(e.value) == message


def test_a_frame_and_the_first_byte_of_the_next_in_one_read() -> None:
    """One delimiter, not at the end: not the one-frame fast path; nothing is lost."""
    first, second = encode_frame(0x81, 5, b"abc"), encode_frame(0x81, 6, b"xyz")
    d = FrameDecoder()
    assert d.feed(first + second[:1]) == [Frame(PROTOCOL_VERSION, 0x81, 5, b"abc")]
    assert d.feed(second[1:]) == [Frame(PROTOCOL_VERSION, 0x81, 6, b"xyz")]
    assert d.errors == []
