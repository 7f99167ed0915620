"""Golden-vector files (HBGV) that C tests read without Python: named integer arrays.

Layout (little-endian; the C reader is device_fw/tests/hbgv.c): ``"HBGV"``, ``u32 version``
(1), ``u32 count``, then per array ``u16 name_len``, the name (UTF-8), ``u8 dtype``,
``u8 rank``, ``u32 dims[rank]``, ``u32 nbytes``, zero padding to a multiple of 4 (from the
start of the file), the data, zero padding to a multiple of 4.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from pathlib import Path

import numpy as np

MAGIC = b"HBGV"
VERSION = 1
DTYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")


def _pad(out: bytearray) -> None:
    out += b"\0" * (-len(out) % 4)


def dumps(arrays: Mapping[str, np.ndarray | bytes | int]) -> bytes:
    """HBGV bytes of ``arrays`` (bytes become uint8 arrays, ints int64 scalars of shape (1,))."""
    out = bytearray(MAGIC + struct.pack("<II", VERSION, len(arrays)))
    for name, value in arrays.items():
        if isinstance(value, bytes | bytearray):
            a = np.frombuffer(bytes(value), np.uint8)
        elif isinstance(value, int):
            a = np.array([value], np.int64)
        else:
            a = np.asarray(value)
        if a.dtype.name not in DTYPES:
            raise ValueError(f"{name}: dtype {a.dtype} is not an HBGV integer type")
        if a.ndim == 0:
            a = a.reshape(1)
        if a.ndim > 8:
            raise ValueError(f"{name}: rank {a.ndim} > 8")
        nb = name.encode()
        if len(nb) >= 128:
            raise ValueError(f"{name}: name longer than 127 bytes")
        data = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()
        out += struct.pack("<H", len(nb)) + nb
        out += struct.pack("<BB", DTYPES.index(a.dtype.name), a.ndim)
        out += struct.pack(f"<{a.ndim}I", *a.shape) + struct.pack("<I", len(data))
        _pad(out)
        out += data
        _pad(out)
    return bytes(out)


def loads(data: bytes) -> dict[str, np.ndarray]:
    """The arrays of HBGV bytes, by name."""
    if data[:4] != MAGIC or struct.unpack_from("<I", data, 4)[0] != VERSION:
        raise ValueError("not an HBGV version 1 file")
    (count,) = struct.unpack_from("<I", data, 8)
    pos, out = 12, {}
    for _ in range(count):
        (nl,) = struct.unpack_from("<H", data, pos)
        name = data[pos + 2 : pos + 2 + nl].decode()
        pos += 2 + nl
        dt, rank = data[pos], data[pos + 1]
        dims = struct.unpack_from(f"<{rank}I", data, pos + 2)
        pos += 2 + 4 * rank
        (nbytes,) = struct.unpack_from("<I", data, pos)
        pos += 4
        pos += -pos % 4
        dtype = np.dtype(DTYPES[dt]).newbyteorder("<")
        out[name] = np.frombuffer(data, dtype, nbytes // dtype.itemsize, pos).reshape(dims)
        pos += nbytes
        pos += -pos % 4
    return out


def write(path: Path, arrays: Mapping[str, np.ndarray | bytes | int]) -> bool:
    """Write ``arrays`` to ``path`` if its bytes changed; True when written."""
    data = dumps(arrays)
    path = Path(path)
    if path.exists() and path.read_bytes() == data:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return True


def read(path: Path) -> dict[str, np.ndarray]:
    return loads(Path(path).read_bytes())
