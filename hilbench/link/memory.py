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
        self._rx = b""  # bytes, not a bytearray: an answer is handed on as it came, uncopied
        self.is_open = True

    @property
    def in_waiting(self) -> int:
        return len(self._rx)

    def write(self, data: bytes) -> int:
        out = self.answer(data if type(data) is bytes else bytes(data))
        self._rx = self._rx + out if self._rx else out
        return len(data)

    def read(self, size: int = 1) -> bytes:
        rx = self._rx
        if size >= len(rx):  # all of it (the usual case): the answer's own bytes
            self._rx = b""
            return bytes(rx)  # (an answer that is a bytearray: a copy, as from a port)
        self._rx = rx[size:]
        return bytes(rx[:size])

    def close(self) -> None:
        self.is_open = False
