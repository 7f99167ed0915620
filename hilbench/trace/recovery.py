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
