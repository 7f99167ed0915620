"""Fuzz: random bytes never crash the decoder and never grow its buffer past the limit."""

from __future__ import annotations

import contextlib
import random

import numpy as np

from hilbench.protocol.frames import (
    MAX_ENCODED_LEN,
    PROTOCOL_VERSION,
    Frame,
    FrameDecoder,
    encode_frame,
)
from hilbench.protocol.messages import REQUESTS, RESPONSES, MessageError, decode_request


def test_random_bytes() -> None:
    rng = np.random.default_rng(20240601)
    data = rng.integers(0, 256, size=200_000, dtype=np.uint8).tobytes()
    d = FrameDecoder()
    pos = 0
    delivered: list[Frame] = []
    while pos < len(data):
        step = int(rng.integers(1, 2048))
        delivered += d.feed(data[pos : pos + step])
        assert d.pending <= MAX_ENCODED_LEN
        pos += step
    # Anything delivered passed the CRC: with random input that is (almost surely) nothing.
    assert len(delivered) <= 1
    assert d.n_errors > 0


def test_random_bytes_without_zeros_stay_bounded() -> None:
    rng = np.random.default_rng(7)
    data = rng.integers(1, 256, size=200_000, dtype=np.uint8).tobytes()
    d = FrameDecoder()
    for i in range(0, len(data), 1000):
        assert d.feed(data[i : i + 1000]) == []
        assert d.pending <= MAX_ENCODED_LEN
    assert d.discarding and d.n_errors == 0
    f = Frame(PROTOCOL_VERSION, 1, 1, b"\x00\x00")
    assert d.feed(b"\x00" + f.encode()) == [f]
    assert [(p.kind, p.nbytes) for p in d.errors] == [("oversize", 200_000)]


def test_random_payloads_for_every_type_never_crash_decode() -> None:
    rng = random.Random(5)
    for t in [*REQUESTS, *RESPONSES, 0, 0x42]:
        for _ in range(300):
            n = rng.choice([0, 1, 2, 5, 9, 11, 15, 40, rng.randrange(300)])
            payload = rng.randbytes(n)
            with contextlib.suppress(MessageError):
                decode_request(Frame(PROTOCOL_VERSION, t, 0, payload))


def test_valid_frames_survive_noise_bursts() -> None:
    rng = random.Random(11)
    d = FrameDecoder()
    sent = [
        Frame(PROTOCOL_VERSION, rng.randrange(256), i, rng.randbytes(rng.randrange(200)))
        for i in range(300)
    ]
    out: list[Frame] = []
    for f in sent:
        noise = rng.randbytes(rng.randrange(50))
        out += d.feed(noise + b"\x00" + encode_frame(f.type, f.seq, f.payload))
    assert [f for f in out if f in sent] == sent
