"""The hunt for more failures (conformance/engine/hunt.py): what it masks,
and that a failure it cannot mask does not end it; a race whose steps did
not fail again, met again with the next seed."""

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
    session = SimpleNamespace(known_failures=[], mask_hits={})
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


# ---------------------------------------------------------------- met again
def _met_again(first: Failure):
    """hunt.met_again for ``first``, found with seed 1, with 100 examples of
    which 10 were explored."""
    session = SimpleNamespace(known_failures=[], mask_hits={})
    outcome = SimpleNamespace(failure=first, explored=10)
    settings = HuntSettings(max_failures=1, seed=1, profile="ci", examples=100, replays=40)
    return hunt.met_again(None, session, outcome, settings, capabilities={}), outcome


def _race_of(steps: int) -> Failure:
    race = _race()
    race.steps = [{"index": i, "operation": "start_job", "args": {}} for i in range(steps - 1)] + [
        {**race.steps[0], "index": steps - 1}
    ]
    return race


def test_a_race_that_did_not_fail_again_is_met_again_with_the_next_seed(explorations, monkeypatch):
    runs = explorations([_race_of(24)])
    monkeypatch.setattr(reduce, "reduce_failure", lambda session, failure, budget: _race_of(2))
    again, outcome = _met_again(_race_of(26))
    assert runs.seeds == [2] and runs.masks_seen == [[]]  # no masks: nothing can accept a race
    assert again is not None and len(again.steps) == 2 and again.seed == 2
    assert "met again with seed 2" in again.message and "with seed 1, in 26 step(s)" in again.message
    assert outcome.explored == 15  # the examples it explored count against the part's


def test_met_again_keeps_nothing_but_the_same_failure(explorations, monkeypatch):
    monkeypatch.setattr(reduce, "reduce_failure", lambda session, failure, budget: _race_of(2))
    explorations([_divergence("list_jobs", "result.jobs")])
    assert _met_again(_race_of(26))[0] is None  # another bug: left to another run
    explorations([None])
    assert _met_again(_race_of(26))[0] is None  # not met again


def test_a_failure_the_hunt_can_mask_is_not_met_again(explorations):
    runs = explorations([_divergence("get_job", "result.job.status")])
    assert _met_again(_divergence("get_job", "result.job.status"))[0] is None and runs.seeds == []


class _CrashesOnCancelOfFinished:
    """The thread-jobs reference, except that cancelling a finished job
    raises: a crash, which nothing can mask."""

    def __new__(cls):
        from lifecycle_references.thread_jobs.adapter import ReferenceAdapter

        class Crashing(ReferenceAdapter):
            def call(self, operation, args):
                if operation == "cancel_job":
                    job = super().call("inspect_job", {"thread_id": args["thread_id"], "job_id": args["job_id"]})
                    if (job.get("result") or {}).get("job", {}).get("status") in ("completed", "failed"):
                        raise RuntimeError("cancel of a finished job")
                return super().call(operation, args)

        return Crashing()


@pytest.mark.slow
def test_a_run_whose_first_failure_did_not_fail_again_reports_it_met_again(tmp_path, monkeypatch):
    """The run's wiring: the first failure's steps are made not to fail again
    when replayed (as a race lost by luck would), so it stays unreduced; the
    run meets it again with the next seed, and that instance, reduced, heads
    the report."""
    from conformance.engine.runner import RunConfig, run_conformance

    real_reduce, real_explore = reduce.reduce_failure, stateful.run_stateful
    seeds = []  # of the explorations run

    def exploring(*args, **kwargs):
        seeds.append(kwargs.get("seed"))
        return real_explore(*args, **kwargs)

    def reducing(session, failure, budget=None):
        if len(seeds) == 1:  # the first exploration's failure: "did not fail again"
            budget.unreplayed = True
            return failure
        return real_reduce(session, failure, budget)

    monkeypatch.setattr(stateful, "run_stateful", exploring)
    monkeypatch.setattr(reduce, "reduce_failure", reducing)
    config = RunConfig(
        spec_path="thread-jobs",
        adapter_factory=_CrashesOnCancelOfFinished,
        adapter_label="crashes",
        scenarios=False,
        profile="quick",
        seed=1,
        report_dir=str(tmp_path / "r"),
        beyond_pools=0,  # the pools' values alone: seed 1 meets the crash with examples left
    )
    report = run_conformance(config)
    failure = report["stateful"]["failure"]
    assert seeds == [1, 2], seeds
    assert failure["kind"] == "implementation-error" and failure["seed"] == 2, failure
    assert "met again with seed 2" in failure["message"], failure["message"]
    assert len([s for s in failure["steps"] if "advance_ms" not in s]) <= 3, failure["steps"]


# -- a shorter face met while hunting (hunt.shorter_met) ---------------------------------------------
def _hit_session(hits: list[int]) -> SimpleNamespace:
    """A session whose hunt met the mask of ``drain_completed result.outcomes``
    in examples of these many steps (with seeds 2, 3, ...)."""

    def trace(n: int) -> list[dict]:  # two records made, then reads
        return [{"index": i, "operation": "start_job" if i < 2 else "list_jobs", "args": {}} for i in range(n)]

    return SimpleNamespace(
        spec=SimpleNamespace(operations={}),
        known_failures=[],
        mask_hits={("drain_completed", "result.outcomes"): [(2 + i, trace(n)) for i, n in enumerate(hits)]},
    )


@pytest.fixture(autouse=True)
def _start_job_creates(monkeypatch):
    monkeypatch.setattr(hunt, "creating_operations", lambda spec: frozenset({"start_job"}))


def test_a_long_failure_met_again_in_another_face_takes_the_shorter_instance(monkeypatch):
    first = _divergence("drain_completed", "result.outcomes", steps=12)
    reduced_to = iter([12, 5])  # the first instance met reduces to the same long face, the second does not
    monkeypatch.setattr(
        reduce,
        "replay_or_none",
        lambda session, steps, **_: _divergence("drain_completed", "result.outcomes", steps=len(steps)),
    )
    monkeypatch.setattr(
        reduce,
        "reduce_failure",
        lambda session, failure, budget: _divergence("drain_completed", "result.outcomes", steps=next(reduced_to)),
    )
    shorter = hunt.shorter_met(_hit_session([14, 26]), first, first_seed=1, replays=40)
    assert shorter is not None and len(shorter.steps) == 5 and shorter.seed == 3
    assert "met again in 26 step(s) with seed 3" in shorter.message
    assert "with seed 1, was reduced to no fewer than 12 step(s)" in shorter.message


def test_only_a_long_failure_met_again_with_the_same_signature_is_replaced(monkeypatch):
    monkeypatch.setattr(
        reduce,
        "reduce_failure",
        lambda session, failure, budget: _divergence("drain_completed", "result.outcomes", steps=2),
    )
    # short enough already: no search (engine/faces.py LONG_ENOUGH)
    short = _divergence("drain_completed", "result.outcomes", steps=8)
    assert hunt.shorter_met(_hit_session([20]), short, first_seed=1, replays=40) is None
    long = _divergence("drain_completed", "result.outcomes", steps=12)
    # the steps met replay as another failure, or pass: nothing replaces it
    monkeypatch.setattr(reduce, "replay_or_none", lambda session, steps, **_: _divergence("list_jobs", "result.jobs"))
    assert hunt.shorter_met(_hit_session([20]), long, first_seed=1, replays=40) is None
    monkeypatch.setattr(reduce, "replay_or_none", lambda session, steps, **_: None)
    assert hunt.shorter_met(_hit_session([20]), long, first_seed=1, replays=40) is None
    # met where as many records were made as in the failure (12 starts): not tried
    monkeypatch.setattr(
        reduce,
        "replay_or_none",
        lambda session, steps, **_: _divergence("drain_completed", "result.outcomes", steps=len(steps)),
    )
    few_made = _divergence("drain_completed", "result.outcomes", steps=12)
    few_made.steps = _hit_session([12]).mask_hits[("drain_completed", "result.outcomes")][0][1]  # 2 starts, 10 reads
    assert hunt.shorter_met(_hit_session([9]), few_made, first_seed=1, replays=40) is None
    # a failure the hunt did not mask was never met again
    assert hunt.shorter_met(_hit_session([20]), _race(), first_seed=1, replays=40) is None


@pytest.mark.slow
def test_a_failure_reported_in_its_long_face_is_replaced_by_the_short_face_the_hunt_met():
    """task-table outcome_ties_by_id (outcomes of one instant drained by id as
    text) at seed 3: the exploration first meets its 12-step face (ten bodies
    ending at one clock move, bg-10 before bg-9), which no reduction turns
    into the 5-step one (two finish_job calls in one instant); the hunt meets
    that one while the first is masked, and it heads the report."""
    import dataclasses

    from conformance.engine.runner import run_conformance
    from conformance.mutants import as_run_reports, load_mutants, mutant_config
    from conformance.specs import resolve_spec
    from statemachines import load_spec

    spec = str(resolve_spec("async-jobs"))
    name = "task-table.outcome_ties_by_id"
    mutant = load_mutants(load_spec(spec).implementations["mutants"])[name]
    config = as_run_reports(mutant_config(spec, name, mutant, profile="ci", seed=3, timeout_s=10))
    failure = run_conformance(dataclasses.replace(config, scenarios=False))["stateful"]["failure"]
    assert failure["operation"] == "drain_completed", failure["message"]
    assert len([s for s in failure["steps"] if "advance_ms" not in s]) <= 5, failure["message"]
    assert "while the exploration looked for other failures" in failure["message"]
