"""``--board map:FILE[:NAME | :tag=VALUE]``: a board of a board map (hilbench.farm.local), locked
by its probe id for as long as it is open, loaded by its loader, reached on its port."""

from __future__ import annotations

import socket
import time

from hilbench.backend.base import Backend, Connection
from hilbench.errors import HilbenchError
from hilbench.farm import loaders
from hilbench.farm.local import BoardLock, read_map, socket_address, take_board
from hilbench.farm.spec import BoardSpec, parse_board, wait_seconds
from hilbench.farm.waiting import Status
from hilbench.link.faults import FaultSpec
from hilbench.link.serial_port import close_socket_now, open_port


class MapBackend(Backend):
    """A board of a board map (see the module doc), locked for as long as it is open."""

    kind = "board"

    def __init__(
        self,
        board: str | BoardSpec,
        faults: FaultSpec | None = None,
        *,
        firmware: str | None = None,
        wait: float | None = None,
        status: Status | None = None,
    ) -> None:
        super().__init__(faults)
        self.spec = parse_board(board) if isinstance(board, str) else board
        if self.spec.kind != "map":
            raise HilbenchError(f"{self.spec.text} is not a board map board", "use map:FILE")
        self.firmware = firmware or ""
        self.wait = wait_seconds() if wait is None else wait
        self.status = status
        self.lock: BoardLock | None = None
        self.loaded: loaders.Loaded | None = None
        self.location: dict[str, str] = {}
        self.timings: dict[str, float] = {}

    def open(self) -> Connection:
        started = time.perf_counter()
        boards = read_map(self.spec.map_file)
        try:
            board, self.lock = take_board(
                boards, self.spec.selector, self.wait, self.status, where=self.spec.map_file
            )
            locked = time.perf_counter()
            self.timings["acquire"] = locked - started
            host, port = socket_address(board.port)
            ctx = loaders.LoadContext(
                place=board.name,
                exporter=socket.gethostname(),
                host=socket.gethostname(),
                probe=board.probe,
                serial_host=host,
                serial_port=port,
                image=self.firmware,
                params=board.params,
                serial_url=board.port,
                baud=board.baud,
            )
            self.loaded = loaders.load(board.kind, ctx)
            loaded = time.perf_counter()
            self.timings["load"] = loaded - locked
            connection = self._attach(
                open_port(board.port, baudrate=board.baud), name=f"{board.name} ({board.port})"
            )
            self.timings["connect"] = time.perf_counter() - loaded
        except BaseException:
            self.close()
            raise
        self.location = {
            "place": board.name,
            "exporter_host": socket.gethostname(),
            "probe_host": socket.gethostname(),
            "probe_id": board.probe,
            "firmware_hash": self.loaded.firmware_hash,
            "serial_url": board.port,
        }
        connection.location = dict(self.location)  # session.run writes it into the trace
        return connection

    def close(self) -> None:
        begun = time.perf_counter()
        held = self.lock is not None
        try:
            if self.connection is not None:
                close_socket_now(self.connection.client.port)
            super().close()
        finally:
            closed = time.perf_counter()
            loaded, self.loaded = self.loaded, None
            try:
                if loaded is not None:
                    loaded.stop()
            finally:
                if self.lock is not None:
                    self.lock.release()
                    self.lock = None
        if held:
            self.timings["disconnect"] = closed - begun
            self.timings["release"] = time.perf_counter() - closed
