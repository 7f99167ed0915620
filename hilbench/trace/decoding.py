"""Values and rows as HDF5 hands them back, turned into plain Python and str columns."""

from __future__ import annotations

from typing import Any

import h5py
import numpy as np

from hilbench.trace import run_state


def plain_value(value: Any) -> Any:
    """An attribute value as plain Python: bytes as str, numpy scalars as bool/int/float."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


def str_dtype(dtype: np.dtype) -> np.dtype:
    """``dtype`` with fixed byte strings as fixed str and vlen strings as objects."""
    fields = []
    for col in dtype.names:
        kind = dtype[col]
        if kind.kind == "S":
            fields.append((col, f"U{kind.itemsize}"))
        elif kind.kind == "O":
            fields.append((col, object))
        else:
            fields.append((col, kind))
    return np.dtype(fields)


def decode_rows(raw: np.ndarray) -> np.ndarray:
    """Rows read from a table: fixed strings become str, vlen strings str objects."""
    out = np.empty(len(raw), str_dtype(raw.dtype))
    for col in raw.dtype.names:
        kind = raw.dtype[col]
        if kind.kind == "S":
            out[col] = np.char.decode(raw[col], "utf-8", "replace")
        elif kind.kind == "O":
            out[col] = [
                v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in raw[col]
            ]
        else:
            out[col] = raw[col]
    return out


def readable_attrs(obj: Any, keys: Any = None) -> dict[str, Any]:
    """The attributes of an HDF5 object as plain values, leaving out any whose value cannot
    be read (a cut-short write can lose the heap block of a string). A run whose status was
    lost reads as not finished: its end was never recorded whole. A run group's attributes
    set after its start (run_state.py) are laid over its HDF5 attributes."""
    out = {}
    for key in obj.attrs if keys is None else [k for k in keys if k in obj.attrs]:
        try:
            out[key] = plain_value(obj.attrs[key])
        except (OSError, RuntimeError, ValueError, KeyError):
            continue
    if isinstance(obj, h5py.Group):
        _, later = run_state.read(obj)
        out.update(later if keys is None else {k: v for k, v in later.items() if k in keys})
    if "status" in obj.attrs and "status" not in out:
        out["finished"] = False
    return out
