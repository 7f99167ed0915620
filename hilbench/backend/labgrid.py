"""``--board labgrid:PLACE`` / ``--board labgrid:tag=VALUE``: a board of a labgrid farm.

``open()``: connect to the coordinator, start the release guard, reserve (wait, with a
countdown, while the boards are held), acquire, build a labgrid ``Target`` of the place's
resources (``NetworkSerialPort`` + ``HilbenchDevice``) with hilbench's loader driver and
strategy, load the firmware (``strategy.transition("loaded")``), connect through the place's
serial port (raw TCP, or RFC 2217 through ser2net) and say HELLO. ``close()`` undoes all of it
in reverse; Ctrl-C, a failed test and an exception take the same path, a killed process is
handled by the guard. The connection carries ``location`` (place, exporter host, probe id,
firmware hash), which the trace records.
"""

from __future__ import annotations

import contextlib
import time

from labgrid import Target as LabgridTarget
from labgrid.factory import target_factory

from hilbench.backend.base import Backend, Connection
from hilbench.errors import HilbenchError, LinkError
from hilbench.farm import (
    labgrid_parts,  # noqa: F401 - registers the classes
    loaders,
)
from hilbench.farm.client import FarmClient, PlaceResource
from hilbench.farm.guard import Guard
from hilbench.farm.spec import BoardSpec, coordinator_address, parse_board, wait_seconds
from hilbench.farm.waiting import Status
from hilbench.link.faults import FaultSpec
from hilbench.link.serial_port import DEFAULT_BAUD, close_socket_now, open_port

SERIAL_PROTOCOLS = {"raw": "socket", "rfc2217": "rfc2217"}


def serial_url(resource: PlaceResource) -> str:
    """The pyserial URL of a NetworkSerialPort (raw TCP or RFC 2217)."""
    protocol = str(resource.params.get("protocol", "rfc2217"))
    scheme = SERIAL_PROTOCOLS.get(protocol)
    if scheme is None:
        raise LinkError(
            f"NetworkSerialPort {resource.exporter}/{resource.group}/{resource.name} speaks "
            f"{protocol!r}",
            "export it as raw or rfc2217 (labgrid-exporter's ser2net does rfc2217)",
        )
    host = resource.params.get("host") or resource.extra.get("proxy") or resource.exporter
    return f"{scheme}://{host}:{int(resource.params['port'])}"


class LabgridBackend(Backend):
    """A board (or SIL program, or twin) of a labgrid place; see the module doc."""

    kind = "board"

    def __init__(
        self,
        board: str | BoardSpec,
        faults: FaultSpec | None = None,
        *,
        firmware: str | None = None,
        address: str | None = None,
        wait: float | None = None,
        status: Status | None = None,
        baud: int | None = None,
    ) -> None:
        super().__init__(faults)
        self.spec = parse_board(board) if isinstance(board, str) else board
        if self.spec.kind != "labgrid":
            raise HilbenchError(f"{self.spec.text} is not a labgrid board", "use labgrid:...")
        self.address = address or coordinator_address()
        self.firmware = firmware or ""
        self.wait = wait_seconds() if wait is None else wait
        self.status = status
        self.baud = baud
        self.farm: FarmClient | None = None
        self.guard: Guard | None = None
        self.place = ""
        self.token = ""
        self.lg_target = None
        self.strategy = None
        self.location: dict[str, str] = {}
        self.timings: dict[str, float] = {}  # seconds: acquire, load, connect, release

    def open(self) -> Connection:
        started = time.perf_counter()
        try:
            self.farm = FarmClient(self.address)
            self.guard = Guard(self.farm.address, self.farm.name)
            place, self.token = self.farm.wait_and_acquire(
                self.spec.selector, self.wait, self.status
            )
            self.place = place.name
            acquired = time.perf_counter()
            self.timings["acquire"] = acquired - started
            resources = self.farm.resources(place)
            port, device = _pick(resources, place.name)
            self._build_target(port, device)
            assert self.strategy is not None
            self.strategy.transition("loaded")
            loaded = self.strategy.loader.loaded
            loaded_at = time.perf_counter()
            self.timings["load"] = loaded_at - acquired
            url = serial_url(port)
            baud = self.baud or int(port.params.get("speed") or DEFAULT_BAUD)
            connection = self._attach(open_port(url, baudrate=baud), name=f"{self.place} ({url})")
            self.timings["connect"] = time.perf_counter() - loaded_at
        except BaseException:
            self.close()
            raise
        probe_host = (device.params.get("host") if device else "") or port.extra.get("proxy", "")
        self.location = {
            "place": self.place,
            "exporter_host": port.exporter,
            "probe_host": str(probe_host or port.params.get("host", "")),
            "probe_id": str(device.params.get("probe", "")) if device else "",
            "firmware_hash": loaded.firmware_hash if loaded else "",
            "serial_url": url,
        }
        connection.location = dict(self.location)  # session.run writes it into the trace
        return connection

    def _build_target(self, port: PlaceResource, device: PlaceResource | None) -> None:
        target = LabgridTarget(self.place)
        self.lg_target = target
        target_factory.make_resource(target, "NetworkSerialPort", "NetworkSerialPort", port.params)
        params = dict(device.params) if device else {}
        target_factory.make_resource(target, "HilbenchDevice", "HilbenchDevice", params)
        target_factory.make_driver(
            target, "HilbenchLoaderDriver", "HilbenchLoaderDriver", {"exporter": port.exporter}
        )
        self.strategy = target_factory.make_driver(
            target, "HilbenchStrategy", "HilbenchStrategy", {"image": self.firmware}
        )

    def close(self) -> None:
        begun = time.perf_counter()
        held = bool(self.place)
        try:
            if self.connection is not None:
                close_socket_now(self.connection.client.port)
            super().close()
        finally:
            closed = time.perf_counter()
            try:
                if self.strategy is not None:
                    with contextlib.suppress(Exception):
                        self.strategy.transition("off")
                if self.lg_target is not None:
                    with contextlib.suppress(Exception):
                        self.lg_target.cleanup()
            finally:
                self.strategy = self.lg_target = None
                self._release()
        if held:
            self.timings["disconnect"] = closed - begun
            self.timings["release"] = time.perf_counter() - closed

    def _release(self) -> None:
        client, self.farm = self.farm, None
        guard, self.guard = self.guard, None
        clean = False
        if client is not None:
            try:
                if self.place:
                    client.release(self.place)
                if self.token:
                    client.cancel(self.token)
                clean = True
            except Exception:
                clean = False
            finally:
                client.close()
        if guard is not None:
            if clean:
                guard.done()
            else:  # let the guard release what the name still holds
                guard.abandon()
        self.token = ""


def _pick(resources: list[PlaceResource], place: str) -> tuple[PlaceResource, PlaceResource | None]:
    ports = [r for r in resources if r.cls == "NetworkSerialPort"]
    devices = [r for r in resources if r.cls == "HilbenchDevice"]
    if len(ports) != 1:
        have = ", ".join(f"{r.cls} {r.exporter}/{r.group}/{r.name}" for r in resources) or "none"
        raise LinkError(
            f"place {place} has {len(ports)} NetworkSerialPort resources (it has: {have}); "
            "hilbench needs exactly one",
            "match one serial port to the place (labgrid-client -p PLACE add-match "
            "EXPORTER/GROUP/NetworkSerialPort; docs/farm.md)",
        )
    if len(devices) > 1:
        raise LinkError(
            f"place {place} has {len(devices)} HilbenchDevice resources",
            "match one HilbenchDevice to the place (docs/farm.md)",
        )
    if devices and devices[0].params.get("kind", "none") not in loaders.kinds():
        loaders.load(str(devices[0].params.get("kind")), _ctx_for_error(place))
    return ports[0], devices[0] if devices else None


def _ctx_for_error(place: str) -> loaders.LoadContext:
    return loaders.LoadContext(place, "", "", "", "", 0, "")
