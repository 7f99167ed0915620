"""On-disk cache of derived arrays (resized data sets, pre-trained weights) under
``$HILBENCH_CACHE`` (default ``~/.cache/hilbench``); entries are .npz files named by a key
that holds every setting they depend on, written atomically."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import warnings
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

VERSION = 1  # bump when a producer changes what it computes

#: What reading a damaged entry raises (a truncated .npz is a bad zip, a cut member a zlib
#: error or an EOF); such an entry is made again.
_BAD_ENTRY = (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error)


class CacheWarning(UserWarning):
    """The cache cannot be written: every run makes its entries again (slow, still right)."""


_unwritable: set[Path] = set()  # caches already said to be unwritable (once per process)


def root() -> Path:
    return Path(os.environ.get("HILBENCH_CACHE") or Path.home() / ".cache" / "hilbench")


def path_for(kind: str, key: str) -> Path:
    digest = hashlib.sha256(f"{VERSION}|{key}".encode()).hexdigest()[:16]
    return root() / kind / f"{digest}.npz"


def cached(kind: str, key: str, make: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The arrays stored under (kind, key), made by ``make`` and stored on a miss. An
    unreadable entry is made again; an unwritable cache only costs the time."""
    p = path_for(kind, key)
    try:
        with np.load(p, allow_pickle=False) as f:
            return {k: f[k] for k in f.files}
    except _BAD_ENTRY:  # missing, truncated or damaged: made again and replaced
        pass
    arrays = make()
    tmp = None
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **arrays)
        os.replace(tmp, p)
    except OSError as exc:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if root() not in _unwritable:
            _unwritable.add(root())
            warnings.warn(
                f"cannot write the cache {root()} ({exc.strerror or exc}): {kind} is made "
                "again on every run; set HILBENCH_CACHE to a writable directory",
                CacheWarning,
                stacklevel=2,
            )
    return arrays
