"""Trace: read one run of a hilbench HDF5 trace into numpy arrays, with one-line errors."""

from __future__ import annotations

import contextlib
import json
import math
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import h5py
import numpy as np

from hilbench.errors import TraceError
from hilbench.trace import event_text
from hilbench.trace import schema as S
from hilbench.trace.decoding import decode_rows, plain_value, readable_attrs, str_dtype
from hilbench.trace.file_errors import FIX_CORRUPT, check_root, open_error
from hilbench.trace.liveness import HAVE_FLOCK, lock_exclusive, release, writer_alive
from hilbench.trace.recovery import past_end_of_allocation, repair_end_of_allocation
from hilbench.trace.whole_rows import whole_steps, written_rows

# The old private names, kept for code outside the trace package that still uses them
# (hilbench.trace.decoding has the public ones).
_decode = plain_value
_decode_rows = decode_rows
_str_dtype = str_dtype

_T = TypeVar("_T")

# Where flock exists hilbench writers use their own lock (liveness.py), not HDF5's.
_READ_KW: dict[str, Any] = {"locking": False} if HAVE_FLOCK else {}


@contextlib.contextmanager
def _open_read(path: str | Path) -> Iterator[h5py.File]:
    """Open a trace read-only; SWMR when a writer has it open (or was killed)."""
    path = Path(path)
    if not path.exists():
        raise TraceError(f"no trace file at {path}", "check the path")
    if path.is_dir():
        raise TraceError(f"{path} is a directory, not a trace file", "give the .h5 file's path")
    try:
        if not h5py.is_hdf5(path):
            raise TraceError(f"{path} is not an HDF5 file", "give the path of a hilbench .h5 trace")
    except OSError as exc:
        raise open_error(path, exc) from None
    try:
        # A plain open checks the stored end of file (catches truncation) ...
        f = h5py.File(path, "r", **_READ_KW)
    except OSError as exc:
        if "already open for" not in str(exc) and "unable to lock file" not in str(exc):
            raise open_error(path, exc) from None
        try:  # ... and a file a writer has open in SWMR mode (or left open) needs SWMR read.
            f = h5py.File(path, "r", swmr=True, **_READ_KW)
        except OSError as exc2:
            raise open_error(path, exc2) from None
    try:
        try:
            check_root(f, path)
        except (OSError, KeyError, ValueError, RuntimeError) as exc:
            raise TraceError(
                f"{path} is corrupt: its root group cannot be read ({exc})", FIX_CORRUPT
            ) from None
        yield f
    finally:
        f.close()


def list_runs(path: str | Path) -> list[str]:
    """The run ids in a trace file, in order ('0000', '0001', ...)."""
    with _open_read(path) as f:
        return _run_ids(f)


@dataclass(frozen=True)
class RunInfo:
    """A run's headline, read without loading its tables (``run_infos``)."""

    run_id: str
    status: str  # running (writer alive or killed), complete, interrupted or failed
    finished: bool
    steps: int  # step rows on disk
    forward_passes: int  # after the last step on disk (the final count once finished)
    budget: int | None  # from the stored config, when it has one
    #: for an unfinished run: whether a writer holds the file now (False: it was killed or
    #: its disk failed; the run resumes), None where that cannot be known (no flock)
    writer_alive: bool | None = None

    @property
    def resumable(self) -> bool:
        """Whether ``hilbench run --resume`` can continue it (it did not complete)."""
        return not self.finished or self.status in S.RESUMABLE_STATUSES


def run_infos(path: str | Path) -> list[RunInfo]:
    """Every run of a trace file, in order, as RunInfo (cheap: attributes and one row)."""
    return _repairing(Path(path), lambda: _run_infos(path))


def _repairing(path: Path, read: Callable[[], _T]) -> _T:
    """``read()``; once more after raising the stored end of allocation of a file whose
    writer is gone and whose last write was cut short (recovery.py), if that is the error."""
    try:
        return read()
    except TraceError as err:
        if not past_end_of_allocation(err) or writer_alive(path):
            raise
        try:
            fd = lock_exclusive(path)  # no writer may start while the superblock changes
        except (TraceError, OSError):
            raise err from None
        try:
            if not repair_end_of_allocation(path):
                raise
        finally:
            release(fd)
    return read()


def _run_infos(path: str | Path) -> list[RunInfo]:
    out = []
    alive = writer_alive(path)
    with _open_read(path) as f:
        for rid in _run_ids(f):
            try:
                g = f[S.RUNS_GROUP][rid]
                attrs = readable_attrs(g, ("status", "finished"))
                steps = g.get("steps")
                n = _whole_steps_on_disk(g)
                fp = int(steps[n - 1]["forward_passes"]) if n else 0
                try:
                    budget = json.loads(plain_value(g.attrs.get("config_json", "{}"))).get("budget")
                except (ValueError, AttributeError):
                    budget = None
            except (OSError, KeyError, ValueError, RuntimeError) as exc:
                raise TraceError(
                    f"{path} run {rid} is corrupt or unreadable ({exc})", FIX_CORRUPT
                ) from None
            out.append(
                RunInfo(
                    run_id=rid,
                    status=str(attrs.get("status", S.RUNNING)),
                    finished=bool(attrs.get("finished", False)),
                    steps=n,
                    forward_passes=fp,
                    budget=budget if isinstance(budget, int) else None,
                    writer_alive=None if attrs.get("finished", False) else alive,
                )
            )
    return out


#: run_infos checks this many last step rows (a failed write damages only the last block).
_TAIL_STEPS = 4096


def _whole_steps_on_disk(g: h5py.Group) -> int:
    """Whole step rows of a run group, from the tail of its tables (cheap on a long run)."""
    steps, samples = g.get("steps"), g.get("samples")
    if steps is None or samples is None or not steps.shape[0]:
        return 0
    first = max(0, steps.shape[0] - _TAIL_STEPS)
    tail = steps.fields(["step", "q", "sample_start"])[first:]
    start = int(tail["sample_start"][0])
    return first + whole_steps(tail, samples[start:], start)[0]


def _run_ids(f: h5py.File) -> list[str]:
    runs = f.get(S.RUNS_GROUP)
    if not isinstance(runs, h5py.Group):
        return []
    return sorted(runs)


def _read_table(g: h5py.Group, name: str) -> np.ndarray:
    """A dataset as a structured array; fixed strings become str, vlen strings str objects."""
    want = S.ROW_DTYPES[name]
    ds = g.get(name)
    if ds is None:
        return np.empty(0, str_dtype(want))
    rows = decode_rows(ds[()])
    return _current_steps(rows) if name == "steps" else rows


def events_on_disk(g: h5py.Group) -> np.ndarray:
    """The events table in the in-memory layout (schema.EVENTS_DTYPE). A run of format
    version 3 or later: the rows whose texts are whole in its byte log (event_text.py). An
    older run: if a cut-short write lost the heap of some details, the events up to the
    first of those (their fixed columns are read on their own)."""
    if "events" in g and event_text.has_byte_log(g["events"]):
        return event_text.read_rows(g)
    try:
        return _read_table(g, "events")
    except (OSError, RuntimeError, ValueError):
        pass
    ds = g["events"]
    fixed = ds.fields(["step", "time", "kind"])[()]
    details = ds.fields("detail")
    rows = []
    for i in range(len(fixed)):
        try:
            detail = details[i]
        except (OSError, RuntimeError, ValueError):
            break
        rows.append((*fixed[i].tolist(), detail))
    raw = np.array(rows, S.EVENTS_DTYPE) if rows else np.empty(0, S.EVENTS_DTYPE)
    return decode_rows(raw)


def _current_steps(rows: np.ndarray) -> np.ndarray:
    """Step rows in the current layout: an older run's columns missing from its layout
    (fresh_numbers in a version 1 run) get -1 (not recorded)."""
    if rows.dtype.names == S.STEPS_DTYPE.names:
        return rows
    out = np.empty(len(rows), S.STEPS_DTYPE)
    for col in S.STEPS_DTYPE.names:
        out[col] = rows[col] if col in rows.dtype.names else S.NOT_RECORDED
    return out


def _quantiles(x: np.ndarray) -> dict[str, float]:
    p50, p90, p99 = np.percentile(x, [50, 90, 99])
    return {"p50": float(p50), "p90": float(p90), "p99": float(p99), "mean": float(x.mean())}


def pick_run(path: Path, ids: list[str], run: str | int | None) -> str:
    """The id of run ``run`` (an id like '0001', its number, or None: the last) among ``ids``."""
    if not ids:
        raise TraceError(f"{path} holds no runs", "record a run into it first")
    if run is None:
        return ids[-1]
    if isinstance(run, int | np.integer) and not isinstance(run, bool):
        rid = S.run_id(int(run))
    elif isinstance(run, str):
        rid = S.run_id(int(run)) if run.isdigit() and run not in ids else run
    else:
        rid = repr(run)
    if rid not in ids:
        raise TraceError(
            f"{path} has no run {rid!r}; it has {', '.join(ids)}", "pick one of those run ids"
        )
    return rid


@dataclass
class Trace:
    """One run of a trace, loaded into memory. Make one with Trace.open()."""

    path: Path
    run_id: str
    attrs: dict[str, Any]
    config: dict[str, Any]
    steps: np.ndarray
    samples: np.ndarray
    evals: np.ndarray
    timing: np.ndarray
    events: np.ndarray
    model_blob: bytes | None = None
    units: dict[str, dict[str, str]] = field(default_factory=dict)
    format_version: int = S.FORMAT_VERSION
    #: for an unfinished run: whether a writer held the file when it was read (False: it
    #: was killed, or its disk failed), None when finished or where that cannot be known
    writer_alive: bool | None = None

    @classmethod
    def open(cls, path: str | Path, run: str | int | None = None) -> Trace:
        """Load run ``run`` (id like '0001', or its number; default: the last run) of ``path``."""
        return _repairing(Path(path), lambda: cls._open(Path(path), run))

    @classmethod
    def _open(cls, path: Path, run: str | int | None) -> Trace:
        with _open_read(path) as f:
            version = check_root(f, path)
            ids = _run_ids(f)
            rid = pick_run(path, ids, run)
            try:
                trace = cls._load(path, f[S.RUNS_GROUP][rid], rid, version)
            except (OSError, KeyError, ValueError, RuntimeError) as exc:
                raise TraceError(
                    f"{path} run {rid} is corrupt or unreadable ({exc})", FIX_CORRUPT
                ) from None
        if not trace.finished:
            trace.writer_alive = writer_alive(path)
        return trace

    @classmethod
    def _load(cls, path: Path, g: h5py.Group, rid: str, version: int) -> Trace:
        attrs = readable_attrs(g)
        try:
            config = json.loads(attrs.get("config_json", "{}") or "{}")
        except json.JSONDecodeError as exc:
            raise TraceError(
                f"{path} run {rid} has an invalid config_json ({exc})", FIX_CORRUPT
            ) from None
        units = {}
        for name in S.DATASETS:
            if name in g and "units" in g[name].attrs:
                units[name] = json.loads(plain_value(g[name].attrs["units"]))
        blob = bytes(g["model_blob"][()].tobytes()) if "model_blob" in g else None
        steps = _read_table(g, "steps")
        samples = _read_table(g, "samples")
        # Seen mid-flush (SWMR), after a kill or a failed write, the tables may end in rows
        # that never reached the disk: keep the whole steps and rows really written.
        n_steps, n_samples = whole_steps(steps, samples)
        steps, samples = steps[:n_steps], samples[:n_samples]
        tables = {name: _read_table(g, name) for name in ("evals", "timing")}
        tables["events"] = events_on_disk(g)
        evals, timing, events = (rows[: written_rows(n, rows)] for n, rows in tables.items())
        return cls(
            path=path,
            run_id=rid,
            attrs=attrs,
            config=config,
            steps=steps,
            samples=samples,
            evals=evals,
            timing=timing,
            events=events,
            model_blob=blob,
            units=units,
            format_version=version,
        )

    def __repr__(self) -> str:
        """What the run is and its headline figures; never its tables, blob or config."""
        a = self.attrs
        what = f"{a.get('model', '?')} on {a.get('dataset', '?')}"
        scheduler = self.config.get("scheduler")
        if scheduler:
            what += f", {scheduler}"
        try:
            acc = self.final_accuracy
            figures = f"{self.n_steps:,} steps, {self.forward_passes:,} forward passes, " + (
                "not evaluated" if acc is None else f"accuracy {acc:.2%}"
            )
        except (KeyError, TypeError, ValueError, IndexError):  # a Trace built by hand
            figures = f"{len(self.steps)} step rows"
        return (
            f"<Trace run {self.run_id} of {self.path}: {self.status}, {what}, "
            f"{a.get('backend', '?')}, {figures}>"
        )

    # ---------------------------------------------------------------- derived values

    @property
    def finished(self) -> bool:
        return bool(self.attrs.get("finished", False))

    @property
    def status(self) -> str:
        return str(self.attrs.get("status", "running"))

    @property
    def n_steps(self) -> int:
        return len(self.steps)

    @property
    def backend(self) -> str | None:
        return self.attrs.get("backend")

    @property
    def final_accuracy(self) -> float | None:
        """The recorded final accuracy if the run finished, else the last test eval, else None."""
        acc = self.attrs.get("final_accuracy")
        if self.finished and isinstance(acc, float) and not math.isnan(acc):
            return acc
        tests = self.evals[self.evals["split"] == "test"]
        evals = tests if len(tests) else self.evals
        return float(evals["accuracy"][-1]) if len(evals) else None

    @property
    def forward_passes(self) -> int:
        """Forward passes the device ran (final attribute if finished, else the last step's)."""
        if self.finished:
            return int(self.attrs.get("forward_passes", 0))
        return int(self.steps["forward_passes"][-1]) if len(self.steps) else 0

    @property
    def weights_crc(self) -> int | None:
        """CRC-32 of the final device weights, or None if not recorded."""
        crc = self.attrs.get("weights_crc", -1)
        return int(crc) if self.finished and crc >= 0 else None

    def step_samples(self, i: int) -> np.ndarray:
        """The sample rows of the i-th step row."""
        row = self.steps[i]
        start = int(row["sample_start"])
        return self.samples[start : start + int(row["q"])]

    def loss_curve(self) -> tuple[np.ndarray, np.ndarray]:
        """(cumulative forward passes, mean step loss in nats), one point per step."""
        return self.steps["forward_passes"].copy(), self.steps["loss"].copy()

    def accuracy_curve(self, split: str = "test") -> tuple[np.ndarray, np.ndarray]:
        """(forward passes, accuracy) of the evaluations on ``split``."""
        rows = self.evals[self.evals["split"] == split]
        return rows["forward_passes"].copy(), rows["accuracy"].copy()

    def timing_summary(self) -> dict[str, dict[str, Any]]:
        """Per command: count, source, p50/p90/p99/mean seconds (source instr: instructions).

        Durations of different sources are never pooled: if a command was timed by more than
        one source, each gets its own entry keyed 'COMMAND@source'.
        """
        out: dict[str, dict[str, Any]] = {}
        t = self.timing
        for cmd in dict.fromkeys(t["command"].tolist()):
            rows = t[t["command"] == cmd]
            sources = list(dict.fromkeys(rows["source"].tolist()))
            for src in sources:
                d = rows["duration_s"][rows["source"] == src]
                key = cmd if len(sources) == 1 else f"{cmd}@{src}"
                out[key] = {"count": len(d), "source": src, **_quantiles(d)}
        return out

    def timing_percentiles(
        self, percentiles: tuple[float, ...] = (50, 90, 99)
    ) -> dict[tuple[str, str], dict[str, float]]:
        """Per (command, source): count, mean, min, max and the given percentiles, in seconds
        (source instr: executed instructions, a count).

        Keys are always (command, source): durations measured by the device, the cost model
        and the host wall clock are never pooled. ``{("PROBE", "device"): {"p99": ...}}``.
        """
        out: dict[tuple[str, str], dict[str, float]] = {}
        t = self.timing
        for cmd, src in dict.fromkeys(
            zip(t["command"].tolist(), t["source"].tolist(), strict=True)
        ):
            d = t["duration_s"][(t["command"] == cmd) & (t["source"] == src)]
            row = {
                "count": len(d),
                "mean": float(d.mean()),
                "min": float(d.min()),
                "max": float(d.max()),
            }
            for p, v in zip(percentiles, np.percentile(d, percentiles), strict=True):
                row[f"p{p:g}"] = float(v)
            out[(cmd, src)] = row
        return out

    # ---------------------------------------------------------------- final and "at" values

    @property
    def final(self) -> Final:
        """The run's final values (see Final)."""
        tests = self.evals[self.evals["split"] == "test"]
        last_loss = float(tests["loss"][-1]) if len(tests) else None
        n = min(len(self.steps), FINAL_LOSS_WINDOW)
        return Final(
            status=self.status,
            finished=self.finished,
            accuracy=self.final_accuracy,
            loss=last_loss,
            train_loss=float(self.steps["loss"][-n:].mean()) if n else None,
            forward_passes=self.forward_passes,
            steps=self.n_steps,
            q=int(self.steps["q"][-1]) if n else None,
            weights_crc=self.weights_crc,
        )

    def at(self, forward_passes: int) -> Snapshot:
        """The run as it stood after ``forward_passes`` forward passes: the last step and the
        last test evaluation at or before that count (None where there is none)."""
        fp = self.steps["forward_passes"]
        i = int(np.searchsorted(fp, forward_passes, side="right")) - 1
        tests = self.evals[self.evals["split"] == "test"]
        j = int(np.searchsorted(tests["forward_passes"], forward_passes, side="right")) - 1
        return Snapshot(
            requested=int(forward_passes),
            forward_passes=int(fp[i]) if i >= 0 else 0,
            step=int(self.steps["step"][i]) if i >= 0 else None,
            q=int(self.steps["q"][i]) if i >= 0 else None,
            loss=float(self.steps["loss"][i]) if i >= 0 else None,
            accuracy=float(tests["accuracy"][j]) if j >= 0 else None,
            eval_loss=float(tests["loss"][j]) if j >= 0 else None,
            eval_forward_passes=int(tests["forward_passes"][j]) if j >= 0 else None,
        )

    def accuracy_at(self, forward_passes: int, split: str = "test") -> float | None:
        """Accuracy of the last ``split`` evaluation at or before ``forward_passes``."""
        rows = self.evals[self.evals["split"] == split]
        j = int(np.searchsorted(rows["forward_passes"], forward_passes, side="right")) - 1
        return float(rows["accuracy"][j]) if j >= 0 else None

    def event_counts(self) -> dict[str, int]:
        """How many events of each kind (retry, resync, reset, fault, ...) the run recorded."""
        return dict(Counter(self.events["kind"].tolist()))

    def updates(self) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """(step, seeds as u32, coefficients as i32) of every whole step, in order: what the
        device applied, and what replay and a resumed run need."""
        seeds = self.samples["seed"].astype(np.uint32)
        coeffs = self.samples["coeff"].astype(np.int32)
        for row in self.steps:
            start, q = int(row["sample_start"]), int(row["q"])
            yield int(row["step"]), seeds[start : start + q], coeffs[start : start + q]

    def resume_state(self) -> ResumeState:
        """Where an interrupted run stands on disk (see docs/trace-format.md, "Resuming")."""
        tests = self.evals[self.evals["split"] == "test"]
        last = self.steps[-1] if len(self.steps) else None
        return ResumeState(
            run_id=self.run_id,
            status=self.status,
            resumable=not self.finished or self.status in S.RESUMABLE_STATUSES,
            steps=self.n_steps,
            next_step=int(last["step"]) + 1 if last is not None else 0,
            forward_passes=int(last["forward_passes"]) if last is not None else 0,
            last_eval_forward_passes=int(tests["forward_passes"][-1]) if len(tests) else None,
        )

    def to_dataframe(self, table: str = "steps") -> Any:
        """One table as a pandas DataFrame (pandas is optional: only this method needs it)."""
        if table not in S.DATASETS:
            raise TraceError(f"no table {table!r} in a trace", f"use one of {list(S.DATASETS)}")
        try:
            import pandas as pd
        except ImportError:
            raise TraceError(
                "to_dataframe() needs pandas, which is not installed",
                "pip install pandas, or use the numpy arrays (trace.steps, ...)",
            ) from None
        arr = getattr(self, table)
        return pd.DataFrame({name: arr[name] for name in arr.dtype.names})

    def summary(self) -> dict[str, Any]:
        """The headline numbers of the run, as plain Python values."""
        final = self.final
        return {
            "path": str(self.path),
            "run_id": self.run_id,
            "status": self.status,
            "finished": self.finished,
            "backend": self.backend,
            "model": self.attrs.get("model"),
            "dataset": self.attrs.get("dataset"),
            "seed": self.attrs.get("seed"),
            "scheduler": self.config.get("scheduler"),
            "final_accuracy": self.final_accuracy,
            "final_loss": final.loss,
            "train_loss": final.train_loss,
            "forward_passes": self.forward_passes,
            "steps": self.n_steps,
            "weights_crc": self.weights_crc,
            "device_id": self.attrs.get("device_id"),
            "firmware": self.attrs.get("firmware"),
            "model_hash": self.attrs.get("model_hash"),
            "git_revision": self.attrs.get("git_revision"),
            "events": self.event_counts(),
            "start_time": self.attrs.get("start_time"),
            "end_time": self.attrs.get("end_time") or None,
            "writer": None if self.writer_alive is None else _WRITER[self.writer_alive],
            "error": self.error,
        }

    @property
    def error(self) -> str | None:
        """The text of the run's last 'error' event (what ended a failed run), None if none."""
        errors = self.events["detail"][self.events["kind"] == "error"]
        return str(errors[-1]) if len(errors) else None


#: Trace.summary()["writer"] of an unfinished run: its writer holds the file, or is gone.
_WRITER = {True: "alive", False: "gone"}

#: Final.train_loss is the mean step loss over this many last steps (step losses are noisy).
FINAL_LOSS_WINDOW = 50


@dataclass(frozen=True)
class Final:
    """A run's final values. accuracy: fraction; loss, train_loss: nats."""

    status: str
    finished: bool
    accuracy: float | None  # recorded final test accuracy (else the last test evaluation)
    loss: float | None  # loss of the last test evaluation
    train_loss: float | None  # mean step loss over the last FINAL_LOSS_WINDOW steps
    forward_passes: int
    steps: int
    q: int | None  # q of the last step
    weights_crc: int | None  # CRC-32 of the device's final weights, None if not recorded


@dataclass(frozen=True)
class Snapshot:
    """Trace.at(n): the last step and the last test evaluation at or before n forward passes."""

    requested: int
    forward_passes: int  # of that step (<= requested; 0 before the first step)
    step: int | None
    q: int | None
    loss: float | None  # that step's mean loss (nats)
    accuracy: float | None  # that evaluation's accuracy (fraction)
    eval_loss: float | None
    eval_forward_passes: int | None


@dataclass(frozen=True)
class ResumeState:
    """What a resumed run continues from: whole steps on disk only."""

    run_id: str
    status: str
    resumable: bool  # False once the run is complete (interrupted and failed runs resume)
    steps: int  # step rows on disk
    next_step: int  # the step number to continue with
    forward_passes: int  # cumulative, after the last step on disk
    last_eval_forward_passes: int | None


def open_runs(path: str | Path) -> list[Trace]:
    """Every run of a trace file, in order."""
    return [Trace.open(path, rid) for rid in list_runs(path)]


# ---------------------------------------------------------------- following a live run


@dataclass
class Update:
    """What Follower.poll() saw: the run's attributes and the rows new since the last poll."""

    run_id: str
    attrs: dict[str, Any]
    steps: np.ndarray
    evals: np.ndarray
    events: np.ndarray
    total_steps: int

    @property
    def finished(self) -> bool:
        return bool(self.attrs.get("finished", False))

    @property
    def status(self) -> str:
        return str(self.attrs.get("status", "running"))


class Follower:
    """Reads a run's new rows as a writer appends them (SWMR): ``poll()`` reopens the file,
    so it also sees the gzip'd copy that replaces the file when the writer closes."""

    def __init__(self, path: str | Path, run: str | int | None = None) -> None:
        self.path = Path(path)
        self.run = run
        self.run_id: str | None = None
        self._n = {"steps": 0, "evals": 0, "events": 0}

    def poll(self) -> Update:
        with _open_read(self.path) as f:
            if self.run_id is None:
                self.run_id = pick_run(self.path, _run_ids(f), self.run)
            try:
                g = f[S.RUNS_GROUP][self.run_id]
                attrs = readable_attrs(g)
                new = {}
                for name in self._n:
                    ds = g[name]
                    n = ds.shape[0]
                    if name == "events" and event_text.has_byte_log(ds):
                        new[name] = event_text.read_rows(g, self._n[name], n)
                        n = self._n[name] + len(new[name])  # a text not on disk yet: later
                    elif n > self._n[name]:
                        new[name] = decode_rows(ds[self._n[name] : n])
                    else:
                        new[name] = np.empty(0, str_dtype(S.ROW_DTYPES[name]))
                    self._n[name] = max(self._n[name], n)
                new["steps"] = _current_steps(new["steps"])
            except (OSError, KeyError, ValueError, RuntimeError) as exc:
                raise TraceError(
                    f"{self.path} run {self.run_id} cannot be read ({exc})", FIX_CORRUPT
                ) from None
        return Update(
            self.run_id, attrs, new["steps"], new["evals"], new["events"], self._n["steps"]
        )
