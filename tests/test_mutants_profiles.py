"""`conformance mutants` under a profile of the spec (issue 11: every mutant
killed in every profile it applies to): --adapter-opt profile=NAME as for
`conformance run`, and --all-profiles."""

import os
import subprocess
import sys

import pytest


def mutants(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-P", "-m", "conformance.cli", "mutants", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "250"},
    )


@pytest.mark.slow
def test_a_profile_chosen_with_adapter_opt_runs_its_own_scenarios(tmp_path):
    # TT-N10 (ids from bg-0) runs only under the `defect` profile: it kills numeric_sort there.
    # The job manager's mutants do not offer that profile: listed as not applicable, not failed.
    args = [
        "async-jobs",
        "--profile",
        "quick",
        "--only",
        "task-table.numeric_sort",
        "--only",
        "job-manager.cap_off_by_one",
    ]
    proc = mutants(*args, "--adapter-opt", "profile=defect")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Mutants of async-jobs under defect" in proc.stdout
    [row] = [line for line in proc.stdout.splitlines() if "task-table.numeric_sort" in line and "killed" in line]
    assert "TT-N10" in row, proc.stdout
    assert "1/1 killed; exploration alone found 1/1" in proc.stdout
    assert "not applicable under defect" in proc.stdout and "job-manager.cap_off_by_one" in proc.stdout
    # Without the option the same mutant runs under its implementation's default (task-table): no TT-N10.
    default = mutants(*args[:-2])
    assert default.returncode == 0, default.stdout + default.stderr
    [row] = [line for line in default.stdout.splitlines() if "task-table.numeric_sort" in line]
    assert "TT-N6" in row and "TT-N10" not in row, default.stdout
    assert "not applicable" not in default.stdout


@pytest.mark.slow
def test_all_profiles_reports_each_profile(tmp_path):
    proc = mutants("thread-jobs", "--profile", "quick", "--all-profiles", "--only", "late_report_reopens")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for under in ("the spec's defaults", "psi-runtime", "runtime-code"):
        assert f"Mutants of thread-jobs under {under} (exploration quick, seed 1)" in proc.stdout, under
    assert proc.stdout.count("1/1 killed; exploration alone found 1/1") == 3
    # the reference offers no allium-spec profile (a spec-only profile)
    assert "not applicable under allium-spec" in proc.stdout
    assert "every profile: all killed" in proc.stdout


@pytest.mark.slow
def test_profile_choice_mistakes_are_usage_errors():
    unknown = mutants("thread-jobs", "--adapter-opt", "profile=nope", timeout=120)
    assert unknown.returncode == 2 and "no profile 'nope'" in unknown.stderr
    assert "psi-runtime" in unknown.stderr  # the profiles it has
    both = mutants("thread-jobs", "--all-profiles", "--adapter-opt", "profile=psi-runtime", timeout=120)
    assert both.returncode == 2 and "not both" in both.stderr
    bad = mutants("thread-jobs", "--adapter-opt", "profile", timeout=120)
    assert bad.returncode == 2 and "KEY=VALUE" in bad.stderr
