"""Replaying a counterexample never destroys what it replays: the replay
command a failed run prints works pasted as printed, from where it was
printed, and the counterexample file and the failing run's reports are still
there afterwards (the replay's own reports go to replay/ beside the file)."""

from __future__ import annotations

import json
import re
import shlex

import pytest
from cli_result import kit

from conformance.reporting import clear_reports

_MUTANT_MODULE = """\
from conformance.mutants import load_mutants
from conformance.specs import resolve_spec
from statemachines import load_spec

Adapter = load_mutants(load_spec(resolve_spec("thread-jobs")).implementations["mutants"])["evict_at_limit"].factory
"""


@pytest.mark.slow
def test_the_printed_replay_command_reproduces_the_failure_and_keeps_the_files(tmp_path):
    (tmp_path / "mutant_under_test.py").write_text(_MUTANT_MODULE, encoding="utf-8")
    run = kit(
        "run",
        "thread-jobs",
        "--adapter",
        "mutant_under_test:Adapter",
        "--no-scenarios",
        "--workers",
        "1",
        "--max-failures",
        "1",
        # the default report directory, as the user had it; quick's exploration finds the
        # bug too: 11 s for the whole test, where the ci profile took 17-27 s
        "--profile",
        "quick",
        cwd=tmp_path,
        pythonpath=tmp_path,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    printed = re.findall(r"replay: (conformance replay .*)", run.stdout)
    assert printed, run.stdout
    reports = tmp_path / "reports"
    counterexamples = sorted(reports.glob("counterexample-*.yaml"))
    assert counterexamples, sorted(p.name for p in reports.iterdir())
    before = {p: p.read_bytes() for p in [*counterexamples, reports / "report.json"]}

    replayed = kit(*shlex.split(printed[0])[1:], cwd=tmp_path, pythonpath=tmp_path)

    assert replayed.returncode == 1, replayed.stdout + replayed.stderr
    for path, content in before.items():  # the input and the failing run's report, untouched
        assert path.read_bytes() == content, path
    replay_report = json.loads((reports / "replay" / "report.json").read_text(encoding="utf-8"))
    assert replay_report["verdict"] == "fail"


def test_a_missing_counterexample_file_is_named_as_such(tmp_path):
    proc = kit("replay", "thread-jobs", "nowhere/counterexample-stateful-1.yaml", cwd=tmp_path)
    assert proc.returncode == 2
    assert "cannot read counterexample file nowhere/counterexample-stateful-1.yaml: no such file" in proc.stderr
    assert "cannot read spec" not in proc.stderr
    assert not (tmp_path / "nowhere").exists()


def test_clearing_old_reports_never_removes_an_input(tmp_path):
    kept = tmp_path / "counterexample-stateful-1.yaml"
    gone = tmp_path / "counterexample-stateful-2.yaml"
    for path in (kept, gone, tmp_path / "report.json"):
        path.write_text("x", encoding="utf-8")
    clear_reports(tmp_path, keep=[str(kept)])
    assert kept.exists() and not gone.exists() and not (tmp_path / "report.json").exists()
