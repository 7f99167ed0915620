"""HDF5 traces: the schema, an appending writer, a reader, limits for tests, and replay.

Other packages import from here (or from limits, replay, plots, schema), never a private name."""

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
from hilbench.trace.resume_point import LoggedUpdate, ResumePoint, resume_point
from hilbench.trace.schema import FORMAT_NAME, FORMAT_VERSION, TIMING_SOURCES
from hilbench.trace.writer import Terminated, TraceWarning, TraceWriter, compact, writer_alive

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "TIMING_SOURCES",
    "Final",
    "Follower",
    "LoggedUpdate",
    "ResumePoint",
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
    "resume_point",
    "run_infos",
    "writer_alive",
]
