"""A host process's memory as a debugger reaches it (``/proc/PID/mem``): the SIL's stand-in for
a probe, so that staged uploads (hilbench/board/stage.py) and the selftest's arena check run
end to end on the SIL too. Linux only; a kernel that forbids it (Yama ptrace_scope 3, another
user's process) gives a DebugLinkError.
"""

from __future__ import annotations

import os

from hilbench.board.debug import DebugLinkError


class ProcessMemory:
    """Reads and writes of process ``pid``'s memory (the subset of DebugTarget stagers use)."""

    def __init__(self, pid: int) -> None:
        self.name = f"/proc/{pid}/mem"
        try:
            self._fd = os.open(self.name, os.O_RDWR)
        except OSError as exc:
            raise DebugLinkError(
                f"cannot open {self.name}: {exc.strerror or exc}",
                "run as the SIL's user on Linux (Yama's ptrace_scope below 3)",
            ) from None

    def halt(self) -> None:  # the SIL waits in poll() for the host's next request
        pass

    def resume(self) -> None:
        pass

    def write_memory(self, address: int, data: bytes) -> None:
        try:
            done = os.pwrite(self._fd, data, address)
        except OSError as exc:
            raise DebugLinkError(f"{self.name}: write at {address:#x} failed: {exc}") from None
        if done != len(data):
            raise DebugLinkError(f"{self.name}: short write at {address:#x} ({done} bytes)")

    def read_memory(self, address: int, size: int) -> bytes:
        try:
            return os.pread(self._fd, size, address)
        except OSError as exc:
            raise DebugLinkError(f"{self.name}: read at {address:#x} failed: {exc}") from None

    def close(self) -> None:
        os.close(self._fd)
