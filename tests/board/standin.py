"""A STAND-IN for pyOCD's target object (no board here): the methods hilbench's PyocdTarget
calls, with pyOCD's names and signatures, over a byte-addressed memory dict. It records every
call, and models what the loader relies on: writes land in RAM only inside ``ram`` (a board not
in development boot keeps nothing), VTOR is a register, and the emulated core reset takes SP and
PC from the table VTOR points at (pyOCD's ``_perform_emulated_reset`` with no boot memory).
A transfer fault can be scheduled to test the retries."""

from __future__ import annotations

from pyocd.core import exceptions
from pyocd.core.target import Target

VTOR = 0xE000ED08


class RecordingCortexM:
    def __init__(self, ram: tuple[int, int], *, keeps_writes: bool = True) -> None:
        self.ram = ram
        self.keeps_writes = keeps_writes
        self.memory: dict[int, int] = {}
        self.vtor = 0
        self.regs = {"pc": 0, "sp": 0, "xpsr": 0}
        self.calls: list[tuple] = []
        self.fail_writes_after: int | None = None  # a TransferFaultError after N block writes
        self.halted = False

    # pyOCD's Target API (the subset PyocdTarget uses)
    def halt(self) -> None:
        self.calls.append(("halt",))
        self.halted = True

    def write_memory_block8(self, addr: int, data) -> None:
        self.calls.append(("write_memory_block8", addr, len(data)))
        if self.fail_writes_after is not None:
            if self.fail_writes_after == 0:
                raise exceptions.TransferFaultError("SWD/JTAG Transfer Fault")
            self.fail_writes_after -= 1
        if self.keeps_writes and self.ram[0] <= addr < self.ram[1]:
            for i, b in enumerate(bytes(data)):
                self.memory[addr + i] = b

    def read_memory_block8(self, addr: int, size: int) -> list[int]:
        self.calls.append(("read_memory_block8", addr, size))
        return [self.memory.get(addr + i, 0) for i in range(size)]

    def write32(self, addr: int, value: int) -> None:
        self.calls.append(("write32", addr, value))
        if addr == VTOR:
            self.vtor = value

    def read32(self, addr: int) -> int:
        self.calls.append(("read32", addr))
        if addr == VTOR:
            return self.vtor
        return int.from_bytes(bytes(self.memory.get(addr + i, 0) for i in range(4)), "little")

    def reset_and_halt(self, reset_type=None) -> None:
        self.calls.append(("reset_and_halt", reset_type))
        if reset_type is not Target.ResetType.EMULATED:  # a system reset erases AXISRAM1/2
            self.memory.clear()
            return

        def word(a: int) -> int:
            return int.from_bytes(bytes(self.memory.get(a + i, 0) for i in range(4)), "little")

        self.regs = {"sp": word(self.vtor), "pc": word(self.vtor + 4) & ~1, "xpsr": 0x01000000}

    def reset(self, reset_type=None) -> None:
        self.calls.append(("reset", reset_type))
        self.memory.clear()

    def read_core_register(self, name: str) -> int:
        self.calls.append(("read_core_register", name))
        return self.regs[name]

    def resume(self) -> None:
        self.calls.append(("resume",))
        self.halted = False
