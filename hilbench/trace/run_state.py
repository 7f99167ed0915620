"""A run's changing attributes, kept where one write changes them whole: two fixed slots.

HDF5 attributes are rewritten in several places of the file at each change (an object
header, a fractal heap and a B-tree once a group has more than 8, a global heap for a
string), and HDF5 flushes those places in no order a failed write respects: a disk that
fills up during that flush leaves attributes that read as garbage, or that make HDF5 loop.
So what a writer sets after the run started (the device it reached, the final values of
finish(), a resume putting them back to their placeholders) goes, as JSON, into one of the
two slots of the run's ``run_state`` dataset, allocated whole when the run was created:
a change is one write of raw data at a fixed place, the slot that does not hold the
current state, numbered one past it (the two meta pages of LMDB). A reader takes the
valid slot with the highest number, laid over the run's attributes: a write that failed
or was cut short leaves the state before it. The gzip rewrite at close folds the state
into the attributes and drops the dataset.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import h5py
import numpy as np

from hilbench.errors import TraceError

#: The dataset of a run group holding the two slots.
NAME = "run_state"
#: Bytes per slot: the JSON of every attribute set after the run started.
SLOT_BYTES = 16384
_DTYPE = np.dtype(f"S{SLOT_BYTES}")


def create(g: h5py.Group) -> h5py.Dataset:
    """The two empty slots of a new run, allocated now (a later write changes no metadata)."""
    ds = g.create_dataset(NAME, data=np.zeros(2, _DTYPE))
    ds.attrs["description"] = (
        "run attributes set after the run started: JSON {seq, attrs} in two slots, the valid "
        "one with the higher seq laid over the group's attributes"
    )
    return ds


def read(g: h5py.Group) -> tuple[int, dict[str, Any]]:
    """(sequence number, attributes) of the current slot; (0, {}) when none is valid."""
    ds = g.get(NAME)
    if not isinstance(ds, h5py.Dataset):
        return 0, {}
    best: tuple[int, dict[str, Any]] = (0, {})
    try:
        slots = ds[()]
    except (OSError, RuntimeError, ValueError):
        return best
    for raw in slots:
        try:
            doc = json.loads(bytes(raw).rstrip(b"\0") or b"null")
        except ValueError:
            continue  # a slot whose write was cut short
        if isinstance(doc, dict) and isinstance(doc.get("seq"), int) and doc["seq"] > best[0]:
            attrs = doc.get("attrs")
            if isinstance(attrs, dict):
                best = (doc["seq"], attrs)
    return best


class RunState:
    """The writer's side: the current state and where the next one goes."""

    def __init__(self, g: h5py.Group) -> None:
        ds = g.get(NAME)
        self._ds = ds if isinstance(ds, h5py.Dataset) else create(g)
        self._seq, self.values = read(g)

    def write(self, attrs: Mapping[str, Any]) -> None:
        """Lay ``attrs`` over the state and write it to the other slot (not flushed)."""
        values = {**self.values, **attrs}
        doc = json.dumps({"seq": self._seq + 1, "attrs": values}, allow_nan=True)
        data = doc.encode("utf-8")
        if len(data) > SLOT_BYTES:
            raise TraceError(
                f"the run attributes set after the start take {len(data):,} bytes of JSON; "
                f"a trace holds {SLOT_BYTES:,}",
                "put long values in the config dict given at the start",
            )
        self._ds[(self._seq + 1) % 2] = np.array(data, _DTYPE)
        self._seq += 1
        self.values = values
