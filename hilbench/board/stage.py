"""Staged uploads through a debugger (docs/protocol.md, "Staged uploads"): the model and data
bytes go straight into the device's memory through QEMU's GDB stub or a board's probe instead
of the UART, then LOAD_COMMIT has the device check their CRC-32 and take them as if the link had
carried them. The UART stays the fallback (a device without CAP_LOAD_STAGE, ``--upload uart``).

The writer is the project's own GDB remote client (hilbench/board/gdbremote.py: ``M`` packets,
acknowledged): PyPI has no maintained GDB remote-protocol client (``pygdbremoteclient`` had one
0.1.0 release, ``pyrsp`` none since 2019), so the one the loader already uses is reused; a
board's writes go through pyOCD's target API (hilbench/board/pyocd_target.py).
"""

from __future__ import annotations

from collections.abc import Callable

from hilbench.board.debug import DebugTarget
from hilbench.client.device_client import Stager

#: bytes per progress step (the debugger splits them into its own packets)
PROGRESS_BYTES = 64 * 1024


class DebugStager(Stager):
    """Writes through a :class:`~hilbench.board.debug.DebugTarget` opened for each upload by
    ``connect()`` and closed after it. ``halt``: stop the core while writing and resume it after
    (QEMU's stub stops the machine when it is attached and resumes it on detach); a board's
    probe writes through the AHB access port while the core waits for the LOAD_COMMIT."""

    def __init__(self, connect: Callable[[], DebugTarget], *, name: str, halt: bool) -> None:
        self.connect = connect
        self.name = name
        self.halt = halt
        self.writes = 0  # uploads written (for tests and the selftest's report)
        self.bytes_written = 0

    def write(
        self, address: int, data: bytes, progress: Callable[[int], None] | None = None
    ) -> None:
        debug = self.connect()
        try:
            if self.halt:
                debug.halt()
            view = memoryview(data)
            for off in range(0, len(data), PROGRESS_BYTES):
                part = view[off : off + PROGRESS_BYTES]
                debug.write_memory(address + off, bytes(part))
                if progress is not None:
                    progress(off + len(part))
            if self.halt:
                debug.resume()
        finally:
            debug.close()
        self.writes += 1
        self.bytes_written += len(data)


def gdb_stager(host: str, port: int) -> DebugStager:
    """Staged uploads through the GDB stub at ``host:port`` (QEMU's ``-gdb tcp::PORT``)."""
    from hilbench.board.gdbremote import GdbRemoteTarget

    return DebugStager(
        lambda: GdbRemoteTarget(host, port), name=f"the GDB stub at {host}:{port}", halt=True
    )


def probe_stager(probe_id: str, frequency: int = 4_000_000) -> DebugStager:
    """Staged uploads through the pyOCD probe ``probe_id`` (the board keeps running)."""
    from hilbench.board.pyocd_target import PyocdTarget

    return DebugStager(
        lambda: PyocdTarget.connect(probe_id, frequency), name=f"probe {probe_id}", halt=False
    )
