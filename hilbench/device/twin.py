"""The device twin: the firmware's command semantics in Python, frame in, frame out.

It keeps the same rules as ``device_fw`` (docs/protocol.md): one cached response for
retries (at most once), bounds checks on every length and index from the wire, ERROR
replies instead of crashes. Its timing is *modeled* from the NPU cost model.
"""

from __future__ import annotations

import secrets
import zlib
from collections import Counter

import numpy as np

from hilbench import __version__
from hilbench.device.state import DataSlot, ModelState
from hilbench.errors import ModelError
from hilbench.npu.cost import npu_latency_s
from hilbench.protocol import data_blob
from hilbench.protocol import messages as m
from hilbench.protocol.frames import MAX_PAYLOAD, PROTOCOL_VERSION, Frame, encode_frame
from hilbench.zo.rng import batch_indices

TIMING_MODELED = 2
FRAME_START = b"\x00"  # a delimiter before every frame flushes any junk the peer holds
CAPABILITIES = (
    m.CAP_MODELED_TIMING | m.CAP_RESET | m.CAP_APPLY_BATCH | m.CAP_APPLY_PROBED | m.CAP_APPLY_PROBE
)
DEFAULT_MEMORY = 4_200_000  # bytes of on-chip SRAM on the STM32N6


class CommandError(Exception):
    """A request the device refuses; becomes an ERROR frame."""

    def __init__(self, code: m.ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class DeviceTwin:
    """A bit-exact software device that answers protocol frames."""

    def __init__(
        self,
        *,
        device_id: str = "hilbench-twin",
        memory_bytes: int = DEFAULT_MEMORY,
        boot_nonce: int | None = None,
    ) -> None:
        self.device_id = device_id
        self.memory_bytes = memory_bytes
        self.stats: Counter[str] = Counter()
        self.boot(boot_nonce)

    def boot(self, boot_nonce: int | None = None) -> None:
        """Power-on state: a new boot nonce, no model, no data, no session, empty cache."""
        self.boot_nonce = secrets.randbits(32) if boot_nonce is None else boot_nonce
        self.model: ModelState | None = None
        self.slots: dict[int, DataSlot] = {}
        self._bulk: dict[object, bytearray] = {}
        self._last: tuple[int, int, bytes, bytes] | None = None  # seq, type, payload, answer
        self._session: int | None = None  # the host's HELLO token, None until HELLO
        self._probed: np.ndarray | None = None  # seeds of the last PROBE, for APPLY_PROBED
        self._last_seq = 0
        self.stats["boots"] += 1

    def reset(self) -> None:
        """What a reset (watchdog, brown-out, the reset button) does: reboot, lose everything."""
        self.boot()

    # --- frames -------------------------------------------------------------------------
    def handle(self, frame: Frame) -> bytes:
        """The encoded response frame to one request frame."""
        self.stats["frames"] += 1
        if frame.version != PROTOCOL_VERSION:
            return self._error(
                frame,
                m.ErrorCode.BAD_VERSION,
                f"device speaks protocol v{PROTOCOL_VERSION}, frame is v{frame.version}",
            )
        if self._last and self._last[:3] == (frame.seq, frame.type, frame.payload):
            self.stats["retries_answered_from_cache"] += 1
            return self._last[3]
        if frame.type not in m.REQUESTS:
            return self._error(frame, m.ErrorCode.UNKNOWN_TYPE, f"unknown type 0x{frame.type:02x}")
        try:
            request = m.decode_request(frame)
        except m.MessageError as exc:
            return self._error(frame, exc.code, str(exc))
        if isinstance(request, m.HelloRequest):
            if request.session == self._session and not _newer(frame.seq, self._last_seq):
                self.stats["stale_dropped"] += 1
                return b""  # a late copy of an old HELLO of this session
        elif self._session is None:
            return self._error(
                frame, m.ErrorCode.NO_SESSION, "device booted since the last HELLO: say HELLO"
            )
        elif not _newer(frame.seq, self._last_seq):
            self.stats["stale_dropped"] += 1
            return b""  # a late copy of a request already answered: never run it twice
        self._last_seq = frame.seq
        try:
            response = self._dispatch(request)
        except CommandError as exc:
            return self._error(frame, exc.code, str(exc))
        except Exception as exc:  # a bug in the twin: answer it, do not go silent
            self.stats["internal_errors"] += 1
            return self._error(frame, m.ErrorCode.INTERNAL, f"{type(exc).__name__}: {exc}")
        encoded = FRAME_START + encode_frame(frame.type | 0x80, frame.seq, response.pack())
        self._last = (frame.seq, frame.type, frame.payload, encoded)
        if isinstance(request, m.ResetRequest):
            self.reset()  # after the answer is built: it goes out, then the device reboots
        return encoded

    def bad_frame(self, kind: str) -> bytes:
        """Count a frame the decoder dropped; the ERROR BAD_FRAME answer (seq 0, not cached)."""
        self.stats[f"bad_frame_{kind}"] += 1
        payload = m.ErrorResponse(code=m.ErrorCode.BAD_FRAME, request_type=0, message=kind)
        return FRAME_START + encode_frame(m.ERROR, 0, payload.pack())

    def _error(self, frame: Frame, code: m.ErrorCode, message: str) -> bytes:
        self.stats[f"error_{code.name}"] += 1
        payload = m.ErrorResponse(code=code, request_type=frame.type, message=message[:200])
        encoded = FRAME_START + encode_frame(m.ERROR, frame.seq, payload.pack())
        self._last = (frame.seq, frame.type, frame.payload, encoded)
        return encoded

    # --- commands -----------------------------------------------------------------------
    def _dispatch(self, req: object) -> object:
        handler = {
            m.HelloRequest: self._hello,
            m.LoadModelRequest: self._load_model,
            m.LoadDataRequest: self._load_data,
            m.ProbeRequest: self._probe,
            m.ApplyRequest: self._apply,
            m.EvalRequest: self._eval,
            m.WeightsCrcRequest: self._weights_crc,
            m.ResetRequest: lambda _req: m.ResetResponse(),
            m.ApplyBatchRequest: self._apply_batch,
            m.ApplyProbedRequest: self._apply_probed,
            m.ApplyProbeRequest: self._apply_probe,
        }[type(req)]
        return handler(req)

    def _hello(self, req: m.HelloRequest) -> m.HelloResponse:
        self._session = req.session
        return m.HelloResponse(
            protocol_version=PROTOCOL_VERSION,
            max_payload=MAX_PAYLOAD,
            boot_nonce=self.boot_nonce,
            capabilities=CAPABILITIES,
            device_id=self.device_id,
            firmware=f"hilbench-twin {__version__}",
        )

    def _receive_chunk(self, key: object, total: int, offset: int, chunk: bytes) -> bytes | None:
        """Append one bulk chunk; the whole blob once complete, else None."""
        if total > self.memory_bytes:
            raise CommandError(
                m.ErrorCode.MODEL_TOO_LARGE,
                f"{total} bytes do not fit the device's {self.memory_bytes} bytes",
            )
        buf = self._bulk.get(key)
        if offset == 0:
            buf = self._bulk[key] = bytearray()
        if buf is None or offset != len(buf):
            have = 0 if buf is None else len(buf)
            raise CommandError(
                m.ErrorCode.BAD_ARGUMENT, f"chunk at offset {offset}, expected {have}"
            )
        if offset + len(chunk) > total:
            raise CommandError(m.ErrorCode.BAD_ARGUMENT, "chunk runs past total_len")
        buf += chunk
        if len(buf) < total:
            return None
        del self._bulk[key]
        return bytes(buf)

    def _load_model(self, req: m.LoadModelRequest) -> m.LoadModelResponse:
        blob = self._receive_chunk("model", req.total_len, req.offset, req.chunk)
        if blob is None:
            received = len(self._bulk["model"])
            return m.LoadModelResponse(received=received, complete=0, model_crc32=0)
        try:
            state = ModelState.from_blob(blob)
        except (ModelError, ValueError) as exc:
            self.model = None
            raise CommandError(m.ErrorCode.BAD_MODEL, f"model blob refused: {exc}") from None
        if state.memory_bytes() > self.memory_bytes:
            raise CommandError(
                m.ErrorCode.MODEL_TOO_LARGE,
                f"model needs {state.memory_bytes()} bytes, device has {self.memory_bytes}",
            )
        self.model = state
        self._probed = None
        return m.LoadModelResponse(received=len(blob), complete=1, model_crc32=zlib.crc32(blob))

    def _load_data(self, req: m.LoadDataRequest) -> m.LoadDataResponse:
        blob = self._receive_chunk(("data", req.slot), req.total_len, req.offset, req.chunk)
        if blob is None:
            received = len(self._bulk[("data", req.slot)])
            return m.LoadDataResponse(slot=req.slot, received=received, complete=0, n_items=0)
        try:
            inputs, labels = data_blob.decode(blob)
        except ValueError as exc:
            raise CommandError(m.ErrorCode.BAD_ARGUMENT, str(exc)) from None
        self.slots[req.slot] = DataSlot(inputs=inputs, labels=labels)
        n = len(self.slots[req.slot].labels)
        return m.LoadDataResponse(slot=req.slot, received=len(blob), complete=1, n_items=n)

    def _model_and_slot(self, slot: int) -> tuple[ModelState, DataSlot]:
        if self.model is None:
            raise CommandError(m.ErrorCode.NO_MODEL, "no model loaded: send LOAD_MODEL first")
        data = self.slots.get(slot)
        if data is None:
            raise CommandError(m.ErrorCode.NO_DATA, f"data slot {slot} is empty")
        item = int(np.prod(self.model.graph.tensors[self.model.graph.input].shape))
        if data.inputs.shape[1] != item:
            raise CommandError(
                m.ErrorCode.BAD_ARGUMENT,
                f"slot {slot} items have {data.inputs.shape[1]} bytes, the model takes {item}",
            )
        return self.model, data

    def _inputs(self, model: ModelState, data: DataSlot, idx: np.ndarray) -> np.ndarray:
        shape = model.graph.tensors[model.graph.input].shape
        return data.inputs[idx].reshape((len(idx), *shape))

    def _probe(self, req: m.ProbeRequest) -> m.ProbeResponse:
        model, data = self._model_and_slot(req.slot)
        idx = batch_indices(req.batch_seed, len(data.labels), req.batch_size)
        lp, lm = model.probe(self._inputs(model, data, idx), data.labels[idx], req.seeds, req.eps)
        self._probed = np.array(req.seeds, dtype=np.uint32)
        seconds = npu_latency_s(model.macs, req.batch_size, passes=2 * len(req.seeds))
        return m.ProbeResponse(
            q=len(req.seeds),
            loss_plus=lp,
            loss_minus=lm,
            duration_ns=int(seconds * 1e9),
            timing_source=TIMING_MODELED,
        )

    def _apply(self, req: m.ApplyRequest) -> m.ApplyResponse:
        if self.model is None:
            raise CommandError(m.ErrorCode.NO_MODEL, "no model loaded: send LOAD_MODEL first")
        self.model.apply(req.seeds, req.coeffs)
        return m.ApplyResponse(updates_applied=self.model.updates_applied)

    def _apply_probed(self, req: m.ApplyProbedRequest) -> m.ApplyProbedResponse:
        self._check_probed(len(req.coeffs), "APPLY_PROBED")
        self.model.apply(self._probed, req.coeffs)
        return m.ApplyProbedResponse(updates_applied=self.model.updates_applied)

    def _check_probed(self, q: int, command: str) -> None:
        if self.model is None:
            raise CommandError(m.ErrorCode.NO_MODEL, "no model loaded: send LOAD_MODEL first")
        if self._probed is None or len(self._probed) != q:
            have = 0 if self._probed is None else len(self._probed)
            raise CommandError(
                m.ErrorCode.BAD_ARGUMENT,
                f"{command} with q={q}, but the last PROBE since the model load had {have}",
            )

    def _apply_probe(self, req: m.ApplyProbeRequest) -> m.ApplyProbeResponse:
        """APPLY_PROBED, then PROBE; both parts are checked before either runs."""
        self._check_probed(len(req.coeffs), "APPLY_PROBE")
        self._model_and_slot(req.probe.slot)
        self.model.apply(self._probed, req.coeffs)
        applied = self.model.updates_applied
        return m.ApplyProbeResponse(updates_applied=applied, probe=self._probe(req.probe))

    def _apply_batch(self, req: m.ApplyBatchRequest) -> m.ApplyBatchResponse:
        if self.model is None:
            raise CommandError(m.ErrorCode.NO_MODEL, "no model loaded: send LOAD_MODEL first")
        for step in req.steps:
            self.model.apply(step.seeds, step.coeffs)
        return m.ApplyBatchResponse(updates_applied=self.model.updates_applied)

    def _eval(self, req: m.EvalRequest) -> m.EvalResponse:
        model, data = self._model_and_slot(req.slot)
        n = len(data.labels)
        if req.start > n or req.count > n - req.start:
            raise CommandError(
                m.ErrorCode.BAD_ARGUMENT, f"items {req.start}+{req.count} past slot size {n}"
            )
        idx = np.arange(req.start, req.start + req.count)
        correct, loss_sum = model.evaluate(self._inputs(model, data, idx), data.labels[idx])
        seconds = npu_latency_s(model.macs, req.count)
        return m.EvalResponse(
            count=req.count,
            correct=correct,
            loss_sum_q16=loss_sum,
            duration_ns=int(seconds * 1e9),
            timing_source=TIMING_MODELED,
        )

    def _weights_crc(self, req: m.WeightsCrcRequest) -> m.WeightsCrcResponse:
        if self.model is None:
            raise CommandError(m.ErrorCode.NO_MODEL, "no model loaded: send LOAD_MODEL first")
        return m.WeightsCrcResponse(
            crc32=self.model.weights_crc(), updates_applied=self.model.updates_applied
        )


def _newer(seq: int, last: int) -> bool:
    """Whether ``seq`` comes after ``last`` in the 16-bit sequence space (window of 32767)."""
    return 1 <= (seq - last) & 0xFFFF < 0x8000
