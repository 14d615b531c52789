"""Hostile and broken data: what an implementation answers, the files it
points at, the report directory (issue 12, items 3, 7, 11, 13, 14 and 15).

The requirement under test: whatever an implementation answers (values JSON
cannot carry, a 10 MB answer, a spill "file" that is /dev/zero or a FIFO) and
whatever goes wrong around the run (the kit itself crashing, a report
directory that cannot be written), the run ends on its own with no
traceback, the documented exit code, and -- wherever the directory allows --
a report.json valid against its schema that names what happened; reports/
never shows an earlier run's verdict.

Everything goes through the real command line (the running interpreter's ``-m conformance.cli``)
in a subprocess, with a timeout. The misbehaving implementations are in
``tests/fixtures/hostile_answers.py`` (in-process) and
``tests/fixtures/stdio/{nan,huge}_answer.py`` (programs).
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from cli_result import Result

from conformance.reporting import validate_report

ROOT = Path(__file__).resolve().parents[1]
SPEC = "spec/thread-jobs.yaml"  # relative to ROOT, the working directory of every run
HOSTILE = "tests.fixtures.hostile_answers"
PY = shlex.quote(sys.executable)
TEN_MB = 10 * 1024 * 1024


def conformance(*args, timeout: float = 180, preexec_fn=None) -> Result:
    env = {k: v for k, v in os.environ.items() if k not in ("CONFORMANCE_DEBUG", "COLUMNS", "LINES")}
    env["COLUMNS"] = "1000"
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "conformance.cli", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        preexec_fn=preexec_fn,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def run(
    report_dir: Path, adapter: str | None = None, *args, cmd: str | None = None, timeout: float = 180, preexec_fn=None
) -> Result:
    chosen = ["--adapter-cmd", cmd] if cmd else ["--adapter", f"{HOSTILE}:{adapter}"] if adapter else []
    return conformance(
        "run",
        SPEC,
        *chosen,
        "--profile",
        "quick",
        "--report-dir",
        report_dir,
        *args,
        timeout=timeout,
        preexec_fn=preexec_fn,
    )


def scenarios(*ids: str) -> list[str]:
    return ["--no-stateful", *[a for sid in ids for a in ("--scenario", sid)]]


def assert_clean(result: Result) -> None:
    assert "Traceback" not in result.output, result.describe()
    assert "internal error" not in result.output, result.describe()


def load_report(report_dir: Path) -> dict:
    path = report_dir / "report.json"
    assert path.is_file(), f"no report.json in {report_dir}"
    report = json.loads(path.read_text(encoding="utf-8"))
    assert validate_report(report) == [], validate_report(report)
    ET.parse(report_dir / "junit.xml")
    assert (report_dir / "summary.md").is_file()
    return report


def failures(report: dict) -> list[dict]:
    found = [s["failure"] for s in report["scenarios"] if s.get("failure")]
    if (report.get("stateful") or {}).get("failure"):
        found.append(report["stateful"]["failure"])
    return found


# ------------------------------------------------ item 3: values JSON cannot carry
@pytest.mark.parametrize(
    "adapter, scenario, path, phrase",
    [
        ("NanInUncomparedField", "E1", "result.load", "is NaN, which JSON cannot carry"),
        ("InfinityInEffect", "N6", "effects[0].weight", "is Infinity, which JSON cannot carry"),
        ("NonStringKey", "N2", "result.job", "has the key 7 (int); JSON object keys are strings"),
        ("NanKey", "E1", "result.by_load", "has the key NaN (float)"),
        ("HugeInteger", "E1", "result.total", "is an integer of about 5000 digits, outside the integers"),
        ("WideInteger", "E1", "result.total", "is an integer of 20 digits, outside the integers answers may hold"),
        ("LoneSurrogate", "E1", "result.note", "is a string holding a lone surrogate (U+DCFF"),
    ],
)
def test_an_answer_json_cannot_carry_is_a_protocol_failure_with_its_path(tmp_path, adapter, scenario, path, phrase):
    result = run(tmp_path / "r", adapter, *scenarios(scenario), timeout=120)
    assert_clean(result)
    assert result.returncode == 1, result.describe()
    report = load_report(tmp_path / "r")
    assert report["verdict"] == "fail"
    failure = report["scenarios"][0]["failure"]
    # The same kind a program's line holding NaN gets: the answer breaks the protocol.
    assert failure["kind"] == "implementation-error", failure
    assert failure["path"] == path, failure
    assert f"malformed response: {path} {phrase}" in failure["message"], failure["message"]
    assert f"{path} {phrase.split(',')[0]}" in result.stdout, result.describe()


def test_a_program_printing_nan_is_a_protocol_failure_naming_the_path(tmp_path):
    result = run(tmp_path / "r", None, *scenarios("E1"), cmd=f"{PY} tests/fixtures/stdio/nan_answer.py")
    assert_clean(result)
    assert result.returncode == 1, result.describe()
    failure = load_report(tmp_path / "r")["scenarios"][0]["failure"]
    assert failure["kind"] == "implementation-error", failure
    assert "result.load is NaN, which JSON cannot carry" in failure["message"], failure["message"]


@pytest.mark.hypothesis  # its run explores (tests/hypothesis_marker.py)
def test_nan_found_by_the_exploration_still_writes_every_report(tmp_path):
    result = run(tmp_path / "r", "NanInUncomparedField", "--no-scenarios", "--max-failures", "1", timeout=240)
    assert_clean(result)
    assert result.returncode == 1, result.describe()
    failure = load_report(tmp_path / "r")["stateful"]["failure"]
    assert failure["kind"] == "implementation-error" and failure["path"] == "result.load", failure
    assert (tmp_path / "r" / "counterexample-stateful.yaml").is_file()


# ------------------------------------------ item 7: nondeterminism only when answers differ
def test_a_deterministic_failure_in_several_fields_is_never_called_nondeterministic(tmp_path):
    # The model's predictions come out of CEL maps whose keys arrive in a
    # different order each time; the first difference must not depend on it.
    result = run(tmp_path / "r", "InspectWrongInSeveralFields", "--no-stateful")
    assert_clean(result)
    assert result.returncode == 1, result.describe()
    found = failures(load_report(tmp_path / "r"))
    assert len(found) >= 10, [f["kind"] for f in found]
    assert {f["kind"] for f in found} == {"divergence"}, [f["message"] for f in found if f["kind"] != "divergence"]
    # The same first difference every time: the smallest differing key in sorted order.
    assert {f["path"] for f in found} == {"result.job.cancel_requested_at"}, {f["path"] for f in found}


def test_a_nondeterministic_failure_shows_both_answers_side_by_side(tmp_path):
    result = run(tmp_path / "r", "InspectWrongOnEverySecondCase", *scenarios("N2"))
    assert_clean(result)
    assert result.returncode == 1, result.describe()
    failure = load_report(tmp_path / "r")["scenarios"][0]["failure"]
    assert failure["kind"] == "nondeterminism", failure
    lines = failure["message"].splitlines()
    assert "answered differently when the same steps were replayed" in lines[0]
    assert "differs at result.job.status" in failure["message"], failure["message"]
    first = next(line for line in lines if line.strip().startswith("first run:"))
    replay = next(line for line in lines if line.strip().startswith("replay:"))
    assert '"status": "failed"' in first and '"status": "running"' in replay, (first, replay)


# ------------------------------------------------------- item 11: the kit crashes
@pytest.mark.slow
@pytest.mark.parametrize(
    "adapter, phrase",
    [
        ("KitCrashesMidRun", "KitFault: the kit's scenario runner broke"),
        ("KitReportingCrashes", "RuntimeError: the summary writer broke"),
    ],
)
def test_a_run_that_crashes_replaces_the_previous_pass(tmp_path, adapter, phrase):
    report_dir = tmp_path / "reports"
    passed = run(report_dir, None, *scenarios("N1"))
    assert passed.returncode == 0, passed.describe()
    assert load_report(report_dir)["verdict"] == "pass"
    (report_dir / "counterexample-stateful.yaml").write_text("# left by an earlier run\n")

    crashed = run(report_dir, adapter, *scenarios("N1"))
    assert crashed.returncode == 2, crashed.describe()
    assert "Traceback" not in crashed.output, crashed.describe()
    assert phrase in crashed.stderr, crashed.describe()
    report = json.loads((report_dir / "report.json").read_text(encoding="utf-8"))
    assert validate_report(report) == []
    assert report["verdict"] == "error" and report["exit_code"] == 2
    problem = next(p for p in report["problems"] if p["kind"] == "internal-error")
    assert phrase in problem["message"], problem
    assert not (report_dir / "counterexample-stateful.yaml").exists()
    if adapter == "KitReportingCrashes":
        assert not (report_dir / "summary.md").exists()  # the old one is gone, the broken writer wrote none
        assert "summary.md was not written" in crashed.stderr, crashed.describe()
    else:
        assert report["scenarios"] == [] and (report_dir / "summary.md").is_file()


# --------------------------------------------------------- item 13: huge answers
@pytest.mark.parametrize("how", ["in-process", "stdio"])
def test_a_10_mb_answer_is_stored_once_and_truncated_in_the_reports(tmp_path, how):
    report_dir = tmp_path / "r"
    if how == "stdio":
        result = run(report_dir, None, *scenarios("N1"), cmd=f"{PY} tests/fixtures/stdio/huge_answer.py")
    else:
        result = run(report_dir, "HugeAnswer", *scenarios("N1"))
    assert_clean(result)
    assert result.returncode == 1, result.describe()
    report = load_report(report_dir)
    for name in ("report.json", "junit.xml", "summary.md"):
        size = (report_dir / name).stat().st_size
        assert size < 200_000, f"{name} is {size} bytes"
    assert len(result.output) < 100_000
    digest = hashlib.sha256(b"y" * TEN_MB).hexdigest()
    failure = report["scenarios"][0]["failure"]
    assert failure["kind"] == "divergence" and failure["path"] == "result.result", failure
    said = failure["observed"]
    assert said.startswith("yyyy") and f"{TEN_MB:,} characters" in said and f"sha256 {digest}" in said, said[-400:]
    stored = report_dir / "values" / f"sha256-{digest}.txt"
    assert f"whole value: values/{stored.name}" in said
    assert stored.stat().st_size == TEN_MB
    assert hashlib.sha256(stored.read_bytes()).hexdigest() == digest
    assert [p.name for p in (report_dir / "values").iterdir()] == [stored.name]  # once, however often it appears
    assert f"sha256 {digest}" in (report_dir / "summary.md").read_text(encoding="utf-8")


# -------------------------------------------------- item 14: files an answer names
@pytest.mark.parametrize(
    "adapter, phrase",
    [
        ("SpillIsDevZero", "(a symbolic link to /dev/zero) is a character device"),
        ("SpillIsFifo", "is a FIFO (named pipe)"),
        ("SpillIsDirectory", "is a directory"),
    ],
)
def test_a_spill_path_that_is_not_a_regular_file_is_refused_without_reading_it(tmp_path, adapter, phrase):
    # reading one of them would block or never end: the run's limit stops that kit
    result = run(tmp_path / "r", adapter, *scenarios("B5"), timeout=60)
    assert_clean(result)
    assert result.returncode == 1, result.describe()
    failure = load_report(tmp_path / "r")["scenarios"][0]["failure"]
    assert failure["kind"] == "divergence" and failure["path"].endswith(".path"), failure
    assert "expected a regular file, but " in failure["message"] and phrase in failure["message"], failure["message"]


# ------------------------------------------------------ item 15: report directory trouble
def _file_size_limit(limit: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


@pytest.mark.parametrize("trouble", ["directory-at-report-json", "parent-is-a-file", "file-size-limit"])
@pytest.mark.parametrize(
    "adapter, verdict, code",
    [(None, "PASS", 0), ("InspectWrongInSeveralFields", "FAIL", 1)],
    ids=["passing", "failing"],
)
def test_report_directory_trouble_keeps_the_verdict_and_its_exit_code(tmp_path, trouble, adapter, verdict, code):
    report_dir, limit = tmp_path / "reports", None
    if trouble == "directory-at-report-json":
        (report_dir / "report.json").mkdir(parents=True)
        where = f"cannot write {report_dir / 'report.json'}: Is a directory"
    elif trouble == "parent-is-a-file":
        (tmp_path / "file").write_text("")
        report_dir = tmp_path / "file" / "reports"
        where = f"cannot create the report directory {report_dir}: Not a directory"
    else:
        limit = _file_size_limit(2048)
        where = f"cannot write {report_dir / 'report.json'}: File too large"
    result = run(report_dir, adapter, *scenarios("N2"), preexec_fn=limit)
    assert result.returncode == code, result.describe()
    assert_clean(result)
    assert f"Verdict: {verdict}" in result.stdout, result.describe()
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: writing the reports failed")]
    assert len(errors) == 1 and errors[0].startswith(f"error: writing the reports failed: {where}"), result.describe()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_an_unwritable_report_directory_keeps_the_verdict(tmp_path):
    report_dir = tmp_path / "reports"
    report_dir.mkdir()
    report_dir.chmod(0o555)
    try:
        result = run(report_dir, None, *scenarios("N1"))
    finally:
        report_dir.chmod(0o755)
    assert result.returncode == 0, result.describe()
    assert_clean(result)
    assert "Verdict: PASS" in result.stdout
    assert (
        f"error: writing the reports failed: cannot write {report_dir / 'report.json'}: Permission denied"
        in result.stderr
    ), result.describe()


@pytest.mark.slow
def test_an_unwritable_counterexample_does_not_crash_the_exploration(tmp_path):
    (tmp_path / "file").write_text("")
    report_dir = tmp_path / "file" / "reports"
    # ci, not quick: the exploration must reach an inspect_job of a job that exists.
    result = run(
        report_dir,
        "InspectWrongInSeveralFields",
        "--no-scenarios",
        "--max-failures",
        "1",
        "--profile",
        "ci",
        timeout=240,
    )
    assert result.returncode == 1, result.describe()
    assert_clean(result)
    assert "Verdict: FAIL" in result.stdout
    assert "writing the reports failed: cannot create the report directory" in result.stderr


# ------------------------------------------------- the pieces, without a run
def test_bounding_a_report_keeps_it_valid_and_is_idempotent(tmp_path):
    from conformance.reporting import bound_report

    big = "z" * 100_000
    steps = [
        {
            "index": i,
            "operation": "list_jobs",
            "args": {"note": big},
            "observed": {"result": {"jobs": [big[:5000]] * 4}},
        }
        for i in range(300)
    ]
    failure = {
        "kind": "divergence",
        "message": "m" * 50_000,
        "step": 299,
        "operation": "list_jobs",
        "args": {"note": big, "n": 1},
        "expected": [1] * 100_000,
        "observed": big,
        "path": "result",
        "steps": steps,
    }
    report = {"scenarios": [{"id": "N1", "failure": failure}], "stateful": None}
    kept = bound_report(report, tmp_path / "values")
    text = json.dumps(report)
    assert len(text) < 2_000_000, len(text)
    bounded = report["scenarios"][0]["failure"]
    assert isinstance(bounded["args"], dict) and bounded["args"]["n"] == 1  # args stay an object
    assert bounded["expected"].startswith("[truncated: a JSON array of ")
    assert bounded["steps"][-1]["observed"] == {"result": {"jobs": [big[:5000]] * 4}}  # the failing step kept whole
    assert bounded["steps"][0]["observed"].startswith("[truncated: a JSON object of ")
    assert len(bounded["message"]) < 20_000
    assert sorted(kept) == sorted(p.name for p in (tmp_path / "values").iterdir())
    assert bound_report(report, tmp_path / "values") == {}  # nothing left to truncate
    assert json.dumps(report) == text


def test_json_problems_are_found_with_their_path_and_made_safe():
    from conformance.adapters.json_values import json_problem, json_safe

    value = {"a": [1, {"b": float("nan")}], "c": {3: "x"}, "d": 2**70, "e": "\udcff"}
    assert json_problem(value) == ("a[1].b", "is NaN, which JSON cannot carry")
    assert json_problem({"ok": [1, 2.5, "x", None, True]}) is None
    circular: list = []
    circular.append(circular)
    assert json_problem(circular)[1].startswith("refers back to a value that holds it")
    safe = json_safe(value)
    assert json.loads(json.dumps(safe, allow_nan=False)) == safe
    assert safe["a"][1]["b"] == "<NaN: not JSON>" and safe["c"] == {"<key 3: not a string>": "x"}
    assert json_safe(circular) == ["<circular reference: not JSON>"]
