"""``--emulate``: the device twin in this process, behind a pty (or an in-memory link)."""

from __future__ import annotations

from threadpoolctl import threadpool_limits

from hilbench.backend.base import Backend, Connection
from hilbench.device import BANNER_REASONS, DeviceTwin, FrameEndpoint, ThreadedServer
from hilbench.errors import HilbenchError
from hilbench.link.faults import FaultSpec
from hilbench.link.memory import MemoryPort
from hilbench.link.pty_pair import PtyPair


def single_threaded_blas() -> None:
    """The twin's matmuls are small: BLAS threads only fight the host thread for 2 cores."""
    threadpool_limits(1, user_api="blas")


class EmulatorBackend(Backend):
    """The device twin in this process, behind a pty that pyserial opens like a board's port.

    ``link="memory"`` skips the serial stack (the twin answers inside ``write``): for soak
    tests and studies that need millions of frames; the device code is the same.
    """

    kind = "emulate"
    MEMORY_MIN_RTO_S = 0.001  # answers are immediate: only a lost frame is ever waited for
    #: the wait of a request not yet measured: its answer is there when the write returns, or
    #: late by an injected delay (--link-faults max_delay_s), or lost; not a board's 5 s
    MEMORY_TIMEOUT_S = 0.5

    def __init__(
        self, twin: DeviceTwin | None = None, faults: FaultSpec | None = None, link: str = "pty"
    ) -> None:
        super().__init__(faults)
        if link not in ("pty", "memory"):
            raise HilbenchError(f"unknown emulator link '{link}'", "use 'pty' or 'memory'")
        self.twin = twin or DeviceTwin(**BANNER_REASONS)
        self.link = link
        self._pty: PtyPair | None = None
        self._server: ThreadedServer | None = None

    def open(self) -> Connection:
        single_threaded_blas()
        if self.link == "memory":
            port = MemoryPort(FrameEndpoint(self.twin).feed)
            return self._attach(
                port,
                "emulator (in-memory link)",
                min_rto=self.MEMORY_MIN_RTO_S,
                timeout=max(self.MEMORY_TIMEOUT_S, 4 * self._max_delay_s()),
            )
        self._pty = PtyPair()
        self._server = ThreadedServer(self.twin, self._pty.device_stream())
        return self._connect(self._pty.path, name=f"emulator ({self._pty.path})")

    def _max_delay_s(self) -> float:
        return self.faults.max_delay_s if self.faults is not None else 0.0

    def close(self) -> None:
        super().close()
        if self._server:
            self._server.close()
            self._server = None
        if self._pty:
            self._pty.close()
            self._pty = None
