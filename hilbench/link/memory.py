"""An in-process link: the device answers synchronously inside ``write`` (no serial stack).

For soak tests and studies that need millions of frames: the host's ``DeviceClient`` and a
``FaultyPort`` see the same pyserial-like surface as over a pty, but no thread, no kernel and no
latency sit in between. The real serial path is exercised by the pty and TCP backends.
"""

from __future__ import annotations

from collections.abc import Callable


class MemoryPort:
    """pyserial-like port whose far end is ``answer(bytes_in) -> bytes_out``."""

    #: The answer is in the buffer when ``write`` returns: no delay to wait out but a lost frame.
    synchronous = True

    def __init__(self, answer: Callable[[bytes], bytes], name: str = "memory") -> None:
        self.answer = answer
        self.name = name
        self.timeout: float | None = 0.0
        self._rx = bytearray()
        self.is_open = True

    @property
    def in_waiting(self) -> int:
        return len(self._rx)

    def write(self, data: bytes) -> int:
        self._rx += self.answer(bytes(data))
        return len(data)

    def read(self, size: int = 1) -> bytes:
        if size >= len(self._rx):  # all of it (the usual case): no slicing
            out = bytes(self._rx)
            self._rx.clear()
            return out
        out = bytes(self._rx[:size])
        del self._rx[:size]
        return out

    def close(self) -> None:
        self.is_open = False
