"""spec/async-jobs.yaml end to end: both reference profiles conform, the verdict
follows the YAML (a changed cap or finished limit is demanded, with no Python
edited), reports and the pytest plugin work per profile, bad input is
explained."""

import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from scenario_verdicts import conforms, race_not_exercised

from conformance.engine.runner import RunConfig, run_conformance

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "spec" / "async-jobs.yaml"
FRAGMENTS = [
    "async-jobs.job-manager.scenarios.yaml",
    "async-jobs.task-table.scenarios.yaml",
    "async-jobs.oh-my-pi-18.scenarios.yaml",
]


def _run(spec=SPEC, profile=None, report_dir=None, stateful=True, **options):
    if profile:
        options["profile"] = profile
    return run_conformance(
        RunConfig(
            spec_path=str(spec),
            adapter_options=options,
            profile="quick",
            report_dir=str(report_dir) if report_dir else None,
            stateful=stateful,
        )
    )


# Scenarios of a profile's own surface written for a real system's reading
# (docs/real-systems.md), not applicable to the seed's profile.
REAL_SYSTEM_EQUIVALENTS = {"job-manager": {"JM-E18", "JM-E21", "JM-E22"}, "task-table": {"TT-N10"}}
# The scenarios of oh-my-pi 18.x's surface and readings (their own fragment): not applicable to either.
OH_MY_PI_18 = {s["id"] for s in yaml.safe_load((ROOT / "spec" / FRAGMENTS[2]).read_text())["scenarios"]}


@pytest.mark.slow
@pytest.mark.parametrize("profile, own, other", [("job-manager", "JM-", "TT-"), ("task-table", "TT-", "JM-")])
def test_each_reference_profile_conforms_and_lists_the_other_profiles_scenarios_as_not_applicable(
    profile, own, other, tmp_path
):
    report = _run(profile=profile, report_dir=tmp_path)
    assert report["verdict"] == "pass", report.get("problems") or report["stateful"].get("failure")
    verdicts = {s["id"]: s["verdict"] for s in report["scenarios"]}
    assert verdicts and all(s["id"].startswith(own) and conforms(s) for s in report["scenarios"])
    assert len(verdicts) >= 25
    not_applicable = report["not_applicable"]
    assert not_applicable["profile"] == profile
    others = [e for e in not_applicable["scenarios"] if e["id"].startswith(other)]
    equivalents = {
        e["id"]: e["reason"]
        for e in not_applicable["scenarios"]
        if not e["id"].startswith(other) and e["id"] not in OH_MY_PI_18
    }
    assert others and set(equivalents) == REAL_SYSTEM_EQUIVALENTS[profile]
    assert "surface = " in others[0]["reason"]  # why, with this profile's value
    assert all(reason.startswith("This ") or reason.startswith("Ids ") for reason in equivalents.values())
    assert report["stateful"]["coverage"]["uncovered"] == []
    junit = (tmp_path / "junit.xml").read_text()
    unraced = sum(race_not_exercised(s) for s in report["scenarios"])  # the only skips
    assert other not in junit and f'skipped="{unraced}"' in junit  # not 30 skipped test cases
    summary = (tmp_path / "summary.md").read_text()
    assert f"not applicable to profile `{profile}`" in summary and "```mermaid" in summary


def _copy_spec(folder: Path, pattern: str, replacement: str) -> Path:
    for name in FRAGMENTS:
        shutil.copy(ROOT / "spec" / name, folder)
    text = SPEC.read_text()
    changed, n = re.subn(pattern, replacement, text)
    assert n == 1, pattern
    path = folder / "async-jobs.yaml"
    path.write_text(changed)
    return path


def test_a_lower_cap_in_the_spec_is_demanded(tmp_path):
    spec = _copy_spec(tmp_path, r"(max_running:\n    type: integer\n    default: )15", r"\g<1>3")
    report = _run(spec, report_dir=tmp_path / "r", stateful=False)
    assert report["parameters"]["max_running"] == 3
    failed = {s["id"] for s in report["scenarios"] if s["verdict"] == "fail"}
    assert {"JM-B1", "JM-B2"} & failed, failed  # the reference still accepts 15
    assert "limit_reached" in str([s["failure"] for s in report["scenarios"] if s["verdict"] == "fail"])
    # An implementation that declares the new cap conforms.
    assert _run(spec, stateful=False, max_running="3")["verdict"] == "pass"


@pytest.mark.slow
def test_a_smaller_finished_limit_in_the_task_table_profile_is_found_by_exploration(tmp_path):
    # The task-table profile's limit (the defect profile restates it; this changes only the one).
    spec = _copy_spec(
        tmp_path,
        r"max_finished: 64(?=\n      ids: counter\n      id_prefix: bg-\n      preferred_ids)",
        "max_finished: 5",
    )
    report = _run(spec, profile="task-table", report_dir=tmp_path / "r")
    assert report["verdict"] == "fail" and report["parameters"]["max_finished"] == 5
    failure = report["stateful"]["failure"]
    assert failure["kind"] == "divergence" and Path(failure["counterexample_file"]).exists()
    assert "--adapter-opt profile=task-table" in report["replay"]
    assert _run(spec, profile="task-table", max_finished="5")["verdict"] == "pass"


@pytest.mark.slow
def test_the_pytest_plugin_gives_items_only_for_the_declared_profiles_scenarios(tmp_path):
    test_file = tmp_path / "test_my_tasks.py"
    test_file.write_text(
        textwrap.dedent(f"""
        from conformance.pytest_plugin import conformance_suite
        test_tasks = conformance_suite({str(SPEC)!r}, adapter_options={{"profile": "task-table"}}, profile="quick")
    """)
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "pytest",
            str(test_file),
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "addopts=",
            "-k",
            "TT-N1 or TT-B1 or JM-N1 or stateful",
            "-rs",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 passed" in proc.stdout and "skipped" not in proc.stdout, proc.stdout  # TT-N1, TT-B1, stateful
    # the job manager's scenarios are no items; one line says how many and which
    assert "of test_tasks not applicable to profile task-table" in proc.stdout and "JM-N1" in proc.stdout


@pytest.mark.parametrize(
    "pattern, replacement, phrase",
    [
        (
            r"max_finished: 64(?=\n      ids: counter\n      id_prefix: bg-\n      preferred_ids)",
            "max_finished: 0",
            "max_finished must be >= 1",
        ),
        (r"timers: \[ends_at, dq_next_at, evict_at, ", "timers: [ends_at, due_at, ", "timer field 'due_at'"),
        (
            r'assumes: "params.surface == \'task_table\'"\n    args:\n      type: object\n      required: \[job_id\]',
            'assumes: "args.job_id == \'x\'"\n    args:\n      type: object\n      required: [job_id]',
            "unknown name",
        ),
    ],
)
def test_bad_input_names_file_line_and_what(tmp_path, pattern, replacement, phrase):
    spec = _copy_spec(tmp_path, pattern, replacement)
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "conformance.cli", "validate", str(spec)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "Traceback" not in out
    assert phrase in out and re.search(r"async-jobs\.yaml:\d+", out), out


def test_each_profile_ships_at_least_eight_mutants_each_declaring_its_profile():
    from lifecycle_references.async_jobs import MUTANTS

    for profile in ("job-manager", "task-table"):
        names = [name for name in MUTANTS if name.startswith(profile + ".")]
        assert len(names) >= 8, profile
        for name in names:
            adapter = MUTANTS[name].factory()
            try:
                assert adapter.describe()["profile"] == profile
            finally:
                adapter.close()
