"""Fault injection: a pyserial-port wrapper that damages whole frames, seeded and counted.

``FaultyPort`` sits between the host's ``DeviceClient`` and the real port. Each frame
crossing it, in either direction, may be dropped, corrupted (one byte flipped), duplicated,
delayed (delivered up to ``max_delay_s`` later, after whatever follows it) or truncated; before
a host frame it may also reset the device (a RESET frame sent around the fault injector).
Rates come from a spec like
``drop=0.01,corrupt=0.01,duplicate=0.01,delay=0.01,truncate=0.01,reset=0.001,seed=1``.
"""

from __future__ import annotations

import heapq
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, fields

from hilbench.errors import ConfigError
from hilbench.link.wrapper import PortWrapper

FRAME_FAULTS = ("drop", "corrupt", "duplicate", "delay", "truncate")
DELIMITER = b"\x00"


@dataclass(frozen=True)
class FaultSpec:
    """Per-frame probabilities of each fault, and the seed that makes a run repeatable."""

    drop: float = 0.0
    corrupt: float = 0.0
    duplicate: float = 0.0
    delay: float = 0.0
    truncate: float = 0.0
    reset: float = 0.0
    seed: int = 0
    max_delay_s: float = 0.05

    @classmethod
    def parse(cls, spec: str) -> FaultSpec:
        """``"drop=0.01,corrupt=0.02,seed=3"``; one clear ConfigError for anything else."""
        known = [f.name for f in fields(cls)]
        values: dict[str, float | int] = {}
        for item in filter(None, (part.strip() for part in spec.split(","))):
            key, sep, raw = item.partition("=")
            key = key.strip()
            if not sep or key not in known:
                raise ConfigError(
                    f"--link-faults: '{item}' is not KIND=VALUE with a known kind",
                    f"use some of {', '.join(known)}, e.g. drop=0.01,seed=1",
                )
            try:
                values[key] = int(raw) if key == "seed" else float(raw)
            except ValueError:
                raise ConfigError(
                    f"--link-faults: {key}={raw!r} is not a number", "write e.g. drop=0.01"
                ) from None
        result = cls(**values)
        for kind in (*FRAME_FAULTS, "reset"):
            if not 0.0 <= getattr(result, kind) <= 1.0:
                raise ConfigError(
                    f"--link-faults: {kind}={getattr(result, kind)} is not a probability",
                    "use a value in [0, 1]",
                )
        if sum(getattr(result, kind) for kind in FRAME_FAULTS) > 1.0:
            raise ConfigError(
                "--link-faults: the frame fault rates add up to more than 1", "lower them"
            )
        return result

    def any(self) -> bool:
        return any(getattr(self, kind) > 0 for kind in (*FRAME_FAULTS, "reset"))


class FaultyPort(PortWrapper):
    """A pyserial-like port that injects the faults of ``spec`` into the frames crossing it."""

    def __init__(
        self,
        port,
        spec: FaultSpec,
        *,
        reset_device: Callable[[], None] | None = None,
        on_fault: Callable[[str, str], None] | None = None,
    ) -> None:
        super().__init__(port)
        self.spec = spec
        self.reset_device = reset_device
        self.on_fault = on_fault
        self.counts: Counter[str] = Counter()
        self._rng = random.Random(spec.seed)
        self._incoming = bytearray()  # device bytes not yet split into frames
        self._ready = bytearray()  # device bytes ready for the host
        self._late: list[tuple[float, int, str, bytes]] = []  # delayed frames: (due, n, dir, bytes)
        self._n = 0

    # --- pyserial surface used by DeviceClient ---------------------------------------------------
    @property
    def in_waiting(self) -> int:
        self._deliver_late()
        return len(self._ready) + self.port.in_waiting

    def write(self, data: bytes) -> int:
        self._deliver_late()
        if self.spec.reset and self._rng.random() < self.spec.reset and self.reset_device:
            self._fault("reset", "device reset before a host frame")
            self.reset_device()
        for frame in _split(bytes(data)):
            self._send(frame, "host->device")
        return len(data)

    def read(self, size: int = 1) -> bytes:
        self._deliver_late()
        if not self._ready:
            self._pull()
            if not self._ready and self.synchronous:
                deadline = time.monotonic() + (self.port.timeout or 0.0)
                while not self._ready and self._idle(deadline):
                    self._pull()
        out = bytes(self._ready[:size])
        del self._ready[:size]
        return out

    def _pull(self) -> None:
        """Take what the device sent and pass its whole frames through the injector."""
        chunk = self.port.read(max(1, self.port.in_waiting or 1))
        if chunk:
            self._incoming += chunk
            end = self._incoming.rfind(DELIMITER)
            if end >= 0:
                complete, self._incoming = (
                    bytes(self._incoming[: end + 1]),
                    self._incoming[end + 1 :],
                )
                for frame in _split(complete):
                    self._send(frame, "device->host")

    def _idle(self, deadline: float) -> bool:
        """Over a synchronous link nothing comes but delayed frames: sleep until the next is
        due or ``deadline`` (the read's timeout), as a serial port blocks, instead of returning
        at once to a caller that would spin until its own deadline. True if one went on."""
        wait = deadline - time.monotonic()
        if self._late:
            wait = min(wait, self._late[0][0] - time.monotonic())
        if wait > 0:
            time.sleep(wait)
        late = len(self._late)
        self._deliver_late()
        return len(self._late) < late

    # --- faults ----------------------------------------------------------------------------
    def _fault(self, kind: str, detail: str) -> None:
        self.counts[kind] += 1
        if self.on_fault:
            self.on_fault(kind, detail)

    def _deliver(self, frame: bytes, direction: str) -> None:
        if direction == "host->device":
            self.port.write(frame)
        else:
            self._ready += frame

    def _send(self, frame: bytes, direction: str) -> None:
        if not frame.strip(DELIMITER):
            self._deliver(frame, direction)  # a bare delimiter: nothing to damage
            return
        r = self._rng.random()
        for kind in FRAME_FAULTS:
            rate = getattr(self.spec, kind)
            if r < rate:
                self._fault(kind, f"{direction}, {len(frame)} bytes")
                self._damage(kind, frame, direction)
                return
            r -= rate
        self._deliver(frame, direction)

    def _damage(self, kind: str, frame: bytes, direction: str) -> None:
        if kind == "drop":
            return
        if kind == "duplicate":
            self._deliver(frame + frame, direction)
        elif kind == "corrupt":
            damaged = bytearray(frame)
            i = self._rng.randrange(len(damaged))
            damaged[i] ^= self._rng.randrange(1, 256)
            self._deliver(bytes(damaged), direction)
        elif kind == "truncate":  # lose the tail: at least one byte before the delimiter
            self._deliver(frame[: self._rng.randrange(1, max(2, len(frame) - 1))], direction)
        elif kind == "delay":
            self._n += 1
            due = time.monotonic() + self._rng.uniform(0, self.spec.max_delay_s)
            heapq.heappush(self._late, (due, self._n, direction, frame))

    def _deliver_late(self) -> None:
        now = time.monotonic()
        while self._late and self._late[0][0] <= now:
            _, _, direction, frame = heapq.heappop(self._late)
            self._deliver(frame, direction)


def _split(data: bytes) -> list[bytes]:
    """Split a byte run into frames: leading delimiters, a body and its closing delimiter."""
    out, start = [], 0
    while start < len(data):
        body = start
        while body < len(data) and data[body] == 0:
            body += 1
        end = data.find(DELIMITER, body)
        if end < 0:
            out.append(data[start:])
            break
        out.append(data[start : end + 1])
        start = end + 1
    return out
