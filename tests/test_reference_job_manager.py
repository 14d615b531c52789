"""The reference job-manager runtime, checked against its contract
(docs/async-jobs-contract.md, job-manager profile) through call() and
set_clock(), and every mutant shown to misbehave on a concrete call sequence."""

from __future__ import annotations

import functools
import threading

import pytest
from reference_calls import err, observe, ok

from lifecycle_references.job_manager import JobManagerAdapter
from lifecycle_references.job_manager.mutants import MUTANTS, Mutant

__all__: list[str] = []

LIMIT = "Background job limit reached (15). Wait for running jobs to finish or cancel one."


# ------------------------------------------------------------------ helpers


@pytest.fixture
def adapter():
    a = JobManagerAdapter()
    yield a
    a.close()


def start(a, label="job", **plan):
    return ok(a, "start_job", label=label, **plan)[0]["job_id"]


def job(a, job_id):
    return ok(a, "get_job", job_id=job_id)[0]["job"]


def status(a, job_id):
    snapshot = job(a, job_id)
    return None if snapshot is None else snapshot["status"]


def tool(a, **args):
    return ok(a, "job_tool", **args)


def ids(jobs):
    return [j["job_id"] for j in jobs]


def delivered(job_id, text="", status="completed"):
    return {"effect": "delivered", "job_id": job_id, "status": status, "text": text}


def refused(job_id, attempt):
    return {"effect": "delivery_failed", "job_id": job_id, "attempt": attempt}


# ----------------------------------------------------------- describe, args


def test_describe_declares_profile_parameters_and_concurrency():
    d = JobManagerAdapter(max_running="3", retention_ms="0", msg_unknown_job="nope {job_id}").describe()
    assert d["name"] == "reference-job-manager" and d["version"] == "1.0.0"
    assert d["profile"] == "job-manager" and d["capabilities"] == {"concurrent": True}
    # Only the values set on purpose are declared; the rest are the spec's defaults.
    assert d["parameters"] == {"max_running": 3, "retention_ms": 0, "msg_unknown_job": "nope {job_id}"}
    assert JobManagerAdapter().describe()["parameters"] == {}


def test_bad_parameters_are_refused():
    with pytest.raises(TypeError):
        JobManagerAdapter(max_jobs=3)
    with pytest.raises(ValueError):
        JobManagerAdapter(max_running="0")
    with pytest.raises(ValueError):
        JobManagerAdapter(retention_ms="-2")


def test_bad_arguments_and_unknown_operations_are_errors_not_exceptions(adapter):
    assert err(adapter, "start_job")[0] == "invalid_arguments"
    assert err(adapter, "start_job", label="x", type="python")[0] == "invalid_arguments"
    assert err(adapter, "start_job", label="x", duration_ms=0)[0] == "invalid_arguments"
    assert err(adapter, "start_job", label="x", stop_ms="5")[0] == "invalid_arguments"
    assert err(adapter, "start_job", label="x", outcome="cancelled")[0] == "invalid_arguments"
    assert err(adapter, "finish_job", job_id="bg_1")[0] == "invalid_arguments"
    assert err(adapter, "job_tool", wait_ms=1234)[0] == "invalid_arguments"
    assert err(adapter, "job_tool", poll="bg_1")[0] == "invalid_arguments"
    assert err(adapter, "set_delivery", accept="yes")[0] == "invalid_arguments"
    assert adapter.call("start_job", [1])["error"]["kind"] == "invalid_arguments"
    assert err(adapter, "retry_job", job_id="bg_1")[0] == "unknown_operation"
    assert ok(adapter, "list_jobs")[0] == {"jobs": []}  # nothing was created by the bad calls


# ------------------------------------------------------------------- start


def test_start_returns_running_and_a_snapshot(adapter):
    assert ok(adapter, "start_job", label="npm test", type="task") == ({"job_id": "bg_1", "status": "running"}, [])
    assert job(adapter, "bg_1") == {
        "job_id": "bg_1",
        "type": "task",
        "label": "npm test",
        "status": "running",
        "result_text": None,
        "error_text": None,
    }
    assert job(adapter, "bg_1")["type"] == "task" and job(adapter, start(adapter))["type"] == "bash"
    assert ok(adapter, "get_job", job_id="nope")[0] == {"job": None}


def test_cap_exactly_reached_and_one_over(adapter):
    jobs = [start(adapter) for _ in range(15)]
    assert jobs == [f"bg_{n}" for n in range(1, 16)]
    assert err(adapter, "start_job", label="x") == ("limit_reached", LIMIT)
    assert len(ok(adapter, "list_jobs")[0]["jobs"]) == 15  # nothing queued, nothing changed
    ok(adapter, "finish_job", job_id="bg_4", outcome="completed", text="")
    assert start(adapter) == "bg_16"
    assert err(adapter, "start_job", label="x")[0] == "limit_reached"
    # a cancelled job whose body still runs does not count
    tool(adapter, cancel=["bg_1"])
    assert start(adapter) == "bg_17"


def test_cap_parameter_and_message(adapter):
    a = JobManagerAdapter(max_running=2)
    start(a), start(a)
    assert err(a, "start_job", label="x") == (
        "limit_reached",
        "Background job limit reached (2). Wait for running jobs to finish or cancel one.",
    )


# --------------------------------------------------------------------- ids


def test_generated_ids_take_the_smallest_free_number(adapter):
    a = JobManagerAdapter(retention_ms=1000)
    for _ in range(3):
        start(a)
    ok(a, "finish_job", job_id="bg_2", outcome="completed", text="")
    a.set_clock(999)
    assert status(a, "bg_2") == "completed" and start(a) == "bg_4"
    a.set_clock(1000)
    assert job(a, "bg_2") is None
    assert start(a) == "bg_2"  # reused after eviction
    assert start(a, id="bg_5") == "bg_5" and start(a) == "bg_6"


def test_preferred_ids_are_trimmed_and_suffixed_from_two(adapter):
    assert start(adapter, id="  build ") == "build"
    assert start(adapter, id="build") == "build-2"
    assert start(adapter, id="build") == "build-3"
    assert start(adapter, id="   ") == "bg_1"  # empty after trimming: no preferred id
    assert start(adapter, id="build-5") == "build-5"
    tool(adapter, cancel=["build-2"])
    ok(adapter, "finish_job", job_id="build-2", outcome="completed", text="")
    assert start(adapter, id="build") == "build-4"  # build-2 still exists (cancelled)


def test_reused_id_starts_with_clean_delivery_flags():
    a = JobManagerAdapter(retention_ms=1000)
    j = start(a, duration_ms=10)
    ok(a, "set_delivery", accept=False)
    assert a.set_clock(10) == [refused(j, 1)]
    tool(a, list=True)  # acknowledged: its retry is dropped
    ok(a, "set_delivery", accept=True)
    assert a.set_clock(1010) == []
    assert job(a, j) is None
    assert start(a, duration_ms=5, text="again") == j
    assert a.set_clock(1015) == [delivered(j, "again")]


# ------------------------------------------------------------------ finish


def test_finish_job_completes_or_fails_and_reports_returned(adapter):
    a, b = start(adapter), start(adapter)
    assert ok(adapter, "finish_job", job_id=a, outcome="completed", text="ok") == (
        {"job_id": a, "status": "completed", "returned": True},
        [delivered(a, "ok")],
    )
    assert ok(adapter, "finish_job", job_id=b, outcome="failed", text="boom") == (
        {"job_id": b, "status": "failed", "returned": True},
        [delivered(b, "boom", "failed")],
    )
    assert job(adapter, a)["result_text"] == "ok" and job(adapter, a)["error_text"] is None
    assert job(adapter, b)["error_text"] == "boom" and job(adapter, b)["result_text"] is None
    assert ok(adapter, "finish_job", job_id=a, outcome="failed", text="late") == (
        {"job_id": a, "status": "completed", "returned": False},
        [],
    )
    assert job(adapter, a)["result_text"] == "ok"
    assert err(adapter, "finish_job", job_id="bg_9", outcome="completed", text="") == (
        "not_found",
        "Job not found: bg_9",
    )


def test_timed_body_returns_at_its_instant(adapter):
    j = start(adapter, duration_ms=1000, outcome="failed", text="exit 1")
    assert adapter.set_clock(999) == [] and status(adapter, j) == "running"
    assert adapter.set_clock(1000) == [delivered(j, "exit 1", "failed")]
    assert ok(adapter, "finish_job", job_id=j, outcome="completed", text="x")[0]["returned"] is False


def test_bodies_returning_together_complete_in_start_order(adapter):
    adapter.reset(0)
    late = start(adapter, duration_ms=300, text="late")
    early = start(adapter, duration_ms=200, text="early")
    first = start(adapter, text="first", stop_ms=100)  # cancelled at 200: returns at 300 too
    adapter.set_clock(100)
    second = start(adapter, duration_ms=200, text="second")
    assert adapter.set_clock(200) == [delivered(early, "early")]
    tool(adapter, cancel=[first])
    assert adapter.set_clock(300) == [delivered(late, "late"), delivered(second, "second")]
    assert job(adapter, first)["result_text"] == "first"


# ------------------------------------------------------------------ cancel


def test_cancel_results_per_id_in_given_order(adapter):
    a, b, c = start(adapter), start(adapter), start(adapter)
    ok(adapter, "finish_job", job_id=b, outcome="completed", text="done")
    result, effects = tool(adapter, cancel=[a, "ghost", b, a, c])
    assert result["cancelled"] == [
        {"id": a, "status": "cancelled"},
        {"id": "ghost", "status": "not_found"},
        {"id": b, "status": "already_completed"},
        {"id": a, "status": "already_completed"},
        {"id": c, "status": "cancelled"},
    ]
    assert effects == [{"effect": "abort_signalled", "job_id": a}, {"effect": "abort_signalled", "job_id": c}]
    assert ids(result["jobs"]) == [a, b, c] and result["message"] is None and result["waited_ms"] == 0
    assert [j["status"] for j in result["jobs"]] == ["cancelled", "completed", "cancelled"]


def test_cancel_is_sticky_and_keeps_the_text(adapter):
    a, b = start(adapter), start(adapter)
    tool(adapter, cancel=[a, b])
    assert ok(adapter, "finish_job", job_id=a, outcome="completed", text="partial") == (
        {"job_id": a, "status": "cancelled", "returned": True},
        [],
    )
    assert ok(adapter, "finish_job", job_id=b, outcome="failed", text="killed") == (
        {"job_id": b, "status": "cancelled", "returned": True},
        [],
    )
    assert job(adapter, a)["result_text"] == "partial" and job(adapter, a)["error_text"] is None
    assert job(adapter, b)["error_text"] == "killed" and job(adapter, b)["result_text"] is None
    assert tool(adapter, cancel=[a])[0]["cancelled"] == [{"id": a, "status": "already_completed"}]


def test_body_with_stop_ms_returns_after_the_abort(adapter):
    j = start(adapter, stop_ms=250, text="stopped", duration_ms=10000)
    adapter.set_clock(1000)
    assert tool(adapter, cancel=[j])[1] == [{"effect": "abort_signalled", "job_id": j}]
    assert adapter.set_clock(1249) == [] and job(adapter, j)["result_text"] is None
    assert adapter.set_clock(1250) == []  # never delivered
    assert job(adapter, j)["status"] == "cancelled" and job(adapter, j)["result_text"] == "stopped"


# --------------------------------------------------------------- retention


def test_retention_boundary_299999_and_300000(adapter):
    j = start(adapter, duration_ms=1000)
    adapter.set_clock(300999)
    assert status(adapter, j) == "completed"
    adapter.set_clock(301000)
    assert job(adapter, j) is None
    assert ok(adapter, "list_jobs")[0] == {"jobs": []}
    assert err(adapter, "finish_job", job_id=j, outcome="completed", text="")[0] == "not_found"
    assert tool(adapter, cancel=[j])[0]["cancelled"] == [{"id": j, "status": "not_found"}]


def test_cancelled_retention_restarts_when_the_body_returns(adapter):
    j = start(adapter, stop_ms=100000)
    tool(adapter, cancel=[j])  # at 0: eviction due at 300000, body returns at 100000
    adapter.set_clock(300000)
    assert status(adapter, j) == "cancelled"
    adapter.set_clock(399999)
    assert status(adapter, j) == "cancelled"
    adapter.set_clock(400000)
    assert job(adapter, j) is None


def test_late_body_of_an_evicted_job_changes_nothing():
    a = JobManagerAdapter(retention_ms=1000)
    j = start(a, stop_ms=5000, text="old")
    tool(a, cancel=[j])
    a.set_clock(1000)
    assert job(a, j) is None
    assert start(a, text="new") == j  # the id is free again
    assert a.set_clock(5000) == []
    assert job(a, j)["status"] == "running" and job(a, j)["result_text"] is None


def test_retention_zero_evicts_at_once():
    a = JobManagerAdapter(retention_ms=0)
    j = start(a)
    assert ok(a, "finish_job", job_id=j, outcome="completed", text="r") == (
        {"job_id": j, "status": "completed", "returned": True},
        [delivered(j, "r")],
    )
    assert job(a, j) is None
    k = start(a)
    assert k == j
    tool(a, cancel=[k])
    assert job(a, k) is None


# ---------------------------------------------------------------- delivery


def test_each_completion_is_delivered_once(adapter):
    j = start(adapter, duration_ms=5, text="out")
    assert adapter.set_clock(5) == [delivered(j, "out")]
    assert adapter.set_clock(100000) == []
    result, effects = tool(adapter, list=True)
    assert effects == [] and ids(result["jobs"]) == [j]


def test_retry_backoff_from_the_instant_each_retry_ran(adapter):
    ok(adapter, "set_delivery", accept=False)
    j = start(adapter, duration_ms=100)
    # 100 fails, retry at 600, then 1600, then 3600: each from the retry's own instant
    assert adapter.set_clock(2000) == [refused(j, 1), refused(j, 2), refused(j, 3)]
    assert adapter.set_clock(3599) == []
    assert adapter.set_clock(3600) == [refused(j, 4)]
    ok(adapter, "set_delivery", accept=True)
    assert adapter.set_clock(7599) == []
    assert adapter.set_clock(7600) == [delivered(j)]


def test_retry_delays_500_1000_2000_and_the_cap(adapter):
    ok(adapter, "set_delivery", accept=False)
    j = start(adapter)
    assert ok(adapter, "finish_job", job_id=j, outcome="completed", text="")[1] == [refused(j, 1)]
    instants = [0]
    now = 0
    for _ in range(12):
        step = 1
        while True:
            effects = adapter.set_clock(now + step)
            if effects:
                break
            step += 1
        now += step
        instants.append(now)
    gaps = [b - a for a, b in zip(instants, instants[1:])]
    assert gaps == [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000, 30000, 30000, 30000]


def test_retry_jitter_and_max_doublings_parameters():
    a = JobManagerAdapter(retry_jitter_ms="150", retry_max_doublings="1", retry_max_ms="100000")
    ok(a, "set_delivery", accept=False)
    j = start(a, duration_ms=1)
    assert a.set_clock(1) == [refused(j, 1)]
    assert a.set_clock(651) == [refused(j, 2)]  # 500 + 150
    assert a.set_clock(1800) == [] and a.set_clock(1801) == [refused(j, 3)]  # 1000 + 150
    assert a.set_clock(2951) == [refused(j, 4)]  # doublings capped at 1


def test_a_waiting_head_blocks_the_queue(adapter):
    ok(adapter, "set_delivery", accept=False)
    a = start(adapter, duration_ms=100)
    b = start(adapter, duration_ms=200)
    assert adapter.set_clock(200) == [refused(a, 1)]  # b waits behind a (due at 600)
    ok(adapter, "set_delivery", accept=True)
    assert adapter.set_clock(600) == [delivered(a), delivered(b)]


def test_bodies_returning_together_settle_before_the_queue_is_worked(adapter):
    ok(adapter, "set_delivery", accept=False)
    a = start(adapter, duration_ms=1)
    b = start(adapter, duration_ms=1)
    # both are queued before the first attempt, so a's failure does not block b
    assert adapter.set_clock(1) == [refused(a, 1), refused(b, 1)]
    assert adapter.set_clock(501) == [refused(a, 2), refused(b, 2)]


def test_acknowledging_a_waiting_head_unblocks_the_queue_at_once(adapter):
    ok(adapter, "set_delivery", accept=False)
    a, b = start(adapter), start(adapter)
    assert ok(adapter, "finish_job", job_id=a, outcome="completed", text="")[1] == [refused(a, 1)]
    adapter.set_clock(100)
    assert ok(adapter, "finish_job", job_id=b, outcome="completed", text="")[1] == []  # behind a (500)
    adapter.set_clock(200)
    # a is reported and acknowledged; b, due since 100, is attempted before the call returns
    assert tool(adapter, poll=[a])[1] == [refused(b, 1)]
    assert adapter.set_clock(699) == [] and adapter.set_clock(700) == [refused(b, 2)]


def test_retention_never_with_minus_one():
    a = JobManagerAdapter(retention_ms=-1)
    j = start(a, duration_ms=1)
    a.set_clock(10**8)
    assert status(a, j) == "completed"


def test_suppressed_while_watched(adapter):
    w = start(adapter, duration_ms=1000, text="watched")
    o = start(adapter, duration_ms=500, text="other")
    result, effects = tool(adapter, poll=[w])
    assert effects == [delivered(o, "other")]  # others are delivered on the way
    assert result["waited_ms"] == 1000 and ids(result["jobs"]) == [w]
    assert result["jobs"][0]["status"] == "completed" and result["jobs"][0]["result_text"] == "watched"
    assert adapter.set_clock(400000) == []  # acknowledged: never delivered


def test_acknowledgement_removes_a_queued_delivery(adapter):
    ok(adapter, "set_delivery", accept=False)
    j = start(adapter, duration_ms=10)
    assert adapter.set_clock(10) == [refused(j, 1)]
    result, effects = tool(adapter, poll=[j])  # already settled: returns now, acknowledges
    assert effects == [] and result["waited_ms"] == 0 and result["jobs"][0]["status"] == "completed"
    ok(adapter, "set_delivery", accept=True)
    assert adapter.set_clock(100000) == []


def test_list_acknowledges_but_list_jobs_does_not(adapter):
    ok(adapter, "set_delivery", accept=False)
    a = start(adapter, duration_ms=10)
    b = start(adapter, duration_ms=10)
    assert adapter.set_clock(10) == [refused(a, 1), refused(b, 1)]
    ok(adapter, "list_jobs")
    ok(adapter, "set_delivery", accept=True)
    assert adapter.set_clock(510) == [delivered(a), delivered(b)]  # list_jobs acknowledged nothing
    c = start(adapter, duration_ms=10)
    ok(adapter, "set_delivery", accept=False)
    assert adapter.set_clock(520) == [refused(c, 1)]
    running = start(adapter)
    result, _ = tool(adapter, list=True)
    assert ids(result["jobs"]) == [a, b, c, running]  # registration order
    assert result["message"] is None and result["cancelled"] is None and result["waited_ms"] == 0
    ok(adapter, "set_delivery", accept=True)
    assert adapter.set_clock(5000) == []
    assert ok(adapter, "finish_job", job_id=running, outcome="completed", text="")[1] == [delivered(running)]


# -------------------------------------------------------------------- poll


def test_poll_waits_for_the_first_watched_job(adapter):
    a = start(adapter, duration_ms=3000)
    b = start(adapter, duration_ms=1000)
    c = start(adapter)
    result, effects = tool(adapter)  # no args: watch every running job
    assert result["waited_ms"] == 1000 and effects == []
    assert ids(result["jobs"]) == [a, b, c]
    assert [j["status"] for j in result["jobs"]] == ["running", "completed", "running"]
    # the implementation's clock moved: the kit continues from 1000
    assert adapter.set_clock(3000) == [delivered(a)]


def test_poll_timeout_returns_a_snapshot(adapter):
    j = start(adapter)
    result, effects = tool(adapter, poll=[j], wait_ms=5000)
    assert result == {
        "message": None,
        "cancelled": None,
        "waited_ms": 5000,
        "jobs": [
            {"job_id": j, "type": "bash", "label": "job", "status": "running", "result_text": None, "error_text": None}
        ],
    }
    assert tool(adapter, poll=[j])[0]["waited_ms"] == 30000  # the default wait


def test_poll_default_wait_is_a_parameter():
    a = JobManagerAdapter(poll_wait_ms=10000)
    start(a)
    assert tool(a)[0]["waited_ms"] == 10000


def test_poll_cancels_first_then_watches(adapter):
    a = start(adapter, stop_ms=10)
    b = start(adapter, duration_ms=2000)
    result, effects = tool(adapter, cancel=[a], poll=[a, b])
    assert effects == [{"effect": "abort_signalled", "job_id": a}]
    assert result["waited_ms"] == 2000 and result["cancelled"] == [{"id": a, "status": "cancelled"}]
    assert ids(result["jobs"]) == [a, b]
    assert job(adapter, a)["status"] == "cancelled" and job(adapter, a)["result_text"] == ""


def test_poll_of_only_settled_jobs_returns_at_once(adapter):
    a = start(adapter)
    tool(adapter, cancel=[a])
    result, _ = tool(adapter, poll=[a, a])
    assert result["waited_ms"] == 0 and ids(result["jobs"]) == [a]


def test_poll_drops_missing_ids(adapter):
    a = start(adapter, duration_ms=700)
    result, _ = tool(adapter, poll=["ghost", a, a])
    assert ids(result["jobs"]) == [a] and result["waited_ms"] == 700 and result["message"] is None


def test_poll_messages(adapter):
    assert tool(adapter)[0] == {
        "message": "No running background jobs to wait for.",
        "cancelled": None,
        "jobs": [],
        "waited_ms": 0,
    }
    assert tool(adapter, poll=["a", "b", "a"])[0] == {
        "message": "No matching jobs found for IDs: a, b, a",
        "cancelled": None,
        "jobs": [],
        "waited_ms": 0,
    }
    assert tool(adapter, poll=[], cancel=[])[0]["message"] == "No running background jobs to wait for."
    done = start(adapter)
    ok(adapter, "finish_job", job_id=done, outcome="completed", text="")
    assert tool(adapter)[0]["message"] == "No running background jobs to wait for."
    # with cancel given, an empty watch set reports the cancel ids instead
    result, _ = tool(adapter, poll=["ghost"], cancel=["ghost", done])
    assert result["message"] is None and ids(result["jobs"]) == [done]
    assert result["cancelled"] == [{"id": "ghost", "status": "not_found"}, {"id": done, "status": "already_completed"}]


def test_list_cannot_be_combined(adapter):
    j = start(adapter)
    message = "list cannot be combined with poll or cancel"
    assert err(adapter, "job_tool", list=True, poll=[j]) == ("invalid_arguments", message)
    assert err(adapter, "job_tool", list=True, cancel=[j]) == ("invalid_arguments", message)
    assert status(adapter, j) == "running"  # the cancel did not happen
    assert ids(tool(adapter, list=True, poll=[], cancel=[])[0]["jobs"]) == [j]


def test_list_jobs_sorts_by_id_as_a_string(adapter):
    for _ in range(10):
        start(adapter)
    start(adapter, id="alpha")
    assert ids(ok(adapter, "list_jobs")[0]["jobs"]) == (["alpha", "bg_1", "bg_10"] + [f"bg_{n}" for n in range(2, 10)])


def test_reset_forgets_everything(adapter):
    start(adapter, duration_ms=10)
    ok(adapter, "set_delivery", accept=False)
    adapter.reset(5000)
    assert ok(adapter, "list_jobs")[0] == {"jobs": []}
    j = start(adapter, duration_ms=10)
    assert j == "bg_1" and adapter.set_clock(5010) == [delivered(j)]


# ------------------------------------------------------------- concurrency


def test_concurrent_calls_do_not_corrupt_state(adapter):
    adapter.reset(0)
    barrier = threading.Barrier(8)
    answers: list[dict] = []
    lock = threading.Lock()

    def worker(n):
        barrier.wait()
        for i in range(10):
            response = adapter.call("start_job", {"label": f"w{n}", "id": "race" if i % 2 else None})
            with lock:
                answers.append(response)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    started = [r["result"]["job_id"] for r in answers if "result" in r]
    limited = [r for r in answers if "error" in r]
    assert len(started) == 15 and len(set(started)) == 15  # the cap holds, ids are unique
    assert len(limited) == 65 and all(r["error"]["kind"] == "limit_reached" for r in limited)
    assert sorted(ids(ok(adapter, "list_jobs")[0]["jobs"])) == sorted(started)


def test_concurrent_cancels_signal_each_job_once(adapter):
    jobs = [start(adapter) for _ in range(10)]
    barrier = threading.Barrier(4)
    effects: list[dict] = []
    lock = threading.Lock()

    def worker():
        barrier.wait()
        for j in jobs:
            response = adapter.call("job_tool", {"cancel": [j]})
            with lock:
                effects.extend(response["effects"])

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(e["job_id"] for e in effects) == sorted(jobs)


# ------------------------------------------------------------------ mutants
# Each returns what it observed; a mutant must observe something else.


def _cap(a):
    for _ in range(15):
        start(a)
    return a.call("start_job", {"label": "x"})


def _cap_one_below(a):
    for _ in range(14):
        start(a)
    return a.call("start_job", {"label": "x"})


def _cap_with_cancelled(a):
    first = start(a)
    for _ in range(14):
        start(a)
    tool(a, cancel=[first])
    return a.call("start_job", {"label": "x"})


def _id_reuse(a):
    j = start(a)
    ok(a, "finish_job", job_id=j, outcome="completed", text="")
    a.set_clock(300000)
    return start(a)


def _suffix(a):
    return [start(a, id="build") for _ in range(3)]


def _generated_after_preferred(a):
    start(a, id="bg_1")
    return start(a)


def _preferred_of_finished(a):
    j = start(a, id="build")
    ok(a, "finish_job", job_id=j, outcome="completed", text="")
    return start(a, id="build")


def _suffix_after_preferred(a):
    return [start(a, id=i) for i in ("build", "build-2", "build")]


def _sticky(a):
    j = start(a)
    tool(a, cancel=[j])
    return ok(a, "finish_job", job_id=j, outcome="completed", text="r"), job(a, j)


def _cancel_delivered(a):
    j = start(a)
    return tool(a, cancel=[j])[1], a.set_clock(1000)


def _watched(a):
    w = start(a, duration_ms=1000)
    return tool(a, poll=[w])[1], a.set_clock(2000)


def _list_ack(a):
    ok(a, "set_delivery", accept=False)
    start(a, duration_ms=10)
    a.set_clock(10)
    tool(a, list=True)
    ok(a, "set_delivery", accept=True)
    return a.set_clock(10000)


def _poll_ack(a):
    ok(a, "set_delivery", accept=False)
    j = start(a, duration_ms=10)
    a.set_clock(10)
    tool(a, poll=[j])
    ok(a, "set_delivery", accept=True)
    return a.set_clock(10000)


def _eviction(a):
    j = start(a, duration_ms=1000)
    a.set_clock(300999)
    before = status(a, j)
    a.set_clock(301000)
    return before, status(a, j)


def _retry_target(a):
    ok(a, "set_delivery", accept=False)
    start(a, duration_ms=100)
    return a.set_clock(2000)


def _first_retry(a):
    ok(a, "set_delivery", accept=False)
    start(a, duration_ms=100)
    return a.set_clock(600)


def _backoff(a):
    ok(a, "set_delivery", accept=False)
    start(a)
    ok(a, "finish_job", job_id="bg_1", outcome="completed", text="")
    return a.set_clock(2500)


def _ack_wakes(a):
    ok(a, "set_delivery", accept=False)
    first, second = start(a), start(a)
    ok(a, "finish_job", job_id=first, outcome="completed", text="one")
    ok(a, "finish_job", job_id=second, outcome="completed", text="two")
    ok(a, "set_delivery", accept=True)
    return tool(a, poll=[first])[1]


def _evicted_delivery(a):
    ok(a, "set_delivery", accept=False)
    j = start(a)
    ok(a, "finish_job", job_id=j, outcome="completed", text="A")
    a.set_clock(300000)
    ok(a, "set_delivery", accept=True)
    return a.set_clock(400000)


def _late_body(a):
    j = start(a, duration_ms=300010)
    tool(a, cancel=[j])
    a.set_clock(300000)
    start(a)
    a.set_clock(600010)
    return status(a, j)


def _natural_end_before_stop(a):
    """A job that runs 500 ms, and stops 5000 ms after a cancel, is cancelled
    at once: its body returns at 500 ms and its text is kept."""
    j = start(a, duration_ms=500, stop_ms=5000, text="done")
    tool(a, cancel=[j])
    a.set_clock(500)
    return job(a, j)["result_text"]


def _same_instant_ends(a):
    """Two bodies due at the same instant, the first under an id that sorts
    after the second's: their deliveries come in start order."""
    start(a, id="build", duration_ms=1)
    start(a, id="bg_1", duration_ms=1)
    return [e.get("job_id") for e in a.set_clock(1)]


def _cancelled_evicted_in_wait(a):
    """The tool cancels a running job and waits on another past retention:
    the cancelled job is evicted as the wait ends and left out of the report."""
    j, keeper = start(a), start(a)
    return ids(tool(a, cancel=[j], poll=[keeper], wait_ms=300000)[0]["jobs"])


# ------------------------------------- oh-my-pi 18.x's rules (profile oh-my-pi-18)
def _preferred_under_counter(a):
    return start(a, id="build")


def _consumed_evicted(a):
    x = start(a)
    ok(a, "finish_job", job_id=x, outcome="completed", text="t")
    a.set_clock(30000)
    return job(a, x)


def _due_now_not_held_back(a):
    ok(a, "set_delivery", accept=False)
    first, second = start(a), start(a)
    ok(a, "finish_job", job_id=first, outcome="completed", text="one")
    ok(a, "set_delivery", accept=True)
    a.set_clock(1)
    return ok(a, "finish_job", job_id=second, outcome="completed", text="two")[1]


def _cancel_keeps_until_return(a):
    x = start(a)
    ok(a, "cancel_jobs", ids=[x])
    a.set_clock(300000)
    return status(a, x)


def _consumed_text_left_out(a):
    x = start(a)
    ok(a, "finish_job", job_id=x, outcome="completed", text="t")
    return ok(a, "cancel_jobs", ids=[x])[0]["jobs"][0]["result_text"]


def _wait_returns_undelivered(a):
    ok(a, "set_delivery", accept=False)
    x = start(a)
    ok(a, "finish_job", job_id=x, outcome="completed", text="t")
    result = ok(a, "wait_tool")[0]
    return result["message"], ids(result["jobs"])


def _last_attempt_with_reused_id(a):
    ok(a, "set_delivery", accept=False)
    start(a, id="x")
    ok(a, "finish_job", job_id="x", outcome="failed", text="A")
    a.set_clock(300000)
    start(a, id="x")
    return a.set_clock(360000)


# ------------------------------------- values beyond the pools (async-jobs 2.3.0)
def _preferred_ids_exact(a):
    """A preferred id in another case is another id: BUILD is free while build runs."""
    start(a, id="build")
    return start(a, id="BUILD")


def _label_kept_as_given(a):
    """A label comes back code point for code point: a decomposed accent stays decomposed."""
    return job(a, start(a, label="builde\u0301"))["label"]


SCENARIOS = {
    "preferred_ids_ignore_case": _preferred_ids_exact,
    "label_normalised_nfc": _label_kept_as_given,
    "counter_ignores_preferred": _preferred_under_counter,
    "consumed_keeps_retention": _consumed_evicted,
    "due_time_in_queue_order": _due_now_not_held_back,
    "cancel_arms_eviction": _cancel_keeps_until_return,
    "consumed_text_shown": _consumed_text_left_out,
    "wait_skips_undelivered": _wait_returns_undelivered,
    "last_attempt_follows_id": _last_attempt_with_reused_id,
    "cancel_report_outlives_eviction": _cancelled_evicted_in_wait,
    "stop_delay_ignores_earlier_end": _natural_end_before_stop,
    "ties_by_job_id": _same_instant_ends,
    "ack_does_not_wake": _ack_wakes,
    "evicted_still_delivered": _evicted_delivery,
    "late_body_reschedules_eviction": _late_body,
    "cap_off_by_one": _cap,
    "over_cap_accepted": _cap,
    "cap_counts_new_job": _cap_one_below,
    "cancelled_count_as_running": _cap_with_cancelled,
    "ids_from_counter": _id_reuse,
    "suffix_starts_at_one": _suffix,
    "generated_id_skips_own_only": _generated_after_preferred,
    "preferred_id_checks_running_only": _preferred_of_finished,
    "suffix_per_name_counter": _suffix_after_preferred,
    "cancel_not_sticky": _sticky,
    "cancelled_delivered": _cancel_delivered,
    "watch_not_suppressing": _watched,
    "retry_from_clock_target": _retry_target,
    "first_retry_doubled": _first_retry,
    "backoff_not_doubling": _backoff,
    "list_not_acknowledging": _list_ack,
    "poll_not_acknowledging": _poll_ack,
    "eviction_one_ms_late": _eviction,
    "eviction_one_ms_early": _eviction,
    "eviction_from_start": _eviction,
}

# What the reference observes on each scenario (the contract's answer).
EXPECTED = {
    _cap: {"error": {"kind": "limit_reached", "message": LIMIT}, "effects": []},
    _cap_one_below: {"result": {"job_id": "bg_15", "status": "running"}, "effects": []},
    _cap_with_cancelled: {"result": {"job_id": "bg_16", "status": "running"}, "effects": []},
    _id_reuse: "bg_1",
    _suffix: ["build", "build-2", "build-3"],
    _generated_after_preferred: "bg_2",
    _preferred_of_finished: "build-2",
    _suffix_after_preferred: ["build", "build-2", "build-3"],
    _sticky: (
        ({"job_id": "bg_1", "status": "cancelled", "returned": True}, []),
        {
            "job_id": "bg_1",
            "type": "bash",
            "label": "job",
            "status": "cancelled",
            "result_text": "r",
            "error_text": None,
        },
    ),
    _watched: ([], []),
    _cancel_delivered: ([{"effect": "abort_signalled", "job_id": "bg_1"}], []),
    _list_ack: [],
    _poll_ack: [],
    _eviction: ("completed", None),
    _retry_target: [refused("bg_1", 1), refused("bg_1", 2), refused("bg_1", 3)],
    _first_retry: [refused("bg_1", 1), refused("bg_1", 2)],
    _backoff: [refused("bg_1", 2), refused("bg_1", 3)],
    _ack_wakes: [{"effect": "delivered", "job_id": "bg_2", "status": "completed", "text": "two"}],
    _evicted_delivery: [],
    _late_body: "running",
    _cancelled_evicted_in_wait: ["bg_2"],
}


def test_every_mutant_has_a_scenario():
    assert len(MUTANTS) >= 9 and set(MUTANTS) == set(SCENARIOS)
    for name, m in MUTANTS.items():
        assert isinstance(m, Mutant) and m.name == name and m.description.endswith(".")


@pytest.mark.parametrize("scenario", sorted(EXPECTED, key=lambda f: f.__name__), ids=lambda f: f.__name__)
def test_reference_answers_each_mutant_scenario_as_the_contract_says(scenario):
    assert observe(JobManagerAdapter, scenario) == EXPECTED[scenario]


def _reference_of(factory):
    """The reference under the profile the mutant describes by default (a mutant of a
    profile's own rule offers that profile alone)."""
    return functools.partial(JobManagerAdapter, profile=factory.default_profile)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_mutant_misbehaves(name):
    scenario, factory = SCENARIOS[name], MUTANTS[name].factory
    assert observe(factory, scenario) != observe(_reference_of(factory), scenario)


def _baseline(a):
    """A sequence that avoids every mutant's trigger: all must agree on it."""
    out = [a.describe()]

    def call(op, **args):
        response = a.call(op, args)
        out.append(response)
        return response.get("result")

    x = call("start_job", label="x", duration_ms=100, text="x-out")["job_id"]
    y = call("start_job", label="y", id="build", type="task")["job_id"]
    z = call("start_job", label="z", duration_ms=50000)["job_id"]
    out.append(a.set_clock(100))
    call("get_job", job_id=x)
    call("job_tool", poll=[y], wait_ms=5000)
    call("finish_job", job_id=y, outcome="failed", text="boom")
    call("job_tool", cancel=["ghost"])
    call("list_jobs")
    out.append(a.set_clock(60000))
    call("get_job", job_id=z)
    call("job_tool", list=True, poll=[x])
    call("set_delivery", accept=True)
    return out


def _baseline_of_the_wait_surface(a):
    """The same for the mutants of oh-my-pi 18.x's rules, on the wait surface."""
    out = [a.describe()]

    def call(op, **args):
        response = a.call(op, args)
        out.append(response)
        return response.get("result")

    x = call("start_job", label="x", duration_ms=100, text="x-out")["job_id"]
    z = call("start_job", label="z", duration_ms=50000)["job_id"]
    call("wait_tool")
    call("cancel_jobs", ids=[z, "ghost"])
    call("get_job", job_id=x)
    call("list_jobs")
    out.append(a.set_clock(1000))
    call("wait_tool")
    return out


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutant_is_otherwise_faithful(name):
    factory = MUTANTS[name].factory
    baseline = _baseline if factory.default_profile == "job-manager" else _baseline_of_the_wait_surface
    assert observe(factory, baseline) == observe(_reference_of(factory), baseline)


# ----------------------------------------------- oh-my-pi's readings (2.1.0)
def test_the_oh_my_pi_profile_words_the_list_combination_its_own_way():
    a = JobManagerAdapter(profile="oh-my-pi")
    try:
        message = "`list` cannot be combined with `poll` or `cancel`."
        assert err(a, "job_tool", list=True, poll=[start(a)]) == ("invalid_arguments", message)
    finally:
        a.close()


@pytest.mark.parametrize(
    "empty_text, record, tool_view", [("returned", "", ""), ("omitted", None, None), ("omitted_by_tool", "", None)]
)
def test_an_empty_text_is_left_out_where_empty_text_says(empty_text, record, tool_view):
    a = JobManagerAdapter(empty_text=empty_text)
    try:
        done = start(a)
        ok(a, "finish_job", job_id=done, outcome="completed", text="")
        assert job(a, done)["result_text"] == record
        assert ok(a, "list_jobs")[0]["jobs"][0]["result_text"] == record
        assert tool(a, list=True)[0]["jobs"][0]["result_text"] == tool_view
    finally:
        a.close()


@pytest.mark.parametrize("reading, reported", [("dropped", False), ("last_state", True)])
def test_a_job_evicted_while_the_tool_waits_is_reported_as_evicted_in_wait_says(reading, reported):
    a = JobManagerAdapter(evicted_in_wait=reading)
    try:
        done, keeper = start(a, text="A"), start(a)
        ok(a, "finish_job", job_id=done, outcome="completed", text="A")
        a.set_clock(1000)
        result, _ = tool(a, poll=[done, keeper], wait_ms=300000)  # retention evicts `done` 299000 ms in
        assert result["waited_ms"] == 300000 and job(a, done) is None
        expected = ([done] if reported else []) + [keeper]
        assert ids(result["jobs"]) == expected
        if reported:
            assert result["jobs"][0]["status"] == "completed" and result["jobs"][0]["result_text"] == "A"
    finally:
        a.close()
