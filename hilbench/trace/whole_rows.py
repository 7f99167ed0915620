"""Which leading rows of a run's tables were really written: whole steps, no fill rows.

A write cut short (a full disk, a failing disk, a kill mid-flush) can leave a table longer
than what reached the disk: HDF5 then reads the missing rows as its fill value, zeros. Each
table's rows are kept up to the first one that could not have been written by the writer:
a step whose sample_start breaks the chain (each step's samples follow the previous step's),
whose samples are not all on disk or not its own, or that is all zeros itself (step 0 with
q = 0); an eval without a split, a timing row without a source, an event
without a time.
"""

from __future__ import annotations

import numpy as np

#: Per table: the column whose fill value (zero, empty) no written row has.
_WRITTEN_MARK = {"evals": "split", "timing": "source", "events": "time"}


def whole_steps(steps: np.ndarray, samples: np.ndarray, first_sample: int = 0) -> tuple[int, int]:
    """(whole step rows, the samples they own) at the start of ``steps``, whose first row
    owns sample ``first_sample``; ``samples`` are the sample rows from that one on. A step
    is whole when its samples follow the previous step's, are all there and are its own
    (their step column); the writer puts samples on disk before the steps that own them."""
    if not len(steps):
        return 0, 0
    q = steps["q"].astype(np.int64)
    start = steps["sample_start"].astype(np.int64) - first_sample
    ends = start + q
    fill = (steps["step"] == 0) & (q == 0) & (start == -first_sample)  # an all-zero row
    ok = (start == np.cumsum(q) - q) & (ends <= len(samples)) & ~fill
    n = len(steps) if ok.all() else int(np.argmin(ok))
    total = int(ends[n - 1]) if n else 0
    rows = samples[:total]
    owned = rows["step"] == np.repeat(steps["step"][:n], q[:n])
    if not owned.all():  # a sample that is not its step's: cut before the step owning it
        n = int(np.searchsorted(ends[:n], int(np.argmin(owned)), side="right"))
        total = int(ends[n - 1]) if n else 0
    return n, total


def written_rows(table: str, rows: np.ndarray) -> int:
    """How many leading rows of ``table`` (evals, timing or events) were written."""
    mark = _WRITTEN_MARK[table]
    col = rows[mark]
    unwritten = col == 0 if col.dtype.kind == "f" else col == col.dtype.type()
    return len(rows) if not unwritten.any() else int(np.argmax(unwritten))
