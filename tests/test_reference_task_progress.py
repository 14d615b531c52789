"""The reference task-progress runtime, checked against its contract
(docs/task-progress-contract.md) through call() and set_clock(), and every
mutant shown to misbehave on a concrete call sequence."""

from __future__ import annotations

import json
import re
import threading

import pytest
from reference_calls import err, observe, ok

from lifecycle_references.task_progress import ReferenceAdapter
from lifecycle_references.task_progress.mutants import MUTANTS, Mutant

__all__: list[str] = []

ID = re.compile(r"^[as][0-9a-z]{8}$")


# ------------------------------------------------------------------ helpers


@pytest.fixture
def adapter():
    a = ReferenceAdapter()
    yield a
    a.close()


def register(a, kind="agent", mode="async", **extra):
    return ok(a, "register_task", kind=kind, description=f"{kind} task", mode=mode, **extra)[0]["task_id"]


def running(a, kind="agent", mode="async", **extra):
    task_id = register(a, kind, mode, **extra)
    ok(a, "start_task", task_id=task_id)
    return task_id


def task(a, task_id):
    return ok(a, "get_task", task_id=task_id)[0]["task"]


def progress(a, task_id, inp=0, out=0, tools=(), **cache):
    return ok(
        a, "update_progress", task_id=task_id, input_tokens=inp, output_tokens=out, tool_uses=list(tools), **cache
    )[0]["progress"]


def kinds(effects):
    return [e["effect"] for e in effects]


# ------------------------------------------------------------- registration


def test_register_async_and_foreground_tasks(adapter):
    adapter.reset(500)
    result, effects = ok(adapter, "register_task", kind="agent", description="d", mode="async")
    assert result["status"] == "pending" and result["is_backgrounded"] is True and effects == []
    assert ID.match(result["task_id"]) and result["task_id"][0] == "a"
    fg = ok(adapter, "register_task", kind="main_session", description="m", mode="foreground")[0]
    assert fg["task_id"][0] == "s" and fg["is_backgrounded"] is False
    bg_session = register(adapter, "main_session", "async")
    assert task(adapter, bg_session)["is_backgrounded"] is True
    record = task(adapter, result["task_id"])
    assert record == {
        "task_id": result["task_id"],
        "kind": "agent",
        "description": "d",
        "status": "pending",
        "is_backgrounded": True,
        "notified": False,
        "retain": False,
        "evict_after": None,
        "start_time": 500,
        "end_time": None,
        "parent_id": None,
        "error": None,
        "progress": {"tool_use_count": 0, "token_count": 0, "recent_activities": [], "summary": None},
        "pending_messages": [],
    }
    # only pending/running backgrounded tasks count as background tasks
    assert ok(adapter, "list_background")[0] == {"tasks": [result["task_id"], bg_session]}
    assert [t["task_id"] for t in ok(adapter, "list_tasks")[0]["tasks"]] == [
        result["task_id"],
        fg["task_id"],
        bg_session,
    ]


def test_ids_are_unique_and_reproducible_per_reset():
    a, b = ReferenceAdapter(), ReferenceAdapter()
    ids = [register(a) for _ in range(200)]
    assert len(set(ids)) == 200 and all(ID.match(i) for i in ids)
    assert [register(b) for _ in range(200)] == ids
    a.reset(0)
    assert register(a) == ids[0]


def test_parent_must_be_known(adapter):
    assert err(adapter, "register_task", kind="agent", description="d", mode="async", parent_id="a00000000") == (
        "not_found",
        "No task found with ID: a00000000",
    )
    parent = register(adapter)
    child = register(adapter, parent_id=parent)
    assert task(adapter, child)["parent_id"] == parent


def test_start_only_moves_pending(adapter):
    t = register(adapter)
    assert ok(adapter, "start_task", task_id=t) == ({"task_id": t, "status": "running"}, [])
    assert ok(adapter, "start_task", task_id=t)[0]["status"] == "running"
    ok(adapter, "complete_task", task_id=t, result="r")
    assert ok(adapter, "start_task", task_id=t)[0]["status"] == "completed"
    assert err(adapter, "start_task", task_id="a12345678")[0] == "not_found"


# --------------------------------------------------------------- endings


def test_complete_and_fail_change_only_running_tasks(adapter):
    pending = register(adapter)
    assert ok(adapter, "complete_task", task_id=pending, result=None) == (
        {"task_id": pending, "status": "pending", "changed": False},
        [],
    )
    adapter.set_clock(1000)
    t = running(adapter)
    result, effects = ok(adapter, "complete_task", task_id=t, result={"any": "json"})
    assert result == {"task_id": t, "status": "completed", "changed": True}
    assert effects == []  # agent tasks are announced by notify_task, not here
    rec = task(adapter, t)
    assert (rec["end_time"], rec["evict_after"], rec["notified"]) == (1000, 31000, False)
    assert ok(adapter, "fail_task", task_id=t, error="late")[0] == {
        "task_id": t,
        "status": "completed",
        "changed": False,
    }
    f = running(adapter)
    assert ok(adapter, "fail_task", task_id=f, error="boom")[0]["changed"] is True
    assert task(adapter, f)["error"] == "boom" and task(adapter, f)["status"] == "failed"


def test_retained_task_gets_no_eviction_deadline(adapter):
    t = running(adapter)
    assert ok(adapter, "set_retain", task_id=t, retain=True)[0] == {"task_id": t, "retain": True, "evict_after": None}
    ok(adapter, "complete_task", task_id=t, result="r")
    assert task(adapter, t)["evict_after"] is None
    adapter.set_clock(50)
    assert ok(adapter, "set_retain", task_id=t, retain=False)[0] == {
        "task_id": t,
        "retain": False,
        "evict_after": 30050,
    }
    adapter.set_clock(60)
    assert ok(adapter, "set_retain", task_id=t, retain=True)[0]["evict_after"] is None


def test_main_session_completion_notifies_backgrounded_only(adapter):
    bg = running(adapter, "main_session", "async")
    result, effects = ok(adapter, "complete_task", task_id=bg, result="r")
    assert effects == [{"effect": "notification", "task_id": bg, "status": "completed"}]
    assert task(adapter, bg)["notified"] is True
    assert ok(adapter, "notify_task", task_id=bg) == ({"task_id": bg, "sent": False}, [])

    fg = running(adapter, "main_session", "foreground")
    result, effects = ok(adapter, "fail_task", task_id=fg, error="e")
    assert effects == [{"effect": "terminated_event", "task_id": fg, "status": "failed"}]
    assert task(adapter, fg)["notified"] is True

    # a main session backgrounded by request is notified like an async one
    later = running(adapter, "main_session", "foreground")
    ok(adapter, "background_task", task_id=later)
    assert kinds(ok(adapter, "complete_task", task_id=later, result="r")[1]) == ["notification"]


def test_kill_cascades_to_running_children_in_creation_order(adapter):
    adapter.set_clock(10)
    root = running(adapter)
    c1 = running(adapter, parent_id=root)
    c2 = running(adapter, parent_id=root)
    done = running(adapter, parent_id=root)
    ok(adapter, "complete_task", task_id=done, result="r")
    g_under_done = running(adapter, parent_id=done)
    g1 = running(adapter, parent_id=c1)
    pending = register(adapter, parent_id=root)
    other = running(adapter)
    result, effects = ok(adapter, "kill_task", task_id=root)
    assert result == {"task_id": root, "status": "killed"}
    assert effects == [{"effect": "abort_requested", "task_id": t} for t in (root, c1, g1, c2, g_under_done)]
    for t in (root, c1, c2, g1, g_under_done):
        rec = task(adapter, t)
        assert (rec["status"], rec["end_time"], rec["evict_after"]) == ("killed", 10, 30010)
    assert task(adapter, done)["status"] == "completed"
    assert task(adapter, pending)["status"] == "pending"
    assert task(adapter, other)["status"] == "running"
    # the untouched pending child can still run and be killed later
    ok(adapter, "start_task", task_id=pending)
    assert kinds(ok(adapter, "kill_task", task_id=pending)[1]) == ["abort_requested"]


def test_kill_errors(adapter):
    pending = register(adapter)
    assert err(adapter, "kill_task", task_id=pending) == (
        "not_running",
        f"Task {pending} is not running (status: pending)",
    )
    assert err(adapter, "kill_task", task_id="a99999999") == ("not_found", "No task found with ID: a99999999")
    t = running(adapter)
    ok(adapter, "kill_task", task_id=t)
    assert err(adapter, "kill_task", task_id=t) == ("not_running", f"Task {t} is not running (status: killed)")
    assert ok(adapter, "complete_task", task_id=t, result="r")[0]["changed"] is False


def test_profile_job_tool():
    a = ReferenceAdapter(profile="job-tool")
    assert a.describe()["profile"] == "job-tool" and a.describe()["parameters"] == {}
    parent = register(a)
    child = running(a, parent_id=parent)
    pending_child = register(a, parent_id=parent)
    result, effects = ok(a, "kill_task", task_id=parent)  # a pending task can be killed...
    assert result["status"] == "aborted"
    # ...but the cascade reaches running children only
    assert effects == [
        {"effect": "abort_requested", "task_id": parent},
        {"effect": "abort_requested", "task_id": child},
    ]
    assert task(a, pending_child)["status"] == "pending"
    assert ok(a, "kill_task", task_id=pending_child)[0]["status"] == "aborted"
    assert err(a, "kill_task", task_id=parent) == ("not_running", f"Task {parent} is not running (status: aborted)")
    assert ok(a, "notify_task", task_id=child)[1] == [{"effect": "notification", "task_id": child, "status": "aborted"}]


def test_parameters_and_describe():
    a = ReferenceAdapter(
        grace_ms="100",
        max_recent_activities="2",
        kill_pending="true",
        killed_status="stopped",
        msg_not_found="missing {task_id}",
        msg_not_running="{task_id} is {status}",
    )
    d = a.describe()
    assert d == {
        "name": "reference-task-progress",
        "version": "1.0.0",
        "profile": None,
        "parameters": {
            "grace_ms": 100,
            "max_recent_activities": 2,
            "kill_pending": True,
            "killed_status": "stopped",
            "msg_not_found": "missing {task_id}",
            "msg_not_running": "{task_id} is {status}",
        },
        "capabilities": {"concurrent": True},
    }
    t = register(a)
    assert ok(a, "kill_task", task_id=t)[0]["status"] == "stopped"
    assert task(a, t)["evict_after"] == 100
    assert err(a, "kill_task", task_id=t) == ("not_running", f"{t} is stopped")
    assert err(a, "get_task", task_id="x") == ("not_found", "missing x")
    assert ReferenceAdapter().describe()["parameters"] == {}
    with pytest.raises(TypeError):
        ReferenceAdapter(retention_limit=3)
    with pytest.raises(ValueError):
        ReferenceAdapter(profile="nope")


# ----------------------------------------------------------- notification


def test_notify_once_and_only_when_terminal(adapter):
    t = running(adapter)
    assert ok(adapter, "notify_task", task_id=t) == ({"task_id": t, "sent": False}, [])
    assert task(adapter, t)["notified"] is False
    ok(adapter, "fail_task", task_id=t, error="e")
    assert ok(adapter, "notify_task", task_id=t) == (
        {"task_id": t, "sent": True},
        [{"effect": "notification", "task_id": t, "status": "failed"}],
    )
    assert ok(adapter, "notify_task", task_id=t) == ({"task_id": t, "sent": False}, [])
    assert err(adapter, "notify_task", task_id="a00000000")[0] == "not_found"


def test_mark_notified_suppresses_the_message(adapter):
    t = running(adapter)
    assert ok(adapter, "mark_notified", task_id=t) == ({"task_id": t, "notified": True}, [])
    ok(adapter, "kill_task", task_id=t)
    assert ok(adapter, "notify_task", task_id=t) == ({"task_id": t, "sent": False}, [])
    # a bulk-killed main session is not announced either
    s = running(adapter, "main_session", "async")
    ok(adapter, "mark_notified", task_id=s)
    assert ok(adapter, "complete_task", task_id=s, result="r")[1] == []


def test_concurrent_notify_sends_one_notification(adapter):
    for _ in range(5):
        t = running(adapter)
        ok(adapter, "complete_task", task_id=t, result="r")
        barrier, lock, sent, effects = threading.Barrier(8), threading.Lock(), [], []

        def notify(barrier=barrier, lock=lock, sent=sent, effects=effects, t=t):
            barrier.wait()
            result, fx = ok(adapter, "notify_task", task_id=t)
            with lock:
                sent.append(result["sent"])
                effects.extend(fx)

        threads = [threading.Thread(target=notify) for _ in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert sorted(sent) == [False] * 7 + [True]
        assert effects == [{"effect": "notification", "task_id": t, "status": "completed"}]


# --------------------------------------------------- foreground/background


def test_background_on_request(adapter):
    t = running(adapter, mode="foreground")
    assert ok(adapter, "list_background")[0]["tasks"] == []
    assert ok(adapter, "background_task", task_id=t) == (
        {"task_id": t, "backgrounded": True},
        [{"effect": "caller_released", "task_id": t, "reason": "request"}],
    )
    assert ok(adapter, "background_task", task_id=t) == ({"task_id": t, "backgrounded": False}, [])
    assert ok(adapter, "list_background")[0]["tasks"] == [t]
    done = running(adapter, mode="foreground")
    ok(adapter, "complete_task", task_id=done, result="r")
    assert ok(adapter, "background_task", task_id=done) == ({"task_id": done, "backgrounded": False}, [])
    assert task(adapter, done)["is_backgrounded"] is False


def test_auto_background_fires_on_the_clock(adapter):
    adapter.reset(1000)
    t = running(adapter, mode="foreground", auto_background_ms=500)
    early = register(adapter, mode="foreground", auto_background_ms=200)  # pending counts too
    done = running(adapter, mode="foreground", auto_background_ms=100)
    ok(adapter, "complete_task", task_id=done, result="r")
    asked = running(adapter, mode="foreground", auto_background_ms=300)
    ok(adapter, "background_task", task_id=asked)
    ignored = register(adapter, mode="async", auto_background_ms=10)
    assert adapter.set_clock(1199) == []
    assert adapter.set_clock(1200) == [{"effect": "caller_released", "task_id": early, "reason": "auto"}]
    assert adapter.set_clock(1600) == [{"effect": "caller_released", "task_id": t, "reason": "auto"}]
    assert adapter.set_clock(5000) == []
    assert task(adapter, t)["is_backgrounded"] is True
    assert task(adapter, done)["is_backgrounded"] is False
    assert ok(adapter, "list_background")[0]["tasks"] == [t, early, asked, ignored]


def test_auto_background_timers_fire_in_time_order(adapter):
    late = register(adapter, mode="foreground", auto_background_ms=300)
    soon = register(adapter, mode="foreground", auto_background_ms=100)
    tie = register(adapter, mode="foreground", auto_background_ms=100)
    assert [e["task_id"] for e in adapter.set_clock(1000)] == [soon, tie, late]


def test_foreground_restores_previous(adapter):
    a1 = running(adapter, "main_session", "async")
    a2 = running(adapter, "main_session", "async")
    assert ok(adapter, "foreground_task", task_id=a1) == ({"task_id": a1, "previous": None}, [])
    assert task(adapter, a1)["is_backgrounded"] is False
    assert ok(adapter, "list_background")[0]["tasks"] == [a2]
    assert ok(adapter, "foreground_task", task_id=a2)[0] == {"task_id": a2, "previous": a1}
    assert (task(adapter, a1)["is_backgrounded"], task(adapter, a2)["is_backgrounded"]) == (True, False)
    assert ok(adapter, "foreground_task", task_id=a2)[0]["previous"] is None  # same task again
    assert err(adapter, "foreground_task", task_id="s00000000")[0] == "not_found"
    # an evicted previous task is no longer known
    ok(adapter, "complete_task", task_id=a2, result="r")  # foreground: notified, no message
    adapter.set_clock(30000)
    assert ok(adapter, "evict")[0] == {"evicted": [a2]}
    assert ok(adapter, "foreground_task", task_id=a1)[0]["previous"] is None


# --------------------------------------------------------------- progress


def test_progress_tokens_tools_and_activities(adapter):
    t = running(adapter)
    p = progress(adapter, t, 100, 10, ["Read", "Grep"], cache_creation_input_tokens=5, cache_read_input_tokens=7)
    assert p == {"tool_use_count": 2, "token_count": 122, "recent_activities": ["Read", "Grep"], "summary": None}
    p = progress(adapter, t, 300, 20, ["StructuredOutput", "Bash", "Edit", "Write", "Glob"])
    # latest input 300 (cache tokens of the earlier turn are gone) + outputs 10 + 20
    assert p["token_count"] == 330 and p["tool_use_count"] == 7
    assert p["recent_activities"] == ["Grep", "Bash", "Edit", "Write", "Glob"]
    assert task(adapter, t)["progress"] == p


def test_summary_survives_progress_and_only_while_running(adapter):
    t = running(adapter)
    pending = register(adapter)
    assert ok(adapter, "update_summary", task_id=pending, summary="no")[0]["progress"]["summary"] is None
    assert ok(adapter, "update_summary", task_id=t, summary="reading")[0]["progress"]["summary"] == "reading"
    assert progress(adapter, t, 1, 1, ["Read"])["summary"] == "reading"
    ok(adapter, "complete_task", task_id=t, result="r")
    before = task(adapter, t)["progress"]
    assert progress(adapter, t, 999, 999, ["Bash"]) == before
    assert ok(adapter, "update_summary", task_id=t, summary="late")[0]["progress"] == before
    assert progress(adapter, pending, 5, 5, ["Read"])["token_count"] == 0


def test_max_recent_activities_parameter():
    a = ReferenceAdapter(max_recent_activities=2, structured_output_tool="Out")
    t = running(a)
    p = progress(a, t, 0, 0, ["A", "StructuredOutput", "Out", "B"])
    assert p["recent_activities"] == ["StructuredOutput", "B"] and p["tool_use_count"] == 4


# ------------------------------------------------------------ messages


def test_queue_and_drain(adapter):
    t = running(adapter)
    assert ok(adapter, "queue_message", task_id=t, message="one")[0] == {"task_id": t, "queued": 1}
    assert ok(adapter, "queue_message", task_id=t, message="two")[0]["queued"] == 2
    assert task(adapter, t)["pending_messages"] == ["one", "two"]
    assert ok(adapter, "drain_messages", task_id=t) == ({"task_id": t, "messages": ["one", "two"]}, [])
    assert ok(adapter, "drain_messages", task_id=t)[0]["messages"] == []
    assert ok(adapter, "queue_message", task_id=t, message="three")[0]["queued"] == 1
    assert err(adapter, "drain_messages", task_id="a00000000")[0] == "not_found"


# ------------------------------------------------------------ eviction


def test_eviction_needs_terminal_notified_unretained_and_due(adapter):
    done = running(adapter)  # notified, due at 30000
    quiet = running(adapter)  # never notified
    kept = running(adapter)  # retained
    alive = running(adapter)  # still running
    for t in (done, quiet, kept):
        if t == kept:
            ok(adapter, "set_retain", task_id=t, retain=True)
        ok(adapter, "complete_task", task_id=t, result="r")
    for t in (done, kept):
        ok(adapter, "notify_task", task_id=t)
    adapter.set_clock(29999)
    assert ok(adapter, "evict")[0] == {"evicted": []}
    adapter.set_clock(30000)
    assert ok(adapter, "evict")[0] == {"evicted": [done]}
    assert err(adapter, "get_task", task_id=done)[0] == "not_found"
    ok(adapter, "mark_notified", task_id=quiet)
    adapter.set_clock(40000)
    ok(adapter, "set_retain", task_id=kept, retain=False)  # due at 70000
    assert ok(adapter, "evict")[0] == {"evicted": [quiet]}
    adapter.set_clock(70000)
    assert ok(adapter, "evict")[0] == {"evicted": [kept]}
    assert [t["task_id"] for t in ok(adapter, "list_tasks")[0]["tasks"]] == [alive]


# ------------------------------------------------------ protocol edges


def test_unknown_operation_and_bad_arguments(adapter):
    assert err(adapter, "retry_task", task_id="x")[0] == "unknown_operation"
    t = running(adapter)
    bad = [
        ("register_task", {"kind": "shell", "description": "d", "mode": "async"}),
        ("register_task", {"kind": "agent", "description": "d", "mode": "later"}),
        ("register_task", {"kind": "agent", "mode": "async"}),
        ("register_task", {"kind": "agent", "description": "d", "mode": "foreground", "auto_background_ms": -1}),
        ("start_task", {}),
        ("get_task", {"task_id": 7}),
        ("complete_task", {"task_id": t}),
        ("fail_task", {"task_id": t, "error": None}),
        ("update_progress", {"task_id": t, "input_tokens": 1, "output_tokens": -1, "tool_uses": []}),
        ("update_progress", {"task_id": t, "input_tokens": 1, "output_tokens": 1, "tool_uses": "Read"}),
        ("update_progress", {"task_id": t, "input_tokens": True, "output_tokens": 1, "tool_uses": []}),
        ("update_summary", {"task_id": t}),
        ("queue_message", {"task_id": t, "message": 3}),
        ("set_retain", {"task_id": t, "retain": "yes"}),
    ]
    for op, args in bad:
        response = adapter.call(op, args)
        assert response["error"]["kind"] == "invalid_arguments", (op, args, response)
    assert task(adapter, t)["status"] == "running"


def test_reset_forgets_everything(adapter):
    t = register(adapter, mode="foreground", auto_background_ms=10)
    adapter.reset(100)
    assert ok(adapter, "list_tasks")[0] == {"tasks": []}
    assert register(adapter) == t  # same seed, same first id
    assert task(adapter, t)["start_time"] == 100
    assert adapter.set_clock(1000) == []  # the old timer is gone with the old runtime


# ----------------------------------------------------------------- mutants
# Each scenario returns an observation; a mutant is caught when its
# observation differs from the reference's on the same sequence.


def _race(a):
    counts = []
    for _ in range(5):  # the race needs overlapping calls; a few rounds make it certain
        t = running(a)
        ok(a, "complete_task", task_id=t, result="r")
        barrier, effects = threading.Barrier(8), []

        def notify(barrier=barrier, effects=effects, t=t):
            barrier.wait()
            effects.extend(ok(a, "notify_task", task_id=t)[1])

        threads = [threading.Thread(target=notify) for _ in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        counts.append(len(effects))
    return max(counts)


def _tokens(a):
    t = running(a)
    progress(a, t, 100, 10)
    return progress(a, t, 150, 10)["token_count"]


def _activities(a):
    t = running(a)
    return progress(a, t, 0, 0, [f"T{i}" for i in range(7)])["recent_activities"]


def _structured(a):
    t = running(a)
    return progress(a, t, 0, 0, ["Read", "StructuredOutput"])


def _summary(a):
    t = running(a)
    ok(a, "update_summary", task_id=t, summary="s")
    return progress(a, t, 1, 1, ["Read"])


def _terminal_progress(a):
    t = running(a)
    ok(a, "complete_task", task_id=t, result="r")
    return progress(a, t, 5, 5, ["Read"])


def _evict_scenario(retain=False, notify=True, at=30000):
    def scenario(a):
        t = running(a)
        if retain:
            ok(a, "set_retain", task_id=t, retain=True)
        ok(a, "complete_task", task_id=t, result="r")
        if notify:
            ok(a, "notify_task", task_id=t)
        a.set_clock(at)
        return ok(a, "evict")[0]

    return scenario


def _background_twice(a):
    t = running(a, mode="foreground")
    ok(a, "background_task", task_id=t)
    return a.call("background_task", {"task_id": t})


def _foreground(a):
    first = running(a, "main_session")
    second = running(a, "main_session")
    ok(a, "foreground_task", task_id=first)
    ok(a, "foreground_task", task_id=second)
    return ok(a, "list_background")[0]


def _kill_finished(a):
    t = running(a)
    ok(a, "complete_task", task_id=t, result="r")
    return a.call("kill_task", {"task_id": t}), task(a, t)["status"]


def _child(a):
    parent = running(a)
    child = running(a, parent_id=parent)
    return ok(a, "kill_task", task_id=parent)[1], task(a, child)["status"]


def _tree_kill(a):
    """A root whose first child has a running child and whose second child runs: which aborts, in which order?"""
    root = running(a)
    first = running(a, parent_id=root)
    second = running(a, parent_id=root)
    grandchild = running(a, parent_id=first)
    effects = ok(a, "kill_task", task_id=root)[1]
    return [e["task_id"] for e in effects] == [root, first, grandchild, second], effects


def _finished_middle(a):
    """The root's child completed while its own child runs on: does killing the root reach the grandchild?"""
    root = running(a)
    child = running(a, parent_id=root)
    grandchild = running(a, parent_id=child)
    ok(a, "complete_task", task_id=child, result="r")
    ok(a, "kill_task", task_id=root)
    return task(a, grandchild)["status"]


def _racing(a, op, **args):
    """The same call twice at once on one running task (six tries): the two answers of each try."""
    answers = []
    for _ in range(6):
        t = running(a)
        barrier, out = threading.Barrier(2), []

        def one(barrier=barrier, out=out, t=t):
            barrier.wait()
            out.append(a.call(op, {"task_id": t, **args})["result"])

        threads = [threading.Thread(target=one) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        answers.append(sorted(json.dumps(r, sort_keys=True) for r in out))
    return answers


def _against(a, first, second, rounds=10):
    """Two different calls on one running task at once, ``rounds`` times (each
    started first in turn): each call's answer (result or error kind) and the
    task's status afterwards."""
    seen = []
    for round_ in range(rounds):
        t = running(a)
        barrier, out = threading.Barrier(2), {}

        def one(op, args, barrier=barrier, out=out, t=t):
            barrier.wait()
            response = a.call(op, {"task_id": t, **args})
            out[op] = response.get("result") if "result" in response else response["error"]["kind"]

        calls = (first, second) if round_ % 2 == 0 else (second, first)  # which thread starts first varies too
        threads = [threading.Thread(target=one, args=call) for call in calls]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        seen.append((out, task(a, t)["status"]))
    return seen


def _progress_racing_completion(a):
    """Every race of complete_task and update_progress ends completed (progress after the end is ignored)."""
    return all(
        status == "completed"
        for _, status in _against(
            a,
            ("complete_task", {"result": "r"}),
            ("update_progress", {"input_tokens": 1, "output_tokens": 1, "tool_uses": ["Read"]}),
        )
    )


def _kill_racing_completion(a):
    """No race of kill_task and complete_task both take effect: a completion that changed the task is final."""
    return all(
        not (out["complete_task"]["changed"] and status != "completed")
        for out, status in _against(a, ("kill_task", {}), ("complete_task", {"result": "r"}))
    )


def _kill_one_child(a):
    """Killing one child of a task: its running sibling and the parent go on."""
    parent = running(a)
    child = running(a, parent_id=parent)
    sibling = running(a, parent_id=parent)
    effects = ok(a, "kill_task", task_id=child)[1]
    return effects, task(a, sibling)["status"], task(a, parent)["status"]


def _drain(a):
    t = running(a)
    ok(a, "queue_message", task_id=t, message="m")
    ok(a, "drain_messages", task_id=t)
    return ok(a, "drain_messages", task_id=t)[0]


def _foreground_session(a):
    t = running(a, "main_session", "foreground")
    return ok(a, "complete_task", task_id=t, result="r")[1]


def _timer_due_in_background(a):
    """A foreground task with an auto-background timer, backgrounded on
    request before the timer comes due, then brought back to the foreground:
    the spent timer never backgrounds it again."""
    t = register(a, mode="foreground", auto_background_ms=500)
    ok(a, "background_task", task_id=t)
    a.set_clock(500)
    ok(a, "foreground_task", task_id=t)
    a.set_clock(20500)
    return task(a, t)["is_backgrounded"]


def _timers_due_together(a):
    """Three foreground tasks registered at one instant with one auto-background
    delay (ids drawn at random, so their order is not the registration order):
    the order their callers are released in when the timers come due."""
    for kind in ("main_session", "agent", "agent"):
        register(a, kind=kind, mode="foreground", auto_background_ms=500)
    return [effect["task_id"] for effect in a.set_clock(500)]


def _foreground_after_eviction(a):
    """A main session finishes in the foreground (notified by its terminated
    event) and is evicted; the next foreground_task names no previous task."""
    first = running(a, "main_session")
    ok(a, "foreground_task", task_id=first)
    ok(a, "complete_task", task_id=first, result="r")
    a.set_clock(30000)
    ok(a, "evict")
    second = register(a)
    return ok(a, "foreground_task", task_id=second)[0]


def _abbreviation(a):
    """A task's id less its last character names no task: what get_task finds."""
    task_id = register(a)
    answer = a.call("get_task", {"task_id": task_id[:-1]})
    return (answer.get("error") or {}).get("kind") or answer["result"]["task"]["task_id"] == task_id


def _white_space(a):
    """A task's id with a space before it names no task: what get_task finds."""
    task_id = register(a)
    answer = a.call("get_task", {"task_id": f" {task_id}"})
    return (answer.get("error") or {}).get("kind") or answer["result"]["task"]["task_id"] == task_id


def _as_path(a):
    """A task's id with a path before it names no task: what get_task finds."""
    task_id = register(a)
    answer = a.call("get_task", {"task_id": f"x/{task_id}"})
    return (answer.get("error") or {}).get("kind") or answer["result"]["task"]["task_id"] == task_id


def _notified_then_completed(a):
    """A backgrounded main session marked notified while it runs, then completed: its effects."""
    task_id = running(a, kind="main_session")
    ok(a, "mark_notified", task_id=task_id)
    return kinds(ok(a, "complete_task", task_id=task_id, result="r")[1])


def _drained_twice_after_end(a):
    """A message queued on an ended task, drained twice: the second drain."""
    task_id = running(a)
    ok(a, "complete_task", task_id=task_id, result="r")
    ok(a, "queue_message", task_id=task_id, message="m")
    ok(a, "drain_messages", task_id=task_id)
    return ok(a, "drain_messages", task_id=task_id)[0]["messages"]


def _retained_root_killed(a):
    """A retained root killed with its running child: the child's evict_after."""
    root = running(a)
    child = running(a, parent_id=root)
    ok(a, "set_retain", task_id=root, retain=True)
    ok(a, "kill_task", task_id=root)
    return task(a, child)["evict_after"]


def _kill_through_evicted_child(a):
    """A root killed after its finished child was evicted: the grandchild's status."""
    root = running(a)
    child = running(a, kind="main_session", parent_id=root)
    grandchild = register(a, parent_id=child)
    ok(a, "complete_task", task_id=child, result="r")  # a backgrounded main session is notified at once
    ok(a, "start_task", task_id=grandchild)
    a.set_clock(30000)
    ok(a, "evict")
    ok(a, "kill_task", task_id=root)
    return task(a, grandchild)["status"]


SCENARIOS = {
    "completion_ignores_notified": _notified_then_completed,
    "drain_keeps_after_end": _drained_twice_after_end,
    "cascade_uses_root_retain": _retained_root_killed,
    "cascade_stops_at_evicted": _kill_through_evicted_child,
    "abbreviated_task_ids": _abbreviation,
    "trimmed_task_ids": _white_space,
    "path_like_task_ids": _as_path,
    "foreground_reports_evicted": _foreground_after_eviction,
    "auto_background_refires": _timer_due_in_background,
    "auto_background_ties_by_id": _timers_due_together,
    "double_notify_race": _race,
    "token_count_sums_inputs": _tokens,
    "keeps_six_activities": _activities,
    "structured_output_listed": _structured,
    "summary_lost_on_update": _summary,
    "progress_after_terminal_applies": _terminal_progress,
    "evicts_before_notified": _evict_scenario(notify=False),
    "evicts_retained": _evict_scenario(retain=True),
    "grace_off_by_one": _evict_scenario(at=30000),
    "background_twice_true": _background_twice,
    "foreground_keeps_previous": _foreground,
    "kill_finished_changes_it": _kill_finished,
    "child_not_killed": _child,
    "cascade_breadth_first": _tree_kill,
    "complete_check_then_act": lambda a: _racing(a, "complete_task", result="r"),
    "queue_lost_update": lambda a: _racing(a, "queue_message", message="m"),
    "cascade_stops_at_finished_child": _finished_middle,
    "drain_keeps_queue": _drain,
    "progress_writes_back_stale_task": _progress_racing_completion,
    "kill_check_then_act": _kill_racing_completion,
    "child_shares_parent_controller": _kill_one_child,
    "activities_keep_oldest": _activities,
    "main_session_foreground_notifies": _foreground_session,
}


def test_every_mutant_has_a_scenario():
    assert len(MUTANTS) >= 12 and set(MUTANTS) == set(SCENARIOS)
    for name, m in MUTANTS.items():
        assert isinstance(m, Mutant) and m.name == name and m.description


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_mutant_misbehaves(name):
    scenario = SCENARIOS[name]
    assert observe(MUTANTS[name].factory, scenario) != observe(ReferenceAdapter, scenario)


def _baseline(a):
    """A sequence that avoids every mutant's trigger: all must agree on it."""
    out = [a.describe()]

    def call(op, **args):
        response = a.call(op, args)
        out.append(response)
        return response.get("result")

    t = call("register_task", kind="agent", description="d", mode="async")["task_id"]
    fg = call("register_task", kind="agent", description="f", mode="foreground", auto_background_ms=50)["task_id"]
    s = call("register_task", kind="main_session", description="s", mode="async")["task_id"]
    for task_id in (t, fg, s):
        call("start_task", task_id=task_id)
    call("update_progress", task_id=t, input_tokens=10, output_tokens=3, tool_uses=["Read", "Bash"])
    call("update_summary", task_id=t, summary="working")
    call("queue_message", task_id=t, message="hi")
    call("drain_messages", task_id=t)
    out.append(a.set_clock(50))
    call("foreground_task", task_id=s)
    call("background_task", task_id=s)
    call("complete_task", task_id=t, result="r")
    call("notify_task", task_id=t)
    call("notify_task", task_id=t)
    call("fail_task", task_id=s, error="e")
    call("kill_task", task_id=fg)
    call("kill_task", task_id=fg)
    call("mark_notified", task_id=fg)
    out.append(a.set_clock(40000))
    call("evict")
    call("list_tasks")
    call("list_background")
    return out


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutant_is_otherwise_faithful(name):
    assert observe(MUTANTS[name].factory, _baseline) == observe(ReferenceAdapter, _baseline)
