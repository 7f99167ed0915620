"""On-disk cache of derived arrays (resized data sets, pre-trained weights) under
``$HILBENCH_CACHE`` (default ``~/.cache/hilbench``); entries are .npz files named by a key
that holds every setting they depend on, written atomically."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

VERSION = 1  # bump when a producer changes what it computes


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
    except (OSError, ValueError, EOFError):
        pass
    arrays = make()
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **arrays)
        os.replace(tmp, p)
    except OSError:
        pass
    return arrays
