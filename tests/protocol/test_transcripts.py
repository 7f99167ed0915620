"""fixtures/golden/transcripts/*.txt are current, complete, and replayable as their header says.

The replayer here reads a transcript the way device_fw/tests/test_transcripts.c does: configure
a device from the `!` lines, feed each `>` line, compare each answer frame with the `<` lines,
decoded, with the `~` bits masked. Run against a twin that reports no timing (as the SIL), it
shows that the masks cover exactly the timing differences.
"""

import importlib.util
from collections import Counter
from pathlib import Path

import pytest
from cobs import cobs

from hilbench.device import DeviceTwin, FrameEndpoint
from hilbench.protocol import messages as m
from hilbench.protocol import spec
from hilbench.protocol.frames import FrameDecoder

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "golden"
FILES = sorted((GOLDEN / "transcripts").glob("*.txt"))


def _generator():
    s = importlib.util.spec_from_file_location("make_transcripts", GOLDEN / "make_transcripts.py")
    mod = importlib.util.module_from_spec(s)
    s.loader.exec_module(mod)
    return mod


def test_the_committed_transcripts_are_current():
    fresh = _generator().build()
    assert sorted(fresh) == [p.name for p in FILES]
    for path in FILES:
        assert path.read_text() == fresh[path.name], (
            f"{path.name} is stale: run `python fixtures/golden/make_transcripts.py`"
        )
    assert sum(p.stat().st_size for p in FILES) < 500_000


def parse(path: Path):
    """(config, exchanges): exchanges are (sent bytes, [(answer bytes, [(off, len, mask)])])."""
    config, exchanges = {}, []
    for line in path.read_text().splitlines():
        tag, _, rest = line.partition(" ")
        if tag == "!":
            key, _, value = rest.partition(" ")
            config[key] = value
        elif tag == ">":
            exchanges.append((bytes.fromhex(rest), []))
        elif tag == "<":
            if rest:
                exchanges[-1][1].append((bytes.fromhex(rest), []))
        elif tag == "~":
            off, size, mask = rest.split()
            exchanges[-1][1][-1][1].append((int(off), int(size), bytes.fromhex(mask)))
        else:
            assert tag == "#", line
    return config, exchanges


def device(config: dict, **kw) -> DeviceTwin:
    return DeviceTwin(
        boot_nonce=int(config["boot_nonce"], 16),
        device_id=config["device_id"],
        firmware=config["firmware"],
        arena_bytes=int(config["arena_bytes"]),
        max_payload=int(config["max_payload"]),
        boot_reason=None,  # the C test port says no boot banner (device_fw/tests/port_capture.c)
        restart_reason=None,
        **kw,
    )


def _frames(answer: bytes) -> list[bytes]:
    return [b"\x00" + p + b"\x00" for p in answer.split(b"\x00") if p]


def same(expected: bytes, got: bytes, masks) -> bool:
    """The replay rule: byte-identical, or with masks, decoded bodies equal outside them."""
    if not masks:
        return expected == got
    a, b = bytearray(cobs.decode(expected[1:-1])), bytearray(cobs.decode(got[1:-1]))
    if len(a) != len(b) or FrameDecoder().feed(got) == []:  # the device's own CRC must hold
        return False
    for off, size, mask in masks:
        for i in range(size):
            a[off + i] &= ~mask[i] & 0xFF
            b[off + i] &= ~mask[i] & 0xFF
    return a[:-4] == b[:-4]


def replay(path: Path, **kw) -> int:
    config, exchanges = parse(path)
    endpoint = FrameEndpoint(device(config, **kw))
    for n, (sent, answers) in enumerate(exchanges):
        got = _frames(endpoint.feed(sent))
        assert len(got) == len(answers), (path.name, n, sent.hex())
        for (want, masks), frame in zip(answers, got, strict=True):
            assert same(want, frame, masks), (path.name, n, want.hex(), frame.hex())
    return len(exchanges)


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_a_device_without_timing_replays_every_transcript(path):
    assert replay(path, modeled_timing=False) > 10


def test_the_masks_hide_timing_and_nothing_else():
    _, exchanges = parse(GOLDEN / "transcripts" / "mlp.txt")
    masked = [(w, masks) for _, answers in exchanges for w, masks in answers if masks]
    assert len(masked) >= 8
    for want, masks in masked:
        body = bytearray(cobs.decode(want[1:-1]))
        for off, _, mask in masks:  # a flipped masked bit: still the same answer
            body[off] ^= mask[0] & -mask[0]
        assert same(want, b"\x00" + cobs.encode(_recrc(body)) + b"\x00", masks)
        body[6] ^= 0x01  # the first payload byte is never timing
        assert not same(want, b"\x00" + cobs.encode(_recrc(body)) + b"\x00", masks)


def _recrc(body: bytearray) -> bytes:
    import zlib

    return bytes(body[:-4]) + zlib.crc32(bytes(body[:-4])).to_bytes(4, "little")


def test_the_transcripts_cover_every_request_error_code_and_frame_problem():
    sent_types, codes, kinds = Counter(), Counter(), Counter()
    for path in FILES:
        _, exchanges = parse(path)
        for sent, answers in exchanges:
            for frame in FrameDecoder().feed(sent):
                sent_types[frame.type] += 1
            for want, _ in answers:
                (frame,) = FrameDecoder().feed(want)
                reply = m.decode_response(frame)
                if isinstance(reply, m.ErrorResponse):
                    codes[spec.ErrorCode(reply.code)] += 1
                    if reply.code == spec.ErrorCode.BAD_FRAME:
                        kinds[reply.message] += 1
    assert all(sent_types[t] > 0 for t in range(spec.FIRST_REQUEST, spec.LAST_REQUEST + 1))
    assert set(codes) == set(spec.ErrorCode) - {spec.ErrorCode.INTERNAL}
    assert set(kinds) == {"cobs", "short", "crc", "length", "oversize"}
    assert all(codes[c] >= 2 for c in codes), codes
