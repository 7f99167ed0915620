"""Differential testing: the same random request streams to the twin and to the SIL firmware.

Both devices get identical bytes and must answer identical bytes: the twin runs in this
process (``FrameEndpoint.feed``), the C firmware as ``hilbench-sil --stdio``. Both are
configured alike (boot nonce, identity, arena, max_payload) and report no timing, so nothing
is masked: every divergence is a bug in one of the two.

The streams mix valid sessions (uploads of real zoo models with several ZO methods, data,
PROBE / APPLY / EVAL / INFER ...) with what a hostile or broken link sends: stale, duplicated
and reordered frames, wrong versions and types, truncated and padded payloads, fields out of
range, mutated model blobs (CRC fixed up so the deeper checks run), bulk edge cases, garbage
and damaged frames, oversize frames, resets.

After each action the host sends ``MARKER`` (an empty frame, answered BAD_FRAME "short" by
both, touching nothing), so the end of every answer is known without timeouts.

Another firmware can stand in for the SIL (``run(..., firmware=factory)``): anything with
SilStdio's ``send``/``receive``/``exchange``/``close``. One that really reboots (QEMU) loses
the bytes that follow a RESET in the same write, as a board would; it says so with
``reboot_drops_input = True`` and ``after_reboot()`` (wait until it listens again), and then
each write ends at the action that rebooted the twin.

    python -m tests.sil.differential --frames 1000000 --seed 7     # a longer run
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np

from hilbench.device import DeviceTwin, FrameEndpoint
from hilbench.protocol import data_blob, spec
from hilbench.protocol import messages as m
from hilbench.protocol.frames import FrameDecoder, encode_frame

MARKER = b"\x00\x01\x00"  # an empty frame: BAD_FRAME "short", no state touched
DEVICE_ID = "hilbench-diff"
FIRMWARE = "hilbench differential"
ANSWER_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class DeviceConfig:
    """What both devices are started with."""

    boot_nonce: int = 0xD1FF0001
    arena_bytes: int = spec.DEFAULT_ARENA_BYTES
    max_payload: int = spec.MAX_PAYLOAD
    # the boot banner's reasons (first boot, after RESET): the SIL's; the an547's differ
    reasons: tuple[str, str] = ("host", "host")

    def twin(self) -> DeviceTwin:
        return DeviceTwin(
            device_id=DEVICE_ID,
            firmware=FIRMWARE,
            arena_bytes=self.arena_bytes,
            max_payload=self.max_payload,
            boot_nonce=self.boot_nonce,
            modeled_timing=False,
            boot_reason=self.reasons[0],
            restart_reason=self.reasons[1],
        )

    def sil_args(self) -> list[str]:
        return [
            "--stdio",
            f"--boot-nonce={self.boot_nonce}",
            f"--device-id={DEVICE_ID}",
            f"--firmware={FIRMWARE}",
            f"--arena-bytes={self.arena_bytes}",
            f"--max-payload={self.max_payload}",
        ]


def receive_bytes(source, read, n_bytes: int, timeout: float) -> bytes:
    """Up to ``n_bytes`` from ``read(n)`` while ``source`` (a selectable) has data within
    ``timeout``; fewer if the firmware goes quiet or closes (SIL pipe and QEMU socket alike)."""
    got = bytearray()
    deadline = time.monotonic() + timeout
    while len(got) < n_bytes:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([source], [], [], left)[0]:
            break
        chunk = read(n_bytes - len(got))
        if not chunk:
            break
        got += chunk
    return bytes(got)


class SilStdio:
    """``hilbench-sil --stdio``: bytes in on a pipe, answers out on another."""

    def __init__(self, binary: Path, config: DeviceConfig) -> None:
        self.proc = subprocess.Popen(
            [str(binary), *config.sil_args()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
        )
        self._out = self.proc.stdout.fileno()

    def send(self, data: bytes) -> threading.Thread:
        """Write ``data`` from a thread (the firmware computes while the twin does)."""
        writer = threading.Thread(target=self._write, args=(data,), daemon=True)
        writer.start()
        return writer

    def _write(self, data: bytes) -> None:
        # if it died, receive() sees the silence and the report says why
        with contextlib.suppress(OSError):
            self.proc.stdin.write(data)

    def exchange(self, data: bytes, n_bytes: int, timeout: float = ANSWER_TIMEOUT_S) -> bytes:
        """Send ``data``; return the first ``n_bytes`` it answers (fewer if it goes quiet)."""
        self.send(data)
        return self.receive(n_bytes, timeout)

    def receive(self, n_bytes: int, timeout: float = ANSWER_TIMEOUT_S) -> bytes:
        """The next ``n_bytes`` the firmware answers (fewer if it goes quiet)."""
        return receive_bytes(self._out, lambda n: os.read(self._out, n), n_bytes, timeout)

    def close(self) -> str:
        """Stop it; its exit code and stderr, for a report."""
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        err = self.proc.stderr.read().decode(errors="replace").strip()
        return f"exit code {self.proc.returncode}" + (f", stderr: {err[-500:]}" if err else "")


# --- the material: real models, ZO methods and data -------------------------------------------


@cache
def blobs() -> tuple[bytes, ...]:
    """Model blobs of the zoo's MLP and CNN with several ZOCF methods (LOSS tables included)."""
    from hilbench.npu import zoo
    from hilbench.npu.blob import to_blob
    from hilbench.zo import zocf
    from hilbench.zo.loss import LossTables

    out = []
    methods = [
        {},
        {"distribution": "gaussian", "layers": "all"},
        {"distribution": "uniform", "pool_size": 256, "pool_seed": 9, "master": "int16"},
        {"estimator": "one-sided", "rounding": "stochastic", "master": "int8"},
        {"layers": "last:1", "per_channel": True, "eps_mults": {"*": 1.5}},
    ]
    for name, seed in (("mlp", 1), ("cnn", 2)):
        g = zoo.build(name, seed=seed)
        tables = LossTables.for_scale(float(g.tensors[g.output].qparams.scale[0]))
        for i, method in enumerate(methods):
            if name == "cnn" and i % 2:
                continue  # the CNN is slower in scalar C: fewer variants
            cfg = zocf.build(g, **method)
            out.append(to_blob(g, {"LOSS": tables.to_bytes(), "ZOCF": cfg.to_bytes()}))
        # the hybrid: the ZOCF leaves the head (the last FC) to HEAD_GRAD
        body = "fc0_*" if name == "mlp" else "conv*"
        cfg = zocf.build(g, layers=body, rounding="stochastic")
        hybrid = to_blob(g, {"LOSS": tables.to_bytes(), "ZOCF": cfg.to_bytes()})
        out += [hybrid, hybrid]  # twice: HEAD_GRAD steps run, not only their refusals
    return tuple(out)


@cache
def model_shapes(blob: bytes) -> tuple[int, int]:
    """(input bytes, classes) of a zoo blob."""
    from hilbench.npu.blob import from_blob

    g, _ = from_blob(blob)
    return int(np.prod(g.input_shape)), int(np.prod(g.output_shape))


def data_blob_for(rng: np.random.Generator, item: int, classes: int, n: int) -> bytes:
    x = rng.integers(-128, 128, (n, item)).astype(np.int8)
    y = rng.integers(0, classes, n).astype(np.uint8)
    return data_blob.encode(x, y, classes)


# --- the host that makes random streams --------------------------------------------------------


@dataclass
class Host:
    """Makes wire bytes: mostly a plausible host, often a broken one."""

    rng: np.random.Generator
    max_payload: int
    seq: int = 0x4000
    session: int = 0x0BADCAFE
    sent: list[bytes] = field(default_factory=list)  # recent frames, for duplicates/reorders
    last_q: int = 2
    model_ok: bool = False  # a model was (probably) loaded: steer towards commands
    need_hello: bool = True  # after a reset: say HELLO soon

    # frame helpers
    def next_seq(self) -> int:
        self.seq = (self.seq + 1) & 0xFFFF
        return self.seq

    def frame(self, frame_type: int, payload: bytes, *, seq: int | None = None, version=None):
        seq = self.next_seq() if seq is None else seq
        if version is None and len(payload) <= spec.MAX_PAYLOAD:
            wire = b"\x00" + encode_frame(frame_type, seq, payload)
        else:  # another version, or too long: by hand (encode_frame refuses both)
            from cobs import cobs

            version = spec.PROTOCOL_VERSION if version is None else version
            body = bytes([version, frame_type]) + seq.to_bytes(2, "little")
            body += (len(payload) & 0xFFFF).to_bytes(2, "little") + payload
            body += zlib.crc32(body).to_bytes(4, "little")
            wire = b"\x00" + cobs.encode(body) + b"\x00"
        self.sent.append(wire)
        del self.sent[:-64]
        return wire

    def chunk_limit(self, fixed: int) -> int:
        return self.max_payload - fixed

    # random values
    def u(self, lo: int, hi: int) -> int:
        return int(self.rng.integers(lo, hi + 1))

    def p(self, x: float) -> bool:
        return bool(self.rng.random() < x)

    def edgy(self, lo: int, hi: int, width: int) -> int:
        """Mostly in lo..hi, sometimes at or just past its edges, sometimes anything."""
        r = self.rng.random()
        if r < 0.85:
            return self.u(lo, hi)
        if r < 0.95:
            return int(self.rng.choice([lo, hi, lo - 1, hi + 1, 0])) % (1 << (8 * width))
        return self.u(0, (1 << (8 * width)) - 1)

    # --- actions: each returns the bytes to send -----------------------------------------
    def hello(self) -> bytes:
        if self.p(0.3):
            self.session = self.u(0, 2**32 - 1)
        payload = m.HelloRequest(session=self.session).pack()
        if self.p(0.05):
            payload = payload[: self.u(0, 5)] if self.p(0.5) else payload + b"\x01"
        seq = None
        if self.p(0.1):  # a stale HELLO of this session (dropped) or a random start
            seq = (self.seq - self.u(0, 5)) & 0xFFFF
        return self.frame(m.MessageType.HELLO, payload, seq=seq)

    def upload(self, blob: bytes, slot: int | None) -> bytes:
        """A whole bulk upload, chunk sizes random; sometimes broken on the way."""
        fixed = 8 if slot is None else 9
        out, offset, total = [], 0, len(blob)
        while True:
            k = min(total - offset, self.u(1, self.chunk_limit(fixed)))
            if self.p(0.02):
                k = self.u(0, 8)  # a short or empty chunk
            start = offset
            if self.p(0.01):
                start = self.u(0, total)  # wrong offset: BAD_ARGUMENT, upload kept
            tot = total if not self.p(0.01) else self.u(1, 2 * total)
            chunk = blob[start : start + k]
            if slot is None:
                payload = start.to_bytes(4, "little")
                payload = tot.to_bytes(4, "little") + payload + chunk
                out.append(self.frame(m.MessageType.LOAD_MODEL, payload))
            else:
                payload = bytes([slot]) + tot.to_bytes(4, "little") + start.to_bytes(4, "little")
                out.append(self.frame(m.MessageType.LOAD_DATA, payload + chunk))
            if start == offset and tot == total:
                offset += len(chunk)
            if offset >= total or self.p(0.005):
                break
        return b"".join(out)

    def load_model(self) -> bytes:
        blob = blobs()[self.u(0, len(blobs()) - 1)]
        r = self.rng.random()
        if r < 0.15:
            return self.upload(self.mutate(blob), None)
        if r < 0.18:  # too large for the arena, or absurd
            size = int(self.rng.choice([2**31, 2**32 - 1, 5 * 2**20]))
            payload = size.to_bytes(4, "little") + (0).to_bytes(4, "little") + blob[:64]
            return self.frame(m.MessageType.LOAD_MODEL, payload)
        self.model_ok = True
        self.current_blob = blob
        return self.upload(blob, None)

    def mutate(self, blob: bytes) -> bytes:
        b = bytearray(blob[:-4])
        for _ in range(self.u(1, 3)):
            r = self.rng.random()
            i = self.u(0, len(b) - 1)
            if r < 0.6:
                b[i] = self.u(0, 255)
            elif r < 0.8:
                b[i] ^= 1 << self.u(0, 7)
            elif r < 0.9:
                del b[i : i + self.u(1, 8)]
            else:
                b[i:i] = bytes(self.u(0, 255) for _ in range(self.u(1, 8)))
        crc = zlib.crc32(bytes(b)) if self.p(0.9) else self.u(0, 2**32 - 1)
        return bytes(b) + crc.to_bytes(4, "little")

    def load_data(self) -> bytes:
        blob = getattr(self, "current_blob", blobs()[0])
        item, classes = model_shapes(blob)
        slot = self.edgy(0, spec.N_SLOTS - 1, 1) if self.p(0.05) else self.u(0, 1)
        r = self.rng.random()
        n = self.u(1, 40)
        if r < 0.8:
            data = data_blob_for(self.rng, item, classes, n)
        elif r < 0.88:  # another item size or class count than the model's
            data = data_blob_for(self.rng, self.u(1, 80), self.u(1, 12), n)
        else:  # a broken blob: header lies, a label too large, bytes missing
            data = bytearray(data_blob_for(self.rng, item, classes, n))
            i = self.u(0, len(data) - 1)
            data[i] = self.u(0, 255)
            if self.p(0.3):
                data = data[: self.u(0, len(data))]
            data = bytes(data) or b"\x01"
        return self.upload(data, slot if slot < 256 else 0)

    def probe_payload(self) -> bytes:
        q = self.edgy(1, 4, 2) if self.p(0.9) else self.u(5, 12)
        self.last_q = q if 1 <= q <= spec.MAX_Q else self.last_q
        batch = self.edgy(1, 6, 2) if self.p(0.97) else self.u(7, 64)
        head = bytes([self.edgy(0, 1, 1)])
        head += batch.to_bytes(2, "little") + self.u(0, 2**32 - 1).to_bytes(4, "little")
        head += self.edgy(1, 6, 2).to_bytes(2, "little") + q.to_bytes(2, "little")
        n = q if q <= 16 else self.u(0, 16)  # a lying count: BAD_LENGTH
        seeds = self.rng.integers(0, 2**32, n, dtype=np.uint64).astype("<u4").tobytes()
        return head + seeds

    def coeffs(self, q: int) -> bytes:
        c = self.rng.integers(-(2**20), 2**20, q)
        if self.p(0.1):
            c[self.u(0, q - 1)] = int(self.rng.choice([2**31 - 1, -(2**31), 2**24, -(2**24)]))
        return c.astype("<i4").tobytes()

    def command(self) -> bytes:
        r = self.rng.random()
        T = m.MessageType
        if r < 0.22:
            return self.frame(T.PROBE, self.probe_payload())
        if r < 0.40:
            q = self.last_q if self.p(0.9) else self.edgy(1, 6, 2)
            payload = q.to_bytes(2, "little") + self.coeffs(max(1, min(q, 16)))[: 4 * q]
            payload += self.probe_payload()
            return self.frame(T.APPLY_PROBE, payload)
        if r < 0.48:
            q = self.last_q if self.p(0.8) else self.edgy(1, 6, 2)
            return self.frame(
                T.APPLY_PROBED, q.to_bytes(2, "little") + self.coeffs(max(1, min(q, 16)))[: 4 * q]
            )
        if r < 0.56:
            q = self.edgy(1, 4, 2)
            n = max(1, min(q, 16))
            seeds = self.rng.integers(0, 2**32, n, dtype=np.uint64).astype("<u4").tobytes()
            return self.frame(T.APPLY, q.to_bytes(2, "little") + seeds[: 4 * q] + self.coeffs(n))
        if r < 0.62:
            steps = self.edgy(1, 3, 2)
            payload = steps.to_bytes(2, "little")
            for _ in range(min(steps, 4)):
                q = self.edgy(1, 3, 2)
                n = max(1, min(q, 8))
                seeds = self.rng.integers(0, 2**32, n, dtype=np.uint64).astype("<u4").tobytes()
                payload += q.to_bytes(2, "little") + seeds + self.coeffs(n)
            return self.frame(T.APPLY_BATCH, payload)
        if r < 0.72:
            start = self.edgy(0, 30, 4)
            count = self.edgy(1, 12, 4)
            payload = bytes([self.edgy(0, 1, 1)]) + start.to_bytes(4, "little")
            return self.frame(T.EVAL, payload + count.to_bytes(4, "little"))
        if r < 0.78:
            return self.frame(T.WEIGHTS_CRC, b"" if self.p(0.95) else b"\x00")
        if r < 0.86:
            slot, index = self.edgy(0, 1, 1), self.edgy(0, 30, 4)
            inline, in_offset = b"", 0
            out_offset = self.edgy(1, 12, 4) if self.p(0.2) else 0  # reading a held output on
            if self.p(0.4):
                item = model_shapes(getattr(self, "current_blob", blobs()[0]))[0]
                item = item if self.p(0.8) else self.u(1, 100)
                inline = self.rng.integers(-128, 128, item).astype(np.int8).tobytes()
                if self.p(0.3):  # a piece: the first half, or the rest after it
                    half = len(inline) // 2
                    in_offset = self.edgy(half, half, 4) if self.p(0.5) else 0
                    inline = inline[half:] if in_offset else inline[:half]
                if self.p(0.8):
                    slot, index = 0, 0
            payload = bytes([slot]) + index.to_bytes(4, "little") + in_offset.to_bytes(4, "little")
            payload += out_offset.to_bytes(4, "little") + inline
            return self.frame(T.INFER, payload)
        if r < 0.885:  # the hybrid's step: mostly on a head of 10 outputs
            payload = bytes([self.edgy(0, 1, 1)]) + self.edgy(1, 8, 2).to_bytes(2, "little")
            payload += self.u(0, 2**32 - 1).to_bytes(4, "little")
            payload += self.u(0, 2**32 - 1).to_bytes(4, "little")
            payload += bytes([self.edgy(0, 24, 1)])
            n = 10 if self.p(0.85) else self.edgy(1, 12, 2)
            rates = self.rng.integers(-(2**20), 2**20, max(1, min(n, 16)))
            if self.p(0.2):
                rates[self.u(0, len(rates) - 1)] = int(self.rng.choice([2**31 - 1, -(2**31)]))
            payload += n.to_bytes(2, "little") + rates.astype("<i4").tobytes()[: 4 * n]
            return self.frame(T.HEAD_GRAD, payload)
        if r < 0.89:
            self.model_ok = False
            self.need_hello = True
            return self.frame(T.RESET, b"")
        return self.broken()

    def broken(self) -> bytes:
        """Something no honest host sends."""
        r = self.rng.random()
        if r < 0.2 and self.sent:  # an older frame again: a cache hit or a late copy
            return self.sent[-self.u(1, len(self.sent))]
        if r < 0.3:  # unknown types, responses sent as requests
            t = int(self.rng.choice([0x00, spec.LAST_REQUEST + 1, 0x7F, 0x81, 0x8B, 0xFE, 0xFF]))
            return self.frame(t, self.rng.bytes(self.u(0, 12)))
        if r < 0.38:  # another protocol version
            return self.frame(self.u(1, 12), self.rng.bytes(self.u(0, 12)), version=self.u(0, 3))
        if r < 0.6:  # a valid-looking request with its payload cut or padded
            t = self.u(1, 12)
            payload = self.probe_payload() if t in (4, 11) else self.rng.bytes(self.u(0, 40))
            if self.p(0.5):
                payload = payload[: self.u(0, len(payload))]
            else:
                payload += self.rng.bytes(self.u(1, 6))
            return self.frame(t, payload)
        if r < 0.7:  # raw garbage, with or without delimiters
            return self.rng.bytes(self.u(1, 60))
        if r < 0.8 and self.sent:  # a damaged copy of a recent frame (bit flips, cut short)
            w = bytearray(self.sent[-1])
            for _ in range(self.u(1, 3)):
                w[self.u(1, len(w) - 2)] ^= 1 << self.u(0, 7)
            if self.p(0.3):
                w = w[: self.u(1, len(w))] + b"\x00"
            return bytes(w)
        if r < 0.88:  # oversize: a payload past max_payload, or a run without a delimiter
            if self.p(0.5):
                return self.frame(m.MessageType.PROBE, self.rng.bytes(self.max_payload + 1))
            run_ = self.rng.integers(1, 256, 5000).astype(np.uint8).tobytes()
            return b"\x00" + run_ + b"\x00"
        # two frames glued, the first without its closing delimiter
        a = self.frame(m.MessageType.WEIGHTS_CRC, b"")
        return a[:-1] + self.frame(m.MessageType.WEIGHTS_CRC, b"")

    def action(self) -> bytes:
        r = self.rng.random()
        if self.need_hello and r < 0.5:
            self.need_hello = False
            return self.hello()
        if r < 0.04:
            return self.hello()
        if r < 0.055 or (not self.model_ok and r < 0.3):
            return self.load_model()
        if r < 0.09:
            return self.load_data()
        if r < 0.93:
            return self.command()
        return self.broken()


# --- the comparison ----------------------------------------------------------------------------


@dataclass
class Divergence:
    first: int  # the actions sent in the write that diverged: first..last (1-based)
    last: int
    sent: bytes
    twin: bytes
    sil: bytes
    sil_status: str

    def report(self, seed: int, config: DeviceConfig) -> str:
        lines = [
            f"twin and SIL firmware diverge at action {self.first}"
            + (f"..{self.last}" if self.last != self.first else "")
            + f" (seed {seed}, {config})",
            f"sent {len(self.sent)} bytes: {self.sent[:200].hex()}",
            f"twin answered: {_describe(self.twin)}",
            f"SIL answered:  {_describe(self.sil)}",
            f"SIL process: {self.sil_status}",
            f"reproduce: python -m tests.sil.differential --seed {seed} "
            f"--frames <n> --arena-bytes {config.arena_bytes} --max-payload {config.max_payload}",
        ]
        return "\n".join(lines)


def _describe(wire: bytes) -> str:
    frames = FrameDecoder().feed(wire)
    parts = []
    for f in frames:
        try:
            msg = m.decode_response(f)
            text = str(msg) if isinstance(msg, m.ErrorResponse) else type(msg).__name__
        except m.MessageError as exc:
            text = f"undecodable ({exc})"
        parts.append(f"[seq {f.seq} type 0x{f.type:02x} {text}]")
    return " ".join(parts) + f" ({len(wire)} bytes: {wire[:120].hex()})"


@dataclass
class Outcome:
    frames: int
    actions: int
    seconds: float
    answers: dict[str, int]
    divergence: Divergence | None


def run(
    binary: Path,
    seed: int,
    frames: int,
    config: DeviceConfig = DeviceConfig(),
    *,
    batch: int = 16,
    stop_after: int | None = None,
    sil_config: DeviceConfig | None = None,
    firmware: Callable[[DeviceConfig], SilStdio] | None = None,
) -> Outcome:
    """Send random streams until ``frames`` request frames went to both; stop at a divergence.

    ``batch`` actions go in one write (one marker after them), so the pipe's round trips do
    not dominate; a divergence is then located by a second run with ``batch=1`` (the streams
    depend on the seed only, never on the answers). ``stop_after``: at most that many actions.
    ``sil_config``: start the firmware otherwise than the twin (to test this tester).
    ``firmware``: makes the firmware under test from its config (default: SilStdio(binary)).
    """
    rng = np.random.default_rng(seed)
    host = Host(rng, config.max_payload)
    device = config.twin()
    twin = FrameEndpoint(device)
    sil = (firmware or (lambda c: SilStdio(binary, c)))(sil_config or config)
    drops_input = getattr(sil, "reboot_drops_input", False)
    marker_answer = twin.feed(MARKER)
    if sil.exchange(MARKER, len(marker_answer)) != marker_answer:
        status = sil.close()
        raise RuntimeError(f"the SIL firmware did not answer the first marker: {status}")
    answers: dict[str, int] = {}
    actions = markers = 0
    started = time.perf_counter()
    divergence = None
    limit = stop_after if stop_after is not None else 2**62
    try:
        while _frames(device, markers) < frames and actions < limit:
            n = min(batch, limit - actions)
            first = actions + 1
            markers += 1
            if drops_input:  # the twin first, action by action: end the write at a reboot
                data, want, rebooted = _until_reboot(host, twin, device, n)
                actions += rebooted or n
                marker = twin.feed(MARKER)
                got = _exchange_rebooting(sil, data, len(want), len(marker), bool(rebooted))
                want += marker
            else:
                data = b"".join(host.action() for _ in range(n))
                actions += n
                writer = sil.send(data + MARKER)
                want = twin.feed(data + MARKER)
                got = sil.receive(len(want))
                writer.join(ANSWER_TIMEOUT_S)
            if got != want:
                divergence = Divergence(first, actions, data, want, got, "")
                break
            _count(answers, want[: -len(marker_answer)])
    finally:
        status = sil.close()
        if divergence is not None:
            divergence.sil_status = status
    elapsed = time.perf_counter() - started
    return Outcome(_frames(device, markers), actions, elapsed, answers, divergence)


def _until_reboot(
    host: Host, twin: FrameEndpoint, device: DeviceTwin, n: int
) -> tuple[bytes, bytes, int]:
    """Up to ``n`` actions, fed to the twin one by one: (bytes, the twin's answers, the count
    of actions if the last one rebooted it, else 0)."""
    data, want = [], []
    for i in range(n):
        boots = device.boots
        action = host.action()
        data.append(action)
        want.append(twin.feed(action))
        if device.boots != boots:
            return b"".join(data), b"".join(want), i + 1
    return b"".join(data), b"".join(want), 0


def _exchange_rebooting(sil, data: bytes, n_want: int, n_marker: int, rebooted: bool) -> bytes:
    """Send ``data`` and the marker to a firmware that drops input at a reboot, and take
    ``n_want`` + ``n_marker`` answer bytes: after a rebooting write, wait until it listens
    again before the marker."""
    if not rebooted:
        writer = sil.send(data + MARKER)
        got = sil.receive(n_want + n_marker)
        writer.join(ANSWER_TIMEOUT_S)
        return got
    sil.send(data).join(ANSWER_TIMEOUT_S)
    got = sil.receive(n_want)
    sil.after_reboot()
    return got + sil.exchange(MARKER, n_marker)


def locate(
    binary: Path,
    seed: int,
    config: DeviceConfig,
    divergence: Divergence,
    sil_config: DeviceConfig | None = None,
    firmware: Callable[[DeviceConfig], SilStdio] | None = None,
) -> Divergence:
    """The first single action that diverges, by replaying the seed one action at a time."""
    again = run(
        binary,
        seed,
        2**62,
        config,
        batch=1,
        stop_after=divergence.last,
        sil_config=sil_config,
        firmware=firmware,
    )
    return again.divergence or divergence


def _frames(twin: DeviceTwin, markers: int) -> int:
    """Frames the device received (intact or damaged), the markers not counted."""
    bad = sum(v for k, v in twin.stats.items() if k.startswith("bad_frame_"))
    return twin.stats["frames"] + bad - markers - 1


def _count(answers: dict[str, int], wire: bytes) -> None:
    for f in FrameDecoder().feed(wire):
        if f.type == m.ERROR:
            try:
                key = m.ErrorCode(int.from_bytes(f.payload[:2], "little")).name
            except ValueError:
                key = "ERROR ?"
        else:
            key = m.type_name(f.type)
        answers[key] = answers.get(key, 0) + 1


def main(argv: list[str] | None = None) -> int:
    from hilbench.launch.sil import sil_binary

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=None, help="default: a random seed, printed")
    ap.add_argument("--arena-bytes", type=int, default=spec.DEFAULT_ARENA_BYTES)
    ap.add_argument("--max-payload", type=int, default=spec.MAX_PAYLOAD)
    ap.add_argument("--fw", help="the SIL program (default: build device_fw)")
    args = ap.parse_args(argv)
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    config = DeviceConfig(arena_bytes=args.arena_bytes, max_payload=args.max_payload)
    print(f"differential run: seed {seed}, {args.frames:,} frames, {config}", flush=True)
    binary = sil_binary(args.fw)
    out = run(binary, seed, args.frames, config)
    if out.divergence:
        print(locate(binary, seed, config, out.divergence).report(seed, config), file=sys.stderr)
        return 1
    print(
        f"{out.frames:,} frames in {out.actions:,} actions, {out.seconds:.1f} s: identical. "
        f"Answers: {dict(sorted(out.answers.items()))}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
