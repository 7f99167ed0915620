"""Finding the board: port discovery on pyserial's own port records filled as Linux reports an
ST-LINK-V3 (USB 0483:3754, its serial number = the probe id), resolution of --board (a port, a
probe serial, auto) and --probe, and opening real ptys: free, held by another process, held by
a process called ModemManager, locked by another hilbench, no permission (the dialout advice).
Every refusal is one line naming cause and fix."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from serial.tools.list_ports_common import ListPortInfo

from hilbench.board.ports import (
    BoardRef,
    check_port,
    list_ports,
    open_board_port,
    resolve_board,
)
from hilbench.errors import LinkError
from hilbench.link.pty_pair import PtyPair

ROOT = Path(__file__).resolve().parents[2]
SERIAL_A = "003A00293433510F37363934"
SERIAL_B = "0667FF3731384E4D43212539"


def stlink(device: str, serial: str, pid: int = 0x3754) -> ListPortInfo:
    """pyserial's record of an ST-LINK-V3 virtual COM port, as its sysfs reader fills it."""
    info = ListPortInfo(device, skip_link_detection=True)
    info.vid, info.pid, info.serial_number = 0x0483, pid, serial
    info.location, info.manufacturer, info.product = "1-2:1.1", "STMicroelectronics", "STLINK-V3"
    info.description = "STLINK-V3 - ST-Link VCP Ctrl"
    return info


def plain(device: str) -> ListPortInfo:
    return ListPortInfo(device, skip_link_detection=True)


def one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text and exc.value.fix, text
    return text


def test_list_ports_recognises_the_stlink():
    ports = list_ports(lambda: [plain("/dev/ttyS0"), stlink("/dev/ttyACM0", SERIAL_A)])
    first, second = ports
    assert first.device == "/dev/ttyACM0" and first.stlink.startswith("ST-LINK-V3")
    assert first.usb_id == "0483:3754" and first.serial_number == SERIAL_A
    assert second.stlink is None and second.usb_id == ""


def test_auto_finds_the_one_board_and_its_probe():
    ports = [plain("/dev/ttyS0"), stlink("/dev/ttyACM0", SERIAL_A)]
    board = resolve_board("auto", lister=lambda: ports)
    assert (
        board == BoardRef("/dev/ttyACM0", SERIAL_A, board.model) and "STM32N6570-DK" in board.model
    )


def test_auto_with_two_boards_lists_them():
    ports = [stlink("/dev/ttyACM0", SERIAL_A), stlink("/dev/ttyACM1", SERIAL_B)]
    with pytest.raises(LinkError) as err:
        resolve_board("auto", lister=lambda: ports)
    text = one_line(err)
    assert "2 boards attached" in text and f"{SERIAL_A} (/dev/ttyACM0)" in text
    assert f"{SERIAL_B} (/dev/ttyACM1)" in text and "--board SERIAL" in text


def test_auto_without_a_board_names_the_ports_seen():
    with pytest.raises(LinkError) as err:
        resolve_board("auto", lister=lambda: [plain("/dev/ttyS0")])
    text = one_line(err)
    assert "no board attached" in text and "0483:3754" in text and "/dev/ttyS0" in text


def test_a_probe_serial_finds_the_port_whatever_ttyACM_number_it_got():
    ports = [stlink("/dev/ttyACM1", SERIAL_A), stlink("/dev/ttyACM0", SERIAL_B)]
    assert resolve_board(SERIAL_A, lister=lambda: ports).port == "/dev/ttyACM1"
    assert resolve_board(SERIAL_B.lower(), lister=lambda: ports).port == "/dev/ttyACM0"
    assert resolve_board("auto", probe=SERIAL_B, lister=lambda: ports).port == "/dev/ttyACM0"
    assert resolve_board("4E4D4321", lister=lambda: ports).probe_id == SERIAL_B  # a unique part


def test_an_unknown_probe_id():
    with pytest.raises(LinkError) as err:
        resolve_board("066DFF000000", lister=lambda: [stlink("/dev/ttyACM0", SERIAL_A)])
    text = one_line(err)
    assert "no board with probe id '066DFF000000'" in text and SERIAL_A in text


def test_a_port_finds_its_probe_and_a_contradicting_probe_is_refused():
    ports = [stlink("/dev/ttyACM0", SERIAL_A)]
    assert resolve_board("/dev/ttyACM0", lister=lambda: ports).probe_id == SERIAL_A
    with pytest.raises(LinkError) as err:
        resolve_board("/dev/ttyACM0", probe=SERIAL_B, lister=lambda: ports)
    assert "two different boards" in one_line(err)
    assert resolve_board("socket://127.0.0.1:5555", lister=lambda: ports).probe_id is None


def test_a_port_that_does_not_exist_lists_those_that_do():
    with pytest.raises(LinkError) as err:
        resolve_board(
            "/dev/ttyACM7", lister=lambda: [plain("/dev/ttyS0"), stlink("/dev/ttyACM0", SERIAL_A)]
        )
    text = one_line(err)
    assert "/dev/ttyACM7 does not exist" in text and "/dev/ttyACM0, /dev/ttyS0" in text


# --------------------------------------------------------------------------- real ptys


@pytest.fixture
def pty():
    pair = PtyPair()
    yield pair
    pair.close()


def hold(path: str, exe: str = sys.executable) -> subprocess.Popen:
    """Another process with ``path`` open (it says so, then sleeps)."""
    code = (
        "import os, sys, time; os.open(sys.argv[1], os.O_RDWR | os.O_NOCTTY); "
        "print('ok', flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen([exe, "-c", code, path], stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"ok"
    return proc


def test_a_free_pty_opens_exclusively_and_a_second_open_is_refused(pty):
    check_port(pty.path)
    port = open_board_port(pty.path, 921600)
    try:
        assert port.is_open and port.baudrate == 921600
        with pytest.raises(LinkError) as err:
            open_board_port(pty.path, 921600)
        assert "is busy" in one_line(err)
    finally:
        port.close()


def test_a_port_held_by_another_process_names_it(pty):
    proc = hold(pty.path)
    try:
        with pytest.raises(LinkError) as err:
            check_port(pty.path)
        text = one_line(err)
        assert f"(pid {proc.pid})" in text and "is busy" in text
    finally:
        proc.kill()
        proc.wait()


def test_modemmanager_holding_the_port_gets_its_advice(pty, tmp_path):
    exe = tmp_path / "ModemManager"  # a real process whose name is ModemManager
    exe.symlink_to(sys.executable)
    proc = hold(pty.path, str(exe))
    try:
        with pytest.raises(LinkError) as err:
            check_port(pty.path)
        text = one_line(err)
        assert f"ModemManager has {pty.path} open" in text and "ID_MM_DEVICE_IGNORE" in text
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) is not installed")
def test_no_permission_on_the_port_suggests_the_dialout_group(pty):
    os.chown(pty.path, 65534, 65534)  # nobody's port, not ours to open ...
    os.chmod(pty.path, 0o600)
    code = (
        "import sys\nfrom hilbench.board.ports import check_port\n"
        "from hilbench.errors import LinkError\n"
        "try:\n    check_port(sys.argv[1])\nexcept LinkError as e:\n    print(e)\n"
    )
    # ... for a process without capabilities (root's CAP_DAC_OVERRIDE would open anything)
    drop = ["setpriv", "--bounding-set=-all", "--inh-caps=-all"]
    done = subprocess.run(
        [*drop, sys.executable, "-c", code, pty.path],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-800:]
    assert (
        f"no permission to open {pty.path}" in done.stdout and "usermod -aG dialout" in done.stdout
    )
