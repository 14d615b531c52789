"""One cause, one failure, shortest first (conformance/engine/causes.py)."""

from __future__ import annotations

from conformance.engine.causes import group_by_cause, length_of
from conformance.engine.failures import Failure
from conformance.reporting import validate_report
from conformance.reporting._format import failed_checks


def _failure(operation: str, path: str, steps: int) -> Failure:
    trace = [{"index": i, "operation": "start_job", "args": {"n": i}} for i in range(steps - 1)]
    trace.append({"index": steps - 1, "operation": operation, "args": {}})
    return Failure(
        kind="divergence", message=f"{operation}: {path} differs", operation=operation, path=path, steps=trace
    )


def test_failures_come_shortest_first_whatever_order_they_were_found_in():
    long, middle, short = (
        _failure("list_jobs", "result.jobs", 69),
        _failure("get_job", "result", 40),
        _failure("turn_boundary", "result.injected", 5),
    )
    causes = group_by_cause([long, middle, short], {})
    assert [length_of(c) for c in causes] == [5, 40, 69]
    assert all(not c.symptoms for c in causes)


def test_a_failure_shown_to_first_fail_as_a_shorter_one_is_listed_under_it():
    eviction, null_job, tie = (
        _failure("list_jobs", "result.jobs", 69),
        _failure("get_job", "result", 68),
        _failure("turn_boundary", "result.injected[0]", 5),
    )
    unrelated = _failure("cancel_job", "result.changed", 9)
    # the eviction failure's steps, replayed with the masks lifted, first fail as the tie
    # failure (indexes aside); the null job's, as the eviction failure
    met = {
        id(eviction): {("divergence", "turn_boundary", "result.injected[*]")},
        id(null_job): {("divergence", "list_jobs", "result.jobs")},
    }
    causes = group_by_cause([eviction, null_job, tie, unrelated], met)
    assert causes == [tie, unrelated]
    assert tie.symptoms == [null_job, eviction]  # shortest first; the null job goes with the eviction it shows
    assert "also showed as 2 longer failure(s)" in tie.message and "list_jobs result.jobs (69 steps)" in tie.message
    assert not unrelated.symptoms


def test_the_reverse_direction_groups_too():
    short, long = _failure("turn_boundary", "result.injected", 5), _failure("list_jobs", "result.jobs", 30)
    causes = group_by_cause([long, short], {id(short): {("divergence", "list_jobs", "result.jobs")}})
    assert causes == [short] and short.symptoms == [long]


def test_a_symptom_that_showed_after_a_clock_move_says_so():
    short = _failure("get_job", "result.job", 7)
    clock = Failure(
        kind="divergence",
        message="after the clock moved to 300002 ms: effects[30].job_id: expected 1, got 2",
        operation=None,
        path="effects[30].job_id",
        steps=[{"index": i, "operation": "start_job", "args": {}} for i in range(29)] + [{"advance_ms": 1}],
    )
    causes = group_by_cause([clock, short], {id(clock): {("divergence", "get_job", "result.job")}})
    assert causes == [short]
    assert "divergence after a clock move, in effects[30].job_id (30 steps)" in short.message, short.message
    assert " at - " not in short.message


def test_a_report_lists_symptoms_under_their_cause_and_stays_valid():
    tie, eviction = _failure("turn_boundary", "result.injected", 5), _failure("list_jobs", "result.jobs", 20)
    [cause] = group_by_cause([eviction, tie], {id(eviction): {("divergence", "turn_boundary", "result.injected")}})
    report = {
        "kit": {"name": "lifecycle-conformance", "version": "0"},
        "verdict": "fail",
        "exit_code": 1,
        "scenarios": [],
        "stateful": {
            "verdict": "fail",
            "profile": "ci",
            "seed": 1,
            "examples": 3,
            "steps": 40,
            "failure": cause.to_dict(),
        },
    }
    labels = [label for label, _ in failed_checks(report)]
    assert labels == ["stateful exploration", "stateful exploration, failure 1, symptom 1 (same cause)"]
    errors = [e for e in validate_report(report) if "symptoms" in e]
    assert errors == [], errors
    assert "symptoms" not in _failure("a", "b", 1).to_dict()  # absent when there are none


def test_two_differences_in_one_answer_to_the_same_steps_are_one_failure():
    status, text = _failure("list_jobs", "result.jobs[2].status", 4), _failure("list_jobs", "result.jobs[2].text", 4)
    status.step = text.step = 3
    other_steps = _failure("list_jobs", "result.jobs[2].text", 5)
    other_steps.step = 3
    [cause, unrelated] = group_by_cause([status, text, other_steps], {})
    assert cause is status and cause.symptoms == [text] and not unrelated.symptoms
    assert "both are differences in one answer to the same steps" in status.message


def test_what_shows_a_decision_of_an_ordering_going_the_other_way():
    from conformance.engine.attribution import evidence

    def job(key: str, status: str = "completed") -> dict:
        return {"job_id": key, "status": status}

    reordered = Failure(
        kind="divergence",
        message="m",
        path="result.outcomes",
        expected=[job("a"), job("b"), job("c")],
        observed=[job("b"), job("a"), job("c"), job("d")],
    )
    shows = evidence(reordered, None, "job_id")
    assert shows(frozenset({"a", "b"})) and not shows(frozenset({"a", "c"})) and not shows(frozenset({"c", "d"}))
    evicted = Failure(kind="divergence", message="m", path="result.jobs", expected=[job("a")], observed=[job("b")])
    shows = evidence(evicted, None, "job_id")
    assert shows(frozenset({"a", "b", "c"})) and not shows(frozenset({"a", "c"}))
    kept = Failure(kind="divergence", message="m", path="result.outcomes", expected=[], observed=[job("a"), job("b")])
    assert not evidence(kept, None, "job_id")(frozenset({"a", "b"}))  # extra records, nothing went another way
    field = Failure(
        kind="divergence", message="m", path="result.jobs[1].status", expected="completed", observed="running"
    )
    answer = {"result": {"jobs": [job("a"), job("b", "running"), job("c", "failed")]}}
    shows = evidence(field, answer, "job_id")
    assert shows(frozenset({"a", "b"})) and not shows(frozenset({"b", "c"})) and not shows(frozenset({"a", "c"}))
    assert not evidence(field, {"result": {}}, "job_id")(frozenset({"a", "b"}))
    # a list of keys (the job ids a turn boundary injected) reads as a list of records does
    ids = Failure(kind="divergence", message="m", path="result.injected[0]", expected=["b", "a"], observed=["a", "b"])
    assert evidence(ids, None, "job_id")(frozenset({"a", "b"}))
    # effects beside the differing one that are no records (no key): no evidence, and no crash
    effect = Failure(kind="divergence", message="m", path="effects[0].reason", expected="size", observed="lines")
    spilled = {"effect": "payload_spilled", "job_id": "a", "reason": "lines"}
    answer = {"effects": [spilled, {"effect": "turn_requested", "thread_id": "t1", "reason": "size"}]}
    assert not evidence(effect, answer, "job_id")(frozenset({"a", "b"}))


def _task_table_with(mutant_name: str):
    import functools

    from conformance.engine.runner import RunConfig, prepare
    from conformance.mutants import load_mutants
    from conformance.specs import resolve_spec
    from statemachines import load_spec

    mutant = load_mutants(load_spec(resolve_spec("async-jobs")).implementations["mutants"])[mutant_name]
    config = RunConfig(
        spec_path="async-jobs",
        adapter_factory=functools.partial(mutant.factory, profile="task-table"),
        adapter_label=mutant_name,
        adapter_options={"profile": "task-table"},
        report_dir=None,
    )
    return prepare(config).session


def _failing(session, steps: list[dict]) -> Failure:
    from conformance.engine.reduce import replay_steps

    failure = replay_steps(session, steps)
    assert failure is not None, steps
    failure.steps = [dict(step) for step in session.trace]
    return failure


def _start(duration_ms: int) -> dict:
    return {"call": "start_job", "args": {"duration_ms": duration_ms, "label": ""}}


def test_failures_turning_on_one_ordering_of_the_spec_are_one_cause():
    """A task table firing due bodies in start order: a drain in the wrong order,
    and a job still running beside one that ended at the same instant. Neither
    replay first fails as the other; the spec's `body_order` decided the order
    of the records each differs on, so they are one cause."""
    from conformance.engine.attribution import orderings_in_play

    session = _task_table_with("task-table.fires_in_start_order")
    try:
        drain = _failing(
            session, [_start(125), _start(1), {"advance_ms": 18750}, {"call": "drain_completed", "args": {}}]
        )
        same_instant = _failing(
            session,
            [_start(1), _start(31), _start(1), {"call": "wait_for_completion", "args": {"wait_ms": 31}}]
            + [{"call": "list_jobs", "args": {}}],
        )
        terms = {id(f): orderings_in_play(session, f) for f in (drain, same_instant)}
    finally:
        session.close()
    assert (drain.operation, same_instant.operation) == ("drain_completed", "list_jobs")
    assert terms == {id(drain): {"body_order"}, id(same_instant): {"body_order"}}
    [cause] = group_by_cause([same_instant, drain], {}, terms)
    assert cause is drain and cause.symptoms == [same_instant]
    assert "the spec's ordering `body_order` decided" in cause.message


def test_records_an_ordering_placed_are_no_evidence_by_themselves():
    """A drain that keeps its queue answers the same two outcomes again: the
    clock ordered those two records, but nothing shows that order going the
    other way, so the failure turns on no ordering."""
    from conformance.engine.attribution import orderings_in_play

    session = _task_table_with("task-table.drain_keeps_queue")
    try:
        drain = {"call": "drain_completed", "args": {}}
        again = _failing(session, [_start(1), _start(2), {"advance_ms": 5}, drain, drain])
        assert again.operation == "drain_completed"
        assert orderings_in_play(session, again) == frozenset()
    finally:
        session.close()


def test_a_replay_for_grouping_probes_after_each_step_where_states_part_ways():
    """Whether a later failure is a consequence of an earlier one is judged
    where the implementation's visible state first parts from the model's:
    the replay probes after each step, as the exploration does."""
    from conformance.engine.reduce import replay_steps

    session = _task_table_with("task-table.status_from_body_result")
    steps = [_start(5), {"call": "cancel_task", "args": {"job_id": "bg-1"}}, {"advance_ms": 10}]
    steps.append({"call": "running_count", "args": {}})  # answers 0 either way
    try:
        assert replay_steps(session, steps) is None  # no step's own answer shows it
        parted = replay_steps(session, steps, probe_each=True)
    finally:
        session.close()
    assert parted is not None and (parted.operation, parted.path) == ("list_jobs", "result.jobs[0].status")
    assert parted.step == 3  # the probe after the clock move, before the last step


# -- one rule of the spec, broken once: operations that run the same steps ------------


def _command_failure(operation: str, observed, steps: int) -> Failure:
    failure = _failure(operation, "result.stdout.data.terminal", steps)
    failure.expected, failure.observed = True, observed
    return failure


def test_two_operations_running_the_same_steps_and_differing_the_same_way_are_one_cause():
    from conformance.engine.causes import steps_by_operation
    from conformance.specs import resolve_spec
    from statemachines import load_spec

    steps_of = steps_by_operation(load_spec(resolve_spec("async-command")))
    # run_cancel_command "must act like" cancel_job: the spec gives it cancel_job's steps
    assert steps_of["run_cancel_command"] == steps_of["cancel_job"] != steps_of["job_status"]
    cancel, run_cancel = _command_failure("cancel_job", False, 2), _command_failure("run_cancel_command", False, 3)
    status = _command_failure("job_status", False, 2)  # the status steps: another rule of the spec
    causes = group_by_cause([run_cancel, status, cancel], {}, steps_of=steps_of)
    assert causes == [status, cancel] and cancel.symptoms == [run_cancel] and not status.symptoms
    assert "`cancel_job` and `run_cancel_command` run the same steps of the spec" in cancel.message
    # differing another way is no evidence of one rule broken
    other = _command_failure("run_cancel_command", "yes", 3)
    assert group_by_cause([other, _command_failure("cancel_job", False, 2)], {}, steps_of=steps_of)[0].symptoms == []


def _entry(failure: Failure) -> dict:
    return failure.to_dict()


def test_the_parts_of_an_exploration_join_their_failures_by_cause():
    from conformance.engine.causes import join_parts

    # part 1 found the eviction failure and, under it, the null job it shows; part 2
    # found the null job first, shorter: one cause, headed by the shortest of all
    eviction, null_job = _failure("list_jobs", "result.jobs", 30), _failure("get_job", "result", 20)
    [part_one] = group_by_cause([eviction, null_job], {id(null_job): {("divergence", "list_jobs", "result.jobs")}})
    shorter_null = _failure("get_job", "result", 6)
    tie = _failure("turn_boundary", "result.injected[0]", 9)
    tie_again = _failure("turn_boundary", "result.injected[2]", 12)  # the same bug, found by another part
    causes = join_parts([_entry(part_one), _entry(tie_again), _entry(shorter_null), _entry(tie)])
    assert [(c["operation"], length_of(c)) for c in causes] == [("get_job", 6), ("turn_boundary", 9)]
    head = causes[0]
    assert [(s["operation"], length_of(s)) for s in head["symptoms"]] == [("list_jobs", 30)]
    assert head["message"].count("the same cause also showed as 1 longer failure(s)") == 1
    assert "first fail as" in head["message"]  # the reason part 1 gave is kept
    assert "symptoms" not in causes[1] and "also showed" not in causes[1]["message"]
    assert "also showed" not in head["symptoms"][0]["message"]  # a former head's note is not carried along


def _race_and_its_closest_order() -> Failure:
    """Two starts at once, the second answering status "completed" for the job it
    just started: no order matches, and the closest (call 0 then call 1) first
    differs at call 1's result.status."""
    from reference_calls import thread_jobs_starts

    from conformance.engine.linearize import linearize

    session, _, calls, responses = thread_jobs_starts(2)
    responses[1]["result"]["status"] = "completed"
    try:
        race = linearize(session, calls, responses, 0)
    finally:
        session.close()
    assert race is not None and race.kind == "linearizability"
    return race


def test_a_race_records_where_its_closest_order_differed():
    race = _race_and_its_closest_order()
    assert race.closest == {"call": 1, "operation": "start_job"}
    assert (race.path, race.expected, race.observed) == ("result.status", "running", "completed")
    assert "(closest: call 1, start_job: result.status" in race.message
    assert race.to_dict()["closest"] == race.closest
    assert "closest" not in _failure("get_job", "result", 2).to_dict()  # absent where there is no race


def test_a_race_whose_closest_order_differs_as_a_divergence_does_is_one_cause():
    from conformance.engine.causes import join_parts

    race = _race_and_its_closest_order()
    race.steps = [{"index": 0, "concurrently": [{"operation": "start_job", "args": {}}] * 2}]
    plain = _failure("start_job", "result.status", 3)
    plain.expected, plain.observed = "running", "completed"
    causes = group_by_cause([plain, race], {})
    assert causes == [race] and race.symptoms == [plain]
    assert "the race's closest sequential order first differs at `start_job` result.status" in race.message
    # across the parts of an exploration (no replay there) as well
    [joined] = join_parts([_entry(plain), _entry(_race_and_its_closest_order())])
    assert [s["kind"] for s in joined.get("symptoms", [])] in (["divergence"], ["linearizability"])
    # a divergence elsewhere, or the same path differing another way, is no evidence
    other = _failure("start_job", "result.status", 3)
    other.expected, other.observed = "running", "failed"
    assert group_by_cause([other, _race_and_its_closest_order()], {})[0].symptoms == []
    elsewhere = _failure("get_job", "result.status", 3)
    elsewhere.expected, elsewhere.observed = "running", "completed"
    assert group_by_cause([elsewhere, _race_and_its_closest_order()], {})[0].symptoms == []


def test_a_failure_the_hunt_called_distinct_no_longer_says_so_once_joined():
    """An independent runtime's report headed "failure 1, symptom 3 (same
    cause)" over "(a distinct failure, found with seed 1 ...)": the hunt's
    word, written before the causes were grouped, contradicted the grouping."""
    tie, eviction = _failure("turn_boundary", "result.injected", 5), _failure("list_jobs", "result.jobs", 20)
    lone = _failure("cancel_job", "result.changed", 9)
    for failure in (eviction, lone):
        failure.message += (
            "\n(a distinct failure, found with seed 1 while the exploration accepted the 1 failure(s) found before it)"
        )
    causes = group_by_cause([eviction, tie, lone], {id(eviction): {("divergence", "turn_boundary", "result.injected")}})
    assert causes == [tie, lone] and tie.symptoms == [eviction]
    assert "distinct" not in eviction.message, eviction.message
    assert eviction.message.endswith(
        "\n(found with seed 1 while the exploration accepted the failure(s) found before it; "
        "one cause with the others listed with it)"
    ), eviction.message
    assert "(a distinct failure, found with seed 1" in lone.message  # alone, it is distinct


def test_a_race_whose_answers_fit_but_whose_probe_differs_says_the_state_may_be_older():
    """An independent runtime's wrong eviction, unread until a race, came out
    as "3 concurrent calls match no sequential order": every racing answer
    fitted an order, only the list read after them differed. The message
    says so and points at an earlier step."""
    from reference_calls import thread_jobs_starts

    from conformance.engine.linearize import linearize

    session, runtime, calls, responses = thread_jobs_starts(2)
    listing = ("list_jobs", {"thread_id": "t1"})
    answer = runtime.call(*listing)
    answer["result"]["jobs"] = answer["result"]["jobs"][:1]  # one started job is not listed
    try:
        race = linearize(session, calls, responses, 0, [(*listing, answer)])
    finally:
        session.close()
    assert race is not None and race.closest == {"operation": "list_jobs"}, race and race.message
    assert "(closest: the list_jobs after them:" in race.message
    assert "Every racing call's answer fits that order; only the list_jobs after them differs." in race.message
    assert "may have gone wrong at an earlier step" in race.message
    assert "fits that order" not in _race_and_its_closest_order().message  # a racing answer differed there
