"""`check-trace --to-scenario` writes a scenario that assumes the parameters
the trace was recorded under (conformance/traces/to_scenario.py): every
parameter a profile sets, at its recorded value, so the scenario holds under
that profile and is not applicable under another."""

from __future__ import annotations

from pathlib import Path

import cel
import pytest

from conformance.engine.loaded_specs import load_spec_once
from conformance.traces.to_scenario import cel_literal, recorded_assumes
from statemachines import resolve_parameters

ROOT = Path(__file__).resolve().parent.parent
SPEC = load_spec_once(ROOT / "spec" / "async-jobs.yaml")


def _holds(expression: str, params: dict) -> bool:
    return bool(cel.evaluate(expression, {"params": params}))


def test_the_scenario_assumes_the_profile_it_was_recorded_under():
    task_table, _ = resolve_parameters(SPEC, "task-table", None)
    job_manager, _ = resolve_parameters(SPEC, "job-manager", None)
    assumes = recorded_assumes(SPEC, task_table)
    assert assumes is not None and "params.surface == 'task_table'" in assumes
    assert _holds(assumes, task_table)
    assert not _holds(assumes, job_manager)


def test_recorded_under_the_defaults_it_does_not_hold_under_a_profile_that_changes_them():
    defaults, _ = resolve_parameters(SPEC, None, None)
    oh_my_pi, _ = resolve_parameters(SPEC, "oh-my-pi", None)
    assumes = recorded_assumes(SPEC, defaults)
    assert assumes is not None and _holds(assumes, defaults) and not _holds(assumes, oh_my_pi)


def test_a_parameter_the_trace_declared_is_assumed_too():
    params, _ = resolve_parameters(SPEC, "task-table", {"retry_base_ms": 700})
    assumes = recorded_assumes(SPEC, params, ["retry_base_ms"])
    assert "params.retry_base_ms == 700" in assumes
    assert not _holds(assumes, {**params, "retry_base_ms": 500})


@pytest.mark.parametrize(
    "value, literal",
    [(True, "true"), (None, "null"), (3, "3"), ("it's", "'it\\'s'"), ("a\\b", "'a\\\\b'")],
)
def test_values_become_cel_literals(value, literal):
    assert cel_literal(value) == literal
    assert cel.evaluate(f"x == {literal}", {"x": value})
