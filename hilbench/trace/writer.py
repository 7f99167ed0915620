"""TraceWriter: append one run's records to an HDF5 trace, buffered, flushed in blocks, SWMR.

Rows wait in a RowBuffer and are written as record blocks every ``flush_rows`` steps and by a
background thread every ``flush_interval_s`` seconds, each time followed by an HDF5 file
flush: a ``kill -9`` leaves a file that holds every row up to the last flush. When the writer
closes, the file is rewritten with gzip'd tables (``compact``) and atomically replaced.

The writer wires the parts, each in its own module: row_buffer (rows in memory, checked by
column name against the schema), tables (block appends), flush_thread, sigterm, liveness (the
flock), append_open and recovery (opening a file, also one a killed writer left), run_setup
(a new or reopened run group) and compaction (the gzip rewrite).
"""

from __future__ import annotations

import atexit
import contextlib
import math
import threading
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import h5py

from hilbench.errors import TraceError
from hilbench.trace import schema as S
from hilbench.trace import sigterm
from hilbench.trace.append_open import open_for_append
from hilbench.trace.compaction import compact
from hilbench.trace.file_errors import IO_ERRORS, io_reason
from hilbench.trace.flush_thread import PeriodicFlush
from hilbench.trace.liveness import release, share, writer_alive
from hilbench.trace.row_buffer import RowBuffer
from hilbench.trace.run_setup import (
    compress_mode,
    new_run,
    reopen_run,
    steps_layout,
    validate_attrs,
)
from hilbench.trace.run_state import RunState
from hilbench.trace.sigterm import Terminated
from hilbench.trace.tables import Tables
from hilbench.trace.unclosable import detach_from_disk

__all__ = ["Terminated", "TraceWarning", "TraceWriter", "compact", "steps_layout", "writer_alive"]


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
        # A run resumed from an older format version keeps its steps layout.
        steps_dtype = steps_layout(group["steps"])
        self._tables = Tables(group, steps_dtype)
        self._state = RunState(group)
        self._rows = RowBuffer(steps_dtype)
        self._add_step, self._step_rows = self._rows.add_step, self._rows.steps  # hot path
        self._flush_rows = max(1, int(flush_rows))
        self._other_rows = 4 * self._flush_rows
        self._names_ok: set[tuple[str, str]] = set()  # timing (command, source) checked
        steps = self._tables.datasets["steps"]
        on_disk = self._tables.rows["steps"]
        self._last_fp = int(steps[-1]["forward_passes"]) if on_disk else 0
        self._last_step = int(steps[-1]["step"]) if on_disk else None
        evals = self._tables.datasets["evals"][()]
        tests = evals["accuracy"][evals["split"] == b"test"]
        self._last_test_acc: float | None = float(tests[-1]) if len(tests) else None
        self._finished = False
        self._closed = False
        self._lock = threading.RLock()
        self._bg_error: TraceError | None = None
        self._stopped: TraceError | None = None  # a write failed: nothing more reaches the disk
        self._compress = compress
        self._liveness_fd = lock_fd
        share(lock_fd)  # setup done: let readers and a compaction share the file
        self._sigterm = handle_sigterm and sigterm.acquire()
        atexit.register(self._at_exit)
        self._flusher: PeriodicFlush | None = None
        if flush_interval_s is not None and flush_interval_s > 0:
            self._flusher = PeriodicFlush(
                self._background_flush, flush_interval_s, f"hilbench-trace-flush-{self.run_id}"
            )

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
        mode = compress_mode(compress)
        attrs = validate_attrs(run_attrs)
        attrs["config_json"] = S.config_json(config)
        existed = path.exists()
        f, lock_fd = open_for_append(path, create=True)
        try:
            g = new_run(f, attrs, mode, model_blob)
            f.flush()
            f.swmr_mode = True
        except IO_ERRORS as exc:
            _abandon(f, lock_fd, None if existed else path)
            raise TraceError(
                f"could not write a new run to {path}: {io_reason(exc)}",
                "check free disk space and write permission",
            ) from None
        except BaseException:
            _abandon(f, lock_fd, None if existed else path)
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
        mode = compress_mode(compress)
        if not path.exists():
            raise TraceError(f"no trace file at {path} to resume", "check the path")
        f, lock_fd = open_for_append(path, create=False)
        try:
            g, was = reopen_run(f, path, run)
            f.flush()
            f.swmr_mode = True
        except (*IO_ERRORS, KeyError, ValueError) as exc:
            _abandon(f, lock_fd, None)
            raise TraceError(
                f"cannot resume run {run!r} of {path} ({io_reason(exc)})",
                "start a new run with TraceWriter.create",
            ) from None
        except BaseException:
            _abandon(f, lock_fd, None)
            raise
        w = cls(f, g, path, flush_rows, flush_interval_s, lock_fd, mode, handle_sigterm)
        step = w._last_step if w._last_step is not None else -1
        try:
            w.append_event(
                step,
                "resume",
                f"writer resumed with {w.steps_written} steps on disk (run was {was})",
            )
            w.flush()
        except BaseException:
            w._abandon()
            raise
        return w

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
            if self._closed or self._bg_error or self._stopped:
                self._raise_state()
            self._add_step(
                (step, q, batch_seed, eps, lr, loss, forward_passes, fresh_words, fresh_numbers),
                seeds,
                loss_plus,
                loss_minus,
                grads,
                coeffs,
            )
            if len(self._step_rows) >= self._flush_rows:
                self._flush()

    def append_eval(
        self, step: int, forward_passes: int, accuracy: float, loss: float, split: str = "test"
    ) -> None:
        """Buffer one evaluation (accuracy as a fraction, loss in nats)."""
        S.short_ascii(split, "eval split", 8)
        self._append(self._rows.evals, (step, forward_passes, accuracy, loss, split))

    def append_timing(self, step: int, command: str, duration_s: float, source: str) -> None:
        """Buffer one command duration; ``source`` is 'device', 'modeled' or 'host' (seconds),
        or 'instr' (a count of executed instructions)."""
        if not (  # the per-step case, checked inline: a known name, a finite float >= 0
            type(duration_s) is float
            and 0.0 <= duration_s < math.inf
            and (command, source) in self._names_ok
        ):
            duration_s = self._duration(step, command, duration_s, source)
        self._append_timings(((step, command, duration_s, source),))

    def append_command(
        self, step: int, command: str, host_s: float, device_s: float, source: str
    ) -> None:
        """A command's two durations at once: the host's round trip and the device's own."""
        ok = self._names_ok
        if (  # the per-step case, checked inline: known names, finite non-negative floats
            type(host_s) is float
            and type(device_s) is float
            and 0.0 <= host_s < math.inf
            and 0.0 <= device_s < math.inf
            and (command, source) in ok  # (command, "host") is in with it
        ):
            with self._lock:  # _append_timings, inline: this runs every round trip
                if self._closed or self._bg_error or self._stopped:
                    self._raise_state()
                timing = self._rows.timing
                timing.extend(((step, command, host_s, "host"), (step, command, device_s, source)))
                if len(timing) >= self._other_rows:
                    self._flush()
            return
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
            # the name is good: with the host's clock too (append_command's one lookup)
            self._names_ok.update(((command, source), (command, "host")))
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
            if self._closed or self._bg_error or self._stopped:
                self._raise_state()
            self._rows.timing.extend(rows)
            if len(self._rows.timing) >= self._other_rows:
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
        self._append(self._rows.events, (step, time.time(), kind, detail))

    def event(self, kind: str, detail: str = "", *, step: int | None = None) -> None:
        """``append_event`` for callers that do not know the step (the link layer):
        ``writer.event("retry", "PROBE seq 12: no answer in 200 ms, attempt 2 of 3")``."""
        self.append_event(step, kind, detail)

    def _append(self, rows: list[tuple[Any, ...]], row: tuple[Any, ...]) -> None:
        with self._lock:
            if self._closed or self._bg_error or self._stopped:
                self._raise_state()
            rows.append(row)
            if len(rows) >= self._other_rows:
                self._flush()

    # ---------------------------------------------------------------- writing

    @property
    def pending(self) -> int:
        """Rows buffered in memory, not yet on disk."""
        return self._rows.pending

    @property
    def steps_written(self) -> int:
        """Step rows on disk."""
        return self._tables.rows["steps"]

    @property
    def last_step(self) -> int | None:
        """The ``step`` of the last step appended (buffered or on disk), None before any."""
        with self._lock:
            if self._rows.steps:
                return int(self._rows.last("step"))
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
            if self._rows.steps:
                return int(self._rows.last("forward_passes"))
            return self._last_fp

    def flush(self) -> None:
        """Write every buffered row and make it durable (HDF5 file flush).

        Steps with out-of-range values (e.g. a seed that is not u32) are dropped and reported
        with a TraceError after the valid rows are written.
        """
        with self._lock:
            if self._closed or self._bg_error or self._stopped:
                self._raise_state()
            self._flush()

    def _background_flush(self) -> None:
        """The flush thread's call: flush whatever is buffered; an error waits for the
        writer's next call, which raises it."""
        with self._lock:
            if self._closed or self._bg_error or self._stopped or not self.pending:
                return
            try:
                self._flush()
            except TraceError as exc:
                self._bg_error = exc

    def _flush(self) -> None:
        if not self._rows.pending:
            return
        blocks, problem = self._rows.blocks(self._tables.rows["samples"])
        try:
            self._tables.append(blocks)
        except IO_ERRORS as exc:
            self._tables.roll_back()  # the failed block must not appear later as zero rows
            raise self._disk_error(exc) from None
        steps, evals = blocks["steps"], blocks["evals"]
        if len(steps):
            self._last_fp = int(steps["forward_passes"][-1])
            self._last_step = int(steps["step"][-1])
        tests = evals[evals["split"] == b"test"]
        if len(tests):
            self._last_test_acc = float(tests["accuracy"][-1])
        self._rows.clear()
        if problem:
            raise problem

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
            if self._closed or self._stopped:
                self._raise_state()
            self._write_attrs(values)

    def _write_attrs(self, attrs: Mapping[str, S.AttrValue]) -> None:
        try:
            self._state.write(attrs)  # one write in place (run_state.py), not HDF5 attributes
            self._f.flush()
        except IO_ERRORS as exc:
            raise self._disk_error(exc) from None

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
            if self._closed or self._stopped:
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
                "steps": self.steps_written,
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
        if self._flusher is not None:
            self._flusher.stop()
        try:
            if not self._finished and self._stopped is None:  # stopped: nothing to write
                self.finish(status)
        finally:
            with self._lock:
                self._closed = True
                atexit.unregister(self._at_exit)
                try:
                    closed = self._close_file()
                    if closed and self._finished and self._compress == "close":
                        self._compact()  # still holding the lock: no other writer can open it
                finally:
                    self._release()

    def _release(self) -> None:
        """Give back the liveness lock and the SIGTERM handler."""
        release(self._liveness_fd)  # closing the fd releases the lock
        self._liveness_fd = None
        if self._sigterm:
            self._sigterm = False
            sigterm.release()

    def _abandon(self) -> None:
        """Close without finishing the run (a resume whose first write failed)."""
        if self._flusher is not None:
            self._flusher.stop()
        with self._lock:
            self._closed = True
            atexit.unregister(self._at_exit)
            self._close_file()
            self._release()

    def _close_file(self) -> bool:
        """Close the HDF5 file; False if that failed."""
        try:
            self._f.close()
        except IO_ERRORS:
            return False
        return True

    def _disk_error(self, exc: BaseException) -> TraceError:
        """The one-line error of the first write the disk refused; the writer stops there.

        HDF5's file is detached from the disk at once (unclosable.py): what HDF5 still
        writes, and the close, then go to memory, so HDF5 never sees a second failure (which
        it does not survive) and the trace on disk keeps the whole rows of the last flush.
        """
        self._stopped = TraceError(
            f"could not write to trace {self.path}: {io_reason(exc)}",
            f"free disk space (or check the disk); the {self.steps_written} steps on disk are "
            "whole and the run resumes from them (hilbench run --resume)",
        )
        detach_from_disk(self._f)
        return self._stopped

    def _compact(self) -> None:
        try:
            compact(self.path)
        except (TraceError, *IO_ERRORS) as exc:
            warnings.warn(f"{self.path} stays uncompressed: {exc}", TraceWarning, stacklevel=4)

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
        if self._stopped is not None and not self._closed:
            raise TraceError(
                f"the trace writer for {self.path} stopped at a failed write "
                f"({self._stopped.cause})",
                "end the run; it resumes from the steps on disk (hilbench run --resume)",
            )
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
            if str(err) != str(exc):
                exc.add_note(f"hilbench trace: could not finish {self.path}: {err}")


def _abandon(f: h5py.File, lock_fd: int | None, remove: Path | None) -> None:
    """After a failed setup: close the file, release the lock, remove the file we created."""
    if remove is not None:  # a file this call made: nothing of it needs to reach the disk
        detach_from_disk(f)
    with contextlib.suppress(*IO_ERRORS):
        f.close()
    release(lock_fd)
    if remove is not None:
        with contextlib.suppress(OSError):
            remove.unlink()
