"""The reference task table, checked against the `task-table` profile of its
contract (docs/async-jobs-contract.md) through call() and set_clock(), and
every mutant shown to misbehave on a concrete call sequence."""

from __future__ import annotations

import threading
import time

import pytest
import reference_calls as calls
from reference_calls import err, observe

from lifecycle_references.task_table import TaskTableAdapter
from lifecycle_references.task_table.mutants import MUTANTS, Mutant

__all__: list[str] = []


# ------------------------------------------------------------------ helpers


@pytest.fixture
def adapter():
    a = TaskTableAdapter()
    yield a
    a.close()


def ok(a, op, **args):
    """Call and expect success; return the result (this profile has no effects)."""
    result, effects = calls.ok(a, op, **args)
    assert effects == []
    return result


def start(a, label="t", **plan):
    result = ok(a, "start_job", label=label, **plan)
    assert result["status"] == "running"
    return result["job_id"]


def job(a, job_id):
    return ok(a, "get_job", job_id=job_id)["job"]


def status(a, job_id):
    return job(a, job_id)["status"]


def ids(a):
    return [j["job_id"] for j in ok(a, "list_jobs")["jobs"]]


def drain(a):
    return ok(a, "drain_completed")["outcomes"]


def drained_ids(a):
    return [o["job_id"] for o in drain(a)]


def wait(a, wait_ms):
    r = ok(a, "wait_for_completion", wait_ms=wait_ms)
    return r["woken"], r["waited_ms"]


def cancel(a, job_id):
    return ok(a, "cancel_task", job_id=job_id)["cancelled"]


def finish(a, job_id, outcome="completed", text="done"):
    return ok(a, "finish_job", job_id=job_id, outcome=outcome, text=text)


def finished_tasks(a, n, at=1):
    """n tasks whose bodies return at `at` ms (in start order)."""
    tasks = [start(a, f"t{i}", duration_ms=at) for i in range(n)]
    a.set_clock(at)
    return tasks


# ------------------------------------------------------------ describe, ids


def test_describe_declares_the_task_table_profile(adapter):
    assert adapter.describe() == {
        "name": "reference-task-table",
        "version": "1.0.0",
        "profile": "task-table",
        "parameters": {},  # only values set on purpose; the rest are the profile's
        "capabilities": {"concurrent": True},
    }


def test_parameters_from_the_command_line():
    a = TaskTableAdapter(
        max_finished="1",
        id_prefix="task-",
        id_counter_start="0",
        cancelled_status="cancelled",
        msg_unknown_job="no {job_id} here",
    )
    try:
        assert a.describe()["parameters"] == {
            "max_finished": 1,
            "id_prefix": "task-",
            "id_counter_start": 0,
            "cancelled_status": "cancelled",
            "msg_unknown_job": "no {job_id} here",
        }
        first = start(a, stop_ms=1)
        second = start(a, duration_ms=5)
        assert (first, second) == ("task-0", "task-1")
        assert cancel(a, first) is True
        a.set_clock(5)
        assert ids(a) == ["task-1"]  # one finished task kept: the newest
        assert [o["status"] for o in drain(a)] == ["cancelled", "completed"]
        assert err(a, "finish_job", job_id="task-0", outcome="completed", text="") == ("not_found", "no task-0 here")
    finally:
        a.close()
    with pytest.raises(TypeError):
        TaskTableAdapter(retention_ms=5)
    with pytest.raises(ValueError):
        TaskTableAdapter(max_finished=-1)


def test_ids_count_up_and_list_sorts_them_as_strings(adapter):
    # a preferred id and the job type are accepted and ignored
    first = ok(adapter, "start_job", label="a", type="task", id="mine")
    assert first == {"job_id": "bg-1", "status": "running"}
    tasks = [start(adapter, f"l{i}") for i in range(2, 12)]
    assert tasks == [f"bg-{i}" for i in range(2, 12)]
    assert ids(adapter) == ["bg-1", "bg-10", "bg-11"] + [f"bg-{i}" for i in range(2, 10)]
    assert job(adapter, "bg-1") == {
        "job_id": "bg-1",
        "label": "a",
        "status": "running",
        "result_text": None,
        "error_text": None,
    }
    assert ok(adapter, "list_jobs")["jobs"][0] == job(adapter, "bg-1")
    assert job(adapter, "bg-99") is None
    assert ok(adapter, "running_count") == {"running": 11}


def test_ids_are_never_reused_and_reset_starts_over(adapter):
    finished_tasks(adapter, 65)  # bg-1 is evicted
    assert start(adapter) == "bg-66"
    adapter.reset(1000)
    assert ok(adapter, "list_jobs") == {"jobs": []}
    assert drain(adapter) == [] and ok(adapter, "has_completed") == {"has_completed": False}
    assert start(adapter, duration_ms=5) == "bg-1"
    adapter.set_clock(1004)
    assert status(adapter, "bg-1") == "running"
    adapter.set_clock(1005)
    assert status(adapter, "bg-1") == "completed"


# ------------------------------------------------------------- bodies, time


def test_finish_job_returns_the_body_once(adapter):
    t = start(adapter, label="build")
    assert finish(adapter, t, "failed", "boom") == {"job_id": t, "status": "failed", "returned": True}
    assert job(adapter, t) == {
        "job_id": t,
        "label": "build",
        "status": "failed",
        "result_text": None,
        "error_text": "boom",
    }
    assert finish(adapter, t, "completed", "late") == {"job_id": t, "status": "failed", "returned": False}
    assert job(adapter, t)["error_text"] == "boom"
    done = start(adapter)
    assert finish(adapter, done, "completed", "ok")["status"] == "completed"
    assert job(adapter, done)["result_text"] == "ok" and job(adapter, done)["error_text"] is None
    assert err(adapter, "finish_job", job_id="bg-9", outcome="completed", text="") == (
        "not_found",
        "Job not found: bg-9",
    )


def test_planned_body_returns_at_its_time_with_its_outcome(adapter):
    adapter.reset(100)
    ok_task = start(adapter, duration_ms=50, text="out")
    bad = start(adapter, duration_ms=50, outcome="failed", text="err")
    quiet = start(adapter, duration_ms=60)
    assert adapter.set_clock(149) == []
    assert ok(adapter, "running_count") == {"running": 3}
    assert adapter.set_clock(150) == []
    assert job(adapter, ok_task)["result_text"] == "out"
    assert job(adapter, bad) == {
        "job_id": bad,
        "label": "t",
        "status": "failed",
        "result_text": None,
        "error_text": "err",
    }
    assert status(adapter, quiet) == "running"
    assert finish(adapter, ok_task) == {"job_id": ok_task, "status": "completed", "returned": False}
    adapter.set_clock(1000)
    assert job(adapter, quiet)["result_text"] == ""  # the default text


def test_timers_fire_at_their_own_instants_in_time_order(adapter):
    late = start(adapter, duration_ms=500)
    early = start(adapter, duration_ms=300)
    tie_a = start(adapter, duration_ms=400)
    tie_b = start(adapter, duration_ms=400)
    adapter.set_clock(2000)  # one move: each body still returns at its own instant
    assert drained_ids(adapter) == [early, tie_a, tie_b, late]
    # a cancelled body stops stop_ms after the instant of its cancellation
    adapter.reset(0)
    slow = start(adapter, duration_ms=100)
    stopper = start(adapter, stop_ms=30)
    adapter.set_clock(50)
    cancel(adapter, stopper)
    adapter.set_clock(1000)
    assert drained_ids(adapter) == [stopper, slow]


# ---------------------------------------------------------- cooperative cancel


def test_cancel_answers_true_false_null(adapter):
    t = start(adapter)
    assert ok(adapter, "cancel_task", job_id=t) == {"job_id": t, "cancelled": True}
    assert cancel(adapter, t) is True  # still running: the body ignores cancellation
    assert status(adapter, t) == "running"
    finish(adapter, t)
    assert ok(adapter, "cancel_task", job_id=t) == {"job_id": t, "cancelled": False}
    assert ok(adapter, "cancel_task", job_id="bg-7") == {"job_id": "bg-7", "cancelled": None}


def test_status_flips_only_when_the_body_returns(adapter):
    t = start(adapter, stop_ms=200, outcome="failed", text="interrupted")
    adapter.set_clock(100)
    assert cancel(adapter, t) is True
    adapter.set_clock(299)
    assert status(adapter, t) == "running"
    assert ok(adapter, "running_count") == {"running": 1}
    assert ok(adapter, "has_completed") == {"has_completed": False}
    adapter.set_clock(300)
    # canceled, with the text kept the way the body returned it
    assert job(adapter, t) == {
        "job_id": t,
        "label": "t",
        "status": "canceled",
        "result_text": None,
        "error_text": "interrupted",
    }
    assert ok(adapter, "running_count") == {"running": 0}


def test_canceled_exactly_when_cancel_came_before_the_return(adapter):
    ignores = start(adapter, duration_ms=100, text="r")  # no stop_ms: ignores cancellation
    played = start(adapter, stop_ms=500)
    not_cancelled = start(adapter, duration_ms=100)
    cancel(adapter, ignores)
    cancel(adapter, played)
    # the kit plays the work before the body stops: still canceled
    assert finish(adapter, played, "completed", "kit") == {"job_id": played, "status": "canceled", "returned": True}
    assert job(adapter, played)["result_text"] == "kit"
    adapter.set_clock(100)
    assert job(adapter, ignores) == {
        "job_id": ignores,
        "label": "t",
        "status": "canceled",
        "result_text": "r",
        "error_text": None,
    }
    assert status(adapter, not_cancelled) == "completed"


def test_cancel_at_the_instant_the_body_is_due_is_too_late(adapter):
    t = start(adapter, duration_ms=100, stop_ms=10)
    adapter.set_clock(100)  # timers due at 100 already ran
    assert cancel(adapter, t) is False
    assert status(adapter, t) == "completed"
    assert [o["status"] for o in drain(adapter)] == ["completed"]


def test_a_cancelled_body_stops_stop_ms_later_unless_its_work_ends_first(adapter):
    sooner = start(adapter, duration_ms=50, stop_ms=100)
    later = start(adapter, duration_ms=500, stop_ms=100)
    untimed = start(adapter, stop_ms=100)
    adapter.set_clock(10)
    for t in (sooner, later, untimed):
        cancel(adapter, t)
    adapter.set_clock(49)
    assert status(adapter, sooner) == "running"
    adapter.set_clock(50)  # its own time came first: still canceled
    assert status(adapter, sooner) == "canceled"
    adapter.set_clock(109)
    assert ok(adapter, "running_count") == {"running": 2}
    adapter.set_clock(110)
    assert [status(adapter, t) for t in (later, untimed)] == ["canceled", "canceled"]
    assert drained_ids(adapter) == [sooner, later, untimed]


# ----------------------------------------------------------------- outcomes


def test_every_finished_task_is_queued_and_drain_clears(adapter):
    done = start(adapter, duration_ms=10, text="r")
    failed = start(adapter, duration_ms=20, outcome="failed", text="e")
    cancelled = start(adapter, stop_ms=5)
    cancel(adapter, cancelled)
    assert ok(adapter, "has_completed") == {"has_completed": False}
    adapter.set_clock(5)
    assert ok(adapter, "has_completed") == {"has_completed": True}
    adapter.set_clock(20)
    assert drain(adapter) == [
        {"job_id": cancelled, "status": "canceled", "result_text": "", "error_text": None},
        {"job_id": done, "status": "completed", "result_text": "r", "error_text": None},
        {"job_id": failed, "status": "failed", "result_text": None, "error_text": "e"},
    ]
    assert drain(adapter) == []
    assert ok(adapter, "has_completed") == {"has_completed": False}
    # draining does not touch the table
    assert ids(adapter) == [done, failed, cancelled]


# --------------------------------------------------------------- wake-up signal


def test_a_signal_fired_while_nobody_waits_is_stored_once(adapter):
    finished_tasks(adapter, 2, at=10)  # two signals, nobody waiting: one permit
    assert wait(adapter, 1000) == (True, 0)
    assert wait(adapter, 1000) == (False, 1000)  # the permit was consumed; the clock ran
    assert adapter.set_clock(1010) == []  # the kit's clock continues from there
    assert len(drain(adapter)) == 2


def test_wait_runs_the_clock_until_the_next_outcome(adapter):
    adapter.reset(100)
    t = start(adapter, duration_ms=250)
    assert wait(adapter, 1000) == (True, 250)
    assert status(adapter, t) == "completed"
    assert wait(adapter, 5000) == (False, 5000)
    start(adapter, duration_ms=300)
    assert wait(adapter, 300) == (True, 300)  # due exactly at the end of the wait
    # a cancelled body's stop is a timer like any other
    s = start(adapter, stop_ms=40)
    cancel(adapter, s)
    assert wait(adapter, 100) == (True, 40)
    assert status(adapter, s) == "canceled"


def test_two_outcomes_at_one_instant_wake_once_and_store_the_permit(adapter):
    for _ in range(3):
        start(adapter, duration_ms=70)
    later = start(adapter, duration_ms=90)
    assert wait(adapter, 1000) == (True, 70)  # all three due at 70 returned
    assert status(adapter, later) == "running"
    assert len(drain(adapter)) == 3
    assert wait(adapter, 1000) == (True, 0)  # the stored permit
    assert wait(adapter, 20) == (True, 20)  # 90 reached: the last one
    assert wait(adapter, 10) == (False, 10)


def test_wait_arguments(adapter):
    for bad in (0, 300001, -5, 2.5, "10", None, True):
        assert err(adapter, "wait_for_completion", wait_ms=bad)[0] == "invalid_arguments"
    assert wait(adapter, 300000) == (False, 300000)


# ------------------------------------------------------------------ eviction


def test_64_finished_are_kept_and_the_65th_evicts_the_oldest(adapter):
    tasks = finished_tasks(adapter, 64)
    assert len(ids(adapter)) == 64
    late = start(adapter, duration_ms=1)
    adapter.set_clock(2)
    assert job(adapter, tasks[0]) is None
    assert job(adapter, tasks[1])["status"] == "completed"
    assert set(ids(adapter)) == set(tasks[1:] + [late])
    assert err(adapter, "finish_job", job_id=tasks[0], outcome="completed", text="")[0] == "not_found"
    assert cancel(adapter, tasks[0]) is None
    # its outcome was queued before the eviction and stays there
    assert drained_ids(adapter) == tasks + [late]


def test_eviction_follows_finish_order_not_start_order(adapter):
    first = start(adapter)
    rest = finished_tasks(adapter, 64)
    finish(adapter, first)  # finished last: the newest
    assert job(adapter, first)["status"] == "completed"
    assert job(adapter, rest[0]) is None


def test_running_tasks_are_never_evicted(adapter):
    running = [start(adapter) for _ in range(3)]
    done = finished_tasks(adapter, 66)
    assert len(ids(adapter)) == 67
    for t in running:
        assert status(adapter, t) == "running"
    assert [job(adapter, t) for t in done[:2]] == [None, None]
    assert ok(adapter, "running_count") == {"running": 3}


# ---------------------------------------------------------------- cancel_all


def test_cancel_all_reaches_running_tasks_and_later_ones(adapter):
    stopper = start(adapter, stop_ms=10)
    ignorer = start(adapter, duration_ms=100)
    done = start(adapter, duration_ms=1)
    adapter.set_clock(1)
    assert ok(adapter, "cancel_all") == {}
    assert ok(adapter, "cancel_all") == {}  # idempotent
    adapter.set_clock(11)
    assert status(adapter, stopper) == "canceled"
    assert status(adapter, ignorer) == "running"
    assert status(adapter, done) == "completed"
    # spawned afterwards: cancelled at birth (a stop_ms body stops at once)
    born = start(adapter, stop_ms=5)
    plain = start(adapter, duration_ms=20)
    assert status(adapter, born) == "running" and cancel(adapter, born) is True
    adapter.set_clock(16)
    assert status(adapter, born) == "canceled"
    adapter.set_clock(31)
    assert status(adapter, plain) == "canceled"
    assert status(adapter, ignorer) == "running"
    adapter.set_clock(100)
    assert status(adapter, ignorer) == "canceled"
    assert [o["job_id"] for o in drain(adapter)] == [done, stopper, born, plain, ignorer]


# ------------------------------------------------------------- concurrency


def _together(*calls):
    barrier, results = threading.Barrier(len(calls)), [None] * len(calls)

    def run(i, fn):
        barrier.wait()
        results[i] = fn()

    threads = [threading.Thread(target=run, args=(i, fn)) for i, fn in enumerate(calls)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(10)
    return results


def test_cancel_racing_finish_is_linearizable(adapter):
    for _ in range(60):
        t = start(adapter)
        cancelled, finished = _together(lambda t=t: cancel(adapter, t), lambda t=t: finish(adapter, t))
        assert finished["returned"] is True
        final = status(adapter, t)
        assert finished["status"] == final
        # cancel first: true and canceled; finish first: false and completed
        assert (cancelled, final) in {(True, "canceled"), (False, "completed")}
    assert ok(adapter, "running_count") == {"running": 0}


def test_concurrent_calls_are_safe(adapter):
    def worker(n):
        mine = []
        for i in range(15):
            t = start(adapter, f"w{n}-{i}", stop_ms=1) if i % 3 else start(adapter, f"w{n}-{i}")
            mine.append(t)
            if i % 2:
                cancel(adapter, t)
            if i % 3 == 0:
                finish(adapter, t, "failed", "x")
            ok(adapter, "list_jobs")
            ok(adapter, "has_completed")
        return mine

    results = _together(*[lambda n=n: worker(n) for n in range(6)])
    started = [t for mine in results for t in mine]
    assert sorted(started, key=lambda t: int(t[3:])) == [f"bg-{i}" for i in range(1, 91)]
    finish_racers = [t for t in started if status(adapter, t) == "running" and cancel(adapter, t)]
    _together(
        *[lambda t=t: finish(adapter, t, "failed", "y") for t in finish_racers[:3]],
        lambda: adapter.call("cancel_all", {}),
        lambda: drain(adapter),
    )
    adapter.set_clock(10)
    for t in finish_racers[3:]:
        finish(adapter, t)
    assert ok(adapter, "running_count") == {"running": 0}
    assert len(ids(adapter)) == 64
    assert wait(adapter, 5) == (True, 0)  # stored by the finishes


# ---------------------------------------------------------- protocol edges


def test_unknown_operation_and_bad_arguments(adapter):
    assert err(adapter, "job_tool", poll=[])[0] == "unknown_operation"
    t = start(adapter)
    bad = [
        ("start_job", {}),
        ("start_job", {"label": 3}),
        ("start_job", {"label": "l", "type": "python"}),
        ("start_job", {"label": "l", "duration_ms": 0}),
        ("start_job", {"label": "l", "duration_ms": "5"}),
        ("start_job", {"label": "l", "stop_ms": -1}),
        ("start_job", {"label": "l", "outcome": "cancelled"}),
        ("start_job", {"label": "l", "text": 5}),
        ("start_job", {"label": "l", "id": 7}),
        ("finish_job", {"job_id": t, "outcome": "completed"}),
        ("finish_job", {"job_id": t, "outcome": "canceled", "text": ""}),
        ("finish_job", {"outcome": "completed", "text": ""}),
        ("get_job", {"job_id": None}),
        ("cancel_task", {"job_id": 1}),
        ("wait_for_completion", {}),
    ]
    for op, args in bad:
        response = adapter.call(op, args)
        assert response["error"]["kind"] == "invalid_arguments", (op, args, response)
    assert adapter.call("list_jobs", ["x"])["error"]["kind"] == "invalid_arguments"
    assert ids(adapter) == [t] and status(adapter, t) == "running"


def _body_threads():
    return [t for t in threading.enumerate() if t.name.startswith("task-table ")]


def test_reset_and_close_stop_every_body_thread():
    assert _body_threads() == []
    a = TaskTableAdapter()
    for i in range(20):
        start(a, duration_ms=1000 + i, stop_ms=5 if i % 2 else None)
    ok(a, "cancel_all")
    assert len(_body_threads()) == 20
    a.reset(0)
    assert _body_threads() == []
    start(a)
    assert len(_body_threads()) == 1
    a.close()
    assert _body_threads() == []
    # a body that returned has ended its thread too
    b = TaskTableAdapter()
    try:
        finished_tasks(b, 3)
        deadline = time.monotonic() + 2
        while _body_threads() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _body_threads() == []
    finally:
        b.close()


# ----------------------------------------------------------------- mutants
# Each scenario returns an observation; a mutant is caught when its
# observation differs from the reference's on the same sequence.


def _cancel_then_look(a):
    t = start(a, stop_ms=50)
    cancel(a, t)
    return status(a, t), ok(a, "running_count")


def _cancel_ignored_then_finish(a):
    t = start(a)
    cancel(a, t)
    return finish(a, t)


def _cancel_finished(a):
    t = start(a, duration_ms=1)
    a.set_clock(1)
    return cancel(a, t)


def _spawn_after_cancel_all(a):
    ok(a, "cancel_all")
    t = start(a, duration_ms=5)
    a.set_clock(5)
    return status(a, t)


def _drain_canceled(a):
    t = start(a, stop_ms=1)
    cancel(a, t)
    a.set_clock(1)
    return drain(a)


def _drain_twice(a):
    finished_tasks(a, 1)
    drain(a)
    return drain(a)


def _cancels_racing_finishes(a):
    """Whether every cancel racing a finish agreed with the status the task ended with."""
    agreed = []
    for _ in range(20):
        t = start(a)
        cancelled, finished = _together(lambda t=t: cancel(a, t), lambda t=t: finish(a, t))
        agreed.append(cancelled == (finished["status"] == "canceled"))
    return all(agreed)


def _drains_racing(a):
    """How many outcomes two racing drains hand out together, one task finished before each race."""
    handed_out = []
    for _ in range(10):
        finish(a, start(a))
        first, second = _together(lambda: drain(a), lambda: drain(a))
        handed_out.append(len(first) + len(second))
    return handed_out


def _drain_after_eviction(a):
    finished_tasks(a, 65)
    return len(drain(a))


def _wait_after_signal(a):
    finished_tasks(a, 1)
    return wait(a, 100)


def _wait_idle_then_signal(a):
    wait(a, 1)  # nothing is due: it waits its whole time, unwoken
    finish(a, start(a))  # the one outcome stores a wake-up permit...
    return wait(a, 100)  # ...which this wait takes at once


def _count_finished_kept(a):
    finished_tasks(a, 65)
    return len(ids(a))


def _running_then_full(a):
    t = start(a)
    finished_tasks(a, 64)
    return job(a, t)


def _which_evicted(a):
    finished_tasks(a, 65)
    return ids(a)


def _list_ten(a):
    for _ in range(10):
        start(a)
    return ids(a)


def _finish_order(a):
    start(a, duration_ms=5)
    start(a, duration_ms=3)
    a.set_clock(10)
    return drained_ids(a)


def _finished_at_one_instant(a):
    first, second = start(a), start(a)
    finish(a, second)
    finish(a, first)  # at the same instant: drained second, then first
    return drained_ids(a)


SCENARIOS = {
    "cancel_flips_status_early": _cancel_then_look,
    "status_from_body_result": _cancel_ignored_then_finish,
    "cancel_finished_true": _cancel_finished,
    "cancel_check_then_act": _cancels_racing_finishes,
    "cancel_all_misses_later_tasks": _spawn_after_cancel_all,
    "canceled_not_queued": _drain_canceled,
    "drain_keeps_queue": _drain_twice,
    "drain_copy_then_clear": _drains_racing,
    "eviction_drops_outcome": _drain_after_eviction,
    "lost_wakeup": _wait_after_signal,
    "idle_wait_stays_enrolled": _wait_idle_then_signal,
    "keeps_65_finished": _count_finished_kept,
    "evicts_running": _running_then_full,
    "evicts_newest": _which_evicted,
    "numeric_sort": _list_ten,
    "fires_in_start_order": _finish_order,
    "outcome_ties_by_id": _finished_at_one_instant,
}


def test_every_mutant_has_a_scenario():
    assert len(MUTANTS) >= 9 and set(MUTANTS) == set(SCENARIOS)
    for name, m in MUTANTS.items():
        assert isinstance(m, Mutant) and m.name == name and m.description


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_mutant_misbehaves(name):
    scenario = SCENARIOS[name]
    assert observe(MUTANTS[name].factory, scenario) != observe(TaskTableAdapter, scenario)


def _baseline(a):
    """A sequence that avoids every mutant's trigger: all must agree on it."""
    out = [a.describe()]

    def call(op, **args):
        response = a.call(op, args)
        out.append(response)
        return response.get("result")

    quick = call("start_job", label="quick", duration_ms=10, text="q")["job_id"]
    slow = call("start_job", label="slow", duration_ms=30, outcome="failed", text="e")["job_id"]
    played = call("start_job", label="played")["job_id"]
    call("wait_for_completion", wait_ms=100)  # woken by quick at 10
    call("finish_job", job_id=played, outcome="completed", text="p")
    call("finish_job", job_id=played, outcome="failed", text="again")
    out.append(a.set_clock(40))
    call("has_completed")
    call("drain_completed")
    stopper = call("start_job", label="stopper", stop_ms=5)["job_id"]
    call("cancel_task", job_id=stopper)
    call("cancel_task", job_id="bg-99")
    out.append(a.set_clock(45))
    call("running_count")
    call("get_job", job_id=quick)
    call("get_job", job_id=slow)
    call("list_jobs")
    call("cancel_all")
    call("cancel_all")
    call("running_count")
    return out


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutant_is_otherwise_faithful(name):
    assert observe(MUTANTS[name].factory, _baseline) == observe(TaskTableAdapter, _baseline)
