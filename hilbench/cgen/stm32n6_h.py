"""device_fw/core/gen/hb_stm32n6.h and hb_stm32n6_memory.ld: the stm32n6 port's side contract.

Declared in hilbench/board/stm32n6.py: the load addresses, the RAM, the default baud rate and
clock, the HELLO strings and the fault report. Only device_fw/port/stm32n6 includes the header;
its linker script (stm32n6.ld) INCLUDEs the memory symbols, so no address is typed twice.
"""

from __future__ import annotations

from hilbench.board import stm32n6
from hilbench.cgen import BANNER, Header, builder


class LinkerSymbols(Header):
    """A GNU ld script fragment of symbol assignments (``NAME = 0x...;``) with the banner."""

    def symbol(self, name: str, value: int) -> None:
        self.lines.append(f"{name} = 0x{value:08X};")

    def render(self) -> str:
        return "\n".join([BANNER.format(source=self.source).rstrip("\n"), *self.lines, ""])


@builder("hb_stm32n6.h")
def build() -> Header:
    h = Header("hb_stm32n6.h", "hilbench/board/stm32n6.py")
    h.comment("Memory: the development-boot load address and the RAM (AXISRAM1 + 2, Secure)")
    h.define("HB_STM32N6_LOAD_ADDRESS", f"0x{stm32n6.LOAD_ADDRESS:08X}u")
    h.define("HB_STM32N6_RAM_START", f"0x{stm32n6.RAM_START:08X}u")
    h.define("HB_STM32N6_RAM_BYTES", f"{stm32n6.RAM_BYTES}u")
    h.comment("Console and clock defaults")
    h.define("HB_STM32N6_DEFAULT_BAUD", f"{stm32n6.DEFAULT_BAUD}u")
    h.define("HB_STM32N6_CPU_HZ", f"{stm32n6.CPU_HZ}u")
    h.define("HB_STM32N6_BUILD_ID_DIGITS", stm32n6.BUILD_ID_DIGITS)
    h.comment("HELLO strings and the fault report (hb_format: %d %x %s, zero-padded widths)")
    for name, text in stm32n6.MESSAGES.items():
        h.string(f"HB_STM32N6_MSG_{name}", text)
    return h


@builder("hb_stm32n6_memory.ld")
def build_memory() -> Header:
    ld = LinkerSymbols("hb_stm32n6_memory.ld", "hilbench/board/stm32n6.py")
    ld.comment("Development boot (BOOT1 high): the debugger loads the image here")
    ld.symbol("HB_N6_DEV_LOAD_ADDRESS", stm32n6.LOAD_ADDRESS)
    ld.comment("AXISRAM1 + 2 (Secure alias): the RAM every image and arena lies in")
    ld.symbol("HB_N6_RAM_START", stm32n6.RAM_START)
    ld.symbol("HB_N6_RAM_END", stm32n6.RAM_START + stm32n6.RAM_BYTES)
    ld.comment(
        "Flash boot (BOOT1 low): the boot ROM copies at most FSBL_MAX header and image into\n"
        "AXISRAM2 and starts the image at FLASH_LOAD_ADDRESS; the arena lies below it"
    )
    ld.symbol("HB_N6_FLASH_LOAD_ADDRESS", stm32n6.FLASH_LOAD_ADDRESS)
    ld.symbol("HB_N6_FSBL_MAX_BYTES", stm32n6.FSBL_MAX_BYTES)
    ld.symbol("HB_N6_FSBL_HEADER_BYTES", stm32n6.FSBL_HEADER_BYTES)
    ld.symbol("HB_N6_FLASH_ARENA_START", stm32n6.FLASH_ARENA_START)
    ld.symbol("HB_N6_FLASH_ARENA_END", stm32n6.FLASH_ARENA_END)
    return ld
