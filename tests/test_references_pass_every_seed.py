"""No false alarms: every reference implementation passes the exploration
at the ci profile at each of seeds 1-5, as a team's CI gate would run it.

A change to what the exploration draws (a new shape of key, a new batch)
can reach inputs a spec never thought about; a sane implementation then
fails where the spec, not the implementation, is at fault. The mutant gates
measure what the kit catches; this measures that it catches nothing in
code that conforms. (A near miss given as a path, ``./job-2``, once named a
new thread-jobs job, whose spilled payload the spec expected in a file
named with the raw id: the reference, which keeps ids from leaving its
directory, failed at seed 2.)"""

from __future__ import annotations

import pytest

from conformance.engine.runner import RunConfig, run_conformance
from conformance.specs import resolve_spec

# (bundled spec, the reference's parameter profile or None for its default)
REFERENCES = [
    ("thread-jobs", None),
    ("task-progress", None),
    ("process-sessions", None),
    ("process-sessions", "codex"),
    ("async-jobs", "job-manager"),
    ("async-jobs", "task-table"),
    ("async-jobs", "oh-my-pi-18"),  # the wait tool surface and 18.x's readings (issue 62)
]
SEEDS = (1, 2, 3, 4, 5)
CASES = [(spec, profile, seed) for spec, profile in REFERENCES for seed in SEEDS]


@pytest.mark.slow
@pytest.mark.parametrize(
    "spec, profile, seed", CASES, ids=[f"{s}{'[' + p + ']' if p else ''}:seed{n}" for s, p, n in CASES]
)
def test_the_reference_passes_the_ci_exploration(spec, profile, seed):
    config = RunConfig(
        spec_path=resolve_spec(spec),
        adapter_options={"profile": profile} if profile else {},
        scenarios=False,
        profile="ci",
        seed=seed,
        report_dir=None,
    )
    report = run_conformance(config)
    stateful = report["stateful"] or {}
    failure = stateful.get("failure") or {}
    assert report["verdict"] == "pass", f"{spec} {profile or ''} seed {seed}: {failure.get('message', report)}"
