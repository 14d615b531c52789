"""Counterexamples that read like a bug report (runs use implementations that declare no
concurrency, so what the exploration generates does not depend on thread scheduling): after Hypothesis, the kit
replays the failing steps against the implementation and keeps only what
the failure needs (conformance/engine/reduce.py); the result is the same in
two runs with the same seed, and Hypothesis's example database lets a re-run
try the known failure first."""

from __future__ import annotations

import dataclasses
import json
import re
import warnings
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from cli_result import kit

from conformance.engine.budgets import ReplayBudget
from conformance.engine.failures import Failure, signature
from conformance.engine.reduce import _simpler_values
from conformance.engine.runner import Progress, RunConfig, run_conformance
from conformance.mutants import load_mutants
from conformance.specs import resolve_spec
from statemachines import load_spec

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "examples" / "accepted-deviation"


def _load(path: Path, attribute: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"_loaded_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, attribute)


def _sequential(factory):
    """The same implementation declaring no concurrency: the exploration then has no
    concurrent groups, so what it generates does not depend on thread scheduling.
    ``factory`` is an adapter class or a function making one."""

    def no_concurrency(identity: dict) -> dict:
        return {**identity, "capabilities": {**(identity.get("capabilities") or {}), "concurrent": False}}

    if isinstance(factory, type):

        class Sequential(factory):
            def describe(self):
                return no_concurrency(super().describe())

        return Sequential

    def make(*args, **kwargs):
        adapter = factory(*args, **kwargs)
        describe = adapter.describe
        adapter.describe = lambda: no_concurrency(describe())
        return adapter

    return make


def _demo_factory():
    return _sequential(_load(DEMO / "runtime.py", "DemoAdapter"))


def _explore(tmp_path: Path, name: str, factory, **extra) -> dict:
    config = RunConfig(
        spec_path="thread-jobs",
        adapter_factory=factory,
        adapter_label=name,
        scenarios=False,
        profile="ci",
        report_dir=str(tmp_path / name),
        **extra,
    )
    return run_conformance(config)


def _exercised(report: dict) -> dict:
    """The categories of what the run exercised (its pairs and triples aside)."""
    categories = report["coverage"]["categories"]
    return {name: categories[name] for name in ("transitions", "states", "operations", "error-kinds")}


def _steps(report: dict) -> list[dict]:
    path = Path(report["stateful"]["failure"]["counterexample_file"])
    return yaml.safe_load(path.read_text(encoding="utf-8"))["steps"]


@pytest.mark.slow
def test_the_demo_bug_reduces_to_the_three_steps_it_needs_the_same_in_two_runs(tmp_path):
    factory = _demo_factory()
    deviations = str(DEMO / "deviations.yaml")
    first = _explore(tmp_path, "one", factory, deviations=deviations)
    second = _explore(tmp_path, "two", factory, deviations=deviations)
    assert first["stateful"]["verdict"] == "fail"
    steps = _steps(first)
    # start a job, ask to cancel it, report progress: the bug needs nothing else
    assert [s["call"] for s in steps] == ["start_job", "cancel_job", "observe_progress"], steps
    assert steps[2]["args"]["note"] == ""  # arguments are as simple as the failure allows
    assert _steps(second) == steps
    failure = first["stateful"]["failure"]
    assert "reduced from" in failure["message"] and failure["expected"] == "pending_cancel"
    header = Path(failure["counterexample_file"]).read_text(encoding="utf-8").splitlines()[0]
    assert "minimal" not in header and "reduced by replaying" in header


THREAD_JOB_MUTANTS = ["inspect_cross_thread", "cancel_finished_job", "progress_injects", "second_start_allowed"]


@pytest.mark.slow
@pytest.mark.parametrize("mutant", THREAD_JOB_MUTANTS)
def test_shipped_mutants_get_short_counterexamples(tmp_path, mutant):
    mutants = load_mutants(load_spec(resolve_spec("thread-jobs")).implementations["mutants"])
    if mutant not in mutants:
        pytest.skip(f"no mutant {mutant} (known: {', '.join(mutants)})")
    report = _explore(tmp_path, mutant, _sequential(mutants[mutant].factory))
    assert report["stateful"]["verdict"] == "fail", mutant
    steps = _steps(report)
    assert len(steps) <= 12, (mutant, len(steps), steps)


@pytest.mark.slow
def test_a_rerun_with_saved_failures_explores_and_counts_as_the_first_run(tmp_path):
    # the seed's examples come first, the saved failures after an exploration that found
    # nothing: the rerun reports the same failure and counts the same coverage (issue 61)
    factory = _demo_factory()
    deviations = str(DEMO / "deviations.yaml")
    first = _explore(tmp_path, "same", factory, deviations=deviations, shrink_s=0)
    databases = list((tmp_path / "same" / "example-db").iterdir())
    assert len(databases) == 1 and any(p.is_file() for p in databases[0].rglob("*")), databases
    steps = _steps(first)
    again = _explore(tmp_path, "same", factory, deviations=deviations, shrink_s=0)
    assert again["stateful"]["verdict"] == "fail" and _steps(again) == steps
    assert again["stateful"]["coverage"]["uncovered"] == first["stateful"]["coverage"]["uncovered"]
    assert _exercised(again) == _exercised(first)
    off = _explore(tmp_path, "off", factory, deviations=deviations, shrink_s=0, example_db="none")
    assert not (tmp_path / "off" / "example-db").exists() and off["stateful"]["verdict"] == "fail"


def test_simpler_values_come_simplest_first_and_never_repeat_the_value():
    assert _simpler_values("ééé") == ["", "é", "aaa"]
    assert _simpler_values(40) == [0, 1, 20]
    assert _simpler_values(-3) == [0, 1, -1, 3]
    assert _simpler_values([1, 2, 3]) == [[], [1], [2, 3], [1, 3], [1, 2]]
    assert _simpler_values("") == [] and _simpler_values(0) == [] and _simpler_values(None) == []


def test_one_argument_of_every_call_is_simplified_at_once():
    from conformance.engine.reduce import _LEAVE_OUT, _common_simpler, _kind, _with_argument

    assert _common_simpler(["ééé", "x", ""]) == ["", "a"] and _common_simpler([5, 0]) == [0, 1]
    assert _common_simpler(["x", 3]) == []  # values of different kinds take no common value
    step = {
        "concurrently": [
            {"call": "start_job", "args": {"label": "b", "text": "ü"}},
            {"call": "get_job", "args": {"job_id": "k1"}},
        ]
    }
    left_out = _with_argument(step, "start_job", "text", _LEAVE_OUT)
    assert (
        left_out["concurrently"][0]["args"] == {"label": "b"} and left_out["concurrently"][1] is step["concurrently"][1]
    )
    assert _with_argument({"advance_ms": 5}, "start_job", "text", "") == {"advance_ms": 5}
    assert [_kind(s) for s in ({"advance_ms": 1}, {"call": "get_job", "args": {}}, step)] == [
        "clock move",
        "call get_job",
        "concurrent start_job get_job",
    ]


def test_each_retry_of_a_race_starts_another_call_last():
    from conformance.engine.reduce import RACE_TRIES
    from conformance.engine.session import launch_order

    assert launch_order(2, -1) == [0, 1]  # what the exploration does: calls started in their order
    assert [launch_order(2, -1 - t)[-1] for t in range(RACE_TRIES)] == [1, 0, 1]
    assert [launch_order(3, -1 - t)[-1] for t in range(3)] == [2, 1, 0]
    assert sorted(launch_order(3, -2)) == [0, 1, 2]


def test_the_same_bug_is_recognised_whatever_the_list_index():
    a = Failure(kind="divergence", message="x", operation="list_jobs", path="result.jobs[4].status")
    b = Failure(kind="divergence", message="y", operation="list_jobs", path="result.jobs[0].status")
    c = Failure(kind="divergence", message="y", operation="list_jobs", path="result.jobs[0].tool_name")
    assert signature(a) == signature(b) != signature(c)


@pytest.mark.slow
def test_max_failures_reports_each_distinct_bug_with_its_own_counterexample(tmp_path):
    from conformance.engine.failures import signature as sig
    from conformance.reporting import validate_report

    TwoBugsAdapter = _sequential(_load(Path(__file__).resolve().parent / "fixtures" / "two_bugs.py", "TwoBugsAdapter"))

    phases = _Phases()
    report = run_conformance(
        RunConfig(
            spec_path="thread-jobs",
            adapter_factory=TwoBugsAdapter,
            adapter_label="two-bugs",
            scenarios=False,
            profile="ci",
            report_dir=str(tmp_path / "two-bugs"),
            max_failures=3,
            shrink_s=10,
        ),
        phases,
    )
    assert validate_report({k: v for k, v in report.items() if not k.startswith("_")}) == []
    stateful = report["stateful"]
    failures = [stateful["failure"], *stateful.get("more_failures", [])]
    assert len(failures) >= 2, [f["message"].splitlines()[0] for f in failures]
    lengths = [
        len(yaml.safe_load(Path(f["counterexample_file"]).read_text(encoding="utf-8"))["steps"]) for f in failures
    ]
    assert lengths == sorted(lengths), lengths  # the headline is the shortest counterexample
    # The progress display is told each phase, and how many failures were found by then.
    assert phases.seen[0] == ("exploring", 0), phases.seen
    assert ("shrinking", 1) in phases.seen and ("reducing", 1) in phases.seen, phases.seen
    assert ("looking for more", 1) in phases.seen and ("reducing", 2) in phases.seen, phases.seen
    signatures = [sig(Failure(**{k: f[k] for k in ("kind", "message", "operation", "path")})) for f in failures]
    assert len(set(signatures)) == len(signatures)  # distinct: kind, operation, path
    operations = {f["operation"] for f in failures}
    assert {"inspect_job", "observe_progress"} <= operations | {"list_jobs"} and "observe_progress" in operations
    files = [Path(f["counterexample_file"]) for f in failures]
    assert len(set(files)) == len(files) and all(p.is_file() for p in files)
    assert files[1].name == "counterexample-stateful-2.yaml"
    assert all(f["replay"].startswith("conformance replay") for f in failures)


class _Phases(Progress):
    """The exploration's phases as the progress display is told them."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []

    def stateful_phase(self, phase: str, failures: int) -> None:
        self.seen.append((phase, failures))


def _session_for(adapter_class, spec: str = "thread-jobs"):
    from conformance.engine.runner import prepare

    return prepare(
        RunConfig(spec_path=spec, adapter_factory=adapter_class, adapter_label="fixture", report_dir=None)
    ).session


def _mutant_factory(spec: str, name: str):
    """The factory of one of a bundled spec's shipped mutants."""
    return load_mutants(load_spec(resolve_spec(spec)).implementations["mutants"])[name].factory


def _reduce_replayed(session, steps: list[dict], operation: str) -> list[dict]:
    """``steps`` replayed (they must fail at ``operation``), then reduced; the
    counterexample's steps. The session is closed either way."""
    from conformance.engine.reduce import reduce_failure, replay_steps, steps_of_trace

    try:
        failure = replay_steps(session, steps)
        assert failure is not None and failure.operation == operation, failure and failure.message
        reduced = reduce_failure(session, failure)
    finally:
        session.close()
    return steps_of_trace(reduced.steps)


def test_a_sequential_bug_first_seen_in_a_race_is_reported_as_the_plain_divergence():
    from conformance.engine.reduce import explain_race

    fixtures = Path(__file__).resolve().parent / "fixtures" / "two_bugs.py"
    session = _session_for(_load(fixtures, "StaleCancelAnswerAdapter"))
    start = {"thread_id": "t1", "tool_call_id": "c1", "tool_name": "build", "job_id": "k1"}
    race = [
        {"operation": "cancel_job", "args": {"thread_id": "t1", "job_id": "k1", "requested_by": "user"}},
        {"operation": "inspect_job", "args": {"thread_id": "t1", "job_id": "k1"}},
    ]
    failure = Failure(
        kind="linearizability",
        message="2 concurrent calls match no sequential order",
        steps=[{"index": 0, "operation": "start_job", "args": start}, {"index": 1, "concurrently": race}],
    )
    try:
        explained = explain_race(session, failure)
    finally:
        session.close()
    assert explained.kind == "divergence" and explained.operation == "cancel_job", explained.message
    assert explained.path == "result.status" and "so the bug is not a race" in explained.message


def test_a_real_race_stays_a_linearizability_failure_and_says_what_each_order_did():
    from conformance.engine.reduce import explain_race

    session = _session_for(_mutant_factory("thread-jobs", "double_inject_race"))
    steps = [
        {
            "index": 0,
            "operation": "start_job",
            "args": {"thread_id": "t1", "tool_call_id": "c1", "tool_name": "build", "job_id": "k1"},
        },
        {
            "index": 1,
            "operation": "observe_outcome",
            "args": {"job_id": "k1", "outcome": "completed", "payload": "done"},
        },
        {
            "index": 2,
            "concurrently": [
                {"operation": "turn_boundary", "args": {"thread_id": "t1"}},
                {"operation": "turn_boundary", "args": {"thread_id": "t1"}},
            ],
        },
    ]
    failure = Failure(kind="linearizability", message="2 concurrent calls match no sequential order", steps=steps)
    try:
        explained = explain_race(session, failure)
    finally:
        session.close()
    assert explained is failure and explained.kind == "linearizability"
    assert "call 0 then call 1, one at a time: no difference" in explained.message


def test_a_race_that_shows_in_few_replays_gets_more_tries_per_candidate():
    from conformance.engine.reduce import MAX_RACE_TRIES, RACE_TRIES, race_tries

    assert race_tries(1.0) == RACE_TRIES and race_tries(0.9) == RACE_TRIES
    assert race_tries(0.5) == 7 and race_tries(0.25) == 17  # a miss stays under 1 %: 0.75 ** 17 < 0.01
    assert race_tries(0.05) == MAX_RACE_TRIES


def test_a_reduction_says_when_its_race_showed_too_seldom_to_trust_a_kept_step():
    from conformance.engine.reduce import MAX_RACE_TRIES, race_note, race_tries

    assert race_note(None, 3) is None  # no race in the list
    assert race_note((12, 12), race_tries(1.0)) is None
    assert race_note((3, 12), race_tries(3 / 12)) is None  # 17 tries: a miss under 1 %
    seldom = race_note((2, 48), MAX_RACE_TRIES)  # 24 tries miss it with a chance of 36 %
    assert seldom is not None and "showed in only 2 of 48 replays" in seldom and "may have been kept" in seldom
    never = race_note((0, 48), 3)
    assert never is not None and never.startswith("not reduced: its race did not show again in 48 replays")


@pytest.mark.slow
def test_a_race_that_rarely_shows_still_reduces_to_the_steps_it_needs():
    """A cancel that checks, releases its lock and acts only now and then (a
    quarter of the calls here, as a race that a loaded machine rarely
    schedules): three replays per candidate would keep a step the failure
    does not need whenever all three missed."""
    import random
    import threading
    import time
    from dataclasses import replace

    from conformance.engine.reduce import reduce_failure, replay_steps, steps_of_trace
    from lifecycle_references.thread_jobs.adapter import ReferenceAdapter
    from lifecycle_references.thread_jobs.runtime import PENDING_CANCEL, ThreadJobRuntime

    class RarelyRacingCancel(ThreadJobRuntime):
        luck = random.Random(2)  # the same calls pause in every run (three tries per candidate kept a start here)
        luck_lock = threading.Lock()

        def cancel_job(self, thread_id, job_id, requested_by):
            with self.luck_lock:
                pause = self.luck.random() < 0.2
            if not pause:
                return super().cancel_job(thread_id, job_id, requested_by)
            with self._lock:
                job = self._job_in_thread(thread_id, job_id)
                cancellable = self._cancellable(job)
            time.sleep(0.02)
            with self._lock:
                if cancellable:
                    job.status = PENDING_CANCEL
                    job.cancel_requested_at = self._clock()
                    self._tool_runtime.request_cancel(job.job_id, requested_by)
                return replace(job)

    class Adapter(ReferenceAdapter):
        runtime_class = RarelyRacingCancel

    cancel = {"thread_id": "t1", "job_id": "k1", "requested_by": "user"}
    steps = [
        {
            "call": "start_job",
            "args": {"thread_id": "t1", "tool_call_id": f"c{i}", "tool_name": "build", "job_id": f"k{i}"},
        }
        for i in (2, 3, 1, 4)
    ]
    steps += [
        {"advance_ms": 5},
        {"call": "list_jobs", "args": {"thread_id": "t1"}},
        {"advance_ms": 7},
        {"concurrently": [{"call": "cancel_job", "args": cancel}, {"call": "cancel_job", "args": cancel}]},
    ]
    session = _session_for(Adapter)
    try:
        failure = None
        for _ in range(60):
            failure = replay_steps(session, steps)
            if failure is not None:
                break
        assert failure is not None and failure.kind == "linearizability", failure and failure.message
        reduced = reduce_failure(session, failure)
    finally:
        session.close()
    kept = steps_of_trace(reduced.steps)
    assert reduced.kind == "linearizability", reduced.message
    calls = [s.get("call") or "concurrently" for s in kept if "advance_ms" not in s]
    assert calls[:2] == ["start_job", "concurrently"] and len(kept) <= 4, kept  # then at most the probe's calls
    assert kept[1]["concurrently"][0]["args"]["job_id"] in kept[0]["chosen"], kept  # the job the cancels race on


def test_a_wait_becomes_its_clock_move_and_an_explicit_id_is_left_to_the_implementation():
    """job-manager's cancel_not_sticky once reduced to five steps that no
    single drop could shorten: a start kept only so that job_tool's wait had
    a running job to wait for, and a start whose explicit id collided with
    it. The wait becomes the 1 ms it moved the clock, the explicit id is left
    out, and the first start then goes."""

    factory = load_mutants(load_spec(resolve_spec("async-jobs")).implementations["mutants"])[
        "job-manager.cancel_not_sticky"
    ].factory
    session = _session_for(factory, "async-jobs")
    steps = [
        {"call": "start_job", "args": {"label": ""}, "chosen": ["bg_1"]},
        {"call": "start_job", "args": {"id": "bg_1", "label": "", "stop_ms": 1}, "chosen": ["bg_1-2"]},
        {"call": "job_tool", "args": {"cancel": ["bg_1-2"]}},
        {"call": "job_tool", "args": {}},
        {"call": "list_jobs", "args": {}},
    ]
    kept = _reduce_replayed(session, steps, "list_jobs")
    assert len(kept) == 4, kept
    assert [s.get("call", "advance") for s in kept] == ["start_job", "job_tool", "advance", "list_jobs"], kept
    assert "id" not in kept[0]["args"] and kept[2]["advance_ms"] == 1, kept


def test_calls_given_the_argument_some_of_them_pass_let_the_explicit_ends_go():
    """task-table keeps_65_finished at seed 4 once reduced to 114 steps where
    67 suffice: of 65 jobs, 34 started with duration_ms 1 and ended at one
    clock move, the others ended by a finish_job each. Giving every start
    the duration some starts had lets every finish go at once."""

    session = _session_for(_mutant_factory("async-jobs", "task-table.keeps_65_finished"), "async-jobs")
    steps = [{"call": "start_job", "args": {"label": ""}, "chosen": [f"bg-{n}"]} for n in range(1, 32)]
    steps += [
        {"call": "finish_job", "args": {"job_id": f"bg-{n}", "outcome": "completed", "text": ""}} for n in range(1, 32)
    ]
    steps += [
        {"call": "start_job", "args": {"duration_ms": 1, "label": ""}, "chosen": [f"bg-{n}"]} for n in range(32, 66)
    ]
    steps += [{"advance_ms": 1}, {"call": "list_jobs", "args": {}}]
    kept = _reduce_replayed(session, steps, "list_jobs")
    assert len(kept) == 67, [s.get("call", s) for s in kept]
    starts = [s for s in kept if s.get("call") == "start_job"]
    assert len(starts) == 65 and all(s["args"].get("duration_ms") == 1 for s in starts), starts[:3]
    assert not [s for s in kept if s.get("call") == "finish_job"]


def test_jobs_each_ended_by_a_finish_are_ended_by_time_instead():
    """task-table eviction_drops_outcome at seed 1 once reduced to 131 steps
    where 67 suffice: 65 starts without a duration, 65 finish_job calls, the
    drain. No start passes a duration, so none can be spread to the others,
    and no single drop keeps the failure. Every start given the smallest
    duration and one clock move after them ends every job: the finishes go."""

    session = _session_for(_mutant_factory("async-jobs", "task-table.eviction_drops_outcome"), "async-jobs")
    steps = [{"call": "start_job", "args": {"label": ""}, "chosen": [f"bg-{n}"]} for n in range(1, 66)]
    steps += [
        {"call": "finish_job", "args": {"job_id": f"bg-{n}", "outcome": "completed", "text": ""}} for n in range(1, 66)
    ]
    steps += [{"call": "drain_completed", "args": {}}]
    kept = _reduce_replayed(session, steps, "drain_completed")
    assert len(kept) == 67, [s.get("call", s) for s in kept]
    starts = [s for s in kept if s.get("call") == "start_job"]
    assert len(starts) == 65 and all(s["args"].get("duration_ms") == 1 for s in starts), starts[:3]
    assert [s for s in kept if "advance_ms" in s] == [{"advance_ms": 1}], kept[64:]
    assert not [s for s in kept if s.get("call") == "finish_job"]


def test_an_explicit_id_shaped_like_generated_ones_moves_down_with_the_dropped_records():
    """thread-jobs generated_id_collides: the id counter does not skip an id a
    caller chose. The exploration chose job-10 after nine generated starts;
    dropping any of them alone loses the collision, so the reduction once
    stopped there. With the dropped ids, job-10 moves down too."""
    from conformance.engine.reduce import _shifted, reduce_failure, replay_steps, steps_of_trace

    dropped_steps = [
        {"call": "start_job", "args": {"job_id": "job-33", "n": "build-0007"}, "chosen": ["job-33"]},
        {"call": "get_job", "args": {"job_id": "job-4"}},
    ]
    assert _shifted(dropped_steps, ["job-2", "job-3", "job-40", "build-0003"], "job_id") == [
        {"call": "start_job", "args": {"job_id": "job-31", "n": "build-0006"}, "chosen": ["job-31"]},
        {"call": "get_job", "args": {"job_id": "job-2"}},
    ]
    assert _shifted(dropped_steps, ["job-40"], "job_id") is None  # nothing below job-33 went: nothing to try

    factory = _mutant_factory("thread-jobs", "generated_id_collides")
    starts = [
        {"call": "start_job", "args": {"thread_id": "a", "tool_call_id": f"c{i}", "tool_name": "a"}} for i in range(9)
    ]
    steps = starts + [
        {"call": "start_job", "args": {"thread_id": "a", "tool_call_id": "x", "tool_name": "a", "job_id": "job-10"}},
        {"call": "start_job", "args": {"thread_id": "a", "tool_call_id": "y", "tool_name": "a"}},
    ]
    session = _session_for(factory)
    try:
        failure = replay_steps(session, steps)
        assert failure is not None and "job-10" in failure.message, failure and failure.message
        reduced = reduce_failure(session, failure)
    finally:
        session.close()
    kept = steps_of_trace(reduced.steps)
    assert [s["args"].get("job_id") for s in kept] == ["job-1", None], kept
    assert "generated job id job-1," in reduced.message, reduced.message


def test_a_group_runs_one_call_after_another_in_the_order_its_effects_took():
    """thread-jobs unstable_tie_order (same-instant completions injected in id
    order). Two starts raced and the second call's took effect first: it got
    job-1. The other job then ended first, at the same instant. Run one by
    one in the listed order, the first call would get job-1, the id order and
    the completion order would agree, and the bug would not show: the
    reduction would have to keep the race and hope its replays interleave as
    the exploration's did. The group's recorded order (call 2, then call 1)
    replays the state the answers showed, so the reduction ends on the five
    plain steps of the bug."""
    from conformance.engine.reduce import reduce_failure, replay_steps, steps_of_trace

    def start(call: str, chosen: str) -> dict:
        return {
            "call": "start_job",
            "args": {"thread_id": "a", "tool_call_id": call, "tool_name": "a"},
            "chosen": [chosen],
        }

    def outcome(job: str) -> dict:
        return {"call": "observe_outcome", "args": {"job_id": job, "outcome": "completed", "payload": "x"}}

    after = [outcome("job-2"), outcome("job-1"), {"call": "turn_boundary", "args": {"thread_id": "a"}}]
    session = _session_for(_mutant_factory("thread-jobs", "unstable_tie_order"))
    try:
        assert replay_steps(session, [start("c1", "job-2"), start("c2", "job-1"), *after]) is None  # listed order
        failure = replay_steps(session, [start("c2", "job-1"), start("c1", "job-2"), *after])
        assert failure is not None and failure.operation == "turn_boundary", failure and failure.message
        c2, c1 = ({k: v for k, v in entry.items() if k != "index"} for entry in failure.steps[:2])
        group = {"index": 0, "concurrently": [c1, c2], "order": [1, 0]}  # as the exploration records a race
        failure = dataclasses.replace(failure, steps=[group, *failure.steps[2:]])
        assert steps_of_trace(failure.steps)[0]["order"] == [1, 0]
        reduced = reduce_failure(session, failure)
    finally:
        session.close()
    kept = steps_of_trace(reduced.steps)
    assert not [step for step in kept if "concurrently" in step], kept
    assert [step["call"] for step in kept] == ["start_job"] * 2 + ["observe_outcome"] * 2 + ["turn_boundary"], kept
    # one group became two steps: not "reduced from 4 to 5", but what the replays did
    assert "(5 step(s); replaying made their arguments simpler (" in reduced.message, reduced.message


def test_calls_that_lost_a_race_are_dropped_from_their_group():
    """thread-jobs outcome_check_then_act once reduced to a group of four
    starts for one tool call (only the third, with its explicit id, won) and
    the racing outcomes: run one after another, the first start wins and the
    job the outcomes name never exists, so the group could not be split. The
    three losers go one by one; the winner is left as a plain step."""
    from conformance.engine.reduce import reduce_failure, replay_steps, steps_of_trace

    factory = _mutant_factory("thread-jobs", "outcome_check_then_act")
    start = {"thread_id": "a", "tool_call_id": "a", "tool_name": "a"}
    outcome = {"job_id": "k4", "outcome": "failed", "payload": ""}
    steps = [
        {
            "concurrently": [
                {"call": "start_job", "args": start},
                {"call": "start_job", "args": start},
                {"call": "start_job", "args": {**start, "job_id": "k4"}},
                {"call": "start_job", "args": start},
            ]
        },
        {"concurrently": [{"call": "observe_outcome", "args": outcome}, {"call": "observe_outcome", "args": outcome}]},
    ]
    session = _session_for(factory)
    try:
        failure = None
        for _ in range(200):  # the group's winner is up to the threads: the one with k4 must win once
            failure = replay_steps(session, steps)
            if failure is not None and failure.kind == "linearizability" and "observe_outcome" in failure.message:
                break
        assert failure is not None and failure.kind == "linearizability", failure and failure.message
        reduced = reduce_failure(session, failure)
    finally:
        session.close()
    kept = [s for s in steps_of_trace(reduced.steps) if s.get("call") != "list_jobs"]  # the probe after a race
    assert reduced.kind == "linearizability", reduced.message
    assert "call" in kept[0] and kept[0]["call"] == "start_job", kept  # one start, no longer a group
    assert len(kept) == 2 and [c["call"] for c in kept[1]["concurrently"]] == ["observe_outcome"] * 2, kept


def test_a_reduction_stuck_on_stale_names_goes_on_from_the_replays_own_names():
    """thread-jobs unstable_tie_order (ties injected by job id as text): after
    rounds of renaming replays, the starts' recorded names (job-5 .. job-8)
    no longer matched the names the outcomes used (job-4, job-2), so dropping
    a start could not carry the renaming along, and the reduction stopped at
    7 steps. The same list in the replay's own names drops the two starts the
    tie does not need: the 5 steps of the shortest counterexample."""
    from conformance.engine.reduce import _Reducer, replay_steps, signature

    factory = _mutant_factory("thread-jobs", "unstable_tie_order")
    steps = [
        {
            "call": "start_job",
            "args": {"thread_id": "t1", "tool_call_id": f"c{n}", "tool_name": "a"},
            "chosen": [f"job-{n + 4}"],
        }
        for n in (1, 2, 3, 4)
    ]
    steps += [
        {"call": "observe_outcome", "args": {"job_id": job, "outcome": "completed", "payload": ""}}
        for job in ("job-4", "job-2")
    ]
    steps += [{"call": "turn_boundary", "args": {"thread_id": "t1"}}]
    session = _session_for(factory)
    try:
        failure = replay_steps(session, steps)
        assert failure is not None and failure.operation == "turn_boundary", failure and failure.message
        reducer = _Reducer(session, signature(failure), ReplayBudget(400))
        assert reducer.drop_records(steps) == steps  # stale names: no record can go
        fresh = reducer.in_own_names(steps)
        assert [s.get("chosen") for s in fresh[:4]] == [["job-1"], ["job-2"], ["job-3"], ["job-4"]], fresh
        assert fresh[4:] == steps[4:]
        kept = reducer.drop_records(fresh)
        assert reducer.in_own_names(steps[:1]) is None  # a list that does not fail gives nothing
    finally:
        session.close()
    assert [s["call"] for s in kept] == [
        "start_job",
        "start_job",
        "observe_outcome",
        "observe_outcome",
        "turn_boundary",
    ], kept


def test_a_reduction_replays_a_list_that_replays_as_one_seen_not_to_fail_only_once():
    """The rounds that confirm nothing more can go (one from the replay's own
    names among them) meet the candidates of the round before, renamed: those
    are not replayed again, and cost no replay."""
    from conformance.engine.reduce import _Reducer, replay_steps, signature

    factory, steps = _tie_order_bug()
    session = _session_for(factory)
    try:
        failure = replay_steps(session, steps)
        assert failure is not None
        reducer = _Reducer(session, signature(failure), ReplayBudget(50))
        passing = [{**s, "chosen": [f"job-{n}"]} for n, s in enumerate(steps[:2], start=1)] + [
            {"call": "observe_outcome", "args": {"job_id": "job-2", "outcome": "completed", "payload": ""}}
        ]
        renamed = [{**s, "chosen": [f"job-{n + 40}"]} for n, s in enumerate(steps[:2], start=1)] + [
            {"call": "observe_outcome", "args": {"job_id": "job-42", "outcome": "completed", "payload": ""}}
        ]
        assert not reducer.fails(passing) and reducer.tries == 1
        assert not reducer.fails(renamed) and reducer.tries == 1  # the same calls: not replayed
        assert not reducer.fails(passing[:1] + passing[2:]) and reducer.tries == 2  # other calls: replayed
        assert reducer.fails(steps) and reducer.tries == 3
        assert reducer.fails(steps) and reducer.tries == 4  # a list that fails is replayed for its evidence
    finally:
        session.close()


def _tie_order_bug() -> tuple:
    """thread-jobs' unstable_tie_order mutant and the 13 steps with generated
    ids that show it: ten starts, job-2 and job-10 finished, a turn boundary."""
    factory = _mutant_factory("thread-jobs", "unstable_tie_order")
    steps = [
        {"call": "start_job", "args": {"thread_id": "t1", "tool_call_id": f"c{n}", "tool_name": "a"}}
        for n in range(1, 11)
    ]
    steps += [
        {"call": "observe_outcome", "args": {"job_id": job, "outcome": "completed", "payload": ""}}
        for job in ("job-2", "job-10")
    ]
    steps += [{"call": "turn_boundary", "args": {"thread_id": "t1"}}]
    return factory, steps


def test_generated_names_become_explicit_keys_so_an_id_order_bug_shrinks_to_its_few_steps():
    """thread-jobs unstable_tie_order breaks ties by job id as text: job-10
    sorts before job-2. With generated ids the bug needs ten starts, and no
    start can go (each one dropped renames job-10 to job-9, which sorts after
    job-2). Given their names as explicit keys, the starts no longer depend
    on each other: the 5 steps of the shortest counterexample are left."""
    from conformance.engine.reduce import reduce_failure, replay_steps, steps_of_trace

    factory, steps = _tie_order_bug()
    session = _session_for(factory)
    try:
        failure = replay_steps(session, steps)
        assert failure is not None and failure.operation == "turn_boundary", failure and failure.message
        reduced = reduce_failure(session, failure, ReplayBudget(1000))
    finally:
        session.close()
    kept = steps_of_trace(reduced.steps)
    assert [s["call"] for s in kept] == ["start_job"] * 2 + ["observe_outcome"] * 2 + ["turn_boundary"], kept
    assert any("job_id" in s["args"] for s in kept[:2]), kept  # at least one name given explicitly
    assert "budget" not in reduced.message, reduced.message


@pytest.mark.slow
def test_an_id_past_the_last_one_generated_follows_when_the_records_before_it_go():
    """async-command next_id_crashes: `job status` of the id the next build
    will get crashes. The exploration named build-0010 after fifteen starts
    (some of which build nothing while others run); with fewer builds that id
    is simply unknown, so almost every drop lost the crash, and the
    command-line reduction ran out of its minute at 16 steps. With the builds
    dropped the id becomes the next one of its shape again: build-0001."""
    from conformance.engine.reduce import _first_free

    created = [
        {"call": "start_job", "args": {}, "chosen": [f"build-000{n}", f"tool job status build-000{n}"]} for n in (1, 2)
    ]
    asked = {"call": "job_status", "args": {"job_id": "build-0003"}}
    assert _first_free([asked], created, "job_id") == [{"call": "job_status", "args": {"job_id": "build-0001"}}]
    assert _first_free(created[1:] + [asked], created[:1], "job_id")[-1]["args"]["job_id"] == "build-0002"
    assert _first_free([asked], [], "job_id") is None  # nothing dropped: nothing to renumber

    factory = _mutant_factory("async-command", "next_id_crashes")
    session = _session_for(factory, "async-command")
    # The list the exploration found (seed 1), its racing group already run one call at a time:
    # fifteen builds, then the status of build-0010.
    plans = [
        ("app", 5000, "failed", None),
        ("app", 1, "complete", 1000),
        ("docs; echo pwned", 5000, "complete", None),
        ("lib core", 1000, "complete", None),
        ("$(id)", 500, "failed", 1000),
        ("docs; echo pwned", 5000, "complete", 500),
        ("app", 500, "failed", 5000),
        ("docs; echo pwned", 1000, "failed", 5000),
        ("app", 500, "failed", 5000),
        ("docs; echo pwned", 1, "failed", None),
        ("docs; echo pwned", 500, "failed", 500),
        ("$(id)", 1000, "complete", 1000),
        ("lib core", 5000, "complete", None),
        ("lib core", 1, "failed", None),
        ("lib core", 500, "complete", 1000),
    ]
    steps = [
        {
            "call": "start_job",
            "args": {
                "target": target,
                "work_ms": work,
                "outcome": outcome,
                **({"timeout_ms": timeout} if timeout else {}),
            },
        }
        for target, work, outcome, timeout in plans
    ]
    steps += [{"call": "job_status", "args": {"job_id": "build-0010"}}]
    kept = _reduce_replayed(session, steps, "job_status")
    assert kept == [{"call": "job_status", "args": {"job_id": "build-0001"}}], kept


def test_a_plain_failure_after_a_race_is_reduced_without_the_race():
    """A divergence met after a concurrent group that it does not need: the
    group is first run one call at a time, so every later candidate replays
    once, the same way, instead of a dozen times to tell a race from luck."""
    from conformance.engine.reduce import _Reducer, replay_steps, signature

    factory = _mutant_factory("thread-jobs", "progress_injects")
    starts = [
        {"call": "start_job", "args": {"thread_id": "t", "tool_call_id": f"c{n}", "tool_name": "a"}} for n in (1, 2)
    ]
    steps = [
        {"concurrently": starts},
        {"call": "observe_progress", "args": {"job_id": "job-1", "note": ""}},
        {"call": "turn_boundary", "args": {"thread_id": "t"}},
    ]
    session = _session_for(factory)
    try:
        failure = replay_steps(session, steps)
        assert failure is not None and failure.operation == "turn_boundary", failure and failure.message
        reducer = _Reducer(session, signature(failure), ReplayBudget(400))
        flat = reducer.without_races(steps, failure)
        # the probe that judged the group follows its calls: a failure may show only there
        probes = [op for op, _ in session.probe_calls()]
        assert probes and [s.get("call") for s in flat] == [
            "start_job",
            "start_job",
            *probes,
            "observe_progress",
            "turn_boundary",
        ]
        assert flat[0]["chosen"] == ["job-1"], flat  # each start's job, for dropping it later
        assert reducer.without_races(steps, replace(failure, kind="linearizability")) is steps  # a race stays
    finally:
        session.close()


# Two sequential bugs of every spec that ships mutants (races are left out: which call
# wins depends on the scheduler, not on the seed), each declaring no concurrency, run
# twice as a user would: two `conformance run` processes with the same seed and the
# defaults of the ci profile (Hypothesis's shrinking, then the replay reduction, both
# bounded by counts of examples and replays, not seconds).
SAME_IN_TWO_RUNS = [
    ("thread-jobs", "spill_off_by_one"),
    ("thread-jobs", "cancel_finished_job"),
    ("async-jobs", "job-manager.cancel_not_sticky"),
    ("async-jobs", "task-table.lost_wakeup"),
    ("task-progress", "summary_lost_on_update"),
    ("task-progress", "kill_finished_changes_it"),
    ("async-command", "cancelled_not_terminal"),
    ("async-command", "timeout_not_failed"),
]
# async-command runs the real tool, a process per call: at ci, Hypothesis's 100 shrinking examples
# take minutes per run. The budgets are counts at every profile (engine/budgets.py), so quick's
# 50 examples check the same thing there: a slow transport shrinks and reduces the same way twice.
# timeout_not_failed spends that whole budget (55 examples, 17 CPU-s a run); cancelled_not_terminal
# is met in a short example and shrinks in 20 (9 CPU-s). not_found_exits_one, here before, took
# 17 CPU-s a run to end at one step, where no reduction has anything left to choose.
PROFILE_OF = {"async-command": "quick"}

_MUTANT_MODULE = """\
from conformance.mutants import load_mutants
from conformance.specs import resolve_spec
from statemachines import load_spec

_MUTANT = load_mutants(load_spec(resolve_spec({spec!r})).implementations["mutants"])[{name!r}]


def Adapter(**options):
    adapter = _MUTANT.factory(**options)
    describe = adapter.describe
    adapter.describe = lambda: {{**describe(), "capabilities": {{**(describe().get("capabilities") or {{}}),
                                                               "concurrent": False}}}}
    return adapter
"""


@pytest.mark.slow
@pytest.mark.parametrize("spec, name", SAME_IN_TWO_RUNS, ids=[f"{s}:{n}" for s, n in SAME_IN_TWO_RUNS])
def test_a_shipped_mutant_gets_the_same_counterexample_in_two_runs_with_the_same_seed(tmp_path, spec, name):
    (tmp_path / "mutant_under_test.py").write_text(_MUTANT_MODULE.format(spec=spec, name=name), encoding="utf-8")
    runs = []
    for run in ("one", "two"):
        proc = kit(
            "run",
            spec,
            "--adapter",
            "mutant_under_test:Adapter",
            "--no-scenarios",
            "--workers",
            "1",
            "--seed",
            "1",
            "--example-db",
            "none",
            "--max-failures",
            "1",
            "--profile",
            PROFILE_OF.get(spec, "ci"),
            "--report-dir",
            str(tmp_path / run),
            cwd=tmp_path,
            pythonpath=tmp_path,
        )
        assert proc.returncode == 1, proc.stdout + proc.stderr
        runs.append(_steps(json.loads((tmp_path / run / "report.json").read_text(encoding="utf-8"))))
    assert runs[0] == runs[1], runs
    shortest = load_mutants(load_spec(resolve_spec(spec)).implementations["mutants"])[name].shortest
    assert len(runs[0]) <= int(shortest * 1.5), runs[0]


def test_shrinking_stops_after_its_examples_or_at_its_time_limit_and_says_which():
    from conformance.engine.stateful import PROFILES, _shrink_note, _ShrinkBudgetSpent, _Stats

    assert all(p["shrink_examples"] > 0 and p["shrink_s"] > 0 for p in PROFILES.values())
    failure = Failure(kind="divergence", message="m", steps=[{"operation": "a", "args": {}}])
    stats = _Stats(shrink_s=60, shrink_examples=3, examples=5)
    stats.failed(failure)  # the first failure, in example 5: three more examples may run
    for example in (6, 7):
        stats.examples = example
        stats.check_budget()
    stats.examples = 8
    with pytest.raises(_ShrinkBudgetSpent):
        stats.check_budget()
    assert not stats.timed_out
    calls = [0]
    busy = _Stats(shrink_s=0.001, shrink_examples=100, examples=1, calls=lambda: calls[0])
    busy.failed(failure)
    busy.first_failure_at -= 1  # a second later, one example and 100 calls on: a busy machine, not a slow call
    busy.examples, calls[0] = 2, 100
    busy.check_budget()
    assert not busy.timed_out
    slow = _Stats(shrink_s=0.001, shrink_examples=100, examples=1, calls=lambda: calls[0])
    calls[0] = 0
    slow.failed(failure)
    slow.first_failure_at -= 60  # a minute later, 30 calls on: 2 s per call, over the guard
    slow.examples, calls[0] = 2, 30
    with pytest.raises(_ShrinkBudgetSpent):
        slow.check_budget()
    assert slow.timed_out and "s per call, over the 1 s guard" in _shrink_note(slow), _shrink_note(slow)
    with pytest.raises(_ShrinkBudgetSpent):
        _Stats(shrink_s=0).failed(failure)  # shrinking switched off: the first failure ends it


def test_shrinking_keeps_to_the_first_failures_signature():
    """A failure of another operation, kind or path met while shrinking is
    another bug: it never replaces the one being shrunk, however short, so
    where shrinking stops cannot change which bug a run reports."""
    from conformance.engine.stateful import _Stats

    first = Failure(
        kind="divergence",
        message="m",
        operation="cancel_job",
        path="error.kind",
        steps=[{"operation": "start_job", "args": {}}, {"operation": "cancel_job", "args": {}}],
    )
    other = Failure(
        kind="divergence",
        message="m",
        operation="job_status",
        path="error.kind",
        steps=[{"operation": "job_status", "args": {}}],
    )
    shorter = replace(first, steps=first.steps[1:])
    stats = _Stats(shrink_s=60, shrink_examples=100)
    assert stats.failed(first) is True
    assert stats.failed(other) is False
    assert stats.best is first and stats.others == 1 and stats.failures == 1
    assert stats.failed(shorter) is True
    assert stats.best is shorter and stats.failures == 2


def test_shrinking_may_slip_to_another_wrong_answer_of_the_same_operation():
    """A crash of an operation and a wrong result of the same operation may be
    one fault seen two ways: shrinking takes the shorter as the same bug, while
    a race or an invariant on that operation stays another bug."""
    from conformance.engine.failures import same_bug
    from conformance.engine.stateful import _Stats

    crash = Failure(
        kind="implementation-error",
        message="turn_boundary raised TypeError",
        operation="turn_boundary",
        steps=[{"operation": "start_job"}] * 4 + [{"operation": "turn_boundary"}],
    )
    wrong = Failure(
        kind="divergence",
        message="m",
        operation="turn_boundary",
        path="result.injected[0]",
        steps=[{"operation": "start_job"}, {"operation": "observe_progress"}, {"operation": "turn_boundary"}],
    )
    broken = Failure(kind="invariant", message="m", operation="turn_boundary", path=None, steps=[{}])
    stats = _Stats(shrink_s=60, shrink_examples=100)
    assert stats.failed(crash) is True
    assert stats.failed(wrong) is True and stats.best is wrong
    assert stats.failed(broken) is False and stats.others == 1
    assert same_bug(signature(wrong), signature(crash)) and same_bug(signature(crash), signature(wrong))
    assert not same_bug(signature(broken), signature(crash))
    assert not same_bug(("divergence", "turn_boundary", "result"), ("divergence", "list_jobs", "result"))
    assert not same_bug(("divergence", None, "result"), ("implementation-error", None, None))


def test_an_example_hypothesis_has_ended_is_not_probed_in_its_teardown():
    """Hypothesis calls the machine's teardown in a ``finally``, also when it has
    stopped the example because its choices ran out (often while shrinking).
    A probe then finding another bug called reject() on the ended example,
    which Hypothesis answered with ``Frozen``: an internal error that cost the
    report its failures (seen under load with --max-failures)."""
    from hypothesis.control import BuildContext
    from hypothesis.errors import UnsatisfiedAssumption
    from hypothesis.internal.conjecture.data import ConjectureData

    from conformance.engine.stateful import Explorer, _Stats, build_example
    from statemachines import load_spec as load

    session = _session_for(_demo_factory())
    spec = load(resolve_spec("thread-jobs"))
    stats = _Stats(shrink_s=60, shrink_examples=100)
    stats.failed(Failure(kind="divergence", message="m", operation="cancel_job", path="result.status", steps=[{}]))
    other = Failure(kind="divergence", message="m", operation="list_jobs", path="result.jobs", steps=[{}])
    probes = []
    session.probe = lambda **_: probes.append(1) or other  # the end-of-example probe meets another bug
    machine = build_example(spec, session, Explorer(spec, session.params, False), stats)()
    ended = ConjectureData.for_choices([])
    ended.freeze()
    machine.unprobed = True
    with BuildContext(ended, wrapped_test=lambda: None):
        machine.teardown()  # nothing to probe: the example is over
    assert probes == [] and machine.unprobed
    with pytest.raises(UnsatisfiedAssumption), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # reject() outside a test: what a running example would get
        machine.teardown()
    assert probes == [1]
    session.close()


@pytest.mark.slow
@pytest.mark.parametrize("trouble", ["interrupt", "kit-bug"])
def test_the_failures_found_survive_trouble_while_more_are_sought(tmp_path, monkeypatch, trouble):
    """--max-failures searches on after the first failure is complete: a Ctrl-C
    or a fault of the kit's own during that search must not cost the report
    the failures already found (the first, and the distinct ones since)."""
    from conformance.engine import runner

    def search(spec, session, outcome, settings, *, more, **kwargs):
        more.append(replace(outcome.failure, operation="list_jobs", path="result.jobs", message="another bug"))
        raise KeyboardInterrupt() if trouble == "interrupt" else RuntimeError("the search broke")

    monkeypatch.setattr(runner, "more_failures", search)
    report = _explore(
        tmp_path, "trouble", _demo_factory(), deviations=str(DEMO / "deviations.yaml"), max_failures=3, shrink_s=1
    )
    stateful = report["stateful"]
    assert stateful is not None, report["problems"]
    failures = [stateful["failure"], *stateful.get("more_failures", [])]
    assert [f["operation"] for f in failures] == ["observe_progress", "list_jobs"], failures
    assert all(Path(f["counterexample_file"]).is_file() for f in failures)
    saved = json.loads((tmp_path / "trouble" / "report.json").read_text(encoding="utf-8"))
    assert saved["stateful"]["failure"]["operation"] == "observe_progress"
    if trouble == "interrupt":
        assert report["verdict"] == "interrupted" and stateful["verdict"] == "interrupted"
        assert "there may be more" in failures[0]["message"]
        assert any("found 2 distinct failure(s)" in p["message"] for p in report["problems"]), report["problems"]
    else:
        assert report["verdict"] == "fail" and report["exit_code"] == 1
        assert [p["kind"] for p in report["problems"]] == ["internal-error"]
        assert "RuntimeError: the search broke" in report["problems"][0]["message"]


@pytest.mark.slow
def test_a_fault_of_the_kit_while_grouping_failures_by_cause_keeps_them_all(tmp_path, monkeypatch):
    """Grouping failures by cause replays them for the orderings they turn on:
    a fault of the kit's own there (a sweep met a KeyError in it, and the run
    lost its verdict) lists the failures ungrouped, shortest first, and says so."""
    from conformance.engine import runner

    def search(spec, session, outcome, settings, *, more, **kwargs):
        more.append(replace(outcome.failure, operation="list_jobs", path="result.jobs", message="another bug"))

    def broken(*args, **kwargs):
        raise KeyError("job_id")

    monkeypatch.setattr(runner, "more_failures", search)
    monkeypatch.setattr(runner, "group_by_cause", broken)
    report = _explore(
        tmp_path, "grouping", _demo_factory(), deviations=str(DEMO / "deviations.yaml"), max_failures=3, shrink_s=1
    )
    assert report["verdict"] == "fail" and report["exit_code"] == 1, report["problems"]
    failures = [report["stateful"]["failure"], *report["stateful"].get("more_failures", [])]
    assert sorted(f["operation"] for f in failures) == ["list_jobs", "observe_progress"], failures
    assert all(Path(f["counterexample_file"]).is_file() for f in failures)
    [problem] = report["problems"]
    assert problem["kind"] == "internal-error" and "grouping the failures found by cause" in problem["message"]
    assert "KeyError" in problem["message"] and problem["where"] == "stateful exploration"


def test_a_long_campaign_keeps_every_failure_and_never_ends_shrinking_itself():
    """conformance.fuzzing hands shrinking and the choice of bugs to
    Hypothesis and HypoFuzz: nothing is rejected and no budget ends a run."""
    from conformance.engine.stateful import _Stats

    stats = _Stats(shrink_s=float("inf"), pin=False)
    one = Failure(kind="divergence", message="m", operation="cancel_job", path="error.kind", steps=[{}])
    two = Failure(kind="divergence", message="m", operation="job_status", path="error.kind", steps=[{}])
    assert stats.failed(one) is True and stats.failed(two) is True
    stats.examples = 10_000
    stats.first_failure_at -= 3600
    stats.check_budget()  # neither the examples nor the hour since the first failure end it
    assert stats.others == 0 and stats.failures == 2


def test_shrinking_may_slip_from_a_race_to_a_plain_failure_which_then_pins_its_bug():
    """A concurrent group that matched no order may hide a plain bug: shrinking
    may go from it to a plain failure (the sharper report), even a longer one,
    and from there keeps to that failure's signature."""
    from conformance.engine.stateful import _Stats

    race = Failure(
        kind="linearizability",
        message="m",
        operation="cancel_job",
        path="result.jobs[0].status",
        steps=[{"concurrently": []}],
    )
    plain = Failure(
        kind="divergence",
        message="m",
        operation="cancel_job",
        path="result.status",
        steps=[{"operation": "start_job"}, {"operation": "observe_outcome"}, {"operation": "cancel_job"}],
    )
    stats = _Stats(shrink_s=60, shrink_examples=100)
    assert stats.failed(race) is True and stats.pinned is None
    assert stats.failed(plain) is True
    assert stats.best is plain and stats.pinned == signature(plain)
    assert stats.failed(race) is False and stats.best is plain


def test_a_race_showing_a_bug_reported_already_is_recognised_with_the_masks_lifted():
    """--max-failures masks the failures found so far; a later race whose calls,
    one at a time, show one of them is that bug again (seen through what it
    left behind), not a distinct failure."""
    from conformance.engine.hunt import unmasked
    from conformance.engine.reduce import explain_race

    fixtures = Path(__file__).resolve().parent / "fixtures" / "two_bugs.py"
    session = _session_for(_load(fixtures, "StaleCancelAnswerAdapter"))
    start = {"thread_id": "t1", "tool_call_id": "c1", "tool_name": "build", "job_id": "k1"}
    race = [
        {"operation": "cancel_job", "args": {"thread_id": "t1", "job_id": "k1", "requested_by": "user"}},
        {"operation": "inspect_job", "args": {"thread_id": "t1", "job_id": "k1"}},
    ]

    def failure():
        return Failure(
            kind="linearizability",
            message="2 concurrent calls match no sequential order",
            steps=[{"index": 0, "operation": "start_job", "args": start}, {"index": 1, "concurrently": race}],
        )

    try:
        session.known_failures.append(("cancel_job", "result.status"))
        masked = explain_race(session, failure())
        assert signature(masked) != ("divergence", "cancel_job", "result.status"), masked.message
        lifted = unmasked(session, lambda: explain_race(session, failure()))
        assert session.known_failures == [("cancel_job", "result.status")]  # the masks are back
    finally:
        session.close()
    assert signature(lifted) == ("divergence", "cancel_job", "result.status"), lifted.message


@pytest.mark.slow
def test_what_a_masked_bug_leaves_behind_is_not_reported_as_another_failure(tmp_path):
    """The demo's one real bug (a progress report puts a job whose cancel was
    requested back to running) answers wrong at once, and every later read of
    that job differs too. With the first failure masked, those reads are its
    consequences: replayed with the mask lifted they fail first as the
    reported bug, so --max-failures does not list them as distinct bugs."""
    from conformance.engine.runner import Progress

    class Explorations(Progress):
        """Notes the exploration's phases, and its example counts as shown."""

        def __init__(self) -> None:
            self.phases: list[str] = []
            self.counts: list[int] = []

        def stateful_phase(self, phase: str, failures: int) -> None:
            self.phases.append(phase)

        def stateful_example(self, count: int) -> None:
            self.counts.append(count)

    seen = Explorations()
    config = RunConfig(
        spec_path="thread-jobs",
        adapter_factory=_demo_factory(),
        adapter_label="one-bug",
        scenarios=False,
        profile="ci",
        report_dir=str(tmp_path / "one-bug"),
        deviations=str(DEMO / "deviations.yaml"),
        max_failures=3,
        shrink_s=10,
    )
    report = run_conformance(config, seen)
    stateful = report["stateful"]
    assert stateful is not None and not report["problems"], report["problems"]
    failures = [stateful["failure"], *stateful.get("more_failures", [])]
    assert [(f["operation"], f["path"]) for f in failures] == [("observe_progress", "result.status")], [
        f["message"].splitlines()[0] for f in failures
    ]
    # What it leaves behind may be listed, but only under it, as symptoms of the one cause.
    for symptom in failures[0].get("symptoms", []):
        assert Path(symptom["counterexample_file"]).is_file(), symptom
        if symptom.get("seed") != config.seed:  # found while looking for more: says so, and why it is a symptom
            assert f"found with seed {symptom['seed']} while the exploration accepted" in symptom["message"]
            assert "first fail as one of them" in symptom["message"], symptom["message"]
    # the search for distinct failures did run after the first one, and found a failure it reduced
    searching = seen.phases.index("looking for more")
    assert "reducing" in seen.phases[searching:], seen.phases
    # the search's explorations go on counting where the first one stopped: no count starts again at 1
    assert seen.counts == sorted(seen.counts) and seen.counts.count(1) == 1, seen.counts


def test_the_reduction_may_end_at_the_shorter_face_of_the_same_bug():
    """thread-jobs progress_injects queues a running job's injection: with a
    finished job queued too, turn_boundary crashes sorting them (five steps);
    alone, it injects the running job (three). The exploration may meet the
    crash first; the replay reduction, like Hypothesis's shrinking
    (failures.same_bug), may go on to the shorter wrong answer of the same
    operation, never to another operation's failure."""
    from conformance.engine.reduce import reduce_failure, replay_steps, steps_of_trace

    factory = _mutant_factory("thread-jobs", "progress_injects")
    session = _session_for(factory, "thread-jobs")
    steps = [
        {"call": "start_job", "args": {"thread_id": "t1", "tool_call_id": "c1", "tool_name": "build"}},
        {"call": "start_job", "args": {"thread_id": "t1", "tool_call_id": "c2", "tool_name": "build"}},
        {"call": "observe_progress", "args": {"job_id": "job-1", "note": "half"}},
        {"call": "observe_outcome", "args": {"job_id": "job-2", "outcome": "completed", "payload": "ok"}},
        {"call": "turn_boundary", "args": {"thread_id": "t1"}},
    ]
    try:
        failure = replay_steps(session, steps)
        assert failure is not None and failure.kind == "implementation-error", failure and failure.message
        assert failure.operation == "turn_boundary" and "TypeError" in failure.message
        reduced = reduce_failure(session, failure)
    finally:
        session.close()
    kept = steps_of_trace(reduced.steps)
    assert [s["call"] for s in kept] == ["start_job", "observe_progress", "turn_boundary"], kept
    assert reduced.kind == "divergence" and reduced.operation == "turn_boundary", reduced.message


def test_a_replay_budget_counts_replays_and_its_guard_stops_only_slow_calls():
    """The reduction's budget is a count, shared by later failures; time only
    stops it when calls into the implementation are slow, and says so."""
    import time

    from conformance.engine.budgets import CallGuard

    budget = ReplayBudget(8)
    share = budget.share(0.5)
    assert share.replays == 4
    started = time.perf_counter()
    for _ in range(4):
        assert not share.spent_out()
        share.replayed(calls=10, started=started)  # fast calls, however many
    assert share.spent_out() and budget.left() == 4 and not budget.spent_out()
    assert "budget of 4 replays" in share.stop_reason()
    assert budget.share(0.5).replays == 2  # half of what is left
    slow = ReplayBudget(100, guard=CallGuard(limit_s=1.0))
    slow.guard.add(calls=30, seconds=45.0)  # 1.5 s per call
    assert slow.spent_out() and slow.left() == 100
    assert slow.stop_reason() == (
        "reduction stopped after 0 replays: the implementation took 1.50 s per call, over the 1 s guard"
    )
    few = CallGuard(limit_s=1.0)
    few.add(calls=2, seconds=10.0)  # starting the implementation: too few calls to judge
    assert not few.slow()


class _WallClock:
    """A wall clock that moves ``per_read`` seconds each time it is read: a
    reduction's replays seen as taking that long each."""

    def __init__(self, per_read: float) -> None:
        self.now, self.per_read = 0.0, per_read

    def perf_counter(self) -> float:
        self.now += self.per_read
        return self.now


def _tie_order_reduced(monkeypatch, per_read: float | None):
    """thread-jobs unstable_tie_order's 13-step failure reduced with the ci
    budget of replays, the wall clock moving ``per_read`` s per read (None:
    the real clock); its kept steps and its message."""
    import types

    from conformance.engine import budgets, reduce
    from conformance.engine.budgets import REDUCE_REPLAYS
    from conformance.engine.reduce import reduce_failure, replay_steps, steps_of_trace

    factory, steps = _tie_order_bug()
    if per_read is not None:
        clock = types.SimpleNamespace(perf_counter=_WallClock(per_read).perf_counter)
        monkeypatch.setattr(reduce, "time", clock)
        monkeypatch.setattr(budgets, "time", clock)
    session = _session_for(factory)
    try:
        failure = replay_steps(session, steps)
        assert failure is not None and failure.operation == "turn_boundary", failure and failure.message
        budget = ReplayBudget(REDUCE_REPLAYS["ci"])
        reduced = reduce_failure(session, failure, budget)
    finally:
        session.close()
        monkeypatch.undo()
    return steps_of_trace(reduced.steps), reduced.message, budget


def test_the_count_of_replays_decides_the_counterexample_not_the_machines_speed(monkeypatch):
    """Issue 33: the same failure reduces to the same steps on an idle machine
    and on one so busy that each replay takes a second of wall time (the
    reduction then runs for minutes, past the 60 s the time budget it
    replaced allowed, and its calls still average under the 1 s guard); an
    implementation slow per call (each replay 100 s) is stopped by the
    guard, which says so in the failure's message."""
    idle, idle_message, idle_budget = _tie_order_reduced(monkeypatch, None)
    assert len(idle) == 5 and idle_budget.stopped is None, idle_message
    busy, busy_message, busy_budget = _tie_order_reduced(monkeypatch, 1.0)
    assert busy_budget.spent > 60  # replays of a second each: over a minute of "wall time"
    assert busy == idle and busy_budget.spent == idle_budget.spent, (busy, idle)
    assert "reduction stopped" not in busy_message, busy_message
    slow, slow_message, slow_budget = _tie_order_reduced(monkeypatch, 100.0)
    assert slow_budget.stopped is not None and "over the 1 s guard" in slow_budget.stopped, slow_budget.stopped
    assert "s per call, over the 1 s guard" in slow_message, slow_message
    assert slow_budget.spent < idle_budget.spent and len(slow) > len(idle), (slow_budget.spent, slow)


def test_the_time_guard_judges_slow_calls_one_by_one_and_never_a_busy_machine():
    """Issue 33's guard (engine/budgets.py): the calls that each took over the
    1 s limit end the work once they took the guard's allowance in all, even
    while the average of all calls stays fast (an implementation whose cost
    per call grows keeps most calls quick); a machine two or three times
    busier than usual trips neither rule; an implementation slow at every call
    is still stopped by its average, as before."""
    from conformance.engine.budgets import CallGuard, SlowCalls

    def timed(meter: SlowCalls, guard: CallGuard, calls: int, seconds: float) -> None:
        before = meter.now()
        meter.record(calls, seconds)  # as Session does for each call, clock move or concurrent group
        guard.add(calls, seconds, SlowCalls.since(meter.now(), before))

    busy, guard = SlowCalls(), CallGuard(allowance_s=60)
    for _ in range(5000):
        timed(busy, guard, 1, 0.03)  # 10 ms calls on a machine three times busier
    timed(busy, guard, 1, 0.9)  # a call of 0.3 s, three times slower: still under the limit
    timed(busy, guard, 4, 3.2)  # a concurrent group of four calls: 0.8 s a call
    assert busy.now() == (0, 0.0) and not guard.slow()

    growing, guard = SlowCalls(), CallGuard(allowance_s=60)
    for k in range(11):  # each retry doubles what the next clock move costs: 0.03 s ... 30.7 s
        for _ in range(100):
            timed(growing, guard, 1, 0.01)
        timed(growing, guard, 1, 0.03 * 2**k)
    assert growing.calls == 5 and not guard.slow()  # 1.9 + 3.8 + 7.7 + 15.4 + 30.7 = 59.5 s: within 60
    timed(growing, guard, 1, 0.03 * 2**11)
    assert guard.per_call() < 0.2 and not guard.slow_on_average()  # the average alone never stopped it
    assert guard.slow_too_long() and guard.slow()
    assert guard.why() == (
        "6 call(s) into the implementation took over the 1 s guard each (with the kit's checking of their "
        "answers), 121.0 s in all, over the 60 s the guard allows them: the implementation's cost per call grew"
    )

    uniform = CallGuard(allowance_s=60)
    uniform.add(calls=30, seconds=45.0, slow=(30, 45.0))  # 1.5 s every call, 45 s: within the allowance
    assert uniform.slow() and uniform.why() == "the implementation took 1.50 s per call, over the 1 s guard"


def test_a_reduction_after_the_runs_guard_found_the_calls_slow_is_not_tried_and_says_why():
    """A run's reductions share one guard (engine/runner.py): once an earlier
    one met slow calls past its allowance, a later failure is left as found,
    and its message says why it was not reduced."""
    from conformance.engine.budgets import CallGuard
    from conformance.engine.reduce import reduce_failure, replay_steps

    factory, steps = _tie_order_bug()
    session = _session_for(factory)
    try:
        failure = replay_steps(session, steps)
        assert failure is not None
        guard = CallGuard(allowance_s=5)
        guard.add(calls=100, seconds=60.0, slow=(6, 40.0))  # what an earlier reduction of the run met
        calls = session.calls
        reduced = reduce_failure(session, failure, ReplayBudget(1000, guard))
    finally:
        session.close()
    assert session.calls == calls and reduced.steps == failure.steps
    assert reduced.message == failure.message + f"\n(not reduced: {guard.why()})"
    assert "6 call(s) into the implementation took over the 1 s guard each" in reduced.message


def _growing_queue(monkeypatch) -> tuple:
    """tests/fixtures/growing_queue.py's adapter, and the wall clock every
    module that times calls reads instead of the real one: only the
    implementation moves it, by what its delivery attempts cost (their number
    doubles at every retry), so what the guard sees is the same in every run,
    on an idle or a busy machine."""
    import types

    from conformance.engine import budgets, reduce, stateful
    from conformance.engine import session as session_module

    factory = _load(Path(__file__).resolve().parent / "fixtures" / "growing_queue.py", "GrowingQueueAdapter")
    clock = _WallClock(per_read=0.0)
    module = factory.manager_class._attempt.__globals__  # the fixture's own module, loaded fresh
    monkeypatch.setitem(module, "spend", lambda seconds: setattr(clock, "now", clock.now + seconds))
    wall = types.SimpleNamespace(perf_counter=clock.perf_counter)
    for timed in (budgets, reduce, stateful, session_module):
        monkeypatch.setattr(timed, "time", wall, raising=False)
    return factory, clock


# GUARD_DRAW: the two tests below measure the guard, not the draw, so they pin the pools'
# values alone (--beyond-pools 0). Which seed's shrinking meets the slowest calls, and how
# soon, moves with every change to what the exploration draws: with 12 % of the draws beyond
# the pools, seed 1 stops after 658 shrinking examples and 88 s of the implementation's time,
# seed 4 never (under 1 s per call), seed 5 after 164 and 17 s (2026-11-29).
@pytest.mark.hypothesis
def test_shrinking_ends_once_calls_whose_cost_grows_took_the_guards_allowance(monkeypatch):
    """The hole issue 33's guard had: an implementation that re-queues a
    refused delivery while its old entry stays doubles its queue at every
    retry, so a clock move over a few retries costs seconds and the next one
    twice as much, while most calls stay fast and their average never
    looked slow. Shrinking went on for all its examples (1000 here: 82 s of
    such calls, 178 s in all); now the slow calls end it once they took the
    allowance (``shrink_s``), and the failure says so. Each failing example's
    answers are let go as the next starts: Hypothesis keeps every failing
    example's exception, and with it they had filled gigabytes."""
    import weakref

    from conformance.engine import stateful
    from conformance.errors import ConformanceFailure

    raised: weakref.WeakSet = weakref.WeakSet()  # the failures raised to Hypothesis, while it keeps them
    count = [0]

    class Raised(ConformanceFailure):
        def __init__(self, failure) -> None:
            super().__init__(failure)
            raised.add(self)
            count[0] += 1

    monkeypatch.setattr(stateful, "ConformanceFailure", Raised)
    # Which seed's failure meets the slowest calls while shrinking depends on the draw (the
    # spec's exploration section, and Hypothesis's version): the first of seeds 1-6 that does.
    for seed in range(1, 7):
        raised.clear()
        factory, clock = _growing_queue(monkeypatch)
        session = _session_for(factory, "async-jobs")
        holding: list[int] = []  # per example, the failing examples' exceptions still holding their steps

        def on_example(number: int, shrinking: bool, holding: list[int] = holding) -> None:
            if shrinking:
                holding.append(sum(bool(exc.failure.steps) for exc in raised))

        try:
            outcome = stateful.run_stateful(
                session.spec,
                session,
                profile="quick",
                seed=seed,
                capabilities={},
                shrink_s=5,
                shrink_examples=1000,
                on_example=on_example,
                beyond_pools=0,  # the draw these bounds were measured on (GUARD_DRAW)
            )
        finally:
            session.close()
        if outcome.failure is not None and "shrinking stopped after" in outcome.failure.message:
            break
    message = outcome.failure.message
    assert outcome.verdict == "fail" and outcome.failure.kind == "divergence", message
    assert "shrinking stopped after" in message and "took over the 1 s guard each" in message, message
    assert "over the 5 s the guard allows them" in message and outcome.guarded in message, message
    # Unguarded, shrinking ran all its 1000 examples and 178 s of the implementation's time; the
    # guard ends it far sooner (under async-jobs 2.2.5's draw: 210 examples, 30 s; before it, under 100).
    shrinking = outcome.examples - outcome.explored
    assert shrinking < 1000 // 3 and clock.now < 178 / 3, (shrinking, clock.now)
    assert holding and max(holding) == 0 and count[0] > 2, (holding, count)


@pytest.mark.slow
@pytest.mark.hypothesis
def test_a_run_against_calls_whose_cost_grows_ends_and_its_reports_say_why(tmp_path, monkeypatch):
    """The whole run against the same implementation: the reduction starts
    from where the guard stopped shrinking, and its failure still says so;
    the run's reductions share one guard, which ended the search for more
    failures (--max-failures) too; the reports are written."""
    # a seed whose shrinking meets the slowest calls: the first of seeds 1-6 that does (which
    # one depends on the draw: the spec's exploration section and Hypothesis's version)
    for seed in range(1, 7):
        factory, clock = _growing_queue(monkeypatch)
        config = RunConfig(
            spec_path="async-jobs",
            adapter_factory=factory,
            adapter_label="growing",
            scenarios=False,
            profile="quick",
            seed=seed,
            shrink_s=5,
            max_failures=3,
            report_dir=str(tmp_path),
            example_db="none",
            beyond_pools=0,  # the draw these bounds were measured on (GUARD_DRAW)
        )
        report = run_conformance(config)
        if "(shrinking stopped early: " in ((report.get("stateful") or {}).get("failure") or {}).get("message", ""):
            break
    assert report["verdict"] == "fail" and report["exit_code"] == 1
    failure = report["stateful"]["failure"]
    message = failure["message"]
    # the reduction went on from where shrinking stopped and shortened it (until the
    # run's one guard ended it too: how far it gets depends on the exploration's path)
    reduced = re.search(r"reduced from (\d+) to (\d+) step", message)
    assert reduced and int(reduced[2]) < int(reduced[1]) and len(failure["steps"]) <= int(reduced[2]), message
    assert "(shrinking stopped early: " in message and "took over the 1 s guard each" in message, message
    assert "(no further failures were looked for (--max-failures): " in message, message
    assert clock.now < 60, clock.now
    for name in ("report.json", "junit.xml", "summary.md", "counterexample-stateful.yaml"):
        assert (tmp_path / name).is_file(), name


def test_a_name_of_the_generated_shape_asked_for_explicitly_frees_the_steps_that_made_it():
    """job-manager suffix_per_name_counter gives a taken name's next copy from
    a counter per name, never checked against the ids held. The exploration
    met it after a start took bg_1, a second got bg_1-2, which then ended and
    was evicted. Asking for bg_1-2 explicitly needs none of that: 3 steps."""
    from conformance.engine.reduce import reduce_failure, replay_steps, steps_of_trace

    factory = load_mutants(load_spec(resolve_spec("async-jobs")).implementations["mutants"])[
        "job-manager.suffix_per_name_counter"
    ].factory
    session = _session_for(factory, "async-jobs")
    steps = [
        {"call": "start_job", "args": {"label": ""}, "chosen": ["bg_1"]},
        {"call": "start_job", "args": {"id": "bg_1", "label": ""}, "chosen": ["bg_1-2"]},
        {"call": "finish_job", "args": {"outcome": "completed", "job_id": "bg_1-2", "text": ""}},
        {"advance_ms": 300000},
        {"call": "start_job", "args": {"id": "bg_1", "label": ""}},
    ]
    try:
        failure = replay_steps(session, steps)
        assert failure is not None and failure.path == "result.job_id", failure and failure.message
        reduced = reduce_failure(session, failure, ReplayBudget(1000))
    finally:
        session.close()
    kept = steps_of_trace(reduced.steps)
    assert [s.get("call") for s in kept] == ["start_job"] * 3, kept
    assert {"bg_1-2", "bg_1"} <= {s["args"].get("id") for s in kept}, kept


def test_the_probe_judging_a_concurrent_group_is_not_a_step_of_the_counterexample(tmp_path):
    """After a concurrent group the kit probes the state to judge which order of
    the calls explains it. Every replay of the group probes again, so those
    calls are the group's check, not steps: the counterexample file leaves
    them out and counts the steps without them (they used to make a 5-step
    counterexample of thread-jobs.late_report_reopens count 7)."""
    from conformance.engine.causes import length_of
    from conformance.engine.reduce import group_checks, replay_steps, steps_of_trace
    from conformance.engine.runner import _write_counterexample

    factory = _mutant_factory("thread-jobs", "late_report_reopens")
    steps = [
        {"call": "start_job", "args": {"thread_id": "t2", "tool_call_id": "a", "tool_name": "a"}},
        {"call": "observe_outcome", "args": {"job_id": "job-1", "outcome": "cancelled", "payload": ""}},
        {"call": "turn_boundary", "args": {"thread_id": "t2"}},
        {"call": "observe_outcome", "args": {"job_id": "job-1", "outcome": "cancelled", "payload": ""}},
        {
            "concurrently": [
                {"call": "turn_boundary", "args": {"thread_id": "t1"}},
                {"call": "turn_boundary", "args": {"thread_id": "t2"}},
            ]
        },
    ]
    session = _session_for(factory)
    try:
        failure = replay_steps(session, steps)
        assert failure is not None and failure.kind == "invariant", failure and failure.message
        probes = session.probe_calls()
        checks = group_checks(failure.steps)
        assert len(failure.steps) == len(steps) + len(probes) and checks == set(range(len(steps), len(failure.steps)))
        assert [(s["operation"], s["args"]) for s in failure.steps[len(steps) :]] == probes
        assert [{k: v for k, v in s.items() if k != "chosen"} for s in steps_of_trace(failure.steps)] == steps
        assert length_of(failure) == len(steps)
        path = tmp_path / "counterexample.yaml"
        _write_counterexample(path, load_spec(resolve_spec("thread-jobs")), failure, RunConfig("thread-jobs"))
        written = yaml.safe_load(path.read_text(encoding="utf-8"))["steps"]
        assert len(written) == len(steps) and "concurrently" in written[-1], written
        # replayed without them, the group is probed again and fails the same way
        again = replay_steps(session, steps_of_trace(failure.steps))
        assert again is not None and again.kind == failure.kind and group_checks(again.steps) == checks
    finally:
        session.close()
    # a probe call that no longer follows a group (the group split into plain calls) is a step
    split = [{"index": 0, "operation": "start_job", "args": {}}, {**failure.steps[-1], "index": 1}]
    assert group_checks(split) == set() and len(steps_of_trace(split)) == 2


def _eviction_tie(first: tuple[str, ...]) -> list[dict]:
    """thread-jobs: 21 jobs started in thread t1 (job-1 .. job-21, the
    retention limit being 20), all finished at one instant, ``first`` marked
    first, then a list of the terminal jobs: the 21st marking evicts one."""
    steps = [
        {"call": "start_job", "args": {"thread_id": "t1", "tool_call_id": f"c{n}", "tool_name": "a"}}
        for n in range(1, 22)
    ]
    order = [*first, *(f"job-{n}" for n in range(1, 22) if f"job-{n}" not in first)]
    steps += [
        {"call": "observe_outcome", "args": {"job_id": job, "outcome": "completed", "payload": ""}} for job in order
    ]
    return steps + [{"call": "list_jobs", "args": {"thread_id": "t1", "statuses": ["completed"]}}]


def test_a_long_failure_on_an_ordering_gets_its_shorter_face_where_another_operation_reads_it():
    """thread-jobs unstable_tie_order breaks completion ties by id text. The
    eviction it gets wrong needs the thread filled past its retention limit
    (43 steps, none removable); the same ordering also orders what a turn
    boundary injects, where the bug shows in 5 steps. The search finds that
    face from a prefix of the long failure's steps, and reduces it."""
    from conformance.engine.attribution import orderings_in_play
    from conformance.engine.causes import length_of
    from conformance.engine.faces import readers_of, shorter_face
    from conformance.engine.reduce import replay_steps

    session = _session_for(_mutant_factory("thread-jobs", "unstable_tie_order"))
    try:
        long = replay_steps(session, _eviction_tie(("job-2", "job-1")))
        assert long is not None and (long.operation, length_of(long)) == ("list_jobs", 43), long and long.message
        orderings = orderings_in_play(session, long)
        assert orderings == {"completion_order"} and readers_of(session.spec, orderings) == ["turn_boundary"]
        budget = ReplayBudget(250)
        face = shorter_face(session, long, orderings, budget)
    finally:
        session.close()
    assert face is not None and face.operation == "turn_boundary" and length_of(face) == 5, face and face.message
    assert "a shorter face of the exploration's failure (43 steps" in face.message
    assert "then turn_boundary, which reads the records in the same ordering (completion_order)" in face.message
    assert budget.spent < 120, budget.spent  # a bisection of the prefixes, then the face's own reduction


def test_a_long_failure_without_a_shorter_face_costs_a_bisection_and_no_reduction():
    """thread-jobs evict_by_start_time evicts by start instead of completion.
    A turn boundary shows that too, but only after the eviction: no earlier
    than the failure itself, so there is no shorter face. Finding out takes
    a bisection of the prefixes and no reduction."""
    from conformance.engine.faces import shorter_face
    from conformance.engine.reduce import replay_steps

    session = _session_for(_mutant_factory("thread-jobs", "evict_by_start_time"))
    try:
        long = replay_steps(session, _eviction_tie(("job-2",)))
        assert long is not None and long.operation == "list_jobs", long and long.message
        budget = ReplayBudget(250)
        assert shorter_face(session, long, frozenset({"completion_order"}), budget) is None
    finally:
        session.close()
    assert budget.spent <= 7, budget.spent  # log2(42) + 1
