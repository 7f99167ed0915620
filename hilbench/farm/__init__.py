"""Board farms: labgrid places (``--board labgrid:...``) and local board maps (``--board map:...``).

An optional extra (``pip install 'hilbench[farm]'`` brings labgrid). Nothing outside this
package imports it except ``hilbench.backends.make_backend`` when a --board value starts with
``labgrid:`` or ``map:``; the labgrid modules (client, backend, labgrid_parts) are imported
only then, so the rest of hilbench, and board maps, work without labgrid. docs/farm.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hilbench.errors import HilbenchError
from hilbench.farm.spec import is_farm_board, parse_board

if TYPE_CHECKING:
    from hilbench.backends import Backend
    from hilbench.link.faults import FaultSpec

__all__ = ["backend_for", "is_farm_board", "labgrid_available", "parse_board"]


def labgrid_available() -> bool:
    try:
        import labgrid  # noqa: F401
    except ImportError:
        return False
    return True


def backend_for(
    board: str, faults: FaultSpec | None = None, *, firmware: str | None = None
) -> Backend:
    """The backend of a farm --board value (labgrid:... or map:...)."""
    spec = parse_board(board)
    if spec.kind == "map":
        from hilbench.farm.local import MapBackend

        return MapBackend(spec, faults, firmware=firmware)
    if not labgrid_available():
        raise HilbenchError(
            f"--board {spec.text} needs labgrid, which is not installed",
            "pip install 'hilbench[farm]'",
        )
    from hilbench.farm.backend import LabgridBackend

    return LabgridBackend(spec, faults, firmware=firmware)
