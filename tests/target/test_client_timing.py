"""What the client reports and how long it waits: each command's CommandTiming against the
answer's own fields, the timer fed per kind and size of work (Karn's rule on retried answers),
the waits of each try, and how it polls the port while it waits.

The real ``DeviceClient`` against the twin over the in-process link, as in test_client_edges.py;
where a wait is checked it is the value the client asked for (recorded), not a stopwatch."""

from __future__ import annotations

import dataclasses
import itertools
import time

import pytest

from hilbench.client import device_client as client_module
from hilbench.client.device_client import CommandTiming, DeviceClient
from hilbench.client.rto import RETRIED_MARGIN
from hilbench.errors import LinkError
from hilbench.link.memory import MemoryPort
from hilbench.protocol import messages as m
from hilbench.protocol.frames import FrameDecoder, encode_frame
from tests.target.test_client_edges import BLOB, COEFFS, SEEDS, Link, X, Y, connect, loaded, probe

T = m.MessageType


def answer_of(reply: bytes) -> tuple[object, m.Message]:
    """The frame and the decoded message of a reply's bytes."""
    (frame,) = FrameDecoder().feed(reply)
    return frame, m.decode_response(frame)


def record_waits(target: DeviceClient) -> list[float]:
    """The wait of each try the target starts, as it asks ``_await`` for it."""
    waits: list[float] = []
    inner = target._await

    def spy(seq: int, req_type: int, wait_s: float, seen: object) -> object:
        waits.append(wait_s)
        return inner(seq, req_type, wait_s, seen)

    target._await = spy  # type: ignore[method-assign]
    return waits


# --- CommandTiming ---------------------------------------------------------------------------
def test_each_timing_is_the_answers_own_duration_and_the_host_round_trip():
    seen: list[CommandTiming] = []
    answers: list[m.Message] = []
    link = Link()

    def keep(n, f, reply):
        answers.append(answer_of(reply)[1])
        return reply

    link.hostile = keep
    target, _, _ = connect(link, on_command=seen.append)  # subscribed before HELLO
    target.load_model(BLOB)
    target.load_data(0, X, Y, 10)
    started = time.perf_counter()
    probe(target)
    target.apply(SEEDS, COEFFS)
    target.weights_crc()
    elapsed = time.perf_counter() - started
    assert len(seen) == len(answers)  # one report per answered command, HELLO included
    assert [t.command for t in seen[-3:]] == ["PROBE", "APPLY_PROBED", "WEIGHTS_CRC"]
    for timing, answer in zip(seen, answers, strict=True):  # PROBE and EVAL carry a duration
        if hasattr(answer, "duration_ns"):
            assert timing.source == "modeled" and timing.instructions is None
            assert timing.device_s == answer.duration_ns * 1e-9  # exactly: ns to s
        else:
            assert timing.source is None and timing.device_s is None
    assert seen[-3].device_s > 0  # the PROBE's
    assert all(0 < t.host_s <= elapsed for t in seen[-3:])
    assert sum(t.host_s for t in seen[-3:]) <= elapsed


def test_an_instruction_count_is_kept_as_a_count_not_a_time():
    seen: list[CommandTiming] = []
    target, link, _ = loaded(on_command=seen.append)

    def as_instructions(n, f, reply):
        frame, answer = answer_of(reply)
        counted = dataclasses.replace(
            answer, duration_ns=123_456_789, timing_source=m.TimingSource.INSTRUCTIONS
        )
        return encode_frame(frame.type, frame.seq, counted.pack())

    link.hostile = as_instructions
    probe(target)
    assert seen[-1] == CommandTiming("PROBE", seen[-1].host_s, None, "instr", 123_456_789)
    assert 0 < seen[-1].host_s < 60


def test_a_duration_without_a_source_is_not_reported():
    seen: list[CommandTiming] = []
    target, link, _ = loaded(on_command=seen.append)

    def unsourced(n, f, reply):
        frame, answer = answer_of(reply)
        bare = dataclasses.replace(answer, duration_ns=5_000, timing_source=m.TimingSource.NONE)
        return encode_frame(frame.type, frame.seq, bare.pack())

    link.hostile = unsourced
    probe(target)
    assert seen[-1].command == "PROBE" and seen[-1].device_s is None and seen[-1].source is None


# --- the timer: kinds, sizes, Karn's rule ----------------------------------------------------
def test_each_command_is_timed_under_its_kind_and_units():
    target, _, _ = loaded()
    work = target.work
    timer = target._timer
    probe(target)
    target.apply(SEEDS, COEFFS)  # APPLY_PROBED
    target.apply(SEEDS + 10, COEFFS)  # APPLY with its seeds
    assert set(timer.measured("probe")) == {work.probe_units(2, 8)}
    assert set(timer.measured("apply")) == {work.trained * 2}
    assert timer.measured("probe")[work.probe_units(2, 8)] < target._timer.default_s


def test_a_clean_answer_is_an_rtt_sample_a_retried_one_an_upper_bound():
    target, link, _ = loaded(timeout=0.2)
    timer = target._timer
    target.weights_crc()  # clean: an RTT sample
    (est,) = timer._sizes["weights_crc"].values()
    assert est.srtt is not None
    state = {"drop": True}

    def drop_once(n, f, reply):
        if f.type == T.EVAL and state["drop"]:
            state["drop"] = False
            return b""
        return reply

    link.hostile = drop_once
    waits = record_waits(target)
    target.evaluate(0, 4, chunk=4)  # first EVAL of its kind: waits the default, then retries
    assert waits == [0.2, pytest.approx(0.4)]
    (units, est) = next(iter(timer._sizes["eval"].items()))
    assert est.srtt is None  # Karn: no sample from an answer that needed a retry
    # but the time since the first try (>= the first wait) x RETRIED_MARGIN bounds its size
    assert RETRIED_MARGIN * 0.2 <= timer.measured("eval")[units] < 10.0


class LatePort(MemoryPort):
    """The in-process link whose answers arrive after ``write`` returns (as over a UART), so
    the client waits for each one (an answer already in when the write returns is read at
    once, without a wait)."""

    def __init__(self, answer, name: str = "late") -> None:
        super().__init__(answer, name)
        self._late = b""

    def write(self, data: bytes) -> int:
        self._late += self.answer(bytes(data))
        return len(data)

    def read(self, size: int = 1) -> bytes:
        if not self._rx and self._late:  # the answer comes in while the client waits
            self._rx += self._late
            self._late = b""
        return super().read(size)


def measured() -> tuple[DeviceClient, list[float]]:
    """A target (default timeout 30 s) that has timed PROBE and APPLY_PROBED, not
    APPLY_PROBE, and holds the seeds of its last PROBE; the waits of its next tries (its
    answers from now on come late, so each first try waits)."""
    target, _, _ = loaded(timeout=30.0)
    probe(target)
    target.apply(SEEDS, COEFFS)
    probe(target)
    target.port = LatePort(target.port.answer, name="mem")
    return target, record_waits(target)


def test_an_answer_already_in_is_read_without_a_wait():
    """On the in-process link the answer is in when the write returns: the client decodes it
    at once (no wait begins) into the message the answer's bytes hold, and times it."""
    target, link, _ = loaded(timeout=30.0)
    probe(target)
    replies: list[bytes] = []
    link.hostile = lambda n, f, reply: replies.append(reply) or reply
    timings: list[CommandTiming] = []
    target.events.command.subscribe(timings.append)
    waits = record_waits(target)
    applied, resp = target.apply_probe(
        SEEDS, COEFFS, slot=0, batch_size=8, batch_seed=4, eps=2, seeds=SEEDS
    )
    _, expected = answer_of(replies[-1])
    assert waits == []  # no try waited: the answer was there
    assert (applied, resp) == (expected.updates_applied, expected.probe)
    assert [t.command for t in timings] == ["APPLY_PROBE"]
    assert target._timer.measured("apply_probe")  # sampled as any clean round trip


def test_an_earlier_answer_read_with_the_answer_takes_the_wait_path():
    """A late copy of an earlier answer in front of the answer: both go to the waiting path,
    which counts the copy stale and returns the answer (nothing is decoded twice or lost)."""
    target, link, _ = loaded(timeout=30.0)
    first: list[bytes] = []
    link.hostile = lambda n, f, reply: first.append(reply) or reply
    probe(target)
    ours: list[bytes] = []
    # the first PROBE's answer again, then the answer to this one
    link.hostile = lambda n, f, reply: first[0] + (ours.append(reply) or reply)
    waits = record_waits(target)
    resp = probe(target, batch_seed=2)
    _, expected = answer_of(ours[-1])
    assert len(waits) == 1 and target.stats["stale"] == 1
    assert resp == expected


def test_apply_probe_first_waits_the_sum_of_its_parts():
    """Never measured itself, APPLY_PROBE waits 2 x (APPLY_PROBED's + PROBE's bounds), a few
    milliseconds here, not the default 30 s: through apply_probe and through a request."""
    target, waits = measured()
    target.apply_probe(SEEDS, COEFFS, slot=0, batch_size=8, batch_seed=4, eps=2, seeds=SEEDS)
    target, waits2 = measured()
    request = m.ApplyProbeRequest(
        coeffs=COEFFS,
        probe=m.ProbeRequest(slot=0, batch_size=8, batch_seed=5, eps=2, seeds=SEEDS + 1),
    )
    target._exchange(request)
    assert len(waits) == len(waits2) == 1
    assert waits[0] < 1.0 and waits2[0] < 1.0, (waits, waits2)


def test_timeout_and_min_rto_reach_the_timer():
    target, link, _ = connect(timeout=0.07, retries=2)
    waits = record_waits(target)
    link.hostile = lambda n, f, reply: b""
    with pytest.raises(LinkError, match="after 3 tries"):
        target.weights_crc()  # never measured: the default, doubled per retry
    assert waits == [0.07, pytest.approx(0.14), pytest.approx(0.28)]
    slow = DeviceClient(MemoryPort(Link().answer), name="x", min_rto=0.3)
    slow.hello()
    slow.hello()
    assert min(slow._timer.measured("hello").values()) >= 0.3  # at least min_rto


def test_a_calls_own_timeout_caps_every_try():
    link = Link()
    target = DeviceClient(MemoryPort(link.answer), name="dut", timeout=5.0, retries=8)
    waits = record_waits(target)
    link.hostile = lambda n, f, reply: b""
    with pytest.raises(LinkError, match="after 5 tries"):
        target.hello(timeout=0.01, retries=4)
    assert waits == [0.01] * 5  # not doubled past the cap the call gave


# --- polling the port ----------------------------------------------------------------------
class VirtualTime:
    """The client's clock, moved on only by the port's waits: a loaded host's late wake-ups
    cannot change what the test sees (it stands in for the ``time`` module)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    perf_counter = monotonic

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class PollingPort(MemoryPort):
    """An in-process link that records each read timeout set and each read's size, and that
    sleeps for the timeout when nothing waits (as a serial port would; on ``clock`` if given)."""

    def __init__(self, answer, clock: VirtualTime | None = None) -> None:
        self.clock = clock
        self.timeouts: list[float | None] = []
        self.reads: list[tuple[int, int]] = []  # (size asked, bytes waiting)
        super().__init__(answer)

    @property
    def timeout(self) -> float | None:
        return self._timeout

    @timeout.setter
    def timeout(self, value: float | None) -> None:
        self._timeout = value
        self.timeouts.append(value)

    def read(self, size: int = 1) -> bytes:
        self.reads.append((size, self.in_waiting))
        if not self.in_waiting and self._timeout:
            (self.clock or time).sleep(self._timeout)
        return super().read(size)


def test_polls_shrink_toward_the_deadline_and_reprogram_the_port_only_on_change(monkeypatch):
    clock = VirtualTime()
    monkeypatch.setattr(client_module, "time", clock)
    port = PollingPort(lambda data: b"", clock)
    target = DeviceClient(port, name="quiet")
    with pytest.raises(LinkError):
        target.hello(timeout=0.12, retries=3)
    steps = client_module._POLL_STEPS
    polls = port.timeouts[1:]  # the first is the constructor's 0.0
    assert polls and all(p in steps for p in polls)
    assert polls[0] == max(steps)  # 0.12 s left: the longest poll
    assert all(a != b for a, b in itertools.pairwise(polls))  # set only on change
    # within one try the polls only shrink; a new try starts again from the longest
    tries = [[]]
    for a, b in zip(polls, [*polls[1:], None], strict=True):
        tries[-1].append(a)
        if b is not None and b > a:
            tries.append([])
    assert len(tries) == 4
    assert port.reads and all(size == 1 for size, _ in port.reads)  # nothing came: one byte
    assert all(t == sorted(t, reverse=True) and t[-1] == min(steps) for t in tries)


def test_waiting_bytes_are_read_at_once_and_nothing_waiting_blocks_for_one():
    link = Link()
    port = PollingPort(link.answer)
    target = DeviceClient(port, name="dut", timeout=1.0)
    target.hello()
    target.load_model(BLOB)
    target.weights_crc()
    assert all(size == (waiting or 1) for size, waiting in port.reads)
    assert any(waiting > 1 for _, waiting in port.reads)  # whole answers were read in one go


def test_by_default_nine_tries_wait_5_s_then_doubling_up_to_20_s():
    """docs/protocol.md, "Retries": an unmeasured kind waits the default timeout (5 s); the
    wait of retry n is min(max(timeout, 4 x first), first x 2^n). Every try is answered with
    silence at once here (``_await`` gives up without waiting), so no time passes."""
    target = DeviceClient(MemoryPort(lambda data: b""))
    waits: list[float] = []
    target._await = lambda seq, req_type, wait_s, seen: waits.append(wait_s)  # type: ignore
    with pytest.raises(LinkError, match=r"^no answer from device to HELLO after 9 tries"):
        target.hello()
    assert waits == [5.0, 10.0, 20.0, 20.0, 20.0, 20.0, 20.0, 20.0, 20.0]
