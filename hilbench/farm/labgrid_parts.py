"""hilbench's parts for labgrid: a resource, a loader driver and a strategy.

- ``HilbenchDevice`` (resource): how a place's firmware is loaded -- ``kind`` (a loader of
  hilbench.farm.loaders), ``probe`` (the debug probe's id, e.g. the ST-LINK serial number),
  ``host`` (where the probe is), and the loader's settings (``image``, ``load``, ``unload``,
  ``device_id``, ``options``; ``gdb``, ``pyocd_server``, ``machine`` for kind ``pyocd``). An
  exporter publishes it next to the place's ``NetworkSerialPort``; labgrid's exporter passes
  resource classes it does not know through unchanged, so exporters need nothing of hilbench.
- ``HilbenchLoaderDriver`` (driver): ``load(image)`` calls the loader function of the
  device's kind (the same function a local board map uses), ``unload()`` stops it.
- ``HilbenchStrategy`` (strategy): states ``off`` and ``loaded``; ``transition("loaded")``
  loads ``image`` (labgrid's convention for bringing a target into a state).

hilbench's ``--board labgrid:...`` builds a labgrid ``Target`` from the acquired place with
these parts; a labgrid environment file can use them as well (docs/farm.md), after
``imports: [hilbench.farm.labgrid_parts]``.
"""

from __future__ import annotations

import enum
from typing import Any, ClassVar

import attr
from labgrid.binding import BindingState
from labgrid.driver.common import Driver
from labgrid.factory import target_factory
from labgrid.resource.common import Resource
from labgrid.strategy.common import Strategy, StrategyError

from hilbench.farm import loaders

_str = attr.validators.instance_of(str)


@target_factory.reg_resource
@attr.s(eq=False)
class HilbenchDevice(Resource):
    """How a place's firmware is loaded (see the module doc)."""

    kind = attr.ib(default="none", validator=_str)
    probe = attr.ib(default="", converter=str)
    host = attr.ib(default="", validator=_str)
    image = attr.ib(default="", validator=_str)
    load = attr.ib(default="", validator=_str)
    unload = attr.ib(default="", validator=_str)
    device_id = attr.ib(default="", validator=_str)
    options = attr.ib(default="", validator=_str)
    firmware_hash = attr.ib(default="", validator=_str)
    gdb = attr.ib(default="", converter=str)  # pyocd kind: a GDB stub, HOST:PORT
    pyocd_server = attr.ib(default="", converter=str)  # pyocd kind: `pyocd server` HOST:PORT
    machine = attr.ib(default="", validator=_str)  # pyocd kind: stm32n6 (default) or an547
    extra = attr.ib(default=attr.Factory(dict))  # the exporter's proxy information

    def settings(self) -> dict[str, Any]:
        names = ("image", "load", "unload", "device_id", "options", "firmware_hash", "gdb",
                 "pyocd_server", "machine")  # fmt: skip
        return {name: getattr(self, name) for name in names if getattr(self, name)}


@target_factory.reg_driver
@attr.s(eq=False)
class HilbenchLoaderDriver(Driver):
    """Loads firmware onto the target's board through hilbench's loader of its kind."""

    bindings: ClassVar[dict] = {"device": "HilbenchDevice", "port": {"NetworkSerialPort", None}}
    exporter = attr.ib(default="", validator=_str)
    loaded = attr.ib(default=None, init=False)

    def context(self, image: str = "") -> loaders.LoadContext:
        port = self.port
        return loaders.LoadContext(
            place=self.target.name,
            exporter=self.exporter,
            host=self.device.host or (port.host if port is not None else ""),
            probe=self.device.probe,
            serial_host=port.host if port is not None else "",
            serial_port=int(port.port) if port is not None else 0,
            image=image,
            params=self.device.settings(),
            serial_url=_url(port) if port is not None else "",
            baud=int(port.speed or 0) if port is not None else 0,
        )

    @Driver.check_active
    def load(self, image: str = "") -> loaders.Loaded:
        """Load ``image`` (the kind's default if empty); return what was loaded."""
        self.unload()
        self.loaded = loaders.load(self.device.kind, self.context(image))
        return self.loaded

    @Driver.check_active
    def unload(self) -> None:
        if self.loaded is not None:
            loaded, self.loaded = self.loaded, None
            loaded.stop()

    def on_deactivate(self) -> None:
        if self.loaded is not None:
            loaded, self.loaded = self.loaded, None
            loaded.stop()


def _url(port: Any) -> str:
    """A NetworkSerialPort as pyserial opens it (raw TCP, or RFC 2217 through ser2net)."""
    scheme = "rfc2217" if port.protocol == "rfc2217" else "socket"
    return f"{scheme}://{port.host}:{int(port.port)}"


class Status(enum.Enum):
    unknown = 0
    off = 1
    loaded = 2


@target_factory.reg_driver
@attr.s(eq=False)
class HilbenchStrategy(Strategy):
    """``off`` -> ``loaded`` (the firmware runs and its serial port answers) and back."""

    bindings: ClassVar[dict] = {"loader": "HilbenchLoaderDriver"}
    image = attr.ib(default="", validator=_str)
    status = attr.ib(default=Status.unknown)

    def transition(self, status: str | Status) -> None:
        if not isinstance(status, Status):
            try:
                status = Status[status]
            except KeyError:
                raise StrategyError(f"no state {status!r}: use off or loaded") from None
        if status == self.status:
            return
        if status == Status.loaded:
            self.target.activate(self.loader)
            self.loader.load(self.image)
        elif status == Status.off:
            if self.loader in self.target.drivers and self.loader.state is BindingState.active:
                self.loader.unload()
                self.target.deactivate(self.loader)
        else:
            raise StrategyError(f"no transition from {self.status.name} to {status.name}")
        self.status = status
