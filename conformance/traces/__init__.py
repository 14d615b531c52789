"""Passive conformance: recorded traces of a real system checked against a
spec (``conformance check-trace``), and the trace format (docs/traces.md)."""

from .check import TraceAdapter, check_traces
from .format import TRACE_FORMAT, TraceError, read_trace
from .run import check_trace_run
from .writer import TraceWriter

__all__ = ["TRACE_FORMAT", "TraceAdapter", "TraceError", "TraceWriter", "check_trace_run", "check_traces", "read_trace"]
