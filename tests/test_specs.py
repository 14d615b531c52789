"""Every spec in the repository loads, and the thread-jobs matrix is complete."""

from pathlib import Path

import pytest

from statemachines import load_spec

SPEC_DIR = Path(__file__).resolve().parent.parent / "spec"
MAIN_SPECS = sorted(p for p in SPEC_DIR.glob("*.yaml") if ".scenarios." not in p.name)


@pytest.mark.parametrize("path", MAIN_SPECS, ids=[p.name for p in MAIN_SPECS])
def test_every_spec_validates(path):
    spec = load_spec(path)
    assert spec.operations and spec.lifecycle.states
    ids = [s.id for s in spec.scenarios]
    assert len(ids) == len(set(ids))
    for scenario in spec.scenarios:
        assert scenario.category in ("nominal", "edge", "boundary")


def test_thread_jobs_has_the_whole_matrix():
    spec = load_spec(SPEC_DIR / "thread-jobs.yaml")
    expected = [f"N{i}" for i in range(1, 11)] + [f"E{i}" for i in range(1, 14)] + [f"B{i}" for i in range(1, 9)]
    # After the seed's rows: equivalents for the real systems' profiles, B10
    # (explicit ids in the generated shape), B11 (line and byte edges of the payload limits), B12 (racing cancels), B13 (racing outcomes), B14 (an evicted job's tool call is unknown again), B15 (a carriage return inside a line is no line break), and regressions of bugs they shipped (docs/real-systems.md).
    after_the_seed = ["N11", "E14", "B9", "B10", "B11", "B12", "B13", "B14", "R1", "R2", "B15"]
    ids = [s.id for s in spec.scenarios]
    assert [i for i in ids if i not in after_the_seed] == expected and sorted(set(ids) - set(expected)) == sorted(
        after_the_seed
    )
    assert set(spec.lifecycle.states) == {"running", "pending_cancel", "completed", "failed", "cancelled", "timed_out"}
    assert spec.lifecycle.terminal == {"completed", "failed", "cancelled", "timed_out"}


def test_profiles_stay_within_parameter_bounds():
    spec = load_spec(SPEC_DIR / "thread-jobs.yaml")
    for profile in spec.profiles.values():
        for name, value in profile.parameters.items():
            assert spec.parameters[name].violation(value) is None
