"""A trace file whose disk refused a write is detached from the disk before HDF5 closes it.

HDF5 (2.0) cannot close a file whose last writes keep failing: the close fails half way,
leaves its objects half torn down, and closing them again (h5py does when the Python objects
are freed) crashes the process; the same path cannot be opened again in that process either.
So after the first failed write the writer points HDF5's file descriptor at an anonymous file
in memory (``memfd_create``) of the same size: HDF5's remaining writes (the rolled-back
extents, the final attributes) then succeed there and are dropped, and the close runs clean.
The trace on disk keeps what reached it before the failure (whole rows: see whole_rows).
"""

from __future__ import annotations

import contextlib
import os

import h5py


def detach_from_disk(f: h5py.File) -> bool:
    """Make every later write of HDF5 to ``f`` go to memory; False where that cannot be done
    (no memfd_create, or a file driver without a descriptor)."""
    if not hasattr(os, "memfd_create"):
        return False
    try:
        fd = int(f.id.get_vfd_handle())
        size = os.fstat(fd).st_size
        mem = os.memfd_create("hilbench-trace-detached")
    except (OSError, RuntimeError, ValueError, TypeError):
        return False
    try:
        os.ftruncate(mem, size)  # the same end of file: HDF5's size checks still agree
        os.dup2(mem, fd)
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.close(mem)
    return True
