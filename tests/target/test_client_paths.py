"""The client's second paths: requests built by the message classes when the values are not
plain, the work each request declares for its timeout, the silence diagnosis per port kind,
per-call timeouts and retries, EVAL against the model itself, APPLY_BATCH's frame limit."""

from __future__ import annotations

import time

import numpy as np
import pytest
import serial

from hilbench.client.device_client import DeviceClient, ModelWork
from hilbench.device import DeviceTwin
from hilbench.errors import LinkError
from hilbench.link.faults import FaultSpec, FaultyPort
from hilbench.link.memory import MemoryPort
from hilbench.link.pty_pair import PtyPair
from hilbench.npu.blob import from_blob
from hilbench.protocol import messages as m
from hilbench.zo import loss
from tests.target.test_client_edges import BLOB, COEFFS, SEEDS, Link, X, Y, connect, loaded


def test_numpy_scalars_take_the_message_path_and_send_the_same_bytes():
    plain, link_a, _ = loaded()
    typed, link_b, _ = loaded()
    plain.probe(slot=0, batch_size=8, batch_seed=3, eps=2, seeds=SEEDS)
    typed.probe(
        slot=np.int64(0),
        batch_size=np.int32(8),
        batch_seed=np.uint32(3),
        eps=np.int8(2),
        seeds=SEEDS.astype(np.int64),
    )
    plain.apply(SEEDS, COEFFS)
    typed.apply(SEEDS.tolist(), COEFFS.astype(np.int64))
    for t in (plain, typed):
        t.apply_probe(
            SEEDS, COEFFS, slot=0, batch_size=8, batch_seed=4, eps=2, seeds=np.array([7], np.uint32)
        )
    typed.apply_probe(
        [7],
        [1],
        slot=np.int64(0),
        batch_size=np.int64(8),
        batch_seed=np.int64(5),
        eps=np.int64(2),
        seeds=[8],
    )
    plain.apply_probe(
        np.array([7], np.uint32),
        np.array([1], np.int32),
        slot=0,
        batch_size=8,
        batch_seed=5,
        eps=2,
        seeds=np.array([8], np.uint32),
    )
    a = [(f.type, f.payload) for f in link_a.requests[-4:]]
    b = [(f.type, f.payload) for f in link_b.requests[-4:]]
    assert a == b
    assert [m.MessageType(t).name for t, _ in a] == [
        "PROBE",
        "APPLY_PROBED",
        "APPLY_PROBE",
        "APPLY_PROBE",
    ]
    assert plain.weights_crc() == typed.weights_crc()


def test_each_request_declares_its_work():
    target, _, _ = loaded()
    w = ModelWork(macs=7, trained=5, one_sided=False)
    target.work = w
    probe_req = m.ProbeRequest(slot=0, batch_size=4, batch_seed=1, eps=2, seeds=SEEDS)
    cases = [
        (m.ApplyRequest(q=2, seeds=SEEDS, coeffs=COEFFS), (("apply", 10), ())),
        (m.ApplyProbedRequest(coeffs=COEFFS), (("apply", 10), ())),
        (
            m.ApplyBatchRequest(
                (m.ApplyRequest(SEEDS, COEFFS), m.ApplyRequest(SEEDS[:1], COEFFS[:1]))
            ),
            (("apply", 15), ()),
        ),
        (probe_req, (("probe", 2 * 2 * 4 * 7), ())),
        (
            m.ApplyProbeRequest(coeffs=COEFFS[:1], probe=probe_req),
            (("apply_probe", 112 + 5), (("apply", 5), ("probe", 112))),
        ),
        (m.EvalRequest(slot=0, start=0, count=9), (("eval", 63), ())),
        (m.LoadModelRequest(total_len=10, offset=0, chunk=b"abc"), (("load_model", 4), ())),
        (m.LoadModelRequest(total_len=10, offset=7, chunk=b"abc"), (("load_model_done", 10), ())),
        (m.LoadDataRequest(slot=1, total_len=9, offset=0, chunk=b"ab"), (("load_data", 3), ())),
        (
            m.LoadDataRequest(slot=1, total_len=9, offset=7, chunk=b"ab"),
            (("load_data_done", 9), ()),
        ),
        (m.WeightsCrcRequest(), (("weights_crc", 5), ())),
        (m.InferRequest(slot=0, index=0, input=b""), (("infer", 7), ())),
        (m.ResetRequest(), (("reset", 1), ())),
    ]
    for request, want in cases:
        assert target._work_of(request) == want, request


def test_model_work_keeps_a_given_macs_of_one():
    assert ModelWork.from_blob(BLOB, macs=1).macs == 1
    assert ModelWork.from_blob(BLOB, macs=0).macs == 1


def test_silence_through_injected_faults_names_the_rates():
    link = Link()
    port = FaultyPort(MemoryPort(link.answer), FaultSpec(drop=0.2, corrupt=0.05, truncate=0.05))
    target = DeviceClient(port, name="dut", min_rto=0.001, timeout=0.05, retries=0)
    link.hostile = lambda n, f, reply: b""
    with pytest.raises(LinkError) as e:
        target.hello()
    assert e.value.fix == (
        "the injected faults (--link-faults) damage 30% of frames, so 49% of round trips get "
        "through: lower the fault rates"
    )
    quiet = FaultyPort(MemoryPort(lambda data: b""), FaultSpec(duplicate=0.5))
    with pytest.raises(LinkError) as e:
        DeviceClient(quiet, name="q", timeout=0.05, retries=0).hello()
    assert e.value.fix == "check that the hilbench firmware is running and that this is its address"


def test_silence_on_a_serial_port_names_the_baud_rate():
    pty = PtyPair()
    try:
        port = serial.Serial(pty.path, baudrate=115200, timeout=0)
        target = DeviceClient(port, name="board", timeout=0.05, retries=0)
        with pytest.raises(LinkError) as e:
            target.hello()
        assert e.value.fix == (
            "check that the hilbench firmware is running, that this is its port and that it "
            "talks at 115,200 baud (--baud sets another speed)"
        )
        port.close()
    finally:
        pty.close()


def test_a_call_may_set_its_own_timeout_and_retries():
    link = Link()
    target = DeviceClient(MemoryPort(link.answer), name="dut", timeout=5.0, retries=8)
    link.hostile = lambda n, f, reply: b""
    started = time.monotonic()
    with pytest.raises(LinkError, match=r"after 2 tries"):
        target.hello(timeout=0.05, retries=1)
    assert time.monotonic() - started < 2.0  # not the 5 s default
    assert len(link.requests) == 2


def test_evaluate_equals_the_models_own_accuracy_and_loss():
    target, _, _ = loaded()
    graph, sections = from_blob(BLOB)
    tables = loss.LossTables.from_sections(sections)
    logits = graph.run(X)
    acc = float((np.argmax(logits, axis=-1) == Y).mean())
    mean = float(loss.per_sample_q16(logits, Y, tables).astype(np.int64).sum()) / len(Y) / 65536
    got_acc, got_loss = target.evaluate(0, len(Y), chunk=7)
    assert got_acc == pytest.approx(acc, abs=1e-12) and got_loss == pytest.approx(mean, rel=1e-12)
    assert 0 < acc < 1 and mean > 0


def test_apply_batch_fills_each_frame_to_its_limit():
    twin = DeviceTwin(boot_nonce=1, max_payload=262)  # 260 bytes of steps: ten of 26
    target, link, _ = connect(Link(twin))
    target.load_model(BLOB)
    steps = [
        (np.array([s, s + 1, s + 2], np.uint32), np.array([5, -5, 7], np.int32)) for s in range(30)
    ]
    n = len(link.requests)
    assert target.apply_batch(steps) == 30
    assert [len(m.decode_request(f).steps) for f in link.requests[n:]] == [10, 10, 10]


def test_apply_probe_losses_gives_apply_probes_answer_as_lists_on_every_path():
    """The trainer's per-step call: the same request bytes and the same losses as
    apply_probe, as lists of ints, whether the answer is read at once (the flat decoder) or
    after a lost first answer and a retry (the message path)."""
    plain, link_a, _ = loaded()
    lists, link_b, _ = loaded()
    start = len(link_a.requests)  # after HELLO (its session id is random) and the uploads
    for t in (plain, lists):
        t.probe(slot=0, batch_size=8, batch_seed=3, eps=2, seeds=SEEDS)
    for step, lose in enumerate((False, True, False)):
        if lose:  # the next answer to each is lost once: the retry's answer is a message
            for link in (link_a, link_b):
                first = len(link.requests)
                link.hostile = lambda n, f, reply, first=first: b"" if n == first else reply
        applied_a, answer = plain.apply_probe(SEEDS, COEFFS, 0, 8, 5 + step, 2, SEEDS)
        applied_b, plus, minus = lists.apply_probe_losses(
            SEEDS.tolist(), COEFFS.tolist(), 0, 8, 5 + step, 2, SEEDS.tolist()
        )
        for link in (link_a, link_b):
            link.hostile = None
        assert applied_a == applied_b == step + 1
        assert plus == answer.loss_plus.tolist() and minus == answer.loss_minus.tolist()
        assert all(type(v) is int for v in plus + minus)
    sent = [(f.type, f.payload) for f in link_b.requests[start:]]
    assert [(f.type, f.payload) for f in link_a.requests[start:]] == sent
    assert [t for t, _ in sent].count(m.MessageType.APPLY_PROBE) == 4  # 3 and one retry
