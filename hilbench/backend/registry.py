"""Which backend a run's configuration names: the factory above the backends.

The names are ``hilbench.config.BACKEND_NAMES`` (the one table the CLI's device options, the pytest
plugin's options and the configuration's check all read); this module maps each to its
backend class. A ``--board`` value picks among four: a farm's board (``labgrid:``, ``map:``),
a physical board to load (auto, a probe serial, an ST-LINK's port, any port with ``--fw``), or
a plain serial link (a pty, ``socket://``). Nothing below imports this module.
"""

from __future__ import annotations

from collections.abc import Callable

from hilbench.backend.base import Backend
from hilbench.backend.board import BoardBackend, wants_board_backend
from hilbench.backend.emulate import EmulatorBackend
from hilbench.backend.map import MapBackend
from hilbench.backend.qemu import QemuBackend
from hilbench.backend.serial import SerialBackend
from hilbench.backend.sil import SilBackend
from hilbench.config import BACKENDS, RunConfig
from hilbench.device import BANNER_REASONS, DeviceTwin
from hilbench.errors import HilbenchError
from hilbench.farm import labgrid_available
from hilbench.farm.spec import is_farm_board, parse_board
from hilbench.link.faults import FaultSpec


def farm_backend(
    board: str, faults: FaultSpec | None = None, *, firmware: str | None = None
) -> Backend:
    """The backend of a farm --board value (labgrid:... or map:...)."""
    spec = parse_board(board)
    if spec.kind == "map":
        return MapBackend(spec, faults, firmware=firmware)
    if not labgrid_available():
        raise HilbenchError(
            f"--board {spec.text} needs labgrid, which is not installed",
            "pip install 'hilbench[farm]'",
        )
    # imported here: it imports labgrid (an optional extra, and slow to import)
    from hilbench.backend.labgrid import LabgridBackend

    return LabgridBackend(spec, faults, firmware=firmware)


def _board(config: RunConfig, faults: FaultSpec | None) -> Backend:
    port = config.port or ""
    if is_farm_board(port):
        return farm_backend(port, faults, firmware=config.firmware)
    if wants_board_backend(port, config.firmware):  # auto, a probe, an ST-LINK
        return BoardBackend(
            port, faults, baud=config.baud, firmware=config.firmware, upload=config.upload
        )
    return SerialBackend(port, faults=faults, baud=config.baud)


#: One factory per name of hilbench.config.BACKENDS.
FACTORIES: dict[str, Callable[[RunConfig, FaultSpec | None], Backend]] = {
    "emulate": lambda config, faults: EmulatorBackend(
        DeviceTwin(timing_model=config.timing_model, **BANNER_REASONS), faults=faults
    ),
    "sil": lambda config, faults: SilBackend(config.firmware, faults),
    "qemu": lambda config, faults: QemuBackend(config.firmware, faults, upload=config.upload),
    "board": _board,
}
assert tuple(FACTORIES) == BACKENDS, "a backend name without a factory, or the other way"


def make_backend(config: RunConfig) -> Backend:
    """The backend ``config`` names, with the link faults it asks for."""
    faults = FaultSpec.parse(config.link_faults) if config.link_faults else None
    return FACTORIES.get(config.backend, FACTORIES["emulate"])(config, faults)
