"""A run's tables on disk: their row counts, and record blocks appended at their ends."""

from __future__ import annotations

import contextlib

import h5py
import numpy as np
from h5py import h5s, h5t

from hilbench.trace import schema as S
from hilbench.trace.file_errors import IO_ERRORS


class Tables:
    """The five tables of one run group, appended to in record blocks."""

    def __init__(self, group: h5py.Group, steps_dtype: np.dtype) -> None:
        self._file = group.file
        self.datasets = {name: group[name] for name in S.DATASETS}
        self.rows = {name: int(ds.shape[0]) for name, ds in self.datasets.items()}
        layouts = {**S.DATASETS, "steps": steps_dtype}
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
        """Write each block at the end of its table, in the order given, then flush the file
        (HDF5 flush: durable for a reader); the first block is flushed on its own first. The
        rows count only once all that succeeded."""
        names = list(blocks)
        for name in names[:1]:  # the first block (samples) on disk before the steps that own
            self._write(name, blocks[name])  # it: HDF5 writes cached chunks in any order
        if len(names) > 1 and len(blocks[names[0]]):
            self.datasets[names[0]].id.flush()  # that table only: cheaper than the file
        for name in names[1:]:
            self._write(name, blocks[name])
        self._file.flush()
        for name, arr in blocks.items():
            self.rows[name] += len(arr)

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
