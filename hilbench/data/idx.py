"""The IDX format of MNIST and Fashion-MNIST (gzip-compressed or not): a big-endian magic
``0x00 0x00 type ndim``, ``ndim`` big-endian uint32 sizes, then the data."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from hilbench.errors import ConfigError

UBYTE = 0x08


def read_idx(path: Path) -> np.ndarray:
    """The uint8 array of an IDX file; ConfigError naming the file when it is not one."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}", "check the file") from None
    except (EOFError, gzip.BadGzipFile) as exc:
        raise ConfigError(f"{path} is a broken gzip file ({exc})", "fetch it again") from None
    if len(raw) < 4 or raw[:2] != b"\0\0" or raw[2] != UBYTE or not 1 <= raw[3] <= 4:
        raise ConfigError(
            f"{path} is not an IDX file of unsigned bytes", "point at the MNIST-format files"
        )
    ndim = raw[3]
    head = 4 + 4 * ndim
    shape = tuple(int(v) for v in np.frombuffer(raw[4:head], ">u4")) if len(raw) >= head else ()
    if len(shape) != ndim or len(raw) - head != int(np.prod(shape)):
        raise ConfigError(
            f"{path} is truncated or padded: its header says {shape}, "
            f"{len(raw) - min(head, len(raw)):,} data bytes follow",
            "fetch the file again",
        )
    return np.frombuffer(raw, np.uint8, offset=head).reshape(shape)
