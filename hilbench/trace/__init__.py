"""HDF5 traces: the schema, an appending writer and a reader."""

from hilbench.trace.reader import Trace, list_runs
from hilbench.trace.schema import FORMAT_NAME, FORMAT_VERSION, TIMING_SOURCES
from hilbench.trace.writer import TraceWriter

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "TIMING_SOURCES", "Trace", "TraceWriter", "list_runs"]
