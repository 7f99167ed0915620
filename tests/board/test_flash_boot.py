"""Booting without a debugger: the flash-boot firmware (make stm32n6-flash) as the boot ROM
needs it, and `hilbench flash` turning it into a signed image and writing it.

The ELF and .bin are the real build. STM32_SigningTool_CLI and STM32_Programmer_CLI are not
installed here: the programs with their names are STAND-INS the test writes (they record their
arguments; the signing stand-in writes "STM2" + the input as its output, no real header).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hilbench.board import stm32n6
from hilbench.board.elfimage import STM32N6, read_image
from hilbench.board.flash import FLASH_BOOT, SIGNED_MAGIC, elf_to_bin, sign_command
from hilbench.errors import HilbenchError
from tests.board.conftest import _make
from tests.board.test_flash import calls, hilbench, one_line_error, standin

SIGNING_STANDIN = """#!{python}
import json, sys
argv = sys.argv[1:]
with open({log!r}, "a") as f:
    f.write(json.dumps(argv) + "\\n")
if {code}:
    print("stand-in: Error: wrong header version")
    sys.exit({code})
with open(argv[argv.index("-bin") + 1], "rb") as src, open(argv[argv.index("-o") + 1], "wb") as out:
    out.write({magic!r} + src.read())
print("stand-in: signed")
"""


def signing_standin(directory: Path, *, code: int = 0, magic: bytes = SIGNED_MAGIC) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "STM32_SigningTool_CLI"
    log = str(directory / "calls.jsonl")
    path.write_text(SIGNING_STANDIN.format(python=sys.executable, log=log, code=code, magic=magic))
    path.chmod(0o755)
    return path


def cubeprog_standin(directory: Path) -> Path:
    """A stand-in STM32_Programmer_CLI with the DK's external loader beside it."""
    standin(directory, "STM32_Programmer_CLI")
    (directory / "ExternalLoader").mkdir(exist_ok=True)
    loader = directory / "ExternalLoader" / "MX66UW1G45G_STM32N6570-DK.stldr"
    loader.write_bytes(b"")
    return loader


@pytest.fixture(scope="module")
def flash_elf() -> Path:
    """The flash-boot firmware CI builds (make -C device_fw stm32n6-flash)."""
    return _make("stm32n6-flash", "stm32n6/hilbench-stm32n6-flash.elf")


@pytest.fixture
def fw_copy(flash_elf, tmp_path) -> Path:
    """The flash-boot ELF copied where the .bin and the signed image may be written."""
    return Path(shutil.copy(flash_elf, tmp_path / "n6.elf"))


def symbols(elf: Path) -> dict[str, int]:
    out = subprocess.run(["arm-none-eabi-nm", str(elf)], capture_output=True, text=True).stdout
    return {p[2]: int(p[0], 16) for p in (ln.split() for ln in out.splitlines()) if len(p) == 3}


def test_the_flash_variant_is_linked_where_the_boot_rom_starts_it(flash_elf):
    image = read_image(flash_elf, FLASH_BOOT)
    sym = symbols(flash_elf)
    assert image.segments[0].address == 0x34180400 == stm32n6.FLASH_LOAD_ADDRESS
    assert sym["hb_n6_vectors"] == stm32n6.FLASH_LOAD_ADDRESS == image.vector_table
    assert image.initial_sp == sym["__stack_top"] and image.reset_pc == sym["Reset_Handler"] | 1
    # header + image + .bss within the boot ROM's 512 KB; the stacks and the kept 64 bytes are
    # at the top of DTCM (128 KiB at 0x30000000: docs/board.md)
    assert sym["__noinit_start"] == 0x30020000 - 64
    assert sym["__fault_stack_top"] <= sym["__noinit_start"]
    used = sym["__image_end"] - stm32n6.FLASH_LOAD_ADDRESS + stm32n6.FSBL_HEADER_BYTES
    assert 0 < used <= stm32n6.FSBL_MAX_BYTES == 512 * 1024
    # the arena below the image's header, never over the image or its stacks
    assert sym["__arena_start"] == stm32n6.RAM_START
    assert sym["__arena_end"] == stm32n6.FLASH_LOAD_ADDRESS - stm32n6.FSBL_HEADER_BYTES
    assert sym["__arena_end"] - sym["__arena_start"] >= 1024 * 1024
    # the same build id scheme as the development build: HELLO names it
    assert image.build_id and len(image.image_id) == stm32n6.BUILD_ID_DIGITS


def test_the_bin_is_what_objcopy_writes(flash_elf, tmp_path):
    made = flash_elf.with_suffix(".bin").read_bytes()
    ours = elf_to_bin(read_image(flash_elf, FLASH_BOOT), tmp_path / "ours.bin").read_bytes()
    assert ours == made
    image = read_image(flash_elf, FLASH_BOOT)
    assert len(made) == image.load_bytes  # one segment: the bytes the boot ROM copies
    assert int.from_bytes(made[4:8], "little") == image.reset_pc


def test_the_development_build_is_not_a_flash_boot_image(flash_elf):
    dev = _make("stm32n6", "stm32n6/hilbench-stm32n6.elf")
    assert read_image(dev, STM32N6).segments[0].address == stm32n6.LOAD_ADDRESS
    with pytest.raises(HilbenchError, match=r"0x34000400\.\.0x[0-9a-f]{8} is outside") as exc:
        read_image(dev, FLASH_BOOT)
    assert "0x34180400..0x341fffff" in str(exc.value)  # 511 KiB: the FSBL's 512 KB less header
    assert "make -C device_fw stm32n6-flash" in str(exc.value)


def test_hilbench_flash_signs_then_writes_the_signed_image(fw_copy, flash_elf, tmp_path):
    bin_dir = tmp_path / "cubeprog" / "bin"
    loader = cubeprog_standin(bin_dir)
    signer = signing_standin(bin_dir)
    done = hilbench("flash", "--fw", str(fw_copy), "--probe", "003A0029", path=str(bin_dir))
    assert done.returncode == 0, done.stderr
    binary, signed = fw_copy.with_suffix(".bin"), fw_copy.with_name(f"{fw_copy.stem}-trusted.bin")
    assert calls(bin_dir) == [
        ["-bin", str(binary), "-nk", "-of", "0x80000000", "-t", "fsbl", "-hv", "2.3", "-align",
         "-o", str(signed)],
        ["-c", "port=SWD", "mode=HOTPLUG", "sn=003A0029", "-el", str(loader),
         "-w", str(signed), "0x70000000", "-v"],
    ]  # fmt: skip
    assert sign_command(str(signer), binary, signed)[1:] == calls(bin_dir)[0]
    assert binary.read_bytes() == flash_elf.with_suffix(".bin").read_bytes()
    assert signed.read_bytes() == SIGNED_MAGIC + binary.read_bytes()
    assert done.stdout.splitlines()[-1] == (
        "to boot from it: set BOOT1 low (flash boot), then power-cycle the board"
    )


def test_without_image_it_builds_the_flash_variant(flash_elf, tmp_path):
    bin_dir = tmp_path / "bin"
    signing_standin(bin_dir)
    standin(bin_dir, "openocd")
    tools = {os.path.dirname(shutil.which(t)) for t in ("make", "arm-none-eabi-gcc")}
    done = hilbench("flash", "--tool", "openocd", path=os.pathsep.join([str(bin_dir), *tools]))
    assert done.returncode == 0, done.stderr
    signed = flash_elf.with_name("hilbench-stm32n6-flash-trusted.bin")
    assert calls(bin_dir)[0][:2] == ["-bin", str(flash_elf.with_suffix(".bin"))]
    assert calls(bin_dir)[1] == [
        "-f", "interface/stlink-dap.cfg", "-f", "target/stm32n6x.cfg",
        "-c", f"program {signed} 0x70000000 verify exit",
    ]  # fmt: skip


def test_the_signing_tool_found_beside_cubeprogrammer(fw_copy, tmp_path):
    install = tmp_path / "STM32CubeProgrammer" / "bin"
    cubeprog_standin(install)
    signing_standin(install)
    on_path = tmp_path / "path"
    on_path.mkdir()
    (on_path / "STM32_Programmer_CLI").symlink_to(install / "STM32_Programmer_CLI")
    done = hilbench("flash", "--fw", str(fw_copy), path=str(on_path))
    assert done.returncode == 0, done.stderr
    assert [c[0] for c in calls(install)] == ["-bin", "-c"]


def test_no_signing_tool_is_one_line_and_nothing_is_written(fw_copy, tmp_path):
    bin_dir = tmp_path / "bin"
    cubeprog_standin(bin_dir)
    err = one_line_error(hilbench("flash", "--fw", str(fw_copy), path=str(bin_dir)))
    assert "no STM32_SigningTool_CLI" in err and "HILBENCH_SIGNINGTOOL=PATH" in err
    assert "install STM32CubeProgrammer" in err
    assert not (bin_dir / "calls.jsonl").exists()


def test_no_flash_tool_is_one_line_before_signing(fw_copy, tmp_path):
    bin_dir = tmp_path / "bin"
    signing_standin(bin_dir)
    err = one_line_error(hilbench("flash", "--fw", str(fw_copy), path=str(bin_dir)))
    assert "no tool to write the external flash" in err
    assert not (bin_dir / "calls.jsonl").exists()


@pytest.mark.parametrize(
    ("code", "magic", "says"), [(1, SIGNED_MAGIC, "exit 1"), (0, b"ELF?", "no header in")]
)
def test_a_signing_failure_is_one_line_and_nothing_is_written(fw_copy, tmp_path, code, magic, says):
    bin_dir = tmp_path / "bin"
    cubeprog_standin(bin_dir)
    signing_standin(bin_dir, code=code, magic=magic)
    err = one_line_error(hilbench("flash", "--fw", str(fw_copy), path=str(bin_dir)))
    assert "STM32_SigningTool_CLI did not sign n6" in err and says in err
    assert "run it by hand" in err
    assert [c[0] for c in calls(bin_dir)] == ["-bin"]  # the programmer never ran


def test_the_development_build_is_refused_with_the_reason(tmp_path):
    dev = _make("stm32n6", "stm32n6/hilbench-stm32n6.elf")
    bin_dir = tmp_path / "bin"
    cubeprog_standin(bin_dir)
    signing_standin(bin_dir)
    err = one_line_error(hilbench("flash", "--fw", str(dev), path=str(bin_dir)))
    assert "linked for RAM (development boot at 0x34000400)" in err
    assert "starts an image from the flash only at 0x34180400" in err
    assert "make -C device_fw stm32n6-flash" in err
    assert not (bin_dir / "calls.jsonl").exists()


def test_an_unsigned_bin_is_refused(tmp_path):
    plain = tmp_path / "plain.bin"
    plain.write_bytes(bytes(64))
    bin_dir = tmp_path / "bin"
    cubeprog_standin(bin_dir)
    err = one_line_error(hilbench("flash", str(plain), path=str(bin_dir)))
    assert "no boot ROM header" in err and "STM32_SigningTool_CLI -bin plain.bin" in err
    assert not (bin_dir / "calls.jsonl").exists()


def test_image_and_fw_together_are_one_line(fw_copy, tmp_path):
    err = one_line_error(hilbench("flash", str(fw_copy), "--fw", str(fw_copy), path=""))
    assert "both IMAGE and --fw" in err
