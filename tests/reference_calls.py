"""Calling a reference adapter in the reference tests: a call expected to
succeed, one expected to be refused, and a whole call sequence on a fresh
instance (to compare a mutant's behaviour with the reference's)."""

from __future__ import annotations

__all__ = ["err", "observe", "ok", "thread_jobs_starts"]


def ok(a, op, **args):
    """Call and expect success; return (result, effects)."""
    response = a.call(op, args)
    assert "error" not in response, response
    return response["result"], response["effects"]


def err(a, op, **args):
    """Call and expect an error without effects; return (kind, message)."""
    response = a.call(op, args)
    assert "result" not in response, response
    assert response["effects"] == []
    return response["error"]["kind"], response["error"]["message"]


def observe(factory, scenario):
    """Run ``scenario(adapter)`` on a fresh adapter from ``factory`` and return what it returns."""
    a = factory()
    try:
        return scenario(a)
    finally:
        a.close()


def thread_jobs_starts(n: int):
    """``n`` starts of jobs in thread t1, as concurrent calls, answered by a
    fresh thread-jobs reference runtime; and a session of the thread-jobs
    model to check those answers with (the caller closes it). Returns
    (session, runtime, calls, responses)."""
    from conformance.engine.session import Session
    from conformance.specs import resolve_spec
    from lifecycle_references.thread_jobs import ReferenceAdapter
    from statemachines import load_spec

    spec = load_spec(resolve_spec("thread-jobs"))
    session = Session(spec, spec.default_parameters(), ReferenceAdapter)
    session.reset()
    runtime = ReferenceAdapter()
    runtime.reset(0)
    calls = [("start_job", {"thread_id": "t1", "tool_call_id": f"c{i}", "tool_name": "shell"}) for i in range(n)]
    return session, runtime, calls, [runtime.call(op, args) for op, args in calls]
