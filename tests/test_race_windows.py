"""A scenario that races calls says in how many of its runs the race window
was met (two of a group's calls in flight at one instant, as the kit saw
them: crew.StartLine.overlapped); one whose calls never met it is reported
as not exercised (a skip with the reason, in report.json, summary.md, JUnit
and the console), not as a pass, and it counts against a races gate."""

from __future__ import annotations

import json
import threading
import xml.etree.ElementTree as ET
from io import StringIO

import pytest
from rich.console import Console

from conformance.engine import crew
from conformance.engine.crew import StartLine
from conformance.engine.runner import RunConfig, run_conformance
from conformance.reporting import validate_report
from conformance.reporting.console import render_console_summary
from lifecycle_references.thread_jobs import ReferenceAdapter

pytest_plugins = ["pytester"]


def _line(*spans):
    line = StartLine(len(spans))
    for i, span in enumerate(spans):
        line.finish(i, (True, {}), span)
    return line


def test_the_window_is_met_when_a_call_goes_before_another_answered():
    assert _line((0.0, 2.0), (1.0, 3.0)).overlapped()
    assert _line((1.0, 3.0), (0.0, 2.0)).overlapped()  # in whatever order they finished
    assert _line((0.0, 5.0), (1.0, 2.0), (6.0, 7.0)).overlapped()  # one call inside another
    assert _line((0.0, 1.0), (3.0, 4.0), (2.0, 5.0)).overlapped()  # the last two


def test_calls_one_after_another_do_not_meet_the_window():
    assert not _line((0.0, 1.0), (1.5, 2.0)).overlapped()
    assert not _line((2.0, 3.0), (0.0, 1.0), (4.0, 5.0)).overlapped()
    assert not _line((0.0, 1.0), None).overlapped()  # a call that never answered
    assert not StartLine(1).overlapped()


class _CancelsMeet(ReferenceAdapter):
    """The reference, whose two racing cancels (B12's group) each wait for the
    other to arrive: their calls are always in flight together."""

    meeting = threading.Barrier(2)

    def call(self, operation, args):
        if operation == "cancel_job" and threading.current_thread().name == "kit-concurrent":
            try:
                self.meeting.wait(60)  # the other cancel of the group is on its way
            except threading.BrokenBarrierError:
                self.meeting.reset()
        return super().call(operation, args)


def _run(tmp_path, factory, *gates: str) -> dict:
    run_conformance(
        RunConfig(
            spec_path="thread-jobs",
            adapter_factory=factory,
            adapter_label="fixture",
            stateful=False,
            only=("B12",),
            race_runs=3,
            report_dir=str(tmp_path),
            min_coverage={name: float(percent) for name, _, percent in (g.partition("=") for g in gates)},
        )
    )
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert validate_report(report) == []
    return report


def test_a_race_that_met_its_window_says_in_how_many_runs(tmp_path):
    report = _run(tmp_path, _CancelsMeet, "races=10")
    [b12] = report["scenarios"]
    assert b12["verdict"] == "pass" and b12["race_windows"] == {"met": 3, "runs": 3}, b12
    assert b12["note"] == "passed all 3 runs (it races calls; the race window was met in 3 of 3)"
    assert "race window met in 3/3 runs" in (tmp_path / "summary.md").read_text(encoding="utf-8")
    races = report["coverage"]["categories"]["races"]
    assert "scenario B12 (races calls)" not in races["missed"] and races["covered"] == 1, races
    assert report["coverage"]["races"]["scenario B12"] == 3
    assert report["verdict"] == "pass"  # 1 of 7 races (the exploration did not run): over 10 %


def test_a_race_that_never_met_its_window_is_not_exercised(tmp_path, monkeypatch):
    # The calls went one after another in every run (as on a busy one-core machine).
    monkeypatch.setattr(crew.StartLine, "overlapped", lambda self: False)
    report = _run(tmp_path, _CancelsMeet, "races=10")
    [b12] = report["scenarios"]
    assert b12["verdict"] == "skip" and b12["race_windows"] == {"met": 0, "runs": 3}, b12
    assert b12["note"].startswith("race not exercised: in none of its 3 runs were the racing calls in flight")
    assert "race not exercised (0/3 runs)" in (tmp_path / "summary.md").read_text(encoding="utf-8")
    [case] = [
        c for c in ET.parse(tmp_path / "junit.xml").getroot().iter("testcase") if c.get("name", "").startswith("B12")
    ]
    assert case.find("skipped").get("message").startswith("race not exercised")
    races = report["coverage"]["categories"]["races"]
    assert "scenario B12 (races calls)" in races["missed"] and races["covered"] == 0, races
    assert report["coverage"]["races"]["scenario B12"] == 0
    # ... and the races gate fails on it
    assert report["verdict"] == "fail" and report["coverage"]["failure"]["kind"] == "coverage"
    assert "scenario B12 (races calls)" in report["coverage"]["failure"]["message"]


@pytest.mark.parametrize("met", [True, False])
def test_the_console_says_whether_the_race_was_exercised(tmp_path, monkeypatch, met):
    monkeypatch.setattr(crew.StartLine, "overlapped", lambda self: met)
    report = _run(tmp_path, _CancelsMeet)
    out = StringIO()
    render_console_summary(report, console=Console(file=out, width=200))
    said = out.getvalue()
    assert ("race window met in 3/3 runs" in said) is met and ("race not exercised (0/3 runs)" in said) is not met, said


def test_a_pytest_item_of_a_race_not_exercised_is_a_skip_with_the_reason(pytester, monkeypatch):
    monkeypatch.setattr(crew.StartLine, "overlapped", lambda self: False)
    pytester.makepyprojecttoml("[tool.pytest.ini_options]\n")
    pytester.makepyfile(
        test_mine="""
        from conformance.pytest_plugin import conformance_suite
        test_tj = conformance_suite("thread-jobs")
    """
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-k", "B12", "-rs", "-n", "0")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED *race not exercised: in none of its 20 runs*"])
