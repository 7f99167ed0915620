"""TraceWriter: append one run's records to an HDF5 trace, buffered, flushed in blocks, SWMR.

Rows are kept in Python lists and written as numpy record blocks every ``flush_rows`` steps and
by a background thread every ``flush_interval_s`` seconds, each time followed by an HDF5 file
flush: a ``kill -9`` leaves a file that holds every row up to the last flush. When the writer
closes, the file is rewritten with gzip'd tables (``compact``) and atomically replaced.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import math
import os
import signal
import threading
import time
import warnings
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
from hilbench.trace.reader import Trace, _decode, check_root, open_error

try:
    import fcntl
except ImportError:  # Windows: no liveness lock, no automatic recovery
    fcntl = None  # type: ignore[assignment]


class Terminated(KeyboardInterrupt):
    """Raised in the main thread by the SIGTERM handler a live TraceWriter installs.

    A KeyboardInterrupt, so everything that handles Ctrl-C (the writer's ``with`` block, the
    CLI) handles ``kill PID`` the same way: buffered rows are flushed and the run is closed
    with status "interrupted".
    """


class TraceWarning(UserWarning):
    """Something went wrong that left the trace valid (e.g. the gzip rewrite at close)."""


class TraceWriter:
    """Appends one run (``/runs/<run_id>``) to a hilbench trace. Make one with create()."""

    def __init__(
        self,
        file: h5py.File,
        group: h5py.Group,
        path: Path,
        flush_rows: int,
        flush_interval_s: float | None,
        lock_fd: int | None = None,
        compress: str = "close",
        handle_sigterm: bool = True,
    ) -> None:
        self._f = file
        self._g = group
        self.path = path
        self.run_id = group.name.rsplit("/", 1)[-1]
        self._ds = {name: group[name] for name in S.DATASETS}
        # A run resumed from format version 1 keeps its steps layout (no fresh_numbers).
        self._steps_dtype = steps_layout(self._ds["steps"])
        layouts = {**S.DATASETS, "steps": self._steps_dtype}
        # Tables whose file type is byte-identical to the numpy record layout are written
        # without HDF5's (slow) compound conversion.
        self._mtypes = {}
        for name, ds in self._ds.items():
            ftype = ds.id.get_type()
            if (
                not ds.dtype.hasobject
                and ftype.get_size() == ds.dtype.itemsize
                and ftype == h5t.py_create(layouts[name])
            ):
                self._mtypes[name] = ftype
        self._flush_rows = max(1, int(flush_rows))
        self._other_rows = 4 * self._flush_rows
        # buffered rows
        self._st: list[tuple[Any, ...]] = []
        self._seed: list[Any] = []
        self._lp: list[Any] = []
        self._lm: list[Any] = []
        self._grad: list[Any] = []
        self._coeff: list[Any] = []
        self._names_ok: set[tuple[str, str]] = set()  # timing (command, source) checked
        self._ev: list[tuple[Any, ...]] = []
        self._tm: list[tuple[Any, ...]] = []
        self._evt: list[tuple[Any, ...]] = []
        # rows on disk
        self._n = {name: int(ds.shape[0]) for name, ds in self._ds.items()}
        steps = self._ds["steps"]
        self._last_fp = int(steps[-1]["forward_passes"]) if self._n["steps"] else 0
        self._last_step = int(steps[-1]["step"]) if self._n["steps"] else None
        evals = self._ds["evals"][()]
        tests = evals["accuracy"][evals["split"] == b"test"]
        self._last_test_acc: float | None = float(tests[-1]) if len(tests) else None
        self._finished = False
        self._closed = False
        self._lock = threading.RLock()
        self._bg_error: TraceError | None = None
        self._compress = compress
        self._liveness_fd = lock_fd
        if lock_fd is not None:  # setup done: let readers and a compaction share the file
            fcntl.flock(lock_fd, fcntl.LOCK_SH)
        self._sigterm = handle_sigterm and _sigterm_acquire()
        atexit.register(self._at_exit)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if flush_interval_s is not None and flush_interval_s > 0:
            self._thread = threading.Thread(
                target=self._flush_loop,
                args=(float(flush_interval_s),),
                name=f"hilbench-trace-flush-{self.run_id}",
                daemon=True,
            )
            self._thread.start()

    # ---------------------------------------------------------------- creation

    @classmethod
    def create(
        cls,
        path: str | Path,
        run_attrs: Mapping[str, object],
        config: Mapping[str, Any],
        *,
        model_blob: bytes | None = None,
        flush_rows: int = 1024,
        flush_interval_s: float | None = 1.0,
        compress: bool | str = "close",
        handle_sigterm: bool = True,
    ) -> TraceWriter:
        """Start a new run in ``path`` (created if absent; else a new run is appended).

        ``run_attrs`` needs schema.REQUIRED_RUN_ATTRS; hilbench_version, start_time,
        git_revision, firmware_hash and split default. ``config`` is stored as JSON in
        ``config_json``. ``model_blob`` (the exact model bytes sent to the device) is stored
        for replay. ``compress``: "close" (default: gzip the tables by rewriting the file when
        the writer closes), "live" (or True: gzip while appending), "none" (or False); see
        docs/trace-format.md, "Compression". ``handle_sigterm``: while the writer is open, a
        SIGTERM raises ``Terminated`` (a KeyboardInterrupt) in the main thread, so the run is
        flushed and closed as "interrupted" instead of being cut off.
        """
        path = Path(path)
        mode = _compress_mode(compress)
        attrs = cls._validate_attrs(run_attrs)
        attrs["config_json"] = S.config_json(config)
        f, lock_fd = _open_for_append(path, create=True)
        try:
            if int(f.attrs["format_version"]) < S.FORMAT_VERSION:
                # a new run in an older file: its runs keep their layout, the file is now
                # the current version (an older reader would not know the new run's columns)
                f.attrs["format_version"] = S.FORMAT_VERSION
                f.attrs["written_by"] = f"hilbench {_HILBENCH_VERSION}"
            runs = f.require_group(S.RUNS_GROUP)
            numbers = [int(k) for k in runs if k.isdigit()]
            g = runs.create_group(S.run_id(max(numbers) + 1 if numbers else 0))
            for key, value in {**attrs, **S.FINAL_ATTR_PLACEHOLDERS}.items():
                g.attrs[key] = value
            for name, dtype in S.DATASETS.items():
                ds = g.create_dataset(
                    name,
                    shape=(0,),
                    maxshape=(None,),
                    dtype=dtype,
                    chunks=(S.CHUNK_ROWS[name],),
                    **(S.GZIP if mode == "live" else {}),
                )
                ds.attrs["units"] = json.dumps(S.UNITS[name])
                ds.attrs["description"] = S.DESCRIPTIONS[name]
            if model_blob is not None:
                _write_blob(g, bytes(model_blob))
            f.flush()
            f.swmr_mode = True
        except OSError as exc:
            f.close()
            _release(lock_fd)
            raise TraceError(
                f"could not write a new run to {path} ({exc})",
                "check free disk space and write permission",
            ) from None
        except BaseException:
            f.close()
            _release(lock_fd)
            raise
        return cls(f, g, path, flush_rows, flush_interval_s, lock_fd, mode, handle_sigterm)

    @classmethod
    def resume(
        cls,
        path: str | Path,
        run: str | int | None = None,
        *,
        flush_rows: int = 1024,
        flush_interval_s: float | None = 1.0,
        compress: bool | str = "close",
        handle_sigterm: bool = True,
    ) -> TraceWriter:
        """Reopen a run that did not complete (default: the last one) to append more steps.

        Works on a run whose writer was killed (status "running") and on one closed as
        "interrupted" (Ctrl-C, SIGTERM) or "failed": its final attributes go back to their
        placeholders until the next finish(). A "complete" run is refused. Sample rows beyond
        the last step on disk (a flush cut short) are dropped; an event 'resume' records where
        the run restarted.
        ``last_step``, ``forward_passes`` and ``steps_written`` say where to continue from.
        """
        path = Path(path)
        mode = _compress_mode(compress)
        if not path.exists():
            raise TraceError(f"no trace file at {path} to resume", "check the path")
        f, lock_fd = _open_for_append(path, create=False)
        try:
            ids = sorted(f.get(S.RUNS_GROUP, {}))
            rid = Trace._pick(path, ids, run)
            g = f[S.RUNS_GROUP][rid]
            finished = bool(g.attrs.get("finished", False))
            was = str(_decode(g.attrs.get("status", S.RUNNING)))
            if finished and was not in S.RESUMABLE_STATUSES:
                raise TraceError(
                    f"run {rid} of {path} is {was}; there is nothing to resume",
                    "start a new run with TraceWriter.create",
                )
            missing = [n for n in S.DATASETS if n not in g]
            if missing:
                raise TraceError(
                    f"run {rid} of {path} lacks the tables {missing}",
                    "start a new run with TraceWriter.create",
                )
            steps, samples = g["steps"], g["samples"]
            steps_layout(steps, f"cannot resume run {rid} of {path}")
            end = 0
            if steps.shape[0]:
                last = steps[-1]
                end = int(last["sample_start"]) + int(last["q"])
            if samples.shape[0] > end:
                samples.resize((end,))
            if finished:  # interrupted or failed: running again until the next finish()
                for key, value in S.FINAL_ATTR_PLACEHOLDERS.items():
                    g.attrs[key] = value
            f.flush()
            f.swmr_mode = True
        except (OSError, KeyError, ValueError) as exc:
            f.close()
            _release(lock_fd)
            raise TraceError(
                f"cannot resume run {run!r} of {path} ({exc})",
                "start a new run with TraceWriter.create",
            ) from None
        except BaseException:
            f.close()
            _release(lock_fd)
            raise
        w = cls(f, g, path, flush_rows, flush_interval_s, lock_fd, mode, handle_sigterm)
        step = w._last_step if w._last_step is not None else -1
        w.append_event(
            step, "resume", f"writer resumed with {w._n['steps']} steps on disk (run was {was})"
        )
        w.flush()
        return w

    @staticmethod
    def _validate_attrs(run_attrs: Mapping[str, object]) -> dict[str, S.AttrValue]:
        bad_keys = [k for k in run_attrs if not isinstance(k, str) or not k]
        if bad_keys:
            raise TraceError(
                f"run attribute names must be non-empty strings, got {bad_keys!r}", "use str keys"
            )
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
        attrs = {k: S.attr_value(k, v) for k, v in run_attrs.items()}
        attrs.setdefault("hilbench_version", _HILBENCH_VERSION)
        attrs.setdefault("start_time", S.utc_now())
        attrs.setdefault("git_revision", "")
        attrs.setdefault("firmware_hash", "")
        attrs.setdefault("split", "")
        return attrs

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
        fresh_numbers: int = S.NOT_RECORDED,
    ) -> None:
        """Buffer one ZO step and its q samples (values are range-checked on flush).

        ``fresh_words`` / ``fresh_numbers``: PRNG words and random numbers the device drew
        for this step; fresh_numbers defaults to -1 (not recorded), and is dropped when the
        run was resumed from a format version 1 trace (whose steps table has no such column).
        """
        if not (len(seeds) == len(loss_plus) == len(loss_minus) == len(grads) == len(coeffs) == q):
            raise TraceError(
                f"step {step}: q = {q} but got {len(seeds)} seeds, {len(loss_plus)} L+, "
                f"{len(loss_minus)} L-, {len(grads)} grads, {len(coeffs)} coeffs",
                "pass one value per perturbation sample in each sequence",
            )
        with self._lock:
            if self._closed or self._bg_error:
                self._raise_state()
            # Flat Python lists (numpy arrays go in as .tolist(): a copy, and the cheapest
            # way in and out of numpy); np.asarray turns them into columns at flush.
            n0 = len(self._seed)  # the five sample lists always have the same length
            try:
                self._seed.extend(seeds.tolist() if type(seeds) is np.ndarray else seeds)
                self._lp.extend(loss_plus.tolist() if type(loss_plus) is np.ndarray else loss_plus)
                self._lm.extend(
                    loss_minus.tolist() if type(loss_minus) is np.ndarray else loss_minus
                )
                self._grad.extend(grads.tolist() if type(grads) is np.ndarray else grads)
                self._coeff.extend(coeffs.tolist() if type(coeffs) is np.ndarray else coeffs)
            except BaseException:  # e.g. Ctrl-C mid-append: leave no half step behind
                for buf in (self._seed, self._lp, self._lm, self._grad, self._coeff):
                    del buf[n0:]
                raise
            self._st.append(
                (step, q, batch_seed, eps, lr, loss, forward_passes, fresh_words, fresh_numbers)
            )
            if len(self._st) >= self._flush_rows:
                self._flush()

    def append_eval(
        self, step: int, forward_passes: int, accuracy: float, loss: float, split: str = "test"
    ) -> None:
        """Buffer one evaluation (accuracy as a fraction, loss in nats)."""
        S.short_ascii(split, "eval split", 8)
        self._append(self._ev, (step, forward_passes, accuracy, loss, split))

    def append_timing(self, step: int, command: str, duration_s: float, source: str) -> None:
        """Buffer one command duration; ``source`` is 'device', 'modeled' or 'host' (seconds),
        or 'instr' (a count of executed instructions)."""
        self._append_timings(
            ((step, command, self._duration(step, command, duration_s, source), source),)
        )

    def append_command(
        self, step: int, command: str, host_s: float, device_s: float, source: str
    ) -> None:
        """A command's two durations at once: the host's round trip and the device's own."""
        self._append_timings(
            (
                (step, command, self._duration(step, command, host_s, "host"), "host"),
                (step, command, self._duration(step, command, device_s, source), source),
            )
        )

    def _duration(self, step: int, command: str, duration_s: float, source: str) -> float:
        if (command, source) not in self._names_ok:  # checked once per pair: appends are hot
            if source not in S.TIMING_SOURCES:
                raise TraceError(
                    f"timing source {source!r} for {command!r} is not one of {S.TIMING_SOURCES}",
                    "say who measured it: device (cycle counter), modeled (cost model), "
                    "host (wall clock) or instr (instructions QEMU executed)",
                )
            S.short_ascii(command, "command name", 16)
            self._names_ok.add((command, source))
        try:
            duration = float(duration_s)
        except (TypeError, ValueError):
            duration = math.nan
        if not 0.0 <= duration < math.inf:
            raise TraceError(
                f"duration of {command!r} at step {step} is {duration_s!r}",
                "pass a finite, non-negative number of seconds",
            )
        return duration

    def _append_timings(self, rows: tuple[tuple[int, str, float, str], ...]) -> None:
        with self._lock:
            if self._closed or self._bg_error:
                self._raise_state()
            self._tm.extend(rows)
            if len(self._tm) >= self._other_rows:
                self._flush()

    def append_event(self, step: int | None, kind: str, detail: str = "") -> None:
        """Buffer one event (retry, reset, injected, note... schema.EVENT_MEANINGS) stamped with
        the Unix time.

        ``step`` None means the step in progress (``current_step``). Thread-safe: the link
        layer may call it from any thread. See ``event()`` for the keyword form.
        """
        S.short_ascii(kind, "event kind", 16)
        if step is None:
            step = self.current_step
        if not isinstance(detail, str):
            raise TraceError(
                f"event detail must be a str, got {type(detail).__name__}",
                "format the detail as text",
            )
        self._append(self._evt, (step, time.time(), kind, detail))

    def event(self, kind: str, detail: str = "", *, step: int | None = None) -> None:
        """``append_event`` for callers that do not know the step (the link layer):
        ``writer.event("retry", "PROBE seq 12: no answer in 200 ms, attempt 2 of 3")``."""
        self.append_event(step, kind, detail)

    def _append(self, rows: list[tuple[Any, ...]], row: tuple[Any, ...]) -> None:
        with self._lock:
            if self._closed or self._bg_error:
                self._raise_state()
            rows.append(row)
            if len(rows) >= self._other_rows:
                self._flush()

    # ---------------------------------------------------------------- writing

    @property
    def pending(self) -> int:
        """Rows buffered in memory, not yet on disk."""
        return len(self._st) + len(self._ev) + len(self._tm) + len(self._evt)

    @property
    def steps_written(self) -> int:
        """Step rows on disk."""
        return self._n["steps"]

    @property
    def last_step(self) -> int | None:
        """The ``step`` of the last step appended (buffered or on disk), None before any."""
        with self._lock:
            if self._st:
                return int(self._st[-1][0])
            return self._last_step

    @property
    def current_step(self) -> int:
        """The step in progress: one past the last step appended (0 before any)."""
        last = self.last_step
        return 0 if last is None else last + 1

    @property
    def forward_passes(self) -> int:
        """Cumulative forward passes of the last step appended (0 before any)."""
        with self._lock:
            if self._st:
                return int(self._st[-1][6])
            return self._last_fp

    def flush(self) -> None:
        """Write every buffered row and make it durable (HDF5 file flush).

        Steps with out-of-range values (e.g. a seed that is not u32) are dropped and reported
        with a TraceError after the valid rows are written.
        """
        with self._lock:
            if self._closed or self._bg_error:
                self._raise_state()
            self._flush()

    def _flush_loop(self, interval: float) -> None:
        """Background thread: flush whatever is buffered every ``interval`` seconds."""
        while not self._stop.wait(interval):
            with self._lock:
                if self._closed or self._bg_error or not self.pending:
                    continue
                try:
                    self._flush()
                except TraceError as exc:  # raised again on the writer's next call
                    self._bg_error = exc

    def _flush(self) -> None:
        if not self.pending:
            return
        steps, samples, problem = self._step_block()
        evals = self._block(self._ev, S.EVALS_DTYPE, "eval")
        timing = self._block(self._tm, S.TIMING_DTYPE, "timing")
        events = self._block(self._evt, S.EVENTS_DTYPE, "event")
        # samples before steps: a step row never points past the samples on disk
        blocks = (
            ("samples", samples),
            ("steps", steps),
            ("evals", evals),
            ("timing", timing),
            ("events", events),
        )
        try:
            for name, arr in blocks:
                self._write(name, arr)
            self._f.flush()
        except OSError as exc:
            raise TraceError(
                f"could not write to trace {self.path} ({exc})",
                "check free disk space; the unwritten rows stay buffered for the next flush",
            ) from None
        for name, arr in blocks:
            self._n[name] += len(arr)
        if len(steps):
            self._last_fp = int(steps["forward_passes"][-1])
            self._last_step = int(steps["step"][-1])
        tests = evals[evals["split"] == b"test"]
        if len(tests):
            self._last_test_acc = float(tests["accuracy"][-1])
        for buf in (self._st, self._seed, self._lp, self._lm, self._grad, self._coeff):
            buf.clear()
        for buf in (self._ev, self._tm, self._evt):
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
        """The buffered steps and samples as record arrays, without steps that do not fit."""
        n = len(self._st)
        cols = list(zip(*self._st, strict=True)) if n else [()] * 9
        # An append interrupted (Ctrl-C) between its extends and its step row leaves extra
        # samples at the end of some sample lists: they belong to no step, drop them.
        total = sum(cols[1])  # q, checked against the lengths in append_step
        for buf in (self._seed, self._lp, self._lm, self._grad, self._coeff):
            del buf[total:]
        seeds, lp, lm, grad, coeff = self._seed, self._lp, self._lm, self._grad, self._coeff
        checks = {  # column -> (values, bad mask, expected)
            "step": (*S.int_column(cols[0], *S.I64), "i64"),
            "q": (*S.int_column(cols[1], 0, S.I32[1]), "i32 >= 0"),
            "batch_seed": (*S.int_column(cols[2], *S.U32), "u32"),
            "eps": (*S.int_column(cols[3], *S.I32), "i32"),
            "lr": (*S.float_column(cols[4]), "f8"),
            "loss": (*S.float_column(cols[5]), "f8"),
            "forward_passes": (*S.int_column(cols[6], *S.I64), "i64"),
            "fresh_words": (*S.int_column(cols[7], *S.I64), "i64"),
            "fresh_numbers": (*S.int_column(cols[8], *S.I64), "i64"),
        }
        if self._steps_dtype is S.STEPS_DTYPE_V1:  # a version 1 run: no such column
            del checks["fresh_numbers"]
        sample_checks = {
            "seed": (*S.int_column(seeds, *S.U32), "u32", seeds),
            "loss_plus": (*S.int_column(lp, *S.I32), "i32", lp),
            "loss_minus": (*S.int_column(lm, *S.I32), "i32", lm),
            "grad": (*S.float_column(grad), "f8", grad),
            "coeff": (*S.int_column(coeff, *S.I32), "i32", coeff),
        }
        q = checks["q"][0]
        owner = np.repeat(np.arange(n), q)  # q was checked against the lengths on append
        bad = np.zeros(n, bool)
        for _, mask, _ in checks.values():
            bad |= mask
        for _, mask, _, _ in sample_checks.values():
            bad[owner[mask]] = True
        problem = None
        keep: np.ndarray | slice = slice(None)
        skeep: np.ndarray | slice = slice(None)
        if bad.any():
            problem = self._describe_bad(bad, owner, checks, sample_checks)
            keep = ~bad
            skeep = keep[owner]

        q_kept = q[keep]
        steps = np.empty(len(q_kept), self._steps_dtype)
        for col, (values, _, _) in checks.items():
            steps[col] = values[keep]
        steps["sample_start"] = np.cumsum(q_kept) - q_kept + self._n["samples"]
        samples = np.empty(int(q_kept.sum()), S.SAMPLES_DTYPE)
        samples["step"] = checks["step"][0][owner][skeep]
        for col, (values, _, _, _) in sample_checks.items():
            samples[col] = values[skeep]
        return steps, samples, problem

    def _describe_bad(
        self,
        bad: np.ndarray,
        owner: np.ndarray,
        checks: dict[str, Any],
        sample_checks: dict[str, Any],
    ) -> TraceError:
        first = int(np.flatnonzero(bad)[0])
        what = ""
        for i, (col, (_, mask, kind)) in enumerate(checks.items()):
            if mask[first]:
                what = f"{col} = {_plain(self._st[first][i])!r} is not {kind}"
                break
        else:
            for col, (_, mask, kind, raw) in sample_checks.items():
                hits = np.flatnonzero(mask & (owner == first))
                if len(hits):
                    what = f"{col} = {_plain(raw[int(hits[0])])!r} is not {kind}"
                    break
        more = f" ({int(bad.sum())} bad steps in this block)" if bad.sum() > 1 else ""
        return TraceError(
            f"step {_plain(self._st[first][0])!r} not recorded: {what}{more}",
            "pass the values the device returned: u32 seeds, i32 Q16 losses and "
            "coefficients, finite floats",
        )

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
        reserved = sorted(set(attrs) & set(S.RESERVED_RUN_ATTRS))
        if reserved:
            raise TraceError(
                f"run attributes {reserved} are written by the trace writer itself",
                "pass final values to finish()",
            )
        values = {k: S.attr_value(k, v) for k, v in attrs.items()}
        with self._lock:
            if self._closed:
                self._raise_state()
            self._write_attrs(values)

    def _write_attrs(self, attrs: Mapping[str, S.AttrValue]) -> None:
        try:
            for key, value in attrs.items():
                if key in self._g.attrs:
                    self._g.attrs.modify(key, value)
                else:
                    self._g.attrs[key] = value
            self._f.flush()
        except OSError as exc:
            raise TraceError(
                f"could not write run attributes to {self.path} ({exc})", "check free disk space"
            ) from None

    def finish(self, status: str = "complete", **final_attrs: object) -> None:
        """Flush and record the end of the run: finished, status, end_time and final values.

        ``final_attrs`` may give final_accuracy, weights_crc (u32), forward_passes, steps and
        any extra attribute; by default steps/forward_passes come from the recorded steps and
        final_accuracy from the last 'test' evaluation.
        """
        if status not in S.STATUSES:
            raise TraceError(
                f"run status {status!r} is not one of {S.STATUSES}",
                "use complete, interrupted or failed",
            )
        if {"finished", "status", "end_time"} & set(final_attrs):
            raise TraceError(
                "finished, status and end_time are set by finish() itself",
                "pass only final values such as final_accuracy and weights_crc",
            )
        extra = {k: S.attr_value(k, v) for k, v in final_attrs.items()}
        crc = extra.get("weights_crc", -1)
        if not isinstance(crc, int) or isinstance(crc, bool) or not -1 <= crc <= S.U32[1]:
            raise TraceError(f"weights_crc = {crc!r} is not a u32", "pass the CRC-32 as an int")
        with self._lock:
            if self._closed:
                self._raise_state()
            if self._finished:
                raise TraceError(
                    f"run {self.run_id} of {self.path} is already finished", "call finish() once"
                )
            problems = [self._bg_error] if self._bg_error else []
            self._bg_error = None
            try:
                self._flush()
            except TraceError as exc:  # bad rows were dropped; the rest is on disk
                if self.pending:
                    raise
                problems.append(exc)
            values: dict[str, S.AttrValue] = {
                "final_accuracy": math.nan if self._last_test_acc is None else self._last_test_acc,
                "forward_passes": self._last_fp,
                "steps": self._n["steps"],
                "weights_crc": -1,
                **extra,
                "finished": True,
                "status": status,
                "end_time": S.utc_now(),
            }
            self._write_attrs(values)
            self._finished = True
        if problems:
            raise problems[0]

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
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)
        try:
            if not self._finished:
                self.finish(status)
        finally:
            with self._lock:
                self._closed = True
                atexit.unregister(self._at_exit)
                closed_cleanly = False
                with contextlib.suppress(OSError):
                    self._f.close()
                    closed_cleanly = True
                try:
                    # still holding the liveness lock: no other writer can open the file
                    if closed_cleanly and self._finished and self._compress == "close":
                        try:
                            compact(self.path)
                        except (TraceError, OSError) as exc:
                            warnings.warn(
                                f"{self.path} stays uncompressed: {exc}", TraceWarning, stacklevel=3
                            )
                finally:
                    _release(self._liveness_fd)  # also releases the liveness lock
                    self._liveness_fd = None
                    if self._sigterm:
                        self._sigterm = False
                        _sigterm_release()

    def _at_exit(self) -> None:
        with contextlib.suppress(Exception):  # interpreter is exiting: best effort
            if not self._finished and not self._closed:
                self.append_event(None, "interrupt", "writer closed at interpreter exit")
        with contextlib.suppress(Exception):
            self.close("interrupted")

    def _raise_state(self) -> None:
        if self._bg_error is not None:
            err, self._bg_error = self._bg_error, None
            raise err
        raise TraceError(
            f"the trace writer for {self.path} is closed",
            "create a new TraceWriter to record another run",
        )

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
        if not self._finished and not self._closed:
            what = (
                "SIGTERM"
                if isinstance(exc, Terminated)
                else "Ctrl-C (SIGINT)"
                if isinstance(exc, KeyboardInterrupt)
                else f"{type(exc).__name__}: {exc}"
            )
            with contextlib.suppress(Exception):
                self.append_event(
                    None, "interrupt" if status == "interrupted" else "error", what[:2000]
                )
        try:
            self.close(status)
        except Exception as err:  # keep the original exception; say what else went wrong
            exc.add_note(f"hilbench trace: could not finish {self.path}: {err}")


# ---------------------------------------------------------------- files


def steps_layout(ds: h5py.Dataset, verb: str = "cannot append") -> np.dtype:
    """The record layout of a run's steps table: the current one or version 1's."""
    names = ds.dtype.names or ()
    for layout in (S.STEPS_DTYPE, S.STEPS_DTYPE_V1):
        if names == layout.names:
            return layout
    raise TraceError(
        f"{verb}: its steps table has the columns {list(names)}, which no trace format version has",
        "start a new run with TraceWriter.create",
    )


def _write_blob(g: h5py.Group, blob: bytes) -> None:
    data = np.frombuffer(blob, dtype=np.uint8)
    kw = {"compression": "gzip", "compression_opts": S.GZIP_LEVEL} if len(data) else {}
    ds = g.create_dataset("model_blob", data=data, **kw)
    ds.attrs["description"] = S.DESCRIPTIONS["model_blob"]
    ds.attrs["units"] = json.dumps({"": "byte"})
    ds.attrs["size"] = len(blob)


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _compress_mode(compress: bool | str) -> str:
    if compress is True:
        return "live"
    if compress is False:
        return "none"
    if compress not in S.COMPRESSION_MODES:
        raise TraceError(
            f"compress = {compress!r} is not one of {S.COMPRESSION_MODES}",
            "use 'close' (the default), 'live' or 'none'",
        )
    return compress


def _release(fd: int | None) -> None:
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


# ---------------------------------------------------------------- SIGTERM

_sig_lock = threading.Lock()
_sig_users = 0
_sig_previous: Any = None


def _on_sigterm(signum: int, frame: object) -> None:
    # Once: a second SIGTERM gets the previous (default) behaviour and ends the process.
    with contextlib.suppress(ValueError, TypeError):
        signal.signal(signal.SIGTERM, _sig_previous or signal.SIG_DFL)
    raise Terminated("SIGTERM")


def _sigterm_acquire() -> bool:
    """Install the SIGTERM handler (main thread, default handler only); True if counted."""
    global _sig_users, _sig_previous
    if threading.current_thread() is not threading.main_thread():
        return False
    with _sig_lock:
        current = signal.getsignal(signal.SIGTERM)
        if _sig_users == 0:
            if current not in (signal.SIG_DFL, None):
                return False  # the application has its own handler: leave it alone
            _sig_previous = current
            signal.signal(signal.SIGTERM, _on_sigterm)
        _sig_users += 1
        return True


def _sigterm_release() -> None:
    global _sig_users
    with _sig_lock:
        _sig_users -= 1
        if _sig_users == 0 and threading.current_thread() is threading.main_thread():
            with contextlib.suppress(ValueError, TypeError):
                if signal.getsignal(signal.SIGTERM) is _on_sigterm:
                    signal.signal(signal.SIGTERM, _sig_previous or signal.SIG_DFL)


# ---------------------------------------------------------------- files and locks
# A live writer holds a flock on its file: exclusive while it opens and sets up the run,
# shared while it appends (readers never lock, HDF5's own lock is off for the writer) and
# until its gzip rewrite at close has replaced the file. Another writer probes with an
# exclusive non-blocking flock: failing means "someone is writing it".


def _lock_exclusive(path: Path) -> int | None:
    """An fd holding an exclusive flock on path, or a TraceError if a writer holds it."""
    if fcntl is None:
        return None
    fd = os.open(path, os.O_RDONLY)
    deadline = time.monotonic() + 0.5  # a watcher's probe holds it for microseconds
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError:
            if time.monotonic() >= deadline:
                os.close(fd)
                raise TraceError(
                    f"{path} is being written by another process",
                    "wait for that run to finish, or write to another file",
                ) from None
            time.sleep(0.01)


def writer_alive(path: str | Path) -> bool | None:
    """Whether a live hilbench writer holds ``path`` (None where flock does not exist)."""
    if fcntl is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # releases the probe at once
    return False


def _h5_open(path: Path, mode: str, **kw: Any) -> h5py.File:
    """h5py.File with the trace's format bounds; HDF5's own flock off where ours is used."""
    if fcntl is not None:
        kw.setdefault("locking", False)
    return h5py.File(path, mode, libver=S.LIBVER, **kw)


def _recover_orphan(path: Path) -> None:
    """Clear the open-for-write flags a killed writer left (the caller holds the lock)."""
    try:
        with h5py.File(path, "r", swmr=True, locking=False) as f:  # is it ours?
            check_root(f, path)
    except OSError as exc:
        raise open_error(path, exc) from None
    if fcntl is None:
        raise TraceError(
            f"{path} was left open by a writer that did not close it",
            f"clear the flag with `h5clear -s {path}`, then retry",
        )
    fd = os.open(path, os.O_RDWR)
    try:
        if not S.clear_open_flags(fd):
            raise TraceError(
                f"{path} was left open by a writer that did not close it",
                f"clear the flag with `h5clear -s {path}`, then retry",
            )
    finally:
        os.close(fd)


def _open_for_append(path: Path, *, create: bool) -> tuple[h5py.File, int | None]:
    """Open an existing hilbench trace read-write (recovering it from a killed writer), or
    create a new one when ``create``. Returns the file and the writer's lock fd (held
    exclusively; the writer downgrades it to shared once its run is set up)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TraceError(
            f"cannot create the directory {path.parent} for trace {path} ({exc.strerror or exc})",
            "choose a writable location for the trace",
        ) from None
    if path.is_dir():
        raise TraceError(f"trace path {path} is a directory", "give a file name, e.g. run.h5")
    if not path.exists():
        try:
            f = _h5_open(path, "w-")
        except OSError as exc:
            raise open_error(path, exc, writing=True) from None
        try:
            lock_fd = _lock_exclusive(path)
            f.attrs["format"] = S.FORMAT_NAME
            f.attrs["format_version"] = S.FORMAT_VERSION
            f.attrs["written_by"] = f"hilbench {_HILBENCH_VERSION}"
        except BaseException:
            f.close()
            raise
        return f, lock_fd
    if not h5py.is_hdf5(path):
        raise TraceError(
            f"{path} exists and is not an HDF5 file; refusing to overwrite it",
            "choose another trace path or move the file away",
        )
    lock_fd = _lock_exclusive(path)
    try:
        try:
            f = _h5_open(path, "r+")
        except OSError as exc:
            if "already open for" not in str(exc):
                raise open_error(path, exc, writing=True) from None
            _recover_orphan(path)
            try:
                f = _h5_open(path, "r+")
            except OSError as exc2:
                raise open_error(path, exc2, writing=True) from None
        verb = "append a run" if create else "resume"
        try:
            check_root(f, path)
        except TraceError as err:
            f.close()
            raise TraceError(
                f"cannot {verb}: {err.cause}", "write the trace to a new file"
            ) from None
        superblock = f.id.get_create_plist().get_version()[0]
        if superblock < 3:  # not written by hilbench: HDF5 cannot start SWMR on it
            f.close()
            raise TraceError(
                f"cannot {verb}: {path} uses HDF5 superblock version {superblock}, which "
                "cannot be written in SWMR mode (version 3 or later is needed)",
                "write the trace to a new file (hilbench creates files that allow it)",
            )
    except BaseException:
        _release(lock_fd)
        raise
    return f, lock_fd


# ---------------------------------------------------------------- gzip at close


def _copy_attrs(src: h5py.HLObject, dst: h5py.HLObject) -> None:
    for key in src.attrs:
        dst.attrs.create(key, src.attrs[key], dtype=src.attrs.get_id(key).dtype)


def compact(path: str | Path) -> None:
    """Rewrite a closed trace with every table gzip'd (level 1 + shuffle), atomically.

    The copy is written next to the file and renamed over it, so a crash at any point
    leaves either the old or the new file, both valid. Tables already gzip'd and any other
    object are copied as they are. Refuses a file a writer holds (flags set).
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.gzip-{os.getpid()}.tmp")
    try:
        try:
            src = h5py.File(path, "r", locking=False) if fcntl is not None else h5py.File(path, "r")
        except OSError as exc:
            raise open_error(path, exc) from None
        with src, h5py.File(tmp, "w", libver=S.LIBVER) as dst:
            check_root(src, path)
            _copy_attrs(src, dst)
            for name, obj in src.items():
                if name != S.RUNS_GROUP or not isinstance(obj, h5py.Group):
                    src.copy(obj, dst, name=name)
                    continue
                runs = dst.create_group(name)
                _copy_attrs(obj, runs)
                for rid, g in obj.items():
                    if not isinstance(g, h5py.Group):
                        obj.copy(g, runs, name=rid)
                        continue
                    dg = runs.create_group(rid)
                    _copy_attrs(g, dg)
                    for child, ds in g.items():
                        if (
                            child in S.DATASETS
                            and isinstance(ds, h5py.Dataset)
                            and ds.compression != "gzip"
                            and ds.ndim == 1
                        ):
                            data = ds[()]
                            new = dg.create_dataset(
                                child,
                                data=data,
                                maxshape=(None,),
                                chunks=(S.compact_chunk_rows(child, len(data)),),
                                **S.GZIP,
                            )
                            _copy_attrs(ds, new)
                        else:
                            g.copy(ds, dg, name=child)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        with contextlib.suppress(OSError):
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
        with contextlib.suppress(OSError):
            dfd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
