"""Base for port wrappers (fault injection, line-rate pacing): pass the pyserial surface on."""

from __future__ import annotations

import serial


class PortWrapper:
    """Forwards ``timeout``, ``in_waiting``, ``read``, ``write`` and ``close`` to ``port``."""

    def __init__(self, port: serial.SerialBase) -> None:
        self.port = port

    @property
    def timeout(self) -> float | None:
        return self.port.timeout

    @timeout.setter
    def timeout(self, value: float | None) -> None:
        self.port.timeout = value

    @property
    def in_waiting(self) -> int:
        return self.port.in_waiting

    @property
    def synchronous(self) -> bool:
        """Whether the wrapped link answers inside ``write`` (hilbench.link.memory)."""
        return bool(getattr(self.port, "synchronous", False))

    def write(self, data: bytes) -> int:
        return self.port.write(data)

    def read(self, size: int = 1) -> bytes:
        return self.port.read(size)

    def close(self) -> None:
        self.port.close()
