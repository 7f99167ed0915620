"""Writing the board's external flash (to boot without a debugger) through a tool the user has:
STM32CubeProgrammer's CLI with the board's external loader, or OpenOCD with its stm32n6x.cfg.
Found through $HILBENCH_CUBEPROG / $HILBENCH_OPENOCD or on PATH; a clear line when none is.

The image must be one the boot ROM starts from the flash (it carries the boot ROM's header, as
ST's signing tool writes it); an ELF linked for RAM (development boot, our firmware) is refused
in one line, since the boot ROM would never start it. Untested on a board (docs/board.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from hilbench.board import stm32n6
from hilbench.errors import HilbenchError

CUBEPROG = "STM32_Programmer_CLI"
OPENOCD = "openocd"
ENV = {"cubeprog": "HILBENCH_CUBEPROG", "openocd": "HILBENCH_OPENOCD"}
#: Where the DK's external flash is mapped (XSPI2, memory-mapped): the address a .bin goes to.
FLASH_ADDRESS = 0x70000000
NO_TOOL_FIX = (
    f"install STM32CubeProgrammer ({CUBEPROG} on PATH, or {ENV['cubeprog']}=PATH) or OpenOCD "
    f"with target/stm32n6x.cfg ({OPENOCD} on PATH, or {ENV['openocd']}=PATH)"
)


@dataclass(frozen=True)
class FlashTool:
    kind: str  # "cubeprog" or "openocd"
    path: str


def find_tool(kind: str | None = None) -> FlashTool:
    """The flash tool: ``kind`` if named, else STM32CubeProgrammer, else OpenOCD."""
    kinds = [kind] if kind else ["cubeprog", "openocd"]
    for k in kinds:
        configured = os.environ.get(ENV[k], "").strip()
        if configured:
            if not (os.path.isfile(configured) and os.access(configured, os.X_OK)):
                raise HilbenchError(
                    f"{ENV[k]}={configured} is not an executable file",
                    f"point it at {CUBEPROG if k == 'cubeprog' else OPENOCD}, or unset it",
                )
            return FlashTool(k, configured)
        found = shutil.which(CUBEPROG if k == "cubeprog" else OPENOCD)
        if found:
            return FlashTool(k, found)
    named = f"{kind} " if kind else ""
    raise HilbenchError(f"no {named}tool to write the external flash was found", NO_TOOL_FIX)


def check_image(image: Path) -> None:
    """Refuse what the boot ROM would not start from the flash: a missing file, an ELF whose
    segments lie in the RAM (linked for development boot)."""
    if not image.is_file():
        raise HilbenchError(f"flash image {image}: no such file", "give the signed boot image")
    with open(image, "rb") as f:
        head = f.read(4)
    if head != b"\x7fELF":
        return
    from elftools.elf.elffile import ELFFile

    with open(image, "rb") as f:
        starts = [s["p_paddr"] for s in ELFFile(f).iter_segments() if s["p_type"] == "PT_LOAD"]
    ram_end = stm32n6.RAM_START + stm32n6.RAM_BYTES
    if any(stm32n6.RAM_START <= a < ram_end for a in starts):
        raise HilbenchError(
            f"flash image {image} is linked for RAM (development boot at "
            f"0x{stm32n6.LOAD_ADDRESS:08x}): the boot ROM cannot start it from the flash",
            "load it with `hilbench load`, or give a boot image signed for the external flash",
        )


def external_loader(tool: FlashTool, given: str | None) -> str:
    """STM32CubeProgrammer's external loader for the DK's flash: ``given``, else the one
    STM32N6570-DK loader shipped in the tool's ExternalLoader directory."""
    if given:
        if not os.path.isfile(given):
            raise HilbenchError(f"--loader {given}: no such file", "give the board's .stldr file")
        return given
    directory = Path(os.path.realpath(tool.path)).parent / "ExternalLoader"
    found = sorted(directory.glob("*STM32N6570-DK*.stldr"))
    if len(found) != 1:
        what = "none" if not found else ", ".join(p.name for p in found)
        raise HilbenchError(
            f"cannot choose STM32CubeProgrammer's external loader for the STM32N6570-DK in "
            f"{directory} (found: {what})",
            "name it: --loader PATH.stldr",
        )
    return str(found[0])


def command(
    tool: FlashTool, image: Path, probe_id: str | None, loader: str | None = None
) -> list[str]:
    """The tool's command line that writes ``image`` and verifies it."""
    is_bin = image.suffix.lower() == ".bin"
    if tool.kind == "cubeprog":
        connect = "port=SWD mode=HOTPLUG" + (f" sn={probe_id}" if probe_id else "")
        argv = [tool.path, "-c", *connect.split(), "-el", external_loader(tool, loader)]
        argv += ["-w", str(image)] + ([f"0x{FLASH_ADDRESS:08X}"] if is_bin else []) + ["-v"]
        return argv
    program = f"program {image}" + (f" 0x{FLASH_ADDRESS:08x}" if is_bin else "") + " verify exit"
    argv = [tool.path, "-f", "interface/stlink-dap.cfg", "-f", "target/stm32n6x.cfg"]
    if probe_id:
        argv += ["-c", f"adapter serial {probe_id}"]
    return [*argv, "-c", program]


def flash(
    image: Path, probe_id: str | None, *, kind: str | None = None, loader: str | None = None
) -> str:
    """Write ``image`` to the external flash; the tool's last line. One line when it fails."""
    check_image(image)
    tool = find_tool(kind)
    argv = command(tool, image, probe_id, loader)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HilbenchError(f"{Path(tool.path).name} did not run: {exc}", NO_TOOL_FIX) from None
    lines = [ln.strip() for ln in (done.stdout + done.stderr).splitlines() if ln.strip()]
    last = lines[-1] if lines else "no output"
    if done.returncode != 0:
        raise HilbenchError(
            f"{Path(tool.path).name} failed writing the flash (exit {done.returncode}): {last}",
            f"run it by hand to see everything: {' '.join(argv)}",
        )
    return last
