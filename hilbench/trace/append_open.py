"""Open a trace for appending: create it, or reopen it (recovering it from a killed writer)."""

from __future__ import annotations

import contextlib
import errno
from pathlib import Path
from typing import Any

import h5py

from hilbench import __version__ as _HILBENCH_VERSION
from hilbench.errors import TraceError
from hilbench.trace import schema as S
from hilbench.trace.file_errors import IO_ERRORS, check_root, open_error
from hilbench.trace.liveness import HAVE_FLOCK, lock_exclusive, release
from hilbench.trace.recovery import (
    past_end_of_allocation,
    recover_orphan,
    repair_end_of_allocation,
)


def h5_open(path: Path, mode: str, **kw: Any) -> h5py.File:
    """h5py.File with the trace's format bounds; HDF5's own flock off where ours is used."""
    if HAVE_FLOCK:
        kw.setdefault("locking", False)
    return h5py.File(path, mode, libver=S.LIBVER, **kw)


def open_for_append(path: Path, *, create: bool) -> tuple[h5py.File, int | None]:
    """Open an existing hilbench trace read-write (recovering it from a killed writer), or
    create a new one when ``create``. Returns the file and the writer's lock fd (held
    exclusively; the writer downgrades it to shared once its run is set up)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TraceError(
            f"cannot create the directory {path.parent} for trace {path} ({exc.strerror or exc})",
            "choose a writable location for the trace",
        ) from None
    if path.is_dir():
        raise TraceError(f"trace path {path} is a directory", "give a file name, e.g. run.h5")
    if not path.exists():
        return _create(path)
    if not h5py.is_hdf5(path):
        raise TraceError(
            f"{path} exists and is not an HDF5 file; refusing to overwrite it",
            "choose another trace path or move the file away",
        )
    lock_fd = lock_exclusive(path)
    try:
        f = _reopen(path)
        try:
            _check_appendable(f, path, "append a run" if create else "resume")
        except BaseException:
            f.close()
            raise
    except BaseException:
        release(lock_fd)
        raise
    return f, lock_fd


def _create(path: Path) -> tuple[h5py.File, int | None]:
    """A new trace file; nothing left behind if the disk refuses it."""
    try:
        f = h5_open(path, "w-")
    except OSError as exc:
        if exc.errno != errno.EEXIST:  # HDF5 may have made the file before its write failed
            with contextlib.suppress(OSError):
                path.unlink()
        raise open_error(path, exc, writing=True) from None
    lock_fd = None
    try:
        lock_fd = lock_exclusive(path)
        f.attrs["format"] = S.FORMAT_NAME
        f.attrs["format_version"] = S.FORMAT_VERSION
        f.attrs["written_by"] = f"hilbench {_HILBENCH_VERSION}"
    except BaseException:
        with contextlib.suppress(*IO_ERRORS):
            f.close()
        release(lock_fd)
        with contextlib.suppress(OSError):
            path.unlink()
        raise
    return f, lock_fd


def _reopen(path: Path) -> h5py.File:
    """The file read-write; a file a killed writer left flagged open, or whose last write was
    cut short, is recovered first."""
    repair_end_of_allocation(path)  # no writer holds it (we have the lock): a cheap check
    for attempt in range(3):
        try:
            return h5_open(path, "r+")
        except OSError as exc:
            if attempt < 2 and "already open for" in str(exc):
                recover_orphan(path)
            elif attempt < 2 and past_end_of_allocation(exc):
                repair_end_of_allocation(path)
            else:
                raise open_error(path, exc, writing=True) from None
    raise AssertionError("unreachable")  # pragma: no cover


def _check_appendable(f: h5py.File, path: Path, verb: str) -> None:
    try:
        check_root(f, path)
    except TraceError as err:
        raise TraceError(f"cannot {verb}: {err.cause}", "write the trace to a new file") from None
    superblock = f.id.get_create_plist().get_version()[0]
    if superblock < 3:  # not written by hilbench: HDF5 cannot start SWMR on it
        raise TraceError(
            f"cannot {verb}: {path} uses HDF5 superblock version {superblock}, which "
            "cannot be written in SWMR mode (version 3 or later is needed)",
            "write the trace to a new file (hilbench creates files that allow it)",
        )
