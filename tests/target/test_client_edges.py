"""The client's retries, re-sends, APPLY_PROBED/APPLY_PROBE reuse, chunking and refusals.

Every test drives the real ``DeviceClient`` against the twin behind its real frame endpoint, over
the in-process link; a ``Link`` in between records each request frame and can withhold,
repeat, damage or replace an answer, as a bad cable or a wrong port would.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable

import numpy as np
import pytest

from hilbench.client.device_client import (
    CommandTiming,
    DeviceClient,
    DeviceReset,
    ModelWork,
    describe_bytes,
)
from hilbench.device import DeviceTwin, FrameEndpoint
from hilbench.errors import DeviceError, LinkError
from hilbench.link.memory import MemoryPort
from hilbench.protocol import data_blob, spec
from hilbench.protocol import messages as m
from hilbench.protocol.frames import Frame, FrameDecoder, encode_frame
from tests.link.soak import tiny_workload

BLOB, X, Y = tiny_workload()
SEEDS = np.array([5, 6], np.uint32)
COEFFS = np.array([30_000, -20_000], np.int32)
T = m.MessageType


class Link:
    """Between client and twin: records request frames; ``hostile(n, request, answer)`` may
    return other answer bytes for the n-th request (0-based)."""

    def __init__(self, twin: DeviceTwin | None = None) -> None:
        self.twin = twin or DeviceTwin(boot_nonce=7)
        self.endpoint = FrameEndpoint(self.twin)
        self.requests: list[Frame] = []
        self.raw: list[bytes] = []
        self.hostile: Callable[[int, Frame, bytes], bytes] | None = None
        self._decoder = FrameDecoder()

    def answer(self, data: bytes) -> bytes:
        self.raw.append(data)
        frames = self._decoder.feed(data)
        reply = self.endpoint.feed(data)
        for frame in frames:
            self.requests.append(frame)
            if self.hostile is not None:
                reply = self.hostile(len(self.requests) - 1, frame, reply)
        return reply

    def types(self, since: int = 0) -> list[str]:
        return [T(f.type).name for f in self.requests[since:]]


def connect(
    link: Link | None = None, on_command: object = None, **kw: object
) -> tuple[DeviceClient, Link, list]:
    """A client on ``link`` that said HELLO; its incidents are listed, its command timings go
    to ``on_command`` (HELLO's included)."""
    link = link or Link()
    events: list[tuple[str, str]] = []
    target = DeviceClient(
        MemoryPort(link.answer, name="mem"),
        name="dut",
        min_rto=0.001,
        timeout=kw.pop("timeout", 0.05),
        **kw,
    )
    target.events.incident.subscribe(events.append)  # Incident(kind, detail): a 2-tuple
    if on_command is not None:
        target.events.command.subscribe(on_command)
    target.hello()
    return target, link, events


def loaded(**kw: object) -> tuple[DeviceClient, Link, list]:
    target, link, events = connect(**kw)
    target.load_model(BLOB)
    target.load_data(0, X, Y, 10)
    return target, link, events


def probe(target: DeviceClient, seeds: np.ndarray = SEEDS, batch_seed: int = 1) -> m.ProbeResponse:
    return target.probe(slot=0, batch_size=8, batch_seed=batch_seed, eps=2, seeds=seeds)


# --- retries and re-sends ----------------------------------------------------------------------
def test_a_lost_answer_is_retried_with_the_identical_frame_and_applied_once():
    target, link, events = loaded()
    probe(target)
    start = len(link.requests)
    link.hostile = lambda n, f, reply: b"" if n == start else reply
    assert target.apply(SEEDS, COEFFS) == 1
    assert link.types(start) == ["APPLY_PROBED", "APPLY_PROBED"]
    assert link.raw[-1] == link.raw[-2]  # the very same bytes: same seq, answered from cache
    assert target.weights_crc()[1] == 1
    seq = link.requests[start].seq
    assert [k for k, _ in events] == ["retry"]  # settled by the next answer: no duplicate came
    assert re.fullmatch(rf"APPLY_PROBED seq {seq}: attempt 2, no answer in \d+ ms", events[0][1])
    assert target.stats["retry"] == 1 and target.stats["late"] == 0


def test_a_retry_whose_first_answer_was_only_slow_is_late_not_lost():
    """The first try's answer comes after the retry was sent (a loaded host): both tries are
    answered, so the retry lost nothing; it is reported ``late``, and the limit on retries
    (``events.retry``) is not hit by a slow machine."""
    target, link, events = loaded()
    probe(target)
    start = len(link.requests)
    held: list[bytes] = []

    def slow(n: int, f: Frame, reply: bytes) -> bytes:
        if n == start:  # the answer is late: it comes only with the retry's
            held.append(reply)
            return b""
        if n == start + 1:
            return held[0] + reply  # the late first answer, then the cache's copy
        return reply

    link.hostile = slow
    assert target.apply(SEEDS, COEFFS) == 1
    assert events == []  # not known yet at the answer: the duplicate may still come
    assert target.weights_crc()[1] == 1
    seq = link.requests[start].seq
    assert [k for k, _ in events] == ["late"]
    assert events[0][1].startswith(f"APPLY_PROBED seq {seq}: attempt 2 after ")
    assert "was not needed" in events[0][1]
    assert target.stats["retry"] == 0 and target.stats["late"] == 1


def test_an_unsettled_retry_is_reported_when_the_client_closes():
    target, link, events = loaded()
    start = len(link.requests)
    link.hostile = lambda n, f, reply: b"" if n == start else reply
    target.weights_crc()
    assert events == []
    target.close()
    assert [k for k, _ in events] == ["retry"]


def test_each_request_takes_the_next_sequence_number_mod_2_16():
    link = Link(DeviceTwin(boot_nonce=1, max_payload=256))  # uploads in many frames
    target = DeviceClient(MemoryPort(link.answer), name="dut", min_rto=0.001, timeout=0.05)
    target._seq = 0xFFF8  # the session starts near the wrap: uploads cross it
    target.hello()
    target.load_model(BLOB)
    target.load_data(0, X, Y, 10)
    assert target.weights_crc()[1] == 0
    seqs = [f.seq for f in link.requests]
    assert seqs[0] == 0xFFF9 and 0 in seqs and len(seqs) > 8
    assert all((b - a) % 0x10000 == 1 for a, b in itertools.pairwise(seqs))
    frame = target.reset_frame()
    want = (seqs[-1] + 1) % 0x10000
    assert FrameDecoder().feed(frame) == [Frame(spec.PROTOCOL_VERSION, T.RESET, want, b"")]
    assert frame.startswith(b"\x00")


def test_silence_gives_up_after_retries_plus_one_tries_naming_what_was_seen():
    target, link, events = connect(retries=2)
    link.hostile = lambda n, f, reply: b""
    with pytest.raises(LinkError) as e:
        target.weights_crc()
    text = str(e.value)
    assert re.match(r"no answer from dut to WEIGHTS_CRC after 3 tries in \d+\.\d s ", text)
    assert "(last bytes received: nothing)" in text
    assert "check that the hilbench firmware is running and that this is its address" in text
    assert link.types()[-3:] == ["WEIGHTS_CRC"] * 3 and len({bytes(r) for r in link.raw[-3:]}) == 1
    assert [k for k, _ in events] == ["retry", "retry"]
    assert target.stats["retry"] == 2


def test_text_instead_of_frames_is_named_as_another_program():
    target, link, _ = connect(retries=0)
    link.hostile = lambda n, f, reply: b"login: "
    with pytest.raises(LinkError) as e:
        target.weights_crc()
    assert "(last bytes received: text 'login: ')" in str(e.value)
    assert "bytes arrived but never a hilbench frame" in str(e.value)


def test_a_late_duplicate_answer_is_counted_stale_and_skipped():
    target, link, _ = loaded()
    link.hostile = lambda n, f, reply: reply + reply if f.type == T.WEIGHTS_CRC else reply
    assert target.weights_crc() == target.weights_crc()
    assert target.stats["stale"] >= 1


def test_bad_frame_from_the_device_resends_at_once():
    target, link, events = loaded(timeout=5.0)
    bad = link.twin.bad_frame("crc")
    state = {"done": False}

    def once(n, f, reply):
        if f.type == T.WEIGHTS_CRC and not state["done"]:
            state["done"] = True
            return bad  # the device says it got our request damaged: no answer will come
        return reply

    link.hostile = once
    target.weights_crc()
    assert link.types()[-2:] == ["WEIGHTS_CRC", "WEIGHTS_CRC"]
    kinds = [k for k, _ in events]
    assert kinds == ["resync", "retry"]
    assert events[0][1].startswith("device dropped a damaged frame (")


def test_a_damaged_answer_is_a_host_resync_then_a_retry():
    target, link, events = loaded()
    state = {"done": False}

    def flip(n, f, reply):
        if f.type == T.WEIGHTS_CRC and not state["done"]:
            state["done"] = True
            return reply[:3] + bytes([reply[3] ^ 0x40]) + reply[4:]
        return reply

    link.hostile = flip
    target.weights_crc()
    assert ("resync", "host dropped a damaged frame (crc)") in events
    assert target.stats["retry"] == 1


def test_an_echoing_port_is_named():
    target, link, _ = connect()
    link.hostile = lambda n, f, reply: b"\x00" + f.encode()
    with pytest.raises(LinkError) as e:
        target.weights_crc()
    assert str(e.value).startswith(
        "dut echoes what hilbench sends: the WEIGHTS_CRC request came back unchanged"
    )


def test_an_answer_of_the_wrong_type_is_refused():
    target, link, _ = connect()
    link.hostile = lambda n, f, reply: encode_frame(T.HELLO | 0x80, f.seq, b"")
    with pytest.raises(DeviceError, match=r"dut answered WEIGHTS_CRC with type 0x81"):
        target.weights_crc()


def test_a_malformed_answer_is_refused():
    target, link, _ = connect()
    link.hostile = lambda n, f, reply: encode_frame(T.WEIGHTS_CRC | 0x80, f.seq, b"\x01")
    with pytest.raises(DeviceError, match="dut sent a malformed WEIGHTS_CRC answer: "):
        target.weights_crc()


def test_another_protocol_version_is_refused():
    target, link, _ = connect()
    link.hostile = lambda n, f, reply: encode_frame(f.type | 0x80, f.seq, b"", version=9)
    with pytest.raises(DeviceError, match="dut answers in another protocol version"):
        target.weights_crc()


# --- sessions and reboots ----------------------------------------------------------------------
def test_a_reboot_is_one_reset_event_and_hello_clears_it():
    target, link, events = loaded()
    probe(target)
    link.twin.reset()
    with pytest.raises(DeviceReset) as e:
        target.apply(SEEDS, COEFFS)
    assert str(e.value).startswith("dut rebooted (answered APPLY_PROBED with NO_SESSION)")
    with pytest.raises(DeviceReset):
        target.weights_crc()
    assert [k for k, _ in events] == ["reset"]
    assert events[0][1].startswith("APPLY_PROBED: device reports a reboot (")
    target.hello()
    assert [k for k, _ in events] == ["reset"]  # the nonce change was already told
    assert target.info.boot_nonce == 8
    link.twin.reset()  # a reboot seen only by HELLO's nonce
    target.hello()
    assert events[-1] == ("reset", "boot nonce 0x00000008 -> 0x00000009")
    target.hello()
    assert len(events) == 2


def test_a_device_refusal_names_the_fix():
    target, _, _ = connect()
    with pytest.raises(DeviceError) as e:
        probe(target)
    assert str(e.value).startswith("dut refused PROBE: ")
    assert "the device lost its model (reset?): restart the run" in str(e.value)


def test_protocol_version_of_hello_is_checked():
    link = Link()
    original = link.twin._hello

    def v2():
        reply = original()
        return m.HelloResponse(**{**reply.__dict__, "protocol_version": 2})

    link.twin._hello = v2
    with pytest.raises(DeviceError, match="dut speaks protocol v2, this hilbench speaks v1"):
        connect(link)


# --- APPLY_PROBED and APPLY_PROBE reuse ---------------------------------------------------------
def test_apply_reuses_the_probed_seeds_only_when_they_are_the_same():
    target, link, _ = loaded()
    probe(target)
    n = len(link.requests)
    target.apply(SEEDS, COEFFS)  # the probed seeds: not re-sent
    target.apply(SEEDS, COEFFS)  # the device still holds them, but the host forgot: APPLY
    probe(target)
    target.apply(SEEDS[::-1].copy(), COEFFS)  # other seeds
    probe(target)
    target.hello()  # a new session forgets them
    target.apply(SEEDS, COEFFS)
    probe(target)
    target.load_model(BLOB)
    target.load_data(0, X, Y, 10)
    target.apply(SEEDS, COEFFS)
    kinds = [t for t in link.types(n) if t.startswith("APPLY")]
    assert kinds == ["APPLY_PROBED", "APPLY_PROBED", "APPLY", "APPLY", "APPLY"]


def test_apply_probed_sends_only_the_coefficients():
    target, link, _ = loaded()
    probe(target)
    target.apply(SEEDS, COEFFS)
    frame = link.requests[-1]
    assert frame.type == T.APPLY_PROBED
    assert m.decode_request(frame).coeffs.tolist() == COEFFS.tolist()


def test_without_the_capability_apply_sends_the_seeds():
    link = Link()
    link.twin.capabilities &= ~(spec.CAP_APPLY_PROBED | spec.CAP_APPLY_PROBE)
    target, link, _ = connect(link)
    target.load_model(BLOB)
    target.load_data(0, X, Y, 10)
    probe(target)
    target.apply(SEEDS, COEFFS)
    applied, _ = target.apply_probe(
        SEEDS, COEFFS, slot=0, batch_size=8, batch_seed=2, eps=2, seeds=SEEDS
    )
    assert applied == 2
    assert [t for t in link.types() if t.startswith("APPLY")] == ["APPLY", "APPLY"]


def test_apply_probe_is_one_round_trip_and_equals_apply_then_probe():
    a, link_a, _ = loaded()
    b, _, _ = loaded()
    for t in (a, b):
        probe(t)
    n = len(link_a.requests)
    applied, resp = a.apply_probe(
        SEEDS, COEFFS, slot=0, batch_size=8, batch_seed=2, eps=2, seeds=np.array([9], np.uint32)
    )
    assert link_a.types(n) == ["APPLY_PROBE"]
    b.apply(SEEDS, COEFFS)
    want = probe(b, np.array([9], np.uint32), batch_seed=2)
    assert applied == 1
    assert resp.loss_plus.tolist() == want.loss_plus.tolist()
    assert resp.loss_minus.tolist() == want.loss_minus.tolist()
    n = len(link_a.requests)
    a.apply(np.array([9], np.uint32), COEFFS[:1])  # the APPLY_PROBE's seeds are held now
    assert link_a.types(n) == ["APPLY_PROBED"]


def test_apply_probe_falls_back_when_the_answer_would_not_fit():
    """On a 260-byte device, 31 seeds' PROBE answer fits (259 bytes), their APPLY_PROBE
    answer (15 + 8 * 31 = 263) does not: APPLY_PROBED, then PROBE."""
    twin = DeviceTwin(boot_nonce=1, max_payload=260)
    target, link, _ = connect(Link(twin))
    target.load_model(BLOB)
    target.load_data(0, X, Y, 10)
    fits = np.arange(30, dtype=np.uint32)  # 15 + 8 * 30 = 255 bytes
    too_many = np.arange(31, dtype=np.uint32)
    assert spec.apply_probe_response_size(31) == 263 > 260 >= spec.probe_response_size(31)
    probe(target, fits)
    coeffs = np.ones(30, np.int32)
    n = len(link.requests)
    target.apply_probe(fits, coeffs, slot=0, batch_size=4, batch_seed=1, eps=2, seeds=fits)
    assert link.types(n) == ["APPLY_PROBE"]
    n = len(link.requests)
    target.apply_probe(fits, coeffs, slot=0, batch_size=4, batch_seed=1, eps=2, seeds=too_many)
    assert link.types(n) == ["APPLY_PROBED", "PROBE"]
    assert target.weights_crc()[1] == 2


# --- chunking ------------------------------------------------------------------------------
def test_uploads_are_cut_to_the_devices_frames():
    twin = DeviceTwin(boot_nonce=1, max_payload=256)
    target, link, _ = connect(Link(twin))
    assert target._chunk_size() == 256 - 16
    target.load_model(BLOB)
    models = [f for f in link.requests if f.type == T.LOAD_MODEL]
    assert len(models) == math.ceil(len(BLOB) / 240)
    assert max(len(m.decode_request(f).chunk) for f in models) == 240
    blob = data_blob.encode(X, Y, 10)
    assert target.load_data_blob(2, blob) == len(Y)
    datas = [f for f in link.requests if f.type == T.LOAD_DATA]
    assert len(datas) == math.ceil(len(blob) / 240)


def test_chunk_size_before_hello_and_its_floor():
    target = DeviceClient(MemoryPort(Link().answer), name="x")
    assert target._chunk_size() == spec.MIN_DEVICE_PAYLOAD - 16  # the least any device takes
    target.info = type("I", (), {"max_payload": 40})()
    assert target._chunk_size() == 64


def test_a_data_count_that_does_not_match_is_refused():
    target, link, _ = connect()
    target.load_model(BLOB)
    blob = bytearray(data_blob.encode(X, Y, 10))
    link.hostile = None
    original = link.twin._load_data

    def short(req):
        reply = original(req)
        return m.LoadDataResponse(**{**reply.__dict__, "n_items": reply.n_items - 1})

    link.twin._load_data = short
    with pytest.raises(DeviceError, match="dut did not confirm data slot 3"):
        target.load_data_blob(3, bytes(blob))


def test_evaluate_in_chunks_equals_one_pass():
    target, link, _ = loaded()
    whole = target.evaluate(0, len(Y))
    n = len(link.requests)
    parts = target.evaluate(0, len(Y), chunk=10)
    assert link.types(n) == ["EVAL"] * math.ceil(len(Y) / 10)
    assert parts == pytest.approx(whole, rel=0, abs=1e-12)
    counts = [m.decode_request(f).count for f in link.requests[n:]]
    assert sum(counts) == len(Y) and counts[-1] == len(Y) % 10


def test_apply_batch_packs_as_many_updates_as_fit():
    twin = DeviceTwin(boot_nonce=1, max_payload=256)
    target, link, _ = connect(Link(twin))
    target.load_model(BLOB)
    steps = [(np.array([s, s + 1], np.uint32), COEFFS) for s in range(30)]
    n = len(link.requests)
    assert target.apply_batch(steps) == 30
    sizes = [len(m.decode_request(f).steps) for f in link.requests[n:]]
    assert sizes == [14, 14, 2]  # 2 + 16 bytes a step, 254 bytes a frame
    other, _, _ = connect(Link(DeviceTwin(boot_nonce=1)))
    other.load_model(BLOB)
    for seeds, coeffs in steps:
        other.apply(seeds, coeffs)
    assert target.weights_crc() == other.weights_crc()
    assert target.apply_batch([]) == 0


# --- timings, identity, small parts -----------------------------------------------------------
def test_each_command_reports_host_and_device_time():
    seen: list[CommandTiming] = []
    target, _, _ = loaded()
    target.events.command.subscribe(seen.append)
    probe(target)
    (t,) = seen
    assert t.command == "PROBE" and t.source == "modeled" and t.instructions is None
    assert t.host_s > 0 and t.device_s is not None and t.device_s > 0
    plain = Link(DeviceTwin(boot_nonce=1, modeled_timing=False))
    target2, _, _ = connect(plain)
    target2.load_model(BLOB)
    target2.events.command.subscribe(seen.append)
    target2.weights_crc()
    assert seen[-1].source is None and seen[-1].device_s is None


def test_repr_and_type_checks():
    target = DeviceClient(MemoryPort(Link().answer), name="x")
    assert repr(target) == "<DeviceClient x: no HELLO answered yet>"
    target.hello()
    assert repr(target) == (
        f"<DeviceClient x: hilbench-twin, firmware {target.info.firmware!r}, protocol 1>"
    )
    with pytest.raises(TypeError, match="not a request"):
        target._exchange(m.WeightsCrcResponse(crc32=0, updates_applied=0))


def test_describe_bytes():
    assert describe_bytes(b"") == "nothing"
    assert describe_bytes(b"OK\r\n") == "text 'OK\\r\\n'"
    assert describe_bytes(b"\x00\x01\xff") == "00 01 ff"
    assert describe_bytes(b"abcdefghi\x00") == "text 'abcdefghi\\x00'"  # 90% printable
    assert describe_bytes(b"abcdefgh\x00\x01") == "61 62 63 64 65 66 67 68 00 01"


def test_model_work_from_a_blob_and_from_garbage():
    w = ModelWork.from_blob(BLOB)
    assert w.macs == 64 * 10 and w.trained == 64 * 10 and not w.one_sided
    assert ModelWork.from_blob(BLOB, macs=7).macs == 7
    assert ModelWork.from_blob(b"junk") == ModelWork()
    assert ModelWork.from_blob(b"junk", macs=9) == ModelWork(macs=9)
    assert ModelWork(macs=3).probe_units(2, 5) == 2 * 2 * 5 * 3
    assert ModelWork(macs=3, one_sided=True).probe_units(2, 5) == 3 * 5 * 3
    part, (apply, probe_part) = ModelWork(macs=3, trained=10).apply_probe_parts(2, 4, 5)
    assert apply == ("apply", 20) and probe_part == ("probe", 120) and part == ("apply_probe", 140)


def test_infer_takes_bytes_or_an_array():
    target, _, _ = loaded()
    a = target.infer(input=X[0]).output
    b = target.infer(input=X[0].tobytes()).output
    c = target.infer(slot=0, index=0).output
    assert a.tolist() == b.tolist() == c.tolist()


def test_reset_reboots_the_device():
    target, link, _ = loaded()
    boots = link.twin.boots
    target.reset()
    assert link.twin.boots == boots + 1
    with pytest.raises(DeviceReset):
        target.weights_crc()
