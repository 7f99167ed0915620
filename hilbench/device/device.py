"""The device twin: the firmware's command semantics in Python, frame in, frame out.

It follows docs/protocol.md exactly, as the C firmware (device_fw) does: the device processing
order (version, cache, type, HELLO, session and late copies, length, ranges, state, execute),
one cached response for retries (at most once), the bulk-upload rules with the arena's books
(hilbench/device/store.py, docs/firmware.md "Memory"), and every refusal formatted once from a
declared template (hilbench.protocol.spec.MESSAGES, the model blob's and the ZO sections'
registries), so that its answers are byte-identical to the firmware's. Its timing is
*modeled* by a named cost model (hilbench.npu.cost: the Cortex-M55 the firmware runs on by
default, the Neural-ART projection on request).
"""

from __future__ import annotations

import dataclasses
import secrets
import struct
import zlib
from collections import Counter

import numpy as np

from hilbench import __version__
from hilbench.device import blob, plan
from hilbench.device.device_log import LogRing
from hilbench.device.model import DataSlot, ModelState
from hilbench.device.prefix_books import ItemsRead, PrefixBooks
from hilbench.device.store import DEFAULT_ARENA_BYTES, Arena, ArenaFull
from hilbench.errors import ModelError
from hilbench.npu import cost
from hilbench.protocol import messages as m
from hilbench.protocol import spec
from hilbench.protocol.frames import Frame, encode_frame
from hilbench.zo import head, zocf
from hilbench.zo.rng import batch_indices

TIMING_MODELED = int(spec.TimingSource.MODELED)
FRAME_START = b"\x00"  # a delimiter before every frame flushes any junk the peer holds
CAPABILITIES = (
    spec.CAP_MODELED_TIMING
    | spec.CAP_RESET
    | spec.CAP_APPLY_BATCH
    | spec.CAP_APPLY_PROBED
    | spec.CAP_APPLY_PROBE
    | spec.CAP_INFER
    | spec.CAP_DEVICE_INFO
    | spec.CAP_LOAD_STAGE
    | spec.CAP_HEAD_GRAD
)
_HEADER = struct.Struct("<BBHH")  # version, type, seq, length: what the frame's CRC-32 starts with
#: the twin's boot banner reasons in the backends (first boot, after RESET): the an547's
BANNER_REASONS = {"boot_reason": "power-on", "restart_reason": "software"}
_MODEL = -1  # the model's upload target (data slots are 0..N_SLOTS-1)


class DeviceTwin:
    """A bit-exact software device that answers protocol frames.

    ``boot_nonce`` fixes the nonce of the first boot (the k-th boot after it uses
    ``boot_nonce + k`` mod 2^32; None: a random nonce per boot); ``arena_bytes`` is the memory
    for models and data; ``max_payload`` (256..4096) the largest request payload it accepts
    (the byte-stream endpoint refuses longer frames as ``oversize``); ``modeled_timing`` False
    reports no timing (source 0, duration 0, no CAP_MODELED_TIMING), as the SIL build does."""

    def __init__(
        self,
        *,
        device_id: str = "hilbench-twin",
        firmware: str | None = None,
        arena_bytes: int = DEFAULT_ARENA_BYTES,
        max_payload: int = spec.MAX_PAYLOAD,
        boot_nonce: int | None = None,
        modeled_timing: bool = True,
        timing_model: str = cost.DEFAULT_TIMING_MODEL,
        boot_reason: str | None = None,
        restart_reason: str | None = None,
    ) -> None:
        firmware = f"hilbench-twin {__version__}" if firmware is None else firmware
        for what, text in (("device_id", device_id), ("firmware", firmware)):
            if len(text.encode("utf-8")) > spec.MAX_STRING:
                raise ValueError(
                    f"{what} {text!r} is longer than {spec.MAX_STRING} bytes of UTF-8: shorten it"
                )
        if not spec.MIN_DEVICE_PAYLOAD <= max_payload <= spec.MAX_PAYLOAD:
            raise ValueError(
                f"max_payload {max_payload} is outside "
                f"{spec.MIN_DEVICE_PAYLOAD}..{spec.MAX_PAYLOAD}: choose one in that range"
            )
        if not 0 <= arena_bytes < 2**32 or arena_bytes % 16:
            raise ValueError(
                f"arena_bytes {arena_bytes} must be a multiple of 16 in 0..2^32-16, "
                "as a device's arena is (docs/firmware.md)"
            )
        if boot_nonce is not None and not 0 <= boot_nonce < 2**32:
            raise ValueError(f"boot_nonce {boot_nonce} is outside 0..2^32-1")
        self.device_id = device_id
        self.firmware = firmware
        self.arena_bytes = arena_bytes
        self.max_payload = max_payload
        self.fixed_nonce = boot_nonce
        #: keep each slot's activations at the frozen prefix's cut, as the firmware does
        #: (the same answers; False: every EVAL and PROBE from the inputs, the reference)
        self.prefix_cache = True
        self.modeled_timing = modeled_timing
        #: which cost model the modeled durations come from (hilbench.npu.cost.TIMING_MODELS)
        self.timing_model = cost.timing_model(timing_model)
        self._costs: tuple[object, list[cost.LayerCost]] | None = None
        #: the loaded model's frozen-prefix figures for one item (plan.probe_scratch), once
        self._one_item: tuple[object, plan.ProbeScratch] | None = None
        self.capabilities = CAPABILITIES & ~(0 if modeled_timing else spec.CAP_MODELED_TIMING)
        self.boots = 0
        self.stats: Counter[str] = Counter()
        # the boot banner's reason (docs/protocol.md, "Device log"): of the first boot, and of
        # the boots after it (RESET); None: no banner, as the C test port (a frame in, its
        # answer out); the backends give it BANNER_REASONS, a board's
        # ("power-on", "software")
        self.boot_reason, self.restart_reason = boot_reason, restart_reason
        self.log = LogRing()
        self.boot()

    def boot(self) -> None:
        """Power-on state: a new boot nonce, no model, no data, no session, empty cache."""
        if self.fixed_nonce is None:
            self.boot_nonce = secrets.randbits(32)
        else:
            self.boot_nonce = (self.fixed_nonce + self.boots) & 0xFFFFFFFF
        self.boots += 1
        self.arena = Arena(self.arena_bytes)
        self._books = PrefixBooks()  # the firmware's prefix cache: which items it holds
        self.model: ModelState | None = None
        self.slots: dict[int, DataSlot] = {}
        self._uploads: dict[int, tuple[int, bytearray]] = {}  # target -> (total_len, bytes)
        self._cache: tuple[tuple[int, int, int], bytes] | None = None  # (seq, type, crc), answer
        self._session: int | None = None  # the host's HELLO token, None until HELLO
        self._probed: np.ndarray | None = None  # seeds of the last PROBE, for APPLY_PROBED
        self._staged: dict[int, bytearray] = {}  # LOAD_STAGE target -> its bytes (debug_write)
        self._forget_infer()
        self._last_seq = 0
        self.stats["boots"] += 1
        self.log.clear()
        reason = self.boot_reason if self.boots == 1 else self.restart_reason
        if reason is not None:
            self.log.banner(self.device_id, self.firmware, reason)

    def reset(self) -> None:
        """What a reset (watchdog, brown-out, the reset button) does: reboot, lose everything."""
        self.boot()

    @property
    def last_seq(self) -> int:
        return self._last_seq

    @property
    def session(self) -> int | None:
        return self._session

    @property
    def cached(self) -> bytes | None:
        """The cached response bytes (None after boot)."""
        return None if self._cache is None else self._cache[1]

    # --- frames: the device processing order (docs/protocol.md) --------------------------
    def handle(self, frame: Frame) -> bytes:
        """The encoded response to one intact frame (b"" when it is dropped)."""
        self.stats["frames"] += 1
        payload = frame.payload
        head = _HEADER.pack(frame.version, frame.type, frame.seq, len(payload))
        key = (frame.seq, frame.type, zlib.crc32(payload, zlib.crc32(head)))
        if frame.version != spec.PROTOCOL_VERSION:  # 1
            return self._refuse(
                key, spec.refusal("BAD_VERSION", spec.PROTOCOL_VERSION, frame.version)
            )
        cache = self._cache
        if cache is not None and cache[0] == key:  # 2
            self.stats["retries_answered_from_cache"] += 1
            return cache[1]
        if not spec.FIRST_REQUEST <= frame.type <= spec.LAST_REQUEST:  # 3
            return self._refuse(key, spec.refusal("UNKNOWN_TYPE", frame.type))
        if frame.type == spec.MessageType.HELLO:  # 4
            try:
                hello = m.decode_request(frame)
            except (m.MessageError, spec.MessageError) as exc:
                return self._refuse(key, exc)
            if hello.session == self._session and not spec.newer(frame.seq, self._last_seq):
                self.stats["stale_dropped"] += 1
                return b""  # a late copy of a HELLO of this session
            self._session = hello.session
            self._last_seq = frame.seq
            return self._respond(key, self._hello())
        if self._session is None:  # 5
            return self._refuse(key, spec.refusal("NO_SESSION"))
        if not spec.newer(frame.seq, self._last_seq):
            self.stats["stale_dropped"] += 1
            return b""  # a late copy of a request already answered: never run it twice
        self._last_seq = frame.seq
        try:
            request = m.decode_request(frame)  # 6, 7
            response = self._dispatch(request)  # 8, 9
        except (m.MessageError, spec.MessageError) as exc:
            return self._refuse(key, exc)
        except Exception as exc:  # a bug in the twin: answer it, do not go silent
            self.stats["internal_errors"] += 1
            return self._refuse(key, spec.refusal("INTERNAL", f"{type(exc).__name__}: {exc}"))
        encoded = self._respond(key, response)
        if frame.type == spec.MessageType.RESET:
            self.reset()  # after the answer is built: it goes out, then the device reboots
        return encoded

    def bad_frame(self, kind: str) -> bytes:
        """Count a frame the decoder dropped; the ERROR BAD_FRAME answer (seq 0, not cached)."""
        self.stats[f"bad_frame_{kind}"] += 1
        text = spec.format_message(spec.MESSAGES["BAD_FRAME"], (kind,))
        payload = m.ErrorResponse(code=spec.ErrorCode.BAD_FRAME, request_type=0, message=text)
        return FRAME_START + encode_frame(spec.MessageType.ERROR, 0, payload.pack())

    def _respond(self, key: tuple[int, int, int], response: m.Message) -> bytes:
        seq, frame_type, _ = key
        encoded = FRAME_START + encode_frame(frame_type | spec.RESPONSE_BIT, seq, response.pack())
        self._cache = (key, encoded)
        return self._with_log(encoded)

    def _with_log(self, answer: bytes) -> bytes:
        """The device's waiting LOG frames, then ``answer`` (a session is open), as
        device_fw/core/device.c sends them."""
        if self._session is None or not self.log.lines:
            return answer
        return self.log.flush() + answer

    def _refuse(self, key: tuple[int, int, int], exc: Exception) -> bytes:
        """The ERROR answer to a refused frame; it replaces the cache like any answer."""
        code = spec.ErrorCode(exc.code)
        self.stats[f"error_{code.name}"] += 1
        text = spec.format_message("%s", (str(exc),))  # at most 256 bytes, cut on a character
        seq, frame_type, _ = key
        payload = m.ErrorResponse(code=code, request_type=frame_type, message=text)
        encoded = FRAME_START + encode_frame(spec.MessageType.ERROR, seq, payload.pack())
        self._cache = (key, encoded)
        return self._with_log(encoded)

    # --- commands -----------------------------------------------------------------------
    def _dispatch(self, req: m.Message) -> m.Message:
        handler = {
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
            m.InferRequest: self._infer,
            m.DeviceInfoRequest: self._device_info,
            m.LoadStageRequest: self._load_stage,
            m.LoadCommitRequest: self._load_commit,
            m.HeadGradRequest: self._head_grad,
        }[type(req)]
        if not isinstance(req, m.InferRequest):
            self._forget_infer()  # any other request may overwrite the activations
        return handler(req)

    def _hello(self) -> m.HelloResponse:
        return m.HelloResponse(
            protocol_version=spec.PROTOCOL_VERSION,
            max_payload=self.max_payload,
            boot_nonce=self.boot_nonce,
            capabilities=self.capabilities,
            device_id=self.device_id,
            firmware=self.firmware,
        )

    # --- bulk uploads (docs/protocol.md, "Bulk transfer") ---------------------------------
    def _discard(self, target: int) -> None:
        """Drop the target's upload in progress and what it holds (the model or the slot)."""
        self._uploads.pop(target, None)
        self._staged.pop(spec.STAGE_MODEL if target == _MODEL else target, None)
        if target == _MODEL:
            self.model = None
            self._probed = None
            self.arena.discard_model()
        else:
            self.slots.pop(target, None)
            self.arena.discard_slot(target)

    def _receive(self, target: int, name: str, total: int, offset: int, chunk: bytes):
        """Append one chunk; (total_len, the whole blob) once complete, else None."""
        if offset == 0:
            self._discard(target)
            try:
                if target == _MODEL:
                    self.arena.start_model(total)
                else:
                    self.arena.start_slot(target, total)
            except ArenaFull as full:
                raise spec.refusal(
                    "BLOB_TOO_LARGE", name, total, full.needed, full.free, self.arena_bytes
                ) from None
            self._uploads[target] = (total, bytearray())
        else:
            upload = self._uploads.get(target)
            if upload is None:
                raise spec.refusal("BULK_NOT_STARTED", name, offset)
            if offset != len(upload[1]):
                raise spec.refusal("BULK_OFFSET", name, offset, len(upload[1]))
            if total != upload[0]:
                raise spec.refusal("BULK_TOTAL", name, total, upload[0], len(upload[1]))
        buf = self._uploads[target][1]
        buf += chunk
        if len(buf) < total:
            return None
        del self._uploads[target]
        return bytes(buf)

    def _load_model(self, req: m.LoadModelRequest) -> m.LoadModelResponse:
        data = self._receive(_MODEL, req.NAME, req.total_len, req.offset, req.chunk)
        if data is None:
            received = len(self._uploads[_MODEL][1])
            return m.LoadModelResponse(received=received, complete=0, model_crc32=0)
        crc = self._model_complete(data)
        return m.LoadModelResponse(received=len(data), complete=1, model_crc32=crc)

    def _model_complete(self, data: bytes) -> int:
        """A model's bytes are all in (LOAD_MODEL's last chunk, LOAD_COMMIT): parse, check,
        place its working memory; the CRC-32 of the blob without its trailer."""
        try:
            graph, sections = blob.parse(data)
            state = ModelState.from_parts(graph, sections, blob_crc=zlib.crc32(data))
        except (ModelError, ValueError) as exc:  # blob, LOSS and ZOCF refusals
            self._discard(_MODEL)
            text = getattr(exc, "message", None) or str(exc)
            raise spec.MessageError(text, spec.ErrorCode.BAD_MODEL) from None
        except Exception:  # a bug (answered INTERNAL): hold nothing half-loaded either
            self._discard(_MODEL)
            raise
        act = plan.act_bytes(graph)
        zo = zocf.zo_work_bytes(state.zo, state.trained)
        try:
            self.arena.finish_model(act, zo)
        except ArenaFull as full:
            self._discard(_MODEL)
            raise spec.refusal(
                "MODEL_MEMORY", full.needed, full.act, full.zo, full.free, self.arena_bytes
            ) from None
        self.model = state
        self._probed = None
        return zlib.crc32(data[: len(data) - spec.CRC_SIZE])  # the blob without its CRC trailer

    def _load_data(self, req: m.LoadDataRequest) -> m.LoadDataResponse:
        data = self._receive(req.slot, req.NAME, req.total_len, req.offset, req.chunk)
        if data is None:
            received = len(self._uploads[req.slot][1])
            return m.LoadDataResponse(slot=req.slot, received=received, complete=0, n_items=0)
        n = self._data_complete(req.slot, data)
        return m.LoadDataResponse(slot=req.slot, received=len(data), complete=1, n_items=n)

    def _data_complete(self, slot: int, data: bytes) -> int:
        """A data slot's bytes are all in: the data blob's rules; its n_items."""
        try:
            n, item, classes = spec.check_data_blob(data)
        except spec.MessageError:
            self._discard(slot)
            raise
        head = spec.DATA_HEADER_BYTES
        inputs = np.frombuffer(data, np.int8, n * item, head).reshape(n, item).copy()
        labels = np.frombuffer(data, np.uint8, n, head + n * item).copy()
        self.slots[slot] = DataSlot(inputs=inputs, labels=labels, n_classes=classes)
        self.arena.slot_complete()
        return n

    # --- DEVICE_INFO and staged uploads (docs/protocol.md) ---------------------------------
    def _device_info(self, req: m.DeviceInfoRequest) -> m.DeviceInfoResponse:
        """The twin's own figures: its arena (at address 0 of its own memory), the clock its
        cost model assumes; no cache, UART, watchdog or tick counter of its own."""
        modeled = self.modeled_timing and self.timing_model.key == "m55"
        return m.DeviceInfoResponse(
            cpu_hz=int(cost.M55_CLOCK_HZ) if modeled else 0,
            caches=0,
            arena_bytes=self.arena_bytes,
            arena_base=0,
            uart_baud=0,
            uart_kernel_hz=0,
            uart_overrun=0,
            uart_framing=0,
            uart_noise=0,
            uart_dropped=0,
            watchdog_ms=0,
            reset_cause=0,
            reset_flags=0,
            bringup_errors=0,
            ticks=0,
            tick_ns_q16=0,
            timing_source=TIMING_MODELED if self.modeled_timing else 0,
        )

    def _load_stage(self, req: m.LoadStageRequest) -> m.LoadStageResponse:
        """Reserve the target's region as an upload at offset 0 does; where it starts."""
        target = _MODEL if req.target == spec.STAGE_MODEL else req.target
        self._receive(target, req.NAME, req.total_len, 0, b"")
        self._staged[req.target] = bytearray(req.total_len)
        offset = 0 if target == _MODEL else self.arena.slot_offset(target)
        return m.LoadStageResponse(target=req.target, offset=offset, total_len=req.total_len)

    def _load_commit(self, req: m.LoadCommitRequest) -> m.LoadCommitResponse:
        """The staged bytes' CRC-32 must be the host's; then they complete as a last chunk."""
        staged = self._staged.get(req.target)
        if staged is None:
            raise spec.refusal("STAGE_NONE", req.NAME, req.target)
        if req.total_len != len(staged):
            raise spec.refusal("STAGE_TOTAL", req.NAME, req.total_len, req.target, len(staged))
        got = zlib.crc32(staged)
        if got != req.crc32:  # stays staged: the host may write again and commit
            raise spec.refusal("STAGE_CRC", req.NAME, len(staged), got, req.crc32)
        data = bytes(self._staged.pop(req.target))
        target = _MODEL if req.target == spec.STAGE_MODEL else req.target
        del self._uploads[target]
        crc = n = 0
        if target == _MODEL:
            crc = self._model_complete(data)
        else:
            n = self._data_complete(target, data)
        return m.LoadCommitResponse(
            target=req.target, received=len(data), model_crc32=crc, n_items=n
        )

    def debug_write(self, address: int, data: bytes) -> None:
        """What a debugger's memory write does to the twin: bytes at ``address`` of its arena
        (its base is 0), which must lie inside a staged upload (the twin keeps no other
        arena bytes)."""
        for t, buf in self._staged.items():
            start = 0 if t == spec.STAGE_MODEL else self.arena.slot_offset(t)
            if start is not None and start <= address and address + len(data) <= start + len(buf):
                buf[address - start : address - start + len(data)] = data
                return
        raise ValueError(
            f"the twin's debug write at {address:#x} ({len(data)} bytes) is outside every "
            "staged upload: send LOAD_STAGE first"
        )

    # --- state checks ---------------------------------------------------------------------
    def _need_model(self) -> ModelState:
        if self.model is None:
            raise spec.refusal("NO_MODEL")
        return self.model

    def _model_and_slot(self, slot: int) -> tuple[ModelState, DataSlot]:
        """The slot checks (PROBE, EVAL, APPLY_PROBE, INFER): a model, data in the slot,
        items of the model's input size, the model's number of classes."""
        model = self._need_model()
        data = self.slots.get(slot)
        if data is None:
            raise spec.refusal("NO_DATA", slot)
        if data.item_size != model.input_size:
            raise spec.refusal("SLOT_ITEM_SIZE", slot, data.item_size, model.input_size)
        if data.n_classes != model.output_size:
            raise spec.refusal("SLOT_CLASSES", slot, data.n_classes, model.output_size)
        return model, data

    def _fits(self, name: str, size: int) -> None:
        if size > self.max_payload:
            raise spec.refusal("ANSWER_TOO_LARGE", name, size, self.max_payload)

    def _check_probed(self, name: str, q: int) -> np.ndarray:
        if self._probed is None:
            raise spec.refusal("PROBED_NONE", name)
        if len(self._probed) != q:
            raise spec.refusal("PROBED_Q", name, q, len(self._probed))
        return self._probed

    # --- the ZO commands ------------------------------------------------------------------
    def _timing(
        self, inputs: int, passes: int = 1, once: int = 0, once_inputs: int | None = None
    ) -> tuple[int, int]:
        """(duration_ns, timing_source) of ``passes`` forward passes over ``inputs`` inputs of
        the loaded model, the ops before ``once`` (a frozen prefix) run once over
        ``once_inputs`` of them (default all): the cost model :attr:`timing_model` names, or
        none."""
        if not self.modeled_timing:
            return 0, int(spec.TimingSource.NONE)
        model = self._need_model()
        if self._costs is None or self._costs[0] is not model:
            self._costs = (model, cost.layer_costs(model.graph))
        key = self.timing_model.key
        t = cost.latency_of(
            self._costs[1], key, inputs=inputs, passes=passes, once=once, once_inputs=once_inputs
        )
        return int(t.seconds * 1e9), TIMING_MODELED

    def _inputs(self, model: ModelState, data: DataSlot, idx: np.ndarray) -> np.ndarray:
        shape = model.graph.tensors[model.graph.input].shape
        return data.inputs[idx].reshape((len(idx), *shape))

    def _probe(self, req: m.ProbeRequest) -> m.ProbeResponse:
        model, data = self._model_and_slot(req.slot)
        self._fits(req.NAME, spec.probe_response_size(len(req.seeds)))
        return self._run_probe(model, data, req)

    def _prefix_of(self, model: ModelState) -> plan.ProbeScratch:
        """The model's cut, prefix entry and copy bytes (plan.probe_scratch for one item),
        computed once per loaded model."""
        if self._one_item is None or self._one_item[0] is not model:
            self._one_item = (model, plan.probe_scratch(model.graph, model.trained, 1))
        return self._one_item[1]

    def _read_at_cut(
        self, model: ModelState, slot: int, data: DataSlot, idx: np.ndarray
    ) -> ItemsRead | None:
        """What the firmware's prefix cache makes of items ``idx`` of ``slot`` (None: no cache
        part for it: no frozen prefix, the reference path, or no room for one entry): the
        same books as model.c cache_of, kept while the store's books stand."""
        self._books.hold(self.arena.generation, self.arena.free())
        if not self.prefix_cache:
            return None
        sc = self._prefix_of(model)
        if not sc.cut:
            return None
        read = self._books.read(slot, len(data.labels), sc.prefix_bytes, sc.copy_bytes, idx)
        self.stats["prefix_cache_made"] += read.fresh - read.uncached
        return None if self._books.parts[slot].cap == 0 else read

    def _run_probe(self, model: ModelState, data: DataSlot, req: m.ProbeRequest):
        idx = batch_indices(req.batch_seed, len(data.labels), req.batch_size)
        at_cut = model.at_cut(req.slot, data, idx) if self.prefix_cache else None
        x = self._inputs(model, data, idx) if at_cut is None else None
        lp, lm = model.probe(x, data.labels[idx], req.seeds, req.eps, at_cut=at_cut)
        # what the firmware's PROBE keeps in the arena's free bytes (the same numbers either
        # way): counted, for the books and the modeled time (plan.probe_scratch, model.c
        # hb_model_probe): the cache's part first, then in what it leaves the prefix of the
        # items without an entry, the copy, the words
        used = plan.probe_scratch(
            model.graph, model.trained, req.batch_size, model.zo.distribution, model.zo.pool_size
        )
        read = self._read_at_cut(model, req.slot, data, idx)
        free = self._books.scratch()
        if read is not None:
            used = dataclasses.replace(
                used, prefix_bytes=read.uncached * self._prefix_of(model).prefix_bytes
            )
        pre, copy = used.plan(free)
        self.stats["probe_prefix"] += pre
        self.stats["probe_copy"] += copy
        self.stats["probe_words"] += used.words(free)
        self._probed = np.array(req.seeds, dtype=np.uint32)
        q = len(req.seeds)
        passes = q + 1 if model.zo.one_sided else 2 * q
        # the prefix's runs: once per entry made, and per item without one once if the
        # scratch holds its activations, else every pass
        fresh, bare = (
            (0, req.batch_size) if read is None else (read.fresh - read.uncached, read.uncached)
        )
        prefix_runs = fresh + bare * (1 if pre else passes)
        duration, source = self._timing(
            req.batch_size, passes, once=used.cut, once_inputs=prefix_runs if used.cut else None
        )
        return m.ProbeResponse(
            q=q,
            loss_plus=lp,
            loss_minus=lm,
            duration_ns=duration,
            timing_source=source,
        )

    def _apply(self, req: m.ApplyRequest) -> m.ApplyResponse:
        model = self._need_model()
        model.apply(req.seeds, req.coeffs)
        return m.ApplyResponse(updates_applied=model.updates_applied)

    def _apply_probed(self, req: m.ApplyProbedRequest) -> m.ApplyProbedResponse:
        model = self._need_model()
        seeds = self._check_probed(req.NAME, len(req.coeffs))
        model.apply(seeds, req.coeffs)
        return m.ApplyProbedResponse(updates_applied=model.updates_applied)

    def _apply_probe(self, req: m.ApplyProbeRequest) -> m.ApplyProbeResponse:
        """APPLY_PROBED, then PROBE; both parts are checked before either runs."""
        self._need_model()
        seeds = self._check_probed(req.NAME, len(req.coeffs))
        model, data = self._model_and_slot(req.probe.slot)
        self._fits(req.NAME, spec.apply_probe_response_size(len(req.probe.seeds)))
        model.apply(seeds, req.coeffs)
        applied = model.updates_applied
        probe = self._run_probe(model, data, req.probe)
        return m.ApplyProbeResponse(updates_applied=applied, probe=probe)

    def _apply_batch(self, req: m.ApplyBatchRequest) -> m.ApplyBatchResponse:
        model = self._need_model()
        for step in req.steps:
            model.apply(step.seeds, step.coeffs)
        return m.ApplyBatchResponse(updates_applied=model.updates_applied)

    def _head_grad(self, req: m.HeadGradRequest) -> m.HeadGradResponse:
        """The hybrid's exact head (hilbench/zo/head.py): checks in order, then one
        unperturbed pass over PROBE's batch of batch_seed, the gradient and the update."""
        model, data = self._model_and_slot(req.slot)
        found = model.head_op()
        if isinstance(found[0], str) and found[0].startswith("HEAD_"):
            raise spec.refusal(found[0], req.NAME, *found[1])
        w = model.graph.tensors[found[0]].data
        m_out, k = w.shape
        if len(req.rates) != m_out:
            raise spec.refusal("HEAD_CHANNELS", req.NAME, len(req.rates), m_out)
        need = head.accumulator_bytes(m_out, k)
        if need > self.arena.free():
            raise spec.refusal("HEAD_MEMORY", req.NAME, need, self.arena.free())
        # the accumulators take the free bytes from the bottom: a prefix cache they would reach
        # is forgotten (commands.c), its entries made again as commands need them
        self._books.hold(self.arena.generation, self.arena.free())
        if self._books.cache_bytes and need > self._books.scratch():
            self._books.forget()
        idx = batch_indices(req.batch_seed, len(data.labels), req.batch_size)
        x, y = self._inputs(model, data, idx), data.labels[idx]
        loss_q16 = model.head_grad(x, y, np.asarray(req.rates), req.bias_gain, req.round_seed)
        duration, source = self._timing(req.batch_size, 1)
        if source == TIMING_MODELED:  # and the gradient, on the M55 with either model
            duration += int(cost.m55_head_grad_seconds(m_out, k, req.batch_size) * 1e9)
        return m.HeadGradResponse(
            head_crc=model.head_crc(),
            loss=loss_q16,
            grads_applied=model.head_grads,
            duration_ns=duration,
            timing_source=source,
        )

    def _eval(self, req: m.EvalRequest) -> m.EvalResponse:
        model, data = self._model_and_slot(req.slot)
        n = len(data.labels)
        if req.start + req.count > n:
            raise spec.refusal(
                "EVAL_PAST_END", req.NAME, req.start, req.start + req.count - 1, req.slot, n
            )
        idx = np.arange(req.start, req.start + req.count)
        at_cut = model.at_cut(req.slot, data, idx) if self.prefix_cache else None
        x = self._inputs(model, data, idx) if at_cut is None else None
        correct, loss_sum = model.evaluate(x, data.labels[idx], at_cut=at_cut)
        read = self._read_at_cut(model, req.slot, data, idx)
        if read is None:
            duration, source = self._timing(req.count)
        else:  # the items with an entry made before start at the cut
            cut = self._prefix_of(model).cut
            duration, source = self._timing(req.count, once=cut, once_inputs=read.fresh)
        return m.EvalResponse(
            count=req.count,
            correct=correct,
            loss_sum_q16=loss_sum,
            duration_ns=duration,
            timing_source=source,
        )

    def _forget_infer(self) -> None:
        """INFER's state between its frames: the input received so far (its pieces) and the
        output of its last forward pass, with the (slot, index) it ran (docs/protocol.md)."""
        self._infer_staged = bytearray()
        self._infer_held: tuple[int, int, np.ndarray] | None = None

    def _infer(self, req: m.InferRequest) -> m.InferResponse:
        model = self._need_model()
        total = model.output_size
        if req.out_offset >= total:
            raise spec.refusal("INFER_OUT_OFFSET", req.NAME, req.out_offset, total)
        k = len(req.input)
        if k > 0:  # a piece of the input (slot and index are 0: checked with the ranges)
            end = req.in_offset + k
            if end > model.input_size:
                raise spec.refusal("INFER_INPUT_SIZE", req.NAME, end, model.input_size)
            staged = len(self._infer_staged)
            if req.in_offset != 0 and req.in_offset != staged:
                raise spec.refusal("INFER_INPUT_OFFSET", req.NAME, req.in_offset, staged)
            if req.in_offset == 0:
                self._infer_staged = bytearray()
            self._infer_staged += req.input
            self._infer_held = None
            if end < model.input_size:  # more pieces to come: nothing runs yet
                return self._infer_part(total, np.zeros(0, np.int8), 0, 0, 0)
            x = np.frombuffer(bytes(self._infer_staged), np.int8)
            self._infer_staged = bytearray()
            return self._infer_run(model, x, 0, 0, req.out_offset)
        if req.out_offset > 0:  # read the held output on
            held = self._infer_held
            if held is None or held[:2] != (req.slot, req.index):
                raise spec.refusal("INFER_NOT_HELD", req.NAME, req.slot, req.index, req.out_offset)
            return self._infer_part(total, held[2], req.out_offset, 0, 0)
        model, data = self._model_and_slot(req.slot)  # item `index` of `slot`
        n = len(data.labels)
        if req.index >= n:
            raise spec.refusal("INFER_INDEX", req.NAME, req.index, req.slot, n)
        self._infer_staged = bytearray()  # the forward pass overwrites the input tensor
        return self._infer_run(model, data.inputs[req.index], req.slot, req.index, 0)

    def _infer_run(self, model: ModelState, x: np.ndarray, slot: int, index: int, offset: int):
        shape = model.graph.tensors[model.graph.input].shape
        output = np.ravel(model.infer(x.reshape(shape))).astype(np.int8)
        self._infer_held = (slot, index, output)
        duration, source = self._timing(1)
        return self._infer_part(model.output_size, output, offset, duration, source)

    def _infer_part(self, total: int, output, offset: int, duration: int, source: int):
        """The answer: as much of ``output`` from ``offset`` as ``max_payload`` carries."""
        room = self.max_payload - spec.infer_response_size(0)
        part = np.asarray(output, np.int8)[offset : offset + room]
        return m.InferResponse(total=total, output=part, duration_ns=duration, timing_source=source)

    def _weights_crc(self, req: m.WeightsCrcRequest) -> m.WeightsCrcResponse:
        model = self._need_model()
        return m.WeightsCrcResponse(
            crc32=model.weights_crc(), updates_applied=model.updates_applied
        )
