"""Accepted deviations (docs/deviations.md): a team records what its
implementation knowingly does differently; the kit accepts exactly that,
lists it in every report, and still finds the real bugs.

The demonstration runtime (examples/accepted-deviation) refuses to cancel a
finished job (accepted in its deviations.yaml) and has a real bug: a progress
report after a cancel request puts the job back to running.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from cli_result import kit as run_kit
from scenario_verdicts import race_not_exercised

from conformance.engine.deviations import path_matches
from conformance.reporting import validate_report

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "examples" / "accepted-deviation"
ADAPTER = "runtime:DemoAdapter"


def kit(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_kit(*args, cwd=cwd, pythonpath=DEMO)


def report_of(directory: Path) -> dict:
    report = json.loads((directory / "report.json").read_text(encoding="utf-8"))
    assert validate_report(report) == []
    return report


def failures_of(report: dict) -> list[dict]:
    found = [s["failure"] for s in report["scenarios"] if s.get("failure")]
    if report.get("stateful") and report["stateful"].get("failure"):
        found.append(report["stateful"]["failure"])
    return found


def deviations_file(tmp_path: Path, entries: list[dict], **top) -> Path:
    path = tmp_path / "deviations.yaml"
    path.write_text(yaml.safe_dump({"deviations": 1, **top, "entries": entries}, sort_keys=False), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "pattern, path, matches",
    [
        ("error", "error", True),
        ("error", "error.message", True),  # a path covers what is below it
        ("error.message", "error", False),
        ("error.message", "error.messages", False),  # whole keys only
        ("result.jobs[*].status", "result.jobs[3].status", True),
        ("result.jobs[*].status", "result.jobs[3].tool_name", False),
        ("result.*.status", "result.job.status", True),
        ("result.*.status", "result.jobs[0].status", False),
        ("**.status", "result.jobs[0].status", True),
        ("effects[0]", "effects[0].text", True),
        ("effects[0]", "effects[1].text", False),
    ],
)
def test_path_patterns(pattern, path, matches):
    assert path_matches(pattern, path) is matches


@pytest.mark.slow
def test_without_a_deviations_file_the_difference_is_reported(tmp_path):
    proc = kit(
        "run", "thread-jobs", "--adapter", ADAPTER, "--no-stateful", "--report-dir", str(tmp_path / "r"), cwd=tmp_path
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = report_of(tmp_path / "r")
    assert "deviations" not in report
    messages = [f["message"] for f in failures_of(report)]
    assert any("already_finished" in m for m in messages), messages  # the accepted-to-be difference
    assert any("pending_cancel" in m and "running" in m for m in messages), messages  # the bug


@pytest.mark.slow
def test_with_it_the_difference_is_accepted_listed_everywhere_and_the_bug_still_found(tmp_path):
    out = tmp_path / "r"
    proc = kit(
        "run",
        "thread-jobs",
        "--adapter",
        ADAPTER,
        "--deviations",
        str(DEMO / "deviations.yaml"),
        "--report-dir",
        str(out),
        cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = report_of(out)
    failures = failures_of(report)
    assert failures and not any("already_finished" in f["message"] for f in failures), failures
    # the bug: found by the matrix (E3) and by the exploration alone
    by_id = {s["id"]: s for s in report["scenarios"]}
    assert by_id["E3"]["verdict"] == "fail" and "pending_cancel" in by_id["E3"]["failure"]["message"]
    assert by_id["E6"]["verdict"] == "pass"  # its cancel of a finished job is the accepted difference
    # the exploration alone finds it too (as the job's status, seen by whichever call reads it)
    stateful = report["stateful"]["failure"]
    assert stateful is not None and stateful["path"].endswith("status"), stateful
    assert (stateful["expected"], stateful["observed"]) == ("pending_cancel", "running")
    assert "--deviations" in stateful["replay"]  # the printed replay reproduces this run's failure
    # listed in every report, with a count and an example
    [entry] = report["deviations"]["entries"]
    assert entry["id"] == "CANCEL-FINISHED" and entry["count"] > 0 and report["deviations"]["accepted"] > 0
    assert entry["example"]["operation"] == "cancel_job" and entry["example"]["path"] == "error"
    assert entry["example"]["observed"]["kind"] == "already_finished"
    assert "CANCEL-FINISHED: accepted" in proc.stdout
    assert "## Accepted deviations" in (out / "summary.md").read_text(encoding="utf-8")
    props = {p.get("name"): p.get("value") for p in ET.parse(out / "junit.xml").iter("property")}
    assert props["deviation.CANCEL-FINISHED"].startswith("CANCEL-FINISHED: accepted")


@pytest.mark.slow
def test_the_counterexample_replays_with_the_deviations_file(tmp_path):
    out = tmp_path / "r"
    kit(
        "run",
        "thread-jobs",
        "--adapter",
        ADAPTER,
        "--deviations",
        str(DEMO / "deviations.yaml"),
        "--no-scenarios",
        "--max-failures",
        "1",
        "--report-dir",
        str(out),
        cwd=tmp_path,
    )
    counterexample = out / "counterexample-stateful.yaml"
    assert counterexample.is_file()
    proc = kit(
        "replay",
        "thread-jobs",
        str(counterexample),
        "--adapter",
        ADAPTER,
        "--deviations",
        str(DEMO / "deviations.yaml"),
        "--report-dir",
        str(tmp_path / "replayed"),
        cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    [scenario] = report_of(tmp_path / "replayed")["scenarios"]
    assert 'expected "pending_cancel", got "running"' in scenario["failure"]["message"]


def test_an_expired_entry_is_not_applied_and_fails_the_run(tmp_path):
    doc = yaml.safe_load((DEMO / "deviations.yaml").read_text(encoding="utf-8"))
    doc["entries"][0]["expires"] = "2020-01-31"
    path = tmp_path / "expired.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    proc = kit(
        "run",
        "thread-jobs",
        "--adapter",
        ADAPTER,
        "--deviations",
        str(path),
        "--no-stateful",
        "--scenario",
        "E6",
        "--report-dir",
        str(tmp_path / "r"),
        cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = report_of(tmp_path / "r")
    assert report["scenarios"][0]["verdict"] == "fail"  # not applied any more
    assert report["deviations"]["expired"] == ["CANCEL-FINISHED"]
    [problem] = [p for p in report["problems"] if p["kind"] == "deviation-expired"]
    entry_line = next(
        i for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if line.startswith("- ")
    )
    assert "CANCEL-FINISHED expired on 2020-01-31" in problem["message"]
    assert problem["where"] == f"{path}:{entry_line}"  # the entry, by file and line


def test_the_reference_with_an_expired_entry_still_fails(tmp_path):
    path = deviations_file(
        tmp_path,
        [
            {
                "id": "OLD",
                "reason": "a text we used to have",
                "expires": "2021-05-01",
                "accept": {"path": "error.message"},
            }
        ],
    )
    proc = kit(
        "run",
        "thread-jobs",
        "--deviations",
        str(path),
        "--no-stateful",
        "--scenario",
        "N1",
        "--report-dir",
        str(tmp_path / "r"),
        cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "deviation-expired" in proc.stdout + proc.stderr


@pytest.mark.parametrize(
    "entries, expected",
    [
        ([{"id": "D1", "accept": {"path": "error"}}], "'reason' is a required property"),
        (
            [{"id": "D1", "reason": "x", "accept": {"path": "error"}, "avoid": {"operation": "retry_job"}}],
            "is valid under each of",
        ),
        (
            [{"id": "D1", "reason": "x", "accept": {"path": "error", "operation": "no_such_op"}}],
            "the spec has no operation 'no_such_op'",
        ),
        (
            [{"id": "D1", "reason": "x", "accept": {"path": "error", "when": "result.kind == 'x'"}}],
            "`when` reads result",
        ),
        (
            [{"id": "D1", "reason": "x", "accept": {"path": "error", "when": "observed.kind =="}}],
            "invalid CEL expression",
        ),
        ([{"id": "D1", "reason": "x", "expires": "next year", "accept": {"path": "error"}}], "is not a 'date'"),
        (
            [
                {"id": "D1", "reason": "x", "accept": {"path": "error"}},
                {"id": "D1", "reason": "y", "avoid": {"operation": "retry_job"}},
            ],
            "id 'D1' is used twice",
        ),
    ],
)
def test_a_broken_file_is_refused_with_file_and_line(tmp_path, entries, expected):
    path = deviations_file(tmp_path, entries)
    proc = kit(
        "run",
        "thread-jobs",
        "--deviations",
        str(path),
        "--no-stateful",
        "--report-dir",
        str(tmp_path / "r"),
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    report = report_of(tmp_path / "r")
    messages = [p["message"] for p in report["problems"] if p["kind"] == "deviations-error"]
    assert any(expected in m for m in messages), messages
    assert any(m.startswith(f"{path}:") for m in messages), messages  # file:line
    assert expected in proc.stderr


@pytest.mark.slow
def test_a_file_for_another_spec_is_refused(tmp_path):
    path = deviations_file(tmp_path, [{"id": "D1", "reason": "x", "accept": {"path": "error"}}], spec="async-jobs")
    proc = kit(
        "run",
        "thread-jobs",
        "--deviations",
        str(path),
        "--no-stateful",
        "--report-dir",
        str(tmp_path / "r"),
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert "the file is for spec 'async-jobs'" in proc.stderr


@pytest.mark.slow
def test_avoided_inputs_are_never_sent_and_are_counted(tmp_path):
    path = deviations_file(
        tmp_path, [{"id": "NO-RETRY", "reason": "we never retry jobs", "avoid": {"operation": "retry_job"}}]
    )
    out = tmp_path / "r"
    proc = kit(
        "run", "thread-jobs", "--deviations", str(path), "--profile", "quick", "--report-dir", str(out), cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = report_of(out)
    skipped = [s for s in report["scenarios"] if s["verdict"] == "skip" and not race_not_exercised(s)]
    junit = ET.parse(out / "junit.xml")
    notes = [e.get("message") for e in junit.iter("skipped")]
    assert skipped and any("deviation NO-RETRY avoids this input: retry_job" in (n or "") for n in notes), notes
    assert "retry_job" not in report["stateful"]["coverage"]["operations"]  # never called by the exploration
    [entry] = report["deviations"]["entries"]
    assert entry["count"] > len(skipped) and report["deviations"]["avoided"] == entry["count"]


@pytest.mark.slow
def test_a_condition_narrows_what_is_accepted(tmp_path):
    # Only refusals of *completed* jobs are accepted: E6 (a completed job) passes; the
    # exploration also cancels failed, cancelled and timed-out jobs and reports that.
    path = deviations_file(
        tmp_path,
        [
            {
                "id": "D1",
                "reason": "completed jobs only",
                "accept": {
                    "operation": "cancel_job",
                    "path": "error",
                    "when": "observed.message.endsWith('(completed)')",
                },
            }
        ],
    )
    out = tmp_path / "r"
    proc = kit(
        "run",
        "thread-jobs",
        "--adapter",
        ADAPTER,
        "--deviations",
        str(path),
        "--scenario",
        "E6",
        "--no-stateful",
        "--report-dir",
        str(out),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert report_of(out)["deviations"]["entries"][0]["count"] >= 1
    other = deviations_file(
        tmp_path,
        [
            {
                "id": "D1",
                "reason": "failed jobs only",
                "accept": {"operation": "cancel_job", "path": "error", "when": "observed.message.endsWith('(failed)')"},
            }
        ],
    )
    proc = kit(
        "run",
        "thread-jobs",
        "--adapter",
        ADAPTER,
        "--deviations",
        str(other),
        "--scenario",
        "E6",
        "--no-stateful",
        "--report-dir",
        str(out),
        cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert report_of(out)["deviations"]["entries"][0]["count"] == 0


@pytest.mark.slow
def test_check_trace_applies_accepted_deviations(tmp_path):
    kit(
        "run",
        "thread-jobs",
        "--adapter",
        ADAPTER,
        "--no-stateful",
        "--scenario",
        "E6",
        "--record",
        str(tmp_path / "traces"),
        "--report-dir",
        str(tmp_path / "live"),
        cwd=tmp_path,
    )
    trace = tmp_path / "traces" / "E6.jsonl"
    assert trace.is_file()
    plain = kit("check-trace", "thread-jobs", str(trace), "--report-dir", str(tmp_path / "plain"), cwd=tmp_path)
    assert plain.returncode == 1, plain.stdout + plain.stderr
    accepted = kit(
        "check-trace",
        "thread-jobs",
        str(trace),
        "--deviations",
        str(DEMO / "deviations.yaml"),
        "--report-dir",
        str(tmp_path / "accepted"),
        cwd=tmp_path,
    )
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert report_of(tmp_path / "accepted")["deviations"]["entries"][0]["count"] >= 1


@pytest.mark.slow
def test_the_pytest_plugin_takes_a_deviations_file(tmp_path):
    shutil.copy(DEMO / "deviations.yaml", tmp_path / "deviations.yaml")
    (tmp_path / "test_demo.py").write_text(
        textwrap.dedent('''\
        from conformance.pytest_plugin import conformance_suite

        test_demo = conformance_suite("thread-jobs", adapter="runtime:DemoAdapter", stateful=False,
                                      deviations="deviations.yaml")
        '''),
        encoding="utf-8",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_demo.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(DEMO)},
    )
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "test_demo[E6] PASSED" in proc.stdout or "1 failed" in proc.stdout, proc.stdout[-3000:]
    assert "FAILED test_demo.py::test_demo[E3]" in proc.stdout, proc.stdout[-3000:]
    assert "failed" in proc.stdout and "test_demo[E6]" not in proc.stdout.split("short test summary")[-1]
    assert "accepted deviations of thread-jobs" in proc.stdout and "CANCEL-FINISHED: accepted" in proc.stdout
