"""Saved failures (Hypothesis's example database under the report directory)
never change what a run counts: the seed's examples are explored first, and
the failures an earlier run saved are replayed only after an exploration
that found nothing, their coverage left out (issue 61: a second run said
"15 never exercised" where the first said 1)."""

from __future__ import annotations

import pytest

from conformance.engine.runner import RunConfig, run_conformance
from lifecycle_references.task_progress.adapter import ReferenceAdapter
from lifecycle_references.task_progress.mutants import MUTANTS

pytestmark = [pytest.mark.hypothesis, pytest.mark.slow]  # four to five explorations each (about 20 s)


def _exercised(report: dict) -> dict:
    """The categories of what the run exercised (not pairs or triples, whose rare
    ones the reference's timer threads reach in one run and not the next)."""
    categories = report["coverage"]["categories"]
    return {name: categories[name] for name in ("transitions", "states", "operations", "error-kinds")}


def _run(report_dir, factory, **extra) -> dict:
    config = RunConfig(
        spec_path="task-progress",
        adapter_factory=factory,
        scenarios=False,
        profile="quick",
        report_dir=str(report_dir),
        **extra,
    )
    return run_conformance(config)


def test_a_rerun_that_has_saved_failures_counts_what_the_first_run_counted(tmp_path):
    factory = MUTANTS["kill_finished_changes_it"].factory
    first = _run(tmp_path, factory)
    assert first["stateful"]["verdict"] == "fail"
    assert any(p.is_file() for p in (tmp_path / "example-db").rglob("*"))  # the failure was saved
    again = _run(tmp_path, factory)
    assert again["stateful"]["verdict"] == "fail"
    # what was exercised (times taken may differ by a few: the reference's timers run on threads)
    assert again["stateful"]["coverage"]["uncovered"] == first["stateful"]["coverage"]["uncovered"]
    assert _exercised(again) == _exercised(first)
    assert again["stateful"]["failure"]["message"] == first["stateful"]["failure"]["message"]


def test_saved_failures_are_still_replayed_after_an_exploration_that_found_nothing(tmp_path):
    factory = MUTANTS["kill_finished_changes_it"].factory
    assert _run(tmp_path, factory)["stateful"]["verdict"] == "fail"
    # another seed of a fixed implementation explores first, then replays what was saved
    fixed = _run(tmp_path, ReferenceAdapter, seed=2)
    alone = _run(tmp_path / "alone", ReferenceAdapter, seed=2)
    assert fixed["stateful"]["verdict"] == alone["stateful"]["verdict"] == "pass"
    assert fixed["stateful"]["coverage"]["uncovered"] == alone["stateful"]["coverage"]["uncovered"]
    assert _exercised(fixed) == _exercised(alone)
    assert fixed["stateful"]["examples"] > alone["stateful"]["examples"]  # the saved failure was replayed too
