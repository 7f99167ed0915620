"""The liveness lock: a live writer holds a flock on its trace file.

Exclusive while it opens the file and sets up its run, shared while it appends (readers never
lock, HDF5's own lock is off for the writer) and until its gzip rewrite at close has replaced
the file. Another writer probes with an exclusive non-blocking flock: failing means "someone
is writing it". Where flock does not exist (Windows) there is no lock and no liveness.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from hilbench.errors import TraceError

try:
    import fcntl
except ImportError:  # Windows: no liveness lock, no automatic recovery
    fcntl = None  # type: ignore[assignment]

#: Whether this system has flock (and so liveness and orphan recovery).
HAVE_FLOCK = fcntl is not None


def lock_exclusive(path: Path) -> int | None:
    """An fd holding an exclusive flock on path, or a TraceError if a writer holds it."""
    if fcntl is None:
        return None
    fd = os.open(path, os.O_RDONLY)
    deadline = time.monotonic() + 0.5  # a watcher's probe holds it for microseconds
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError:
            if time.monotonic() >= deadline:
                os.close(fd)
                raise TraceError(
                    f"{path} is being written by another process",
                    "wait for that run to finish, or write to another file",
                ) from None
            time.sleep(0.01)


def share(fd: int | None) -> None:
    """Downgrade the writer's exclusive lock to shared (its run is set up)."""
    if fd is not None and fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_SH)


def release(fd: int | None) -> None:
    """Close the lock's fd (which releases the lock); None is nothing to release."""
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


def writer_alive(path: str | Path) -> bool | None:
    """Whether a live hilbench writer holds ``path`` (None where flock does not exist)."""
    if fcntl is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # releases the probe at once
    return False
