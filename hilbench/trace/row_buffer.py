"""Rows waiting in memory for the next flush, and their conversion to checked record blocks.

A step row is kept as a tuple in the order of ``STEP_FIELDS`` (cheap to append); at flush its
columns are taken by name and each is checked against its type in the schema.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hilbench.errors import TraceError
from hilbench.trace import schema as S

#: The steps table's columns as append_step gives them, in the schema's order (sample_start
#: is derived at flush).
STEP_FIELDS = tuple(name for name in S.STEP_COLUMNS if name != "sample_start")
#: The samples table's columns given per sample (step is the owning step's).
SAMPLE_FIELDS = ("seed", "loss_plus", "loss_minus", "grad", "coeff")
STEP_INDEX = {name: i for i, name in enumerate(STEP_FIELDS)}

#: The other tables' rows, as the writer builds their tuples.
ROW_FIELDS = {
    "evals": ("step", "forward_passes", "accuracy", "loss", "split"),
    "timing": ("step", "command", "duration_s", "source"),
    "events": ("step", "time", "kind", "detail"),
}


def _check_fields() -> None:
    """Every column of the schema is filled by name from the rows buffered here."""
    given = {
        "steps": {*STEP_FIELDS, "sample_start"},
        "samples": {*SAMPLE_FIELDS, "step"},
        **{table: set(fields) for table, fields in ROW_FIELDS.items()},
    }
    for table, dtype in S.ROW_DTYPES.items():
        names = ROW_FIELDS.get(table, dtype.names)  # np.array fills these by position
        if given[table] != set(dtype.names) or tuple(names) != dtype.names:
            raise RuntimeError(f"hilbench.trace.row_buffer does not match the {table} schema")


_check_fields()

#: Columns checked against the schema: name -> (values, mask of bad values, expected type).
Checked = dict[str, tuple[np.ndarray, np.ndarray, str]]


class RowBuffer:
    """The rows of every table appended since the last flush."""

    def __init__(self, steps_dtype: np.dtype) -> None:
        self.steps_dtype = steps_dtype  # the current layout, or an older version's
        self.steps: list[tuple[Any, ...]] = []
        self.samples: dict[str, list[Any]] = {name: [] for name in SAMPLE_FIELDS}
        self._sample_lists = tuple(self.samples[name] for name in SAMPLE_FIELDS)
        self.evals: list[tuple[Any, ...]] = []
        self.timing: list[tuple[Any, ...]] = []
        self.events: list[tuple[Any, ...]] = []

    @property
    def pending(self) -> int:
        """Rows buffered (a step counts once, with its samples)."""
        return len(self.steps) + len(self.evals) + len(self.timing) + len(self.events)

    def last(self, field: str) -> Any:
        """``field`` of the last buffered step (there must be one)."""
        return self.steps[-1][STEP_INDEX[field]]

    def add_step(
        self,
        row: tuple[Any, ...],
        seeds: Sequence[int],
        loss_plus: Sequence[int],
        loss_minus: Sequence[int],
        grads: Sequence[float],
        coeffs: Sequence[int],
    ) -> None:
        """Buffer one step row (``STEP_FIELDS`` order) and its samples (``SAMPLE_FIELDS``)."""
        seed, lp, lm, grad, coeff = self._sample_lists  # unrolled: this is the hot path
        n0 = len(seed)  # the sample lists always have the same length
        try:
            # Flat Python lists (numpy arrays go in as .tolist(): a copy, and the cheapest
            # way in and out of numpy); np.asarray turns them into columns at flush.
            seed.extend(seeds.tolist() if type(seeds) is np.ndarray else seeds)
            lp.extend(loss_plus.tolist() if type(loss_plus) is np.ndarray else loss_plus)
            lm.extend(loss_minus.tolist() if type(loss_minus) is np.ndarray else loss_minus)
            grad.extend(grads.tolist() if type(grads) is np.ndarray else grads)
            coeff.extend(coeffs.tolist() if type(coeffs) is np.ndarray else coeffs)
        except BaseException:  # e.g. Ctrl-C mid-append: leave no half step behind
            for buf in self._sample_lists:
                del buf[n0:]
            raise
        self.steps.append(row)

    def clear(self) -> None:
        """Forget every buffered row (they are on disk)."""
        self.steps.clear()
        for rows in (*self.samples.values(), self.evals, self.timing, self.events):
            rows.clear()

    def blocks(self, samples_on_disk: int) -> tuple[dict[str, np.ndarray], TraceError | None]:
        """Every buffered table as a record block, samples first (a step row never points
        past the samples on disk); steps that do not fit the schema are left out and
        described by the returned error."""
        steps, samples, problem = self._step_blocks(samples_on_disk)
        blocks = {
            "samples": samples,
            "steps": steps,
            "evals": _block(self.evals, "evals", "eval"),
            "timing": _block(self.timing, "timing", "timing"),
            "events": _block(self.events, "events", "event"),
        }
        return blocks, problem

    def _step_blocks(
        self, samples_on_disk: int
    ) -> tuple[np.ndarray, np.ndarray, TraceError | None]:
        n = len(self.steps)
        by_name = dict(zip(STEP_FIELDS, zip(*self.steps, strict=True), strict=True)) if n else {}
        q_given = by_name.get("q", ())
        # An append interrupted (Ctrl-C) between its extends and its step row leaves extra
        # samples at the end of some sample lists: they belong to no step, drop them.
        total = sum(q_given)  # q was checked against the lengths in append_step
        for buf in self.samples.values():
            del buf[total:]
        columns = [c for c in STEP_FIELDS if c in self.steps_dtype.names]
        checks = {c: S.check_column("steps", c, by_name.get(c, ())) for c in columns}
        sample_checks = {c: S.check_column("samples", c, self.samples[c]) for c in SAMPLE_FIELDS}
        q = checks["q"][0]
        owner = np.repeat(np.arange(n), q)
        bad = np.zeros(n, bool)
        for _, mask, _ in checks.values():
            bad |= mask
        for _, mask, _ in sample_checks.values():
            bad[owner[mask]] = True
        problem = None
        keep: np.ndarray | slice = slice(None)
        skeep: np.ndarray | slice = slice(None)
        if bad.any():
            problem = self._describe_bad(bad, owner, checks, sample_checks)
            keep = ~bad
            skeep = keep[owner]
        q_kept = q[keep]
        steps = np.empty(len(q_kept), self.steps_dtype)
        for col, (values, _, _) in checks.items():
            steps[col] = values[keep]
        steps["sample_start"] = np.cumsum(q_kept) - q_kept + samples_on_disk
        samples = np.empty(int(q_kept.sum()), S.SAMPLES_DTYPE)
        samples["step"] = checks["step"][0][owner][skeep]
        for col, (values, _, _) in sample_checks.items():
            samples[col] = values[skeep]
        return steps, samples, problem

    def _describe_bad(
        self, bad: np.ndarray, owner: np.ndarray, checks: Checked, sample_checks: Checked
    ) -> TraceError:
        first = int(np.flatnonzero(bad)[0])
        what = ""
        for col, (_, mask, kind) in checks.items():
            if mask[first]:
                what = f"{col} = {_plain(self.steps[first][STEP_INDEX[col]])!r} is not {kind}"
                break
        else:
            for col, (_, mask, kind) in sample_checks.items():
                hits = np.flatnonzero(mask & (owner == first))
                if len(hits):
                    what = f"{col} = {_plain(self.samples[col][int(hits[0])])!r} is not {kind}"
                    break
        more = f" ({int(bad.sum())} bad steps in this block)" if bad.sum() > 1 else ""
        return TraceError(
            f"step {_plain(self.steps[first][STEP_INDEX['step']])!r} not recorded: {what}{more}",
            "pass the values the device returned: u32 seeds, i32 Q16 losses and "
            "coefficients, finite floats",
        )


def _block(rows: list[tuple[Any, ...]], table: str, what: str) -> np.ndarray:
    """Rows (in the table's column order) as a record block; bad rows drop the whole block."""
    dtype = S.ROW_DTYPES[table]
    if not rows:
        return np.empty(0, dtype)
    try:
        return np.array(rows, dtype=dtype)
    except (TypeError, ValueError, OverflowError) as exc:
        rows.clear()
        raise TraceError(
            f"buffered {what} rows could not be stored ({exc}); they were dropped",
            "pass int steps and numeric values",
        ) from None


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value
