"""A scenario that races calls runs many times in one run (`race_runs:`,
`--race-runs`, default 20): a lost-update race may pass one run and fail the
next, so one passing run proves nothing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_result import kit as run_kit

from conformance.engine.scenarios import RACE_RUNS, race_runs_of
from statemachines import load_spec

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"


def kit(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_kit(*args, cwd=cwd, pythonpath=FIXTURES)


def test_only_scenarios_that_race_calls_are_repeated():
    spec = load_spec(ROOT / "spec" / "thread-jobs.yaml")
    by_id = {s.id: s for s in spec.scenarios}
    assert race_runs_of(by_id["B2"]) == RACE_RUNS == 20  # concurrent starts
    assert race_runs_of(by_id["N1"]) == 1  # one call after another
    assert race_runs_of(by_id["B2"], default=3) == 3


@pytest.mark.slow
def test_a_race_that_fails_in_the_third_run_only_is_caught(tmp_path):
    once = kit(
        "run",
        "thread-jobs",
        "--adapter",
        "rare_race:RareRaceAdapter",
        "--scenario",
        "B2",
        "--race-runs",
        "1",
        "--report-dir",
        str(tmp_path / "once"),
        cwd=tmp_path,
    )
    assert once.returncode == 0, once.stdout + once.stderr  # one run: the race did not show

    proc = kit(
        "run",
        "thread-jobs",
        "--adapter",
        "rare_race:RareRaceAdapter",
        "--scenario",
        "B2",
        "--report-dir",
        str(tmp_path / "r"),
        cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    [scenario] = json.loads((tmp_path / "r" / "report.json").read_text(encoding="utf-8"))["scenarios"]
    assert scenario["verdict"] == "fail"
    message = scenario["failure"]["message"]
    assert "in run 3 of 20" in message and "it passed the runs before" in message, message
    assert "11 item(s) where 12" in message or "jobs" in scenario["failure"]["path"], message


def test_a_scenario_declares_its_own_number_of_runs(tmp_path):
    spec_text = (ROOT / "spec" / "thread-jobs.scenarios.yaml").read_text(encoding="utf-8")
    assert "race_runs" not in spec_text.split("- id: B2", 1)[1].split("- id:", 1)[0]  # B2 takes the default here
    import yaml

    doc = yaml.safe_load(spec_text)
    [b2] = [s for s in doc["scenarios"] if s["id"] == "B2"]
    b2["race_runs"] = 2
    spec = (ROOT / "spec" / "thread-jobs.yaml").read_text(encoding="utf-8")
    (tmp_path / "thread-jobs.yaml").write_text(spec, encoding="utf-8")
    (tmp_path / "thread-jobs.scenarios.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    # two runs of B2 stop before the third burst of starts, where the race shows
    proc = kit(
        "run",
        str(tmp_path / "thread-jobs.yaml"),
        "--adapter",
        "rare_race:RareRaceAdapter",
        "--scenario",
        "B2",
        "--report-dir",
        str(tmp_path / "r"),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_each_run_of_a_race_lets_another_call_lead(monkeypatch):
    """The call of a group started last tends to run first. A check-then-act
    window opens only when the checking call leads, so the runs of a racing
    scenario take turns: run r lets call -r lead (counted from the end)."""
    from conformance.engine import scenarios
    from conformance.engine.runner import RunConfig, prepare
    from conformance.engine.session import launch_order

    session = prepare(RunConfig(spec_path="thread-jobs", report_dir=None)).session
    seen = []
    monkeypatch.setattr(scenarios, "run_steps", lambda s, steps, scope: seen.append(s.head_start))
    b2 = {s.id: s for s in session.spec.scenarios}["B2"]
    try:
        outcome = scenarios.run_scenario(session, b2, {"concurrent": True}, race_runs=4)
    finally:
        session.close()
    # no call was made, so no run met the race window: not exercised, not a pass
    assert outcome.verdict == "skip" and outcome.race_windows == scenarios.RaceWindowRuns(runs=4, met=0)
    assert seen == [-1, -2, -3, -4] and session.head_start == -1  # the exploration's default again
    assert [launch_order(2, lead)[-1] for lead in seen] == [1, 0, 1, 0]  # each of two calls leads in turn
