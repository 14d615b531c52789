"""The ``hypothesis`` marker's check (tests/hypothesis_marker.py): CI runs the
fast tests that drive Hypothesis again at its lowest declared version, so a
fast test that drives it without the marker must not pass unnoticed.
Hypothesis's own pytest plugin marks every ``@given`` test ``hypothesis``; a
test that drives the engine another way (an exploration, ``find``) is marked
by hand."""

from pathlib import Path

pytest_plugins = ["pytester"]

TESTS = Path(__file__).resolve().parent

SUITE = """
import pytest
from hypothesis import find, given, settings, strategies as st


def test_unmarked_engine_run():
    assert find(st.integers(), lambda n: n > 3, settings=settings(database=None)) == 4


@pytest.mark.hypothesis
def test_marked_engine_run():
    assert find(st.integers(), lambda n: n > 3, settings=settings(database=None)) == 4


@pytest.mark.slow
def test_slow_unmarked_engine_run():
    assert find(st.integers(), lambda n: n > 3, settings=settings(database=None)) == 4


@given(st.integers())
@settings(max_examples=5, database=None)
def test_given_is_marked_by_hypothesis_itself(n):
    assert isinstance(n, int)


def test_without_hypothesis():
    assert True


def test_after_an_unmarked_one_without_hypothesis():
    assert True
"""


def _run_suite(pytester, monkeypatch, *args: str):
    """SUITE run by pytest in a process of its own, with the marker's check loaded."""
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    pytester.makeini("[pytest]\nmarkers =\n    slow: long\n")
    pytester.makepyfile(test_suite=SUITE)
    return pytester.runpytest_subprocess("-p", "hypothesis_marker", "-p", "no:cacheprovider", *args)


def test_a_fast_test_driving_hypothesis_without_the_marker_errors_and_says_to_mark_it(pytester, monkeypatch):
    result = _run_suite(pytester, monkeypatch, "-rE")
    result.assert_outcomes(passed=6, errors=1)
    result.stdout.fnmatch_lines(
        ["*ERROR at teardown of test_unmarked_engine_run*", "*is not marked @pytest.mark.hypothesis: mark it*"]
    )
    errors = "\n".join(line for line in result.outlines if "ERROR" in line)
    assert "test_marked_engine_run" not in errors and "test_slow_unmarked" not in errors


def test_ci_selects_the_marked_fast_tests(pytester, monkeypatch):
    result = _run_suite(pytester, monkeypatch, "-m", "hypothesis and not slow", "-v")
    result.assert_outcomes(passed=2, deselected=4)
    result.stdout.fnmatch_lines(
        ["*test_marked_engine_run PASSED*", "*test_given_is_marked_by_hypothesis_itself PASSED*"]
    )
