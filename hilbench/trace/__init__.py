"""HDF5 traces: the schema, an appending writer, a reader, limits for tests, and replay."""

from hilbench.trace.reader import (
    Final,
    Follower,
    ResumeState,
    RunInfo,
    Snapshot,
    Trace,
    list_runs,
    open_runs,
    run_infos,
)
from hilbench.trace.schema import FORMAT_NAME, FORMAT_VERSION, TIMING_SOURCES
from hilbench.trace.writer import Terminated, TraceWarning, TraceWriter, compact, writer_alive

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "TIMING_SOURCES",
    "Final",
    "Follower",
    "ResumeState",
    "RunInfo",
    "Snapshot",
    "Terminated",
    "Trace",
    "TraceWarning",
    "TraceWriter",
    "compact",
    "list_runs",
    "open_runs",
    "run_infos",
    "writer_alive",
]
