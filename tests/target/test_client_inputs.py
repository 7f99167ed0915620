"""The client's inputs and refusals: arrays checked (never wrapped) before anything is sent,
the per-step fast path, the frame limits met exactly, empty and short uploads, the model's
work cached per blob, and every error naming its fix.

The real ``DeviceClient`` against the twin over the in-process link (test_client_edges.py's
Link)."""

from __future__ import annotations

import numpy as np
import pytest
import serial

from hilbench.client.device_client import DeviceClient, DeviceReset, ModelWork, describe_bytes
from hilbench.device import DeviceTwin
from hilbench.errors import ConfigError, DeviceError, LinkError
from hilbench.link.faults import FaultSpec, FaultyPort
from hilbench.link.memory import MemoryPort
from hilbench.link.pty_pair import PtyPair
from hilbench.link.wrapper import PortWrapper
from hilbench.npu import zoo
from hilbench.npu.blob import to_blob
from hilbench.protocol import messages as m
from hilbench.protocol import spec
from hilbench.protocol.frames import PROTOCOL_VERSION, encode_frame
from hilbench.zo import zocf
from hilbench.zo.loss import LossTables
from tests.target.test_client_edges import BLOB, COEFFS, SEEDS, Link, X, Y, connect, loaded, probe

T = m.MessageType
FIX_BUG = "this is a bug in hilbench or the firmware: please report it with the trace"


# --- arrays: checked, never wrapped ----------------------------------------------------------
@pytest.mark.parametrize(
    ("call", "says"),
    [
        (lambda t: t.apply(SEEDS, np.array([2**31, 1], np.int64)), "APPLY coefficients"),
        (lambda t: t.apply(np.array([-1, 6]), COEFFS), "APPLY seeds"),
        (lambda t: t.apply_batch([(SEEDS, np.array([2**31, 1]))]), "field 'coeffs'"),
        (lambda t: probe(t, np.array([5, 2**32 + 5])), "PROBE seeds"),
        (lambda t: t.apply_probe(SEEDS, [2**40, 0], **PROBE_ARGS), "APPLY coefficients"),
        (lambda t: t.apply_probe([5, -6], COEFFS, **PROBE_ARGS), "APPLY seeds"),
        (lambda t: t.apply(SEEDS, np.array([1, 2, 3])), "'seeds' .2. and 'coeffs' .3. differ"),
        (lambda t: t.apply_probe(SEEDS, COEFFS, **{**PROBE_ARGS, "seeds": [-3]}), "PROBE seeds"),
        (lambda t: t.infer(input=np.full(64, 300)), "INFER input"),
        (lambda t: t.apply(SEEDS, np.array([0.5, 1.0])), "must hold integers"),
    ],
)
def test_out_of_range_values_are_refused_before_anything_is_sent(call, says):
    target, link, _ = loaded()
    probe(target)
    crc = target.weights_crc()
    sent = len(link.requests)
    with pytest.raises(m.MessageError, match=says) as e:
        call(target)
    assert any(w in str(e.value) for w in ("range", "integers", "differ in length"))
    assert len(link.requests) == sent and target.weights_crc() == crc


PROBE_ARGS = {"slot": 0, "batch_size": 8, "batch_seed": 3, "eps": 2, "seeds": SEEDS}


def test_in_range_values_of_any_integer_type_are_the_same_request():
    target, link, _ = loaded()
    out8 = target.infer(input=X[0]).output
    out64 = target.infer(input=X[0].astype(np.int64)).output
    assert out8.tolist() == out64.tolist()
    assert link.requests[-1].payload == link.requests[-2].payload


class Tagged(np.ndarray):
    """An ndarray subclass (as a memmap or a masked array is): not a plain array."""


def test_array_subclasses_take_the_message_path_and_send_the_same_bytes():
    plain, link_a, _ = loaded()
    tagged, link_b, _ = loaded()
    for t, wrap in ((plain, np.asarray), (tagged, lambda a: np.asarray(a).view(Tagged))):
        probe(t, wrap(SEEDS))
        t.apply(wrap(SEEDS), wrap(COEFFS))
        probe(t, wrap(SEEDS))
        t.apply_probe(wrap(SEEDS), wrap(COEFFS), **{**PROBE_ARGS, "seeds": wrap(SEEDS + 1)})
    a = [(f.type, f.payload) for f in link_a.requests]
    b = [(f.type, f.payload) for f in link_b.requests]
    assert a[1:] == b[1:]  # all but HELLO (each client has its own session)
    assert [T(t).name for t, _ in a[-4:]] == ["PROBE", "APPLY_PROBED", "PROBE", "APPLY_PROBE"]


def test_plain_values_take_the_fast_path_without_building_messages(monkeypatch):
    """One PROBE / APPLY_PROBED / APPLY_PROBE a step: plain values are packed directly; the
    message classes (which check and explain odd values) are not built."""
    target, link, _ = loaded()

    def refuse(*args, **kwargs):
        raise AssertionError("built a message on the per-step path")

    for cls in (m.ProbeRequest, m.ApplyProbedRequest, m.ApplyProbeRequest):
        monkeypatch.setattr(cls, "pack", refuse)  # the twin only unpacks them
    probe(target)
    target.apply(SEEDS, COEFFS)
    probe(target)
    target.apply_probe(SEEDS, COEFFS, **PROBE_ARGS)
    assert link.types()[-4:] == ["PROBE", "APPLY_PROBED", "PROBE", "APPLY_PROBE"]
    assert target.weights_crc()[1] == 2


# --- frame limits met exactly ----------------------------------------------------------------
def test_an_apply_probe_answer_that_fits_exactly_is_one_round_trip():
    size = spec.apply_probe_response_size(31)
    twin = DeviceTwin(boot_nonce=1, max_payload=size)
    target, link, _ = connect(Link(twin))
    target.load_model(BLOB)
    target.load_data(0, X, Y, 10)
    seeds = np.arange(31, dtype=np.uint32)
    probe(target, seeds)
    n = len(link.requests)
    target.apply_probe(seeds, np.ones(31, np.int32), **{**PROBE_ARGS, "seeds": seeds})
    assert link.types(n) == ["APPLY_PROBE"]


@pytest.mark.parametrize(("max_payload", "frames"), [(258, [4]), (257, [3, 1])])
def test_apply_batch_fills_a_frame_to_the_last_byte(max_payload, frames):
    """Steps of 2 + 8 q bytes: q = 28, 1, 1, 1 make 256 bytes, a frame's 258 less its u16."""
    target, link, _ = connect(Link(DeviceTwin(boot_nonce=1, max_payload=max_payload)))
    target.load_model(BLOB)
    steps = [(np.arange(q, dtype=np.uint32) + 7 * i, np.ones(q, np.int32)) for i, q in
             enumerate((28, 1, 1, 1))]  # fmt: skip
    n = len(link.requests)
    assert target.apply_batch(steps) == 4
    assert [len(m.decode_request(f).steps) for f in link.requests[n:]] == frames


def test_evaluate_asks_512_items_at_a_time_by_default():
    target, link, _ = connect()
    target.load_model(BLOB)
    reps = -(-600 // len(Y))
    target.load_data(0, np.tile(X, (reps, 1))[:600], np.tile(Y, reps)[:600], 10)
    n = len(link.requests)
    target.evaluate(0, 600)
    counts = [m.decode_request(f).count for f in link.requests[n:]]
    assert counts == [512, 88]


# --- uploads ---------------------------------------------------------------------------------
def test_an_empty_blob_is_refused_before_anything_is_sent():
    target, link, _ = connect()
    n = len(link.requests)
    with pytest.raises(ConfigError) as e:
        target.load_model(b"")
    assert e.value.cause == "the model blob to upload is empty (0 bytes)"
    assert "hilbench.npu.blob.to_blob" in e.value.fix
    with pytest.raises(ConfigError) as e:
        target.load_data_blob(0, b"")
    assert e.value.cause == "the data blob to upload is empty (0 bytes)"
    assert "data_blob.encode" in e.value.fix
    assert link.types(n) == []


def test_an_unconfirmed_data_slot_names_its_fix():
    target, link, _ = connect()
    target.load_model(BLOB)

    def incomplete(n, f, reply):
        if f.type != T.LOAD_DATA:
            return reply
        answer = m.LoadDataResponse(slot=0, received=0, complete=False)
        return encode_frame(T.LOAD_DATA | 0x80, f.seq, answer.pack())

    link.hostile = incomplete
    with pytest.raises(DeviceError) as e:
        target.load_data(0, X, Y, 10)
    assert e.value.cause == "dut did not confirm data slot 0" and e.value.fix == "retry the run"


def test_a_data_blob_too_short_for_its_count_is_the_devices_refusal():
    target, _, _ = connect()
    target.load_model(BLOB)
    with pytest.raises(DeviceError, match="dut refused LOAD_DATA"):
        target.load_data_blob(0, b"\x01\x02")


def test_an_unconfirmed_model_and_a_wrong_crc_name_their_fixes():
    target, link, _ = connect()

    def incomplete(n, f, reply):
        if f.type != T.LOAD_MODEL:
            return reply
        answer = m.LoadModelResponse(received=0, complete=False)
        return encode_frame(T.LOAD_MODEL | 0x80, f.seq, answer.pack())

    link.hostile = incomplete
    with pytest.raises(DeviceError) as e:
        target.load_model(BLOB)
    assert e.value.cause == f"dut did not confirm the model ({len(BLOB)} bytes)"
    assert e.value.fix == (
        "retry; if it persists the link corrupts data: lower the baud rate (--baud)"
    )

    def wrong_crc(n, f, reply):
        if f.type != T.LOAD_MODEL:
            return reply
        answer = m.LoadModelResponse(received=len(BLOB), complete=True, model_crc32=1)
        return encode_frame(T.LOAD_MODEL | 0x80, f.seq, answer.pack())

    link.hostile = wrong_crc
    with pytest.raises(DeviceError) as e:
        target.load_model(BLOB)
    assert e.value.fix == (
        "the link or the device corrupted the upload: retry; if it persists lower the baud rate "
        "(--baud) or check the device's memory"
    )


def other_blob() -> bytes:
    g = zoo.build("mlp", seed=2)
    tables = LossTables.for_scale(float(g.tensors[g.output].qparams.scale[0]))
    return to_blob(g, {"LOSS": tables.to_bytes(), "ZOCF": zocf.build(g).to_bytes()})


def test_given_macs_of_a_blob_hilbench_cannot_read_are_kept_at_least_one():
    assert ModelWork.from_blob(b"junk", macs=1) == ModelWork(macs=1)
    assert ModelWork.from_blob(b"junk", macs=0) == ModelWork(macs=1)
    assert ModelWork.from_blob(b"junk", macs=5) == ModelWork(macs=5)


def test_upload_progress_reaches_a_subscriber():
    calls: list[tuple[int, int]] = []
    link = Link()
    target = DeviceClient(MemoryPort(link.answer), name="dut")
    target.events.upload.subscribe(calls.append)  # Transfer(done, total): a 2-tuple
    target.hello()
    target.load_model(BLOB)
    assert calls[0] == (0, len(BLOB)) and calls[-1] == (len(BLOB), len(BLOB))


def test_retries_must_be_a_whole_number_of_zero_or_more():
    with pytest.raises(ConfigError, match="retries must be a whole number >= 0, got -1") as e:
        DeviceClient(MemoryPort(Link().answer), retries=-1)
    assert e.value.fix == "use e.g. 8"
    target = DeviceClient(MemoryPort(Link().answer))
    with pytest.raises(ConfigError, match=r"got 1\.5"):
        target.hello(retries=1.5)


def test_the_models_work_is_read_once_per_blob_and_given_macs_win():
    target, _, _ = connect()
    other = other_blob()
    target.load_model(BLOB)
    first = target.work
    assert first == ModelWork.from_blob(BLOB)
    target.load_model(BLOB)
    assert target.work is first  # the same blob: not parsed again
    target.load_model(other)
    assert target.work == ModelWork.from_blob(other) != first
    target.load_model(other, macs=7)
    assert target.work.macs == 7 and target.work.trained == ModelWork.from_blob(other).trained
    target.load_model(BLOB)
    assert target.work == first


# --- every refusal names its fix ---------------------------------------------------------------
def refusal(hostile, call=lambda t: t.weights_crc()) -> DeviceError | LinkError:
    target, link, _ = loaded()
    link.hostile = hostile
    with pytest.raises((DeviceError, LinkError)) as e:
        call(target)
    return e.value


def test_protocol_breaches_name_their_fixes():
    echo = refusal(lambda n, f, reply: b"\x00" + f.encode())
    assert echo.fix == (
        "this port is a loopback or a terminal that echoes, not a hilbench device: pick the "
        "board's port (python -m serial.tools.list_ports)"
    )
    wrong = refusal(lambda n, f, reply: encode_frame(T.HELLO | 0x80, f.seq, b""))
    assert wrong.fix == "the firmware and hilbench disagree on the protocol: reflash the firmware"
    version = refusal(lambda n, f, reply: encode_frame(f.type | 0x80, f.seq, b"", version=9))
    assert version.fix == "flash firmware built from this hilbench version"
    malformed = refusal(lambda n, f, reply: encode_frame(f.type | 0x80, f.seq, b"\x01"))
    assert malformed.fix == "reflash the firmware that matches this hilbench version"


def test_an_unknown_error_code_is_reported_as_a_bug():
    def odd(n, f, reply):
        return encode_frame(
            T.ERROR, f.seq, m.ErrorResponse(code=0x7E, request_type=f.type, message="?").pack()
        )

    err = refusal(odd)
    assert err.cause.startswith("dut refused WEIGHTS_CRC: ") and err.fix == FIX_BUG


def test_a_reboot_names_the_recovery():
    target, link, _ = loaded()
    link.twin.reset()
    with pytest.raises(DeviceReset) as e:
        target.weights_crc()
    assert e.value.fix == (
        "hilbench recovers from this by itself during a run; elsewhere, reconnect"
    )


def test_a_device_without_a_session_is_one_reset_even_before_hello():
    link = Link()
    events: list[tuple[str, str]] = []
    target = DeviceClient(MemoryPort(link.answer), name="dut")
    target.events.incident.subscribe(lambda incident: events.append(incident.kind))
    for _ in range(2):
        with pytest.raises(DeviceReset):
            target.weights_crc()
    assert events == ["reset"]


def test_a_broken_port_is_a_link_error_naming_the_command():
    class Unplugged(MemoryPort):
        def write(self, data: bytes) -> int:
            raise serial.SerialException("device reports readiness to read but returned no data")

    target = DeviceClient(Unplugged(Link().answer), name="dut")
    with pytest.raises(LinkError) as e:
        target.hello()
    assert e.value.cause.startswith("the link to dut failed during HELLO: device reports")
    assert e.value.fix == "check the cable or that the device process is still running"


def test_hello_opens_this_clients_session_in_our_protocol_version():
    target, link, _ = connect()
    hello = m.decode_request(link.requests[0])
    assert hello.session == target.session and hello.host_protocol_version == PROTOCOL_VERSION
    other, link2, _ = connect()
    assert m.decode_request(link2.requests[0]).session == other.session != target.session


def test_another_protocol_version_in_hello_names_its_fix():
    link = Link()
    original = link.twin._hello
    link.twin._hello = lambda: m.HelloResponse(**{**original().__dict__, "protocol_version": 2})
    with pytest.raises(DeviceError) as e:
        connect(link)
    assert e.value.fix == (
        "flash firmware built from this hilbench version, or install the matching hilbench"
    )


# --- late, stale and foreign frames --------------------------------------------------------------
def test_every_stale_answer_is_counted():
    target, link, _ = loaded()
    link.hostile = lambda n, f, reply: reply * 3 if f.type == T.WEIGHTS_CRC else reply
    first = target.weights_crc()
    assert target.stats["stale"] == 0  # the late copies are not read yet
    assert target.weights_crc() == first
    assert target.stats["stale"] == 2  # the first answer's two copies, read before the second
    target.weights_crc()
    assert target.stats["stale"] == 4


def test_a_damaged_error_report_on_seq_0_is_skipped():
    junk = encode_frame(T.ERROR, 0, b"\x01")  # an ERROR frame whose payload does not decode
    target, link, _ = loaded()
    link.hostile = lambda n, f, reply: junk + reply if f.type == T.WEIGHTS_CRC else reply
    assert target.weights_crc()[1] == 0
    assert target.stats["stale"] == 1 and target.stats["retry"] == 0


# --- what to do about silence ------------------------------------------------------------------
def test_frames_that_are_never_ours_are_not_called_another_program():
    target, link, _ = loaded(retries=0)
    link.hostile = lambda n, f, reply: encode_frame(T.WEIGHTS_CRC | 0x80, f.seq ^ 0x55, b"")
    with pytest.raises(LinkError) as e:
        target.weights_crc()
    assert e.value.fix == (
        "check that the hilbench firmware is running and that this is its address"
    )
    assert target.stats["stale"] == 1


def test_fault_rates_above_one_in_total_leave_no_round_trip():
    link = Link()
    port = FaultyPort(MemoryPort(link.answer), FaultSpec(drop=0.7, corrupt=0.5))
    link.hostile = lambda n, f, reply: b""
    with pytest.raises(LinkError) as e:
        DeviceClient(port, name="dut", timeout=0.02, retries=0).hello()
    assert e.value.fix.endswith("damage 120% of frames, so 0% of round trips get through: "
                                "lower the fault rates")  # fmt: skip


def test_a_wrapped_serial_port_names_its_baud_rate_a_port_that_only_has_one_does_not():
    pty = PtyPair()
    try:
        wrapped = PortWrapper(serial.Serial(pty.path, baudrate=57600, timeout=0))
        with pytest.raises(LinkError) as e:
            DeviceClient(wrapped, name="board", timeout=0.02, retries=0).hello()
        assert "talks at 57,600 baud" in e.value.fix
        wrapped.port.close()
    finally:
        pty.close()
    quiet = MemoryPort(lambda data: b"")
    quiet.baudrate = 115200  # not a serial port: no baud rate to blame
    with pytest.raises(LinkError) as e:
        DeviceClient(quiet, name="x", timeout=0.02, retries=0).hello()
    assert e.value.fix == "check that the hilbench firmware is running and that this is its address"


def test_only_requests_are_sent():
    target, link, _ = connect()
    for thing in (object(), m.WeightsCrcResponse(crc32=0, updates_applied=0), b"\x07"):
        with pytest.raises(TypeError, match="not a request"):
            target._exchange(thing)
    assert link.types() == ["HELLO"]


def test_a_no_answer_error_shows_the_last_64_bytes_received():
    noise = bytes(range(1, 101))  # no delimiter: never a frame
    target = DeviceClient(MemoryPort(lambda data: noise), name="dut", timeout=0.02, retries=0)
    with pytest.raises(LinkError) as e:
        target.hello()
    assert f"(last bytes received: {describe_bytes(noise[-64:])})" in e.value.cause


def test_an_unnamed_target_is_called_device():
    target = DeviceClient(MemoryPort(lambda data: b""), timeout=0.02, retries=0)
    with pytest.raises(LinkError, match=r"^no answer from device to HELLO after 1 tries"):
        target.hello()


# --- bytes in messages -------------------------------------------------------------------------
def test_describe_bytes_edges():
    assert describe_bytes(b"abcd\x7f") == "61 62 63 64 7f"  # DEL is not printable
    assert describe_bytes(b"ab\t\t") == "text 'ab\\t\\t'"  # tabs are
    assert describe_bytes(b"abcdefghi\xff") == "text 'abcdefghi\ufffd'"  # 90%: text, replaced
