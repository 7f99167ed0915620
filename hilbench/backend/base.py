"""What every backend is: a way to reach a device, opened into a :class:`Connection`.

The base class sits below the backends and the registry above them (the model is Zephyr's
pytest-twister-harness device adapters): a backend module imports this one, never the
registry. ``open()`` returns a ``Connection`` whose client has already answered HELLO; use the
backend as a context manager to get the client itself.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import serial

from hilbench.client.device_client import DeviceClient
from hilbench.client.events import BackendEvents
from hilbench.link.faults import FaultSpec, FaultyPort
from hilbench.link.serial_port import open_port

if TYPE_CHECKING:
    from hilbench.board.lifecycle import Lifecycle

HELLO_TIMEOUT_S = 2.0  # per try; a live device answers in milliseconds
HELLO_RETRIES = 2  # first contact: give up after 3 tries, not a minute


@dataclass
class Connection:
    """An opened backend: the client that said HELLO, where it answers and how it got there.

    ``location``: where the device is (a farm board's place, exporter host, probe id, firmware
    hash, serial URL; a board's probe id), written into the trace's run attributes; empty for
    a device of this host. ``lifecycle``: a board's stages (absent -> ... -> training), which a
    run moves on and a failing test's report shows; None for the other backends. ``loaded``:
    whether firmware was written on the way (None: nothing to load with).
    """

    client: DeviceClient
    location: dict[str, str] = field(default_factory=dict)
    lifecycle: Lifecycle | None = None
    loaded: bool | None = None


class Backend(ABC):
    """A way to reach a device; use as a context manager (it gives the client)."""

    kind: str = ""  # its name in hilbench.config.BACKENDS
    #: a board's stages when the backend has them (the board backend), else None
    lifecycle: Lifecycle | None = None

    def __init__(self, faults: FaultSpec | None = None) -> None:
        self.connection: Connection | None = None
        self.faults = faults if faults is not None and faults.any() else None
        #: what ``open()`` goes through: timed steps, firmware load progress (backends that
        #: load nothing announce none)
        self.events = BackendEvents()

    @property
    def client(self) -> DeviceClient | None:
        """The connected client, None before ``open()`` and after ``close()``."""
        return self.connection.client if self.connection is not None else None

    @property
    def target(self) -> DeviceClient | None:
        """The old name of :attr:`client` (deprecated)."""
        return self.client

    @abstractmethod
    def open(self) -> Connection: ...

    def close(self) -> None:
        if self.connection is not None:
            self.connection.client.close()
            self.connection = None

    def __enter__(self) -> DeviceClient:
        return self.open().client

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connect(self, url: str, name: str) -> Connection:
        return self._attach(open_port(url), name)

    def _attach(self, port: serial.SerialBase, name: str, **client_options: float) -> Connection:
        """A client on ``port`` (behind the fault injector if asked) that has said HELLO."""
        if self.faults is None:
            client = DeviceClient(port, name=name, **client_options)
        else:
            faulty = FaultyPort(port, self.faults)
            client = DeviceClient(faulty, name=f"{name} with injected faults", **client_options)
            faulty.on_fault = lambda kind, detail: client.event("injected", f"{kind}: {detail}")
            # a reset goes around the injector, numbered so the device does not drop it as stale
            faulty.reset_device = lambda: port.write(client.reset_frame())
        try:
            client.hello(timeout=HELLO_TIMEOUT_S, retries=HELLO_RETRIES)
        except BaseException:
            client.close()
            raise
        self.connection = Connection(client)
        return self.connection
