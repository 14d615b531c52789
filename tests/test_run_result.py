"""The run path passes one typed ``RunResult`` between its phases
(engine/run_result.py); the report's dictionary is made from it once, at the
end, and is what the writers and the front doors take."""

from __future__ import annotations

import ast
from pathlib import Path

from conformance.engine.failures import Failure
from conformance.engine.run_result import (
    ImplementationInfo,
    NotApplicable,
    Problem,
    RunResult,
    ScenarioEntry,
    SpecInfo,
)
from conformance.engine.runner import RunConfig, run_conformance
from conformance.engine.scenarios import ScenarioOutcome
from conformance.reporting import validate_report

ROOT = Path(__file__).resolve().parent.parent
RUNNER = ROOT / "conformance" / "engine" / "runner.py"
SPEC = str(ROOT / "spec" / "thread-jobs.yaml")

# What takes the report's dictionary in runner.py: the final phase that writes
# it, and the helpers other front doors (check-trace) build their own report with.
TAKES_THE_REPORT = {"_write", "write_report_files", "clear_report_files", "mark_interrupted"}


def _scenario(spec_id: str = "N1"):
    class Scenario:
        id, title, category = spec_id, "a scenario", "nominal"

    return Scenario()


def test_a_fresh_result_is_an_error_until_a_phase_decides_and_its_report_is_valid():
    result = RunResult(SpecInfo(path="spec/x.yaml"), ImplementationInfo(adapter="pkg:factory"), kit_version="0.1.0")
    report = result.to_report()
    assert (report["verdict"], report["exit_code"]) == ("error", 2)
    assert report["implementation"] == {"adapter": "pkg:factory"}
    assert report["spec"]["path"] == "spec/x.yaml" and report["spec"]["id"] is None
    assert "coverage" not in report and "not_applicable" not in report
    assert validate_report(report) == []


def test_a_filled_result_becomes_the_report_the_schema_describes():
    failure = Failure(kind="divergence", message="list_jobs differs\nmore", operation="list_jobs", path="$[0]")
    result = RunResult(SpecInfo(path="s.yaml", id="thread-jobs", version="1"), ImplementationInfo("x"), "0.1.0")
    result.implementation = ImplementationInfo("x", described=True, name="impl", capabilities={"concurrent": True})
    result.scenarios.append(
        ScenarioEntry(ScenarioOutcome(_scenario("E2"), "fail", failure, 0.5), {"stdout": "hi", "stdout_bytes": 2})
    )
    result.scenarios.append(ScenarioEntry(ScenarioOutcome(_scenario("N1"), "pass", None, 0.1, note="raced 20 times")))
    result.not_applicable = NotApplicable("default", [{"id": "B9", "title": "t", "reason": "no limit"}])
    result.scenario_order({"N1": 0, "E2": 1})
    result.add_problem("threads-left", "the implementation left 1 thread", "closing the implementation")
    result.problems.append(Problem.from_dict({"kind": "deviation-expired", "message": "renew it", "where": "d:3"}))
    result.set_verdict("fail", 1)
    report = result.to_report()
    assert [entry["id"] for entry in report["scenarios"]] == ["N1", "E2"]
    assert report["scenarios"][0]["note"] == "raced 20 times" and "output" not in report["scenarios"][0]
    assert report["scenarios"][1]["failure"]["operation"] == "list_jobs"
    assert report["scenarios"][1]["output"] == {"stdout": "hi", "stdout_bytes": 2}
    assert report["implementation"]["name"] == "impl" and report["implementation"]["capabilities"]["concurrent"]
    assert report["problems"] == [
        {"kind": "threads-left", "where": "closing the implementation", "message": "the implementation left 1 thread"},
        {"kind": "deviation-expired", "where": "d:3", "message": "renew it"},
    ]
    assert report["not_applicable"]["scenarios"][0]["id"] == "B9"
    assert (report["verdict"], report["exit_code"]) == ("fail", 1)
    assert validate_report(report) == []


def _parameters_taking_a_dict_named_report(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for arg in node.args.args + node.args.kwonlyargs:
                if arg.arg == "report":
                    found.append(node.name)
    return sorted(set(found))


def test_the_runs_phases_pass_the_typed_result_not_the_reports_dictionary():
    takers = _parameters_taking_a_dict_named_report(ast.parse(RUNNER.read_text(encoding="utf-8")))
    assert set(takers) == TAKES_THE_REPORT, (
        f"runner.py functions that take the report's dictionary: {sorted(set(takers) - TAKES_THE_REPORT)}; "
        "a phase of the run takes the RunResult (engine/run_result.py) and the report is made once, at the end"
    )


def test_the_check_sees_a_phase_taking_the_dictionary():
    source = "def _decide(run, report: dict) -> None:\n    report['verdict'] = 'pass'\n"
    assert _parameters_taking_a_dict_named_report(ast.parse(source)) == ["_decide"]


def test_a_run_returns_the_report_its_result_made(tmp_path):
    report = run_conformance(
        RunConfig(spec_path=SPEC, only=("N1",), stateful=False, report_dir=str(tmp_path / "reports"))
    )
    assert report["verdict"] == "pass" and [s["id"] for s in report["scenarios"]] == ["N1"]
    assert report["spec"]["id"] == "thread-jobs" and report["implementation"]["name"]
    written = {key: value for key, value in report.items() if not key.startswith("_")}  # _paths: where it went
    assert report["coverage"]["categories"] and validate_report(written) == []
    assert (tmp_path / "reports" / "report.json").is_file()
