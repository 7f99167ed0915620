"""The an547 firmware under QEMU as a raw byte device for tests/sil/differential.py: the same
interface as its SilStdio (send / receive / exchange / close), over the UART's TCP port."""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path

from hilbench.launch.qemu import QemuProcess, firmware_args
from tests.sil.differential import (
    ANSWER_TIMEOUT_S,
    DEVICE_ID,
    FIRMWARE,
    DeviceConfig,
    receive_bytes,
)

REBOOT_TIMEOUT_S = 30.0


class QemuStream:
    """QEMU started with the differential's device settings, no -icount (timing source none,
    as the twin's there), its UART as a plain socket."""

    reboot_drops_input = True  # a RESET reboots the emulated core: later bytes are lost

    def __init__(self, elf: Path, config: DeviceConfig) -> None:
        args = firmware_args(
            icount=False,
            boot_nonce=config.boot_nonce,
            arena_bytes=config.arena_bytes,
            max_payload=config.max_payload,
            device_id=DEVICE_ID,
            firmware=FIRMWARE,
        )
        self.process = QemuProcess(elf, args, icount=False)
        port = self.process.start()
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.boots = 1
        if not self.process.wait_boots(1, REBOOT_TIMEOUT_S):
            raise RuntimeError(f"the firmware did not boot: {self.process.failure()}")

    def send(self, data: bytes) -> threading.Thread:
        writer = threading.Thread(target=self._write, args=(data,), daemon=True)
        writer.start()
        return writer

    def _write(self, data: bytes) -> None:
        with contextlib.suppress(OSError):  # a dead QEMU: receive() sees the silence
            self.sock.sendall(data)

    def exchange(self, data: bytes, n_bytes: int, timeout: float = ANSWER_TIMEOUT_S) -> bytes:
        self.send(data)
        return self.receive(n_bytes, timeout)

    def receive(self, n_bytes: int, timeout: float = ANSWER_TIMEOUT_S) -> bytes:
        return receive_bytes(self.sock, self.sock.recv, n_bytes, timeout)

    def after_reboot(self) -> None:
        """Wait for the BOOT line of the reboot a RESET started."""
        self.boots += 1
        if not self.process.wait_boots(self.boots, REBOOT_TIMEOUT_S):
            raise RuntimeError(f"the firmware did not boot again: {self.process.failure()}")

    def close(self) -> str:
        with contextlib.suppress(OSError):
            self.sock.close()
        status = self.process.failure()
        self.process.stop()
        return status
