"""The host's client for one device: every command is a timed, traced round trip.

``DeviceClient`` speaks docs/protocol.md over any pyserial port. It numbers requests, waits for the
answer with the same sequence number, turns ERROR frames into DeviceError and silence into
LinkError (naming the port, the command and the bytes seen), and reports each command's
host wall-clock time and the device's own duration with its source.
"""

from __future__ import annotations

import bisect
import secrets
import time
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import serial

from hilbench.client import device_log
from hilbench.client.device_log import describe_bytes
from hilbench.client.events import ClientEvents, Incident, Transfer
from hilbench.client.rto import PEAK_HALF_LIFE_S, Part, WorkTimer
from hilbench.errors import ConfigError, DeviceError, LinkError
from hilbench.link.faults import FaultSpec
from hilbench.link.wrapper import PortWrapper
from hilbench.protocol import data_blob, spec
from hilbench.protocol import messages as m
from hilbench.protocol.frames import PROTOCOL_VERSION, Frame, FrameDecoder, wire_frame

TIMING_SOURCES = {0: None, 1: "device", 2: "modeled", 3: "instr"}  # (TimingSource members too)
INSTRUCTIONS = "instr"  # executed instructions (QEMU -icount): a count, never seconds
_POLL_STEPS = (0.001, 0.005, 0.02, 0.05)  # read timeouts: few values, so few tty reprograms
_SEEN_BYTES = 64  # the last bytes received that a "no answer" error shows
_LOG = int(spec.MessageType.LOG)  # a device's LOG frame (seq 0): its own words, never an answer
_ERROR = int(spec.MessageType.ERROR)
_U32, _I32 = np.dtype(np.uint32), np.dtype(np.int32)  # the wire's seeds and coefficients
# APPLY_PROBE's answer size, a + b q (spec's layout), derived once: it is checked every step
_APPLY_PROBE_R_BASE = spec.apply_probe_response_size(0)
_APPLY_PROBE_R_PER_SEED = spec.apply_probe_response_size(1) - _APPLY_PROBE_R_BASE
_PROBE, _APPLY_PROBED, _APPLY_PROBE = (  # plain ints: compared and packed on every step
    int(m.MessageType.PROBE),
    int(m.MessageType.APPLY_PROBED),
    int(m.MessageType.APPLY_PROBE),
)


def _probe_answer(applied: int, answer: m.ProbeResponse, lists: bool) -> tuple:
    """``apply_probe_losses``' answer: (applied, L+, L-) as lists, or (applied, answer)."""
    if lists:
        return applied, answer.loss_plus.tolist(), answer.loss_minus.tolist()
    return applied, answer


def _answer_decoder(req_type: int) -> Callable[[bytes], object] | None:
    """The generated decoder of the answer to a request type (None: its answers always take
    the checks of ``DeviceClient._await``)."""
    answer = req_type | spec.RESPONSE_BIT
    return None if answer in (req_type, _LOG, _ERROR) else m.fast_response_decoder(answer)


#: request type -> the decoder of its answer's payload, for answers read straight after writing
_FAST_ANSWERS = {t: d for t in m.REQUESTS if (d := _answer_decoder(t)) is not None}
_NAMES = {t: m.type_name(t) for t in m.REQUESTS}  # request type -> its name, looked up once
_PROBE_VALUES = m.apply_probe_values  # an APPLY_PROBE answer's values, the losses as lists
_ProbeValues = m.ApplyProbeValues
UPLOAD_FIX = {
    "model blob": "pass a model blob (hilbench.npu.blob.to_blob builds one)",
    "data blob": "pass a data blob (hilbench.protocol.data_blob.encode, or DeviceClient.load_data)",
}
FRAME_OVERHEAD = 16  # header, CRC, COBS and delimiter bytes a chunk must leave room for
#: ``progress(acknowledged, total)``: bytes of a blob the device has acknowledged, called with
#: 0 before the first chunk and once after each chunk's answer (the board loader's argument).
UploadProgress = Callable[[int, int], None]


class CommandTiming(NamedTuple):  # a tuple: built on every round trip
    """One command's cost: host round trip, and the device's own duration if it gave one."""

    command: str
    host_s: float
    device_s: float | None
    source: str | None  # "device" or "modeled" for device_s; "instr" for instructions
    instructions: int | None = None  # executed instructions (QEMU -icount), not a time


_new_timing = tuple.__new__  # a CommandTiming of known fields, without NamedTuple's __new__


class InferResult(NamedTuple):
    """What :meth:`DeviceClient.infer` returns: the whole output, however many INFER frames
    carried it, and the forward pass's time."""

    output: np.ndarray  # int8, every element of the model's output tensor
    duration_ns: int
    timing_source: m.TimingSource


@dataclass(frozen=True)
class ModelWork:
    """What one unit of each command costs on the device, from the loaded model: ``macs`` of
    one forward pass, ``trained`` elements an update touches, whether PROBE is one-sided (q+1
    passes per item instead of 2q). 1 = unknown: work is then counted in passes / q."""

    macs: int = 1
    trained: int = 1
    one_sided: bool = False

    @classmethod
    def from_blob(cls, blob: bytes, macs: int | None = None) -> ModelWork:
        """Read the model blob (the host's parser); unknown parts stay 1 if it is not one."""
        from hilbench.errors import ModelError
        from hilbench.npu.blob import from_blob
        from hilbench.npu.cost import forward_macs
        from hilbench.zo import zocf

        try:
            graph, sections = from_blob(blob)
            zo = zocf.ZoConfig.from_bytes(sections["ZOCF"]) if "ZOCF" in sections else None
            zo = zo or zocf.ZoConfig()
            trained = sum(t.size for t in zocf.resolve(zo, graph))
            return cls(
                macs=max(1, int(macs if macs is not None else forward_macs(graph))),
                trained=int(trained),  # >= 1: resolve() refuses a ZOCF that trains nothing
                one_sided=bool(zo.one_sided),
            )
        except (ModelError, ValueError, KeyError):  # the device will say what is wrong
            return cls(macs=max(1, int(macs)) if macs is not None else 1)

    def probe_units(self, q: int, batch_size: int) -> int:
        """Forward passes of a PROBE times the MACs of one."""
        passes = q + 1 if self.one_sided else 2 * q
        return passes * batch_size * self.macs

    def apply_probe_parts(self, q_apply: int, q: int, batch_size: int) -> tuple[Part, tuple]:
        """APPLY_PROBE's work, and the two parts whose bounds add up to one before it is
        measured itself (the APPLY_PROBED and the PROBE it combines)."""
        apply = ("apply", self.trained * q_apply)
        probe = ("probe", self.probe_units(q, batch_size))
        return ("apply_probe", probe[1] + apply[1]), (apply, probe)


@dataclass(frozen=True)
class DeviceInfo:
    protocol_version: int
    max_payload: int
    boot_nonce: int
    device_id: str
    firmware: str
    capabilities: int = 0


class Stager:
    """A debugger's way into the device's memory for staged uploads (docs/protocol.md,
    "Staged uploads"): ``write(address, data, progress)`` puts ``data`` at ``address`` of the
    device's memory (QEMU's GDB stub, a board's probe: hilbench/board/stage.py), calling
    ``progress(bytes_written)`` now and then. ``name`` says which, in messages."""

    name = "a debugger"

    def write(
        self, address: int, data: bytes, progress: Callable[[int], None] | None = None
    ) -> None:
        raise NotImplementedError


@dataclass
class _Unsettled:
    """A request retried for silence, whose retries are not yet known to be lost or late:
    each try the device gets is answered (from its cache after the first), so every
    duplicate answer seen afterwards is one try that was answered in time for nothing."""

    name: str
    seq: int
    timeouts: int  # retries sent because no answer came in time
    waits_ms: tuple[int, ...]  # what each of those tries waited
    answered_s: float | None  # first try to the accepted answer; None: never answered
    late: int = 0  # duplicate answers seen since


class DeviceReset(DeviceError):
    """The device rebooted since the last HELLO (its model, data and weights are gone)."""


class DeviceClient:
    """A connected device (twin, QEMU or board) behind a pyserial port.

    Every request is retried on silence (adaptive timeout, exponential backoff) or when the
    device reports a damaged frame; retries re-send the identical frame, which the device
    answers from its cache, so nothing is applied twice. Its ``events`` (hilbench.client.events)
    tell subscribers about each command's timing (``command``), each retry, resync and reset
    (``incident``) and each chunk of a model or data upload the device acknowledged
    (``upload``).
    """

    def __init__(
        self,
        port: serial.SerialBase,
        *,
        name: str = "device",
        timeout: float = 5.0,
        retries: int = 8,
        min_rto: float = 0.01,
    ) -> None:
        self.port = port
        self.name = name
        self.retries = _checked_retries(retries)
        self.events = ClientEvents()
        self._commands = self.events.command  # emitted on every round trip
        self.info: DeviceInfo | None = None
        self.stats: Counter[str] = Counter()
        self._seq = secrets.randbelow(0x10000)
        self.session = secrets.randbits(32)  # names this connection in HELLO
        self._decoder = FrameDecoder(on_error=self._host_resync, native=True)
        self._pending: list = []
        self._probed: list[int] | None = None  # seeds of the last PROBE the device answered
        self._reboot_logged = False  # a NO_SESSION logged the reboot HELLO is about to see
        self._frames_in = 0  # frames decoded from the port (any: answers, late copies, echoes)
        # A synchronous link (the in-memory one: the answer is there when write returns) has
        # no scheduling delays to remember; any other keeps its slow round trips for a while.
        synchronous = bool(getattr(port, "synchronous", False))
        self._timer = WorkTimer(
            default_s=timeout,
            min_s=min_rto,
            peak_half_life_s=None if synchronous else PEAK_HALF_LIFE_S,
        )
        self.work = ModelWork()  # of the model this client loaded, for the timeouts
        #: (work, (q_apply, q, batch size), APPLY_PROBE's parts): the last step's, kept
        self._step_parts: tuple[ModelWork, tuple[int, int, int], tuple[Part, tuple]] | None = None
        self._work_blob: tuple[int, int, ModelWork] | None = None  # (len, crc32, work)
        #: uploads go through this debugger when set and the device has CAP_LOAD_STAGE
        #: (LOAD_STAGE, the debugger's write, LOAD_COMMIT); else, as always, over the link
        self.stager: Stager | None = None
        self._arena_base: tuple[int, int] | None = None  # (boot nonce, DEVICE_INFO arena_base)
        self._unsettled: dict[int, _Unsettled] = {}  # seq -> retries for silence, unsettled
        self._miss = "timeout"  # why the last _await returned None: "timeout" or "damaged"
        #: the device's own words: its last LOG lines, and the bytes the port sent before the
        #: first HELLO answer (hilbench.client.device_log)
        self.device_log = device_log.DeviceLog()

    def event(self, kind: str, detail: str) -> None:
        """Count an incident and tell the subscribers (retries, resyncs, resets, faults)."""
        self.stats[kind] += 1
        incident = self.events.incident
        if incident:
            incident.emit(Incident(kind, detail))

    def settle(self) -> None:
        """Report every retry for silence still unsettled: a retry whose try was answered
        twice is ``late`` (the first answer was only slow: nothing was lost), the others are
        ``retry`` (a frame was lost). Called once the next answer is in (the device answers
        in order, so by then every duplicate has come) and before the client is let go."""
        for seq in list(self._unsettled):
            self._settle(self._unsettled.pop(seq))

    def _settle(self, u: _Unsettled) -> None:
        late = min(u.late, u.timeouts)
        for i, wait_ms in enumerate(u.waits_ms):
            attempt = i + 2
            if i < u.timeouts - late:
                self.event(
                    "retry", f"{u.name} seq {u.seq}: attempt {attempt}, no answer in {wait_ms} ms"
                )
            else:
                took = (
                    "" if u.answered_s is None else f", answered after {u.answered_s * 1e3:.0f} ms"
                )
                self.event(
                    "late",
                    f"{u.name} seq {u.seq}: attempt {attempt} after {wait_ms} ms was not needed"
                    f"{took} (the first answer was slow, not lost)",
                )

    def _host_resync(self, problem: object) -> None:
        self._miss = "damaged"  # the answer awaited was most likely this frame
        self.event("resync", f"host dropped a damaged frame ({problem.kind})")

    # --- round trips --------------------------------------------------------------------
    def _exchange(
        self, request: object, *, timeout: float | None = None, retries: int | None = None
    ) -> object:
        req_type = _type_of(request)
        part, alternative = self._work_of(request)
        return self._exchange_payload(
            req_type, request.pack(), part, alternative, timeout=timeout, retries=retries
        )

    def _work_of(self, request: object) -> tuple[Part, tuple[Part, ...]]:
        """The kind and units of work of a request (docs/protocol.md, "Retries")."""
        w = self.work
        if isinstance(request, m.ApplyRequest | m.ApplyProbedRequest):
            return ("apply", w.trained * len(request.coeffs)), ()
        if isinstance(request, m.ApplyBatchRequest):
            return ("apply", w.trained * sum(len(s.coeffs) for s in request.steps)), ()
        if isinstance(request, m.ProbeRequest):
            return ("probe", w.probe_units(len(request.seeds), request.batch_size)), ()
        if isinstance(request, m.ApplyProbeRequest):
            return w.apply_probe_parts(
                len(request.coeffs), len(request.probe.seeds), request.probe.batch_size
            )
        if isinstance(request, m.EvalRequest):
            return ("eval", w.macs * request.count), ()
        if isinstance(request, m.HeadGradRequest):  # one pass over the batch, as an EVAL's
            return ("eval", w.macs * request.batch_size), ()
        if isinstance(request, m.LoadModelRequest | m.LoadDataRequest):
            kind = "load_model" if isinstance(request, m.LoadModelRequest) else "load_data"
            if request.offset + len(request.chunk) == request.total_len:  # completes: parsed
                return (f"{kind}_done", request.total_len), ()
            return (kind, len(request.chunk) + 1), ()
        if isinstance(request, m.LoadCommitRequest):  # the CRC, then parsed as a last chunk
            kind = "load_model_done" if request.target == spec.STAGE_MODEL else "load_data_done"
            return (kind, request.total_len), ()
        if isinstance(request, m.WeightsCrcRequest):
            return ("weights_crc", w.trained), ()
        if isinstance(request, m.InferRequest):
            return ("infer", w.macs), ()
        return (m.type_name(_type_of(request)).lower(), 1), ()

    def _exchange_payload(
        self,
        req_type: int,
        payload: bytes,
        part: Part,
        alternative: tuple[Part, ...] = (),
        *,
        timeout: float | None = None,
        retries: int | None = None,
        fast: Callable[[bytes], object] | None = None,
    ) -> object:
        """One request (its packed payload) and its answer: retries, timing, errors.

        ``part`` is the request's (kind, units) of work: its first try waits the bound the
        timer derives from measured round trips (``alternative``: parts whose bounds add up
        to one when the kind itself is unmeasured); an explicit ``timeout`` caps every try.
        ``fast``: the reader of an answer read at once as one exactly valid frame (else the
        type's generated decoder); any other answer is the message, as always."""
        name = _NAMES.get(req_type) or m.type_name(req_type)
        self._seq = seq = (self._seq + 1) & 0xFFFF
        frame = wire_frame(req_type, seq, payload)
        retries = self.retries if retries is None else _checked_retries(retries)
        clock = time.perf_counter
        frames_before = self._frames_in
        port = self.port
        response = None
        chunk = b""  # what was read before the wait began (the "no answer" error shows it)
        try:
            started = clock()
            port.write(frame)
            # The common case on a synchronous link (and a late read on any other): the
            # answer is already in, as one exactly valid frame; no deadline, no timeout bound.
            # Anything else read here goes on to the waiting below, as if it had read it.
            if fast is None:
                fast = _FAST_ANSWERS.get(req_type)
            if fast is not None and frames_before and not self._pending:
                waiting = port.in_waiting
                if waiting:
                    chunk = port.read(waiting)
                    frames = self._decoder.feed(chunk)
                    self._frames_in += len(frames)
                    if len(frames) == 1:
                        version, type_, seq_in, body = frames[0]
                        if seq_in == seq and type_ == req_type | spec.RESPONSE_BIT:
                            response = fast(body) if version == PROTOCOL_VERSION else None
                    if response is None:
                        self._pending.extend(frames)
        except serial.SerialException as exc:
            raise self._link_failed(name, exc) from None
        if response is not None:
            host_s = clock() - started
            self._timer.sample(part, host_s)
            if self._unsettled:  # earlier requests' duplicates have all come by now
                self.settle()
        else:
            response, host_s = self._answer_in_time(
                name,
                req_type,
                seq,
                frame,
                part,
                alternative,
                timeout,
                retries,
                started,
                chunk,
                frames_before,
            )
        if isinstance(response, m.ErrorResponse):
            code = (
                m.ErrorCode(response.code)
                if response.code in m.ErrorCode._value2member_map_
                else None
            )
            if code is m.ErrorCode.NO_SESSION:
                self._probed = None
                if not self._reboot_logged:  # one event per reboot, however it shows
                    self.event("reset", f"{name}: device reports a reboot ({response.message})")
                self._reboot_logged = True
                injected = self.injected_reset_rate()
                if injected:
                    raise DeviceReset(
                        f"{self.name} rebooted (answered {name} with NO_SESSION): a reset "
                        f"injected by --link-faults reset={injected:g}",
                        "hilbench recovers from injected resets during a run; lower reset= "
                        "(e.g. reset=0.001) if they come faster than it can recover",
                    )
                raise DeviceReset(
                    f"{self.name} rebooted (answered {name} with NO_SESSION)",
                    "hilbench recovers from this by itself during a run; elsewhere, reconnect",
                )
            if response.message.startswith("busy:"):  # hilbench emulate --listen, taken
                raise DeviceError(
                    f"{self.name} is taken: {response.message.removeprefix('busy:').strip()}",
                    "wait until that host disconnects, or start another hilbench emulate "
                    "--listen on another port for this one",
                )
            raise DeviceError(
                f"{self.name} refused {name}: {response}",
                _error_fix(code),
            )
        subscribers = self._commands.subscribers
        if subscribers:
            device_s = getattr(response, "duration_ns", None)
            source = TIMING_SOURCES.get(getattr(response, "timing_source", 0))
            if source == INSTRUCTIONS:  # duration_ns holds a count: kept as one
                timing = _new_timing(CommandTiming, (name, host_s, None, source, device_s))
            else:
                if device_s is not None and source is not None:
                    device_s *= 1e-9
                else:
                    device_s = None
                timing = _new_timing(CommandTiming, (name, host_s, device_s, source, None))
            for subscriber in subscribers:  # Channel.emit, inline: this runs every round trip
                subscriber(timing)
        return response

    def _link_failed(self, name: str, exc: Exception) -> LinkError:
        """The LinkError of a port that failed (pyserial raised) during request ``name``."""
        return LinkError(
            f"the link to {self.name} failed during {name}: {exc}",
            "check the cable or that the device process is still running",
        )

    def _answer_in_time(
        self,
        name: str,
        req_type: int,
        seq: int,
        frame: bytes,
        part: Part,
        alternative: tuple[Part, ...],
        timeout: float | None,
        retries: int,
        started: float,
        chunk: bytes,
        frames_before: int,
    ) -> tuple[object, float]:
        """The answer to ``frame`` (sent at ``started``; ``chunk``: bytes already read since)
        within its timeouts, re-sending it on silence or a BAD_FRAME report: (answer, round
        trip in seconds); LinkError when every try went unanswered."""
        timer = self._timer
        first = timer.first_wait(part, alternative)
        if timeout is not None:
            first = min(first, timeout)
        clock = time.perf_counter
        seen = bytearray(chunk[-_SEEN_BYTES:])  # the last bytes received, for messages
        silent: list[int] = []  # ms each try waited that ended in silence (a retry followed)
        port = self.port
        try:
            response = self._await(seq, req_type, first, seen)  # (first: within any cap)
            if response is not None:  # answered at the first try
                timer.sample(part, clock() - started)
            wait = first
            for attempt in range(1, retries + 1 if response is None else 1):
                if self._miss == "damaged":  # certain now: the device said so
                    self.event("retry", f"{name} seq {seq}: attempt {attempt + 1}, damaged")
                else:  # lost or only late: known once its duplicate answers are in
                    silent.append(round(wait * 1e3))
                port.write(frame)
                wait = timer.wait(first, attempt, timeout)
                response = self._await(seq, req_type, wait, seen)
                if response is not None:  # Karn: no sample, but it came within this much
                    timer.sample(part, clock() - started, retried=True)
                    break
        except serial.SerialException as exc:
            raise self._link_failed(name, exc) from None
        host_s = clock() - started
        if self._unsettled:  # earlier requests' duplicates have all come by now
            self.settle()
        if silent:
            u = _Unsettled(
                name, seq, len(silent), tuple(silent), None if response is None else host_s
            )
            if response is None:
                self._settle(u)  # no answer at all: every try was lost
            else:
                self._unsettled[seq] = u
        if response is None:
            raise LinkError(
                f"no answer from {self.name} to {name} after {retries + 1} tries in "
                f"{host_s:.1f} s (last bytes received: {describe_bytes(bytes(seen))})"
                + self.device_log.said_before_hello(),
                self._silence_fix(bytes(seen), self._frames_in - frames_before),
            )
        return response, host_s

    def injected_reset_rate(self) -> float:
        """The reset probability --link-faults injects on this link (0.0: none injected)."""
        spec = getattr(self.port, "spec", None)  # a FaultyPort's
        return spec.reset if isinstance(spec, FaultSpec) else 0.0

    def _silence_fix(self, seen: bytes, frames: int) -> str:
        """What to do about a device that never answered, from what the link did see."""
        spec = getattr(self.port, "spec", None)  # a FaultyPort's
        lost = spec.drop + spec.corrupt + spec.truncate if isinstance(spec, FaultSpec) else 0.0
        if lost > 0:
            through = (1.0 - min(1.0, lost)) ** 2  # the request and its answer both intact
            return (
                f"the injected faults (--link-faults) damage {lost:.0%} of frames, so "
                f"{through:.0%} of round trips get through: lower the fault rates"
            )
        if seen and not frames:
            return (
                "bytes arrived but never a hilbench frame: something else answers on this port "
                "(another firmware, a console); flash the hilbench firmware, or pick the "
                "board's port (python -m serial.tools.list_ports)"
            )
        port = self.port
        while isinstance(port, PortWrapper):  # a board's port behind its UART-tail recorder
            port = port.port
        baud = getattr(port, "baudrate", None)
        if isinstance(port, serial.Serial) and isinstance(baud, int):
            return (
                "check that the hilbench firmware is running, that this is its port and that "
                f"it talks at {baud:,} baud (--baud sets another speed)"
            )
        return "check that the hilbench firmware is running and that this is its address"

    def _await(self, seq: int, req_type: int, wait_s: float, seen: bytearray) -> object | None:
        """The answer to ``seq``, or None after ``wait_s`` or a BAD_FRAME report (retry)."""
        deadline = time.monotonic() + wait_s
        self._miss = "timeout"
        pending = self._pending
        answer = req_type | spec.RESPONSE_BIT  # the answer, unless one of these
        fast = m.fast_response_decoder(answer)  # None: every answer takes the checks below
        if answer in (req_type, _LOG, _ERROR):
            fast = None
        while True:
            while pending:
                frame = pending.pop(0)
                # the common case: the answer, exactly valid (version, type, seq, payload)
                if fast is not None and frame[2] == seq and frame[1] == answer:
                    msg = fast(frame[3]) if frame[0] == PROTOCOL_VERSION else None
                    if msg is not None:
                        return msg
                if frame.type == _LOG and frame.seq == 0:  # the device speaks on its own
                    self.device_log.frame(frame, self.events.device)
                    continue
                if frame.type == _ERROR and frame.seq == 0:
                    reply = _decode_or_none(frame)
                    if reply is not None and reply.code == m.ErrorCode.BAD_FRAME:
                        self.event("resync", f"device dropped a damaged frame ({reply.message})")
                        self._miss = "damaged"
                        return None  # the device did not get our request intact: re-send now
                if frame.seq != seq:
                    self.stats["stale"] += 1
                    u = self._unsettled.get(frame.seq)
                    if u is not None and frame.type != _ERROR:  # a retried try answered again
                        u.late += 1
                        if u.late >= u.timeouts:
                            self._settle(self._unsettled.pop(frame.seq))
                    continue  # a late answer to an earlier try or request
                if frame.type == req_type:  # our own request came back
                    raise LinkError(
                        f"{self.name} echoes what hilbench sends: the {m.type_name(req_type)} "
                        "request came back unchanged instead of an answer",
                        "this port is a loopback or a terminal that echoes, not a hilbench "
                        "device: pick the board's port (python -m serial.tools.list_ports)",
                    )
                if frame.type not in (req_type | 0x80, _ERROR):
                    raise DeviceError(
                        f"{self.name} answered {m.type_name(req_type)} "
                        f"with type 0x{frame.type:02x}",
                        "the firmware and hilbench disagree on the protocol: reflash the firmware",
                    )
                return self._decode_answer(frame, req_type)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            waiting = self.port.in_waiting
            if not waiting:  # block for the first byte; few timeout values, few tty reprograms
                poll = (
                    _POLL_STEPS[bisect.bisect_left(_POLL_STEPS, remaining) - 1]
                    if remaining > _POLL_STEPS[0]
                    else _POLL_STEPS[0]
                )
                if self.port.timeout != poll:  # pyserial reprograms the tty on every change
                    self.port.timeout = poll
            chunk = self.port.read(waiting or 1)
            if chunk:
                if not self._frames_in:  # what the port sent before its frames: diagnosis
                    self.device_log.before_frames(chunk)
                seen += chunk  # a copy, not a per-byte deque: this runs on every answer
                if len(seen) > _SEEN_BYTES:
                    del seen[:-_SEEN_BYTES]
                frames = self._decoder.feed(chunk)
                self._frames_in += len(frames)
                pending.extend(frames)

    def _decode_answer(self, frame: Frame, req_type: int) -> object:
        """The message of the answer (or ERROR) to a request of ``req_type``."""
        try:
            return m.decode_response(frame)
        except m.MessageError as exc:
            if exc.code == m.ErrorCode.BAD_VERSION:
                raise DeviceError(
                    f"{self.name} answers in another protocol version: {exc}",
                    "flash firmware built from this hilbench version",
                ) from None
            raise DeviceError(
                f"{self.name} sent a malformed {m.type_name(req_type)} answer: {exc}",
                "reflash the firmware that matches this hilbench version",
            ) from None

    # --- commands -----------------------------------------------------------------------
    def hello(self, timeout: float | None = None, retries: int | None = None) -> DeviceInfo:
        """Check that a device answers and speaks our protocol version; opens a session.

        A boot nonce other than the last one seen means the device reset in between.
        """
        resp = self._exchange(
            m.HelloRequest(session=self.session),  # host_protocol_version: PROTOCOL_VERSION
            timeout=timeout,
            retries=retries,
        )
        if resp.protocol_version != PROTOCOL_VERSION:
            raise DeviceError(
                f"{self.name} speaks protocol v{resp.protocol_version}, "
                f"this hilbench speaks v{PROTOCOL_VERSION}",
                "flash firmware built from this hilbench version, or install the matching hilbench",
            )
        self._probed = None
        if (
            self.info is not None
            and self.info.boot_nonce != resp.boot_nonce
            and not self._reboot_logged  # the NO_SESSION that revealed it was logged
        ):
            self.event(
                "reset", f"boot nonce {self.info.boot_nonce:#010x} -> {resp.boot_nonce:#010x}"
            )
        self._reboot_logged = False
        self.info = DeviceInfo(
            protocol_version=resp.protocol_version,
            max_payload=resp.max_payload,
            boot_nonce=resp.boot_nonce,
            device_id=resp.device_id,
            firmware=resp.firmware,
            capabilities=resp.capabilities,
        )
        return self.info

    def _max_payload(self) -> int:
        """The device's largest request payload (before HELLO: the least any device takes)."""
        return self.info.max_payload if self.info else spec.MIN_DEVICE_PAYLOAD

    def _chunk_size(self) -> int:
        return max(64, self._max_payload() - FRAME_OVERHEAD)

    def _upload(
        self,
        blob: bytes,
        request: Callable[[int, bytes], object],
        what: str,
    ) -> object:
        """Send ``blob`` (a ``what``: not empty) in chunks, ``request(offset, chunk)`` each; the
        last answer. The ``upload`` event tells the bytes acknowledged after each answer."""
        if not blob:  # nothing to send: the device could only refuse it
            raise ConfigError(f"the {what} to upload is empty (0 bytes)", UPLOAD_FIX[what])
        size, total = self._chunk_size(), len(blob)
        progress = self.events.upload
        if progress:
            progress.emit(Transfer(0, total))
        for offset in range(0, total, size):  # at least once: blob is not empty
            chunk = blob[offset : offset + size]
            resp = self._exchange(request(offset, chunk))
            if progress:
                progress.emit(Transfer(offset + len(chunk), total))
        return resp

    def load_model(self, blob: bytes, *, macs: int | None = None) -> int:
        """Send a model blob in chunks; returns the model_crc32 the device confirmed (CRC-32
        of the blob without its 4-byte CRC trailer). ``macs`` (MACs of one forward pass) sets
        how the timeouts of PROBE / EVAL / INFER scale; by default it is read from the blob."""
        self._probed = None
        key = (len(blob), zlib.crc32(blob))
        if self._work_blob is None or self._work_blob[:2] != key or macs is not None:
            self._work_blob = (*key, ModelWork.from_blob(blob, macs))
        self.work = self._work_blob[2]
        if self._staging():
            resp = self._staged_upload(spec.STAGE_MODEL, blob, "model blob")
            complete = resp.received == len(blob)
        else:
            resp = self._upload(
                blob,
                lambda offset, chunk: m.LoadModelRequest(
                    total_len=len(blob), offset=offset, chunk=chunk
                ),
                "model blob",
            )
            complete = resp.complete
        if not complete:
            raise DeviceError(
                f"{self.name} did not confirm the model ({len(blob)} bytes)",
                "retry; if it persists the link corrupts data: lower the baud rate (--baud)",
            )
        expected = zlib.crc32(blob[:-4])
        if resp.model_crc32 != expected:
            raise DeviceError(
                f"{self.name} loaded a model with CRC-32 {resp.model_crc32:#010x}, the blob sent "
                f"has {expected:#010x} ({len(blob)} bytes)",
                "the link or the device corrupted the upload: retry; if it persists lower the "
                "baud rate (--baud) or check the device's memory",
            )
        return resp.model_crc32

    def load_data(self, slot: int, inputs: np.ndarray, labels: np.ndarray, n_classes: int) -> int:
        """Upload a data set to a slot; returns the number of items the device holds."""
        return self.load_data_blob(slot, data_blob.encode(inputs, labels, n_classes))

    def load_data_blob(self, slot: int, blob: bytes) -> int:
        """Upload an encoded data blob (docs/protocol.md, "Data blob") to a slot."""
        if self._staging():
            resp = self._staged_upload(slot, blob, "data blob")
            if resp.n_items != int.from_bytes(blob[:4], "little"):
                raise DeviceError(f"{self.name} did not confirm data slot {slot}", "retry the run")
            return resp.n_items
        resp = self._upload(
            blob,
            lambda offset, chunk: m.LoadDataRequest(
                slot=slot, total_len=len(blob), offset=offset, chunk=chunk
            ),
            "data blob",
        )
        if not resp.complete or resp.n_items != int.from_bytes(blob[:4], "little"):
            raise DeviceError(f"{self.name} did not confirm data slot {slot}", "retry the run")
        return resp.n_items

    # --- DEVICE_INFO and staged uploads (docs/protocol.md) -----------------------------------
    def device_info(self) -> m.DeviceInfoResponse:
        """What the firmware set (clocks, caches, arena, watchdog) and its UART's error
        counters now; needs CAP_DEVICE_INFO (an older device answers UNKNOWN_TYPE)."""
        resp = self._exchange(m.DeviceInfoRequest())
        if self.info is not None:
            self._arena_base = (self.info.boot_nonce, resp.arena_base)
        return resp

    def _staging(self) -> bool:
        info = self.info
        return (
            self.stager is not None
            and info is not None
            and bool(info.capabilities & spec.CAP_LOAD_STAGE)
        )

    def _staged_upload(self, target: int, blob: bytes, what: str) -> m.LoadCommitResponse:
        """LOAD_STAGE, the debugger writes ``blob`` where the device said, LOAD_COMMIT (the
        device checks the CRC-32 and accepts the bytes as if the link had carried them). The
        ``upload`` event tells the bytes written, as a link upload does."""
        if not blob:
            raise ConfigError(f"the {what} to upload is empty (0 bytes)", UPLOAD_FIX[what])
        assert self.stager is not None and self.info is not None
        if self._arena_base is None or self._arena_base[0] != self.info.boot_nonce:
            self.device_info()
        assert self._arena_base is not None
        total, progress = len(blob), self.events.upload
        stage = self._exchange(m.LoadStageRequest(target=target, total_len=total))
        if progress:
            progress.emit(Transfer(0, total))
        emit = (lambda done: progress.emit(Transfer(done, total))) if progress else None
        self.stager.write(self._arena_base[1] + stage.offset, blob, emit)
        self.stats["staged_bytes"] += total
        resp = self._exchange(
            m.LoadCommitRequest(target=target, total_len=total, crc32=zlib.crc32(blob))
        )
        if progress:
            progress.emit(Transfer(total, total))
        return resp

    def probe(
        self, *, slot: int, batch_size: int, batch_seed: int, eps: int, seeds: np.ndarray
    ) -> m.ProbeResponse:
        """Loss pairs (Q16) of the ±eps perturbations along each seed's direction."""
        seeds = m.int_array(seeds, np.uint32, "PROBE seeds")
        self._probed = None
        payload = m.probe_payload(slot, batch_size, batch_seed, eps, seeds)
        if payload is None:  # not plain valid values: the message checks them and says why
            payload = m.ProbeRequest(
                slot=slot, batch_size=batch_size, batch_seed=int(batch_seed), eps=eps, seeds=seeds
            ).pack()
        q = len(seeds)
        response = self._exchange_payload(
            _PROBE, payload, ("probe", self.work.probe_units(q, batch_size))
        )
        self._probed = seeds.tolist()  # the seeds as sent: what APPLY_PROBED will reuse
        return response

    def apply(self, seeds: np.ndarray, coeffs: np.ndarray) -> int:
        """Apply one integer update; returns the device's count of applied updates."""
        seeds = m.int_array(seeds, np.uint32, "APPLY seeds")
        coeffs = m.int_array(coeffs, np.int32, "APPLY coefficients")
        if (
            self._probed is not None  # a PROBE was answered: HELLO was too
            and self.info.capabilities & m.CAP_APPLY_PROBED
            and seeds.tolist() == self._probed
            and len(coeffs) == len(seeds)  # else APPLY's message says what is wrong
        ):  # the device still holds these seeds from the PROBE: do not send them again
            payload = m.apply_probed_payload(coeffs)
            if payload is None:  # the message says what is wrong
                payload = m.ApplyProbedRequest(coeffs=coeffs).pack()
            resp = self._exchange_payload(
                _APPLY_PROBED, payload, ("apply", self.work.trained * len(coeffs))
            )
        else:
            resp = self._exchange(m.ApplyRequest(seeds=seeds, coeffs=coeffs))
        return resp.updates_applied

    def apply_probe(
        self,
        apply_seeds: np.ndarray,
        coeffs: np.ndarray,
        slot: int,
        batch_size: int,
        batch_seed: int,
        eps: int,
        seeds: np.ndarray,
    ) -> tuple[int, m.ProbeResponse]:
        """Apply the update along ``apply_seeds`` (the last PROBE's), then PROBE along
        ``seeds``: (updates applied, the PROBE's answer). One round trip (APPLY_PROBE) when
        the device still holds ``apply_seeds``; APPLY then PROBE otherwise."""
        return self.apply_probe_losses(  # type: ignore[return-value]
            apply_seeds, coeffs, slot, batch_size, batch_seed, eps, seeds, False
        )

    def apply_probe_losses(
        self,
        apply_seeds: np.ndarray | list[int],
        coeffs: np.ndarray | list[int],
        slot: int,
        batch_size: int,
        batch_seed: int,
        eps: int,
        seeds: np.ndarray | list[int],
        lists: bool = True,
    ) -> tuple[int, list[int], list[int]]:
        """``apply_probe``, its answer as (updates applied, L+, L-) in plain lists of Q16
        ints: what the trainer reads every step, with no array made in between (``lists``
        False: ``apply_probe``'s (updates applied, ProbeResponse), for it)."""
        if type(apply_seeds) is not list:  # a list (the trainer's) is compared as it is
            if not (  # _wire_array inline: this runs every step
                type(apply_seeds) is np.ndarray
                and apply_seeds.dtype == _U32
                and apply_seeds.ndim == 1
            ):
                apply_seeds = m.int_array(apply_seeds, np.uint32, "APPLY seeds")
            apply_list = apply_seeds.tolist()
        else:
            apply_list = apply_seeds
        info, probed = self.info, self._probed
        if (
            probed is not None  # a PROBE was answered: HELLO was too
            and info.capabilities & m.CAP_APPLY_PROBE
            and apply_list == probed
        ):
            # plain valid values (1-D arrays of the wire dtypes, ints in range): the payload
            # at once; anything else goes through the messages, which say what is wrong
            payload = m.apply_probe_payload(coeffs, slot, batch_size, batch_seed, eps, seeds)
            if payload is None:
                coeffs = _wire_array(coeffs, _I32, "APPLY coefficients")
                seeds = _wire_array(seeds, _U32, "PROBE seeds")
            q = len(seeds)
            if _APPLY_PROBE_R_BASE + _APPLY_PROBE_R_PER_SEED * q <= info.max_payload:
                if payload is None:
                    probe = m.ProbeRequest(
                        slot=slot,
                        batch_size=batch_size,
                        batch_seed=int(batch_seed),
                        eps=eps,
                        seeds=seeds,
                    )
                    payload = m.ApplyProbeRequest(coeffs=coeffs, probe=probe).pack()
                # The request (4 (q_apply + q) bytes and a header) is shorter than the two
                # answers that fit (the PROBE of apply_seeds and this one, 8 q bytes and
                # more): it fits too.
                self._probed = None
                work, key = self.work, (len(coeffs), q, batch_size)
                parts = self._step_parts
                if parts is None or parts[0] is not work or parts[1] != key:  # a new q or model
                    parts = self._step_parts = (work, key, work.apply_probe_parts(*key))
                part, alternative = parts[2]
                fast = _PROBE_VALUES if lists else None
                resp = self._exchange_payload(_APPLY_PROBE, payload, part, alternative, fast=fast)
                # the seeds as sent (the payload's, packed from these): our own list
                self._probed = seeds.tolist() if type(seeds) is np.ndarray else list(seeds)
                if type(resp) is _ProbeValues:  # read at once: the flat values
                    return resp.updates_applied, resp.loss_plus, resp.loss_minus  # type: ignore[union-attr]
                return _probe_answer(resp.updates_applied, resp.probe, lists)  # type: ignore[union-attr]
        coeffs = _wire_array(coeffs, _I32, "APPLY coefficients")  # all checked before APPLY
        seeds = _wire_array(seeds, _U32, "PROBE seeds")
        applied = self.apply(apply_seeds, coeffs)
        answer = self.probe(
            slot=slot, batch_size=batch_size, batch_seed=batch_seed, eps=eps, seeds=seeds
        )
        return _probe_answer(applied, answer, lists)

    def evaluate(self, slot: int, n_items: int, chunk: int = 512) -> tuple[float, float]:
        """(accuracy, mean loss in nats) of the current weights over a whole slot."""
        correct, loss_sum = 0, 0
        for start in range(0, n_items, chunk):
            count = min(chunk, n_items - start)
            resp = self._exchange(m.EvalRequest(slot=slot, start=start, count=count))
            correct += resp.correct
            loss_sum += resp.loss_sum_q16
        return correct / n_items, loss_sum / n_items / 65536.0

    def infer(
        self, *, slot: int = 0, index: int = 0, input: bytes | np.ndarray | None = None
    ) -> InferResult:
        """The loaded model's int8 output (``.output``, every element) for item ``index`` of
        data ``slot``, or for ``input`` (the input tensor's int8 values, row-major; then slot
        and index are 0). An input or an output larger than a frame travels in pieces: the
        input at growing ``in_offset``, then the output read on at growing ``out_offset``
        (docs/protocol.md, INFER). ``.duration_ns`` is the forward pass's. Changes nothing on
        the device but INFER's own state. Needs CAP_INFER (a device without it answers
        UNKNOWN_TYPE)."""
        if input is not None and not isinstance(input, bytes):
            input = m.int_array(np.ravel(input), np.int8, "INFER input").tobytes()
        data = input or b""
        infer = spec.MessageType.INFER
        run = ("infer", self.work.macs)  # a request that runs the forward pass
        if data:
            slot = index = 0
            room = self._max_payload() - spec.LAYOUTS["INFER"].min_size
            for offset in range(0, len(data), room):
                piece = data[offset : offset + room]
                last = offset + len(piece) == len(data)
                request = m.InferRequest(in_offset=offset, input=piece)
                part = run if last else ("infer_part", len(piece) + 1)
                first = self._exchange_payload(infer, request.pack(), part)
        else:
            first = self._exchange_payload(
                infer, m.InferRequest(slot=slot, index=index).pack(), run
            )
        parts, got = [np.asarray(first.output, np.int8)], len(first.output)
        while got < first.total:  # the rest of the output, held by the device
            request = m.InferRequest(slot=slot, index=index, out_offset=got)
            resp = self._exchange_payload(infer, request.pack(), ("infer_part", 1))
            if resp.total != first.total or len(resp.output) == 0:
                raise DeviceError(
                    f"{self.name} answered INFER at out_offset {got} with {len(resp.output)} "
                    f"of {resp.total} elements (the first part said {first.total})",
                    "this is a bug in the firmware: report it with the model",
                )
            parts.append(np.asarray(resp.output, np.int8))
            got += len(resp.output)
        output = parts[0] if len(parts) == 1 else np.concatenate(parts)
        return InferResult(output, first.duration_ns, first.timing_source)

    def apply_batch(self, steps: list[tuple[np.ndarray, np.ndarray]]) -> int:
        """Apply logged (seeds, coeffs) updates in order, as many per frame as fit."""
        limit = self._max_payload() - 2
        applied, batch, size = 0, [], 0
        for seeds, coeffs in steps:
            request = m.ApplyRequest(seeds, coeffs)  # checked: out-of-range values refused
            need = 2 + 8 * request.q
            if batch and size + need > limit:
                applied = self._exchange(m.ApplyBatchRequest(tuple(batch))).updates_applied
                batch, size = [], 0
            batch.append(request)
            size += need
        if batch:
            applied = self._exchange(m.ApplyBatchRequest(tuple(batch))).updates_applied
        return applied

    def reset_frame(self) -> bytes:
        """A RESET request frame with the next sequence number, for sending out of band."""
        self._seq = (self._seq + 1) & 0xFFFF
        return wire_frame(m.MessageType.RESET, self._seq)

    def reset(self) -> None:
        """Reboot the device (it answers first); the next command must be HELLO."""
        self._exchange(m.ResetRequest())

    def head_grad(
        self,
        *,
        slot: int,
        batch_size: int,
        batch_seed: int,
        round_seed: int,
        rates: np.ndarray,
        bias_gain: int,
    ) -> m.HeadGradResponse:
        """The hybrid's exact step of the last layer on PROBE's batch of ``batch_seed``
        (needs CAP_HEAD_GRAD; hilbench/zo/head.py): the head's CRC and the batch's loss."""
        rates = m.int_array(rates, np.int32, "HEAD_GRAD rates")
        if self.info is not None and not self.info.capabilities & spec.CAP_HEAD_GRAD:
            raise ConfigError(
                f"{self.info.device_id} (firmware {self.info.firmware!r}) does not implement "
                "HEAD_GRAD (no CAP_HEAD_GRAD), which --hybrid last needs",
                "load a firmware with HEAD_GRAD, or train by ZO only (--hybrid none)",
            )
        return self._exchange(
            m.HeadGradRequest(
                slot=slot,
                batch_size=batch_size,
                batch_seed=int(batch_seed),
                round_seed=int(round_seed),
                bias_gain=bias_gain,
                rates=rates,
            )
        )

    def weights_crc(self) -> tuple[int, int]:
        """(CRC-32 of the trainable int8 weights, updates applied) as the device reports."""
        resp = self._exchange(m.WeightsCrcRequest())
        return resp.crc32, resp.updates_applied

    def close(self) -> None:
        self.settle()
        self.port.close()

    def __repr__(self) -> str:
        info = self.info
        if info is None:
            return f"<DeviceClient {self.name}: no HELLO answered yet>"
        return (
            f"<DeviceClient {self.name}: {info.device_id}, firmware {info.firmware!r}, "
            f"protocol {info.protocol_version}>"
        )


def _wire_array(value: object, dtype: np.dtype, where: str) -> np.ndarray:
    """``m.int_array``, with its common case (already a 1-D array of ``dtype``) inline."""
    if type(value) is np.ndarray and value.dtype == dtype and value.ndim == 1:
        return value
    return m.int_array(value, dtype, where)


def _checked_retries(retries: int) -> int:
    if not isinstance(retries, int) or retries < 0:
        raise ConfigError(f"retries must be a whole number >= 0, got {retries!r}", "use e.g. 8")
    return retries


def _type_of(request: object) -> int:
    code = getattr(request, "TYPE", None)
    if code is None or m.REQUESTS.get(code) is not type(request):
        raise TypeError(f"not a request: {request!r}")
    return code


def _decode_or_none(frame: object) -> m.ErrorResponse | None:
    try:
        return m.decode_response(frame)  # an ERROR frame: an ErrorResponse
    except m.MessageError:
        return None


def _error_fix(code: m.ErrorCode | None) -> str:
    return {
        m.ErrorCode.MODEL_TOO_LARGE: "choose a smaller model (fewer channels, lower resolution)",
        m.ErrorCode.BAD_VERSION: "flash firmware built from this hilbench version",
        m.ErrorCode.NO_MODEL: "the device lost its model (reset?): restart the run",
        m.ErrorCode.NO_DATA: "the device lost its data (reset?): restart the run",
    }.get(code, "this is a bug in hilbench or the firmware: please report it with the trace")


#: The old name of :class:`DeviceClient` (it clashed with labgrid's ``Target``), kept for one
#: release: new code imports ``DeviceClient``.
Target = DeviceClient
