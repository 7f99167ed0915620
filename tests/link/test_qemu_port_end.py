"""QemuPort at QEMU's end: the bytes QEMU sent just before it exited reach the host."""

from __future__ import annotations

import socket

import pytest
import serial

from hilbench.launch.qemu import QemuPort
from hilbench.link.serial_port import open_port


class EndingProcess:
    """Stand-in for QemuProcess (no QEMU here): the moment the port first asks whether it
    ended, it sends its last bytes and closes its end, the order a fault takes in QEMU."""

    def __init__(self, server: socket.socket, last: bytes) -> None:
        self.server, self.last, self.code = server, last, None

    @property
    def returncode(self) -> int | None:
        if self.code is None:
            self.server.sendall(self.last)
            self.server.close()
            self.code = 3
        return self.code

    def death_report(self, uart_tail: bytes = b"", wait: float = 2.0) -> str:
        return f"QEMU exited with code {self.code}; UART tail: {uart_tail.hex(' ')}"


@pytest.fixture
def pair():
    listener = socket.create_server(("127.0.0.1", 0))
    port = open_port(f"socket://127.0.0.1:{listener.getsockname()[1]}", timeout=0.01)
    server, _ = listener.accept()
    listener.close()
    yield port, server
    port.close()


@pytest.mark.parametrize("size", [1, 64])
def test_the_bytes_sent_between_an_empty_read_and_the_exit_are_read_then_the_end(pair, size):
    port, server = pair
    last = bytes(range(1, 200)) + b"\x00"  # e.g. the end of the fault handler's ERROR frame
    link = QemuPort(port, EndingProcess(server, last))
    got = link.read(size)  # nothing yet: the process ends while the port looks
    assert got == last
    with pytest.raises(serial.SerialException) as err:
        link.read(size)
    assert str(err.value).endswith(f"UART tail: {last.hex(' ')}")
    assert bytes(link.tail).endswith(last)
