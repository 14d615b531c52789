"""Shared test set-up. Under tests/run_installed.py (CONFORMANCE_TEST_INSTALLED=1)
every kit package must come from the installed wheel, never from this checkout."""

import os
from pathlib import Path

import pytest

# The `hypothesis` marker's check (tests/hypothesis_marker.py): CI runs the tests that drive
# Hypothesis again at its lowest version, and a fast test that drives it must say so.
from hypothesis_marker import pytest_configure, pytest_runtest_setup, pytest_runtest_teardown  # noqa: F401  # pytest hooks

# Loaded before any test: the spec language's native CEL extension panics when a process
# initialises it a second time, which happens when pytester's snapshot of sys.modules drops
# it after a test that first loaded it (test_pytest_plugin) and a later test in the same
# worker loads it again. Loaded here, it is in every snapshot.
import statemachines

ROOT = Path(__file__).resolve().parent.parent
INSTALLED = os.environ.get("CONFORMANCE_TEST_INSTALLED") == "1"

# `conformance run` defaults to one worker process per core. The tests of
# other features run in one process, so that the files, seeds and replay
# commands they check are those of a one-process run on any machine; the
# tests of --workers and of that default (test_shards.py) say what they use.
os.environ.setdefault("CONFORMANCE_WORKERS", "1")
# Progress lines go to stderr, which CliRunner mixes into the output a test reads
# as JSON; on a busy machine a search passes the default interval. Tests of the
# progress lines set their own interval.
os.environ.setdefault("CONFORMANCE_PROGRESS_INTERVAL", "600")


def pytest_sessionstart(session):
    if not INSTALLED:
        return
    import lifecycle_specs

    import conformance
    import lifecycle_references

    for module in (conformance, statemachines, lifecycle_references, lifecycle_specs):
        where = Path(module.__file__).resolve()
        if where.is_relative_to(ROOT):
            raise pytest.UsageError(
                f"{module.__name__} was imported from the checkout ({where}), not from the "
                f"installed wheel: the tests would not see packaging bugs"
            )


def pytest_addoption(parser):
    parser.addoption(
        "--seed-gate",
        action="store_true",
        help="also run the tests marked seed_gate: every shipped mutant at each of seeds 1-5 (hours; .ci/seed-gate)",
    )


def pytest_collection_modifyitems(config, items):
    """The scheduled tier (tests marked ``seed_gate``) is deselected unless
    ``--seed-gate`` is given: the whole suite is CI's for every change, the
    gate takes hours and runs on a schedule (CONTRIBUTING.md).

    Under pytest-xdist the long tests (marked ``slow``) go first, in their
    files' order: handed out one by one while the short ones fill the gaps, so
    that no worker is left running a long test alone at the end. Every worker
    sorts the same way (xdist requires the same order on each); a run in one
    process keeps the collection order."""
    if not config.getoption("--seed-gate"):
        gated = [item for item in items if item.get_closest_marker("seed_gate")]
        if gated:
            config.hook.pytest_deselected(items=gated)
            items[:] = [item for item in items if not item.get_closest_marker("seed_gate")]
    if hasattr(config, "workerinput"):
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)
