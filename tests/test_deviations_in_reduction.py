"""The deviations file holds beyond the exploration (issue 61): reducing a
failure, hunting for more and the search for a shorter face never build a
counterexample from a call the file ``avoid``s (the reduction's "leave out
an optional argument" pass once made starts without their explicit id), and
an avoided call they would have tried is not counted as avoided."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conformance.engine.deviations import load_deviations
from conformance.engine.reduce import replay_steps
from conformance.engine.runner import RunConfig, run_conformance
from conformance.engine.session import Session
from conformance.specs import resolve_spec
from lifecycle_references.thread_jobs import ReferenceAdapter
from lifecycle_references.thread_jobs.mutants import MUTANTS
from statemachines import load_spec

EXPLICIT_IDS = {
    "id": "EXPLICIT-IDS",
    "reason": "Our runtime is always given the job id; starts without one are out of scope.",
    "avoid": {"operation": "start_job", "when": "!has(args.job_id)"},
}
KNOWN_JOB = {
    "id": "KNOWN-JOB",
    "reason": "A start naming a job id that is already known is out of scope.",
    "avoid": {"operation": "start_job", "when": "record != null"},
}
START = {"thread_id": "t1", "tool_call_id": "a", "tool_name": "a"}


def _file(tmp_path: Path, entries: list[dict]) -> Path:
    path = tmp_path / "deviations.yaml"
    path.write_text(yaml.safe_dump({"deviations": 1, "entries": entries}, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def spec():
    return load_spec(resolve_spec("thread-jobs"))


def _session(spec, deviations) -> Session:
    session = Session(spec, spec.default_parameters(), ReferenceAdapter)
    session.deviations = deviations
    return session


# -- the filter ------------------------------------------------------------------------------------------------
def test_an_avoid_asked_without_counting_is_not_counted(spec, tmp_path):
    deviations = load_deviations(_file(tmp_path, [EXPLICIT_IDS]), spec=spec)
    (entry,) = deviations.entries
    assert deviations.avoid("start_job", START, count=False) is entry and entry.count == 0
    assert deviations.avoid("start_job", {**START, "job_id": "j1"}, count=False) is None
    assert deviations.avoid("start_job", START) is entry and entry.count == 1


def test_an_avoid_by_arguments_alone_leaves_out_entries_that_read_the_record(spec, tmp_path):
    deviations = load_deviations(_file(tmp_path, [EXPLICIT_IDS, KNOWN_JOB]), spec=spec)
    assert deviations.avoids_by_arguments("start_job", START).id == "EXPLICIT-IDS"
    assert deviations.avoids_by_arguments("start_job", {**START, "job_id": "j1"}) is None  # the record decides
    assert all(d.count == 0 for d in deviations.entries)


def test_a_replay_stops_before_an_avoided_call_and_sends_none(spec, tmp_path):
    session = _session(spec, load_deviations(_file(tmp_path, [KNOWN_JOB]), spec=spec))
    steps = [
        {"call": "start_job", "args": {**START, "job_id": "j1"}},
        {"call": "start_job", "args": {**START, "tool_call_id": "b", "job_id": "j1"}},  # names a known job: avoided
    ]
    assert replay_steps(session, steps) is None
    assert [entry.get("operation") for entry in session.trace] == ["start_job"]  # the second was never sent
    assert session.deviations.entries[0].count == 0


# -- end to end, with a shipped mutant -------------------------------------------------------------------------------
def _calls(report: dict) -> list[dict]:
    stateful = report["stateful"]
    failures = [stateful["failure"], *(stateful.get("more_failures") or [])]
    calls = []
    for failure in failures:
        doc = yaml.safe_load(Path(failure["counterexample_file"]).read_text(encoding="utf-8"))
        for step in doc["steps"]:
            calls += step.get("concurrently") or ([step] if "call" in step else [])
    return calls


@pytest.mark.slow  # an exploration with its reduction and hunt (about 10 s)
@pytest.mark.hypothesis
@pytest.mark.parametrize("mutant", ["list_cross_thread", "inspect_cross_thread"])
def test_no_counterexample_of_a_failing_run_holds_an_avoided_call(tmp_path, spec, mutant):
    # Without the file these counterexamples start their job without a job id: the
    # reduction leaves the optional argument out, the implementation then chooses one.
    config = RunConfig(
        spec_path=resolve_spec("thread-jobs"),
        adapter_factory=MUTANTS[mutant].factory,
        profile="quick",
        scenarios=False,
        report_dir=str(tmp_path / "reports"),
        deviations=str(_file(tmp_path, [EXPLICIT_IDS])),
        example_db="none",
        max_failures=3,
    )
    report = run_conformance(config)
    assert report["stateful"]["verdict"] == "fail", report["stateful"]
    starts = [call for call in _calls(report) if call["call"] == "start_job"]
    assert starts and all("job_id" in call["args"] for call in starts), starts


CANCEL_LIST = {
    "id": "CANCEL-LIST",
    "reason": "Our job tool is always called with a cancel list; calls without one are out of scope.",
    "avoid": {"operation": "job_tool", "when": "!has(args.cancel)"},
}


@pytest.mark.slow  # an exploration with its reduction and hunt (about 12 s)
@pytest.mark.hypothesis
def test_no_counterexample_holds_a_job_tool_call_without_the_argument_the_file_requires(tmp_path):
    # Without the file the counterexample's job_tool call leaves its cancel list out.
    from lifecycle_references.async_jobs import MUTANTS as ASYNC_MUTANTS

    config = RunConfig(
        spec_path=resolve_spec("async-jobs"),
        adapter_factory=ASYNC_MUTANTS["job-manager.watch_not_suppressing"].factory,
        profile="quick",
        scenarios=False,
        report_dir=str(tmp_path / "reports"),
        deviations=str(_file(tmp_path, [CANCEL_LIST])),
        example_db="none",
        max_failures=3,
    )
    report = run_conformance(config)
    assert report["stateful"]["verdict"] == "fail", report["stateful"]
    tool_calls = [call for call in _calls(report) if call["call"] == "job_tool"]
    assert tool_calls and all("cancel" in call["args"] for call in tool_calls), tool_calls
