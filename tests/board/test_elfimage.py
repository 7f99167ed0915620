"""ELF handling on the real stm32n6 firmware CI builds (make -C device_fw stm32n6), checked
against binutils' own reading of the same file, and every ELF a user could give by mistake,
each refused in one line."""

from __future__ import annotations

import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from hilbench.board import elfimage, stm32n6
from hilbench.errors import HilbenchError


def readelf(*args: str) -> str:
    return subprocess.run(["arm-none-eabi-readelf", *args], capture_output=True, text=True).stdout


def symbols(elf: Path) -> dict[str, int]:
    out = subprocess.run(["arm-none-eabi-nm", str(elf)], capture_output=True, text=True).stdout
    return {
        parts[2]: int(parts[0], 16) for parts in map(str.split, out.splitlines()) if len(parts) == 3
    }


def test_the_stm32n6_firmware_as_binutils_reads_it(stm32n6_elf):
    image = elfimage.read_image(stm32n6_elf)
    loads = [
        (int(m.group(2), 16), int(m.group(3), 16), int(m.group(4), 16))
        for m in re.finditer(
            r"LOAD\s+0x[0-9a-f]+ 0x([0-9a-f]+) 0x([0-9a-f]+) 0x([0-9a-f]+) 0x([0-9a-f]+)",
            readelf("-lW", str(stm32n6_elf)),
        )
    ]
    assert [(s.address, len(s.data), s.mem_size) for s in image.segments] == loads
    sym = symbols(stm32n6_elf)
    assert image.segments[0].address == stm32n6.LOAD_ADDRESS == sym["hb_n6_vectors"]
    assert image.entry == image.reset_pc == sym["Reset_Handler"] | 1
    assert image.initial_sp == sym["__stack_top"]
    last = max(s.address + s.mem_size for s in image.segments)
    # the arena runs from the image's end to the end of AXISRAM6 (AXISRAM1..6 are contiguous;
    # the firmware powers AXISRAM3..6 up: docs/board.md)
    assert last <= sym["__arena_start"] < sym["__arena_end"] == 0x343C0000
    build_id = re.search(r"Build ID: ([0-9a-f]+)", readelf("-n", str(stm32n6_elf))).group(1)
    assert image.build_id == build_id and image.image_id == build_id[: stm32n6.BUILD_ID_DIGITS]
    assert image.cpu == "cortex-m55 (v8.1-M.main)"
    # what the firmware will say in HELLO (its C template) carries exactly this id
    hello = stm32n6.MESSAGES["FIRMWARE"].replace("%d", "1").replace("%s", image.image_id)
    assert len(hello.encode()) <= 64 and stm32n6.build_id_in(hello) == image.image_id
    # the vector table: the USART1 interrupt (159) goes to the UART's handler
    usart1 = image.word_at(stm32n6.LOAD_ADDRESS + 4 * (16 + 159))
    assert usart1 == sym["hb_n6_uart_isr"] | 1


def refused(path, profile=elfimage.STM32N6) -> str:
    with pytest.raises(HilbenchError) as err:
        elfimage.read_image(path, profile)
    text = str(err.value)
    assert "\n" not in text and str(path) in text
    return text


def test_an_elf_for_another_machine():
    assert "is an ELF for X86_64, not for a Cortex-M" in refused(Path(sys.executable).resolve())


def test_not_an_elf(tmp_path):
    (tmp_path / "fw.bin").write_bytes(b"\x00" * 100)
    assert "is not an ELF file" in refused(tmp_path / "fw.bin")
    assert "no such file" in refused(tmp_path / "missing.elf")
    assert "is a directory" in refused(tmp_path)


def test_an547_image_is_outside_the_boards_ram(an547_elf):
    text = refused(an547_elf)
    assert "segment at 0x00000000" in text and "outside" in text and "0x34000400" in text
    assert "make -C device_fw stm32n6" in text


def test_too_large_for_the_ram(stm32n6_elf, tmp_path):
    data = bytearray(stm32n6_elf.read_bytes())
    (phoff,) = struct.unpack_from("<I", data, 0x1C)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x2A)
    for i in range(phnum):
        entry = phoff + i * phentsize
        if struct.unpack_from("<I", data, entry)[0] == 1:  # PT_LOAD: 3 MiB of .bss
            struct.pack_into("<I", data, entry + 20, 3 * 1024 * 1024)
    big = tmp_path / "big.elf"
    big.write_bytes(bytes(data))
    text = refused(big)
    assert "does not fit the RAM" in text and "3072 KiB" in text and "2047 KiB left" in text


def _cross(tmp_path, name: str, *flags: str) -> Path:
    src = tmp_path / "start.c"
    src.write_text("void start(void); void start(void) { for (;;) {} }\n")
    out = tmp_path / name
    done = subprocess.run(
        ["arm-none-eabi-gcc", *flags, "-nostdlib", "-e", "start", "-o", str(out), str(src)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return out


def test_an_elf_for_another_core(tmp_path):
    elf = _cross(tmp_path, "a9.elf", "-mcpu=cortex-a9", "-marm", "-Wl,-Ttext=0x34000400")
    assert "was built for an A-profile core (7-A, Armv7 (A/R)), not for a Cortex-M" in refused(elf)


def test_relocatable_object_and_missing_vector_table(tmp_path):
    obj = _cross(tmp_path, "start.o", "-mcpu=cortex-m55", "-mthumb", "-c")
    assert "not an executable (ET_REL)" in refused(obj)
    elf = _cross(tmp_path, "late.elf", "-mcpu=cortex-m55", "-mthumb", "-Wl,-Ttext=0x34100000")
    assert "has no vector table at 0x34000400" in refused(elf)
