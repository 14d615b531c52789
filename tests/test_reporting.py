"""Tests for conformance.reporting: schema, report.json, junit.xml, summary.md, console."""

from __future__ import annotations

import copy
import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from rich.console import Console

from conformance.reporting import (
    InvalidReportError,
    ReportingError,
    ReportWriteError,
    mermaid_state_diagram,
    render_console_summary,
    render_junit_xml,
    render_summary_markdown,
    validate_report,
    write_reports,
)
from conformance.reporting.json_report import load_schema
from conformance.reporting.mermaid import mermaid_id

REPLAY = "conformance run spec/thread-jobs.yaml --adapter myrt.adapter:Adapter --seed 123 --profile ci"

LIFECYCLE = {
    "entity": "job",
    "field": "status",
    "states": [
        {"name": "running", "initial": True, "terminal": False},
        {"name": "pending_cancel", "initial": False, "terminal": False},
        {"name": "completed", "initial": False, "terminal": True},
        {"name": "cancelled", "initial": False, "terminal": True},
        {"name": "timed-out", "initial": False, "terminal": True},
    ],
    "transitions": [
        {"trigger": "request_cancel", "source": ["running"], "dest": "pending_cancel", "guard": None},
        {"trigger": "complete", "source": ["running", "pending_cancel"], "dest": "completed", "guard": None},
        {
            "trigger": "confirm_cancel",
            "source": ["pending_cancel"],
            "dest": "cancelled",
            "guard": "job.tool_running == false && size(job.queue) < params.max_queue",
        },
        {"trigger": "expire", "source": ["running"], "dest": "timed-out", "guard": "now >= job.deadline_ms"},
    ],
}

SCENARIOS = [
    ("N1", "Synchronous tool completion", "nominal"),
    ("N2", "Cancel before tool starts", "nominal"),
    ("E1", "Cancel during a long tool call", "edge"),
    ("E2", "Double cancel is idempotent", "edge"),
    ("B1", "Retention limit evicts the oldest job", "boundary"),
    ("B2", "Payload spill at the size threshold", "boundary"),
]


def base_report(**overrides) -> dict:
    report = {
        "kit": {"name": "lifecycle-conformance", "version": "0.1.0"},
        "verdict": "pass",
        "exit_code": 0,
        "started_at": "2026-11-22T08:00:00Z",
        "duration_s": 12.3,
        "spec": {
            "id": "thread-jobs",
            "version": "1.0.0",
            "title": "Thread jobs",
            "path": "spec/thread-jobs.yaml",
            "lifecycle": copy.deepcopy(LIFECYCLE),
        },
        "implementation": {
            "adapter": "myrt.adapter:Adapter",
            "name": "my-runtime",
            "version": "1.2.0",
            "profile": "runtime-code",
            "parameters": {"retention_limit": 20},
            "capabilities": {"concurrent": True},
        },
        "parameters": {"retention_limit": 20, "spill_threshold_bytes": 4096},
        "scenarios": [
            {"id": i, "title": t, "category": c, "verdict": "pass", "duration_s": 0.01, "failure": None}
            for i, t, c in SCENARIOS
        ],
        "stateful": {
            "verdict": "pass",
            "profile": "ci",
            "seed": 123,
            "examples": 150,
            "steps": 4200,
            "duration_s": 20.1,
            "coverage": {
                "operations": {"start_job": 310, "cancel_job": 120},
                "transitions": {
                    "running -request_cancel-> pending_cancel": 12,
                    "pending_cancel -confirm_cancel-> cancelled": 0,
                },
                "states": {"running": 100, "cancelled": 7},
                "policies": {"retention.evicted": 40, "payload.spilled": 12},
                "uncovered": ["pending_cancel -confirm_cancel-> cancelled"],
            },
            "failure": None,
        },
        "problems": [],
        "replay": REPLAY,
    }
    report.update(overrides)
    return report


def passing_report() -> dict:
    return base_report()


def failing_report() -> dict:
    report = base_report(verdict="fail", exit_code=1)
    e1 = report["scenarios"][2]
    e1["verdict"] = "fail"
    e1["failure"] = {
        "kind": "divergence",
        "message": "cancel_job returned a different job status\nthe model expected the cancel to be deferred",
        "step": 2,
        "operation": "cancel_job",
        "args": {"job_id": "j1"},
        "expected": {"result": {"status": "pending_cancel"}},
        "observed": {"result": {"status": "cancelled"}},
        "path": "result.status",
        "steps": [
            {"index": 0, "operation": "start_job", "args": {"tool": "sleep"}, "observed": {"result": {"job_id": "j1"}}},
            {"index": 1, "advance_ms": 5},
            {
                "index": 2,
                "operation": "cancel_job",
                "args": {"job_id": "j1"},
                "observed": {"result": {"status": "cancelled"}},
            },
        ],
        "seed": None,
        "replay": "conformance run spec/thread-jobs.yaml --adapter myrt.adapter:Adapter --scenario E1",
        "counterexample_file": None,
    }
    report["scenarios"][5]["verdict"] = "skip"  # B2 needs a capability the implementation lacks
    report["stateful"]["verdict"] = "fail"
    report["stateful"]["failure"] = {
        "kind": "linearizability",
        "message": "no sequential order of the concurrent calls explains the observations",
        "step": 1,
        "operation": None,
        "args": None,
        "expected": None,
        "observed": [{"result": {"status": "cancelled"}}, {"result": {"status": "completed"}}],
        "path": "result.jobs[0].status",
        "steps": [
            {"index": 0, "operation": "start_job", "args": {"tool": "echo"}, "observed": {"result": {"job_id": "j1"}}},
            {
                "index": 1,
                "concurrently": [
                    {
                        "operation": "cancel_job",
                        "args": {"job_id": "j1"},
                        "observed": {"result": {"status": "cancelled"}},
                    },
                    {
                        "operation": "complete_tool",
                        "args": {"job_id": "j1"},
                        "observed": {"result": {"status": "completed"}},
                    },
                ],
            },
        ],
        "seed": 123,
        "replay": REPLAY,
        "counterexample_file": "reports/counterexample-stateful.yaml",
    }
    report["problems"] = [{"kind": "nondeterminism", "message": "E2 passed only on retry", "where": "E2"}]
    return report


def error_report() -> dict:
    # The adapter would not load: no implementation, no checks, only problems.
    return {
        "kit": {"name": "lifecycle-conformance", "version": "0.1.0"},
        "verdict": "error",
        "exit_code": 2,
        "started_at": "2026-11-22T08:00:00Z",
        "duration_s": 0.4,
        "spec": {
            "id": "thread-jobs",
            "version": "1.0.0",
            "title": "Thread jobs",
            "path": "spec/thread-jobs.yaml",
            "lifecycle": copy.deepcopy(LIFECYCLE),
        },
        "implementation": None,
        "scenarios": [],
        "stateful": None,
        "problems": [
            {
                "kind": "adapter-error",
                "message": "cannot import 'myrt.adapter': No module named 'myrt'\nTraceback ...",
                "where": None,
            }
        ],
        "replay": None,
    }


REPORTS = {"passing": passing_report, "failing": failing_report, "error": error_report}


def junit_root(report: dict) -> ET.Element:
    return ET.fromstring(render_junit_xml(report).encode("utf-8"))


def cases_by_name(root: ET.Element) -> dict[str, ET.Element]:
    return {c.get("name"): c for c in root.iter("testcase")}


# --- schema -----------------------------------------------------------------


def test_schema_is_valid_draft_2020_12():
    schema = load_schema()
    Draft202012Validator.check_schema(schema)
    assert set(schema["required"]) >= {"kit", "verdict", "exit_code", "spec", "scenarios", "stateful", "problems"}


@pytest.mark.parametrize("name", REPORTS)
def test_realistic_reports_validate(name):
    assert validate_report(REPORTS[name]()) == []


def test_broken_report_errors_name_the_path():
    report = failing_report()
    report["scenarios"][1]["verdict"] = "passed"
    del report["scenarios"][2]["failure"]["kind"]
    report["stateful"]["failure"]["steps"][1] = {"index": 1}
    del report["problems"]
    errors = validate_report(report)
    assert "scenarios[1].verdict: 'passed' is not one of ['pass', 'fail', 'error', 'skip', 'interrupted']" in errors
    assert "scenarios[2].failure: 'kind' is a required property" in errors
    assert any(e.startswith("stateful.failure.steps[1]: ") for e in errors)
    assert "<root>: 'problems' is a required property" in errors


def test_a_group_the_model_explained_in_another_order_says_which_call_took_effect_first():
    report = failing_report()
    group = report["stateful"]["failure"]["steps"][1]
    group["order"] = [1, 0]  # the completion took effect before the cancel
    assert validate_report(report) == []
    took = "(took effect in the order call 2, call 1)"
    assert took in render_summary_markdown(report)
    console = Console(record=True, width=400)
    render_console_summary(report, console)
    assert took in console.export_text()
    group["order"] = [0, 1]  # the listed order: nothing to say
    assert "took effect" not in render_summary_markdown(report)
    group["order"] = ["first"]
    assert any(e.startswith("stateful.failure.steps[1].order[0]: ") for e in validate_report(report))


def test_schema_checks_verdict_and_exit_code_agree():
    assert validate_report(base_report(exit_code=1)) == ["exit_code: 0 was expected"]


def test_failed_scenario_must_carry_a_failure():
    report = base_report(verdict="fail", exit_code=1)
    report["scenarios"][0]["verdict"] = "fail"
    assert validate_report(report) == ["scenarios[0].failure: None is not of type 'object'"]


# --- write_reports ----------------------------------------------------------


@pytest.mark.parametrize("name", REPORTS)
def test_write_reports_writes_all_four_files(tmp_path, name):
    report = REPORTS[name]()
    paths = write_reports(report, tmp_path / "nested" / "reports")
    assert set(paths) == {"json", "junit", "markdown", "html"}
    assert {p.name for p in paths.values()} == {"report.json", "junit.xml", "summary.md", "report.html"}
    assert all(p.is_file() for p in paths.values())
    assert json.loads(paths["json"].read_text(encoding="utf-8")) == report
    ET.parse(paths["junit"])
    assert paths["markdown"].read_text(encoding="utf-8").startswith("# ")
    assert paths["html"].read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    names = ["junit.xml", "report.html", "report.json", "summary.md"]
    assert sorted(p.name for p in paths["json"].parent.iterdir()) == names


def test_write_reports_refuses_invalid_report_and_writes_nothing(tmp_path):
    with pytest.raises(InvalidReportError) as info:
        write_reports(base_report(verdict="maybe"), tmp_path / "out")
    assert isinstance(info.value, ReportingError)
    assert any(e.startswith("verdict: ") for e in info.value.errors)
    assert not (tmp_path / "out").exists()


def test_write_reports_rejects_non_json_values(tmp_path):
    with pytest.raises(ReportingError):
        write_reports(base_report(duration_s=float("nan")), tmp_path, validate=False)


def test_bad_spec_report_with_almost_nothing_renders(tmp_path):
    # The spec did not parse: no id, no lifecycle, no implementation.
    report = {
        "kit": {"name": "lifecycle-conformance", "version": "0.1.0"},
        "verdict": "error",
        "exit_code": 2,
        "spec": {"path": "spec/bad.yaml"},
        "scenarios": [],
        "stateful": None,
        "problems": [{"kind": "spec-error", "message": "states[2]: 'name' is required", "where": "spec/bad.yaml:14"}],
    }
    assert validate_report(report) == []
    paths = write_reports(report, tmp_path)
    suite = ET.parse(paths["junit"]).getroot().find("testsuite")
    assert suite.get("name") == "conformance" and suite.get("errors") == "1"
    md = paths["markdown"].read_text(encoding="utf-8")
    assert md.startswith("# ⚠️ unknown spec: ERROR") and "## Lifecycle" not in md
    assert "spec/bad.yaml:14" in render_console(report)


def test_write_reports_wraps_os_errors(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(ReportWriteError, match="cannot create the report directory .*: Not a directory") as caught:
        write_reports(passing_report(), blocker / "reports")
    assert isinstance(caught.value, ReportingError)
    assert caught.value.path == str(blocker / "reports")


# --- junit.xml --------------------------------------------------------------


def test_junit_passing_counts():
    root = junit_root(passing_report())
    suite = root.find("testsuite")
    assert suite.get("name") == "thread-jobs"
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == (
        "7",
        "0",
        "0",
        "0",
    )
    assert root.get("tests") == "7"
    cases = cases_by_name(root)
    assert cases["N1 Synchronous tool completion"].get("classname") == "thread-jobs.nominal"
    assert cases["B1 Retention limit evicts the oldest job"].get("classname") == "thread-jobs.boundary"
    assert cases["stateful exploration"].get("classname") == "thread-jobs.stateful"
    assert float(cases["stateful exploration"].get("time")) == pytest.approx(20.1)


def test_junit_failing_has_failure_elements_with_full_text():
    root = junit_root(failing_report())
    suite = root.find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == (
        "7",
        "2",
        "0",
        "1",
    )
    cases = cases_by_name(root)
    failure = cases["E1 Cancel during a long tool call"].find("failure")
    assert failure.get("type") == "divergence"
    assert failure.get("message") == "cancel_job returned a different job status"
    body = failure.text
    for piece in (
        "the model expected the cancel to be deferred",
        '"pending_cancel"',
        '"cancelled"',
        "path: result.status",
        "[1] advance clock +5 ms",
        "--scenario E1",
    ):
        assert piece in body
    assert cases["B2 Payload spill at the size threshold"].find("skipped") is not None
    stateful = cases["stateful exploration"].find("failure")
    assert stateful.get("type") == "linearizability"
    assert "concurrently: cancel_job" in stateful.text and REPLAY in stateful.text
    assert "reports/counterexample-stateful.yaml" in stateful.text
    assert "expected:" not in stateful.text  # null expected means "not applicable"
    # Problems of a run whose verdict is already carried by a check go to system-err.
    assert "E2 passed only on retry" in suite.find("system-err").text


def test_junit_error_report_is_not_green():
    root = junit_root(error_report())
    suite = root.find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == (
        "2",
        "0",
        "1",
        "1",
    )
    run = cases_by_name(root)["conformance run"].find("error")
    assert run.get("type") == "adapter-error"
    assert run.get("message") == "cannot import 'myrt.adapter': No module named 'myrt'"
    assert cases_by_name(root)["stateful exploration"].find("skipped") is not None


def test_junit_scenario_error_verdict_and_illegal_xml_characters():
    report = base_report(verdict="error", exit_code=2)
    report["scenarios"][0]["verdict"] = "error"
    report["scenarios"][0]["failure"] = {"kind": "implementation-error", "message": "adapter crashed \x00\x1b[31m"}
    root = junit_root(report)
    error = cases_by_name(root)["N1 Synchronous tool completion"].find("error")
    assert error.get("type") == "implementation-error"
    assert "\x00" not in error.get("message")
    assert root.find("testsuite").get("errors") == "1"
    assert "conformance run" not in cases_by_name(root)


# --- summary.md -------------------------------------------------------------


def test_markdown_matrix_rows_in_category_order():
    report = failing_report()
    report["scenarios"].reverse()  # B, E, N as given; the matrix groups them N, E, B
    md = render_summary_markdown(report)
    assert md.startswith("# ❌ thread-jobs 1.0.0: FAIL")
    assert "| ID | Category | Scenario | Verdict |" in md
    rows = re.findall(r"^\| ([NEB]\d+) \| (\w+) \| (.+?) \| (.+?) \|$", md, re.M)
    assert [r[0] for r in rows] == ["N2", "N1", "E2", "E1", "B2", "B1"]
    verdicts = {r[0]: r[3] for r in rows}
    assert verdicts["N1"] == "✅ pass" and verdicts["E1"] == "❌ fail" and verdicts["B2"] == "⏭ skip"
    assert "my-runtime 1.2.0" in md and "`runtime-code`" in md and "`retention_limit=20`" in md


def test_markdown_failures_stateful_and_replay():
    md = render_summary_markdown(failing_report())
    failures = md.split("## Failures", 1)[1]
    assert "### E1 Cancel during a long tool call" in failures
    assert "- **Kind:** `divergence`" in failures
    assert "- **Path:** `result.status`" in failures
    assert (
        "3. step 2: `cancel_job(job_id=\"j1\") -> {\"result\": {\"status\": \"cancelled\"}}` ← **first divergence**"
        in failures
    )
    assert "2. step 1: `advance clock +5 ms`" in failures
    assert '```json\n{\n  "result": {\n    "status": "pending_cancel"\n  }\n}\n```' in failures
    assert "```sh\nconformance run spec/thread-jobs.yaml --adapter myrt.adapter:Adapter --scenario E1\n```" in failures
    assert "### stateful exploration" in failures and f"```sh\n{REPLAY}\n```" in failures
    stateful = md.split("## Stateful exploration", 1)[1].split("## Failures", 1)[0]
    assert "| ❌ fail | ci | 123 | 150 | 4200 | 20.1 s |" in stateful
    assert "| start_job | 310 |" in stateful and "| retention.evicted | 40 |" in stateful
    assert "| running -request_cancel-> pending_cancel | 12 |" in stateful
    assert "- `pending_cancel -confirm_cancel-> cancelled`" in stateful
    assert "- **nondeterminism** (`E2`): E2 passed only on retry" in md


def test_markdown_mermaid_block_has_the_edges():
    md = render_summary_markdown(passing_report())
    block = re.search(r"```mermaid\n(.*?)\n```", md, re.S).group(1)
    lines = [line.strip() for line in block.splitlines()]
    assert lines[0] == "flowchart LR"
    assert 's_running("running")' in lines and 's_completed(["completed"])' in lines
    assert any(re.fullmatch(r'(\w+) --> s_running', line) for line in lines)  # the start marker
    assert 's_running -->|"request_cancel"| s_pending_cancel' in lines
    assert 's_running -->|"complete"| s_completed' in lines
    assert 's_pending_cancel -->|"complete"| s_completed' in lines
    assert 's_timed_out(["timed-out"])' in lines
    assert 's_running -->|"expire [now ≥ job.deadline_ms]"| s_timed_out' in lines
    assert "class s_completed,s_cancelled,s_timed_out terminal" in lines
    guarded = next(line for line in lines if line.startswith('s_pending_cancel -->|"confirm_cancel ['))
    assert guarded.endswith('…]"| s_cancelled')


def test_markdown_diagram_counts_dashes_and_highlights_from_the_run():
    report = failing_report()
    report["coverage"] = {
        "categories": {},
        "gates": [],
        "failure": None,
        "transitions": {"running -request_cancel-> pending_cancel": 12, "running -complete-> completed": 3},
    }
    report["spec"]["lifecycle"]["highlight"] = {
        "states": ["pending_cancel"],
        "transitions": ["running -request_cancel-> pending_cancel"],
    }
    block = re.search(r"```mermaid\n(.*?)\n```", render_summary_markdown(report), re.S).group(1)
    lines = [line.strip() for line in block.splitlines()]
    links = [line for line in lines if "-->" in line or "-.->" in line]
    taken = links.index('s_running -->|"request_cancel · 12×"| s_pending_cancel')
    assert f"linkStyle {taken} stroke:#c62828,stroke-width:3px,color:#b71c1c" in lines
    assert 's_running -->|"complete · 3×"| s_completed' in lines
    never = links.index('s_pending_cancel -.->|"complete · never"| s_completed')
    assert f"linkStyle {never} stroke:#aaa,color:#888" in lines
    assert "class s_pending_cancel failed" in lines
    assert "class s_cancelled,s_timed_out untouched" in lines  # no run reached them
    # No edge label repeats a state name.
    for line in links:
        label = re.search(r'\|"(.*)"\|', line)
        if label:
            assert not any(
                re.search(rf"\b{name}\b", label.group(1)) for name in ("running", "pending_cancel", "completed")
            )


def test_mermaid_leaves_out_a_guard_that_restates_the_destination():
    diagram = mermaid_state_diagram(
        {
            "states": [{"name": "running", "initial": True}, {"name": "failed", "terminal": True}],
            "transitions": [
                {"trigger": "finish", "source": ["running"], "dest": "failed", "guard": "args.outcome == 'failed'"}
            ],
        },
        {"running -finish-> failed": 2},
    )
    assert 's_running -->|"finish · 2×"| s_failed' in [line.strip() for line in diagram.splitlines()]


def test_markdown_error_report():
    md = render_summary_markdown(error_report())
    assert md.startswith("# ⚠️ thread-jobs 1.0.0: ERROR")
    assert "**Implementation:** not loaded" in md
    assert "No scenario was run." in md
    assert "- **adapter-error**: cannot import 'myrt.adapter'" in md
    assert "## Failures" not in md


def test_markdown_escapes_table_cells_and_fences():
    report = failing_report()
    report["scenarios"][0]["title"] = "Pipe | in <title>"
    report["scenarios"][2]["failure"]["message"] = "has a fence\n```\ninside"
    md = render_summary_markdown(report)
    assert "| N1 | nominal | Pipe \\| in &lt;title> | ✅ pass |" in md
    assert "````text\nhas a fence\n```\ninside\n````" in md


# --- mermaid ----------------------------------------------------------------


def test_mermaid_ids_and_special_sources():
    assert mermaid_id("pending cancel!") == "pending_cancel_"
    assert mermaid_id("default") == "s_default" and mermaid_id("state") == "s_state"
    diagram = mermaid_state_diagram(
        {
            "states": [{"name": "a-b", "initial": True}, {"name": "a_b"}, {"name": "end", "terminal": True}],
            "transitions": [
                {"trigger": "stop", "source": "*", "dest": "end"},
                {"trigger": "touch", "source": ["a_b"], "dest": None},
                {"trigger": "stop", "source": ["end"], "dest": "end"},
            ],
        }
    )
    lines = [line.strip() for line in diagram.splitlines()]
    assert 's_a_b("a-b")' in lines and 's_a_b_2("a_b")' in lines and 's_end(["end"])' in lines
    assert 's_a_b -->|"stop"| s_end' in lines and 's_a_b_2 -->|"stop"| s_end' in lines
    assert lines.count('s_end -->|"stop"| s_end') == 1  # one edge per (source, dest, trigger)
    assert 's_a_b_2 -->|"touch"| s_a_b_2' in lines
    for line in lines:
        if "-->" in line:
            ends = re.sub(r'\|".*"\|', " ", line).split("-->")
            assert all(re.fullmatch(r"[A-Za-z0-9_]+", part.strip()) for part in ends)


# --- console ----------------------------------------------------------------


def render_console(report: dict) -> str:
    console = Console(record=True, width=120, force_terminal=False)
    render_console_summary(report, console)
    return console.export_text()


def test_console_passing():
    text = render_console(passing_report())
    for sid, _, _ in SCENARIOS:
        assert re.search(rf"{sid} .* PASS ", text)
    assert (
        "Stateful exploration: PASS (profile ci, seed 123, 150 examples, 4200 steps, 20.1 s, 1 never exercised)" in text
    )
    assert "Verdict: PASS  (exit code 0; scenarios: 6 passed, 0 failed, 0 errors, 0 skipped; exploration: pass)" in text


def test_console_failing_shows_failure_blocks():
    report = failing_report()
    report["scenarios"][2]["failure"]["message"] += " [bold]not markup[/]"
    text = render_console(report)
    assert re.search(r"E1 .* FAIL ", text) and re.search(r"B2 .* SKIP ", text)
    assert "E1 Cancel during a long tool call  [divergence]" in text
    assert "at result.status" in text
    assert "replay: conformance run spec/thread-jobs.yaml --adapter myrt.adapter:Adapter --scenario E1" in text
    assert "stateful exploration  [linearizability]" in text and f"replay: {REPLAY}" in text
    assert "[bold]not markup[/]" in text
    assert "Verdict: FAIL  (exit code 1; scenarios: 4 passed, 1 failed, 0 errors, 1 skipped; exploration: fail)" in text


def test_an_observed_null_is_shown_beside_what_was_expected():
    report = failing_report()
    failure = report["stateful"]["failure"]
    failure.update(kind="divergence", path="result.task.evict_after", expected=30000, observed=None)
    block = render_console(report).split("stateful exploration  [divergence]")[1]
    assert "  expected: 30000\n  observed: null" in block
    failure.update(expected=None, observed=0)  # a null expected beside 0: the news, as an independent runtime's was
    block = render_console(report).split("stateful exploration  [divergence]")[1]
    assert "  expected: null\n  observed: 0" in block
    summary = render_summary_markdown(report)
    assert "**Expected**\n\n```json\nnull\n```" in summary, summary
    failure.update(kind="schema", observed={"status": 3})  # no expected value: a schema break shows what came
    block = render_console(report).split("stateful exploration  [schema]")[1]
    assert "  expected:" not in block and '  observed: {"status": 3}' in block


def test_console_error_report_and_long_replay_not_wrapped():
    report = error_report()
    report["replay"] = "conformance run " + " ".join(f"--opt{i} value{i}" for i in range(30))
    report["problems"][0]["where"] = "spec/thread-jobs.yaml:12"
    text = render_console(report)
    assert "Conformance: thread-jobs 1.0.0: no scenario was run" in text
    assert "Stateful exploration: not run" in text
    assert "! adapter-error (spec/thread-jobs.yaml:12): cannot import 'myrt.adapter': No module named 'myrt'" in text
    assert "Verdict: ERROR  (exit code 2; no scenario run)" in text
    assert report["replay"] in text  # soft-wrapped: still one line to copy


def test_report_schema_knows_every_failure_kind():
    import json as _json

    from conformance.engine.failures import FAILURE_KINDS
    from conformance.reporting import SCHEMA_PATH

    text = _json.dumps(_json.loads(SCHEMA_PATH.read_text()))
    for kind in FAILURE_KINDS:
        assert f'"{kind}"' in text, kind


# ------------------------------------------------ files written safely (issue 34, items 3 and 7)
def _minimal_report() -> dict:
    from conformance.engine.runner import RunConfig, new_report

    return new_report(RunConfig(spec_path="spec/thread-jobs.yaml"))


def test_a_symlink_planted_at_a_report_or_temporary_name_is_replaced_not_followed(tmp_path):
    """Temporary files are fresh (mkstemp: O_EXCL|O_NOFOLLOW), renamed over the
    target: a link at the target's or at the old temporary name is not written
    through, and neither is a link planted at values/."""
    from conformance.reporting import VALUES_DIR, bound_report, write_reports

    victim = tmp_path / "victim"
    victim.write_text("precious")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "reports"
    out.mkdir()
    for name in ("report.json", "junit.xml", f".report.json.{os.getpid()}.tmp", f".summary.md.{os.getpid()}.tmp"):
        (out / name).symlink_to(victim)
    (out / VALUES_DIR).symlink_to(elsewhere)
    write_reports(_minimal_report(), out)
    assert not (out / "report.json").is_symlink() and json.loads((out / "report.json").read_text())["verdict"]
    bound_report({"stateful": {"failure": {"observed": "x" * 300_000}}}, out / VALUES_DIR)
    assert victim.read_text() == "precious" and list(elsewhere.iterdir()) == []
    assert (out / VALUES_DIR).is_dir() and not (out / VALUES_DIR).is_symlink()
    assert list((out / VALUES_DIR).iterdir())


def test_reports_that_cannot_be_written_leave_no_earlier_verdict(tmp_path, monkeypatch):
    """Item 7: the previous report.json is removed, else marked STALE, and
    one line says so; the verdict and exit code stay the run's."""
    import conformance.reporting as reporting
    from conformance.engine.runner import write_report_files

    out = tmp_path / "reports"
    out.mkdir()
    (out / "report.json").write_text('{"verdict": "pass"}')

    def fail(report, report_dir, **_):
        raise reporting.ReportWriteError(out / "report.json", f"cannot write {out / 'report.json'}: Permission denied")

    monkeypatch.setattr(reporting, "write_reports", fail)
    report = _minimal_report()
    report["verdict"], report["exit_code"] = "fail", 1
    write_report_files(report, str(out))
    assert not (out / "report.json").exists()
    assert "was removed" in report["_write_error"] and report["exit_code"] == 1

    (out / "report.json").write_text('{"verdict": "pass"}')
    real_unlink = Path.unlink

    def no_unlink(self, *args, **kwargs):
        if self.name == "report.json":
            raise PermissionError(13, "Permission denied")
        return real_unlink(self, *args, **kwargs)

    monkeypatch.setattr(Path, "unlink", no_unlink)
    report.pop("_write_error")
    write_report_files(report, str(out))
    assert (out / reporting.STALE_NAME).is_file() and "marks it stale" in report["_write_error"]
