"""An operation the implementation does not offer (it answers the error kind
not_implemented) is not applicable, never a failure: the scenarios calling it
are not applicable with the reason, the exploration stops drawing it after
its first answer, and the report lists it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from rich.console import Console

from conformance.engine.runner import RunConfig, run_conformance
from conformance.reporting import render_console_summary, render_summary_markdown, validate_report
from statemachines import load_spec
from statemachines.tools.dryrun import scenario_operations

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "spec" / "thread-jobs.yaml"
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
import lacks_cancel  # noqa: E402


def _run(tmp_path: Path, **options) -> dict:
    lacks_cancel.CALLS["cancel_job"] = 0
    config = RunConfig(
        spec_path=str(SPEC),
        adapter="lacks_cancel:LacksCancelAdapter",
        profile="quick",
        report_dir=str(tmp_path / "out"),
        **options,
    )
    return run_conformance(config)


def _calling_cancel() -> set[str]:
    spec = load_spec(SPEC)
    return {s.id for s in spec.scenarios if "cancel_job" in scenario_operations(s.steps)}


@pytest.mark.slow
def test_scenarios_calling_it_are_not_applicable_with_the_reason(tmp_path):
    report = _run(tmp_path)
    calling = _calling_cancel()
    assert len(calling) > 1  # the check below means something
    assert report["verdict"] == "pass", report["scenarios"]
    not_applicable = {s["id"]: s["reason"] for s in report["not_applicable"]["scenarios"]}
    assert calling <= set(not_applicable)
    for scenario in calling:
        assert "it calls cancel_job, which the implementation does not offer" in not_applicable[scenario]
        assert "cancelling is not offered" in not_applicable[scenario]
    assert not any(s["id"] in calling for s in report["scenarios"])  # neither passed nor failed
    assert report["not_applicable"]["operations"] == [
        {"operation": "cancel_job", "message": "cancelling is not offered"}
    ]
    assert lacks_cancel.CALLS["cancel_job"] == 1  # asked once, never again (the exploration included)
    assert report["stateful"]["verdict"] == "pass" and report["stateful"]["examples"] > 0


@pytest.mark.slow
def test_the_exploration_stops_drawing_it_after_its_first_answer(tmp_path):
    report = _run(tmp_path, scenarios=False)
    assert report["verdict"] == "pass", report["stateful"]
    assert lacks_cancel.CALLS["cancel_job"] == 1
    assert report["stateful"]["examples"] > 0
    assert report["not_applicable"]["operations"][0]["operation"] == "cancel_job"
    validate_report(report)
    console = Console(record=True, width=200)
    render_console_summary(report, console)
    assert "operation cancel_job is not implemented (cancelling is not offered)" in console.export_text()
    markdown = render_summary_markdown(report)
    assert "Not implemented (not applicable): operation `cancel_job` (cancelling is not offered)" in markdown
