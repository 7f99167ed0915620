"""TraceWriter: append one run's records to an HDF5 trace, buffered, flushed in blocks, SWMR.

Rows are kept in Python lists and written as numpy record blocks every ``flush_rows`` steps or
``flush_interval_s`` seconds (checked on every append), then ``h5py.File.flush()`` makes them
durable: a ``kill -9`` leaves a file that holds every row up to the last flush.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as _dt
import json
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import h5py
import numpy as np
from h5py import h5s, h5t

from hilbench import __version__ as _HILBENCH_VERSION
from hilbench.errors import TraceError
from hilbench.trace import schema as S
from hilbench.trace.reader import check_root, open_error

AttrValue = str | int | float | bool

_I32 = (-(2**31), 2**31 - 1)
_U32 = (0, 2**32 - 1)
_I64 = (-(2**63), 2**63 - 1)


def utc_now() -> str:
    """The current time as ISO 8601 UTC, e.g. 2026-01-31T12:00:00.123Z."""
    now = _dt.datetime.now(_dt.UTC)
    return now.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _attr_value(key: str, value: object) -> AttrValue:
    """A run attribute as a plain HDF5-storable scalar, or a TraceError."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        if not _I64[0] <= int(value) <= _I64[1]:
            raise TraceError(
                f"run attribute {key!r} = {value} does not fit a 64-bit integer",
                "store it as a string",
            )
        return int(value)
    if isinstance(value, float | np.floating):
        return float(value)
    if isinstance(value, str):
        return value
    raise TraceError(
        f"run attribute {key!r} has type {type(value).__name__}; "
        "trace attributes are str, int, float or bool",
        "convert it (or put structured settings in the config dict)",
    )


def _json_default(obj: object) -> object:
    if isinstance(obj, np.generic | np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def _config_json(config: Mapping[str, Any]) -> str:
    try:
        return json.dumps(dict(config), sort_keys=True, default=_json_default)
    except (TypeError, ValueError) as exc:
        raise TraceError(
            f"the run config cannot be stored as JSON ({exc})",
            "keep the config to str/int/float/bool/list/dict values",
        ) from None


def _int_column(values: Sequence[Any], lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Values as int64 and a mask of those that are not integers in [lo, hi]."""
    arr = np.asarray(values) if len(values) else np.zeros(0, np.int64)
    if arr.dtype.kind in "iub" and arr.ndim == 1:
        bad = arr > np.uint64(hi) if arr.dtype == np.uint64 else (arr < lo) | (arr > hi)
        return np.where(bad, 0, arr).astype(np.int64), bad
    ok = [isinstance(v, int | np.integer) and lo <= int(v) <= hi for v in values]
    bad = ~np.asarray(ok, dtype=bool)
    out = np.array([int(v) if k else 0 for v, k in zip(values, ok, strict=True)], np.int64)
    return out, bad


def _float_column(values: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Values as float64 and a mask of those that are not real numbers."""
    try:
        arr = np.asarray(values, dtype=np.float64)
        if arr.ndim == 1:
            return arr, np.zeros(len(arr), bool)
    except (TypeError, ValueError):
        pass
    ok = [isinstance(v, int | float | np.integer | np.floating) for v in values]
    out = np.array([float(v) if k else 0.0 for v, k in zip(values, ok, strict=True)])
    return out, ~np.asarray(ok, dtype=bool)


def _short_ascii(value: object, what: str, width: int) -> str:
    if not isinstance(value, str) or not value.isascii() or len(value) > width:
        raise TraceError(
            f"{what} must be an ASCII string of at most {width} characters, got {value!r}",
            f"use a short name such as the ones in docs/trace-format.md ({what})",
        )
    return value


class TraceWriter:
    """Appends one run (``/runs/<run_id>``) to a hilbench trace file. Make one with create()."""

    def __init__(
        self,
        file: h5py.File,
        group: h5py.Group,
        path: Path,
        flush_rows: int,
        flush_interval_s: float,
    ) -> None:
        self._f = file
        self._g = group
        self.path = path
        self.run_id = group.name.rsplit("/", 1)[-1]
        self._ds = {name: group[name] for name in S.DATASETS}
        # Tables whose file type is byte-identical to the numpy record layout are written
        # without HDF5's (slow) compound conversion.
        self._mtypes = {}
        for name, ds in self._ds.items():
            ftype = ds.id.get_type()
            if ds.dtype.hasobject:
                continue
            if ftype.get_size() == ds.dtype.itemsize and ftype == h5t.py_create(S.DATASETS[name]):
                self._mtypes[name] = ftype
        self._flush_rows = max(1, int(flush_rows))
        self._other_rows = 4 * self._flush_rows
        self._interval = float(flush_interval_s)
        self._deadline = time.monotonic() + self._interval
        # buffered rows
        self._st: list[tuple[Any, ...]] = []
        self._seed: list[Any] = []
        self._lp: list[Any] = []
        self._lm: list[Any] = []
        self._grad: list[Any] = []
        self._coeff: list[Any] = []
        self._ev: list[tuple[Any, ...]] = []
        self._tm: list[tuple[Any, ...]] = []
        self._evt: list[tuple[Any, ...]] = []
        # rows on disk
        self._n = dict.fromkeys(S.DATASETS, 0)
        self._last_fp = 0
        self._last_test_acc: float | None = None
        self._finished = False
        self._closed = False
        atexit.register(self._at_exit)

    # ---------------------------------------------------------------- creation

    @classmethod
    def create(
        cls,
        path: str | Path,
        run_attrs: Mapping[str, object],
        config: Mapping[str, Any],
        *,
        model_blob: bytes | None = None,
        flush_rows: int = 256,
        flush_interval_s: float = 1.0,
        compress: bool = False,
    ) -> TraceWriter:
        """Start a new run in ``path`` (created if absent; else a new run is appended).

        ``run_attrs`` needs REQUIRED_RUN_ATTRS; hilbench_version, start_time and git_revision
        default. ``config`` is stored as JSON in ``config_json``. ``model_blob`` (the exact
        model bytes sent to the device) is stored for replay.
        """
        path = Path(path)
        attrs = cls._validate_attrs(run_attrs)
        attrs["config_json"] = _config_json(config)
        f = cls._open_file(path)
        try:
            runs = f.require_group(S.RUNS_GROUP)
            numbers = [int(k) for k in runs if k.isdigit()]
            rid = S.run_id(max(numbers) + 1 if numbers else 0)
            g = runs.create_group(rid)
            for key, value in {**attrs, **S.FINAL_ATTR_PLACEHOLDERS}.items():
                g.attrs[key] = value
            for name, dtype in S.DATASETS.items():
                ds = g.create_dataset(
                    name,
                    shape=(0,),
                    maxshape=(None,),
                    dtype=dtype,
                    chunks=(S.CHUNK_ROWS[name],),
                    **(S.GZIP if compress else {}),
                )
                ds.attrs["units"] = json.dumps(S.UNITS[name])
                ds.attrs["description"] = S.DESCRIPTIONS[name]
            if model_blob is not None:
                cls._write_blob(g, bytes(model_blob))
            f.flush()
            f.swmr_mode = True
        except OSError as exc:
            f.close()
            raise TraceError(
                f"could not write a new run to {path} ({exc})",
                "check free disk space and write permission",
            ) from None
        return cls(f, g, path, flush_rows, flush_interval_s)

    @staticmethod
    def _validate_attrs(run_attrs: Mapping[str, object]) -> dict[str, AttrValue]:
        bad_keys = [k for k in run_attrs if not isinstance(k, str) or not k]
        if bad_keys:
            raise TraceError(f"run attribute names must be non-empty strings, got {bad_keys!r}",
                             "use str keys")
        reserved = sorted(set(run_attrs) & set(S.RESERVED_RUN_ATTRS))
        if reserved:
            raise TraceError(
                f"run attributes {reserved} are written by the trace writer itself",
                "pass the config as the config argument and final values to finish()",
            )
        missing = [k for k in S.REQUIRED_RUN_ATTRS if k not in run_attrs]
        if missing:
            raise TraceError(
                f"a trace run needs the attributes {missing}",
                f"pass them in run_attrs (required: {', '.join(S.REQUIRED_RUN_ATTRS)})",
            )
        attrs = {k: _attr_value(k, v) for k, v in run_attrs.items()}
        attrs.setdefault("hilbench_version", _HILBENCH_VERSION)
        attrs.setdefault("start_time", utc_now())
        attrs.setdefault("git_revision", "")
        return attrs

    @staticmethod
    def _open_file(path: Path) -> h5py.File:
        """Open an existing hilbench trace for appending, or create a new one."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise TraceError(
                f"cannot create the directory {path.parent} for trace {path} "
                f"({exc.strerror or exc})",
                "choose a writable location for the trace",
            ) from None
        if path.is_dir():
            raise TraceError(f"trace path {path} is a directory", "give a file name, e.g. run.h5")
        if path.exists():
            if not h5py.is_hdf5(path):
                raise TraceError(
                    f"{path} exists and is not an HDF5 file; refusing to overwrite it",
                    "choose another trace path or move the file away",
                )
            try:
                f = h5py.File(path, "r+", libver="latest")
            except OSError as exc:
                raise open_error(path, exc, writing=True) from None
            try:
                check_root(f, path)
            except TraceError as err:
                f.close()
                raise TraceError(
                    f"cannot append a run: {err.cause}",
                    "write the trace to a new file",
                ) from None
            return f
        try:
            f = h5py.File(path, "w-", libver="latest")
            f.attrs["format"] = S.FORMAT_NAME
            f.attrs["format_version"] = S.FORMAT_VERSION
        except OSError as exc:
            raise open_error(path, exc, writing=True) from None
        return f

    @staticmethod
    def _write_blob(g: h5py.Group, blob: bytes) -> None:
        data = np.frombuffer(blob, dtype=np.uint8)
        kw: dict[str, Any] = {"compression": "gzip", "compression_opts": S.GZIP_LEVEL}
        ds = g.create_dataset("model_blob", data=data, **(kw if len(data) else {}))
        ds.attrs["description"] = S.DESCRIPTIONS["model_blob"]
        ds.attrs["units"] = json.dumps({"": "byte"})
        ds.attrs["size"] = len(blob)

    # ---------------------------------------------------------------- appending

    def append_step(
        self,
        step: int,
        q: int,
        seeds: Sequence[int],
        loss_plus: Sequence[int],
        loss_minus: Sequence[int],
        grads: Sequence[float],
        coeffs: Sequence[int],
        lr: float,
        eps: int,
        batch_seed: int,
        loss: float,
        forward_passes: int,
        fresh_words: int,
    ) -> None:
        """Buffer one ZO step and its q samples (values are range-checked on flush)."""
        if self._closed:
            self._raise_closed()
        if not (len(seeds) == len(loss_plus) == len(loss_minus) == len(grads) == len(coeffs)
                == q):
            raise TraceError(
                f"step {step}: q = {q} but got {len(seeds)} seeds, {len(loss_plus)} L+, "
                f"{len(loss_minus)} L-, {len(grads)} grads, {len(coeffs)} coeffs",
                "pass one value per perturbation sample in each sequence",
            )
        self._seed.extend(seeds)
        self._lp.extend(loss_plus)
        self._lm.extend(loss_minus)
        self._grad.extend(grads)
        self._coeff.extend(coeffs)
        self._st.append((step, q, batch_seed, eps, lr, loss, forward_passes, fresh_words))
        if len(self._st) >= self._flush_rows or time.monotonic() >= self._deadline:
            self.flush()

    def append_eval(
        self, step: int, forward_passes: int, accuracy: float, loss: float, split: str = "test"
    ) -> None:
        """Buffer one evaluation (accuracy as a fraction, loss in nats)."""
        if self._closed:
            self._raise_closed()
        _short_ascii(split, "eval split", 8)
        self._ev.append((step, forward_passes, accuracy, loss, split))
        self._maybe_flush(self._ev)

    def append_timing(self, step: int, command: str, duration_s: float, source: str) -> None:
        """Buffer one command duration; ``source`` is 'device', 'modeled' or 'host'."""
        if self._closed:
            self._raise_closed()
        if source not in S.TIMING_SOURCES:
            raise TraceError(
                f"timing source {source!r} for {command!r} is not one of {S.TIMING_SOURCES}",
                "say who measured it: device (cycle counter), modeled (cost model) or host "
                "(wall clock)",
            )
        _short_ascii(command, "command name", 16)
        try:
            duration = float(duration_s)
        except (TypeError, ValueError):
            duration = math.nan
        if not duration >= 0.0 or math.isinf(duration):
            raise TraceError(
                f"duration of {command!r} at step {step} is {duration_s!r}",
                "pass a finite, non-negative number of seconds",
            )
        self._tm.append((step, command, duration, source))
        self._maybe_flush(self._tm)

    def append_event(self, step: int, kind: str, detail: str = "") -> None:
        """Buffer one event (retry, resync, reset, fault, note...) stamped with the Unix time."""
        if self._closed:
            self._raise_closed()
        _short_ascii(kind, "event kind", 16)
        if not isinstance(detail, str):
            raise TraceError(f"event detail must be a str, got {type(detail).__name__}",
                             "format the detail as text")
        self._evt.append((step, time.time(), kind, detail))
        self._maybe_flush(self._evt)

    def _maybe_flush(self, rows: list[Any]) -> None:
        if len(rows) >= self._other_rows or time.monotonic() >= self._deadline:
            self.flush()

    # ---------------------------------------------------------------- writing

    @property
    def pending(self) -> int:
        """Rows buffered in memory, not yet on disk."""
        return len(self._st) + len(self._ev) + len(self._tm) + len(self._evt)

    @property
    def steps_written(self) -> int:
        """Step rows on disk."""
        return self._n["steps"]

    def flush(self) -> None:
        """Write every buffered row and make it durable (h5py file flush).

        Steps with out-of-range values (e.g. a seed that is not u32) are dropped and reported
        with a TraceError after the valid rows are written.
        """
        if self._closed:
            self._raise_closed()
        self._deadline = time.monotonic() + self._interval
        if not self.pending:
            return
        steps, samples, problem = self._step_block()
        evals = self._block(self._ev, S.EVALS_DTYPE, "eval")
        timing = self._block(self._tm, S.TIMING_DTYPE, "timing")
        events = self._block(self._evt, S.EVENTS_DTYPE, "event")
        try:
            # samples before steps: a step row never points past the samples on disk
            for name, arr in (("samples", samples), ("steps", steps), ("evals", evals),
                              ("timing", timing), ("events", events)):
                self._write(name, arr)
            self._f.flush()
        except OSError as exc:
            raise TraceError(
                f"could not write to trace {self.path} ({exc})",
                "check free disk space; the unwritten rows stay buffered for the next flush",
            ) from None
        for name, arr in (("samples", samples), ("steps", steps), ("evals", evals),
                          ("timing", timing), ("events", events)):
            self._n[name] += len(arr)
        if len(steps):
            self._last_fp = int(steps["forward_passes"][-1])
        tests = evals[evals["split"] == b"test"]
        if len(tests):
            self._last_test_acc = float(tests["accuracy"][-1])
        for buf in (self._st, self._seed, self._lp, self._lm, self._grad, self._coeff,
                    self._ev, self._tm, self._evt):
            buf.clear()
        if problem:
            raise problem

    def _write(self, name: str, arr: np.ndarray) -> None:
        """Append a record block at the end of a table (low-level h5py: 3x faster)."""
        if not len(arr):
            return
        ds = self._ds[name]
        n0 = self._n[name]
        ds.id.set_extent((n0 + len(arr),))
        mtype = self._mtypes.get(name)
        if mtype is None:  # vlen strings: let h5py convert
            ds[n0:] = arr
            return
        fspace = ds.id.get_space()
        fspace.select_hyperslab((n0,), (len(arr),))
        ds.id.write(h5s.create_simple((len(arr),)), fspace, arr, mtype=mtype)

    def _step_block(self) -> tuple[np.ndarray, np.ndarray, TraceError | None]:
        """The buffered steps and samples as record arrays, without rows that do not fit."""
        cols = list(zip(*self._st, strict=True)) if self._st else [()] * 8
        n = len(self._st)
        step, b_step = _int_column(cols[0], *_I64)
        q, b_q = _int_column(cols[1], 0, _I32[1])
        batch_seed, b_bs = _int_column(cols[2], *_U32)
        eps, b_eps = _int_column(cols[3], *_I32)
        lr, b_lr = _float_column(cols[4])
        loss, b_loss = _float_column(cols[5])
        fp, b_fp = _int_column(cols[6], *_I64)
        fw, b_fw = _int_column(cols[7], *_I64)
        seed, b_seed = _int_column(self._seed, *_U32)
        lp, b_lp = _int_column(self._lp, *_I32)
        lm, b_lm = _int_column(self._lm, *_I32)
        grad, b_grad = _float_column(self._grad)
        coeff, b_coeff = _int_column(self._coeff, *_I32)

        owner = np.repeat(np.arange(n), q)  # q was checked against the lengths on append
        bad = b_step | b_q | b_bs | b_eps | b_lr | b_loss | b_fp | b_fw
        problem = None
        sample_checks = (("seed", b_seed, self._seed, "u32"), ("loss_plus", b_lp, self._lp, "i32"),
                         ("loss_minus", b_lm, self._lm, "i32"), ("grad", b_grad, self._grad,
                         "f8"), ("coeff", b_coeff, self._coeff, "i32"))
        for _, mask, _, _ in sample_checks:
            np.logical_or.at(bad, owner[mask], True)
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            step_checks = (("step", b_step, "i64"), ("q", b_q, "i32 >= 0"),
                           ("batch_seed", b_bs, "u32"), ("eps", b_eps, "i32"), ("lr", b_lr, "f8"),
                           ("loss", b_loss, "f8"), ("forward_passes", b_fp, "i64"),
                           ("fresh_words", b_fw, "i64"))
            names = ["step", "q", "batch_seed", "eps", "lr", "loss", "forward_passes",
                     "fresh_words"]
            what = ""
            for name, mask, kind in step_checks:
                if mask[first]:
                    what = f"{name} = {self._st[first][names.index(name)]!r} is not {kind}"
                    break
            else:
                for name, mask, values, kind in sample_checks:
                    hits = np.flatnonzero(mask & (owner == first))
                    if len(hits):
                        what = f"{name} = {values[int(hits[0])]!r} is not {kind}"
                        break
            problem = TraceError(
                f"step {self._st[first][0]!r} not recorded: {what}"
                + (f" ({int(bad.sum())} bad steps in this block)" if bad.sum() > 1 else ""),
                "pass the values the device returned: u32 seeds, i32 Q16 losses and "
                "coefficients, finite floats",
            )
            keep = ~bad
            skeep = keep[owner]
        else:
            keep = slice(None)
            skeep = slice(None)

        q_kept = q[keep]
        steps = np.empty(len(q_kept), S.STEPS_DTYPE)
        steps["step"] = step[keep]
        steps["q"] = q_kept
        starts = np.cumsum(q_kept) - q_kept + self._n["samples"]
        steps["sample_start"] = starts
        steps["batch_seed"] = batch_seed[keep]
        steps["eps"] = eps[keep]
        steps["lr"] = lr[keep]
        steps["loss"] = loss[keep]
        steps["forward_passes"] = fp[keep]
        steps["fresh_words"] = fw[keep]

        samples = np.empty(int(q_kept.sum()), S.SAMPLES_DTYPE)
        samples["step"] = step[owner][skeep]
        samples["seed"] = seed[skeep]
        samples["loss_plus"] = lp[skeep]
        samples["loss_minus"] = lm[skeep]
        samples["grad"] = grad[skeep]
        samples["coeff"] = coeff[skeep]
        return steps, samples, problem

    @staticmethod
    def _block(rows: list[tuple[Any, ...]], dtype: np.dtype, what: str) -> np.ndarray:
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

    # ---------------------------------------------------------------- attributes

    def set_attrs(self, **attrs: object) -> None:
        """Set or overwrite run attributes now (e.g. initial_weights_crc), durable at once."""
        if self._closed:
            self._raise_closed()
        reserved = sorted(set(attrs) & set(S.RESERVED_RUN_ATTRS))
        if reserved:
            raise TraceError(f"run attributes {reserved} are written by the trace writer itself",
                             "pass final values to finish()")
        self._write_attrs({k: _attr_value(k, v) for k, v in attrs.items()})

    def _write_attrs(self, attrs: Mapping[str, AttrValue]) -> None:
        try:
            for key, value in attrs.items():
                if key in self._g.attrs:
                    self._g.attrs.modify(key, value)
                else:
                    self._g.attrs[key] = value
            self._f.flush()
        except OSError as exc:
            raise TraceError(f"could not write run attributes to {self.path} ({exc})",
                             "check free disk space") from None

    def finish(self, status: str = "complete", **final_attrs: object) -> None:
        """Flush and record the end of the run: finished, status, end_time and final values.

        ``final_attrs`` may give final_accuracy, weights_crc (u32), forward_passes, steps and
        any extra attribute; by default steps/forward_passes come from the recorded steps and
        final_accuracy from the last 'test' evaluation.
        """
        if self._closed:
            self._raise_closed()
        if self._finished:
            raise TraceError(f"run {self.run_id} of {self.path} is already finished",
                             "call finish() once")
        if status not in S.STATUSES:
            raise TraceError(f"run status {status!r} is not one of {S.STATUSES}",
                             "use complete, interrupted or failed")
        if "finished" in final_attrs or "status" in final_attrs or "end_time" in final_attrs:
            raise TraceError("finished, status and end_time are set by finish() itself",
                             "pass only final values such as final_accuracy and weights_crc")
        problem = None
        try:
            self.flush()
        except TraceError as exc:  # bad rows were dropped; the rest is written
            if self.pending:
                raise
            problem = exc
        acc = self._last_test_acc if self._last_test_acc is not None else math.nan
        values = {
            "final_accuracy": acc,
            "forward_passes": self._last_fp,
            "steps": self._n["steps"],
            "weights_crc": -1,
        }
        values.update({k: _attr_value(k, v) for k, v in final_attrs.items()})
        crc = values["weights_crc"]
        if not isinstance(crc, int) or not -1 <= crc <= _U32[1]:
            raise TraceError(f"weights_crc = {crc!r} is not a u32", "pass the CRC-32 as an int")
        values.update(finished=True, status=status, end_time=utc_now())
        self._write_attrs(values)
        self._finished = True
        if problem:
            raise problem

    # ---------------------------------------------------------------- closing

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self, status: str = "interrupted") -> None:
        """Flush and close; a run not finished yet is finished with ``status`` first."""
        if self._closed:
            return
        try:
            if not self._finished:
                self.finish(status)
        finally:
            self._closed = True
            atexit.unregister(self._at_exit)
            with contextlib.suppress(OSError):
                self._f.close()

    def _at_exit(self) -> None:
        with contextlib.suppress(Exception):  # interpreter is exiting: best effort
            self.close("interrupted")

    def _raise_closed(self) -> None:
        raise TraceError(f"the trace writer for {self.path} is closed",
                         "create a new TraceWriter to record another run")

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.close("complete")
            return
        status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
        try:
            self.close(status)
        except Exception as err:  # keep the original exception; say what else went wrong
            exc.add_note(f"hilbench trace: could not finish {self.path}: {err}")
            self._closed = True
