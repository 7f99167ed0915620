"""Board farms: labgrid places (``--board labgrid:...``) and local board maps (``--board map:...``).

An optional extra (``pip install 'hilbench[farm]'`` brings labgrid). The backends of farm
boards are ``hilbench.backend.labgrid`` and ``hilbench.backend.map``; this package holds what
they use (the coordinator's client, the release guard, the loaders, the board map's locks).
The labgrid modules (client, labgrid_parts) are imported only when a labgrid board is opened,
so the rest of hilbench, and board maps, work without labgrid. docs/farm.md.
"""

from __future__ import annotations

import os

from hilbench.farm.spec import is_farm_board, parse_board

# grpcio's fork support (on unless this says otherwise, read when grpc is first imported) runs
# gRPC's own handlers around every fork(); a fork whose child runs Python before exec (a
# subprocess preexec_fn) while the labgrid client's threads are inside gRPC then aborts that
# child ("epoll_wait error: Bad file descriptor", SIGABRT). No hilbench process uses gRPC in
# a forked child before it execs, so the support is off (every labgrid import goes through
# this package first).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

__all__ = ["is_farm_board", "labgrid_available", "parse_board"]


def labgrid_available() -> bool:
    try:
        import labgrid  # noqa: F401 - only whether the optional extra is installed
    except ImportError:
        return False
    return True
