"""``--board map:FILE[:NAME | :tag=VALUE]``: several boards on one host, no coordinator.

A board map (TOML) names each board of the host once::

    [boards.n6-a]
    port = "/dev/serial/by-id/usb-STMicroelectronics_STLINK-V3_003A00283132510D33353533-if02"
    probe = "003A00283132510D33353533"   # the ST-LINK serial number
    tags = { board = "stm32n6570_dk" }
    kind = "none"                         # its loader (hilbench.farm.loaders), default none

A process takes a board by locking its probe id (``flock`` on a file in ``lock_dir()``,
``$HILBENCH_LOCK_DIR`` or the temporary directory's ``hilbench-boards``), so pytest-xdist
workers, a second terminal and a sweep each get a different board; the kernel drops the lock
when the process ends, however it ends. A board held by another process is waited for with
the same countdown as a labgrid place, then one line names the holder (pid, command, since).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import socket
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hilbench.errors import ConfigError, LinkError
from hilbench.farm import loaders
from hilbench.farm.spec import Selector
from hilbench.farm.waiting import Countdown, Status, since
from hilbench.link.serial_port import DEFAULT_BAUD

ENV_LOCK_DIR = "HILBENCH_LOCK_DIR"
BOARD_KEYS = {
    "port": "the board's serial port or pyserial URL (required)",
    "probe": "the debug probe's id, e.g. the ST-LINK serial number (the lock is named by it)",
    "tags": "a table of tags to select it by (--board map:FILE:tag=VALUE)",
    "kind": "its loader: none (default), sil, emulate, command or pyocd",
    "baud": "the serial speed (default 921600)",
    "image": "the firmware file its loader loads",
    "load": "the command of a 'command' loader",
    "unload": "the command a 'command' loader runs when the board is released",
    "device_id": "the SIL program's device id",
    "options": "extra options of the SIL program",
    "firmware_hash": "the hash of the firmware a 'none' board runs, if known",
    "gdb": "a 'pyocd' board's GDB stub, HOST:PORT (pyocd gdbserver, OpenOCD, QEMU -gdb)",
    "pyocd_server": "a 'pyocd' board's `pyocd server`, HOST:PORT",
    "machine": "a 'pyocd' board's machine: stm32n6 (default) or an547",
}
POLL_S = 0.2


@dataclass(frozen=True)
class MapBoard:
    name: str
    port: str
    probe: str = ""
    tags: dict[str, str] = field(default_factory=dict)
    kind: str = "none"
    baud: int = DEFAULT_BAUD
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def lock_name(self) -> str:
        key = self.probe or f"port-{self.port}"
        return "probe-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", key) + ".lock"


def read_map(path: str | Path) -> list[MapBoard]:
    """The boards of a board map file; a ConfigError names what is wrong and where."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(
            f"board map {path} does not exist", "give the path of a board map (docs/farm.md)"
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"cannot read board map {path}: {exc.strerror or exc}", "fix it"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"board map {path} is not valid TOML ({exc})", "fix the file") from None
    boards = data.get("boards")
    if not isinstance(boards, dict) or not boards:
        raise ConfigError(
            f"board map {path} has no [boards.NAME] tables",
            'write one per board: [boards.n6-a] port = "/dev/ttyACM0" probe = "..."',
        )
    out, probes = [], {}
    for name, entry in boards.items():
        where = f"board map {path} [boards.{name}]"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where} is not a table", f"write [boards.{name}] with its keys")
        unknown = sorted(set(entry) - set(BOARD_KEYS))
        if unknown:
            raise ConfigError(
                f"{where} has no setting {', '.join(map(repr, unknown))}",
                "use " + "; ".join(f"{k}: {v}" for k, v in BOARD_KEYS.items()),
            )
        port = entry.get("port")
        if not isinstance(port, str) or not port.strip():
            raise ConfigError(f"{where} names no port", 'add port = "/dev/ttyACM0" (or a URL)')
        tags = entry.get("tags", {})
        if not isinstance(tags, dict) or not all(isinstance(v, str) for v in tags.values()):
            raise ConfigError(
                f"{where}: tags is not a table of strings", 'write tags = { board = "n6" }'
            )
        kind = str(entry.get("kind", "none"))
        if kind not in loaders.kinds():
            raise ConfigError(
                f"{where}: kind {kind!r} is not a loader",
                f"use one of {', '.join(loaders.kinds())}",
            )
        baud = entry.get("baud", DEFAULT_BAUD)
        if not isinstance(baud, int) or isinstance(baud, bool) or baud <= 0:
            raise ConfigError(
                f"{where}: baud {baud!r} is not a baud rate", "write e.g. baud = 921600"
            )
        probe = str(entry.get("probe", ""))
        if probe and probe in probes:
            raise ConfigError(
                f"{where} has probe {probe}, as [boards.{probes[probe]}] has",
                "each board has its own probe: fix the serial number",
            )
        probes[probe] = name
        params = {
            k: v for k, v in entry.items() if k not in ("port", "probe", "tags", "kind", "baud")
        }
        out.append(MapBoard(name, port.strip(), probe, dict(tags), kind, baud, params))
    return out


def lock_dir() -> Path:
    path = Path(os.environ.get(ENV_LOCK_DIR) or Path(tempfile.gettempdir()) / "hilbench-boards")
    path.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        path.chmod(0o1777)  # every user of the host locks boards here
    return path


class BoardLock:
    """An exclusive lock on one board (by its probe id), held until ``release()`` or exit."""

    def __init__(self, board: MapBoard) -> None:
        self.board = board
        self.path = lock_dir() / board.lock_name
        self.fd: int | None = None

    def try_acquire(self) -> bool:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        holder = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "command": " ".join(sys.argv)[:200],
            "since": time.time(),
            "board": self.board.name,
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder).encode(), 0)
        self.fd = fd
        return True

    def holder(self) -> str:
        try:
            info = json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            info = {}
        if not info:
            return f"{self.board.name} held by another process"
        return (
            f"{self.board.name} held by pid {info.get('pid')} ({info.get('command', '?')}, "
            f"{since(float(info.get('since', time.time())))})"
        )

    def release(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)  # closing the descriptor drops the flock


def take_board(
    boards: list[MapBoard],
    selector: Selector,
    timeout: float,
    status: Status | None = None,
    *,
    where: str = "the board map",
) -> tuple[MapBoard, BoardLock]:
    """Lock a free board ``selector`` names, waiting up to ``timeout`` s with a countdown."""
    candidates = [b for b in boards if selector.matches(b.name, b.tags)]
    if not candidates:
        listed = "; ".join(
            f"{b.name}: " + (",".join(f"{k}={v}" for k, v in b.tags.items()) or "no tags")
            for b in boards
        )
        raise ConfigError(
            f"no board of {where} is {selector.describe()} (boards: {listed})",
            "pick a board name or tags the map has",
        )
    show = status or Countdown()
    deadline = time.monotonic() + timeout
    try:
        while True:
            for board in candidates:
                lock = BoardLock(board)
                if lock.try_acquire():
                    return board, lock
            held = "; ".join(BoardLock(b).holder() for b in candidates)
            left = deadline - time.monotonic()
            if left <= 0:
                raise LinkError(
                    f"waited {timeout:.0f} s for {selector.describe()} of {where}: {held}",
                    "wait for it to finish, stop that process, wait longer "
                    "(HILBENCH_FARM_WAIT=SECONDS) or pick another board",
                )
            show(f"waiting for {selector.describe()} of {where}: {held}; {left:.0f} s left")
            time.sleep(min(POLL_S, max(left, 0.01)))
    finally:
        if isinstance(show, Countdown):
            show.clear()


def socket_address(port: str) -> tuple[str, int]:
    """(host, port) of a socket:// or rfc2217:// URL; ("", 0) for a device path."""
    match = re.fullmatch(r"(?:socket|rfc2217)://\[?([^\]/]*?)\]?:(\d+)(?:[/?].*)?", port)
    return (match.group(1), int(match.group(2))) if match else ("", 0)
