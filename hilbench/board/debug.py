"""The small interface the loader drives: a halted Cortex-M core whose memory and registers a
debugger can reach. Two implementations: pyOCD's target API (hilbench/board/pyocd_target.py,
a board behind an ST-LINK) and a GDB remote stub (hilbench/board/gdbremote.py: QEMU's, or
OpenOCD's / pyocd gdbserver's on a lab machine).
"""

from __future__ import annotations

from typing import Protocol

from hilbench.errors import HilbenchError

#: The System Control Block's vector table offset register (Armv8-M).
VTOR = 0xE000ED08


class DebugLinkError(HilbenchError):
    """The probe (or the stub) stopped answering or refused a transfer: worth a retry at a lower
    SWD frequency."""


class DebugTarget(Protocol):
    """A core behind a debugger. Addresses and values are the target's (32-bit, little-endian)."""

    name: str

    def halt(self) -> None:
        """Stop the core (no-op when it is halted)."""

    def write_memory(self, address: int, data: bytes) -> None:
        """Write bytes (the loader sends a segment in chunks of a few KiB)."""

    def read_memory(self, address: int, size: int) -> bytes: ...

    def write_word(self, address: int, value: int) -> None: ...

    def read_word(self, address: int) -> int: ...

    def core_reset(self, vector_table: int) -> None:
        """Reset the core alone, never the system (a system reset erases the STM32N6's
        AXISRAM1/2): SP and PC from the vector table VTOR points at (``vector_table``), other
        registers to their reset values; the core stays halted on the reset handler."""

    def read_register(self, name: str) -> int:
        """A core register by name: "pc", "sp", "xpsr"."""

    def resume(self) -> None:
        """Let the core run; the loader calls it last and then :meth:`close`."""

    def close(self) -> None: ...
