"""Finding a board: its serial port and its debug probe, by a stable id.

An ST-LINK is recognised by its USB id (vendor 0483); the DK's ST-LINK-V3 is 0483:3754. Its USB
serial number is both pyOCD's probe id and the virtual COM port's serial number, so one key
finds both: ``--board`` takes a port, a probe serial or ``auto`` (the one board attached) and
:func:`resolve_board` finds the other half. :func:`open_board_port` opens the port exclusively
and, when it cannot, says why in one line: missing (with the ports that exist), no permission
(the dialout group), held by another process (which one; ModemManager named as such).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import serial
import serial.tools.list_ports
from serial.tools.list_ports_common import ListPortInfo

from hilbench.errors import LinkError

ST_VID = 0x0483
#: ST-LINK product ids with a virtual COM port, and what they are.
STLINK_PIDS = {
    0x3754: "ST-LINK-V3 (STM32N6570-DK, V3MINIE)",
    0x374B: "ST-LINK-V2-1",
    0x374E: "ST-LINK-V3",
    0x374F: "ST-LINK-V3",
    0x3752: "ST-LINK-V2-1",
    0x3753: "ST-LINK-V3 (2 VCPs)",
    0x3757: "ST-LINK-V3PWR",
}
DIALOUT_FIX = (
    "add yourself to the port's group: `sudo usermod -aG dialout $USER`, then log out and in "
    "(docs/board.md)"
)
MODEMMANAGER_FIX = (
    "ModemManager probes new ttyACM ports for 10-20 s: wait and retry, or make it leave "
    'ST-LINKs alone: ATTRS{idVendor}=="0483", ENV{ID_MM_DEVICE_IGNORE}="1" in a udev rule '
    "(docs/board.md), or `sudo systemctl stop ModemManager`"
)


@dataclass(frozen=True)
class PortEntry:
    """A serial port and what it is."""

    device: str
    description: str = ""
    vid: int | None = None
    pid: int | None = None
    serial_number: str | None = None
    location: str | None = None

    @property
    def stlink(self) -> str | None:
        """The ST-LINK model when this is an ST-LINK's virtual COM port."""
        if self.vid == ST_VID and self.pid in STLINK_PIDS:
            return STLINK_PIDS[self.pid]
        return None

    @property
    def usb_id(self) -> str:
        return f"{self.vid:04x}:{self.pid:04x}" if self.vid is not None else ""

    @classmethod
    def from_pyserial(cls, info: ListPortInfo) -> PortEntry:
        return cls(
            device=info.device,
            description=info.description if info.description != "n/a" else "",
            vid=info.vid,
            pid=info.pid,
            serial_number=info.serial_number,
            location=info.location,
        )


@dataclass(frozen=True)
class BoardRef:
    """A board: its serial port and its probe's id (the same USB serial number)."""

    port: str
    probe_id: str | None
    model: str | None = None

    def __str__(self) -> str:
        probe = f", probe {self.probe_id}" if self.probe_id else ""
        return f"{self.port}{probe}"


Lister = Callable[[], Sequence[ListPortInfo]]


def list_ports(lister: Lister = serial.tools.list_ports.comports) -> list[PortEntry]:
    """Every serial port pyserial sees, ST-LINKs first."""
    entries = [PortEntry.from_pyserial(p) for p in lister()]
    return sorted(entries, key=lambda e: (e.stlink is None, e.device))


def stlink_boards(ports: Sequence[PortEntry]) -> list[BoardRef]:
    return [BoardRef(p.device, p.serial_number, p.stlink) for p in ports if p.stlink]


def _names(ports: Sequence[PortEntry]) -> str:
    return ", ".join(p.device for p in ports) or "none"


def _board_list(boards: Sequence[BoardRef]) -> str:
    return "; ".join(f"{b.probe_id or '?'} ({b.port})" for b in boards)


def is_port_spec(spec: str) -> bool:
    """Whether ``--board`` names a port (path or pyserial URL) rather than a probe serial."""
    return spec.startswith(("/", ".", "COM", "com")) or "://" in spec


def resolve_board(
    spec: str, probe: str | None = None, lister: Lister = serial.tools.list_ports.comports
) -> BoardRef:
    """The board ``--board spec`` (a port, a probe serial or ``auto``) and ``--probe`` name."""
    spec = spec.strip()
    if "://" in spec:  # a URL (socket://, rfc2217://): no USB identity to look up
        return BoardRef(spec, probe)
    ports = list_ports(lister)
    boards = stlink_boards(ports)
    if spec == "auto":
        if probe:
            return _by_probe(probe, ports, boards)
        if not boards:
            raise LinkError(
                "--board auto: no board attached (no ST-LINK virtual COM port, USB "
                f"0483:3754; serial ports present: {_names(ports)})",
                "plug the board's ST-LINK USB connector in, or name the port: --board /dev/ttyACM0",
            )
        if len(boards) > 1:
            raise LinkError(
                f"--board auto: {len(boards)} boards attached: {_board_list(boards)}",
                "choose one by its probe serial: --board SERIAL (stable across replugs)",
            )
        return boards[0]
    if is_port_spec(spec):
        real = os.path.realpath(spec)
        entry = next((p for p in ports if os.path.realpath(p.device) == real), None)
        if entry is None and not os.path.exists(spec):
            raise LinkError(
                f"serial port {spec} does not exist (ports present: {_names(ports)})",
                "plug the board in, or pick one of those (`hilbench ports` says which is an "
                "ST-LINK)",
            )
        found = entry.serial_number if entry is not None and entry.stlink else None
        if probe and found and probe.lower() != found.lower():
            raise LinkError(
                f"--probe {probe} and --board {spec} are two different boards ({spec} belongs "
                f"to probe {found})",
                "give one of them: the other is found",
            )
        return BoardRef(spec, probe or found, entry.stlink if entry else None)
    return _by_probe(spec, ports, boards)


def _by_probe(probe: str, ports: Sequence[PortEntry], boards: Sequence[BoardRef]) -> BoardRef:
    matches = [b for b in boards if (b.probe_id or "").lower() == probe.lower()]
    if not matches:
        matches = [b for b in boards if probe.lower() in (b.probe_id or "").lower()]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise LinkError(
            f"probe id {probe!r} matches {len(matches)} boards: {_board_list(matches)}",
            "give the whole serial number",
        )
    attached = _board_list(boards) or "none"
    raise LinkError(
        f"no board with probe id {probe!r} (ST-LINKs attached: {attached}; serial ports: "
        f"{_names(ports)})",
        "check the id with `hilbench ports` / `hilbench probe list`, or plug the board in",
    )


# --------------------------------------------------------------------------- opening a port


def holders(device: str) -> list[tuple[int, str]]:
    """Other processes that have ``device`` open (pid, name), from /proc (Linux)."""
    try:
        target = os.stat(device)
    except OSError:
        return []
    found = []
    me = os.getpid()
    for pid_dir in Path("/proc").glob("[0-9]*"):
        pid = int(pid_dir.name)
        if pid == me:
            continue
        try:
            fds = list((pid_dir / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                st = os.stat(fd)
            except OSError:
                continue
            if st.st_rdev == target.st_rdev and st.st_ino == target.st_ino:
                try:
                    name = (pid_dir / "comm").read_text().strip()
                except OSError:
                    name = "?"
                found.append((pid, name))
                break
    return found


def check_port(device: str) -> None:
    """Raise one line if ``device`` (a local tty) is missing, not ours to open, or held."""
    if "://" in device:
        return
    if not os.path.exists(device):
        ports = list_ports()
        raise LinkError(
            f"serial port {device} does not exist (ports present: {_names(ports)})",
            "plug the board in, or pick one of those",
        )
    if not os.access(device, os.R_OK | os.W_OK):
        raise LinkError(f"no permission to open {device}", DIALOUT_FIX)
    held = holders(device)
    if any(name == "ModemManager" for _, name in held):
        raise LinkError(f"ModemManager has {device} open", MODEMMANAGER_FIX)
    if held:
        who = ", ".join(f"{name} (pid {pid})" for pid, name in held)
        raise LinkError(
            f"serial port {device} is busy: {who} has it open",
            "close that program (a terminal, another hilbench) and retry",
        )


def open_board_port(device: str, baud: int, timeout: float = 0.05) -> serial.SerialBase:
    """The board's port, checked and opened exclusively (one hilbench per board)."""
    from hilbench.link.serial_port import open_port

    check_port(device)
    if "://" in device:
        return open_port(device, baudrate=baud, timeout=timeout)
    try:
        return serial.Serial(
            device, baudrate=baud, timeout=timeout, write_timeout=5.0, exclusive=True
        )
    except (serial.SerialException, OSError) as exc:
        text = str(exc)
        if "lock" in text.lower():
            raise LinkError(
                f"serial port {device} is busy: another program holds its lock",
                "close that program (a terminal, another hilbench) and retry",
            ) from None
        if "Permission denied" in text or "Errno 13" in text:
            raise LinkError(f"no permission to open {device}", DIALOUT_FIX) from None
        raise LinkError(f"cannot open serial port {device}: {text.splitlines()[0]}") from None
