"""The firmware's framing compiled for the host (hilbench/protocol/_framing.c over
device_fw/core/frame.c) against the Python codec: the same wire bytes for every frame, the
same frame out of every read that is one intact frame, and nothing (None: the Python codec
then decides and counts) for any other read."""

from __future__ import annotations

import platform
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hilbench.protocol import frames
from hilbench.protocol.frames import MAX_PAYLOAD, FrameDecoder, encode_frame, wire_frame

# where CI runs (x86-64 Linux with gcc), a missing extension is a failure, not a skip
REQUIRED = sys.platform == "linux" and platform.machine() in ("x86_64", "aarch64")
framing = frames._framing


def test_the_extension_is_built_where_ci_runs() -> None:
    if REQUIRED:
        assert framing is not None, f"hilbench.protocol._framing missing: {frames.NATIVE_ERROR}"
    if framing is None:
        pytest.skip(f"not built on this platform: {frames.NATIVE_ERROR}")


needs_native = pytest.mark.skipif(framing is None, reason="hilbench.protocol._framing not built")
payloads = st.one_of(
    st.binary(max_size=300),
    st.binary(min_size=250, max_size=600).map(lambda b: b.replace(b"\x00", b"\x01")),  # 254 runs
    st.integers(0, MAX_PAYLOAD).map(lambda n: bytes(n)),  # all zeros, up to the limit
)


@needs_native
@settings(max_examples=600, deadline=None)
@given(
    version=st.integers(-2, 258),
    type_=st.integers(-2, 258),
    seq=st.integers(-2, 0x10001),
    payload=payloads,
)
def test_wire_is_the_python_encoders_bytes_or_none(version, type_, seq, payload) -> None:
    native = framing.wire(version, type_, seq, payload)
    try:
        python = b"\x00" + encode_frame(type_, seq, payload, version)
    except frames.FrameError:
        assert native is None
    else:
        assert native == python
        assert wire_frame(type_, seq, payload, version) == python


@needs_native
def test_wire_leaves_a_payload_past_the_limit_or_not_bytes_to_python() -> None:
    assert framing.wire(1, 2, 3, bytes(MAX_PAYLOAD + 1)) is None
    assert framing.wire(1, 2, 3, bytearray(b"ab")) is None
    assert framing.wire(1, 2, 3.0, b"ab") is None
    assert wire_frame(2, 3, bytearray(b"ab")) == b"\x00" + encode_frame(2, 3, b"ab")
    with pytest.raises(frames.FrameError, match="seq 70000"):
        wire_frame(2, 70000, b"")


def _damaged(draw: st.DrawFn, wire: bytes) -> bytes:
    """``wire`` as a link might deliver it: whole, cut, with bytes flipped, extra, or twice."""
    kind = draw(st.sampled_from(["whole", "no lead", "cut", "flip", "extra", "twice", "junk"]))
    if kind == "no lead":
        return wire[1:]
    if kind == "cut":
        return wire[: draw(st.integers(0, len(wire) - 1))]
    if kind == "flip":
        b = bytearray(wire)
        i = draw(st.integers(0, len(b) - 1))
        b[i] = draw(st.integers(0, 255))
        return bytes(b)
    if kind == "extra":
        return wire + draw(st.binary(min_size=1, max_size=8))
    if kind == "twice":
        return wire + wire
    if kind == "junk":
        return draw(st.binary(max_size=40))
    return wire


@st.composite
def reads(draw: st.DrawFn) -> tuple[bytes, int]:
    payload = draw(st.binary(max_size=200))
    wire = b"\x00" + encode_frame(draw(st.integers(0, 255)), draw(st.integers(0, 0xFFFF)), payload)
    return _damaged(draw, wire), draw(st.sampled_from([MAX_PAYLOAD, 64, 16, 0]))


@needs_native
@settings(max_examples=1500, deadline=None)
@given(reads())
def test_one_reads_exactly_the_one_frame_the_python_decoder_reads(case) -> None:
    data, max_payload = case
    got = framing.one(data, max_payload)
    python = FrameDecoder(max_payload=max_payload)
    frames_in = python.feed(data)
    intact = len(frames_in) == 1 and python.pending == 0 and python.n_errors == 0
    rest = data[1:] if len(data) > 1 and data[0] == 0 else data  # after a leading delimiter
    plain = len(rest) > 1 and rest.index(0) == len(rest) - 1 if 0 in rest else False
    if plain and intact:  # one frame, all of the read: the native decoder reads it
        assert got == tuple(frames_in[0]), data.hex()
    else:  # anything else is the Python codec's to read and count
        assert got is None, data.hex()


@needs_native
@settings(max_examples=800, deadline=None)
@given(st.lists(reads(), min_size=1, max_size=6))
def test_a_native_decoder_sees_what_the_python_one_sees(cases) -> None:
    """A stream of reads, whole, damaged or split: frames, problems and counters the same."""
    a, b = FrameDecoder(native=True), FrameDecoder()
    for data, _ in cases:
        assert a.feed(data) == b.feed(data)
        assert (a.pending, a.discarding, a.frames_decoded) == (
            b.pending,
            b.discarding,
            b.frames_decoded,
        )
        assert a.error_counts == b.error_counts
