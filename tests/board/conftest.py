"""Fixtures of the board tests: the real firmware ELFs (built with make), a pty whose far side
the device twin serves once the (stand-in) core resumes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hilbench.device import DeviceTwin, ThreadedServer
from hilbench.launch.make import run_make
from hilbench.link.pty_pair import PtyPair

ROOT = Path(__file__).resolve().parents[2]


def _make(target: str, elf: str) -> Path:
    status, output = run_make(ROOT, target)
    assert status == 0, output[-2000:]
    return ROOT / "device_fw" / "build" / elf


@pytest.fixture(scope="session")
def stm32n6_elf() -> Path:
    """The stm32n6 firmware CI builds (make -C device_fw stm32n6)."""
    return _make("stm32n6", "stm32n6/hilbench-stm32n6.elf")


@pytest.fixture(scope="session")
def an547_elf() -> Path:
    return _make("an547", "an547/hilbench-an547.elf")


class TwinBoard:
    """A pty (the board's serial port) and the twin behind it, started on demand."""

    def __init__(self) -> None:
        self.pty = PtyPair()
        self.servers: list[ThreadedServer] = []

    @property
    def path(self) -> str:
        return self.pty.path

    def start(self, firmware: str) -> None:
        """The firmware starts answering (the twin standing in for it)."""
        self.servers.append(ThreadedServer(DeviceTwin(firmware=firmware), self.pty.device_stream()))

    def say(self, data: bytes) -> None:
        """Bytes from the board's side (a firmware that prints instead of answering)."""
        os.write(self.pty.device_stream().fd, data)

    def close(self) -> None:
        for s in self.servers:
            s.close()
        self.pty.close()


@pytest.fixture
def twin_board():
    board = TwinBoard()
    yield board
    board.close()
