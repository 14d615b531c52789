"""``conformance check-trace``: traces in, the same reports and exit codes
as ``conformance run`` out."""
from __future__ import annotations

import time

from statemachines import SpecError

from ..engine.runner import (RunConfig, clear_report_files, mark_interrupted, new_report, write_report_files)
from ..specs import SpecNotFound
from .check import check_traces
from .format import TraceError

__all__ = ["check_trace_run"]


def check_trace_run(spec_path: str, traces: list[str], report_dir: str | None) -> dict:
    """Check ``traces`` against the spec; the report (also written to ``report_dir``)."""
    started = time.perf_counter()
    config = RunConfig(spec_path=spec_path, adapter_label="recorded trace(s): " + ", ".join(traces),
                       report_dir=report_dir, stateful=False)
    report = new_report(config)
    if report_dir:
        clear_report_files(report, report_dir)
    try:
        spec, params, entries, problems = check_traces(spec_path, traces)
        report["spec"] = {"id": spec.id, "version": spec.version, "title": spec.title, "path": spec_path,
                          "lifecycle": spec.lifecycle_summary()}
        report["implementation"] = {"adapter": report["implementation"]["adapter"], "name": None, "version": None,
                                    "profile": None, "parameters": {}, "capabilities": {}}
        report["parameters"] = params
        report["scenarios"] = entries
        report["problems"] += problems
        failed = any(e["verdict"] in ("fail", "error") for e in entries)
        report["verdict"], report["exit_code"] = ("fail", 1) if failed else ("pass", 0)
        if not entries:
            report["problems"].append({"kind": "trace-warning", "where": None,
                                       "message": "the traces hold no events: nothing was checked"})
    except TraceError as exc:
        report["problems"].append({"kind": "trace-error", "message": str(exc).split(": ", 1)[-1],
                                   "where": str(exc).split(": ", 1)[0]})
    except SpecError as exc:
        report["problems"] += [{"kind": "spec-error", "where": p.where,
                                "message": p.message + (f" (hint: {p.hint})" if p.hint else "")} for p in exc.problems]
    except SpecNotFound as exc:
        report["problems"].append({"kind": "spec-error", "message": str(exc), "where": spec_path})
    except KeyboardInterrupt as exc:
        mark_interrupted(report, exc, "the traces checked so far are not reported")
    report["duration_s"] = round(time.perf_counter() - started, 3)
    if report_dir:
        write_report_files(report, report_dir)
    return report
