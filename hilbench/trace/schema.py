"""The trace format, as data: version, dtypes, units and the attributes a run carries.

docs/trace-format.md is the human-readable contract; this module is its single source in code.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from hilbench.errors import TraceError

FORMAT_NAME = "hilbench-trace"
FORMAT_VERSION = 3

#: HDF5 file-format bounds: the 1.10 object formats (the oldest that allows SWMR), never newer,
#: so h5dump/HDFView built on HDF5 1.10 or later read every trace. (libver="latest" on HDF5 2.x
#: writes object headers that HDF5 1.10's tools cannot read.)
LIBVER = ("v110", "v110")

#: Table storage: "close" (default) appends unfiltered and rewrites the file with gzip'd tables
#: when the writer closes; "live" gzips while appending; "none" never compresses.
COMPRESSION_MODES = ("close", "live", "none")

RUNS_GROUP = "runs"
RUN_ID_WIDTH = 4

#: Who measured a timing row: device (cycle counter), modeled (cost model), host (wall clock),
#: all in seconds; instr: executed instructions (QEMU -icount), a count, never seconds.
TIMING_SOURCES = ("device", "modeled", "host", "instr")
STATUSES = ("complete", "interrupted", "failed")
RUNNING = "running"
#: Runs TraceWriter.resume continues: killed (still "running"), or closed without completing.
RESUMABLE_STATUSES = (RUNNING, "interrupted", "failed")

#: Run attributes the caller must give at creation (besides the defaulted ones below).
REQUIRED_RUN_ATTRS = (
    "protocol_version",
    "backend",
    "device_id",
    "firmware",
    "model",
    "model_hash",
    "dataset",
    "seed",
)
#: Run attributes the writer fills in when the caller leaves them out.
DEFAULTED_RUN_ATTRS = ("hilbench_version", "start_time", "git_revision", "firmware_hash", "split")

#: Event kinds hilbench records, and what one event of each kind means (others are allowed:
#: ASCII, at most 16 characters). docs/trace-format.md lists the same; a test checks both.
EVENT_MEANINGS: dict[str, str] = {
    "retry": "a request was sent again and a frame was lost: the device got it damaged, or "
    "no answer to the earlier try ever came",
    "late": "a request was sent again for silence, but the earlier try's answer came after all "
    "(a slow round trip, e.g. a loaded host: nothing was lost)",
    "resync": "a damaged frame was dropped, by the host or by the device",
    "reset": "the device rebooted (one event per reboot the host noticed)",
    "recovered": "after a reset, the host reloaded model and data, replayed the acknowledged "
    "updates and checked the weights CRC (one event per recovery)",
    "restored": "a resumed run's fresh device was loaded and given the updates on disk",
    "injected": "a fault --link-faults injected (detail: drop, corrupt, duplicate, delay, "
    "truncate or reset)",
    "error": "an exception ended the run (detail: the error); the run's status is failed",
    "interrupt": "Ctrl-C, SIGTERM or interpreter exit closed the run (detail says which)",
    "resume": "a writer took the run over again (hilbench run --resume)",
    "stop": "a time limit or stopping rule ended the run before its budget (detail: which)",
    "note": "free text",
    "device": "a line the device said on its own, in a LOG frame (detail: [kind] text; kinds "
    "boot, fault, uart, note)",
    "console": "bytes the port sent before the device's first frame (detail: how many, as text "
    "or hex; at most 4 KiB): what a board printed instead of, or before, hilbench",
}
EVENT_KINDS = tuple(EVENT_MEANINGS)

#: Attributes the writer owns; created with these placeholders, overwritten by finish().
#: weights_crc = -1 means "not known" (the run did not finish, or the caller did not say).
FINAL_ATTR_PLACEHOLDERS: dict[str, bool | int | float | str] = {
    "finished": False,
    "status": RUNNING,
    "end_time": "",
    "final_accuracy": float("nan"),
    "forward_passes": 0,
    "steps": 0,
    "weights_crc": -1,
}
RESERVED_RUN_ATTRS = (*FINAL_ATTR_PLACEHOLDERS, "config_json")

VLEN_STR = h5py.string_dtype("utf-8")


@dataclass(frozen=True)
class StepColumn:
    """One column of the steps table: its type, its unit and the format version that added it."""

    dtype: str
    unit: str
    since: int = 1


#: The steps table, declared once: its layout (STEPS_DTYPE and every older version's), its
#: units, the row buffer's fields and the reader's upgrade of older runs derive from it. A
#: column added later goes last, with since = the FORMAT_VERSION that adds it; older runs read
#: it as NOT_RECORDED.
STEP_COLUMNS: dict[str, StepColumn] = {
    "step": StepColumn("<i8", "index"),
    "q": StepColumn("<i4", "count"),
    "sample_start": StepColumn("<i8", "row index into samples"),
    "batch_seed": StepColumn("<u4", "u32 seed"),
    "eps": StepColumn("<i4", "weight LSB"),
    "lr": StepColumn("<f8", "1"),
    "loss": StepColumn("<f8", "nats"),
    "forward_passes": StepColumn("<i8", "count (cumulative)"),
    "fresh_words": StepColumn("<i8", "32-bit words (this step)"),
    "fresh_numbers": StepColumn("<i8", "random numbers (this step)", since=2),
}


def steps_dtype(version: int = FORMAT_VERSION) -> np.dtype:
    """The steps table's layout in format ``version``: the columns it had."""
    return np.dtype([(n, c.dtype) for n, c in STEP_COLUMNS.items() if c.since <= version])


STEPS_DTYPE = steps_dtype()
#: Every steps layout a trace may hold, newest first (runs of an older version are read with
#: the missing columns NOT_RECORDED, and resumed in their layout).
STEPS_LAYOUTS: tuple[np.dtype, ...] = tuple(
    dict.fromkeys(steps_dtype(v) for v in range(FORMAT_VERSION, 0, -1))
)
#: The steps table of format version 1 (no fresh_numbers).
STEPS_DTYPE_V1 = steps_dtype(1)
#: A step column whose value is not known: a run of a version before the column, or a caller
#: that did not give it to append_step.
NOT_RECORDED = -1
SAMPLES_DTYPE = np.dtype(
    [
        ("step", "<i8"),
        ("seed", "<u4"),
        ("loss_plus", "<i4"),
        ("loss_minus", "<i4"),
        ("grad", "<f8"),
        ("coeff", "<i4"),
    ]
)
EVALS_DTYPE = np.dtype(
    [
        ("step", "<i8"),
        ("forward_passes", "<i8"),
        ("accuracy", "<f8"),
        ("loss", "<f8"),
        ("split", "S8"),
    ]
)
TIMING_DTYPE = np.dtype(
    [("step", "<i8"), ("command", "S16"), ("duration_s", "<f8"), ("source", "S8")]
)
#: Events as the reader and the row buffer hold them (and as runs before format version 3
#: stored them: the text a vlen string in HDF5's global heap).
EVENTS_DTYPE = np.dtype([("step", "<i8"), ("time", "<f8"), ("kind", "S16"), ("detail", VLEN_STR)])
#: Events as a run of format version 3 stores them: the text's place in EVENT_TEXT
#: (event_text.py says why: a torn heap loses every event).
EVENT_ROWS_DTYPE = np.dtype(
    [
        ("step", "<i8"),
        ("time", "<f8"),
        ("kind", "S16"),
        ("text_start", "<i8"),
        ("text_bytes", "<i4"),
    ]
)
#: The byte log of a run's event texts (UTF-8, one after the other).
EVENT_TEXT = "event_text"
EVENT_TEXT_CHUNK = 4096

DATASETS: dict[str, np.dtype] = {
    "steps": STEPS_DTYPE,
    "samples": SAMPLES_DTYPE,
    "evals": EVALS_DTYPE,
    "timing": TIMING_DTYPE,
    "events": EVENT_ROWS_DTYPE,
}
#: Each table's rows as the writer buffers them and the reader returns them.
ROW_DTYPES: dict[str, np.dtype] = {**DATASETS, "events": EVENTS_DTYPE}

UNITS: dict[str, dict[str, str]] = {
    "steps": {name: column.unit for name, column in STEP_COLUMNS.items()},
    "samples": {
        "step": "index",
        "seed": "u32 seed",
        "loss_plus": "Q16 nats",
        "loss_minus": "Q16 nats",
        "grad": "nats per weight LSB",
        "coeff": "weight LSB",
    },
    "evals": {
        "step": "index",
        "forward_passes": "count (cumulative)",
        "accuracy": "fraction",
        "loss": "nats",
        "split": "name",
    },
    "timing": {
        "step": "index",
        "command": "name",
        "duration_s": "s (source instr: executed instructions, a count)",
        "source": "name",
    },
    "events": {
        "step": "index",
        "time": "s since Unix epoch",
        "kind": "name",
        "text_start": "byte index into event_text",
        "text_bytes": "bytes (UTF-8)",
    },
}

DESCRIPTIONS: dict[str, str] = {
    "steps": "One row per ZO step; its q samples are samples[sample_start:sample_start+q].",
    "samples": "One row per perturbation: seed, device losses (L+, L-), projected gradient, "
    "quantized coefficient sent in APPLY.",
    "evals": "One row per evaluation of the model on a data split.",
    "timing": "One row per timed command; source says who measured it: device (cycle counter), "
    "modeled (cost model) or host (wall clock), in seconds; or instr: the instructions QEMU "
    "executed (-icount), a count.",
    "events": "Retries, resyncs, resets, faults and notes, in order; each one's text is "
    "event_text[text_start:text_start+text_bytes].",
    EVENT_TEXT: "The events' texts, UTF-8, one after the other.",
    "model_blob": "The exact model bytes sent to the device (for replay).",
}

#: Widths of the fixed-size string columns, for validation before writing.
STRING_WIDTHS = {
    ("evals", "split"): 8,
    ("timing", "command"): 16,
    ("timing", "source"): 8,
    ("events", "kind"): 16,
}

#: Filters used for the tables only when the writer is asked to compress (see the format doc:
#: under SWMR, rewriting a partial gzip chunk leaks its old copy, so appendable tables are
#: stored unfiltered by default). model_blob, written once, is always gzip'd.
GZIP_LEVEL = 1
GZIP = {"compression": "gzip", "compression_opts": GZIP_LEVEL, "shuffle": True}
#: Rows per chunk (about 16-32 KiB each): an empty run costs ~70 KiB on disk.
CHUNK_ROWS = {"steps": 256, "samples": 1024, "evals": 64, "timing": 512, "events": 64}
CHUNK_ROWS[EVENT_TEXT] = EVENT_TEXT_CHUNK  # bytes
#: Chunks of the gzip'd tables written at close are up to this many times larger (better ratio).
COMPACT_CHUNK_FACTOR = 16


def compact_chunk_rows(name: str, n_rows: int) -> int:
    """Rows per chunk of a table rewritten with gzip at close (at least 1)."""
    return max(1, min(int(n_rows), CHUNK_ROWS[name] * COMPACT_CHUNK_FACTOR))


def run_id(n: int) -> str:
    """The group name of run number n: 0 -> '0000'."""
    return f"{n:0{RUN_ID_WIDTH}d}"


# ---------------------------------------------------------------- values against the schema

AttrValue = str | int | float | bool

I32 = (-(2**31), 2**31 - 1)
U32 = (0, 2**32 - 1)
I64 = (-(2**63), 2**63 - 1)


def utc_now() -> str:
    """The current time as ISO 8601 UTC, e.g. 2026-01-31T12:00:00.123Z."""
    now = _dt.datetime.now(_dt.UTC)
    return now.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def attr_value(key: str, value: object) -> AttrValue:
    """A run attribute as a plain HDF5-storable scalar, or a TraceError."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        if not I64[0] <= int(value) <= I64[1]:
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


def config_json(config: Mapping[str, Any]) -> str:
    """The run config as JSON text (sorted keys), or a TraceError."""
    try:
        return json.dumps(dict(config), sort_keys=True, default=_json_default)
    except (TypeError, ValueError) as exc:
        raise TraceError(
            f"the run config cannot be stored as JSON ({exc})",
            "keep the config to str/int/float/bool/list/dict values",
        ) from None


def int_column(values: Sequence[Any], lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Values as int64 and a mask of those that are not integers in [lo, hi]."""
    arr = np.asarray(values) if len(values) else np.zeros(0, np.int64)
    if arr.dtype.kind in "iub" and arr.ndim == 1:
        bad = arr > np.uint64(hi) if arr.dtype == np.uint64 else (arr < lo) | (arr > hi)
        return np.where(bad, 0, arr).astype(np.int64), bad
    if arr.dtype.kind == "f" and arr.ndim == 1 and max(abs(lo), abs(hi)) <= 2**53:
        # e.g. a block where one value was a float: whole floats in range are exact
        with np.errstate(invalid="ignore"):
            bad = ~(np.isfinite(arr) & (arr == np.round(arr)) & (arr >= lo) & (arr <= hi))
        return np.where(bad, 0, arr).astype(np.int64), bad
    ok = [isinstance(v, int | np.integer) and lo <= int(v) <= hi for v in values]
    bad = ~np.asarray(ok, dtype=bool)
    out = np.array([int(v) if k else 0 for v, k in zip(values, ok, strict=True)], np.int64)
    return out, bad


def float_column(values: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
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


#: Columns whose values have a tighter lower bound than their type's.
COLUMN_MINIMUM = {("steps", "q"): 0}


def check_column(
    table: str, column: str, values: Sequence[Any]
) -> tuple[np.ndarray, np.ndarray, str]:
    """``values`` for ``table``.``column`` checked against the column's type in DATASETS:
    (values as int64 or float64, mask of the values that do not fit, the expected type)."""
    kind = DATASETS[table][column]
    if kind.kind == "f":
        return (*float_column(values), f"f{kind.itemsize}")
    info = np.iinfo(kind)
    lo = COLUMN_MINIMUM.get((table, column))
    expected = f"{kind.kind}{8 * kind.itemsize}"
    if lo is not None:
        expected += f" >= {lo}"
    return (*int_column(values, info.min if lo is None else lo, info.max), expected)


def short_ascii(value: object, what: str, width: int) -> str:
    """``value`` if it is an ASCII str that fits a fixed-width column, else a TraceError."""
    if not isinstance(value, str) or not value.isascii() or len(value) > width:
        raise TraceError(
            f"{what} must be an ASCII string of at most {width} characters, got {value!r}",
            f"use a short name such as the ones in docs/trace-format.md ({what})",
        )
    return value


# ---------------------------------------------------------------- the HDF5 superblock flag
# A writer that dies leaves the "file open for (SWMR) write" flags set in the superblock; HDF5
# then refuses any non-SWMR open. Clearing them is what `h5clear -s` does: superblock
# version 2/3 = signature(8) version(1) sizeof_offsets(1) sizeof_lengths(1) flags(1)
# 4 addresses, then a Jenkins lookup3 checksum of all the bytes before it.

_SIGNATURE = b"\x89HDF\r\n\x1a\n"
_M32 = 0xFFFFFFFF


def _rot(x: int, k: int) -> int:
    return ((x << k) | (x >> (32 - k))) & _M32


def lookup3(data: bytes, initval: int = 0) -> int:
    """Bob Jenkins' lookup3 hashlittle(), the checksum HDF5 puts on its metadata."""
    n = len(data)
    a = b = c = (0xDEADBEEF + n + initval) & _M32
    i = 0
    while n > 12:
        a = (a + int.from_bytes(data[i : i + 4], "little")) & _M32
        b = (b + int.from_bytes(data[i + 4 : i + 8], "little")) & _M32
        c = (c + int.from_bytes(data[i + 8 : i + 12], "little")) & _M32
        a = (a - c) & _M32 ^ _rot(c, 4)
        c = (c + b) & _M32
        b = (b - a) & _M32 ^ _rot(a, 6)
        a = (a + c) & _M32
        c = (c - b) & _M32 ^ _rot(b, 8)
        b = (b + a) & _M32
        a = (a - c) & _M32 ^ _rot(c, 16)
        c = (c + b) & _M32
        b = (b - a) & _M32 ^ _rot(a, 19)
        a = (a + c) & _M32
        c = (c - b) & _M32 ^ _rot(b, 4)
        b = (b + a) & _M32
        n -= 12
        i += 12
    if n == 0:
        return c
    tail = data[i : i + n] + bytes(12 - n)
    a = (a + int.from_bytes(tail[0:4], "little")) & _M32
    b = (b + int.from_bytes(tail[4:8], "little")) & _M32
    c = (c + int.from_bytes(tail[8:12], "little")) & _M32
    for x, y, k in (
        (2, 1, 14),
        (0, 2, 11),
        (1, 0, 25),
        (2, 1, 16),
        (0, 2, 4),
        (1, 0, 14),
        (2, 1, 24),
    ):
        v = [a, b, c]
        v[x] = ((v[x] ^ v[y]) - _rot(v[y], k)) & _M32
        a, b, c = v
    return c


def clear_open_flags(fd: int) -> bool:
    """Clear the superblock's open-for-write flags of the HDF5 file open as ``fd``.

    Returns False if there was nothing to clear (or the superblock is not version 2/3). The
    caller must know that no process is writing the file.
    """
    head = os.pread(fd, 64, 0)
    if not head.startswith(_SIGNATURE) or len(head) < 12 or head[8] not in (2, 3):
        return False
    end = 12 + 4 * head[9]
    if head[11] == 0 or len(head) < end + 4:
        return False
    block = bytearray(head[:end])
    if lookup3(bytes(block)) != int.from_bytes(head[end : end + 4], "little"):
        return False  # not a superblock we understand: leave it alone
    block[11] = 0
    os.pwrite(fd, bytes(block) + lookup3(bytes(block)).to_bytes(4, "little"), 0)
    os.fsync(fd)
    return True


def _superblock(fd: int) -> tuple[bytearray, int] | None:
    """The version 2/3 superblock before its checksum, and its offset size; None if the file
    does not start with one whose checksum holds."""
    head = os.pread(fd, 64, 0)
    if not head.startswith(_SIGNATURE) or len(head) < 12 or head[8] not in (2, 3):
        return None
    end = 12 + 4 * head[9]
    if len(head) < end + 4:
        return None
    block = bytearray(head[:end])
    if lookup3(bytes(block)) != int.from_bytes(head[end : end + 4], "little"):
        return None
    return block, head[9]


def raise_end_of_allocation(fd: int) -> bool:
    """Raise the superblock's end-of-allocation address to the file's size (what
    ``h5clear --increment=0`` does): a write cut short may leave metadata on disk that lies
    past the stored address, which HDF5 then refuses to read. False if nothing changed.

    The caller must know that no process is writing the file.
    """
    found = _superblock(fd)
    if found is None:
        return False
    block, width = found
    at = 12 + 2 * width  # base address, extension address, then the end-of-file address
    eoa = int.from_bytes(block[at : at + width], "little")
    size = os.fstat(fd).st_size
    if size <= eoa:
        return False
    block[at : at + width] = size.to_bytes(width, "little")
    os.pwrite(fd, bytes(block) + lookup3(bytes(block)).to_bytes(4, "little"), 0)
    os.fsync(fd)
    return True
