"""A run's tables on disk: their row counts, and record blocks appended at their ends."""

from __future__ import annotations

import contextlib

import h5py
import numpy as np
from h5py import h5s, h5t

from hilbench.trace import event_text
from hilbench.trace import schema as S
from hilbench.trace.file_errors import IO_ERRORS


class Tables:
    """The five tables of one run group (and, since format version 3, the byte log of its
    event texts: event_text.py), appended to in record blocks."""

    def __init__(self, group: h5py.Group, steps_dtype: np.dtype) -> None:
        self._file = group.file
        self.datasets = {name: group[name] for name in S.DATASETS}
        self._byte_log = event_text.has_byte_log(self.datasets["events"])
        if self._byte_log:
            self.datasets[S.EVENT_TEXT] = group[S.EVENT_TEXT]
        self.rows = {name: int(ds.shape[0]) for name, ds in self.datasets.items()}
        layouts = {**S.DATASETS, "steps": steps_dtype, S.EVENT_TEXT: np.dtype(np.uint8)}
        # Tables whose file type is byte-identical to the numpy record layout are written
        # without HDF5's (slow) compound conversion.
        self._mtypes = {}
        for name, ds in self.datasets.items():
            ftype = ds.id.get_type()
            if (
                not ds.dtype.hasobject
                and ftype.get_size() == ds.dtype.itemsize
                and ftype == h5t.py_create(layouts[name])
            ):
                self._mtypes[name] = ftype

    def append(self, blocks: dict[str, np.ndarray]) -> None:
        """Write each block at the end of its table, then flush the file (HDF5 flush: durable
        for a reader). Every block but the steps is flushed on its own first, in the order
        given (HDF5 writes cached chunks in any order): a step row on disk means that the
        rows of its flush (its samples, evals, timing and events) are on disk too. The rows
        count only once all that succeeded. An events block (in-memory layout) of a run with
        a byte log goes as its texts, then its rows."""
        if self._byte_log and "events" in blocks:
            blocks = self._texts_first(blocks)
        for name, block in blocks.items():
            if name != "steps" and len(block):
                self._write(name, block)
                self.datasets[name].id.flush()  # that table only: cheaper than the file
        if "steps" in blocks:
            self._write("steps", blocks["steps"])
        self._file.flush()
        for name, arr in blocks.items():
            self.rows[name] += len(arr)

    def _texts_first(self, blocks: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """``blocks`` with the events' texts as an event_text block just before their rows
        (a row never points past the texts on disk)."""
        text, rows = event_text.to_disk(blocks["events"], self.rows[S.EVENT_TEXT])
        out = {name: block for name, block in blocks.items() if name != "events"}
        out[S.EVENT_TEXT] = text
        out["events"] = rows
        return out

    def roll_back(self) -> None:
        """After a failed append: every table's extent back to its counted rows, so the
        rows of the failed block never appear on disk (as zeros) when HDF5 flushes later."""
        for name, ds in self.datasets.items():
            with contextlib.suppress(*IO_ERRORS, ValueError):
                ds.id.set_extent((self.rows[name],))

    def _write(self, name: str, arr: np.ndarray) -> None:
        """Append a record block at the end of a table (low-level h5py: 3x faster)."""
        if not len(arr):
            return
        ds = self.datasets[name]
        n0 = self.rows[name]
        ds.id.set_extent((n0 + len(arr),))
        mtype = self._mtypes.get(name)
        if mtype is None:  # vlen strings: let h5py convert
            ds[n0:] = arr
            return
        fspace = ds.id.get_space()
        fspace.select_hyperslab((n0,), (len(arr),))
        ds.id.write(h5s.create_simple((len(arr),)), fspace, arr, mtype=mtype)
