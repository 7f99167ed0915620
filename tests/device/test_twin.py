"""The twin's command semantics: at most once, clear ERROR replies, never a crash."""

import numpy as np
import pytest

from hilbench import datasets
from hilbench.config import RunConfig
from hilbench.device.twin import DeviceTwin
from hilbench.protocol import data_blob
from hilbench.protocol import messages as m
from hilbench.protocol.frames import PROTOCOL_VERSION, FrameDecoder, encode_frame
from hilbench.session import prepare_model


class Wire:
    """Talks to a twin frame by frame, without a link: for checking its semantics."""

    def __init__(self, twin: DeviceTwin) -> None:
        self.twin = twin
        self.decoder = FrameDecoder()
        self.seq = 0

    def send_raw(
        self,
        frame_type: int,
        payload: bytes,
        seq: int | None = None,
        version: int = PROTOCOL_VERSION,
    ):
        if seq is None:
            self.seq += 1
            seq = self.seq
        wire = encode_frame(frame_type, seq, payload, version=version)
        (frame,) = self.decoder.feed(wire)
        (reply,) = self.decoder.feed(self.twin.handle(frame))
        return reply, m.decode_response(reply)

    def send(self, request, seq: int | None = None):
        return self.send_raw(request.TYPE, request.pack(), seq)[1]

    def hello(self) -> m.HelloResponse:
        return self.send(m.HelloRequest(host_protocol_version=PROTOCOL_VERSION))


def in_session(twin: DeviceTwin) -> Wire:
    wire = Wire(twin)
    wire.hello()
    return wire


@pytest.fixture(scope="module")
def prepared():
    data = datasets.load("digits")
    model = prepare_model(RunConfig(), data)
    x = datasets.quantize_inputs(data.x_train, model.input_scale, model.input_zero_point)
    return model, x, data.y_train


def loaded_twin(prepared) -> tuple[DeviceTwin, Wire]:
    model, x, y = prepared
    twin = DeviceTwin(boot_nonce=1)
    wire = in_session(twin)
    blob = model.blob
    for offset in range(0, len(blob), 1000):
        wire.send(
            m.LoadModelRequest(
                total_len=len(blob), offset=offset, chunk=blob[offset : offset + 1000]
            )
        )
    payload = data_blob.encode(x, y, 10)
    for offset in range(0, len(payload), 4000):
        wire.send(
            m.LoadDataRequest(
                slot=0, total_len=len(payload), offset=offset, chunk=payload[offset : offset + 4000]
            )
        )
    return twin, wire


def test_a_retried_apply_is_applied_once(prepared):
    twin, wire = loaded_twin(prepared)
    req = m.ApplyRequest(
        seeds=np.array([5, 6], np.uint32), coeffs=np.array([30000, -20000], np.int32)
    )
    first = wire.send(req, seq=100)
    retry = wire.send(req, seq=100)  # the answer was lost: the same frame again
    assert first == retry and first.updates_applied == 1
    assert twin.stats["retries_answered_from_cache"] == 1
    crc = wire.send(m.WeightsCrcRequest(), seq=101).crc32
    # A late copy of the APPLY arrives after a newer request: dropped, not applied again.
    frame = FrameDecoder().feed(encode_frame(req.TYPE, 100, req.pack()))[0]
    assert twin.handle(frame) == b""
    assert twin.stats["stale_dropped"] == 1
    assert wire.send(m.WeightsCrcRequest(), seq=102) == m.WeightsCrcResponse(crc, 1)
    assert wire.send(req, seq=103).updates_applied == 2  # a new request is applied


def test_commands_before_a_model_get_no_model(prepared):
    wire = in_session(DeviceTwin())
    reply = wire.send(
        m.ProbeRequest(slot=0, batch_size=4, batch_seed=1, eps=2, seeds=np.array([1], np.uint32))
    )
    assert isinstance(reply, m.ErrorResponse) and reply.code == m.ErrorCode.NO_MODEL
    reply = wire.send(m.WeightsCrcRequest())
    assert reply.code == m.ErrorCode.NO_MODEL


def test_empty_slot_and_out_of_range_eval_are_refused(prepared):
    _twin, wire = loaded_twin(prepared)
    reply = wire.send(m.EvalRequest(slot=2, start=0, count=1))
    assert reply.code == m.ErrorCode.NO_DATA and "slot 2" in reply.message
    n = len(prepared[2])
    reply = wire.send(m.EvalRequest(slot=0, start=n - 1, count=2))
    assert reply.code == m.ErrorCode.BAD_ARGUMENT
    assert wire.send(m.EvalRequest(slot=0, start=n - 1, count=1)).count == 1


def test_malformed_requests_get_errors_and_change_nothing(prepared):
    _twin, wire = loaded_twin(prepared)
    crc = wire.send(m.WeightsCrcRequest()).crc32
    _, reply = wire.send_raw(m.MessageType.APPLY, b"\x05\x00\x01")  # q=5, no seeds
    assert isinstance(reply, m.ErrorResponse)
    _, reply = wire.send_raw(0x42, b"")
    assert reply.code == m.ErrorCode.UNKNOWN_TYPE
    _, reply = wire.send_raw(m.MessageType.HELLO, b"\x00\x00", version=9)
    assert reply.code == m.ErrorCode.BAD_VERSION and f"v{PROTOCOL_VERSION}" in reply.message
    reply = wire.send(m.LoadDataRequest(slot=1, total_len=20, offset=8, chunk=b"x"))
    assert reply.code == m.ErrorCode.BAD_ARGUMENT
    assert wire.send(m.WeightsCrcRequest()).crc32 == crc


def test_a_corrupt_model_blob_is_refused_and_too_large_is_named(prepared):
    model = prepared[0]
    wire = in_session(DeviceTwin(memory_bytes=len(model.blob) - 1))
    blob = model.blob
    reply = wire.send(m.LoadModelRequest(total_len=len(blob), offset=0, chunk=blob[:4000]))
    assert reply.code == m.ErrorCode.MODEL_TOO_LARGE
    wire = in_session(DeviceTwin())
    bad = bytearray(blob)
    bad[len(bad) // 2] ^= 0xFF
    reply = None
    for offset in range(0, len(bad), 4000):
        reply = wire.send(
            m.LoadModelRequest(
                total_len=len(bad), offset=offset, chunk=bytes(bad[offset : offset + 4000])
            )
        )
    assert reply.code == m.ErrorCode.BAD_MODEL


def test_garbage_on_the_wire_is_counted_not_fatal(prepared):
    twin, wire = loaded_twin(prepared)
    decoder = FrameDecoder(on_error=lambda p: twin.bad_frame(p.kind))
    rng = np.random.default_rng(0)
    frames = decoder.feed(rng.integers(0, 256, 5000, dtype=np.uint8).tobytes() + b"\x00")
    for frame in frames:
        twin.handle(frame)  # whatever survives decoding must not crash the twin
    assert sum(v for k, v in twin.stats.items() if k.startswith("bad_frame_")) > 0
    assert wire.send(m.HelloRequest(host_protocol_version=0)).boot_nonce == 1


def test_after_a_reset_every_command_but_hello_gets_no_session(prepared):
    _twin, wire = loaded_twin(prepared)
    nonce = wire.hello().boot_nonce
    assert isinstance(wire.send(m.ResetRequest()), m.ResetResponse)
    reply = wire.send(m.WeightsCrcRequest())
    assert reply.code == m.ErrorCode.NO_SESSION and "HELLO" in reply.message
    assert wire.hello().boot_nonce != nonce
    assert wire.send(m.WeightsCrcRequest()).code == m.ErrorCode.NO_MODEL  # model lost


def test_apply_batch_equals_the_same_applies_one_by_one(prepared):
    rng = np.random.default_rng(4)
    steps = [
        m.ApplyRequest(
            rng.integers(0, 2**32, q, dtype=np.uint32),
            rng.integers(-99999, 99999, q).astype(np.int32),
        )
        for q in (1, 4, 2, 7)
    ]
    _, one = loaded_twin(prepared)
    for step in steps:
        one.send(step)
    _, batch = loaded_twin(prepared)
    assert batch.send(m.ApplyBatchRequest(tuple(steps))).updates_applied == 4
    assert batch.send(m.WeightsCrcRequest()) == one.send(m.WeightsCrcRequest())


def test_apply_probed_uses_the_last_probes_seeds(prepared):
    seeds = np.array([11, 12, 13], np.uint32)
    coeffs = np.array([50000, -30000, 20000], np.int32)
    _, full = loaded_twin(prepared)
    full.send(m.ProbeRequest(slot=0, batch_size=4, batch_seed=1, eps=2, seeds=seeds))
    full.send(m.ApplyRequest(seeds, coeffs))
    _, short = loaded_twin(prepared)
    reply = short.send(m.ApplyProbedRequest(coeffs))
    assert reply.code == m.ErrorCode.BAD_ARGUMENT and "last PROBE" in reply.message
    short.send(m.ProbeRequest(slot=0, batch_size=4, batch_seed=1, eps=2, seeds=seeds))
    assert short.send(m.ApplyProbedRequest(coeffs)).updates_applied == 1
    assert short.send(m.WeightsCrcRequest()) == full.send(m.WeightsCrcRequest())


def test_apply_probe_equals_apply_probed_then_probe(prepared):
    rng = np.random.default_rng(8)
    steps = [rng.integers(0, 2**32, q, dtype=np.uint32) for q in (3, 1, 5, 2)]
    coeffs = [rng.integers(-90000, 90000, len(s)).astype(np.int32) for s in steps]
    probes = [
        m.ProbeRequest(slot=0, batch_size=8, batch_seed=i, eps=2, seeds=s)
        for i, s in enumerate(steps)
    ]
    _, apart = loaded_twin(prepared)
    _, joined = loaded_twin(prepared)
    expected = [apart.send(probes[0])]
    assert joined.send(probes[0]) == expected[0]
    for i in range(1, len(steps)):
        applied = apart.send(m.ApplyProbedRequest(coeffs[i - 1])).updates_applied
        expected.append(apart.send(probes[i]))
        reply = joined.send(m.ApplyProbeRequest(coeffs[i - 1], probes[i]))
        assert reply.updates_applied == applied == i
        np.testing.assert_array_equal(reply.probe.loss_plus, expected[i].loss_plus)
        np.testing.assert_array_equal(reply.probe.loss_minus, expected[i].loss_minus)
    assert joined.send(m.WeightsCrcRequest()) == apart.send(m.WeightsCrcRequest())


def test_apply_probe_checks_both_parts_before_applying_either(prepared):
    seeds = np.array([21, 22], np.uint32)
    _twin, wire = loaded_twin(prepared)
    crc = wire.send(m.WeightsCrcRequest()).crc32
    probe = m.ProbeRequest(slot=0, batch_size=4, batch_seed=1, eps=2, seeds=seeds)
    # no PROBE yet since the model load: nothing to apply along
    reply = wire.send(m.ApplyProbeRequest(np.array([5, 6], np.int32), probe))
    assert reply.code == m.ErrorCode.BAD_ARGUMENT and "last PROBE" in reply.message
    wire.send(probe)
    # q_apply differs from the last PROBE's q
    reply = wire.send(m.ApplyProbeRequest(np.array([5, 6, 7], np.int32), probe))
    assert reply.code == m.ErrorCode.BAD_ARGUMENT
    # the PROBE part names an empty slot: the APPLY part must not run either
    empty = m.ProbeRequest(slot=3, batch_size=4, batch_seed=1, eps=2, seeds=seeds)
    reply = wire.send(m.ApplyProbeRequest(np.array([90000, -90000], np.int32), empty))
    assert reply.code == m.ErrorCode.NO_DATA
    after = wire.send(m.WeightsCrcRequest())
    assert (after.crc32, after.updates_applied) == (crc, 0)


def test_a_retried_apply_probe_is_applied_once(prepared):
    seeds = np.array([31, 32], np.uint32)
    twin, wire = loaded_twin(prepared)
    probe = m.ProbeRequest(slot=0, batch_size=4, batch_seed=1, eps=2, seeds=seeds)
    wire.send(probe)
    request = m.ApplyProbeRequest(np.array([70000, -70000], np.int32), probe)
    first = wire.send(request)
    again = wire.send(request, seq=wire.seq)  # the same frame again: a retry
    assert first == again and first.updates_applied == 1
    assert wire.send(m.WeightsCrcRequest()).updates_applied == 1
    assert twin.stats["retries_answered_from_cache"] == 1


def test_an_internal_failure_is_answered_not_silent(prepared, monkeypatch):
    twin, wire = loaded_twin(prepared)

    def broken(*args, **kwargs):
        raise RuntimeError("NPU fault")

    monkeypatch.setattr(twin.model, "evaluate", broken)
    reply = wire.send(m.EvalRequest(slot=0, start=0, count=4))
    assert reply.code == m.ErrorCode.INTERNAL and "NPU fault" in reply.message
