"""``--board URL`` for a plain serial link: a board's /dev/ttyACM0, or socket://HOST:PORT."""

from __future__ import annotations

from hilbench.backend.base import Backend, Connection
from hilbench.link.faults import FaultSpec
from hilbench.link.serial_port import DEFAULT_BAUD, open_port


class SerialBackend(Backend):
    """A device on any pyserial URL: a board's /dev/ttyACM0, or socket://HOST:PORT."""

    kind = "board"

    def __init__(self, url: str, faults: FaultSpec | None = None, baud: int = DEFAULT_BAUD) -> None:
        super().__init__(faults)
        self.url = url
        self.baud = baud

    def open(self) -> Connection:
        return self._attach(open_port(self.url, baudrate=self.baud), name=self.url)
