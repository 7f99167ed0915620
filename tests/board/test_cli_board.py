"""`hilbench ports`, `hilbench probe list` and `hilbench load` as a lab user meets them without a
board attached: what they list, and each mistake as one line on stderr with exit code 2 (no
traceback)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.board.conftest import ROOT, TwinBoard


def hilbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hilbench", *args], capture_output=True, text=True, cwd=ROOT,
        timeout=120,
    )  # fmt: skip


def refused(*args: str) -> str:
    done = hilbench(*args)
    err = done.stderr.strip()
    assert done.returncode == 2, (done.stdout, err)
    assert err.startswith("hilbench: error: ") and "\n" not in err and "Traceback" not in err, err
    return err


def test_ports_lists_what_pyserial_sees():
    import serial.tools.list_ports

    done = hilbench("ports")
    assert done.returncode == 0, done.stderr
    devices = [p.device for p in serial.tools.list_ports.comports()]
    for device in devices:
        assert device in done.stdout
    if not devices:
        assert done.stdout.strip() == "no serial ports"


def test_probe_list_without_a_probe():
    done = hilbench("probe", "list")
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.startswith("no debug probes found")


@pytest.fixture
def console():
    board = TwinBoard()  # a port where nothing answers, held by nobody but its master side
    os.close(board.pty.slave_fd)
    board.pty.slave_fd = -1
    yield board.path
    board.close()


def test_load_mistakes_are_one_line_each(stm32n6_elf, an547_elf, console):
    fw = str(stm32n6_elf)
    assert "no board attached" in refused("load", fw)
    assert "/dev/ttyACM9 does not exist" in refused("load", fw, "--board", "/dev/ttyACM9")
    assert "no board with probe id 'NOPE'" in refused("load", fw, "--board", "NOPE")
    assert "is an ELF for X86_64" in refused("load", sys.executable, "--board", console)
    assert "outside the STM32N6570-DK" in refused("load", str(an547_elf), "--board", console)
    assert "is no ST-LINK port" in refused("load", fw, "--board", console)
    assert "not HOST:PORT" in refused("load", fw, "--board", console, "--gdb", "nowhere")
    assert "--baud" in refused("load", fw, "--board", console, "--baud", "fast")


def test_an_unknown_probe_id_through_pyocd(stm32n6_elf, console):
    args = ("load", str(stm32n6_elf), "--board", console, "--probe", "0000DEADBEEF")
    err = refused(*args)
    assert "no debug probe with id '0000DEADBEEF'" in err and "hilbench probe list" in err
    assert "No connected debug probe" not in hilbench(*args).stdout  # pyOCD's own line: gone


def test_a_probe_without_permission_gets_the_udev_advice():
    """pyOCD reports libusb's refusal as text; hilbench turns it into the udev rule's line."""
    from hilbench.board.pyocd_target import _probe_error

    exc = _probe_error(
        OSError("LIBUSB_ERROR_ACCESS: Access denied (insufficient permissions)"), "x"
    )
    assert "no permission to use the debug probe" in str(exc) and "49-stlink.rules" in exc.fix
    other = _probe_error(RuntimeError("No ACK received"), "connecting to probe 42")
    assert "the debug probe failed while connecting to probe 42" in str(other)
    assert "replug" in other.fix
