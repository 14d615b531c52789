"""One cause, one failure, shortest first (conformance/engine/causes.py)."""

from __future__ import annotations

from conformance.engine.causes import group_by_cause, length_of
from conformance.engine.failures import Failure
from conformance.reporting import validate_report
from conformance.reporting._format import failed_checks


def _failure(operation: str, path: str, steps: int) -> Failure:
    trace = [{"index": i, "operation": "start_job", "args": {"n": i}} for i in range(steps - 1)]
    trace.append({"index": steps - 1, "operation": operation, "args": {}})
    return Failure(
        kind="divergence", message=f"{operation}: {path} differs", operation=operation, path=path, steps=trace
    )


def test_failures_come_shortest_first_whatever_order_they_were_found_in():
    long, middle, short = (
        _failure("list_jobs", "result.jobs", 69),
        _failure("get_job", "result", 40),
        _failure("turn_boundary", "result.injected", 5),
    )
    causes = group_by_cause([long, middle, short], {})
    assert [length_of(c) for c in causes] == [5, 40, 69]
    assert all(not c.symptoms for c in causes)


def test_a_failure_shown_to_first_fail_as_a_shorter_one_is_listed_under_it():
    eviction, null_job, tie = (
        _failure("list_jobs", "result.jobs", 69),
        _failure("get_job", "result", 68),
        _failure("turn_boundary", "result.injected[0]", 5),
    )
    unrelated = _failure("cancel_job", "result.changed", 9)
    # the eviction failure's steps, replayed with the masks lifted, first fail as the tie
    # failure (indexes aside); the null job's, as the eviction failure
    met = {
        id(eviction): {("divergence", "turn_boundary", "result.injected[*]")},
        id(null_job): {("divergence", "list_jobs", "result.jobs")},
    }
    causes = group_by_cause([eviction, null_job, tie, unrelated], met)
    assert causes == [tie, unrelated]
    assert tie.symptoms == [null_job, eviction]  # shortest first; the null job goes with the eviction it shows
    assert "also showed as 2 longer failure(s)" in tie.message and "list_jobs result.jobs (69 steps)" in tie.message
    assert not unrelated.symptoms


def test_the_reverse_direction_groups_too():
    short, long = _failure("turn_boundary", "result.injected", 5), _failure("list_jobs", "result.jobs", 30)
    causes = group_by_cause([long, short], {id(short): {("divergence", "list_jobs", "result.jobs")}})
    assert causes == [short] and short.symptoms == [long]


def test_a_report_lists_symptoms_under_their_cause_and_stays_valid():
    tie, eviction = _failure("turn_boundary", "result.injected", 5), _failure("list_jobs", "result.jobs", 20)
    [cause] = group_by_cause([eviction, tie], {id(eviction): {("divergence", "turn_boundary", "result.injected")}})
    report = {
        "kit": {"name": "lifecycle-conformance", "version": "0"},
        "verdict": "fail",
        "exit_code": 1,
        "scenarios": [],
        "stateful": {
            "verdict": "fail",
            "profile": "ci",
            "seed": 1,
            "examples": 3,
            "steps": 40,
            "failure": cause.to_dict(),
        },
    }
    labels = [label for label, _ in failed_checks(report)]
    assert labels == ["stateful exploration", "stateful exploration, failure 1, symptom 1 (same cause)"]
    errors = [e for e in validate_report(report) if "symptoms" in e]
    assert errors == [], errors
    assert "symptoms" not in _failure("a", "b", 1).to_dict()  # absent when there are none
