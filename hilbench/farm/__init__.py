"""Board farms: labgrid places (``--board labgrid:...``) and local board maps (``--board map:...``).

An optional extra (``pip install 'hilbench[farm]'`` brings labgrid). The backends of farm
boards are ``hilbench.backend.labgrid`` and ``hilbench.backend.map``; this package holds what
they use (the coordinator's client, the release guard, the loaders, the board map's locks).
The labgrid modules (client, labgrid_parts) are imported only when a labgrid board is opened,
so the rest of hilbench, and board maps, work without labgrid. docs/farm.md.
"""

from __future__ import annotations

from hilbench.farm.spec import is_farm_board, parse_board

__all__ = ["is_farm_board", "labgrid_available", "parse_board"]


def labgrid_available() -> bool:
    try:
        import labgrid  # noqa: F401 - only whether the optional extra is installed
    except ImportError:
        return False
    return True
