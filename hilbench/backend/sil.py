"""``--sil``: the firmware core built for Linux, a child process serving the protocol."""

from __future__ import annotations

from hilbench.backend.base import Backend, Connection
from hilbench.errors import HilbenchError, LinkError
from hilbench.launch.sil import SilProcess, sil_binary
from hilbench.link.faults import FaultSpec


class SilBackend(Backend):
    """The firmware core built for Linux (``device_fw/port/host``), a child process serving
    the protocol on a pty that pyserial opens like a board's port (software in the loop)."""

    kind = "sil"

    def __init__(
        self, firmware: str | None = None, faults: FaultSpec | None = None, *options: str
    ) -> None:
        super().__init__(faults)
        self.firmware = firmware
        self.options = options
        self.process: SilProcess | None = None

    def open(self) -> Connection:
        self.process = SilProcess(sil_binary(self.firmware), *self.options)
        path = self.process.start()
        try:
            return self._connect(path, name=f"SIL firmware ({path})")
        except HilbenchError as exc:
            self.close()
            raise LinkError(
                f"{exc.cause} (SIL: {self.process.failure() if self.process else 'stopped'})",
                exc.fix,
            ) from None

    def close(self) -> None:
        super().close()
        if self.process is not None:
            self.process.stop()
            self.process = None
