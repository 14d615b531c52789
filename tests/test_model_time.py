"""Engine features async jobs rely on, checked on spec/async-jobs.yaml's model:
timers fire at their own instants, operations that wait move the clock,
`remove`, operations offered per profile, key helpers, and their static checks."""

from pathlib import Path

import pytest

from conformance.engine.loaded_specs import load_spec_once
from statemachines import Model, SpecError, load_spec, resolve_parameters

ROOT = Path(__file__).resolve().parent.parent
SPEC = load_spec_once(ROOT / "spec" / "async-jobs.yaml")


def model(profile=None, **params):
    values, _ = resolve_parameters(SPEC, profile, params or None)
    m = Model(SPEC, values)
    m.reset(0)
    return m


def call(m, op, **args):
    p = m.predict(op, args)
    assert p.error is None, p.error
    return p.result, p.effects


def test_retries_fire_at_their_own_instants_not_at_the_target_time():
    m = model()
    call(m, "set_delivery", accept=False)
    call(m, "start_job", label="a")
    _, effects = call(m, "finish_job", job_id="bg_1", outcome="completed", text="done")
    assert effects == [{"effect": "delivery_failed", "job_id": "bg_1", "attempt": 1}]
    # 0 -> 4000 passes the retries at 500 and 1500 (= 500 + 1000); the next is 3500 (= 1500 + 2000).
    effects = m.advance(4000).effects
    assert [e["attempt"] for e in effects] == [2, 3, 4]
    call(m, "set_delivery", accept=True)
    assert m.advance(7499).effects == []  # the fifth attempt is due at 3500 + 4000
    assert m.advance(7500).effects == [{"effect": "delivered", "job_id": "bg_1", "status": "completed", "text": "done"}]


def test_a_waiting_operation_moves_the_clock_to_the_first_settling_job():
    m = model()
    call(m, "start_job", label="slow", duration_ms=9000)
    call(m, "start_job", label="fast", duration_ms=700, text="quick")
    result, effects = call(m, "job_tool")
    assert m.now == 700 and result["waited_ms"] == 700
    assert [j["status"] for j in result["jobs"]] == ["running", "completed"]
    assert effects == []  # watched while it settled: no delivery, then acknowledged
    # The other one is no longer watched: it is delivered when it settles.
    assert m.advance(20000).effects == [{"effect": "delivered", "job_id": "bg_1", "status": "completed", "text": ""}]


def test_a_wait_that_elapses_is_not_an_error():
    m = model()
    call(m, "start_job", label="forever")
    result, _ = call(m, "job_tool", wait_ms=5000)
    assert result["waited_ms"] == 5000 and m.now == 5000 and result["message"] is None


def test_retention_removes_the_record_at_the_boundary_and_ids_are_reused():
    m = model()
    call(m, "start_job", label="a", duration_ms=10)
    m.advance(10)
    m.advance(10 + 299_999)
    assert m.record("bg_1") is not None
    m.advance(10 + 300_000)
    assert m.record("bg_1") is None and m.keys() == []
    result, _ = call(m, "start_job", label="b")
    assert result["job_id"] == "bg_1"


def test_free_key_suffixes_preferred_ids():
    m = model()
    ids = [call(m, "start_job", label="x", id="build")[0]["job_id"] for _ in range(3)]
    assert ids == ["build", "build-2", "build-3"]


def test_operations_are_offered_per_profile():
    job_tool = SPEC.offered_operations(model().params)
    task_table = SPEC.offered_operations(model("task-table").params)
    assert "job_tool" in job_tool and "drain_completed" not in job_tool
    assert "drain_completed" in task_table and "job_tool" not in task_table
    assert {"start_job", "finish_job", "get_job", "list_jobs"} <= job_tool & task_table


def test_a_stored_permit_is_consumed_once():
    m = model("task-table")
    call(m, "start_job", label="a")
    call(m, "finish_job", job_id="bg-1", outcome="completed", text="")
    first, _ = call(m, "wait_for_completion", wait_ms=100)
    second, _ = call(m, "wait_for_completion", wait_ms=100)
    assert first == {"woken": True, "waited_ms": 0}
    assert second == {"woken": False, "waited_ms": 100} and m.now == 100


def _spec_with(tmp_path, extra: str, operation_steps: str = "") -> Path:
    text = f"""
format: lifecycle-spec/1
id: tiny
version: 0.0.1
title: tiny
entity: {{name: item, key: id, fields: {{id: {{type: string}}, status: {{type: string}}}}}}
lifecycle:
  field: status
  states: {{open: {{initial: true}}, done: {{terminal: true}}}}
  transitions: [{{trigger: close, source: open, dest: done}}]
operations:
  op:
    steps:
      - result: "{{}}"
{operation_steps}
{extra}
"""
    path = tmp_path / "tiny.yaml"
    path.write_text(text)
    return path


def test_unknown_timer_field_is_reported(tmp_path):
    with pytest.raises(SpecError, match="timer field 'due_at' is not a field of item"):
        load_spec(_spec_with(tmp_path, "timers: [due_at]"))


def test_on_clock_cannot_move_the_clock(tmp_path):
    with pytest.raises(SpecError, match="cannot move it themselves"):
        load_spec(_spec_with(tmp_path, "on_clock:\n  - advance: {to: now}"))


def test_operation_assumes_may_only_read_params(tmp_path):
    steps = "    assumes: \"args.x == 1\""
    with pytest.raises(SpecError, match="unknown name"):
        load_spec(_spec_with(tmp_path, "", steps))


def _refused_then_evicted(m):
    """Two failed jobs whose deliveries are refused, evicted while still queued."""
    call(m, "set_delivery", accept=False)
    call(m, "start_job", label="a")
    call(m, "start_job", label="b")
    call(m, "finish_job", job_id="bg_1", outcome="failed", text="A")
    call(m, "finish_job", job_id="bg_2", outcome="completed", text="B")
    m.advance(300_000)
    assert m.keys() == []


def test_evicted_delivery_dropped_goes_with_its_job():
    m = model()
    _refused_then_evicted(m)
    call(m, "set_delivery", accept=True)
    assert m.advance(400_000).effects == []


def test_evicted_delivery_last_attempt_is_made_once_at_its_retry_with_the_jobs_record():
    m = model(evicted_delivery="last_attempt")
    _refused_then_evicted(m)
    orphans = m.tables["orphans"]["queue"]
    assert [o["job_id"] for o in orphans] == ["bg_1", "bg_2"]  # queue order
    due = min(o["next_at"] for o in orphans)
    call(m, "set_delivery", accept=True)
    assert m.advance(due - 1).effects == []  # a table's timer: nothing before its instant
    delivered = m.advance(due).effects + m.advance(400_000).effects
    assert delivered == [
        {"effect": "delivered", "job_id": "bg_1", "status": "failed", "text": "A"},
        {"effect": "delivered", "job_id": "bg_2", "status": "completed", "text": "B"},
    ]
    assert m.tables["orphans"].get("queue") == []
    assert m.advance(900_000).effects == []  # once, never again


def test_evicted_delivery_last_attempt_refused_is_forgotten():
    m = model(evicted_delivery="last_attempt")
    _refused_then_evicted(m)
    attempts = {o["job_id"]: o["attempt"] for o in m.tables["orphans"]["queue"]}
    effects = m.advance(400_000).effects
    assert effects == [
        {"effect": "delivery_failed", "job_id": job_id, "attempt": attempt + 1} for job_id, attempt in attempts.items()
    ]
    assert m.advance(900_000).effects == []


def test_table_timer_must_name_a_declared_table(tmp_path):
    with pytest.raises(SpecError, match="timer table 'later' is not declared"):
        load_spec(_spec_with(tmp_path, "timers: [{table: later, field: at}]"))


def test_for_items_runs_its_steps_for_each_value(tmp_path):
    steps = "      - for_items: {as: n, in: '[1, 2, 3]', do: [{put: {table: seen, key: 'string(n)', value: 'n * 10'}}]}"
    spec = load_spec(_spec_with(tmp_path, "state: {tables: {seen: {description: what ran}}}", steps))
    m = Model(spec, {})
    m.reset(0)
    m.predict("op", {})
    assert m.tables["seen"] == {"1": 10, "2": 20, "3": 30}


def test_for_items_reports_an_unknown_name_in_its_list(tmp_path):
    steps = "      - for_items: {as: n, in: 'nowhere', do: []}"
    with pytest.raises(SpecError, match="nowhere"):
        load_spec(_spec_with(tmp_path, "", steps))
