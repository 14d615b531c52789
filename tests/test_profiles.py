"""Each reference implementation conforms in every profile its spec offers."""

from pathlib import Path

import pytest

from conformance.engine.runner import RunConfig, run_conformance

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.parametrize(
    "spec, profile",
    [
        ("thread-jobs", None),
        ("thread-jobs", "runtime-code"),
        ("task-progress", None),
        ("task-progress", "job-tool"),
        # The real systems behind the seeds (issue 11, docs/real-systems.md).
        ("thread-jobs", "psi-runtime"),
        ("async-jobs", "oh-my-pi"),
        ("async-jobs", "oh-my-pi-18"),
        ("async-jobs", "defect"),
        ("process-sessions", "openclaw"),
        ("process-sessions", "codex"),
    ],
)
def test_reference_conforms_in_each_profile(spec, profile, tmp_path):
    options = {"profile": profile} if profile else {}
    report = run_conformance(
        RunConfig(
            spec_path=str(ROOT / "spec" / f"{spec}.yaml"),
            profile="quick",
            adapter_options=options,
            report_dir=str(tmp_path),
        )
    )
    failures = [s for s in report["scenarios"] if s["verdict"] not in ("pass", "skip")]
    assert report["verdict"] == "pass", (failures, report["stateful"] and report["stateful"]["failure"])
    assert report["implementation"]["profile"] == profile
    assert (tmp_path / "report.json").exists() and (tmp_path / "junit.xml").exists()
