"""The model compiled from spec/thread-jobs.yaml follows the YAML."""

from pathlib import Path

import pytest

from conformance.engine.loaded_specs import load_spec_once
from statemachines import Matcher, Model, ObservationError

SPEC = load_spec_once(Path(__file__).resolve().parent.parent / "spec" / "thread-jobs.yaml")


def model(**params):
    m = Model(SPEC, {**SPEC.default_parameters(), **params})
    m.reset(0)
    return m


def start(m, job_id, thread="t1", call=None):
    return m.predict(
        "start_job",
        {"thread_id": thread, "tool_call_id": call or f"c-{job_id}", "tool_name": "build", "job_id": job_id},
    )


def finish(m, job_id, payload="ok", outcome="completed"):
    return m.predict(
        "observe_outcome",
        {"job_id": job_id, "outcome": outcome, "payload": payload},
        {"result": {}, "effects": [{"effect": "payload_spilled", "job_id": job_id, "path": "/tmp/x"}]},
    )


def test_transitions_come_from_the_lifecycle():
    m = model()
    start(m, "j1")
    assert m.predict("cancel_job", {"thread_id": "t1", "job_id": "j1", "requested_by": "user"}).effects == [
        {"effect": "cancellation_requested", "job_id": "j1", "requested_by": "user"}
    ]
    assert m.record("j1")["status"] == "pending_cancel"
    finish(m, "j1", outcome="completed")  # cancel is best effort
    assert m.record("j1")["status"] == "completed"
    again = m.predict("cancel_job", {"thread_id": "t1", "job_id": "j1", "requested_by": "agent"})
    assert again.result == {"job_id": "j1", "status": "completed"} and again.effects == []
    assert m.coverage.counts["transitions"]["pending_cancel -finish-> completed"] == 1


def test_scope_hides_jobs_of_other_threads():
    m = model()
    start(m, "j1", thread="t1")
    other = m.predict("inspect_job", {"thread_id": "t2", "job_id": "j1"})
    assert other.error == {"kind": "not_found_in_thread", "message": "Job not found in this thread: j1"}
    assert m.predict("list_jobs", {"thread_id": "t2"}).result == {"jobs": []}


@pytest.mark.parametrize("limit", [1, 5, 20])
def test_retention_keeps_the_newest_n_terminal_jobs_by_completion(limit):
    m = model(retention_limit=limit)
    start(m, "running-one")
    for i in range(limit + 1):
        start(m, f"j{i}")
    for i in reversed(range(limit + 1)):  # complete newest-started first
        finish(m, f"j{i}")
    kept = {k for k in m.keys() if k.startswith("j")}
    assert len(kept) == limit and f"j{limit}" not in kept  # j{limit} completed first, so it is the oldest
    assert "running-one" in m.keys()


def test_payload_limits_follow_parameters():
    m = model(max_bytes=10, max_lines=2)
    start(m, "a")
    start(m, "b")
    start(m, "c")
    assert finish(m, "a", payload="x" * 10).effects[0]["effect"] == "turn_requested"  # at the limit: inline
    spilled = finish(m, "b", payload="x" * 11).effects[0]
    assert spilled["effect"] == "payload_spilled" and isinstance(spilled["path"], Matcher)
    assert finish(m, "c", payload="a\nb\nc").effects[0]["effect"] == "payload_spilled"  # 3 lines > 2


def test_equal_completion_times_inject_in_marking_order():
    m = model()
    m.predict("begin_turn", {"thread_id": "t1"})
    for job in ("z", "a", "m"):
        start(m, job)
    for job in ("m", "z", "a"):
        finish(m, job)
    assert m.predict("turn_boundary", {"thread_id": "t1"}).result == {"injected": ["m", "z", "a"]}
    assert m.predict("turn_boundary", {"thread_id": "t1"}).result == {"injected": []}


def test_generated_ids_are_taken_from_the_observation_and_checked():
    m = model()
    start(m, "job-1")
    args = {"thread_id": "t1", "tool_call_id": "c9", "tool_name": "x"}
    with pytest.raises(ObservationError, match="job-1"):
        m.predict("start_job", args, {"result": {"job_id": "job-1"}})
    assert m.predict("start_job", args, {"result": {"job_id": "job-2"}}).result["job_id"] == "job-2"


def test_restart_forgets_everything():
    m = model()
    start(m, "j1")
    m.predict("complete_sync", {"thread_id": "t1", "tool_call_id": "s1", "tool_name": "x", "result": "r"})
    m.predict("restart", {})
    assert m.keys() == []
    assert m.predict("complete_sync", {"thread_id": "t1", "tool_call_id": "s1", "tool_name": "x", "result": "r"}).ok


def test_an_expression_failing_on_a_missing_part_of_the_response_blames_the_response():
    """size() of a list the implementation did not send fails inside CEL; the
    failure is the response's (a divergence), never the spec's error."""
    from statemachines import ExpressionError, compile_expression

    m = model()
    check = compile_expression("size(observed('result.warnings')) > 0", "spec.yaml:1")
    m._observation = {"result": {"ok": True}}
    with pytest.raises(ObservationError, match="result.warnings"):
        m._eval(check, {})
    m._observation = {"result": {"warnings": ["ended already"]}}
    assert m._eval(check, {}) is True
    broken = compile_expression("size(1) > 0", "spec.yaml:2")  # the spec's own mistake stays the spec's
    with pytest.raises(ExpressionError):
        m._eval(broken, {})


def test_an_invariant_outside_the_cel_subset_is_checked_alone_and_the_others_together(monkeypatch):
    # task-progress's id_format uses a regex (`matches`), which the kit's CEL subset leaves to the
    # binding: it is evaluated alone, the other per-task checks together in the kit's own subset.
    from conformance.specs import resolve_spec
    from statemachines.language.expressions import Expression

    spec = load_spec_once(resolve_spec("task-progress"))
    m = Model(spec, spec.default_parameters())
    m.reset(0)
    each = [inv.id for inv in spec.invariants if inv.kind == "each"]
    assert each[0] == "id_format" and "terminal_has_end_time" in each
    by_cel = []
    real = Expression._evaluate_by_cel
    monkeypatch.setattr(Expression, "_evaluate_by_cel", lambda self, *a: by_cel.append(self.source) or real(self, *a))
    task = {
        "task_id": "x-not-an-id",  # violates id_format
        "kind": "agent",
        "description": "d",
        "status": "completed",
        "is_backgrounded": False,
        "notified": False,
        "retain": False,
        "evict_after": None,
        "start_time": 0,
        "end_time": None,  # terminal without an end time: violates terminal_has_end_time
        "parent_id": None,
        "error": None,
        "progress": {"tool_use_count": 0, "token_count": 0, "recent_activities": [], "summary": None},
        "pending_messages": [],
    }
    m.store.add(task)
    m._touch(task)
    violated = [inv for inv, _ in m.check_invariants()]
    assert {"id_format", "terminal_has_end_time"} <= set(violated), violated
    assert violated == [inv for inv in each if inv in violated]  # in the spec's order
    id_format = next(inv.check.source for inv in spec.invariants if inv.id == "id_format")
    assert by_cel == [id_format], by_cel  # the binding evaluated that check alone, nothing else


def test_a_trigger_the_state_does_not_take_does_not_fire_and_logs_nothing(caplog):
    m = model()
    start(m, "j1")
    finish(m, "j1", outcome="completed")
    with caplog.at_level("DEBUG"):
        again = m.predict("cancel_job", {"thread_id": "t1", "job_id": "j1", "requested_by": "user"})
    assert again.result == {"job_id": "j1", "status": "completed"} and m.record("j1")["status"] == "completed"
    assert [r for r in caplog.records if r.name.startswith("transitions")] == []
