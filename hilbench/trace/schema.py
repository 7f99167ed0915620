"""The trace format, as data: version, dtypes, units and the attributes a run carries.

docs/trace-format.md is the human-readable contract; this module is its single source in code.
"""

from __future__ import annotations

import h5py
import numpy as np

FORMAT_NAME = "hilbench-trace"
FORMAT_VERSION = 1

RUNS_GROUP = "runs"
RUN_ID_WIDTH = 4

TIMING_SOURCES = ("device", "modeled", "host")
STATUSES = ("complete", "interrupted", "failed")
RUNNING = "running"

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
DEFAULTED_RUN_ATTRS = ("hilbench_version", "start_time", "git_revision")

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

STEPS_DTYPE = np.dtype(
    [
        ("step", "<i8"),
        ("q", "<i4"),
        ("sample_start", "<i8"),
        ("batch_seed", "<u4"),
        ("eps", "<i4"),
        ("lr", "<f8"),
        ("loss", "<f8"),
        ("forward_passes", "<i8"),
        ("fresh_words", "<i8"),
    ]
)
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
EVENTS_DTYPE = np.dtype(
    [("step", "<i8"), ("time", "<f8"), ("kind", "S16"), ("detail", VLEN_STR)]
)

DATASETS: dict[str, np.dtype] = {
    "steps": STEPS_DTYPE,
    "samples": SAMPLES_DTYPE,
    "evals": EVALS_DTYPE,
    "timing": TIMING_DTYPE,
    "events": EVENTS_DTYPE,
}

UNITS: dict[str, dict[str, str]] = {
    "steps": {
        "step": "index",
        "q": "count",
        "sample_start": "row index into samples",
        "batch_seed": "u32 seed",
        "eps": "weight LSB",
        "lr": "1",
        "loss": "nats",
        "forward_passes": "count (cumulative)",
        "fresh_words": "32-bit words (cumulative)",
    },
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
    "timing": {"step": "index", "command": "name", "duration_s": "s", "source": "name"},
    "events": {"step": "index", "time": "s since Unix epoch", "kind": "name", "detail": "text"},
}

DESCRIPTIONS: dict[str, str] = {
    "steps": "One row per ZO step; its q samples are samples[sample_start:sample_start+q].",
    "samples": "One row per perturbation: seed, device losses (L+, L-), projected gradient, "
    "quantized coefficient sent in APPLY.",
    "evals": "One row per evaluation of the model on a data split.",
    "timing": "One row per timed command; source says who measured it: device (cycle counter), "
    "modeled (cost model) or host (wall clock).",
    "events": "Retries, resyncs, resets, faults and notes, in order.",
    "model_blob": "The exact model bytes sent to the device (for replay).",
}

#: Widths of the fixed-size string columns, for validation before writing.
STRING_WIDTHS = {("evals", "split"): 8, ("timing", "command"): 16, ("timing", "source"): 8,
                 ("events", "kind"): 16}

#: Filters used for the tables only when the writer is asked to compress (see the format doc:
#: under SWMR, rewriting a partial gzip chunk leaks its old copy, so appendable tables are
#: stored unfiltered by default). model_blob, written once, is always gzip'd.
GZIP_LEVEL = 1
GZIP = {"compression": "gzip", "compression_opts": GZIP_LEVEL, "shuffle": True}
#: Rows per chunk (about 16-32 KiB each): an empty run costs ~70 KiB on disk.
CHUNK_ROWS = {"steps": 256, "samples": 1024, "evals": 64, "timing": 512, "events": 64}


def run_id(n: int) -> str:
    """The group name of run number n: 0 -> '0000'."""
    return f"{n:0{RUN_ID_WIDTH}d}"
