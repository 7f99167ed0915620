"""Writing the board's external flash (to boot without a debugger) through a tool the user has:
STM32CubeProgrammer's CLI with the board's external loader, or OpenOCD with its stm32n6x.cfg.
Found through $HILBENCH_CUBEPROG / $HILBENCH_OPENOCD or on PATH; a clear line when none is.

The boot ROM starts an image from the flash that carries its header (ST's signing tool writes
it) and is linked where the ROM copies it (stm32n6.FLASH_LOAD_ADDRESS, AXISRAM2). Our firmware's
flash-boot ELF (`make stm32n6-flash`) is turned into that image here: its bytes as a .bin, then
``STM32_SigningTool_CLI`` ($HILBENCH_SIGNINGTOOL, PATH, or beside STM32CubeProgrammer). An ELF
linked for development boot is refused in one line, since the boot ROM would never start it.
Untested on a board (docs/board.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from hilbench.board import stm32n6
from hilbench.board.elfimage import BoardProfile, FirmwareImage, MemoryRegion, read_image
from hilbench.errors import HilbenchError

CUBEPROG = "STM32_Programmer_CLI"
OPENOCD = "openocd"
ENV = {"cubeprog": "HILBENCH_CUBEPROG", "openocd": "HILBENCH_OPENOCD"}
#: Where the DK's external flash is mapped (XSPI2, memory-mapped): the address a .bin goes to.
FLASH_ADDRESS = 0x70000000
SIGNING_TOOL = "STM32_SigningTool_CLI"
SIGNING_ENV = "HILBENCH_SIGNINGTOOL"
#: The first bytes of an image signed for the boot ROM (ST's header, "STM2").
SIGNED_MAGIC = b"STM2"
#: Where the boot ROM starts our firmware from the flash (make stm32n6-flash).
FLASH_BOOT = BoardProfile(
    "STM32N6570-DK (flash boot)",
    (
        MemoryRegion(
            "AXISRAM2 (Secure) for the boot ROM's FSBL",
            stm32n6.FLASH_LOAD_ADDRESS,
            stm32n6.FSBL_MAX_BYTES - stm32n6.FSBL_HEADER_BYTES,
        ),
    ),
    stm32n6.FLASH_LOAD_ADDRESS,
    "link it for flash boot (make -C device_fw stm32n6-flash builds "
    "device_fw/build/stm32n6/hilbench-stm32n6-flash.elf)",
)
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
    """Refuse what the boot ROM would not start from the flash: a missing file, an ELF linked
    for RAM (it is signed first: :func:`boot_image`), a .bin without the boot ROM's header."""
    if not image.is_file():
        raise HilbenchError(f"flash image {image}: no such file", "give the signed boot image")
    with open(image, "rb") as f:
        head = f.read(4)
    if head == b"\x7fELF":
        refuse_development_boot(image)
    elif image.suffix.lower() == ".bin" and head != SIGNED_MAGIC:
        raise HilbenchError(
            f"flash image {image} has no boot ROM header (it does not start with "
            f"{SIGNED_MAGIC.decode()}): the boot ROM would not start it",
            f"sign it: {SIGNING_TOOL} -bin {image.name} -nk -of 0x80000000 -t fsbl -hv 2.3 "
            "-align -o NAME-trusted.bin, or give the flash-boot ELF and hilbench signs it",
        )


def _ram_segments(image: Path) -> list[int]:
    from elftools.elf.elffile import ELFFile

    with open(image, "rb") as f:
        starts = [s["p_paddr"] for s in ELFFile(f).iter_segments() if s["p_type"] == "PT_LOAD"]
    ram_end = stm32n6.RAM_START + stm32n6.RAM_BYTES
    return [a for a in starts if stm32n6.RAM_START <= a < ram_end]


def refuse_development_boot(elf: Path) -> None:
    """One line for an ELF whose segments lie in the RAM but not where the boot ROM starts an
    image (our development-boot firmware, linked at stm32n6.LOAD_ADDRESS)."""
    in_ram = _ram_segments(elf)
    if in_ram and min(in_ram) != stm32n6.FLASH_LOAD_ADDRESS:
        raise HilbenchError(
            f"flash image {elf} is linked for RAM (development boot at 0x{min(in_ram):08x}): "
            f"the boot ROM starts an image from the flash only at "
            f"0x{stm32n6.FLASH_LOAD_ADDRESS:08x}",
            "load it with `hilbench load`, or flash the flash-boot build: `hilbench flash` "
            "with no IMAGE (make -C device_fw stm32n6-flash)",
        )


def is_flash_boot_elf(image: Path) -> bool:
    """An ELF linked where the boot ROM starts it (to be made a .bin and signed)."""
    if not image.is_file():
        return False
    with open(image, "rb") as f:
        if f.read(4) != b"\x7fELF":
            return False
    return min(_ram_segments(image), default=None) == stm32n6.FLASH_LOAD_ADDRESS


def elf_to_bin(image: FirmwareImage, out: Path) -> Path:
    """The bytes the boot ROM copies: the segments from the vector table up, gaps zeroed (what
    ``objcopy -O binary`` writes)."""
    start = image.segments[0].address
    end = max(s.address + len(s.data) for s in image.segments)
    data = bytearray(end - start)
    for s in image.segments:
        data[s.address - start : s.address - start + len(s.data)] = s.data
    out.write_bytes(bytes(data))
    return out


def find_signing_tool() -> str:
    """STM32_SigningTool_CLI: $HILBENCH_SIGNINGTOOL, PATH, or beside STM32_Programmer_CLI."""
    configured = os.environ.get(SIGNING_ENV, "").strip()
    if configured:
        if not (os.path.isfile(configured) and os.access(configured, os.X_OK)):
            raise HilbenchError(
                f"{SIGNING_ENV}={configured} is not an executable file",
                f"point it at {SIGNING_TOOL}, or unset it",
            )
        return configured
    found = shutil.which(SIGNING_TOOL)
    if found:
        return found
    cubeprog = shutil.which(CUBEPROG)
    if cubeprog:
        beside = Path(os.path.realpath(cubeprog)).parent / SIGNING_TOOL
        if os.access(beside, os.X_OK):
            return str(beside)
    raise HilbenchError(
        f"no {SIGNING_TOOL} to give the image the boot ROM's header was found",
        f"install STM32CubeProgrammer (it ships {SIGNING_TOOL}) and put its bin directory on "
        f"PATH, or {SIGNING_ENV}=PATH",
    )


def sign_command(tool: str, binary: Path, signed: Path) -> list[str]:
    """ST's signing tool's command line for an unsigned FSBL (no key, header v2.3, aligned;
    no -la/-ep: the tool takes them from the image)."""
    return [tool, "-bin", str(binary), "-nk", "-of", "0x80000000", "-t", "fsbl", "-hv", "2.3",
            "-align", "-o", str(signed)]  # fmt: skip


def boot_image(elf: Path) -> Path:
    """``elf`` (our flash-boot build) as the signed image the boot ROM starts: NAME.bin and
    NAME-trusted.bin beside it; the latter returned."""
    image = read_image(elf, FLASH_BOOT)
    tool = find_signing_tool()
    binary = elf.with_suffix(".bin")
    signed = elf.with_name(f"{elf.stem}-trusted.bin")
    try:
        elf_to_bin(image, binary)
        signed.unlink(missing_ok=True)
    except OSError as exc:
        raise HilbenchError(
            f"cannot write {binary}: {exc.strerror}", "give a writable --fw"
        ) from None
    argv = sign_command(tool, binary, signed)
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HilbenchError(
            f"{SIGNING_TOOL} did not run: {exc}", f"run it by hand: {' '.join(argv)}"
        ) from None
    lines = [ln.strip() for ln in (done.stdout + done.stderr).splitlines() if ln.strip()]
    head = signed.read_bytes()[:4] if signed.is_file() else b""
    if done.returncode != 0 or head != SIGNED_MAGIC:
        last = lines[-1] if lines else "no output"
        raise HilbenchError(
            f"{SIGNING_TOOL} did not sign {binary.name} (exit {done.returncode}, "
            f"{'no ' + signed.name if not head else 'no header in ' + signed.name}): {last}",
            f"run it by hand to see everything: {' '.join(argv)}",
        )
    return signed


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
    image: Path | None,
    probe_id: str | None,
    *,
    kind: str | None = None,
    loader: str | None = None,
    fw: Path | None = None,
) -> str:
    """Write ``image`` to the external flash; without one, our flash-boot firmware (``fw``, else
    built with make), signed. The tool's last line. One line when anything fails."""
    if image is None or is_flash_boot_elf(image):
        from hilbench.board.firmware import firmware_elf

        elf = image if image is not None else firmware_elf(fw, flash_boot=True)
        if not elf.is_file():
            raise HilbenchError(f"firmware {elf}: no such file", FLASH_BOOT.build_hint)
        refuse_development_boot(elf)
        tool = find_tool(kind)  # before signing: no tool, nothing written
        image = boot_image(elf)
    else:
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
