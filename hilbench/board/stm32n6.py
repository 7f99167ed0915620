"""The contract between the host and the stm32n6 firmware (device_fw/port/stm32n6) beyond the wire.

Declared here once and rendered into ``device_fw/core/gen/hb_stm32n6.h`` by
``python -m hilbench.cgen`` (hilbench/cgen/stm32n6_h.py) and, for the linker, into
``device_fw/core/gen/hb_stm32n6_memory.ld``: where the image is loaded (development and flash
boot), the RAM it must fit, the HELLO strings (the firmware string carries the image's build id,
which is how the loader knows the board already runs this ELF) and the fault report sent over
the UART.
"""

from __future__ import annotations

import re

from hilbench.launch.cortex_m import FAULT_REPORT

#: Development boot (BOOT1 high): the debugger loads the image here, the Secure alias of
#: AXISRAM1 (ST's example applications link at the same address; AXISRAM1's first KiB is left
#: to the boot ROM).
LOAD_ADDRESS = 0x34000400
#: AXISRAM1 + AXISRAM2 (2 MiB, Secure alias): image, stacks and the device's arena.
RAM_START = 0x34000000
RAM_BYTES = 2 * 1024 * 1024
#: Flash boot (BOOT1 low): the boot ROM copies the boot image (the FSBL: ST's 1 KiB header, then
#: the image) from the external flash into AXISRAM2 and starts the image here. `make
#: stm32n6-flash` links the same firmware at this address.
FLASH_LOAD_ADDRESS = 0x34180400
#: What the boot ROM copies at most, header included (512 KB): the image may use AXISRAM2 from
#: FLASH_LOAD_ADDRESS to the RAM's end, 511 KiB, for code, data, .bss and stacks.
FSBL_MAX_BYTES = 512 * 1024
#: ST's header in front of the image (the boot ROM's view; FLASH_LOAD_ADDRESS is past it).
FSBL_HEADER_BYTES = 1024
#: Flash boot: the device's arena lies below the image, from RAM_START to the header's KiB.
FLASH_ARENA_START = RAM_START
FLASH_ARENA_END = FLASH_LOAD_ADDRESS - FSBL_HEADER_BYTES
#: The console's default baud rate (ST's validation firmware uses it; `make stm32n6
#: STM32N6_BAUD=115200` builds another).
DEFAULT_BAUD = 921600
#: The CPU clock the firmware leaves running (HSI, no PLL): the cycle counter's rate.
CPU_HZ = 64_000_000
#: Hex digits of the GNU build id the firmware string carries.
BUILD_ID_DIGITS = 16

MESSAGES: dict[str, str] = {
    "DEVICE_ID": "hilbench-stm32n6",
    # HELLO's firmware string: the protocol version and the first BUILD_ID_DIGITS hex digits of
    # the ELF's GNU build id (.note.gnu.build-id), read by the firmware from its own image
    "FIRMWARE": "hilbench-stm32n6 protocol %d build %s",
    # the Cortex-M fault report: sent on USART1, again every second until a reset
    "FAULT": FAULT_REPORT,
}

_BUILD_RE = re.compile(rf"\bbuild ([0-9a-f]{{{BUILD_ID_DIGITS},}})\b")


def build_id_in(firmware: str) -> str | None:
    """The build id a HELLO firmware string carries ("... build 0123abcd..."), or None."""
    match = _BUILD_RE.search(firmware)
    return match.group(1)[:BUILD_ID_DIGITS] if match else None
