"""The stm32n6 firmware ELF: the one given, or the checkout's, built with make."""

from __future__ import annotations

import shutil
from pathlib import Path

from hilbench.errors import HilbenchError
from hilbench.launch.make import output_tail, run_make
from hilbench.launch.process import repo_dir

ELF_RELATIVE = Path("device_fw/build/stm32n6/hilbench-stm32n6.elf")
#: The flash-boot variant (make stm32n6-flash): the same firmware linked where the boot ROM
#: starts it (hilbench flash).
FLASH_ELF_RELATIVE = Path("device_fw/build/stm32n6/hilbench-stm32n6-flash.elf")
CROSS_CC = "arm-none-eabi-gcc"
BUILD_TIMEOUT_S = 600


def firmware_elf(
    fw: str | Path | None = None, baud: int | None = None, *, flash_boot: bool = False
) -> Path:
    """``fw`` if given, else device_fw/build/stm32n6/hilbench-stm32n6.elf built with make
    (at ``baud``, when it is not the firmware's default); its flash-boot variant if asked."""
    if fw is not None:
        return Path(fw)
    root = repo_dir()
    if root is None:
        raise HilbenchError(
            "no firmware given, and this hilbench is installed without the device_fw sources "
            "to build one",
            "pass --fw PATH to a built hilbench-stm32n6.elf",
        )
    _build(root, baud, "stm32n6-flash" if flash_boot else "stm32n6")
    return root / (FLASH_ELF_RELATIVE if flash_boot else ELF_RELATIVE)


def _build(root: Path, baud: int | None, target: str = "stm32n6") -> None:
    if shutil.which("make") is None or shutil.which(CROSS_CC) is None:
        raise HilbenchError(
            f"building the stm32n6 firmware needs make and {CROSS_CC}",
            "apt install make gcc-arm-none-eabi libnewlib-arm-none-eabi, or pass --fw PATH",
        )
    args = [target] + ([f"STM32N6_BAUD={baud}"] if baud is not None else [])
    status, output = run_make(root, *args, timeout_s=BUILD_TIMEOUT_S)
    if status != 0:
        raise HilbenchError(
            f"building the stm32n6 firmware failed (make {' '.join(args)}): {output_tail(output)}",
            "fix the compile error, or pass --fw PATH to a built hilbench-stm32n6.elf",
        )
