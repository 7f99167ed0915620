"""One-line errors for trace files HDF5 cannot open, and the check that a file is a trace."""

from __future__ import annotations

import os
import re
from pathlib import Path

import h5py

from hilbench import __version__ as _VERSION
from hilbench.errors import TraceError
from hilbench.trace import schema as S

#: What h5py raises when the disk refuses a write: OSError, or RuntimeError from a file flush
#: ("Can't write image to file").
IO_ERRORS = (OSError, RuntimeError)

#: The fix for a trace that is damaged.
FIX_CORRUPT = "re-copy the trace from its source, or record the run again"


def open_error(path: Path, exc: OSError, *, writing: bool = False) -> TraceError:
    """Translate an h5py/HDF5 open failure into one clear TraceError."""
    msg = str(exc)
    m = re.search(r"errno = (\d+)", msg)
    errno = exc.errno or (int(m.group(1)) if m else None)
    if "truncated file" in msg:
        return TraceError(
            f"{path} is truncated ({_hdf5_reason(msg)})",
            f"the file was cut short (interrupted copy or full disk); {FIX_CORRUPT}",
        )
    if "file signature not found" in msg:
        return TraceError(f"{path} is not an HDF5 file", "give the path of a hilbench .h5 trace")
    if "already open for" in msg or "consistency flags" in msg:
        return TraceError(
            f"{path} was left open by a writer that did not close it (killed or crashed)",
            "Trace.open reads it and TraceWriter.resume/create recover it; for other tools "
            f"clear the flag with `h5clear -s {path}`",
        )
    if "unable to lock file" in msg:
        return TraceError(
            f"{path} is open in another process (a live writer, or a program holding it)",
            "wait for that run to finish, or write to another file",
        )
    if errno == 13:
        verb = "written" if writing else "read"
        return TraceError(
            f"{path} cannot be {verb}: permission denied",
            "fix the file permissions or choose another path",
        )
    if errno == 2 and writing:  # e.g. /proc/x.h5: the directory exists, a file cannot
        return TraceError(
            f"cannot create trace {path}: the system refused a new file there",
            "choose a writable location for the trace (--trace PATH)",
        )
    if errno == 2:
        return TraceError(
            f"no trace file at {path} (or its directory does not exist)", "check the path"
        )
    reason = io_reason(exc) if "error message = '" in msg else _hdf5_reason(msg)
    if writing:
        return TraceError(
            f"cannot write trace {path} ({reason})",
            "choose a writable path on a disk with free space",
        )
    return TraceError(f"{path} is corrupt: HDF5 cannot open it ({reason})", FIX_CORRUPT)


def _hdf5_reason(msg: str) -> str:
    m = re.search(r"\((.*)\)\s*$", msg)
    return m.group(1) if m else msg


def check_root(f: h5py.File, path: Path) -> int:
    """Check the root attributes of a hilbench trace; return its format_version."""
    fmt = f.attrs.get("format")
    if isinstance(fmt, bytes):
        fmt = fmt.decode("utf-8", "replace")
    if fmt != S.FORMAT_NAME:
        raise TraceError(
            f"{path} is an HDF5 file but not a hilbench trace (no format = "
            f"{S.FORMAT_NAME!r} root attribute)",
            "give the path of a trace written by hilbench",
        )
    version = f.attrs.get("format_version")
    try:
        version = int(version)
    except (TypeError, ValueError):
        raise TraceError(
            f"{path} has no valid format_version attribute ({version!r})", FIX_CORRUPT
        ) from None
    if version > S.FORMAT_VERSION:
        writer = f.attrs.get("written_by")
        if isinstance(writer, bytes):
            writer = writer.decode("utf-8", "replace")
        by = f" (written by {writer})" if isinstance(writer, str) and writer else ""
        reads = (
            f"upgrade hilbench to {writer.split()[-1]} or newer"
            if by and writer.startswith("hilbench ")
            else f"upgrade hilbench to a version that reads trace format {version}"
        )
        raise TraceError(
            f"{path} is trace format version {version}{by}; this hilbench ({_VERSION}) reads "
            f"format version {S.FORMAT_VERSION}",
            f"{reads} (pip install -U hilbench)",
        )
    return version


def io_reason(exc: BaseException) -> str:
    """The short cause of a failed write, e.g. 'No space left on device (errno 28)'."""
    msg = str(exc)
    number = getattr(exc, "errno", None)
    m = re.search(r"errno = (\d+), error message = '([^']*)'", msg)
    if m:
        return f"{m.group(2)} (errno {m.group(1)})"
    if isinstance(number, int):
        return f"{os.strerror(number)} (errno {number})"
    return _hdf5_reason(msg).splitlines()[0] if msg else type(exc).__name__
