"""The generated exploration reaches the deep states on its own (default ci profile)."""

import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from conformance.engine.runner import RunConfig, run_conformance
from lifecycle_references.thread_jobs import ReferenceAdapter

pytestmark = pytest.mark.hypothesis  # drives Hypothesis: tests/hypothesis_marker.py

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_ci_exploration_reaches_full_retention_ties_and_races(tmp_path):
    report = run_conformance(
        RunConfig(
            spec_path=str(ROOT / "spec" / "thread-jobs.yaml"), profile="ci", scenarios=False, report_dir=str(tmp_path)
        )
    )
    stateful = report["stateful"]
    assert stateful["verdict"] == "pass"
    policies = stateful["coverage"]["policies"]
    assert policies.get("retention.evicted", 0) > 0  # more than retention_limit terminal jobs in a thread
    assert policies.get("retention.at_limit", 0) > 0  # exactly at the limit
    assert policies.get("completion_order.tie", 0) > 0  # equal completion times ordered by the tie-break
    assert policies.get("payload.spilled", 0) > 0 and policies.get("payload.at_limit", 0) > 0
    transitions = stateful["coverage"]["transitions"]
    assert transitions.get("running -request_cancel-> pending_cancel", 0) > 0
    assert transitions.get("pending_cancel -finish-> completed", 0) > 0  # best-effort cancel, then completion
    # Values drawn at the edges of the spec's declared limits. A batch's count is one draw per batch
    # (about 130 batches per run), so a run draws each edge many times; but which values a seed draws
    # also depends on the process (Hypothesis mixes in constants of the modules loaded), and one CI run
    # of the whole suite drew no batch of retention_limit + 1 at seed 1. The exploration must reach
    # every edge; the runs of two seeds together are asked to, each edge at least twice.
    limits = dict(stateful["coverage"]["limits"])
    other = run_conformance(
        RunConfig(
            spec_path=str(ROOT / "spec" / "thread-jobs.yaml"),
            profile="ci",
            seed=2,
            scenarios=False,
            report_dir=str(tmp_path / "seed-2"),
        )
    )
    assert other["stateful"]["verdict"] == "pass"
    for edge, count in other["stateful"]["coverage"]["limits"].items():
        limits[edge] = limits.get(edge, 0) + count
    for edge in ("retention.below", "retention.at", "retention.above", "payload_bytes.at", "payload_lines.above"):
        assert limits.get(edge, 0) >= 2, (edge, limits, stateful["coverage"]["limits"])
    boundary = report["coverage"]["categories"]["boundary-classes"]
    assert "retention: at (20)" not in boundary["missed"] and "payload_bytes: above (25601)" not in boundary["missed"]
    outcomes = stateful["coverage"]["outcomes"]
    for rejected in (
        "start_job: duplicate_job_id",
        "inspect_job: not_found_in_thread",
        "cancel_job: not_found_in_thread",
        "retry_job: retry_not_supported",
    ):
        assert outcomes.get(rejected, 0) > 0, rejected  # forbidden calls were tried and rejected


def test_a_replay_renames_a_near_miss_with_the_id_it_misses():
    from conformance.engine.key_shapes import reshaped

    assert reshaped("./job-5", "job-5", "job-4") == "./job-4"
    assert reshaped("x/job-5", "job-5", "job-4") == "x/job-4"
    assert reshaped(" job-5", "job-5", "job-4") == " job-4"
    assert reshaped("y/job-5", "job-5", "job-4") is None  # no shape of job-5 the kit draws


def test_fresh_keys_take_the_shape_of_the_keys_the_implementation_handed_out():
    from conformance.engine.key_shapes import shaped_key

    seen = ["job-1", "job-3", "k2"]  # k2: one of the kit's own fresh names, never a shape
    assert [shaped_key(seen, pick) for pick in (129, 130, 131)] == ["job-4", "job-5", "job-6"]
    assert shaped_key(["task-007"], 0) == "task-008"  # padding kept
    assert shaped_key(["abc", "k1", 7], 0) is None  # nothing numbered to imitate


def test_near_misses_of_an_issued_key_are_keys_never_issued_that_a_lenient_lookup_accepts():
    from conformance.engine.key_shapes import near_miss

    shapes = [near_miss(["build-0001"], pick) for pick in (0, 1, 3, 5, 7)]
    # an abbreviation (as git and docker resolve them), the number alone, the number
    # padded otherwise, another case, white space around it (a lookup that trims):
    # every one is an id never issued
    assert shapes == ["build-000", "0001", "build-1", "BUILD-0001", " build-0001"]
    assert [near_miss(["build-0001"], pick) for pick in (0, 2, 4, 6)] == ["build-000"] * 4  # half are abbreviations
    # every other form around the key is a path to it (a tool keeping a file per record that joins
    # the id to its directory, or keeps its last part): later picks of that shape lead with them
    assert [near_miss(["build-0001"], pick) for pick in (7, 15, 23, 31)] == [
        " build-0001",
        "./build-0001",
        "build-0001 ",
        "x/build-0001",
    ]
    # the implementation's own keys are the bases; the kit's fresh names only when alone
    assert near_miss(["job-2", "k1"], 1) == "2"
    assert near_miss(["k1"], 3) == "k01"
    # an abbreviation another key shares finds nothing, however lenient the lookup:
    # the next shape instead
    assert near_miss(["job-10", "job-2"], 0) == "2"
    assert near_miss(["job-1", "job-10"], 0) == "10"  # "job-1" was issued: never a near miss
    # whatever the pick, a near miss is never a key seen
    seen = ["a", "A", "ab", "1", "a1", "a01", "A1"]
    assert all(near_miss(seen, pick) not in seen for pick in range(64))
    assert near_miss([7, ""], 0) is None  # no key to miss


def test_a_new_records_name_is_never_drawn_as_a_path():
    """An explicit id at a start becomes where the implementation keeps the
    record (thread-jobs spills a payload to a file named with it): ``./job-2``
    there would fail correct code, so only lookups are given paths."""
    from conformance.engine.key_shapes import near_miss
    from statemachines import load_spec, naming_arguments

    names = [near_miss(["build-0001"], pick, paths=False) for pick in range(256)]
    assert not [name for name in names if "/" in name]
    assert " build-0001" in names and "build-0001 " in names  # white space around it still comes
    assert [near_miss(["build-0001"], pick) for pick in (15, 31)] == ["./build-0001", "x/build-0001"]
    # which arguments name a new record: the create's key takes its value (through a let here)
    assert naming_arguments(load_spec(ROOT / "spec" / "thread-jobs.yaml")) == {("start_job", "job_id")}
    assert naming_arguments(load_spec(ROOT / "spec" / "task-progress.yaml")) == frozenset()  # parent_id is a lookup


@pytest.mark.slow
def test_a_generated_id_that_collides_with_an_explicit_one_is_found_by_the_exploration():
    # The mutant's id counter skips no id a caller chose; only an explicit id in the
    # implementation's own shape ("job-<n>" next in line) shows it.
    from conformance.mutants import load_mutants, run_mutant
    from statemachines import load_spec

    spec = str(ROOT / "spec" / "thread-jobs.yaml")
    mutant = load_mutants(load_spec(spec).implementations["mutants"])["generated_id_collides"]
    result = run_mutant(spec, "generated_id_collides", mutant, profile="ci", seed=1, timeout_s=10)
    assert result.found_by_exploration, result
    assert "generated job id" in result.exploration_message, result.exploration_message


class _SlowConcurrentCalls(ReferenceAdapter):
    """The reference, whose calls of a concurrent group take a while (and let
    the interpreter go meanwhile): the group's other calls go before it
    answers, so the groups meet the race window (docs/running.md)."""

    def call(self, operation, args):
        if threading.current_thread().name == "kit-concurrent":
            time.sleep(0.005)
        return super().call(operation, args)


def test_coverage_says_which_races_the_exploration_reached(tmp_path):
    report = run_conformance(
        RunConfig(
            spec_path=str(ROOT / "spec" / "thread-jobs.yaml"),
            adapter_factory=_SlowConcurrentCalls,
            adapter_label="slow concurrent calls",
            profile="quick",
            scenarios=False,
            report_dir=str(tmp_path),
        )
    )
    races = report["coverage"]["categories"]["races"]
    # the spec's four concurrent groups and the two it implies (a job-writing operation twice at once),
    # each named with the calls it races
    assert races["total"] == 6, races
    assert races["covered"] == 6 - len(races["missed"]) and races["covered"] >= 2, races
    assert all(
        report["coverage"]["races"].get(name)
        for name in ("racing_emitters", "cancel_races_completion")
        if not any(m.startswith(name) for m in races["missed"])
    ), report["coverage"]["races"]
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "| Races |" in summary, summary


def test_races_are_not_counted_against_an_implementation_that_takes_no_concurrent_calls():
    from conformance.engine.coverage import coverage_categories
    from statemachines import load_spec

    spec = load_spec(ROOT / "spec" / "thread-jobs.yaml")
    empty = {c: {} for c in ("operations", "outcomes", "transitions", "states", "policies", "races", "limits")}
    assert coverage_categories(spec, empty, spec.default_parameters(), concurrent=False)["races"]["total"] == 0
    declared = coverage_categories(spec, empty, spec.default_parameters(), concurrent=True)["races"]
    assert declared["missed"] == [
        "racing_emitters: turn_boundary | turn_boundary | turn_boundary",
        "cancel_races_completion: cancel_job | observe_outcome",
        "sync_races_background: complete_sync | start_job",
        "concurrent_starts: start_job | start_job | start_job | start_job",
        "observe_outcome_twice: observe_outcome | observe_outcome",
        "cancel_job_twice: cancel_job | cancel_job",
    ], declared


def test_limit_edges_follow_the_parameters_and_the_argument_schemas():
    from statemachines import limit_edges, load_spec

    spec = load_spec(ROOT / "spec" / "async-jobs.yaml")
    params = {**spec.default_parameters(), "retention_ms": 120000, "max_running": 3}
    edges = {limit.name: limit for limit in limit_edges(spec, params)}
    assert edges["retention"].clock == {"below": 119999, "at": 120000, "above": 120001}
    assert edges["running_cap"].batches == {"fill_to_cap": {"below": 2, "at": 3, "above": 4}}
    # a limit whose `assumes` fails is not probed (retention -1: never evicted), nor declared for coverage
    assert "retention" not in {limit.name for limit in limit_edges(spec, {**params, "retention_ms": -1})}

    spec = load_spec(ROOT / "spec" / "thread-jobs.yaml")
    edges = {limit.name: limit for limit in limit_edges(spec, spec.default_parameters())}
    lines = edges["payload_lines"].args[("observe_outcome", "payload")]
    assert "x\n" * 1000 in lines["at"]  # 1000 lines ending in a newline (1001 by the rule)
    assert "\n".join(["x"] * 1001) in lines["above"]
    assert "\n".join(["x\ry"] * 1000) in lines["at"]  # 1000 lines to the spec, 2000 to str.splitlines()
    size = edges["payload_bytes"].args[("observe_outcome", "payload")]
    assert all(len(text.encode("utf-8")) == 25601 for text in size["above"])
    assert any(len(text) < 25601 for text in size["above"])  # multi-byte: fewer characters than bytes
    assert edges["retention"].batches == {
        "fill_thread": {"below": 19, "at": 20, "above": 21},
        "evicted_tool_call": {"above": 21},  # it fills a thread exactly one past the limit
    }


def test_limit_edges_are_declared_as_boundary_classes():
    from conformance.engine.coverage import coverage_categories
    from statemachines import load_spec

    spec = load_spec(ROOT / "spec" / "task-progress.yaml")
    empty = {c: {} for c in ("operations", "outcomes", "transitions", "states", "policies", "races", "limits")}
    params = {**spec.default_parameters(), "grace_ms": 5000}
    missed = coverage_categories(spec, empty, params)["boundary-classes"]["missed"]
    assert [m for m in missed if m.startswith("grace")] == [
        "grace: below (4999)",
        "grace: at (5000)",
        "grace: above (5001)",
    ]
    counts = {**empty, "limits": {"grace.at": 3}}
    missed = coverage_categories(spec, counts, params)["boundary-classes"]["missed"]
    assert "grace: at (5000)" not in missed and "grace: below (4999)" in missed


def test_races_are_derived_for_every_operation_that_writes_a_record():
    from statemachines import derived_races, load_spec, record_writers

    spec = load_spec(ROOT / "spec" / "task-progress.yaml")
    assert "kill_task" in record_writers(spec)["task_id"] and "get_task" not in record_writers(spec)["task_id"]
    derived = {group["name"]: group for group in derived_races(spec)}
    # notify_task, background_task and update_progress race themselves in declared groups already
    assert "notify_task_twice" not in derived and "background_task_twice" not in derived
    assert derived["complete_task_twice"]["calls"] == ["complete_task", "complete_task"]
    assert derived["complete_task_twice"]["identical"] and derived["complete_task_twice"]["same_args"] == ["task_id"]
    # async-command's run_cancel_command is weighted 0 (never explored), so never derived
    assert derived_races(load_spec(ROOT / "spec" / "async-command.yaml")) == []


@pytest.mark.slow
def test_a_derived_race_finds_a_lost_update_the_declared_groups_miss():
    # No declared group races queue_message; the mutant reads the queue, lets go of the lock and writes
    # it back, so a message queued (or drained) meanwhile is lost (or comes back).
    from conformance.mutants import load_mutants, run_mutant
    from statemachines import load_spec

    spec = str(ROOT / "spec" / "task-progress.yaml")
    mutant = load_mutants(load_spec(spec).implementations["mutants"])["queue_lost_update"]
    tried = []
    for seed in (1, 2, 3):  # a race: the seed's path varies with thread scheduling (as in test_mutants)
        result = run_mutant(spec, "queue_lost_update", mutant, profile="ci", seed=seed, timeout_s=10)
        tried.append((seed, result.exploration_message))
        if result.found_by_exploration:
            break
    assert result.found_by_exploration, tried
    # Found by a derived race (queue_message twice, or queue_message racing drain_messages), which says so.
    head = result.exploration_message.splitlines()[0]
    assert head.startswith(("queue_message ×2 at once", "queue_message and drain_messages at once")), tried


def _slots_by_action(spec_name: str) -> Counter:
    from conformance.engine.stateful import Explorer
    from statemachines import load_spec

    spec = load_spec(ROOT / "spec" / spec_name)
    explorer = Explorer(spec, spec.default_parameters(), concurrent=False)
    return Counter(
        (kind, what if kind == "call" else what["name"]) if kind in ("call", "batch") else (kind, None)
        for kind, what in explorer.actions
    )


def test_a_batch_weight_is_its_share_of_the_drawn_steps():
    # thread-jobs' evicted_tool_call has weight 0.1: every share is scaled by 10
    slots = _slots_by_action("thread-jobs.yaml")
    assert slots[("batch", "evicted_tool_call")] == 1
    assert slots[("batch", "fill_thread")] == 20  # the default weight, 2
    assert slots[("call", "start_job")] == 60 and slots[("call", "restart")] == 10
    assert slots[("advance", None)] == 20
    # whole weights only: one slot per share, as before batches had weights
    slots = _slots_by_action("task-progress.yaml")
    assert {n for (kind, _), n in slots.items() if kind == "batch"} == {2}
    assert slots[("advance", None)] == 2


def test_a_replay_renames_a_near_miss_along_with_the_id_it_misses():
    # with an earlier start dropped, the job once called build-0005 is build-0004:
    # the abbreviation and the number forms of it follow, or the bug no longer shows
    from conformance.engine.key_shapes import reshaped
    from conformance.engine.reduce import _renamed

    names = {"build-0005": "build-0004"}
    args = {"ids": ["build-000", "0005", "5", "build-5", "build-00005", "BUILD-0005", " build-0005", "build-0005"]}
    assert _renamed(args, names) == {
        "ids": ["build-000", "0004", "4", "build-4", "build-00004", "BUILD-0004", " build-0004", "build-0004"]
    }
    assert reshaped("bq4x7k2", "bq4x7k2m", "b9z0c1de") == "b9z0c1d"  # random ids: the same abbreviation length
    assert reshaped("bq4x", "bq4x7k2m", "b9z0c1de") is None  # not the shape a draw gives: left as it is
