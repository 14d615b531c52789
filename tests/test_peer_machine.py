"""The hand-written peer machine (benchmarks/peer_machine.py), which
benchmarks/run.py measures the kit against: it passes the thread-jobs
reference and catches shipped mutants.

Small budgets and a fixed seed; the shrink phase is left out, so a failure
costs one replay at most. benchmarks/ is not an installed package: the module
is loaded from its file beside the tests.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from lifecycle_references.thread_jobs import ReferenceAdapter
from lifecycle_references.thread_jobs.mutants import MUTANTS

pytestmark = pytest.mark.hypothesis  # drives Hypothesis: tests/hypothesis_marker.py

ROOT = Path(__file__).resolve().parents[1]
PEER_PATH = ROOT / "benchmarks" / "peer_machine.py"

__all__: list[str] = []


def _load_peer():
    spec = importlib.util.spec_from_file_location("_peer_machine_under_test", PEER_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


peer = _load_peer()


def test_peer_passes_the_reference():
    outcome = peer.run_peer(ReferenceAdapter, max_examples=15, step_count=20, seed=3, shrink=False)
    assert outcome.verdict == "pass", outcome.failure
    assert outcome.examples >= 15 and outcome.steps > 15
    assert outcome.calls > outcome.steps  # every step checks the visible state as well


# Mutants of different kinds: thread scoping (seen by the state check after a
# step), a missing effect, a lost update between concurrent starts (a race, so
# the failure may not recur on replay).
@pytest.mark.parametrize(
    "name, shown_by",
    [
        ("list_cross_thread", ("state of t",)),
        ("no_idle_wakeup", ("turn_requested",)),
        # a start lost to a concurrent one, or a synchronous result and a start both
        # succeeding: which shows first depends on the thread schedule
        ("lost_update_starts", ("concurrent starts", "sync_races_start")),
    ],
)
def test_peer_fails_a_mutant(name, shown_by):
    assert name in peer.COVERS
    outcome = peer.run_peer(MUTANTS[name].factory, max_examples=30, step_count=40, seed=1, shrink=False)
    assert outcome.verdict == "fail", f"{name} was not caught in {outcome.examples} examples"
    assert any(text in outcome.failure for text in shown_by), outcome.failure
    assert outcome.first_failure_s is not None and 0 < outcome.first_failure_s <= outcome.seconds


def test_peer_model_is_its_own_code():
    """The peer's model shares nothing with the kit's model or the reference runtime."""
    source = PEER_PATH.read_text(encoding="utf-8")
    for forbidden in ("statemachines", "conformance", "lifecycle_references"):
        assert f"import {forbidden}" not in source and f"from {forbidden}" not in source, forbidden


def test_covers_names_shipped_mutants():
    assert set(peer.COVERS) <= set(MUTANTS)
