"""Frame layer: round trips, streaming, resync, corruption, bounded memory."""

from __future__ import annotations

import random
import struct
import zlib
from pathlib import Path

import pytest
from cobs import cobs
from hypothesis import given, settings
from hypothesis import strategies as st

from hilbench.protocol.frames import (
    MAX_ENCODED_LEN,
    MAX_PAYLOAD,
    PROTOCOL_VERSION,
    Frame,
    FrameDecoder,
    FrameError,
    encode_frame,
    max_encoded_len,
)
from hilbench.protocol.messages import ProbeRequest, decode_request

types = st.integers(0, 255)
seqs = st.integers(0, 0xFFFF)
payloads = st.one_of(
    st.binary(max_size=600),
    st.integers(0, MAX_PAYLOAD).map(lambda n: b"\x00" * n),
    st.integers(0, MAX_PAYLOAD).map(lambda n: b"\xff" * n),
    st.sampled_from([b"", b"\x00", b"\xff" * 254, b"\xff" * 255, bytes(range(256)) * 16]),
)
frames = st.builds(Frame, version=st.just(PROTOCOL_VERSION), type=types, seq=seqs, payload=payloads)
small_frames = st.builds(
    Frame,
    version=st.just(PROTOCOL_VERSION),
    type=types,
    seq=seqs,
    payload=st.one_of(
        st.binary(max_size=300),
        st.integers(0, 300).map(lambda n: b"\x00" * n),
        st.integers(0, 300).map(lambda n: b"\xff" * n),
    ),
)


def wire(f: Frame) -> bytes:
    return encode_frame(f.type, f.seq, f.payload, version=f.version)


def test_layout_matches_the_document() -> None:
    w = encode_frame(0x01, 1, bytes.fromhex("0100fecaad0b"))
    assert w.hex(" ") == "04 01 01 01 02 06 02 01 09 fe ca ad 0b f2 8d f5 b5 00"
    body = cobs.decode(w[:-1])
    assert body[:6] == struct.pack("<BBHH", 1, 1, 1, 6)
    assert struct.unpack("<I", body[-4:])[0] == zlib.crc32(body[:-4])
    assert zlib.crc32(b"123456789") == 0xCBF43926
    assert MAX_ENCODED_LEN == 4123 == max_encoded_len(MAX_PAYLOAD)


def test_max_encoded_len_is_a_tight_bound() -> None:
    longest = len(encode_frame(0xFF, 0xFFFF, b"\xff" * MAX_PAYLOAD)) - 1
    assert longest <= MAX_ENCODED_LEN
    assert MAX_ENCODED_LEN - longest <= 1


@given(frames)
def test_round_trip(f: Frame) -> None:
    d = FrameDecoder()
    w = wire(f)
    assert w.endswith(b"\x00") and b"\x00" not in w[:-1]
    assert d.feed(w) == [f]
    assert d.n_errors == 0 and d.pending == 0


def test_other_versions_are_delivered() -> None:
    f = Frame(7, 0x01, 3, b"\x00\x00")
    assert FrameDecoder().feed(f.encode()) == [f]


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(type=256, seq=0, payload=b""),
        dict(type=-1, seq=0, payload=b""),
        dict(type=1, seq=65536, payload=b""),
        dict(type=1, seq=0, payload=b"", version=256),
        dict(type=1, seq=0, payload=b"x" * (MAX_PAYLOAD + 1)),
    ],
)
def test_encode_validates(kwargs: dict) -> None:
    with pytest.raises(FrameError):
        encode_frame(**kwargs)


@given(st.lists(frames, max_size=6), st.lists(st.integers(0, 10_000), max_size=8))
def test_split_stream_gives_the_same_frames(fs: list[Frame], cuts: list[int]) -> None:
    stream = b"".join(wire(f) for f in fs)
    points = sorted({c % (len(stream) + 1) for c in cuts})
    d = FrameDecoder()
    out: list[Frame] = []
    prev = 0
    for p in [*points, len(stream)]:
        out += d.feed(stream[prev:p])
        prev = p
    assert out == fs
    assert d.n_errors == 0


def test_byte_at_a_time() -> None:
    fs = [Frame(0, 4, i, bytes([i]) * i) for i in range(20)]
    d = FrameDecoder()
    out = []
    for b in b"".join(f.encode() for f in fs):
        out += d.feed(bytes([b]))
    assert out == fs


def test_empty_frames_are_ignored() -> None:
    d = FrameDecoder()
    f = Frame(0, 1, 2, b"ab")
    assert d.feed(b"\x00\x00" + f.encode() + b"\x00\x00\x00") == [f]
    assert d.n_errors == 0


@given(frames, frames, st.binary(min_size=1, max_size=300))
def test_garbage_between_frames_never_loses_the_next_frame(a: Frame, b: Frame, junk: bytes) -> None:
    # Senders put a 0x00 before each frame (docs/protocol.md), so junk always ends at one.
    problems: list = []
    d = FrameDecoder(on_error=problems.append)
    out = d.feed(wire(a) + junk + b"\x00" + wire(b))
    assert out[0] == a and out[-1] == b
    junk_runs = [r for r in junk.split(b"\x00") if r]
    # Each non-empty junk run is reported (or, with odds of 2**-32, is itself a valid frame).
    assert d.n_errors + len(out) - 2 == len(junk_runs)
    assert problems == d.errors


@given(frames, frames, st.binary(min_size=1, max_size=300))
def test_junk_glued_to_a_frame_is_reported_never_misdelivered(
    a: Frame, b: Frame, junk: bytes
) -> None:
    # Without the leading 0x00, junk that does not end in 0x00 spoils the next frame: it is
    # dropped and reported, never delivered wrong.
    d = FrameDecoder()
    out = d.feed(wire(a) + junk + wire(b))
    assert out[0] == a
    assert out[-1] == b or d.n_errors >= 1
    assert all(f in (a, b) for f in out)


def test_garbage_is_reported() -> None:
    f = Frame(0, 1, 2, b"hello")
    problems = []
    d = FrameDecoder(on_error=problems.append)
    assert d.feed(b"\x05garbage\x00" + f.encode()) == [f]
    assert [p.kind for p in problems] == ["cobs"]
    assert problems[0].nbytes == 8


@settings(max_examples=30, deadline=None)
@given(small_frames)
def test_every_single_byte_corruption_is_detected(f: Frame) -> None:
    w = wire(f)
    rng = random.Random(len(w))
    for pos in range(len(w)):
        for new in {w[pos] ^ 0xFF, w[pos] ^ 0x01, rng.randrange(256), 0x00}:
            if new == w[pos]:
                continue
            bad = w[:pos] + bytes([new]) + w[pos + 1 :]
            d = FrameDecoder()
            # A trailing delimiter makes sure a corrupted delimiter still ends the run.
            out = d.feed(bad + b"\x00")
            if pos == len(w) - 1 and out == [f]:
                # The delimiter became a trailing COBS code 0x01, which encodes nothing:
                # the body is intact and the right frame is delivered.
                assert new == 0x01
                continue
            assert out == [], (pos, new, out)
            assert d.n_errors >= 1
            assert {p.kind for p in d.errors} <= {"cobs", "short", "crc", "length"}


def test_each_problem_kind() -> None:
    d = FrameDecoder()
    good = Frame(0, 1, 2, b"xyz")
    body = struct.pack("<BBHH", 0, 1, 2, 5) + b"xyz"  # length field lies
    body += struct.pack("<I", zlib.crc32(body))
    stream = (
        b"\x07ab\x00"  # cobs: code points past the end
        + cobs.encode(b"\x01\x02\x03")
        + b"\x00"  # short
        + cobs.encode(body[:-4] + b"\x00\x00\x00\x00")
        + b"\x00"  # crc
        + cobs.encode(body)
        + b"\x00"  # length
        + good.encode()
    )
    assert d.feed(stream) == [good]
    assert [p.kind for p in d.errors] == ["cobs", "short", "crc", "length"]
    assert d.error_counts["crc"] == 1 and d.frames_decoded == 1


@given(frames, st.integers(1, 50))
def test_truncated_frames_are_dropped(f: Frame, cut: int) -> None:
    w = wire(f)[:-1]
    cut = min(cut, len(w))
    d = FrameDecoder()
    nxt = Frame(0, 9, 9, b"next")
    out = d.feed(w[:-cut] + b"\x00" + nxt.encode())
    assert out == [nxt]
    if len(w) > cut:
        assert d.n_errors == 1


def test_oversize_run_is_discarded_with_bounded_memory() -> None:
    d = FrameDecoder()
    good = Frame(0, 3, 4, b"ok")
    for _ in range(10):
        assert d.feed(b"\x01" * 1000) == []
        assert d.pending <= MAX_ENCODED_LEN
    assert d.discarding and d.n_errors == 0  # reported when the run ends
    assert d.feed(b"\x01" * 10 + b"\x00" + good.encode()) == [good]
    assert [(p.kind, p.nbytes) for p in d.errors] == [("oversize", 10_010)]
    assert not d.discarding


def test_oversize_in_one_chunk_and_across_chunks() -> None:
    d = FrameDecoder()
    good = Frame(0, 3, 4, b"ok")
    assert d.feed(b"\x01" * (MAX_ENCODED_LEN + 1) + b"\x00" + good.encode()) == [good]
    assert d.feed(b"\x01" * 3000) == []
    assert d.feed(b"\x01" * 3000 + b"\x00" + good.encode()) == [good]
    assert [(p.kind, p.nbytes) for p in d.errors] == [
        ("oversize", MAX_ENCODED_LEN + 1),
        ("oversize", 6000),
    ]
    # The longest legal frame still passes, whole or in pieces.
    big = Frame(0, 1, 1, b"\xff" * MAX_PAYLOAD)
    w = big.encode()
    assert len(w) - 1 == MAX_ENCODED_LEN
    assert d.feed(w) == [big]
    assert d.feed(w[:2000]) == [] and d.feed(w[2000:]) == [big]
    # One byte more than the limit, split anywhere, is dropped.
    for cut in (0, 1, 2000, MAX_ENCODED_LEN):
        run = b"\x01" * (MAX_ENCODED_LEN + 1)
        assert d.feed(run[:cut]) == [] and d.feed(run[cut:] + b"\x00" + good.encode()) == [good]
    assert d.error_counts["oversize"] == 6 and d.n_errors == 6


def test_smaller_decoder_limit() -> None:
    d = FrameDecoder(max_payload=256)
    assert d.feed(encode_frame(1, 1, b"a" * 256)) != []
    assert d.feed(encode_frame(1, 1, b"a" * 257)) == []
    assert d.error_counts["oversize"] == 1
    assert d.feed(encode_frame(1, 1, b"a" * 1000)) == []
    assert d.error_counts["oversize"] == 2
    assert d.pending == 0


def test_problem_record_is_bounded() -> None:
    d = FrameDecoder(max_recorded=10)
    d.feed(b"\x05\x00" * 100)
    assert len(d.errors) == 10 and d.error_counts["cobs"] == 100 and d.n_errors == 100


def test_reset_drops_partial_frame() -> None:
    d = FrameDecoder()
    d.feed(encode_frame(1, 1, b"abc")[:-3])
    assert d.pending
    d.reset()
    assert d.pending == 0
    d.feed(b"\x01" * 5000)
    assert d.discarding
    d.reset()
    assert not d.discarding
    f = Frame(PROTOCOL_VERSION, 1, 1, b"abc")
    assert d.feed(f.encode()) == [f]


def test_accepts_bytearray_and_memoryview() -> None:
    f = Frame(PROTOCOL_VERSION, 1, 1, b"abc")
    assert FrameDecoder().feed(bytearray(f.encode())) == [f]
    assert FrameDecoder().feed(memoryview(f.encode())) == [f]
    assert encode_frame(1, 1, bytearray(b"abc")) == f.encode()


def test_examples_in_the_document_decode() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "protocol.md").read_text()

    def hex_after(tag: str) -> list[bytes]:
        found = [ln[len(tag) :].split("(")[0] for ln in doc.splitlines() if ln.startswith(tag)]
        return [bytes.fromhex(h) for h in found]

    wires, bodies = hex_after("wire:"), hex_after("body:")
    assert len(wires) == len(bodies) == 3
    for w, body in zip(wires, bodies, strict=True):
        (f,) = FrameDecoder().feed(w)
        assert f.encode() == w and cobs.decode(w[:-1]) == body
    (probe,) = FrameDecoder().feed(wires[2])
    assert decode_request(probe) == ProbeRequest(1, 32, 7, 2, [0, 0xDEADBEEF])


def _bytewise(d: FrameDecoder, data: bytes) -> list[Frame]:
    """What ``d.feed(data)`` must give: the data a byte at a time (never the one-frame path)."""
    out: list[Frame] = []
    for b in data:
        out += d.feed(bytes([b]))
    return out


def _state(d: FrameDecoder) -> tuple:
    return d.error_counts, [(p.kind, p.nbytes) for p in d.errors], d.pending, d.discarding


def _spoiled(f: Frame, where: int) -> bytes:
    raw = bytearray(wire(f))
    raw[where % (len(raw) - 1)] ^= 0x5A  # never the delimiter
    return bytes(raw)


chunks = st.one_of(
    frames.map(wire),  # a whole frame
    frames.map(lambda f: b"\x00" + wire(f)),  # as senders send it: a delimiter first
    st.tuples(small_frames, st.integers(0, 10_000)).map(lambda t: b"\x00" + _spoiled(*t)),
    st.tuples(small_frames, st.integers(1, 10_000)).map(  # cut short, or its head alone
        lambda t: (b"\x00" + wire(t[0]))[: t[1] % (len(wire(t[0])) + 1)]
    ),
    st.binary(max_size=80),  # junk, delimiters or not
    st.sampled_from([b"", b"\x00", b"\x00\x00", b"\x01\x00", b"\x00\x01\x00", b"\x02\x00\x00"]),
    st.integers(MAX_ENCODED_LEN - 2, MAX_ENCODED_LEN + 3).map(  # around the oversize limit
        lambda n: b"\x00" + b"\x01" * n + b"\x00"
    ),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(chunks, min_size=1, max_size=6))
def test_one_call_per_chunk_gives_what_bytes_one_at_a_time_give(parts: list[bytes]) -> None:
    # feed() takes a shortcut for a chunk that is one whole frame, with or without the
    # delimiter a sender puts first; whatever the chunks, it must give the frames, problems
    # and state of the slow path, fed the same bytes one at a time.
    fast, slow = FrameDecoder(), FrameDecoder()
    for part in parts:
        assert fast.feed(part) == _bytewise(slow, part)
        assert _state(fast) == _state(slow)
    assert fast.frames_decoded == slow.frames_decoded


@pytest.mark.parametrize("lead", [b"", b"\x00"])
def test_a_whole_frame_in_one_chunk(lead: bytes) -> None:
    f = Frame(PROTOCOL_VERSION, 0x84, 513, bytes(range(40)))
    d = FrameDecoder()
    assert d.feed(lead + f.encode()) == [f]
    assert type(d.feed(lead + f.encode())[0]) is Frame
    assert d.feed(lead + _spoiled(f, 3)) == []
    assert d.error_counts["crc"] + d.error_counts["cobs"] == 1 and d.pending == 0
    # a partial frame buffered before: the chunk completes it, however it starts
    raw = f.encode()
    assert d.feed(raw[:5]) == [] and d.feed(raw[5:]) == [f]
    assert d.feed(raw[:5]) == [] and d.feed(b"\x00" + raw) == [f]  # the head was junk
    assert d.error_counts["short"] + d.error_counts["cobs"] + d.error_counts["crc"] == 2
