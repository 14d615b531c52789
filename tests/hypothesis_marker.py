"""The ``hypothesis`` marker, and the check that keeps it true.

A test carries ``@pytest.mark.hypothesis`` (or its module a ``pytestmark``)
when it drives Hypothesis: a ``@given`` test, an exploration run in this
process or by a ``conformance run`` it starts, a strategy the kit builds. CI
runs the whole suite with the newest Hypothesis, then the fast ones of these
tests again with the lowest Hypothesis ``pyproject.toml`` declares
(``.ci/run``). A test that never reaches Hypothesis gives the same result at
both ends of the range, so it runs once.

The check: a fast test (one not marked ``slow``, which CI never runs at the
lowest Hypothesis anyway) that runs Hypothesis's engine in the test process
without the marker errors at teardown, saying to mark it. A test that reaches
Hypothesis only in a process it starts is marked by hand; the check cannot
see into that process.

tests/conftest.py loads these hooks; a pytest run can also load them with
``-p hypothesis_marker`` when tests/ is on the path.
"""

from __future__ import annotations

import pytest

__all__ = ["MARKER", "pytest_configure", "pytest_runtest_setup", "pytest_runtest_teardown"]

MARKER = "hypothesis"  # registered by Hypothesis's own pytest plugin, which puts it on every @given test
_RUNS: list[int] = [0]  # Hypothesis engine runs started since the current test's setup began
_PATCHED = "_counted_by_the_hypothesis_marker"


def _count_engine_runs() -> None:
    """Wrap the engine's ``run`` so that each run is counted. Hypothesis's
    internals may move; without the method the check is off, not wrong."""
    try:
        from hypothesis.internal.conjecture.engine import ConjectureRunner
    except ImportError:  # pragma: no cover - an internal that moved
        return
    run = getattr(ConjectureRunner, "run", None)
    if run is None or getattr(run, _PATCHED, False):
        return

    def counted_run(self, *args, **kwargs):
        _RUNS[0] += 1
        return run(self, *args, **kwargs)

    setattr(counted_run, _PATCHED, True)
    ConjectureRunner.run = counted_run  # type: ignore[method-assign]  # counts runs, changes nothing else


def pytest_configure(config: pytest.Config) -> None:
    _count_engine_runs()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _RUNS[0] = 0


@pytest.hookimpl(trylast=True)  # after pytest's own teardown of the test's fixtures
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if _RUNS[0] and item.get_closest_marker(MARKER) is None and item.get_closest_marker("slow") is None:
        pytest.fail(
            f"{item.nodeid} ran Hypothesis's engine {_RUNS[0]} time(s) but is not marked "
            f"@pytest.mark.{MARKER}: mark it (or its module: pytestmark = pytest.mark.{MARKER}), "
            "so that CI runs it with the lowest Hypothesis too (tests/hypothesis_marker.py)",
            pytrace=False,
        )
