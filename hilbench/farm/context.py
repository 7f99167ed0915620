"""What a farm loader is given and what it gives back: the board's :class:`LoadContext`, the
:class:`Loaded` result, and two helpers every loader uses (below the loaders and their
registry, hilbench.farm.loaders)."""

from __future__ import annotations

import hashlib
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "")


@dataclass(frozen=True)
class LoadContext:
    """What a loader knows about the board it loads."""

    place: str  # labgrid place or board map name
    exporter: str  # the labgrid exporter publishing it (the host name for a board map)
    host: str  # the host the probe hangs on (where a loader must run pyOCD)
    probe: str  # debug probe id (ST-LINK serial number), "" when none
    serial_host: str  # where the device's serial port answers
    serial_port: int
    image: str  # the firmware file to load, "" for the kind's default
    params: dict[str, Any] = field(default_factory=dict)  # the place's loader settings
    serial_url: str = ""  # the serial port as pyserial opens it ("": socket://HOST:PORT)
    baud: int = 0  # its speed (0: the firmware's default)

    @property
    def port_url(self) -> str:
        """The device's serial port: ``serial_url``, else raw TCP at serial_host:serial_port."""
        if self.serial_url:
            return self.serial_url
        host = self.serial_host or "127.0.0.1"
        return f"socket://{f'[{host}]' if ':' in host else host}:{self.serial_port}"


@dataclass
class Loaded:
    """A loaded board: the image's hash (``sha256:...``, "" if unknown) and a stop function."""

    firmware_hash: str = ""
    detail: str = ""
    stop: Callable[[], None] = lambda: None


def file_hash(path: str | Path) -> str:
    """``sha256:<hex>`` of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return f"sha256:{digest.hexdigest()}"


def is_local(host: str) -> bool:
    return host in LOCAL_HOSTS or host in (socket.gethostname(), socket.getfqdn())
