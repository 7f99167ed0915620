"""``--qemu``: the firmware built for the Cortex-M55 under ``qemu-system-arm -M mps3-an547``."""

from __future__ import annotations

from hilbench.backend.base import Backend, Connection
from hilbench.board.stage import gdb_stager
from hilbench.errors import HilbenchError, LinkError
from hilbench.launch.qemu import QemuPort, QemuProcess, check_qemu, firmware_args, firmware_elf
from hilbench.link.faults import FaultSpec
from hilbench.link.serial_port import open_port


class QemuBackend(Backend):
    """The firmware built for the Cortex-M55 (``device_fw/port/an547``) under
    ``qemu-system-arm -M mps3-an547``, its UART0 on a local TCP port that pyserial opens
    (``socket://``). ``firmware``: an ELF (default: built with make). ``icount``: run QEMU with
    ``-icount shift=0`` so durations are executed instructions (source ``instr``).
    ``fw_options``: the firmware's settings (hilbench.launch.qemu.firmware_args: boot_nonce,
    arena_bytes, max_payload, device_id, firmware, crash_after). ``port``: the UART's TCP port
    (default: a free one, or $HILBENCH_QEMU_PORT). ``upload="probe"``: QEMU's GDB stub on a
    free local port, and the model and data written through it (LOAD_STAGE / LOAD_COMMIT,
    hilbench/board/stage.py) instead of over the UART."""

    kind = "qemu"

    def __init__(
        self,
        firmware: str | None = None,
        faults: FaultSpec | None = None,
        *,
        icount: bool = True,
        port: int | None = None,
        upload: str = "uart",
        **fw_options: object,
    ) -> None:
        super().__init__(faults)
        self.upload = upload
        self.firmware = firmware
        self.icount = icount
        self.port = port
        self.fw_options = fw_options
        self.process: QemuProcess | None = None

    def open(self) -> Connection:
        elf = firmware_elf(self.firmware)
        args = firmware_args(icount=self.icount, **self.fw_options)
        gdb = self.upload == "probe"
        self.process = QemuProcess(elf, args, port=self.port, icount=self.icount, gdb=gdb)
        url = f"socket://127.0.0.1:{self.process.start()}"
        link = None
        try:
            link = QemuPort(open_port(url), self.process)
            connection = self._attach(link, f"the firmware under QEMU ({url})")
            if gdb and self.process.gdb_port is not None:
                connection.client.stager = gdb_stager("127.0.0.1", self.process.gdb_port)
            return connection
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
        check_qemu()
