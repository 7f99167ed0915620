"""The twin's command semantics: at most once, clear ERROR replies, never a crash."""

import numpy as np
import pytest
from devwire import Wire, data, in_session, loaded, model_blob, probe

from hilbench import data as datasets
from hilbench.client.device_client import Target
from hilbench.config import RunConfig
from hilbench.device import DeviceTwin, FrameEndpoint, ThreadedServer
from hilbench.errors import DeviceError
from hilbench.link.pty_pair import PtyPair
from hilbench.link.serial_port import open_port
from hilbench.protocol import data_blob, spec
from hilbench.protocol import messages as m
from hilbench.protocol.frames import FrameDecoder, encode_frame
from hilbench.session import prepare_model


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
    assert reply.code == m.ErrorCode.BAD_ARGUMENT
    assert reply.message == spec.MESSAGES["PROBED_NONE"] % "APPLY_PROBED request"
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
    assert reply.code == m.ErrorCode.BAD_ARGUMENT
    assert reply.message == spec.MESSAGES["PROBED_NONE"] % "APPLY_PROBE request"
    wire.send(probe)
    # q_apply differs from the last PROBE's q
    reply = wire.send(m.ApplyProbeRequest(np.array([5, 6, 7], np.int32), probe))
    assert reply.code == m.ErrorCode.BAD_ARGUMENT
    assert reply.message == "APPLY_PROBE request: 3 coefficients, but the last PROBE had q = 2"
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


def test_a_slot_is_checked_against_the_models_input_and_classes():
    wire = loaded()
    twin = wire.twin
    assert wire.load_data(1, data(classes=12)).complete  # 12 classes, the model has 10
    assert wire.load_data(2, data(item=63)).complete  # 63-byte items, the model takes 64
    crc = wire.crc()
    want = {
        1: (m.ErrorCode.BAD_ARGUMENT, "data slot 1 has 12 classes, the model's output has 10"),
        2: (
            m.ErrorCode.BAD_ARGUMENT,
            "data slot 2 holds items of 63 bytes, the model's input is 64 bytes",
        ),
        3: (m.ErrorCode.NO_DATA, "data slot 3 is empty: send LOAD_DATA first"),
    }
    wire.send(probe())  # seeds for APPLY_PROBE
    for slot, expected in want.items():
        for req in (
            probe(slot=slot),
            m.EvalRequest(slot=slot, start=0, count=1),
            m.ApplyProbeRequest(np.array([9, 9], np.int32), probe(slot=slot)),
            m.InferRequest(slot=slot, index=0),
        ):
            reply = wire.send(req)
            assert (reply.code, reply.message) == expected, req
    assert wire.crc() == crc  # the APPLY part of APPLY_PROBE never ran
    assert twin.stats["internal_errors"] == 0


def test_an_answer_longer_than_max_payload_is_refused_before_anything_runs():
    wire = loaded(DeviceTwin(max_payload=256))
    assert wire.hello().max_payload == 256
    reply = wire.send(probe(q=31))  # 11 + 8 * 31 = 259 > 256
    assert reply.code == m.ErrorCode.BAD_ARGUMENT
    assert reply.message == "PROBE request: the answer would be 259 bytes, max_payload is 256"
    assert isinstance(wire.send(probe(q=30)), m.ProbeResponse)  # 251
    reply = wire.send(m.ApplyProbeRequest(np.ones(30, np.int32), probe(q=31)))
    assert reply.message == "APPLY_PROBE request: the answer would be 263 bytes, max_payload is 256"
    reply = wire.send(m.ApplyProbeRequest(np.ones(30, np.int32), probe(q=30)))  # 255
    assert reply.updates_applied == 1
    # a 300-element output comes from a 256-byte device in two parts, 241 + 59 elements
    g, blob = model_blob(sizes=(8, 300))
    wire.load_model(blob)
    x = np.arange(8, dtype=np.int8)
    first = wire.send(m.InferRequest(input=x.tobytes()))
    assert (first.total, len(first.output), first.timing_source) == (300, 241, 2)
    rest = wire.send(m.InferRequest(out_offset=241))
    assert (rest.total, len(rest.output), rest.duration_ns, rest.timing_source) == (300, 59, 0, 0)
    np.testing.assert_array_equal(np.concatenate([first.output, rest.output]), g.run(x[None])[0])
    reply = wire.send(m.InferRequest(out_offset=300))
    assert reply.message == (
        "INFER request: out_offset 300 is past the end of the model's output (300 elements)"
    )


def test_a_frame_longer_than_max_payload_is_oversize():
    twin = DeviceTwin(max_payload=256)
    endpoint = FrameEndpoint(twin)
    endpoint.feed(b"\x00" + m.HelloRequest(session=1).encode(1))
    fits = m.LoadDataRequest(slot=0, total_len=999, offset=0, chunk=bytes(247))  # 256 bytes
    too_long = m.LoadDataRequest(slot=0, total_len=999, offset=0, chunk=bytes(248))
    (reply,) = FrameDecoder().feed(endpoint.feed(b"\x00" + fits.encode(2)))
    assert m.decode_response(reply).received == 247
    (reply,) = FrameDecoder().feed(endpoint.feed(b"\x00" + too_long.encode(3)))
    assert (reply.seq, m.decode_response(reply)) == (0, m.ErrorResponse(1, 0, "oversize"))
    assert twin.stats["bad_frame_oversize"] == 1 and twin.last_seq == 2


def test_the_endpoint_answers_frames_and_damage_in_stream_order():
    twin = DeviceTwin()
    endpoint = FrameEndpoint(twin)
    hello = b"\x00" + m.HelloRequest(session=1).encode(1)
    crc = b"\x00" + m.WeightsCrcRequest().encode(2)
    damaged = bytearray(b"\x00" + m.WeightsCrcRequest().encode(3))
    damaged[-2] ^= 0x01 if damaged[-2] != 1 else 0x02  # the CRC's last byte, never 0x00
    frames = FrameDecoder().feed(endpoint.feed(hello + bytes(damaged) + crc))
    assert [(f.type, f.seq) for f in frames] == [(0x81, 1), (0xFF, 0), (0xFF, 2)]
    assert m.decode_response(frames[1]).message == "crc"
    assert m.decode_response(frames[2]).code == m.ErrorCode.NO_MODEL


def test_infer_returns_the_models_output_for_an_item_or_an_input():
    g, blob = model_blob()
    wire = loaded(blob=blob)
    payload = data()
    x = np.frombuffer(payload, np.int8, 24 * 64, 8).reshape(24, 64)
    wire.send(probe())
    crc = wire.crc()
    for index in (0, 5, 23):
        expected = g.run(x[index : index + 1])[0]
        reply = wire.send(m.InferRequest(slot=0, index=index))
        assert reply.output.dtype == np.int8 and len(reply.output) == 10
        np.testing.assert_array_equal(reply.output, expected)
        again = wire.send(m.InferRequest(slot=0, index=0, input=x[index].tobytes()))
        np.testing.assert_array_equal(again.output, expected)
        assert reply.timing_source == 2 and reply.duration_ns > 0
    assert wire.crc() == crc  # no state changed: the weights, the count ...
    assert wire.send(m.ApplyProbedRequest(np.array([7, 7], np.int32))).updates_applied == 1
    # ... nor the seeds APPLY_PROBED applies along
    refusals = [
        (
            m.InferRequest(slot=0, index=24),
            "INFER request: index 24 is past the end of data slot 0 (24 items)",
        ),
        (
            m.InferRequest(slot=0, index=0, input=bytes(65)),
            "INFER request: the input would be 65 bytes, the model's input is 64 bytes",
        ),
        (
            m.InferRequest(in_offset=60, input=bytes(5)),
            "INFER request: the input would be 65 bytes, the model's input is 64 bytes",
        ),
        (
            m.InferRequest(in_offset=7, input=bytes(5)),
            "INFER request: input piece at in_offset 7, expected 0 (or 0 to start again)",
        ),
        (
            m.InferRequest(slot=0, index=4, out_offset=2),
            "INFER request: no output of slot 0 item 4 is held to read from out_offset 2: "
            "send INFER with out_offset 0 first",
        ),
    ]
    for req, message in refusals:
        reply = wire.send(req)
        assert (reply.code, reply.message) == (m.ErrorCode.BAD_ARGUMENT, message)
    # the input in three pieces: no output until the last, which runs the pass
    pieces = [
        wire.send(m.InferRequest(in_offset=o, input=x[9, o : o + 30].tobytes()))
        for o in (0, 30, 60)
    ]
    assert [len(p.output) for p in pieces] == [0, 0, 10] and pieces[0].duration_ns == 0
    np.testing.assert_array_equal(pieces[2].output, g.run(x[9:10])[0])
    # another request in between forgets the pieces received so far
    wire.send(m.InferRequest(in_offset=0, input=x[9, :30].tobytes()))
    wire.crc()
    reply = wire.send(m.InferRequest(in_offset=30, input=x[9, 30:].tobytes()))
    assert reply.message == (
        "INFER request: input piece at in_offset 30, expected 0 (or 0 to start again)"
    )
    _, reply = wire.send_raw(0x0C, b"\x01" + bytes(12) + bytes(64))  # input and slot 1
    assert reply.code == m.ErrorCode.BAD_ARGUMENT
    assert reply.message == spec.MESSAGES["INLINE_INPUT"] % ("INFER request", 1, 0)
    assert (
        in_session(DeviceTwin()).send(m.InferRequest(slot=0, index=0)).code == m.ErrorCode.NO_MODEL
    )


def test_a_long_non_ascii_message_is_cut_at_256_bytes_and_the_server_lives_on(monkeypatch):
    twin = DeviceTwin()
    wire = loaded(twin)

    def broken(*args, **kwargs):
        raise RuntimeError("!" + "é" * 300 + "€")

    monkeypatch.setattr(twin.model, "evaluate", broken)
    _, reply = wire.send_raw(0x06, m.EvalRequest(slot=0, start=0, count=1).pack())
    assert reply.code == m.ErrorCode.INTERNAL
    text = "internal error: RuntimeError: !" + "é" * 300 + "€"
    assert reply.message == spec.format_message("%s", (text,))
    assert len(reply.message.encode()) == 256 - 1  # 31 ASCII + 112 two-byte: the 113th is cut
    assert reply.message.endswith("é") and twin.stats["internal_errors"] == 1
    # the same through a served byte stream: the server thread answers the next request
    pty = PtyPair()
    server = ThreadedServer(twin, pty.device_stream())
    try:
        target = Target(open_port(pty.path), name="pty", timeout=2.0, retries=1)
        target.hello()
        with pytest.raises(DeviceError, match="INTERNAL"):
            target.evaluate(0, 1)
        assert target.weights_crc()[1] == 0
        target.close()
    finally:
        server.close()
        pty.close()
