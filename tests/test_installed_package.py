"""The kit as a team gets it: the installed wheel (tests/run_installed.py)
validates, runs and mutates every bundled spec by name from a directory that
has nothing of this checkout, and its pytest plugin runs a suite named by spec.

Under a development install these tests say how to run them; in CI
(CI=true) they must run, so a checkout can never stand in for the package."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from conformance.specs import bundled_specs

ROOT = Path(__file__).resolve().parent.parent
INSTALLED = os.environ.get("CONFORMANCE_TEST_INSTALLED") == "1"
if not INSTALLED and os.environ.get("CI") == "true":
    raise RuntimeError("in CI the suite runs against the installed wheel: use tests/run_installed.py")
pytestmark = pytest.mark.skipif(not INSTALLED, reason="checks the installed wheel: run python3 tests/run_installed.py")

CONFORMANCE = str(Path(sys.executable).with_name("conformance"))
NAMES = sorted(s.name for s in bundled_specs())


def kit(tmp_path, *args, timeout=900):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CONFORMANCE_DEBUG")}
    return subprocess.run([CONFORMANCE, *args], cwd=tmp_path, capture_output=True, text=True, timeout=timeout, env=env)


def test_the_bundled_specs_are_all_installed():
    assert NAMES == ["async-command", "async-jobs", "process-sessions", "task-progress", "thread-jobs"]
    for spec in bundled_specs():
        assert not spec.path.resolve().is_relative_to(ROOT), spec.path


def test_specs_lists_them_with_what_they_offer(tmp_path):
    proc = kit(tmp_path, "specs", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert set(rows) == set(NAMES)
    # the profiles each spec file declares, read from the file itself
    declared = sorted(yaml.safe_load((ROOT / "spec" / "async-jobs.yaml").read_text(encoding="utf-8"))["profiles"])
    assert rows["async-jobs"]["profiles"] == declared
    assert {"job-manager", "task-table", "oh-my-pi", "defect"} <= set(declared)
    assert rows["thread-jobs"]["scenarios"] >= 31 and rows["thread-jobs"]["operations"] >= 10
    assert rows["thread-jobs"]["reference"].startswith("lifecycle_references.")


# Every shipped mutant of every spec is killed on this same installed kit by tests/test_mutants.py
# (async-command's run the real tool, a process per step: all 18 take minutes). Here three of each
# spec show that the installed `mutants` finds that spec's mutants by name and kills them:
# for async-command a scenario kill, a timer bug and a race; for async-jobs mutants of both its
# references (a cancel that does not stick, same-instant timers out of order, a lost wake-up); for
# thread-jobs a cross-thread leak, a race and a retention bug; for task-progress a cascade, a timer
# that fires twice and a race; for process-sessions OpenClaw's lost terminal output, an expiry
# one ms late and an id freed too early.
MUTANTS_BY_NAME = {
    "async-command": ("not_found_exits_one", "timeout_not_failed", "cancel_check_then_act"),
    "async-jobs": ("job-manager.cancel_not_sticky", "task-table.fires_in_start_order", "task-table.lost_wakeup"),
    "thread-jobs": ("list_cross_thread", "double_inject_race", "spill_off_by_one"),
    "task-progress": ("child_not_killed", "auto_background_refires", "double_notify_race"),
    "process-sessions": ("terminal_poll_drops_later_output", "expires_one_late", "removed_id_freed"),
}


# async-command's tool is a process per call: its quick exploration took 25 CPU-s here, and its
# `mutants` run below explores three mutants through the same installed tool anyway.
RUN_OPTIONS = {"async-command": ("--no-stateful",)}


@pytest.mark.slow  # a spec's mutants: a minute in process
@pytest.mark.parametrize("name", NAMES)
def test_validate_run_and_mutants_by_name(tmp_path, name):
    proc = kit(tmp_path, "validate", name)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = kit(tmp_path, "run", name, "--profile", "quick", "--report-dir", "reports", *RUN_OPTIONS.get(name, ()))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((tmp_path / "reports" / "report.json").read_text())
    assert report["verdict"] == "pass" and report["spec"]["path"] == name
    assert "Verdict: PASS" in proc.stdout
    only = [arg for mutant in MUTANTS_BY_NAME[name] for arg in ("--only", mutant)]
    proc = kit(tmp_path, "mutants", name, "--profile", "quick", *only)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "3/3 killed" in proc.stdout and "SURVIVED" not in proc.stdout, proc.stdout[-3000:]
    assert all(mutant in proc.stdout for mutant in MUTANTS_BY_NAME[name])


def test_the_docs_the_cli_points_at_are_installed(tmp_path):
    help_text = " ".join(kit(tmp_path, "run", "--help").stdout.split())
    assert "conformance docs adapter-protocol" in help_text
    proc = kit(tmp_path, "docs", "adapter-protocol")
    assert proc.returncode == 0 and "hello" in proc.stdout


def test_the_pytest_plugin_runs_a_suite_named_by_spec(tmp_path):
    (tmp_path / "test_mine.py").write_text(
        textwrap.dedent("""
        from conformance import conformance_suite
        test_thread_jobs = conformance_suite("thread-jobs", profile="quick")
    """)
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "test_mine.py",
            "-k",
            "N1 or E1 or stateful",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "passed" in proc.stdout and "failed" not in proc.stdout


def test_an_unknown_spec_name_is_a_usage_error_that_writes_nothing(tmp_path):
    proc = kit(tmp_path, "run", "thread-jobz", "--report-dir", "reports")
    assert proc.returncode == 2
    assert "thread-jobs" in proc.stderr  # says what exists
    assert not (tmp_path / "reports").exists()
