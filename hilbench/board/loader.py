"""Load a firmware ELF into a board's RAM and start it, the way development boot wants it.

The sequence (:func:`load`), the same whatever debugger answers (hilbench/board/debug.py):

1. the serial port is already open (the caller opened it), so nothing the firmware says early
   is lost; if the firmware there answers HELLO with this ELF's build, nothing is loaded;
2. halt the core; write each segment in chunks (progress reported); read the vector table back
   (a board not in development boot does not keep what is written);
3. VTOR = the image's vector table; a *core* reset (SP and PC from that table) -- never a system
   reset, which on the STM32N6 erases AXISRAM1/2; check SP and PC are the image's;
4. drop stale serial input, resume the core, wait for HELLO (the UART tail when none comes).

A probe error in steps 2-3 retries the whole load at the next lower SWD frequency. Every step
is timed and reported to ``on_step`` (the pytest lifecycle's log).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import serial

from hilbench.board.debug import VTOR, DebugLinkError, DebugTarget
from hilbench.board.elfimage import FirmwareImage
from hilbench.board.lifecycle import describe_tail
from hilbench.board.stm32n6 import build_id_in
from hilbench.client.device_client import DeviceClient, DeviceInfo
from hilbench.errors import HilbenchError, LinkError
from hilbench.link.wrapper import PortWrapper

#: SWD frequencies tried in turn when the probe fails (Hz); an ST-LINK-V3 that locks up at a
#: high speed usually works at a lower one.
FREQUENCIES: tuple[int, ...] = (4_000_000, 1_000_000, 200_000)
CHUNK_BYTES = 4096  # one progress step
RUNNING_HELLO_S = 0.3  # is our firmware already there? (a live one answers in milliseconds)
HELLO_AFTER_LOAD_S = 3.0
TAIL_BYTES = 256
PARTIAL = "the board's RAM may hold a partial image: run `hilbench load` again"


class TailPort(PortWrapper):
    """A port that keeps the last bytes it received (for the report when nothing answers)."""

    def __init__(self, port: serial.SerialBase) -> None:
        super().__init__(port)
        self.tail = bytearray()

    def read(self, size: int = 1) -> bytes:
        data = self.port.read(size)
        if data:
            self.tail += data
            del self.tail[:-TAIL_BYTES]
        return data

    def reset_input_buffer(self) -> None:
        self.port.reset_input_buffer()

    def drop_input(self) -> None:
        with contextlib.suppress(Exception):
            self.port.reset_input_buffer()
        with contextlib.suppress(Exception):
            while self.port.in_waiting:
                self.port.read(self.port.in_waiting)
        self.tail.clear()


@dataclass
class LoadResult:
    target: DeviceClient  # connected, HELLO answered; the caller owns it (closing closes the port)
    info: DeviceInfo
    skipped: bool  # the board already ran this build
    frequency: int | None = None  # the SWD frequency the load worked at
    bytes_written: int = 0
    steps: list[tuple[str, float]] = field(default_factory=list)


def running_build(target: DeviceClient) -> DeviceInfo | None:
    """HELLO from whatever runs on the port, or None when nothing answers quickly."""
    try:
        return target.hello(timeout=RUNNING_HELLO_S, retries=0)
    except HilbenchError:
        return None


def load(
    image: FirmwareImage,
    connect: Callable[[int], DebugTarget],
    port: serial.SerialBase,
    *,
    board: str = "board",
    frequencies: Sequence[int] = FREQUENCIES,
    force: bool = False,
    progress: Callable[[int, int], None] | None = None,
    on_step: Callable[[str, float], None] | None = None,
    hello_timeout: float = HELLO_AFTER_LOAD_S,
) -> LoadResult:
    """Put ``image`` on the board and return the connected target (see the module's doc).
    ``connect(frequency)`` opens the debugger; ``port`` is the board's open serial port."""
    steps: list[tuple[str, float]] = []

    def step(name: str, since: float) -> None:
        steps.append((name, time.monotonic() - since))
        if on_step is not None:
            on_step(name, steps[-1][1])

    tail_port = TailPort(port)
    target = DeviceClient(tail_port, name=board)
    t0 = time.monotonic()
    if not force:
        info = running_build(target)
        step("check running firmware", t0)
        if info is not None and build_id_in(info.firmware) == image.image_id:
            return LoadResult(target, info, skipped=True, steps=steps)
    written, frequency = _load_with_retries(image, connect, tail_port, frequencies, progress, step)
    t0 = time.monotonic()
    try:
        info = target.hello(timeout=hello_timeout / 3, retries=2)
    except HilbenchError as exc:
        raise LinkError(
            f"{board}: the firmware was loaded and started but did not answer HELLO within "
            f"{hello_timeout:g} s ({exc.cause}); UART tail: {describe_tail(bytes(tail_port.tail))}",
            "check the baud rate (--baud; the firmware's STM32N6_BAUD, 921600 by default) and "
            "that the ELF is the hilbench stm32n6 firmware; a fault report shows in the tail",
        ) from None
    step("wait for HELLO", t0)
    return LoadResult(target, info, skipped=False, frequency=frequency, bytes_written=written,
                      steps=steps)  # fmt: skip


def _speed(frequency: int) -> str:
    """An SWD frequency as the log says it; 0 is the link's own (a GDB stub has no SWD)."""
    return f"{frequency / 1e6:g} MHz" if frequency else "the link's own speed"


def _load_with_retries(
    image: FirmwareImage,
    connect: Callable[[int], DebugTarget],
    port: TailPort,
    frequencies: Sequence[int],
    progress: Callable[[int, int], None] | None,
    step: Callable[[str, float], None],
) -> tuple[int, int]:
    failures = []
    for frequency in frequencies:
        t0 = time.monotonic()
        try:
            debug = connect(frequency)
        except DebugLinkError as exc:
            failures.append(f"{_speed(frequency)}: {exc.cause}")
            continue
        step(f"connect probe at {_speed(frequency)}", t0)
        try:
            written = _write_and_start(image, debug, port, progress, step)
            return written, frequency
        except DebugLinkError as exc:
            failures.append(f"{_speed(frequency)}: {exc.cause}")
        finally:
            debug.close()
    raise DebugLinkError(
        f"the probe stopped answering at every SWD frequency tried ({'; '.join(failures)})",
        f"unplug and replug the ST-LINK (it locks up at high SWD speed); {PARTIAL}",
    )


def _write_and_start(
    image: FirmwareImage,
    debug: DebugTarget,
    port: TailPort,
    progress: Callable[[int, int], None] | None,
    step: Callable[[str, float], None],
) -> int:
    t0 = time.monotonic()
    debug.halt()
    step("halt", t0)
    t0 = time.monotonic()
    total, done = image.load_bytes, 0
    if progress is not None:
        progress(0, total)
    for segment in image.segments:
        for off in range(0, len(segment.data), CHUNK_BYTES):
            part = segment.data[off : off + CHUNK_BYTES]
            debug.write_memory(segment.address + off, part)
            done += len(part)
            if progress is not None:
                progress(done, total)
    step(f"write {total} bytes", t0)
    t0 = time.monotonic()
    head = debug.read_memory(image.vector_table, 8)
    expected = image.initial_sp.to_bytes(4, "little") + image.reset_pc.to_bytes(4, "little")
    if head != expected:
        raise HilbenchError(
            f"the board's RAM did not keep the image (0x{image.vector_table:08x} reads "
            f"{head.hex(' ')} after writing {expected.hex(' ')})",
            "put the board in development boot (STM32N6570-DK: BOOT1 switch high, then power "
            f"cycle) and run `hilbench load` again; {PARTIAL}",
        )
    debug.write_word(VTOR, image.vector_table)
    debug.core_reset(image.vector_table)
    sp, pc = debug.read_register("sp"), debug.read_register("pc")
    if sp != image.initial_sp or pc != image.reset_pc & ~1:
        raise HilbenchError(
            f"after the core reset SP = 0x{sp:08x} and PC = 0x{pc:08x}, not the image's "
            f"0x{image.initial_sp:08x} and 0x{image.reset_pc & ~1:08x}",
            "put the board in development boot (BOOT1 high, power cycle) and load again",
        )
    step("set VTOR, core reset", t0)
    t0 = time.monotonic()
    port.drop_input()  # the port is open: what the new firmware says from now on is kept
    debug.resume()
    step("resume", t0)
    return total
