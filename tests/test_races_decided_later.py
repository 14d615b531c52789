"""Concurrent calls whose orders end in states no answer tells apart yet: the
check goes on from one order and, when a later answer contradicts it, tries
the others (conformance/engine/linearize.py, RaceOutcome), instead of
reporting a race the implementation did not lose. Races derived from the spec
(statemachines/tools/races.py) include each conflicting pair of operations."""

from __future__ import annotations

import threading

import pytest

from conformance.engine.runner import RunConfig, prepare
from conformance.specs import resolve_spec
from lifecycle_references.thread_jobs.adapter import ReferenceAdapter
from statemachines import derived_races, load_spec

START = {"thread_id": "t1", "tool_call_id": "c1", "tool_name": "build", "job_id": "k1"}


def _outcome(payload: str) -> tuple[str, dict]:
    return "observe_outcome", {"job_id": "k1", "outcome": "completed", "payload": payload}


class SecondCallFirst(ReferenceAdapter):
    """The reference, but of two racing outcomes the one with payload "second"
    always lands first: the order the model does not try first."""

    def reset(self, now_ms):
        self.landed = threading.Event()
        return super().reset(now_ms)

    def call(self, operation, args):
        if operation == "observe_outcome" and args.get("payload") == "first":
            self.landed.wait(5)
        try:
            return super().call(operation, args)
        finally:
            if operation == "observe_outcome" and args.get("payload") == "second":
                self.landed.set()


class InjectsSomethingElse(SecondCallFirst):
    """...and then injects a payload nobody reported: a real bug."""

    def call(self, operation, args):
        response = super().call(operation, args)
        if operation == "turn_boundary":
            for effect in response.get("effects") or []:
                if isinstance(effect.get("text"), str):
                    effect["text"] = effect["text"].replace("second", "third")
        return response


def _session(adapter_class):
    return prepare(
        RunConfig(spec_path="thread-jobs", adapter_factory=adapter_class, adapter_label="fixture", report_dir=None)
    ).session


OTHER_GROUP = [
    ("start_job", {"thread_id": "t2", "tool_call_id": "c2", "tool_name": "build", "job_id": "k2"}),
    ("start_job", {"thread_id": "t2", "tool_call_id": "c3", "tool_name": "search", "job_id": "k3"}),
]


def _run(adapter_class, groups_between: int = 0):
    session = _session(adapter_class)
    try:
        session.reset()
        _, failure = session.call("start_job", dict(START))
        assert failure is None, failure.message
        _, failure = session.call("begin_turn", {"thread_id": "t1"})  # a busy thread: no wake-up tells the order
        assert failure is None, failure.message
        answers, failure = session.call_concurrently([_outcome("first"), _outcome("second")])
        assert failure is None, failure.message
        assert answers[0] == answers[1]
        for n in range(groups_between):  # other races, settled at once, before the first one's is decided
            group = [
                (op, {**args, "tool_call_id": f"{args['tool_call_id']}-{n}", "job_id": f"{args['job_id']}-{n}"})
                for op, args in OTHER_GROUP
            ]
            _, failure = session.call_concurrently(group)
            assert failure is None, failure.message
        # Both answers are the same finished job: which payload won shows only at injection.
        response, failure = session.call("turn_boundary", {"thread_id": "t1"})
        return response, failure, session.trace
    finally:
        session.close()


@pytest.mark.parametrize("groups_between", [0, 1, 2])
def test_a_later_answer_picks_the_order_the_implementation_took(groups_between):
    # With other concurrent groups in between, the first race's orders stay open behind them.
    response, failure, trace = _run(SecondCallFirst, groups_between)
    assert failure is None, failure.message
    assert "second" in str(response["effects"]) and "first" not in str(response["effects"])
    # The trace says so: a reduction that runs the race one call after another takes the second first.
    race = next(entry for entry in trace if "concurrently" in entry)
    assert race["order"] == [1, 0], race


def test_orders_stay_open_only_for_the_newest_few_groups():
    from conformance.engine.linearize import MAX_OPEN_RACES

    response, failure, trace = _run(SecondCallFirst, MAX_OPEN_RACES)
    assert failure is not None and failure.kind == "divergence" and failure.operation == "turn_boundary"


@pytest.mark.parametrize("groups_between", [0, 2])
def test_an_answer_no_order_explains_is_still_a_divergence(groups_between):
    response, failure, trace = _run(InjectsSomethingElse, groups_between)
    assert failure is not None and failure.kind == "divergence" and failure.operation == "turn_boundary"
    assert "third" in str(failure.observed)


def test_every_conflicting_pair_of_writers_is_raced_and_commuting_ones_are_not():
    spec = load_spec(resolve_spec("task-progress"))
    names = {group["name"] for group in derived_races(spec)}
    assert {
        "complete_task_twice",
        "complete_task_and_fail_task",
        "complete_task_and_update_progress",
        "queue_message_and_drain_messages",
    } <= names
    # update_summary writes `progress`, queue_message `pending_messages`: neither reads the other's field.
    assert "update_summary_and_queue_message" not in names
    # A pair a spec declares itself is not derived again.
    declared = {tuple(sorted(g["calls"])) for g in spec.exploration.concurrent}
    assert not any(tuple(sorted(g["calls"])) in declared and not g.get("identical") for g in derived_races(spec))


def _run_with_a_stale_later_group(adapter_class):
    """As _run with one group between, that group's trace entry given an order
    and chosen values no order of it has: what re-deciding the first race
    leaves in it shows whether the group was noted again."""
    session = _session(adapter_class)
    try:
        session.reset()
        for operation, args in [("start_job", dict(START)), ("begin_turn", {"thread_id": "t1"})]:
            assert session.call(operation, args)[1] is None
        assert session.call_concurrently([_outcome("first"), _outcome("second")])[1] is None
        assert session.call_concurrently(OTHER_GROUP)[1] is None
        later = [entry for entry in session.trace if "concurrently" in entry][-1]
        noted = {"order": list(later["order"]), "chosen": [c.get("chosen") for c in later["concurrently"]]}
        later["order"] = [1, 0] if noted["order"] == [0, 1] else [0, 1]
        for call in later["concurrently"]:
            call["chosen"] = ["stale"]
        _, failure = session.call("turn_boundary", {"thread_id": "t1"})
        later = [entry for entry in session.trace if "concurrently" in entry][-1]
        return failure, noted, later
    finally:
        session.close()


def test_a_group_after_a_race_decided_later_is_noted_in_the_order_found_again():
    failure, noted, later = _run_with_a_stale_later_group(SecondCallFirst)
    assert failure is None, failure.message
    # the first race went the other way; the group after it was checked again from there,
    # and its entry says what that check found, as when it was first checked
    assert later["order"] == noted["order"]
    assert [c.get("chosen") for c in later["concurrently"]] == noted["chosen"]


def test_no_order_adopted_leaves_the_trace_as_it_was():
    failure, noted, later = _run_with_a_stale_later_group(InjectsSomethingElse)
    assert failure is not None and failure.operation == "turn_boundary"
    # every other end state was tried and none adopted: the entries are as before the tries
    assert later["order"] != noted["order"]
    assert all(c.get("chosen") == ["stale"] for c in later["concurrently"])
