"""A run's group in a trace file: checked attributes, a new run's tables, a run reopened."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

import h5py
import numpy as np

from hilbench import __version__ as _HILBENCH_VERSION
from hilbench.errors import TraceError
from hilbench.trace import event_text, run_state
from hilbench.trace import schema as S
from hilbench.trace.decoding import readable_attrs
from hilbench.trace.reader import events_on_disk, pick_run
from hilbench.trace.whole_rows import whole_steps, written_rows


def compress_mode(compress: bool | str) -> str:
    """``compress`` as one of schema.COMPRESSION_MODES (True: live, False: none)."""
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


def validate_attrs(run_attrs: Mapping[str, object]) -> dict[str, S.AttrValue]:
    """The caller's run attributes checked, with the defaulted ones filled in."""
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


def steps_layout(ds: h5py.Dataset, verb: str = "cannot append") -> np.dtype:
    """The record layout of a run's steps table: the current one or an older version's."""
    names = ds.dtype.names or ()
    for layout in S.STEPS_LAYOUTS:
        if names == layout.names:
            return layout
    raise TraceError(
        f"{verb}: its steps table has the columns {list(names)}, which no trace format version has",
        "start a new run with TraceWriter.create",
    )


def new_run(
    f: h5py.File, attrs: Mapping[str, S.AttrValue], mode: str, model_blob: bytes | None
) -> h5py.Group:
    """Add the next run group to ``f``: its attributes, empty tables, the slots of its
    changing attributes (run_state.py) and the model blob, and flush the file.

    Every object made is kept open until that flush returned: closing a dirty HDF5 object
    writes its header, and a write that fails there (a full disk) would be lost inside a
    destructor, out of reach of the writer's error handling, and leave HDF5 half torn down.
    """
    made: list[object] = []  # kept alive by the traceback if the flush fails
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
        made.append(ds)
        ds.attrs["units"] = json.dumps(S.UNITS[name])
        ds.attrs["description"] = S.DESCRIPTIONS[name]
    text = g.create_dataset(
        S.EVENT_TEXT,
        shape=(0,),
        maxshape=(None,),
        dtype=np.uint8,
        chunks=(S.EVENT_TEXT_CHUNK,),
        **(S.GZIP if mode == "live" else {}),
    )
    made.append(text)
    text.attrs["units"] = json.dumps({"": "byte (UTF-8)"})
    text.attrs["description"] = S.DESCRIPTIONS[S.EVENT_TEXT]
    made.append(run_state.create(g))
    if model_blob is not None:
        made.append(_write_blob(g, bytes(model_blob)))
    f.flush()
    return g


def reopen_run(f: h5py.File, path: Path, run: str | int | None) -> tuple[h5py.Group, str]:
    """The run group to resume and the status it had; its tables cut to whole steps, its
    final attributes back to their placeholders."""
    rid = pick_run(path, sorted(f.get(S.RUNS_GROUP, {})), run)
    g = f[S.RUNS_GROUP][rid]
    attrs = readable_attrs(g, ("finished", "status"))
    finished = bool(attrs.get("finished", False))
    was = str(attrs.get("status", S.RUNNING))
    if finished and was not in S.RESUMABLE_STATUSES:
        raise TraceError(
            f"run {rid} of {path} is {was}; there is nothing to resume",
            "start a new run with TraceWriter.create",
        )
    missing = [n for n in S.DATASETS if n not in g]
    if not missing and event_text.has_byte_log(g["events"]) and S.EVENT_TEXT not in g:
        missing = [S.EVENT_TEXT]
    if missing:
        raise TraceError(
            f"run {rid} of {path} lacks the tables {missing}",
            "start a new run with TraceWriter.create",
        )
    steps_layout(g["steps"], f"cannot resume run {rid} of {path}")
    _cut_to_written_rows(g)
    if finished or "status" not in attrs:  # running again until the next finish()
        run_state.RunState(g).write(S.FINAL_ATTR_PLACEHOLDERS)
    return g, was


def _write_blob(g: h5py.Group, blob: bytes) -> h5py.Dataset:
    data = np.frombuffer(blob, dtype=np.uint8)
    kw = {"compression": "gzip", "compression_opts": S.GZIP_LEVEL} if len(data) else {}
    ds = g.create_dataset("model_blob", data=data, **kw)
    ds.attrs["description"] = S.DESCRIPTIONS["model_blob"]
    ds.attrs["units"] = json.dumps({"": "byte"})
    ds.attrs["size"] = len(blob)
    return ds


def _cut_to_written_rows(g: h5py.Group) -> None:
    """Drop what a cut-short write left at the ends of a run's tables: step rows that are not
    whole, samples beyond the last whole step, rows that never reached the disk (zeros)."""
    steps, samples = g["steps"], g["samples"]
    n_steps, n_samples = 0, 0
    if steps.shape[0]:
        head = steps.fields(["step", "q", "sample_start"])[()]
        n_steps, n_samples = whole_steps(head, samples[()])
    keep = {"steps": n_steps, "samples": n_samples}
    keep["events"] = written_rows("events", events_on_disk(g))
    if event_text.has_byte_log(g["events"]):  # the texts of the rows kept, no more
        keep[S.EVENT_TEXT] = event_text.text_end(g["events"][: keep["events"]])
    for name in ("evals", "timing"):
        keep[name] = written_rows(name, g[name][()])
    for name, n in keep.items():
        if g[name].shape[0] > n:
            g[name].resize((n,))


def bytes_per_forward_pass() -> float:
    """An upper bound of the trace bytes a run writes per forward pass of its budget: a step
    of q samples costs 2q forward passes (two-point), one step row, q sample rows and two
    timing rows (host and device); q = 1 is the most per forward pass."""
    steps = S.DATASETS["steps"].itemsize
    samples = S.DATASETS["samples"].itemsize
    timing = S.DATASETS["timing"].itemsize
    return (steps + samples + 2 * timing) / 2


def free_space_problem(path: Path, budget: int) -> str | None:
    """A line saying the disk of ``path`` may not hold a run of ``budget`` forward passes
    (at most bytes_per_forward_pass() each, uncompressed while written), None if it can."""
    need = int(budget * bytes_per_forward_pass())
    where = path.parent if not path.is_dir() else path
    while not where.exists() and where != where.parent:
        where = where.parent
    if not os.access(where, os.W_OK):
        return None  # creating the trace fails first, with its own line
    try:
        usage = shutil.disk_usage(where)
    except OSError:
        return None
    free = usage.free
    if free >= need or usage.total == 0:  # total 0: a pseudo file system (/proc)
        return None
    return (
        f"the trace {path} may grow to {_size(need)} for {budget:,} forward passes (at most "
        f"{bytes_per_forward_pass():.0f} bytes each until the gzip at close); {where} has "
        f"{_size(free)} free: free space, or trace to another disk, or the run will stop "
        "when the disk is full (its trace then resumes)"
    )


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} TiB"
