"""--min-coverage: per-category coverage of a run, gates that fail it with their
own failure kind, and what summary.md, report.json and junit.xml say about it."""

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner
from scenario_verdicts import conforms

from conformance.cli import cli
from conformance.engine.coverage import CATEGORIES, coverage_categories, parse_min_coverage
from conformance.engine.failures import FAILURE_KINDS
from conformance.reporting import validate_report
from statemachines import load_spec

ROOT = Path(__file__).resolve().parent.parent
SPEC = str(ROOT / "spec" / "thread-jobs.yaml")


def test_parse_min_coverage():
    assert parse_min_coverage(["transitions=90", "errors=50%", "boundary-classes=100"]) == {
        "transitions": 90.0,
        "error-kinds": 50.0,
        "boundary-classes": 100.0,
    }
    for bad in ("transitions", "lines=90", "states=abc", "states=101"):
        with pytest.raises(ValueError):
            parse_min_coverage([bad])


def test_categories_count_what_was_hit_and_list_the_rest():
    spec = load_spec(SPEC)
    counts = {
        "transitions": {"running -request_cancel-> pending_cancel": 3},
        "states": {"running": 2},
        "operations": {"start_job": 1},
        "outcomes": {"start_job: duplicate_job_id": 1},
        "policies": {"retention.at_limit": 1, "retention.evicted": 1, "payload.inline": 1},
    }
    cats = coverage_categories(spec, counts, spec.default_parameters())
    assert set(cats) == set(CATEGORIES)
    assert cats["transitions"]["covered"] == 1 and cats["transitions"]["total"] == 9
    assert "running -finish-> completed" in cats["transitions"]["missed"]
    assert cats["error-kinds"]["covered"] == 1 and "start_job: tool_call_resolved" in cats["error-kinds"]["missed"]
    assert "retention" not in cats["policies"]["missed"] and "payload" in cats["policies"]["missed"]
    assert "retention: over the limit" not in cats["boundary-classes"]["missed"]
    assert "payload: over a limit" in cats["boundary-classes"]["missed"]


def run(tmp_path, *gates):
    args = ["run", SPEC, "--no-stateful", "--report-dir", str(tmp_path)]
    for gate in gates:
        args += ["--min-coverage", gate]
    result = CliRunner().invoke(cli, args)
    return result, json.loads((tmp_path / "report.json").read_text())


def test_gate_fails_the_run_with_its_own_kind(tmp_path):
    assert "coverage" in FAILURE_KINDS
    # The scenario matrix alone never finishes a cancelled job other than as completed.
    result, report = run(tmp_path, "transitions=90", "operations=100")
    assert result.exit_code == 1, result.output
    assert report["verdict"] == "fail" and validate_report(report) == []
    assert all(conforms(s) for s in report["scenarios"])
    failure = report["coverage"]["failure"]
    assert failure["kind"] == "coverage" and "transitions 66.7% < 90%" in failure["message"]
    assert "pending_cancel -finish-> failed" in failure["message"]
    assert [g["passed"] for g in report["coverage"]["gates"]] == [False, True]
    summary = (tmp_path / "summary.md").read_text()
    assert "| Transitions | 6/9 (66.7%) | ❌ 90% | `pending_cancel -finish-> failed`" in summary
    assert "| Operations | 12/12 (100%) | ✅ 100% | — |" in summary
    assert "### coverage gate" in summary
    case = ET.parse(tmp_path / "junit.xml").getroot().find(".//testcase[@name='coverage gate']")
    assert case.find("failure").get("type") == "coverage"


def test_gate_met_passes(tmp_path):
    result, report = run(tmp_path, "transitions=60", "states=100")
    assert result.exit_code == 0, result.output
    assert report["coverage"]["failure"] is None
    summary = (tmp_path / "summary.md").read_text()
    assert "## Coverage" in summary and "| States | 6/6 (100%) | ✅ 100% | — |" in summary
    assert 'finish · never"|' in summary  # the diagram dashes what the run never took


def test_bad_gate_is_a_usage_error(tmp_path):
    result = CliRunner().invoke(cli, ["run", SPEC, "--min-coverage", "lines=3", "--report-dir", str(tmp_path)])
    assert result.exit_code == 2 and "transitions, states" in result.output


@pytest.mark.slow
def test_following_a_failed_gates_replay_reaches_the_same_coverage(tmp_path):
    """The replay command of a failed gate keeps the options that chose what
    ran (here --no-stateful): following it gives the run's coverage again."""
    import shlex

    result, report = run(tmp_path / "first", "transitions=90")
    assert result.exit_code == 1, result.output
    replay = report["coverage"]["failure"]["replay"]
    assert "--no-stateful" in replay and "--min-coverage transitions=90" in replay, replay
    assert report["replay"] == replay.split(" --min-coverage")[0]  # the run's own replay selects the same
    args = shlex.split(replay)
    assert args[:2] == ["conformance", "run"]
    again = CliRunner().invoke(cli, args[1:] + ["--report-dir", str(tmp_path / "again")])
    assert again.exit_code == 1, again.output
    followed = json.loads((tmp_path / "again" / "report.json").read_text())
    assert followed["stateful"] is None
    # races are counted when the racing calls were in flight together, which
    # depends on the machine's timing; everything else follows from the options
    timed = ("races",)
    assert {k: v for k, v in followed["coverage"]["categories"].items() if k not in timed} == {
        k: v for k, v in report["coverage"]["categories"].items() if k not in timed
    }
    assert followed["coverage"]["failure"]["message"] == report["coverage"]["failure"]["message"]
