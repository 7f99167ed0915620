"""device_fw/core/gen/hb_stm32n6.h: the stm32n6 port's side contract with the host.

Declared in hilbench/board/stm32n6.py: the load address, the RAM, the default baud rate and
clock, the HELLO strings and the fault report. Only device_fw/port/stm32n6 includes this header.
"""

from __future__ import annotations

from hilbench.board import stm32n6
from hilbench.cgen import Header, builder


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
