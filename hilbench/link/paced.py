"""A serial line's speed on top of a link that has none (a pty or TCP ignore baud rates).

``PacedPort`` wraps the host's port and holds each write until the bytes would have left a UART
at ``baud`` (8N1: 10 bits a byte), and each read until the bytes could have arrived. Used by the
link benchmark to measure protocol efficiency at a board's real line rate (921,600 baud on the
ST-LINK virtual COM port).
"""

from __future__ import annotations

import time

import serial

from hilbench.link.wrapper import PortWrapper


class PacedPort(PortWrapper):
    """pyserial-like port wrapper that limits both directions to ``baud`` (8N1).

    Bytes that follow the previous ones in the same direction within ``BACK_TO_BACK_S`` were on
    the line back to back, as a UART sends them: they are scheduled right after those, not after
    ``time.sleep``'s own lateness (tens of µs, more than a byte at 921,600 baud). Without this,
    a reader that takes an answer a byte at a time (pyserial's ``socket://`` reports
    ``in_waiting`` as 0 or 1) would be charged one oversleep per byte.
    """

    BACK_TO_BACK_S = 200e-6

    def __init__(self, port: serial.SerialBase, baud: int) -> None:
        super().__init__(port)
        self.seconds_per_byte = 10.0 / baud
        self._tx_free_at = 0.0
        self._rx_free_at = 0.0

    def _wait(self, free_at: float, n: int) -> float:
        now = time.perf_counter()
        start = free_at if now - free_at < self.BACK_TO_BACK_S else now
        done = start + n * self.seconds_per_byte
        delay = done - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        return done

    def write(self, data: bytes) -> int:
        self._tx_free_at = self._wait(self._tx_free_at, len(data))
        return self.port.write(data)

    def read(self, size: int = 1) -> bytes:
        data = self.port.read(size)
        if data:
            self._rx_free_at = self._wait(self._rx_free_at, len(data))
        return data
