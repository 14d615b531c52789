"""The hunt for more failures (conformance/engine/hunt.py): what it masks,
and that a failure it cannot mask does not end it."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from conformance.engine import hunt, reduce, stateful
from conformance.engine.failures import Failure
from conformance.engine.hunt import HuntSettings, more_failures


def _divergence(operation: str, path: str, steps: int = 3) -> Failure:
    trace = [{"index": i, "operation": "start_job", "args": {}} for i in range(steps)]
    return Failure(
        kind="divergence", message=f"{operation}: {path} differs", operation=operation, path=path, steps=trace
    )


def _race() -> Failure:
    trace = [{"index": 0, "concurrently": [{"operation": "a", "args": {}}, {"operation": "b", "args": {}}]}]
    return Failure(kind="linearizability", message="a and b at once: no order", operation="a", path=None, steps=trace)


@dataclass
class _Explorations:
    """Stands for the exploration: each run returns the next failure (None:
    it passed) and notes which failures were masked when it ran."""

    found: list[Failure | None]
    masks_seen: list[list[tuple]] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)

    def __call__(self, spec, session, *, seed, **_):
        self.masks_seen.append(list(session.known_failures))
        self.seeds.append(seed)
        failure = self.found.pop(0) if self.found else None
        return SimpleNamespace(verdict="fail" if failure else "pass", failure=failure, explored=5)


@pytest.fixture
def explorations(monkeypatch):
    def install(found: list[Failure | None]) -> _Explorations:
        runs = _Explorations(list(found))
        monkeypatch.setattr(stateful, "run_stateful", runs)
        monkeypatch.setattr(reduce, "explain_race", lambda session, failure: failure)  # nothing to explain
        monkeypatch.setattr(reduce, "replay_or_none", lambda *a, **k: None)  # no failure was another's symptom
        monkeypatch.setattr(hunt.HuntBudgets, "reduce", lambda self, session, failure, found: failure)
        return runs

    return install


def _hunt(first: Failure, max_failures: int = 3) -> tuple[list[Failure], SimpleNamespace]:
    session = SimpleNamespace(known_failures=[])
    outcome = SimpleNamespace(failure=first, explored=10)
    settings = HuntSettings(max_failures=max_failures, seed=1, profile="ci", examples=100, replays=40)
    return more_failures(None, session, outcome, settings, capabilities={}), session


def test_a_race_met_while_hunting_is_kept_and_the_hunt_goes_on_under_the_masks_so_far(explorations):
    """A race shows only when one call wins it: met at seed 2, it must not end
    the hunt before the divergence seed 3 meets without that luck."""
    later = _divergence("finish_job", "result.status")
    runs = explorations([_race(), later])
    more, session = _hunt(_divergence("get_job", "result.job.status"))
    assert [f.kind for f in more] == ["linearizability", "divergence"] and more[1] is later
    assert runs.seeds == [2, 3]
    # the race was never masked (nothing can accept it): seed 3 ran under the first failure's mask alone
    assert runs.masks_seen == [[("get_job", "result.job.status")], [("get_job", "result.job.status")]]
    assert session.known_failures == []  # lifted when the hunt ends


def test_the_same_race_met_again_ends_the_hunt(explorations):
    race = _race()
    runs = explorations([race, _race(), _divergence("list_jobs", "result.jobs")])
    more, _ = _hunt(_divergence("get_job", "result.job.status"))
    assert more == [race] and runs.seeds == [2, 3]


def test_no_hunt_after_a_first_failure_nothing_can_mask(explorations):
    runs = explorations([_divergence("list_jobs", "result.jobs")])
    more, _ = _hunt(_race())
    assert more == [] and runs.seeds == []


def test_each_divergence_found_is_masked_for_the_next_seed(explorations):
    second = _divergence("list_jobs", "result.jobs[0].status")
    runs = explorations([second, None])
    more, _ = _hunt(_divergence("get_job", "result.job.status"), max_failures=4)
    assert more == [second]
    assert runs.masks_seen[1] == [
        ("get_job", "result.job.status"),
        ("list_jobs", "result.jobs[*].status"),
    ]  # indexes aside
