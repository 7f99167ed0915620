"""The device processing order (docs/protocol.md), step by step, with numbers."""

import numpy as np
import pytest
from devwire import Wire, in_session, loaded, probe

from hilbench.device import DeviceTwin
from hilbench.protocol import messages as m
from hilbench.protocol import spec
from hilbench.protocol.frames import FrameDecoder, encode_frame

APPLY = int(m.MessageType.APPLY)
HELLO = int(m.MessageType.HELLO)
CRC = int(m.MessageType.WEIGHTS_CRC)


def test_a_malformed_request_without_a_session_is_no_session_not_bad_length():
    wire = Wire(DeviceTwin())
    for frame_type, payload in [(APPLY, b"\x05\x00\x01"), (CRC, b"xx"), (0x0C, b"")]:
        _, reply = wire.send_raw(frame_type, payload)
        assert reply.code == m.ErrorCode.NO_SESSION, reply
        assert reply.message == spec.MESSAGES["NO_SESSION"]
        assert reply.request_type == frame_type


def test_a_malformed_late_copy_is_dropped_and_leaves_last_seq_and_the_cache():
    wire = loaded()
    twin = wire.twin
    wire.send(m.WeightsCrcRequest(), seq=500)
    cached = twin.cached
    # a malformed frame with an older seq: a late copy, whatever its payload
    answer, reply = wire.send_raw(APPLY, b"\x05\x00\x01", seq=499)
    assert (answer, reply) == (b"", None)
    assert twin.last_seq == 500 and twin.cached == cached
    assert twin.stats["stale_dropped"] == 1 and twin.stats["error_BAD_LENGTH"] == 0


def test_last_seq_moves_before_the_length_and_range_checks():
    wire = loaded()
    twin = wire.twin
    _, reply = wire.send_raw(APPLY, b"\x05\x00\x01", seq=700)  # q=5, no seeds
    assert reply.code == m.ErrorCode.BAD_LENGTH
    assert reply.message == spec.format_message(
        spec.MESSAGES["SHORT"], ("APPLY request", 3, "seeds", 20, 2)
    )
    assert twin.last_seq == 700
    _, reply = wire.send_raw(APPLY, b"\x00\x00", seq=701)  # q=0: a range error
    assert reply.code == m.ErrorCode.BAD_ARGUMENT and twin.last_seq == 701
    assert reply.message == "APPLY request: field 'q' = 0 out of range 1..510"
    # a valid request that reuses seq 701 (not the cached frame: its CRC differs) is stale
    assert wire.send(m.WeightsCrcRequest(), seq=701) is None
    assert wire.crc()[1] == 0  # nothing was applied by any of them


def test_every_answer_replaces_the_cache_and_a_retry_is_answered_byte_for_byte():
    wire = loaded()
    twin = wire.twin
    req = m.ApplyRequest(np.array([5], np.uint32), np.array([70000], np.int32))
    first, reply = wire.send_raw(req.TYPE, req.pack(), seq=40)
    assert reply.updates_applied == 1 and twin.cached == first
    again, _ = wire.send_raw(req.TYPE, req.pack(), seq=40)
    assert again == first and twin.stats["retries_answered_from_cache"] == 1
    assert wire.crc()[1] == 1  # applied once
    # an ERROR replaces the cache too: the APPLY's retry is now a late copy, dropped
    err, reply = wire.send_raw(0x42, b"", seq=42)
    assert reply.code == m.ErrorCode.UNKNOWN_TYPE and twin.cached == err
    assert reply.message == "unknown request type 0x42"
    assert twin.last_seq == 41  # step 3 comes before step 5: last_seq stays
    assert wire.send_raw(req.TYPE, req.pack(), seq=40) == (b"", None)
    assert wire.send(m.WeightsCrcRequest(), seq=42).updates_applied == 1


def test_the_cache_matches_seq_type_and_crc_not_seq_alone():
    wire = loaded()
    a = m.ApplyRequest(np.array([5], np.uint32), np.array([70000], np.int32))
    b = m.ApplyRequest(np.array([6], np.uint32), np.array([70000], np.int32))
    wire.send(a, seq=90)
    # same seq, same type, another payload (so another CRC): not a retry, and not newer
    assert wire.send(b, seq=90) is None
    assert wire.crc()[1] == 1


def test_bad_version_is_answered_in_the_devices_version_and_cached():
    twin = DeviceTwin()
    wire = Wire(twin)
    raw, reply = wire.send_raw(HELLO, b"\x00\x00", seq=3, version=0)
    (frame,) = FrameDecoder().feed(raw)
    assert frame.version == spec.PROTOCOL_VERSION and frame.seq == 3
    assert reply.code == m.ErrorCode.BAD_VERSION and reply.request_type == HELLO
    assert reply.message == "device speaks protocol version 1, frame is version 0"
    assert twin.cached == raw
    assert twin.session is None  # nothing else happened


def test_unknown_types_come_before_the_session_check():
    wire = Wire(DeviceTwin())
    for t in (0x00, spec.LAST_REQUEST + 1, 0x80, 0x84, 0xFE, 0xFF):
        _, reply = wire.send_raw(t, b"")
        assert reply.code == m.ErrorCode.UNKNOWN_TYPE and reply.request_type == t
        assert reply.message == f"unknown request type 0x{t:02x}"


def test_hello_with_a_bad_length_touches_neither_session_nor_last_seq():
    twin = DeviceTwin()
    wire = Wire(twin)
    _, reply = wire.send_raw(HELLO, b"\x01\x00\xfe\xca\xad", seq=9)
    assert reply.code == m.ErrorCode.BAD_LENGTH
    assert twin.session is None and twin.last_seq == 0
    assert wire.send(m.WeightsCrcRequest()).code == m.ErrorCode.NO_SESSION
    wire = in_session(twin, seq=100)
    _, reply = wire.send_raw(HELLO, b"\x01\x00\xfe\xca\xad\x0b\x00", seq=300)  # 7 bytes
    assert reply.code == m.ErrorCode.BAD_LENGTH
    assert twin.last_seq == 101 and twin.session == wire.session


def test_a_late_hello_copy_is_dropped_a_new_token_always_heard():
    twin = DeviceTwin()
    wire = in_session(twin, seq=1000)  # HELLO at seq 1001
    wire.send(m.WeightsCrcRequest())  # 1002
    # the first HELLO again: its token, an old seq (its CRC differs from the cached frame's)
    hello = m.HelloRequest(session=wire.session)
    assert wire.send(hello, seq=1001) is None
    assert twin.last_seq == 1002 and twin.stats["stale_dropped"] == 1
    # a restarted host: another token, a seq far in the past, is a new session
    reply = wire.send(m.HelloRequest(session=0xABCD), seq=5)
    assert isinstance(reply, m.HelloResponse)
    assert twin.session == 0xABCD and twin.last_seq == 5
    # the same token with a newer seq is answered again (the session stays)
    assert isinstance(wire.send(m.HelloRequest(session=0xABCD), seq=6), m.HelloResponse)


def test_hello_describes_the_device_and_its_options():
    twin = DeviceTwin(boot_nonce=0xFFFFFFFF, device_id="dev-7", firmware="fw 1", max_payload=512)
    reply = in_session(twin).hello()
    assert reply == m.HelloResponse(
        protocol_version=1,
        max_payload=512,
        boot_nonce=0xFFFFFFFF,
        capabilities=0b1111111110,  # bits 1-9: modeled timing ... LOAD_STAGE, HEAD_GRAD
        device_id="dev-7",
        firmware="fw 1",
    )
    assert reply.capabilities & spec.CAP_INFER
    twin.reset()
    assert in_session(twin).hello().boot_nonce == 0  # the k-th boot: nonce + k mod 2^32
    with pytest.raises(ValueError, match=r"max_payload 100 is outside 256\.\.4096"):
        DeviceTwin(max_payload=100)
    with pytest.raises(ValueError, match="device_id"):
        DeviceTwin(device_id="x" * 65)


def test_a_request_refused_by_state_still_moves_last_seq():
    wire = in_session(DeviceTwin())
    reply = wire.send(probe(), seq=60)
    assert reply.code == m.ErrorCode.NO_MODEL and wire.twin.last_seq == 60
    assert reply.message == "no model loaded: send LOAD_MODEL first"


def test_garbage_on_the_wire_is_counted_not_fatal():
    wire = loaded()
    twin = wire.twin
    decoder = FrameDecoder(on_error=lambda p: twin.bad_frame(p.kind))
    rng = np.random.default_rng(0)
    frames = decoder.feed(rng.integers(0, 256, 5000, dtype=np.uint8).tobytes() + b"\x00")
    for frame in frames:
        twin.handle(frame)  # whatever survives decoding must not crash the twin
    assert sum(v for k, v in twin.stats.items() if k.startswith("bad_frame_")) > 0
    assert twin.stats["internal_errors"] == 0
    assert wire.hello().boot_nonce == 1


def test_encode_of_every_answer_starts_with_a_delimiter():
    wire = loaded()
    raw, _ = wire.send_raw(CRC, b"")
    assert raw[0] == 0 and raw[-1] == 0 and raw[1:-1].count(0) == 0
    assert wire.twin.bad_frame("crc") == b"\x00" + encode_frame(
        0xFF, 0, m.ErrorResponse(code=1, request_type=0, message="crc").pack()
    )
