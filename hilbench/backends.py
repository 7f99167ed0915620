"""Which device answers the host: the twin (emulate), the firmware in QEMU, or a board.

One small base class and one subclass per backend, chosen from one option (the model is
Zephyr's pytest-twister-harness device adapters). ``open()`` returns a connected ``Target``
that has already answered HELLO.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

import serial

from hilbench.config import RunConfig
from hilbench.device import DeviceTwin, FrameEndpoint, ThreadedServer
from hilbench.errors import HilbenchError, LinkError
from hilbench.link.faults import FaultSpec, FaultyPort
from hilbench.link.memory import MemoryPort
from hilbench.link.pty_pair import PtyPair
from hilbench.link.serial_port import DEFAULT_BAUD, open_port
from hilbench.target.client import Target
from hilbench.target.sil import SilProcess, sil_binary

if TYPE_CHECKING:
    from hilbench.target.qemu import QemuProcess

HELLO_TIMEOUT_S = 2.0  # per try; a live device answers in milliseconds
HELLO_RETRIES = 2  # first contact: give up after 3 tries, not a minute


def single_threaded_blas() -> None:
    """The twin's matmuls are small: BLAS threads only fight the host thread for 2 cores."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(1, user_api="blas")


class Backend(ABC):
    """A way to reach a device; use as a context manager."""

    kind: str = ""

    def __init__(self, faults: FaultSpec | None = None) -> None:
        self.target: Target | None = None
        self.faults = faults if faults is not None and faults.any() else None

    @abstractmethod
    def open(self) -> Target: ...

    def close(self) -> None:
        if self.target is not None:
            self.target.close()
            self.target = None

    def __enter__(self) -> Target:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connect(self, url: str, name: str) -> Target:
        return self._attach(open_port(url), name)

    def _attach(self, port: serial.SerialBase, name: str, **target_options: float) -> Target:
        """A Target on ``port`` (behind the fault injector if asked) that has said HELLO."""
        if self.faults is None:
            target = Target(port, name=name, **target_options)
        else:
            faulty = FaultyPort(port, self.faults)
            target = Target(faulty, name=f"{name} with injected faults", **target_options)
            faulty.on_fault = lambda kind, detail: target.event("injected", f"{kind}: {detail}")
            # a reset goes around the injector, numbered so the device does not drop it as stale
            faulty.reset_device = lambda: port.write(target.reset_frame())
        try:
            target.hello(timeout=HELLO_TIMEOUT_S, retries=HELLO_RETRIES)
        except BaseException:
            target.close()
            raise
        self.target = target
        return target


class EmulatorBackend(Backend):
    """The device twin in this process, behind a pty that pyserial opens like a board's port.

    ``link="memory"`` skips the serial stack (the twin answers inside ``write``): for soak
    tests and studies that need millions of frames; the device code is the same.
    """

    kind = "emulate"
    MEMORY_MIN_RTO_S = 0.001  # answers are immediate: only a lost frame is ever waited for

    def __init__(
        self, twin: DeviceTwin | None = None, faults: FaultSpec | None = None, link: str = "pty"
    ) -> None:
        super().__init__(faults)
        if link not in ("pty", "memory"):
            raise HilbenchError(f"unknown emulator link '{link}'", "use 'pty' or 'memory'")
        self.twin = twin or DeviceTwin()
        self.link = link
        self._pty: PtyPair | None = None
        self._server: ThreadedServer | None = None

    def open(self) -> Target:
        single_threaded_blas()
        if self.link == "memory":
            port = MemoryPort(FrameEndpoint(self.twin).feed)
            return self._attach(port, "emulator (in-memory link)", min_rto=self.MEMORY_MIN_RTO_S)
        self._pty = PtyPair()
        self._server = ThreadedServer(self.twin, self._pty.device_stream())
        return self._connect(self._pty.path, name=f"emulator ({self._pty.path})")

    def close(self) -> None:
        super().close()
        if self._server:
            self._server.close()
            self._server = None
        if self._pty:
            self._pty.close()
            self._pty = None


class SerialBackend(Backend):
    """A device on any pyserial URL: a board's /dev/ttyACM0, or socket://HOST:PORT."""

    kind = "board"

    def __init__(self, url: str, faults: FaultSpec | None = None, baud: int = DEFAULT_BAUD) -> None:
        super().__init__(faults)
        self.url = url
        self.baud = baud

    def open(self) -> Target:
        return self._attach(open_port(self.url, baudrate=self.baud), name=self.url)


class SilBackend(Backend):
    """The firmware core built for Linux (``device_fw/port/host``), a child process serving
    the protocol on a pty that pyserial opens like a board's port (software in the loop)."""

    kind = "sil"

    def __init__(
        self, firmware: str | None = None, faults: FaultSpec | None = None, *options: str
    ) -> None:
        super().__init__(faults)
        self.firmware = firmware
        self.options = options
        self.process: SilProcess | None = None

    def open(self) -> Target:
        self.process = SilProcess(sil_binary(self.firmware), *self.options)
        path = self.process.start()
        try:
            return self._connect(path, name=f"SIL firmware ({path})")
        except HilbenchError as exc:
            self.close()
            raise LinkError(
                f"{exc.cause} (SIL: {self.process.failure() if self.process else 'stopped'})",
                exc.fix,
            ) from None

    def close(self) -> None:
        super().close()
        if self.process is not None:
            self.process.stop()
            self.process = None


class QemuBackend(Backend):
    """The firmware built for the Cortex-M55 (``device_fw/port/an547``) under
    ``qemu-system-arm -M mps3-an547``, its UART0 on a local TCP port that pyserial opens
    (``socket://``). ``firmware``: an ELF (default: built with make). ``icount``: run QEMU with
    ``-icount shift=0`` so durations are executed instructions (source ``instr``).
    ``fw_options``: the firmware's settings (hilbench.target.qemu.firmware_args: boot_nonce,
    arena_bytes, max_payload, device_id, firmware, crash_after). ``port``: the UART's TCP port
    (default: a free one, or $HILBENCH_QEMU_PORT)."""

    kind = "qemu"

    def __init__(
        self,
        firmware: str | None = None,
        faults: FaultSpec | None = None,
        *,
        icount: bool = True,
        port: int | None = None,
        **fw_options: object,
    ) -> None:
        super().__init__(faults)
        self.firmware = firmware
        self.icount = icount
        self.port = port
        self.fw_options = fw_options
        self.process: QemuProcess | None = None

    def open(self) -> Target:
        from hilbench.target.qemu import QemuPort, QemuProcess, firmware_args, firmware_elf

        elf = firmware_elf(self.firmware)
        args = firmware_args(icount=self.icount, **self.fw_options)
        self.process = QemuProcess(elf, args, port=self.port, icount=self.icount)
        url = f"socket://127.0.0.1:{self.process.start()}"
        link = None
        try:
            link = QemuPort(open_port(url), self.process)
            return self._attach(link, f"the firmware under QEMU ({url})")
        except HilbenchError as exc:
            cause = exc.cause
            if "UART tail:" not in cause:  # QemuPort's errors carry the report already
                tail = bytes(link.tail) if link else b""
                cause += f" ({self.process.death_report(tail, wait=0.2)})"
            self.close()
            raise LinkError(
                cause,
                f"check that {elf} is the hilbench an547 firmware (make -C device_fw an547 "
                "builds it; leave --fw out to use that one)",
            ) from None

    def close(self) -> None:
        super().close()
        if self.process is not None:
            self.process.stop()
            self.process = None

    @staticmethod
    def check_available() -> None:
        """Raise a one-line error if qemu-system-arm is missing or cannot model the AN547."""
        from hilbench.target.qemu import check_qemu

        check_qemu()


def make_backend(config: RunConfig) -> Backend:
    """The backend ``config`` names, with the link faults it asks for."""
    faults = FaultSpec.parse(config.link_faults) if config.link_faults else None
    if config.backend == "qemu":
        return QemuBackend(config.firmware, faults)
    if config.backend == "sil":
        return SilBackend(config.firmware, faults)
    if config.backend == "board":
        if (config.port or "").strip().startswith(("labgrid:", "map:")):  # a farm's board
            from hilbench.farm import backend_for

            return backend_for(config.port or "", faults, firmware=config.firmware)
        from hilbench.board.backend import BoardBackend, wants_board_backend

        if wants_board_backend(config.port or "", config.firmware):  # auto, a probe, an ST-LINK
            return BoardBackend(
                config.port or "", faults, baud=config.baud, firmware=config.firmware
            )
        return SerialBackend(config.port or "", faults=faults, baud=config.baud)
    return EmulatorBackend(DeviceTwin(timing_model=config.timing_model), faults=faults)
