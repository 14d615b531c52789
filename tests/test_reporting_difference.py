"""summary.md shows what differs, not both whole values (issue 33, item 6):
counts, missing, unexpected and reordered items, the first differing
fields; a race says what its closest order left missing; at most about 150
lines per failure; the state diagram and the exploration's tables say what
they count."""

from __future__ import annotations

import copy
import io

import pytest
from reference_calls import thread_jobs_starts
from rich.console import Console

from conformance.engine.linearize import linearize
from conformance.engine.runner import RunConfig, run_conformance
from conformance.mutants import load_mutants
from conformance.reporting import render_console_summary, render_summary_markdown
from conformance.reporting.difference import describe_difference, identity_key
from conformance.reporting.markdown import COUNTS_NOTE, DIAGRAM_LEGEND
from conformance.specs import resolve_spec
from statemachines import load_spec


def _jobs(n: int) -> list[dict]:
    return [
        {"job_id": f"job-{i}", "tool_call_id": f"c{i}", "tool_name": "shell", "status": "running"}
        for i in range(1, n + 1)
    ]


def test_lists_of_records_say_counts_missing_unexpected_and_fields():
    expected = _jobs(64)
    observed = copy.deepcopy(expected[:40] + expected[41:]) + [{**expected[0], "job_id": "job-99"}]
    observed[2]["status"] = "completed"
    found = describe_difference({"jobs": expected}, {"jobs": observed})
    text = "\n".join(found.lines)
    assert "jobs: 64 item(s) on both sides" in text
    assert 'missing (job_id): "job-41"' in text
    assert 'unexpected (job_id): "job-99"' in text
    assert 'jobs[job_id="job-3"].status: expected "running", observed "completed"' in text
    assert len(found.lines) <= 24


def test_reordered_items_and_keys_of_objects():
    expected, observed = _jobs(5), _jobs(5)
    observed[1], observed[3] = observed[3], observed[1]
    text = "\n".join(describe_difference(expected, observed).lines)
    assert 'reordered (job_id): from the 2nd item they share, expected ["job-2", "job-3", "job-4"' in text
    text = "\n".join(describe_difference({"a": 1, "b": 2}, {"b": 3, "c": 4}).lines)
    assert 'missing key(s) "a"' in text and 'unexpected key(s) "c"' in text and "b: expected 2, observed 3" in text
    assert identity_key([{"x": 1, "name": "a"}], [{"x": 1, "name": "b"}]) == "name"


def test_a_failure_with_64_job_lists_stays_short():
    expected = {"result": {"jobs": _jobs(64)}}
    observed = {"result": {"jobs": _jobs(64)[:-1]}}
    steps = [
        {"index": i, "operation": "list_jobs", "args": {"thread_id": "t1"}, "observed": observed} for i in range(130)
    ]
    failure = {
        "kind": "divergence",
        "operation": "list_jobs",
        "args": {"thread_id": "t1"},
        "step": 129,
        "path": "result.jobs",
        "message": "\n".join(f"line {i}" for i in range(300)),
        "expected": expected["result"]["jobs"],
        "observed": observed["result"]["jobs"],
        "steps": steps,
    }
    report = {"verdict": "fail", "exit_code": 1, "scenarios": [], "stateful": {"verdict": "fail", "failure": failure}}
    summary = render_summary_markdown(report)
    section = summary[summary.index("## Failures") :]
    assert len(section.splitlines()) <= 150, len(section.splitlines())
    assert "**What differs** at `result.jobs`" in section
    assert "expected 64 item(s), observed 63" in section
    assert 'missing (job_id): "job-64"' in section
    assert '"job-50"' not in section  # neither whole list is printed, nor a step's whole answer
    assert max(len(line) for line in section.splitlines()) < 400
    assert "whole `expected` and `observed` value(s) are in report.json" in section
    assert "step(s) left out" in section and "← **first divergence**" in section


def test_a_race_says_what_its_closest_order_left_missing():
    session, runtime, calls, responses = thread_jobs_starts(5)
    listed = runtime.call("list_jobs", {"thread_id": "t1"})
    lost = listed["result"]["jobs"].pop(2)["job_id"]
    failure = linearize(session, calls, responses, 0, [("list_jobs", {"thread_id": "t1"}, listed)])
    session.close()
    assert failure is not None and failure.kind == "linearizability"
    assert f'result.jobs: expected 5 item(s), got 4; missing job_id "{lost}"' in failure.message


def test_the_diagram_and_the_tables_say_what_they_count():
    lifecycle = {
        "initial": "running",
        "states": [{"name": "running"}, {"name": "done", "terminal": True}],
        "transitions": [{"trigger": "finish", "source": ["running"], "dest": "done"}],
    }
    stateful = {"verdict": "pass", "coverage": {"transitions": {"running -finish-> done": 596}}}
    report = {
        "verdict": "pass",
        "exit_code": 0,
        "scenarios": [],
        "stateful": stateful,
        "spec": {"id": "x", "lifecycle": lifecycle},
        "coverage": {"transitions": {"running -finish-> done": 600}},
    }
    summary = render_summary_markdown(report)
    assert COUNTS_NOTE in summary and DIAGRAM_LEGEND in summary
    assert "the exploration's alone" in DIAGRAM_LEGEND and "not the replays that reduce a failure" in COUNTS_NOTE


@pytest.mark.slow
def test_without_scenarios_the_diagram_counts_what_the_table_counts():
    """The run's transition counts (the diagram's) add nothing to the
    exploration's (the table's) when no scenario ran: the replays that
    reduce a failure are not counted in either."""
    spec_path = resolve_spec("thread-jobs")
    mutant = load_mutants(load_spec(spec_path).implementations["mutants"])["evict_at_limit"]
    config = RunConfig(
        spec_path=spec_path, adapter_factory=mutant.factory, profile="quick", seed=1, report_dir=None, scenarios=False
    )
    report = run_conformance(config)
    assert report["stateful"]["verdict"] == "fail"
    assert report["coverage"]["transitions"] == report["stateful"]["coverage"]["transitions"]


def test_the_console_says_what_differs_in_a_few_lines():
    failure = {
        "kind": "divergence",
        "operation": "list_jobs",
        "path": "result.jobs",
        "message": "list_jobs: result.jobs: expected 64 item(s), got 63",
        "expected": _jobs(64),
        "observed": _jobs(64)[:-1],
    }
    report = {"verdict": "fail", "exit_code": 1, "scenarios": [], "stateful": {"verdict": "fail", "failure": failure}}
    console = Console(record=True, width=120, force_terminal=False, file=io.StringIO())
    render_console_summary(report, console)
    text = console.export_text()
    assert "differs: the list: expected 64 item(s), observed 63" in text  # the value at the path printed above
    assert 'differs: missing (job_id): "job-64"' in text


def _console_with_steps(count: int, operations: tuple[str, ...] = ("start_job", "get_job")) -> str:
    steps = [
        {"operation": operations[(i - 1) % len(operations)], "args": {"label": f"job-{i}"}} for i in range(1, count + 1)
    ]
    failure = {"kind": "divergence", "operation": "list_jobs", "message": "list_jobs: differs", "steps": steps}
    report = {"verdict": "fail", "exit_code": 1, "scenarios": [], "stateful": {"verdict": "fail", "failure": failure}}
    console = Console(record=True, width=120, force_terminal=False, file=io.StringIO())
    render_console_summary(report, console)
    return console.export_text()


def test_a_short_counterexample_is_printed_whole_on_the_console():
    text = _console_with_steps(4)
    assert "4 step(s) lead here" in text
    assert all(f'label="job-{i}"' in text for i in range(1, 5)), text
    assert "earlier step(s)" not in text


def test_a_long_counterexample_prints_its_last_steps_and_says_so():
    text = _console_with_steps(14)  # no run of one operation to fold: too long to print whole
    assert "14 step(s) lead here" in text and "... 11 earlier step(s) in the file; the last 3:" in text
    assert 'label="job-12"' in text and 'label="job-14"' in text
    assert 'label="job-11"' not in text


def test_a_long_counterexample_of_runs_of_one_operation_is_printed_folded():
    # a table filled to its limit, then the step that matters: each run shows its first and last call
    text = _console_with_steps(20, operations=("start_job",) * 9 + ("job_tool",) + ("start_job",) * 10)
    assert "20 step(s) lead here" in text and "earlier step(s)" not in text
    assert 'start_job(label="job-1")' in text and "... 7 more start_job calls" in text
    assert 'start_job(label="job-9")' in text and 'job_tool(label="job-10")' in text
    assert 'start_job(label="job-11")' in text and "... 8 more start_job calls" in text
    assert 'start_job(label="job-20")' in text and 'start_job(label="job-12")' not in text
