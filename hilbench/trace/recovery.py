"""Orphan recovery: clear the open-for-write flags a killed writer left in a trace file."""

from __future__ import annotations

import os
from pathlib import Path

import h5py

from hilbench.errors import TraceError
from hilbench.trace import schema as S
from hilbench.trace.file_errors import check_root, open_error
from hilbench.trace.liveness import HAVE_FLOCK


def recover_orphan(path: Path) -> None:
    """Clear the superblock flags of a trace whose writer died (the caller holds the lock)."""
    try:
        with h5py.File(path, "r", swmr=True, locking=False) as f:  # is it ours?
            check_root(f, path)
    except OSError as exc:
        raise open_error(path, exc) from None
    if not HAVE_FLOCK:  # no lock: a live writer cannot be told from a dead one
        raise _left_open(path)
    fd = os.open(path, os.O_RDWR)
    try:
        if not S.clear_open_flags(fd):
            raise _left_open(path)
    finally:
        os.close(fd)


def _left_open(path: Path) -> TraceError:
    return TraceError(
        f"{path} was left open by a writer that did not close it",
        f"clear the flag with `h5clear -s {path}`, then retry",
    )


#: What HDF5 says of a file whose metadata lies past its stored end of allocation.
_PAST_EOA = (
    "addr overflow",
    "len not positive after adjustment for EOA",
    "address of object past end of allocation",
)


def past_end_of_allocation(exc: BaseException) -> bool:
    """Whether an HDF5 error says the file's end-of-allocation address is too small."""
    return any(s in str(exc) for s in _PAST_EOA)


def repair_end_of_allocation(path: Path) -> bool:
    """Raise the stored end of allocation of a trace a failed write left behind (the caller
    knows no writer holds it); False if it needed none or could not be written."""
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return False
    try:
        return S.raise_end_of_allocation(fd)
    except OSError:
        return False
    finally:
        os.close(fd)
