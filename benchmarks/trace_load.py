"""A long, valid thread-jobs trace for the check-trace benchmark.

The thread-jobs reference is driven directly (no kit in the loop) through a
repeating cycle on four threads: start a job, move the clock, report its
outcome, reach a turn boundary (the result is injected), and list a
thread's jobs every tenth job. Each answer is written as the reference gave
it, so the trace conforms and every line is checked for real; ids never
repeat, so the model keeps working through retention the whole way.
"""

from __future__ import annotations

import json
from pathlib import Path

from lifecycle_references.thread_jobs import ReferenceAdapter

__all__ = ["write_trace"]


def write_trace(path: Path, events: int) -> int:
    """Write a trace of at least ``events`` events to ``path``; returns how many."""
    adapter = ReferenceAdapter()
    me = adapter.describe()
    adapter.reset(0)
    written, now = 0, 0
    with path.open("w", encoding="utf-8") as out:
        out.write(
            json.dumps(
                {
                    "trace": 1,
                    "spec": {"id": "thread-jobs", "version": "1.0.0"},
                    "profile": me.get("profile"),
                    "parameters": me.get("parameters") or {},
                    "implementation": {"name": me["name"], "version": me.get("version")},
                    "clock": "virtual",
                    "source": "benchmarks/trace_load.py",
                }
            )
            + "\n"
        )

        def call(operation: str, args: dict) -> None:
            nonlocal written
            out.write(
                json.dumps({"call": operation, "args": args, **adapter.call(operation, args), "at_ms": now}) + "\n"
            )
            written += 1

        for thread in range(4):
            call("begin_turn", {"thread_id": f"t{thread}"})
        job = 0
        while written < events:
            thread = f"t{job % 4}"
            call(
                "start_job", {"thread_id": thread, "tool_call_id": f"c{job}", "tool_name": "build", "job_id": f"j{job}"}
            )
            now += 1
            out.write(json.dumps({"clock_ms": now, "effects": adapter.set_clock(now) or []}) + "\n")
            written += 1
            call("observe_outcome", {"job_id": f"j{job}", "outcome": "completed", "payload": f"ok {job}"})
            call("turn_boundary", {"thread_id": thread})
            if job % 10 == 0:
                call("list_jobs", {"thread_id": thread})
            job += 1
    adapter.close()
    return written
