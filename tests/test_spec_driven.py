"""The verdict follows the YAML: change a limit in a copy of the spec, no Python
edited, and the kit demands the new limit."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.engine.runner import RunConfig, run_conformance

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def spec_with_retention_5(tmp_path_factory):
    folder = tmp_path_factory.mktemp("spec")
    shutil.copy(ROOT / "spec" / "thread-jobs.scenarios.yaml", folder)
    text = (ROOT / "spec" / "thread-jobs.yaml").read_text()
    changed = re.sub(r"(retention_limit:\n    type: integer\n    default: )20", r"\g<1>5", text)
    assert changed != text
    path = folder / "thread-jobs.yaml"
    path.write_text(changed)
    return path


@pytest.mark.slow
def test_reference_keeping_20_fails_with_a_counterexample(spec_with_retention_5, tmp_path):
    report = run_conformance(RunConfig(spec_path=str(spec_with_retention_5), profile="quick", report_dir=str(tmp_path)))
    assert report["verdict"] == "fail" and report["exit_code"] == 1
    assert report["parameters"]["retention_limit"] == 5
    failed = {s["id"] for s in report["scenarios"] if s["verdict"] == "fail"}
    assert {"B7", "B8"} <= failed
    stateful = report["stateful"]
    assert stateful["verdict"] == "fail"
    failure = stateful["failure"]
    assert failure["kind"] == "divergence" and failure["steps"]
    counterexample = Path(failure["counterexample_file"])
    assert counterexample.exists()
    # The shrunk counterexample replays: it fails against the same implementation...
    replay = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "conformance.cli",
            "replay",
            str(spec_with_retention_5),
            str(counterexample),
            "--report-dir",
            str(tmp_path / "replay"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert replay.returncode == 1, replay.stdout + replay.stderr
    assert "Traceback" not in replay.stdout + replay.stderr


@pytest.mark.hypothesis  # its run explores (tests/hypothesis_marker.py)
def test_the_same_reference_declaring_5_passes(spec_with_retention_5, tmp_path):
    report = run_conformance(
        RunConfig(
            spec_path=str(spec_with_retention_5),
            profile="quick",
            adapter_options={"retention_limit": "5"},
            report_dir=str(tmp_path),
        )
    )
    assert report["implementation"]["parameters"] == {"retention_limit": 5}
    assert report["verdict"] == "pass", [s for s in report["scenarios"] if s["verdict"] != "pass"]
    assert report["stateful"]["verdict"] == "pass"


def test_a_declared_value_outside_the_bounds_is_refused(tmp_path):
    report = run_conformance(
        RunConfig(
            spec_path=str(ROOT / "spec" / "thread-jobs.yaml"),
            adapter_options={"retention_limit": "0"},
            report_dir=str(tmp_path),
        )
    )
    assert report["verdict"] == "error" and report["exit_code"] == 2
    assert "retention_limit must be >= 1" in report["problems"][0]["message"]
    assert (tmp_path / "report.json").exists() and (tmp_path / "junit.xml").exists()
