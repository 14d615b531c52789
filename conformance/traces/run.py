"""``conformance check-trace``: traces in, the same reports and exit codes
as ``conformance run`` out."""

from __future__ import annotations

import time

from statemachines import Problem, Spec, SpecError

from ..engine.deviations import Deviations, DeviationsError
from ..engine.runner import RunConfig, clear_report_files, mark_interrupted, new_report, write_report_files
from ..specs import SpecNotFound
from .check import check_traces
from .format import TraceError
from .to_scenario import recorded_assumes, scenario_from_trace, write_scenario_file

__all__ = ["check_trace_run"]


def check_trace_run(
    spec_path: str,
    traces: list[str],
    report_dir: str | None,
    *,
    to_scenario: str | None = None,
    scenario_id: str = "T1",
    deviations: str | None = None,
) -> dict:
    """Check ``traces`` against the spec; the report (also written to
    ``report_dir``). With ``to_scenario``, the first failing session becomes
    a scenario file there (``report["_scenario_file"]``)."""
    started = time.perf_counter()
    accepted: list[Deviations] = []  # the loaded deviations, once check_traces has read them
    config = RunConfig(
        spec_path=spec_path,
        adapter_label="recorded trace(s): " + ", ".join(traces),
        report_dir=report_dir,
        stateful=False,
        deviations=deviations,
    )
    report = new_report(config)
    if report_dir:
        clear_report_files(report, report_dir)
    try:
        spec, params, entries, problems, identity = check_traces(
            spec_path, traces, deviations=deviations, accepted=accepted
        )
        _describe_run(report, spec_path, spec, params, identity)
        sources = [entry.pop("_source") for entry in entries]
        report["scenarios"] = entries
        if to_scenario:
            assumes = recorded_assumes(spec, params, (identity.get("parameters") or {}).keys())
            _write_regression(report, entries, sources, to_scenario, scenario_id, assumes, identity.get("profile"))
        report["problems"] += problems
        _conclude(report, entries, accepted[0] if accepted else None)
    except DeviationsError as exc:
        report["problems"] += [
            {"kind": "deviations-error", "message": line, "where": deviations} for line in exc.problems
        ]
    except TraceError as exc:
        report["problems"].append(
            {"kind": "trace-error", "message": str(exc).split(": ", 1)[-1], "where": str(exc).split(": ", 1)[0]}
        )
    except SpecError as exc:
        report["problems"] += [_spec_problem(p) for p in exc.problems]
    except SpecNotFound as exc:
        report["problems"].append({"kind": "spec-error", "message": str(exc), "where": spec_path})
    except KeyboardInterrupt as exc:
        mark_interrupted(report, exc, "the traces checked so far are not reported")
    except (RecursionError, MemoryError) as exc:
        report["problems"].append(_input_too_large(traces, exc))
    except Exception as exc:  # a bug of the kit: the reports are written all the same, verdict error
        report["verdict"], report["exit_code"] = "error", 2
        report["problems"].append(
            {
                "kind": "internal-error",
                "where": ", ".join(traces),
                "message": f"internal error in the conformance kit while checking the traces: "
                f"{type(exc).__name__}: {str(exc)[:300]}",
            }
        )
    if accepted:
        report["deviations"] = accepted[0].to_report()
    report["duration_s"] = round(time.perf_counter() - started, 3)
    if report_dir:
        write_report_files(report, report_dir)
    return report


def _input_too_large(traces: list[str], exc: BaseException) -> dict:
    what = "nested too deeply" if isinstance(exc, RecursionError) else "too large to hold in memory"
    return {
        "kind": "trace-error",
        "where": ", ".join(traces),
        "message": f"a trace holds a value {what} to check; split or trim the trace",
    }


def _describe_run(report: dict, spec_path: str, spec: Spec, params: dict, identity: dict) -> None:
    """The spec, the implementation the traces' header names, and the parameters."""
    report["spec"] = {
        "id": spec.id,
        "version": spec.version,
        "title": spec.title,
        "path": spec_path,
        "lifecycle": spec.lifecycle_summary(),
    }
    report["implementation"] = {
        "adapter": report["implementation"]["adapter"],
        "name": identity.get("name"),
        "version": identity.get("version"),
        "profile": identity.get("profile"),
        "parameters": identity.get("parameters") or {},
        "capabilities": {},
    }
    report["parameters"] = params


def _write_regression(
    report: dict,
    entries: list[dict],
    sources: list,
    to_scenario: str,
    scenario_id: str,
    assumes: str | None = None,
    profile: str | None = None,
) -> None:
    """The first failing session (not an error) as a scenario file, assuming
    the recorded parameters (``to_scenario.recorded_assumes``)."""
    failing = [(e, src) for e, src in zip(entries, sources) if e["verdict"] == "fail" and src[2] is not None]
    if not failing:
        return
    entry, (trace_path, first, line) = failing[0]
    write_scenario_file(
        to_scenario,
        scenario_from_trace(
            trace_path,
            first,
            line,
            scenario_id=scenario_id,
            failure_message=entry["failure"]["message"],
            assumes=assumes,
            profile=profile,
        ),
    )
    report["_scenario_file"] = to_scenario


def _conclude(report: dict, entries: list[dict], accepted: Deviations | None) -> None:
    """Verdict and exit code: a failing session or an expired deviation fails the run."""
    expired = accepted.expired_problems() if accepted is not None else []  # one per expired entry
    report["problems"] += expired
    failed = any(e["verdict"] in ("fail", "error") for e in entries) or bool(expired)
    report["verdict"], report["exit_code"] = ("fail", 1) if failed else ("pass", 0)
    if not entries:
        report["problems"].append(
            {"kind": "trace-warning", "where": None, "message": "the traces hold no events: nothing was checked"}
        )


def _spec_problem(problem: Problem) -> dict:
    return {
        "kind": "spec-error",
        "where": problem.where,
        "message": problem.message + (f" (hint: {problem.hint})" if problem.hint else ""),
    }
