"""The reference thread-jobs runtime, checked against its contract through call(),
and every mutant shown to misbehave on a concrete call sequence."""

from __future__ import annotations

import os
import threading

import pytest
from reference_calls import err, observe, ok

from lifecycle_references.thread_jobs import ReferenceAdapter
from lifecycle_references.thread_jobs.mutants import MUTANTS, Mutant

__all__: list[str] = []

T1, T2 = "thread-1", "thread-2"


# ------------------------------------------------------------------ helpers


@pytest.fixture
def adapter():
    a = ReferenceAdapter()
    yield a
    a.close()


def start(a, job_id, thread=T1, tool_call=None, tool="shell"):
    return ok(
        a, "start_job", thread_id=thread, tool_call_id=tool_call or f"call-{job_id}", tool_name=tool, job_id=job_id
    )[0]


def finish(a, job_id, outcome="completed", payload="ok"):
    return ok(a, "observe_outcome", job_id=job_id, outcome=outcome, payload=payload)


def inspect(a, job_id, thread=T1):
    return ok(a, "inspect_job", thread_id=thread, job_id=job_id)[0]["job"]


def kinds(effects):
    return [e["effect"] for e in effects]


# ------------------------------------------------------- sync vs background


def test_sync_and_background_resolve_a_tool_call_exactly_once(adapter):
    result, effects = ok(adapter, "complete_sync", thread_id=T1, tool_call_id="c1", tool_name="ls", result="a\nb")
    assert result == {"mode": "synchronous", "result": "a\nb"} and effects == []
    assert ok(adapter, "list_jobs", thread_id=T1, statuses=None)[0] == {"jobs": []}
    # sync first, then background or sync again
    assert (
        err(adapter, "start_job", thread_id=T1, tool_call_id="c1", tool_name="ls", job_id="j9")[0]
        == "tool_call_resolved"
    )
    assert err(adapter, "complete_sync", thread_id=T1, tool_call_id="c1", tool_name="ls", result="x") == (
        "tool_call_resolved",
        "Tool invocation already resolved",
    )
    # background first, then sync or a second background
    assert start(adapter, "j1", tool_call="c2") == {"mode": "background", "job_id": "j1", "status": "running"}
    assert (
        err(adapter, "complete_sync", thread_id=T1, tool_call_id="c2", tool_name="ls", result="x")[0]
        == "tool_call_resolved"
    )
    assert err(adapter, "start_job", thread_id=T1, tool_call_id="c2", tool_name="ls") == (
        "job_exists_for_tool_call",
        "Background job already exists for tool_call_id",
    )
    # job ids are global: another thread cannot reuse one
    assert err(adapter, "start_job", thread_id=T2, tool_call_id="c3", tool_name="ls", job_id="j1") == (
        "duplicate_job_id",
        "Duplicate job-id",
    )
    assert [j["job_id"] for j in ok(adapter, "list_jobs", thread_id=T1)[0]["jobs"]] == ["j1"]


def test_generated_ids_are_unique_under_concurrency(adapter):
    start(adapter, "job-2", tool_call="taken")  # a caller-chosen id in the generated space
    ids, barrier = [], threading.Barrier(8)

    def worker(n):
        barrier.wait()
        for i in range(40):
            ids.append(ok(adapter, "start_job", thread_id=T1, tool_call_id=f"w{n}-{i}", tool_name="t")[0]["job_id"])

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ids) == 320 and len(set(ids)) == 320 and "job-2" not in ids


# ----------------------------------------------------------------- cancel


def test_cancel_is_best_effort_and_leaves_finished_jobs_alone(adapter):
    start(adapter, "j1")
    adapter.set_clock(50)
    result, effects = ok(adapter, "cancel_job", thread_id=T1, job_id="j1", requested_by="agent")
    assert result == {"job_id": "j1", "status": "pending_cancel"}
    assert effects == [{"effect": "cancellation_requested", "job_id": "j1", "requested_by": "agent"}]
    assert inspect(adapter, "j1")["cancel_requested_at"] == 50
    # a second cancel sends nothing more
    assert ok(adapter, "cancel_job", thread_id=T1, job_id="j1", requested_by="user")[1] == []
    # the tool finished anyway
    assert finish(adapter, "j1")[0] == {"job_id": "j1", "status": "completed"}
    # cancel arriving after the job finished: stays completed, nothing recorded
    start(adapter, "j2")
    finish(adapter, "j2")
    result, effects = ok(adapter, "cancel_job", thread_id=T1, job_id="j2", requested_by="user")
    assert result["status"] == "completed" and effects == []
    assert inspect(adapter, "j2")["cancel_requested_at"] is None
    # a second outcome report does not change a terminal job
    assert finish(adapter, "j2", outcome="failed") == ({"job_id": "j2", "status": "completed"}, [])


# -------------------------------------------------------------- retention


def test_retention_keeps_exactly_the_limit_and_never_evicts_running_jobs(adapter):
    start(adapter, "keep-running")
    for i in range(20):
        adapter.set_clock(i)
        start(adapter, f"d{i}")
        finish(adapter, f"d{i}")
    every = ["running", "pending_cancel", "completed", "failed", "cancelled", "timed_out"]
    listed = ok(adapter, "list_jobs", thread_id=T1, statuses=every)[0]["jobs"]
    assert len(listed) == 21  # exactly 20 terminal: no eviction
    adapter.set_clock(100)
    start(adapter, "d20")
    finish(adapter, "d20")
    listed = [j["job_id"] for j in ok(adapter, "list_jobs", thread_id=T1, statuses=every)[0]["jobs"]]
    assert listed == ["keep-running"] + [f"d{i}" for i in range(1, 21)]
    # the evicted job is forgotten entirely: id and tool call are unknown again
    assert err(adapter, "inspect_job", thread_id=T1, job_id="d0")[0] == "not_found_in_thread"
    assert err(adapter, "observe_progress", job_id="d0", note="x") == ("job_not_found", "Job not found")
    assert start(adapter, "d0-again", tool_call="call-d0")["status"] == "running"


# ---------------------------------------------------------------- payloads


@pytest.mark.parametrize(
    "payload, spilled",
    [
        ("x" * 100, False),  # exactly max_bytes
        ("x" * 101, True),  # one byte over
        ("é" * 50, False),  # 100 bytes in UTF-8
        ("é" * 50 + "x", True),  # 101 bytes in UTF-8
        ("\n".join("a" * 5), False),  # exactly max_lines (5 lines)
        ("\n".join("a" * 6), True),  # one line over
    ],
)
def test_payload_inline_or_spilled_at_the_limits(payload, spilled):
    a = ReferenceAdapter(max_bytes="100", max_lines=5)
    try:
        start(a, "j1", tool="grep")
        _, effects = finish(a, "j1", payload=payload)
        job = inspect(a, "j1")
        if not spilled:
            assert job["terminal_payload"] == payload and job["terminal_payload_file"] is None
            assert kinds(effects) == ["turn_requested"]
        else:
            path = job["terminal_payload_file"]
            assert job["terminal_payload"] is None and os.path.isabs(path)
            assert os.path.basename(path) == "job-j1-terminal.json"
            assert effects[0] == {"effect": "payload_spilled", "job_id": "j1", "path": path}
            assert kinds(effects) == ["payload_spilled", "turn_requested"]
            with open(path, encoding="utf-8") as fh:
                assert fh.read() == payload
        text = ok(a, "turn_boundary", thread_id=T1)[1][0]["text"]
        if spilled:
            assert f"Terminal payload exceeded output limits. See temp file: {path}" in text
        else:
            assert payload in text
    finally:
        a.close()
    if spilled:
        assert not os.path.exists(path)  # close() removed the temp dir


# --------------------------------------------------------------- injection


def test_injection_once_oldest_completion_first_with_ties_by_marking_order(adapter):
    for j in ("b", "a", "c", "late"):
        start(adapter, j)
    ok(adapter, "begin_turn", thread_id=T1)
    adapter.set_clock(10)
    finish(adapter, "late")  # same time as "c", but marked first
    adapter.set_clock(5)  # completed_at decides before the marking sequence
    for j in ("b", "a"):
        assert finish(adapter, j)[1] == []  # busy thread: no turn requested
    adapter.set_clock(10)
    finish(adapter, "c")
    ok(adapter, "observe_progress", job_id="c", note="noise")
    adapter.set_clock(20)
    result, effects = ok(adapter, "turn_boundary", thread_id=T1)
    assert result == {"injected": ["b", "a", "late", "c"]}
    assert [e["job_id"] for e in effects] == ["b", "a", "late", "c"]
    assert all(e["role"] == "assistant" and e["thread_id"] == T1 for e in effects)
    assert inspect(adapter, "a")["terminal_message_emitted_at"] == 20
    assert ok(adapter, "turn_boundary", thread_id=T1) == ({"injected": []}, [])
    # now idle: the next terminal outcome asks for a turn itself
    start(adapter, "d")
    assert finish(adapter, "d")[1] == [
        {"effect": "turn_requested", "thread_id": T1, "reason": "background-job-terminal"}
    ]


def test_non_terminal_updates_never_inject(adapter):
    start(adapter, "j1")
    ok(adapter, "cancel_job", thread_id=T1, job_id="j1", requested_by="user")
    assert ok(adapter, "observe_progress", job_id="j1", note="50%") == (
        {"job_id": "j1", "status": "pending_cancel"},
        [],
    )
    assert ok(adapter, "observe_llm_error", job_id="j1")[0]["status"] == "pending_cancel"
    assert ok(adapter, "turn_boundary", thread_id=T1) == ({"injected": []}, [])
    assert err(adapter, "observe_llm_error", job_id="nope")[0] == "job_not_found"


def test_concurrent_turn_boundaries_inject_each_job_once(adapter):
    for j in ("j1", "j2"):
        start(adapter, j)
        finish(adapter, j)
    injected, barrier = [], threading.Barrier(8)

    def boundary():
        barrier.wait()
        injected.extend(e["job_id"] for e in ok(adapter, "turn_boundary", thread_id=T1)[1])

    threads = [threading.Thread(target=boundary) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(injected) == ["j1", "j2"]


# ---------------------------------------------------------- thread scoping


def test_thread_scoping_and_list_filters(adapter):
    start(adapter, "j1", thread=T1)
    adapter.set_clock(5)
    start(adapter, "j3", thread=T1)
    start(adapter, "j2", thread=T2)
    adapter.set_clock(3)  # started earlier than j3, created later
    start(adapter, "j4", thread=T1)
    finish(adapter, "j1", outcome="failed")
    ok(adapter, "cancel_job", thread_id=T1, job_id="j3", requested_by="user")
    listed = ok(adapter, "list_jobs", thread_id=T1)[0]["jobs"]
    assert listed == [
        {"job_id": "j4", "tool_call_id": "call-j4", "tool_name": "shell", "status": "running"},
        {"job_id": "j3", "tool_call_id": "call-j3", "tool_name": "shell", "status": "pending_cancel"},
    ]
    failed = ok(adapter, "list_jobs", thread_id=T1, statuses=["failed"])[0]["jobs"]
    assert [j["job_id"] for j in failed] == ["j1"]
    assert [j["job_id"] for j in ok(adapter, "list_jobs", thread_id=T2)[0]["jobs"]] == ["j2"]
    assert err(adapter, "inspect_job", thread_id=T2, job_id="j1") == (
        "not_found_in_thread",
        "Job not found in this thread: j1",
    )
    assert err(adapter, "cancel_job", thread_id=T2, job_id="j3", requested_by="user")[0] == "not_found_in_thread"
    assert err(adapter, "inspect_job", thread_id=T1, job_id="ghost")[1] == "Job not found in this thread: ghost"
    assert set(inspect(adapter, "j1")) == {
        "job_id",
        "thread_id",
        "tool_call_id",
        "tool_name",
        "status",
        "started_at",
        "completed_at",
        "cancel_requested_at",
        "terminal_payload",
        "terminal_payload_file",
        "terminal_message_emitted",
        "terminal_message_emitted_at",
    }


def test_retry_unknown_operation_and_bad_arguments(adapter):
    start(adapter, "j1")
    for args in ({"thread_id": T1, "job_id": "j1"}, {"thread_id": T2, "job_id": "ghost"}, {}):
        assert err(adapter, "retry_job", **args) == (
            "retry_not_supported",
            "Manual retry is not supported for background jobs",
        )
    assert err(adapter, "frobnicate")[0] == "unknown_operation"
    assert err(adapter, "observe_outcome", job_id="j1", outcome="running", payload="")[0] == "invalid_arguments"


# ---------------------------------------------------------------- restart


def test_restart_forgets_jobs_resolutions_and_busy_flags(adapter):
    ok(adapter, "complete_sync", thread_id=T1, tool_call_id="s1", tool_name="t", result="r")
    start(adapter, "j1")
    ok(adapter, "begin_turn", thread_id=T1)
    assert ok(adapter, "restart") == ({}, [])
    assert ok(adapter, "list_jobs", thread_id=T1)[0] == {"jobs": []}
    assert err(adapter, "observe_outcome", job_id="j1", outcome="completed", payload="")[0] == "job_not_found"
    ok(adapter, "complete_sync", thread_id=T1, tool_call_id="s1", tool_name="t", result="r")
    start(adapter, "j1")  # id and tool call are free again
    assert kinds(finish(adapter, "j1")[1]) == ["turn_requested"]  # thread is idle again


# ----------------------------------------------------- describe, profiles


def test_describe_lists_only_explicit_parameters():
    a = ReferenceAdapter(retention_limit="3", msg_job_not_found="Nope")
    try:
        d = a.describe()
        assert d == {
            "name": "reference-thread-jobs",
            "version": "1.0.0",
            "profile": None,
            "parameters": {"retention_limit": 3, "msg_job_not_found": "Nope"},
            "capabilities": {"concurrent": True},
        }
        assert err(a, "observe_progress", job_id="x", note="") == ("job_not_found", "Nope")
    finally:
        a.close()
    with pytest.raises(TypeError):
        ReferenceAdapter(no_such_param=1)


def test_profile_runtime_code():
    a = ReferenceAdapter(profile="runtime-code")
    try:
        assert a.describe()["profile"] == "runtime-code" and a.describe()["parameters"] == {}
        start(a, "j1", tool="grep")
        finish(a, "j1", payload="x" * 51200)
        assert inspect(a, "j1")["terminal_payload_file"] is None
        start(a, "j2", tool="grep")
        finish(a, "j2", payload="x" * 51201)
        path = inspect(a, "j2")["terminal_payload_file"]
        assert os.path.basename(path) == "grep-j2.log" and os.path.isfile(path)
        assert err(a, "inspect_job", thread_id=T2, job_id="j1")[1] == "Job not found in this thread"
    finally:
        a.close()


def test_reset_starts_from_nothing_with_a_fresh_spill_dir():
    a = ReferenceAdapter(max_bytes=1)
    try:
        start(a, "j1")
        finish(a, "j1", payload="too big")
        old = inspect(a, "j1")["terminal_payload_file"]
        a.reset(1000)
        assert not os.path.exists(old)
        assert start(a, "j1")["job_id"] == "j1"
        assert inspect(a, "j1")["started_at"] == 1000
    finally:
        a.close()


# ----------------------------------------------------------------- mutants
# Each scenario returns an observation; a mutant is caught when its
# observation differs from the reference's on the same sequence.


def _all_statuses(a, thread=T1):
    every = ["running", "pending_cancel", "completed", "failed", "cancelled", "timed_out"]
    return [j["job_id"] for j in ok(a, "list_jobs", thread_id=thread, statuses=every)[0]["jobs"]]


def _retention(a, n=20, running=False):
    if running:
        start(a, "r")
    for i in range(n):
        a.set_clock(i)
        start(a, f"d{i}")
        finish(a, f"d{i}")
    return _all_statuses(a)


def _evicted_tool_call_resolved(a):
    """21 jobs finished in start order (the first is evicted), then a sync
    result for the first job's tool call: unknown again, so accepted."""
    _retention(a, n=21)
    return a.call("complete_sync", {"thread_id": T1, "tool_call_id": "call-d0", "tool_name": "t", "result": "r"})


def _completed_in_reverse_start_order(a):
    for i in range(21):
        start(a, f"d{i}")
    for i in reversed(range(21)):  # d0 started first but finishes last
        a.set_clock(100 - i)
        finish(a, f"d{i}")
    return _all_statuses(a)


def _tie(a):
    start(a, "job-b")
    start(a, "job-a")
    finish(a, "job-b")
    finish(a, "job-a")  # same completed_at, marked second
    return ok(a, "turn_boundary", thread_id=T1)[0]


def _race(a):
    counts = []
    for round_ in range(5):  # the race needs overlapping calls; a few rounds make it certain
        job = f"j{round_}"
        start(a, job)
        finish(a, job)
        barrier, effects = threading.Barrier(8), []

        def boundary(barrier=barrier, effects=effects):
            barrier.wait()
            effects.extend(ok(a, "turn_boundary", thread_id=T1)[1])

        threads = [threading.Thread(target=boundary) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        counts.append(len(effects))
    return max(counts)


def _two_threads(a, op):
    start(a, "j1", thread=T1)
    start(a, "j2", thread=T2)
    if op == "list":
        return ok(a, "list_jobs", thread_id=T1)[0]
    return a.call("inspect_job", {"thread_id": T1, "job_id": "j2"})


def _spill_at_limit(a):
    start(a, "j1")
    finish(a, "j1", payload="x" * 25600)
    return inspect(a, "j1")["terminal_payload"] is not None


def _spilled(a, payload):
    start(a, "j1")
    finish(a, "j1", payload=payload)
    return inspect(a, "j1")["terminal_payload_file"] is not None


def _cancel_finished(a):
    start(a, "j1")
    finish(a, "j1")
    return a.call("cancel_job", {"thread_id": T1, "job_id": "j1", "requested_by": "user"}), inspect(a, "j1")


def _progress(a):
    start(a, "j1")
    ok(a, "observe_progress", job_id="j1", note="half way")
    return ok(a, "turn_boundary", thread_id=T1)


def _llm_error_after_cancel(a):
    start(a, "j1")
    a.set_clock(5)
    ok(a, "cancel_job", thread_id=T1, job_id="j1", requested_by="user")
    ok(a, "observe_llm_error", job_id="j1")
    return inspect(a, "j1")["cancel_requested_at"]


def _restart(a):
    start(a, "j1")
    ok(a, "restart")
    return a.call("inspect_job", {"thread_id": T1, "job_id": "j1"})


def _idle_wakeup(a):
    start(a, "j1")
    return finish(a, "j1")[1]


def _duplicate_id(a):
    start(a, "j1", tool_call="c1")
    return a.call("start_job", {"thread_id": T2, "tool_call_id": "c2", "tool_name": "t", "job_id": "j1"})


def _newest_first(a):
    for j in ("j1", "j2"):
        start(a, j)
    a.set_clock(1)
    finish(a, "j2")
    a.set_clock(2)
    finish(a, "j1")
    return ok(a, "turn_boundary", thread_id=T1)[0]


def _injected_after_the_turn_began(a):
    """A turn begins at 0; a job ends at 3 and the boundary injects it then: when was it injected?"""
    ok(a, "begin_turn", thread_id=T1)
    start(a, "j1")
    a.set_clock(3)
    finish(a, "j1")
    ok(a, "turn_boundary", thread_id=T1)
    return inspect(a, "j1")


def _second_start(a):
    start(a, "j1", tool_call="c1")
    return a.call("start_job", {"thread_id": T1, "tool_call_id": "c1", "tool_name": "t"})


def _late_report(a):
    ok(a, "begin_turn", thread_id=T1)
    start(a, "j1")
    finish(a, "j1")
    ok(a, "turn_boundary", thread_id=T1)
    finish(a, "j1", outcome="failed", payload="late")
    return ok(a, "turn_boundary", thread_id=T1)[0], inspect(a, "j1")


def _racing_cancels(a):
    """Two cancels of one running job at once (six jobs): how many cancellations were requested?"""
    requested = []
    for i in range(6):
        start(a, f"rc{i}", tool_call=f"rc-{i}")
        barrier, effects = threading.Barrier(2), []

        def one(i=i, barrier=barrier, effects=effects):
            barrier.wait()
            response = a.call("cancel_job", {"thread_id": T1, "job_id": f"rc{i}", "requested_by": "user"})
            effects.extend(e["effect"] for e in response["effects"])

        threads = [threading.Thread(target=one) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        requested.append(effects.count("cancellation_requested"))
    return requested


def _racing_outcomes(a):
    """Two outcomes of one running job at once, on an idle thread (six jobs): the most turns one race requested."""
    requested = []
    for i in range(6):
        start(a, f"ro{i}", tool_call=f"ro-{i}")
        barrier, effects = threading.Barrier(2), []

        def one(payload, i=i, barrier=barrier, effects=effects):
            barrier.wait()
            response = a.call("observe_outcome", {"job_id": f"ro{i}", "outcome": "completed", "payload": payload})
            effects.extend(e["effect"] for e in response["effects"])

        threads = [threading.Thread(target=one, args=(p,)) for p in ("first", "second")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        requested.append(effects.count("turn_requested"))
    return max(requested)


def _explicit_then_generated(a):
    """A caller chooses "job-1", then a start lets the runtime choose: which jobs are there?"""
    start(a, "job-1", tool_call="c1")
    generated = a.call("start_job", {"thread_id": T1, "tool_call_id": "c2", "tool_name": "t"})
    return generated, sorted(j["job_id"] for j in ok(a, "list_jobs", thread_id=T1)[0]["jobs"])


def _concurrent_starts(a):
    """Starts of different tool calls at once: how many jobs are there afterwards?"""
    barrier, threads = threading.Barrier(6), []

    def one(i):
        barrier.wait()
        a.call("start_job", {"thread_id": T1, "tool_call_id": f"cc-{i}", "tool_name": "t"})

    for i in range(6):
        threads.append(threading.Thread(target=one, args=(i,)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(ok(a, "list_jobs", thread_id=T1)[0]["jobs"])


SCENARIOS = {
    "late_report_reopens": _late_report,
    "lost_update_starts": _concurrent_starts,
    "evict_at_limit": _retention,
    "evicts_running": lambda a: _retention(a, n=20, running=True),
    "evict_by_start_time": _completed_in_reverse_start_order,
    "eviction_keeps_tool_call": _evicted_tool_call_resolved,
    "unstable_tie_order": _tie,
    "double_inject_race": _race,
    "list_cross_thread": lambda a: _two_threads(a, "list"),
    "inspect_cross_thread": lambda a: _two_threads(a, "inspect"),
    "spill_off_by_one": _spill_at_limit,
    # 1000 lines and a final newline: 1001 lines by the rule, so spilled
    "lines_by_splitlines": lambda a: _spilled(a, "x\n" * 1000),
    # 1000 lines by the rule, each holding a lone carriage return: within max_lines, so inline
    "lines_by_universal_newlines": lambda a: _spilled(a, "\n".join(["x\ry"] * 1000)),
    # 12801 characters, 25602 UTF-8 bytes: over max_bytes, so spilled
    "size_in_characters": lambda a: _spilled(a, "é" * 12801),
    # exactly 1000 lines (no final newline): within max_lines, so inline
    "lines_limit_exclusive": lambda a: _spilled(a, "\n".join(["x"] * 1000)),
    # 25601 bytes, the last a newline: over max_bytes, so spilled
    "size_ignores_trailing_newline": lambda a: _spilled(a, "a" * 25600 + "\n"),
    "outcome_check_then_act": _racing_outcomes,
    "id_unique_per_thread": _duplicate_id,
    "cancel_finished_job": _cancel_finished,
    "cancel_check_then_act": _racing_cancels,
    "progress_injects": _progress,
    "restart_keeps_jobs": _restart,
    "llm_error_clears_cancel": _llm_error_after_cancel,
    "no_idle_wakeup": _idle_wakeup,
    "duplicate_id_accepted": _duplicate_id,
    "injection_newest_first": _newest_first,
    "second_start_allowed": _second_start,
    "generated_id_collides": _explicit_then_generated,
    "emitted_at_turn_start": _injected_after_the_turn_began,
}


def test_every_mutant_has_a_scenario():
    assert len(MUTANTS) >= 14 and set(MUTANTS) == set(SCENARIOS)
    for name, m in MUTANTS.items():
        assert isinstance(m, Mutant) and m.name == name and m.description


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_mutant_misbehaves(name):
    scenario = SCENARIOS[name]
    assert observe(MUTANTS[name].factory, scenario) != observe(ReferenceAdapter, scenario)


def _baseline(a):
    """A sequence that avoids every mutant's trigger: all must agree on it."""
    out = [a.describe()]
    ok(a, "begin_turn", thread_id=T1)
    out.append(a.call("complete_sync", {"thread_id": T1, "tool_call_id": "s", "tool_name": "t", "result": "r"}))
    out.append(start(a, "j1"))
    out.append(start(a, "j2"))
    out.append(a.call("cancel_job", {"thread_id": T1, "job_id": "j2", "requested_by": "agent"}))
    a.set_clock(7)
    ok(a, "begin_turn", thread_id=T1)  # the turn that injects j1 begins when it ends (emitted_at_turn_start)
    out.append(finish(a, "j1", payload="done"))
    out.append(a.call("turn_boundary", {"thread_id": T1}))
    out.append(a.call("list_jobs", {"thread_id": T1, "statuses": None}))
    out.append(a.call("inspect_job", {"thread_id": T1, "job_id": "j1"}))
    out.append(a.call("retry_job", {"thread_id": T1, "job_id": "j1"}))
    return out


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutant_is_otherwise_faithful(name):
    assert observe(MUTANTS[name].factory, _baseline) == observe(ReferenceAdapter, _baseline)
