"""A firmware ELF as the loader needs it, checked before anything touches a board.

:func:`read_image` reads the loadable segments (at their load addresses), the entry point, the
vector table (initial SP and reset handler) and the GNU build id with pyelftools, and refuses in
one line an ELF for another machine or core, one with nothing to load, one whose segments fall
outside the board's RAM or do not fit it, one without a vector table where the board starts.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from hilbench.board import stm32n6
from hilbench.errors import HilbenchError

#: Tag_CPU_arch values of M-profile architectures a Cortex-M55 runs (v6-M .. v8.1-M.main).
M_PROFILE_ARCHS = {11: "v6-M", 12: "v6S-M", 13: "v7E-M", 16: "v8-M.base", 17: "v8-M.main",
                   21: "v8.1-M.main"}  # fmt: skip
_ARCH_NAMES = {10: "v7 (A/R)", 14: "v8-A", 15: "v8-R", 18: "v8.1-A", 19: "v8.2-A",
               20: "v8.3-A", 22: "v9-A"}  # fmt: skip


@dataclass(frozen=True)
class MemoryRegion:
    name: str
    start: int
    size: int

    @property
    def end(self) -> int:
        return self.start + self.size

    def holds(self, start: int, size: int) -> bool:
        return self.start <= start and start + size <= self.end

    def __str__(self) -> str:
        return f"{self.name} 0x{self.start:08x}..0x{self.end - 1:08x}"


@dataclass(frozen=True)
class BoardProfile:
    """Where a board's firmware must be loaded and where its vector table must be."""

    name: str
    ram: tuple[MemoryRegion, ...]
    vector_table: int
    build_hint: str  # how to build a firmware that fits

    def region_of(self, start: int, size: int) -> MemoryRegion | None:
        return next((r for r in self.ram if r.holds(start, size)), None)


STM32N6 = BoardProfile(
    "STM32N6570-DK (development boot)",
    (
        MemoryRegion(
            "AXISRAM1+2 (Secure)",
            stm32n6.LOAD_ADDRESS,
            stm32n6.RAM_START + stm32n6.RAM_BYTES - stm32n6.LOAD_ADDRESS,
        ),
    ),
    stm32n6.LOAD_ADDRESS,
    "link it for development boot at 0x34000400 (make -C device_fw stm32n6 builds "
    "device_fw/build/stm32n6/hilbench-stm32n6.elf)",
)

#: The MPS3 AN547 as QEMU models it (device_fw/port/an547/an547_memory.ld).
AN547 = BoardProfile(
    "MPS3 AN547 (QEMU)",
    (
        MemoryRegion("ITCM", 0x00000000, 512 * 1024),
        MemoryRegion("SRAM", 0x01000000, 2 * 1024 * 1024),
        MemoryRegion("DTCM", 0x20000000, 512 * 1024),
        MemoryRegion("ISRAM", 0x21000000, 4 * 1024 * 1024),
    ),
    0x00000000,
    "build the an547 firmware (make -C device_fw an547)",
)


@dataclass(frozen=True)
class Segment:
    address: int  # where it is loaded (the ELF's physical address)
    data: bytes  # the bytes to write (file size)
    mem_size: int  # what it occupies at run time (.bss beyond the data)


@dataclass(frozen=True)
class FirmwareImage:
    path: Path
    segments: tuple[Segment, ...]
    entry: int
    vector_table: int
    initial_sp: int
    reset_pc: int  # with the Thumb bit, as the vector table holds it
    build_id: str | None  # the GNU build id (hex), when the ELF has one
    cpu: str  # e.g. "cortex-m55 (v8.1-M.main)"

    @property
    def load_bytes(self) -> int:
        return sum(len(s.data) for s in self.segments)

    @property
    def image_id(self) -> str:
        """What a running firmware reports as its build (hilbench/board/stm32n6.py): the build
        id's first digits, else a SHA-256 of the loaded bytes and their addresses."""
        if self.build_id:
            return self.build_id[: stm32n6.BUILD_ID_DIGITS]
        digest = hashlib.sha256()
        for s in self.segments:
            digest.update(s.address.to_bytes(4, "little") + s.data)
        return digest.hexdigest()[: stm32n6.BUILD_ID_DIGITS]

    def word_at(self, address: int) -> int | None:
        for s in self.segments:
            if s.address <= address and address + 4 <= s.address + len(s.data):
                off = address - s.address
                return int.from_bytes(s.data[off : off + 4], "little")
        return None


def _fail(path: Path, cause: str, fix: str) -> HilbenchError:
    return HilbenchError(f"firmware {path}: {cause}", fix)


def read_image(path: str | Path, profile: BoardProfile = STM32N6) -> FirmwareImage:
    """The ELF at ``path``, checked against ``profile``; one-line errors naming cause and fix."""
    path = Path(path)
    fix = f"give the hilbench firmware for the {profile.name}: {profile.build_hint}"
    try:
        with open(path, "rb") as f:
            elf = ELFFile(f)
            return _read(elf, path, profile, fix)
    except FileNotFoundError:
        raise _fail(path, "no such file", fix) from None
    except IsADirectoryError:
        raise _fail(path, "is a directory, not an ELF file", fix) from None
    except PermissionError:
        raise _fail(path, "not readable (permission denied)", f"chmod +r {path}") from None
    except (ELFError, ValueError) as exc:
        raise _fail(path, f"is not an ELF file ({str(exc).splitlines()[0][:80]})", fix) from None


def _read(elf: ELFFile, path: Path, profile: BoardProfile, fix: str) -> FirmwareImage:
    machine = elf["e_machine"]
    if machine != "EM_ARM" or elf.elfclass != 32 or not elf.little_endian:
        what = machine.removeprefix("EM_") if machine != "EM_ARM" else "big-endian or 64-bit ARM"
        raise _fail(
            path, f"is an ELF for {what}, not for a Cortex-M (32-bit little-endian ARM)", fix
        )
    if elf["e_type"] != "ET_EXEC":
        raise _fail(path, f"is an ARM ELF but not an executable ({elf['e_type']})", fix)
    cpu = _check_core(elf, path, fix)
    segments = []
    for seg in elf.iter_segments():
        if seg["p_type"] != "PT_LOAD" or seg["p_memsz"] == 0:
            continue
        start, mem = seg["p_paddr"], seg["p_memsz"]
        if profile.region_of(start, mem) is None:
            inside = [r for r in profile.ram if r.start <= start < r.end]
            if inside:
                cause = (
                    f"its segment at 0x{start:08x} needs {mem // 1024} KiB, more than the "
                    f"{(inside[0].end - start) // 1024} KiB left in {inside[0]}"
                )
                raise _fail(path, f"does not fit the RAM: {cause}", fix)
            ram = ", ".join(str(r) for r in profile.ram)
            raise _fail(
                path,
                f"its segment at 0x{start:08x}..0x{start + mem - 1:08x} is outside the "
                f"{profile.name}'s RAM ({ram})",
                fix,
            )
        segments.append(Segment(start, seg.data(), mem))
    if not segments:
        raise _fail(path, "has no loadable segment", fix)
    image = FirmwareImage(
        path=path,
        segments=tuple(sorted(segments, key=lambda s: s.address)),
        entry=elf["e_entry"],
        vector_table=profile.vector_table,
        initial_sp=0,
        reset_pc=0,
        build_id=_build_id(elf),
        cpu=cpu,
    )
    sp, pc = image.word_at(profile.vector_table), image.word_at(profile.vector_table + 4)
    if sp is None or pc is None:
        raise _fail(path, f"has no vector table at 0x{profile.vector_table:08x}", fix)
    if not pc & 1 or image.word_at(pc & ~1) is None:
        raise _fail(
            path,
            f"the vector table at 0x{profile.vector_table:08x} names reset handler 0x{pc:08x}, "
            "which is not Thumb code of the image",
            fix,
        )
    if profile.region_of(sp - 4, 4) is None:
        raise _fail(path, f"its initial stack pointer 0x{sp:08x} is outside the RAM", fix)
    return FirmwareImage(**{**image.__dict__, "initial_sp": sp, "reset_pc": pc})


def _check_core(elf: ELFFile, path: Path, fix: str) -> str:
    """The core the ELF was built for (its build attributes); refuse an A/R-profile one."""
    section = elf.get_section_by_name(".ARM.attributes")
    tags: dict[str, object] = {}
    if section is not None and hasattr(section, "iter_subsections"):
        for sub in section.iter_subsections():
            for subsub in sub.iter_subsubsections():
                for attr in subsub.iter_attributes():
                    tags[attr.tag] = attr.value
    arch = tags.get("TAG_CPU_ARCH")
    profile = tags.get("TAG_CPU_ARCH_PROFILE")
    name = str(tags.get("TAG_CPU_NAME", "") or "").strip()
    if profile not in (None, 0, ord("M")) or (arch is not None and arch not in M_PROFILE_ARCHS):
        arch_name = _ARCH_NAMES.get(arch, f"architecture {arch}")  # type: ignore[arg-type]
        kind = (
            f"an {chr(profile)}-profile core" if isinstance(profile, int) and profile else arch_name
        )
        detail = f" ({name}, Arm{arch_name})" if name else f" (Arm{arch_name})"
        raise _fail(path, f"was built for {kind}{detail}, not for a Cortex-M (M profile)", fix)
    arch_name = M_PROFILE_ARCHS.get(arch, "unknown architecture")  # type: ignore[arg-type]
    return f"{name or 'Cortex-M'} ({arch_name})"


def _build_id(elf: ELFFile) -> str | None:
    for section in elf.iter_sections():
        if section["sh_type"] != "SHT_NOTE":
            continue
        for note in section.iter_notes():
            if note["n_type"] == "NT_GNU_BUILD_ID":
                return str(note["n_desc"])
    return None
