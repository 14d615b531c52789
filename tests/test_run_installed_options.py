"""tests/run_installed.py's ``--hypothesis`` option and CI's second run with the
lowest Hypothesis pyproject.toml declares (no install here: the arguments alone)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from conformance.engine.hypothesis_support import LOWEST_TESTED

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("run_installed", ROOT / "tests" / "run_installed.py")
assert _spec and _spec.loader
run_installed = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run_installed)


def test_the_hypothesis_option_is_taken_out_of_pytests_arguments():
    assert run_installed.hypothesis_option(["-q", "--hypothesis", "6.170.17", "-k", "x"]) == (
        "6.170.17",
        ["-q", "-k", "x"],
    )
    assert run_installed.hypothesis_option(["--hypothesis=6.150.0"]) == ("6.150.0", [])
    assert run_installed.hypothesis_option(["-q"]) == (None, ["-q"])


def test_lowest_is_the_lower_bound_pyproject_declares_and_the_kit_tests():
    version, rest = run_installed.hypothesis_option(["--hypothesis", "lowest", "-m", "not slow"])
    assert version == run_installed.declared_lowest_hypothesis() == LOWEST_TESTED
    assert rest == ["-m", "not slow"]
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert f'"hypothesis>={LOWEST_TESTED}",' in pyproject  # a lower bound, no upper one
    assert "hypothesis-jsonschema" not in pyproject


def test_ci_runs_the_fast_tests_that_drive_hypothesis_again_with_the_lowest_hypothesis():
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "tests -q --durations=25\n" in script  # the whole suite, its slowest tests listed
    assert 'tests --hypothesis lowest -q -m "hypothesis and not slow"' in script


def test_the_whole_suite_runs_one_worker_more_than_there_are_cores():
    assert run_installed.default_workers(2) == 3 and run_installed.default_workers(1) == 2
    workers = run_installed.parallel_defaults(["-q"])
    assert workers[:2] == ("-n", str(run_installed.default_workers())) and "loadgroup" in workers
    assert run_installed.parallel_defaults(["-n", "0"]) == () and run_installed.parallel_defaults(["-n4"]) == ()


def test_help_answers_before_anything_is_built(monkeypatch, capsys):
    built = []
    monkeypatch.setattr(run_installed.venv, "EnvBuilder", lambda *a, **k: built.append("venv"))
    monkeypatch.setattr(run_installed.tempfile, "mkdtemp", lambda *a, **k: built.append("work directory"))
    monkeypatch.setattr(run_installed, "_run", lambda argv: built.append(argv))
    with pytest.raises(SystemExit) as stopped:
        run_installed.main(["--help"])
    assert stopped.value.code == 0 and built == []
    usage = capsys.readouterr().out
    assert "--hypothesis VERSION" in usage and "goes to pytest" in usage


def test_pytests_own_arguments_pass_through():
    assert run_installed.hypothesis_option(["-n", "0", "-p", "no:xdist", "-m", "not slow", "tests/x.py"]) == (
        None,
        ["-n", "0", "-p", "no:xdist", "-m", "not slow", "tests/x.py"],
    )
