"""Writing traces from your own system (docs/traces.md).

    from conformance.traces import TraceWriter

    with TraceWriter("run.jsonl", "thread-jobs", "1.0.0", implementation={"name": "my-runtime"}) as trace:
        answer = runtime.start_job(...)                    # your code, as it really runs
        trace.call("start_job", args, result=answer, effects=sent_effects, at_ms=clock())
        trace.clock(clock(), effects=timeouts_fired)
        trace.reset()                                      # a restart: a new, independent session

Every line is checked against the trace schema as it is written, so a
recorder bug shows up where it happens, not later in ``check-trace``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Any

from jsonschema import Draft202012Validator

from ..reporting.safe_files import open_new
from .format import TRACE_FORMAT, TraceError, trace_schema

__all__ = ["TraceWriter"]

_NOTHING = object()


class TraceWriter:
    """Write a trace: the header at once, then one line per event."""

    def __init__(
        self,
        target: str | Path | IO[str],
        spec_id: str,
        spec_version: str | None = None,
        *,
        profile: str | None = None,
        parameters: dict | None = None,
        implementation: dict | None = None,
        source: str | None = None,
        clock: str = "virtual",
    ):
        self._out: IO[str]
        if isinstance(target, (str, os.PathLike)):  # a file this writer opens, and so closes
            self._own, self._out = True, open_new(target)
        else:
            self._own, self._out = False, target
        self._validator = Draft202012Validator(trace_schema())
        header: dict[str, Any] = {"trace": TRACE_FORMAT, "spec": {"id": spec_id}, "clock": clock}
        if spec_version:
            header["spec"]["version"] = spec_version
        for key, value in (
            ("profile", profile),
            ("parameters", parameters),
            ("implementation", implementation),
            ("source", source),
        ):
            if value is not None:
                header[key] = value
        self._write(header)

    def _write(self, line: dict) -> None:
        errors = sorted(self._validator.iter_errors(line), key=lambda e: e.path)
        if errors:
            raise TraceError(f"not a valid trace line ({errors[0].message}): {json.dumps(line)[:200]}")
        self._out.write(json.dumps(line, ensure_ascii=False) + "\n")

    def call(
        self,
        operation: str,
        args: dict,
        *,
        result: Any = _NOTHING,
        error: dict | None = None,
        effects: list[dict] | None = None,
        at_ms: int | None = None,
        start_ms: int | None = None,
        end_ms: int | None = None,
        files: dict[str, str] | None = None,
    ) -> None:
        """One operation and its answer: ``result``, or ``error`` = {"kind", "message"}."""
        if (result is _NOTHING) == (error is None):
            raise TraceError(f"{operation}: give exactly one of result= and error=")
        line: dict[str, Any] = {"call": operation, "args": args}
        line.update({"result": result} if error is None else {"error": error})
        for key, value in (
            ("effects", effects),
            ("at_ms", at_ms),
            ("start_ms", start_ms),
            ("end_ms", end_ms),
            ("files", files),
        ):
            if value is not None:
                line[key] = value
        self._write(line)

    def clock(self, now_ms: int, effects: list[dict] | None = None, files: dict[str, str] | None = None) -> None:
        """The clock moved to ``now_ms``; ``effects`` are what time caused."""
        line: dict[str, Any] = {"clock_ms": now_ms, "effects": effects or []}
        if files:
            line["files"] = files
        self._write(line)

    def reset(self) -> None:
        """A new, independent session starts (a restart, the next test)."""
        self._write({"reset": True})

    def close(self) -> None:
        if self._own:
            self._out.close()
        else:
            self._out.flush()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
