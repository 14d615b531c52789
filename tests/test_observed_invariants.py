"""Invariants over what the implementation reports (``observed:``), such as
thread-jobs' inject_at_most_once: a record created again under a key that was
freed is another record, so reporting its effect again is no violation, while
reporting one record's effect twice still is."""

from __future__ import annotations

from conformance.engine.runner import RunConfig, prepare
from conformance.specs import resolve_spec

__all__: list[str] = []


def _session():
    config = RunConfig(spec_path=str(resolve_spec("thread-jobs")), profile="quick", seed=1, report_dir=None)
    session = prepare(config).session
    session.reset()
    return session


def _checked(session, operation: str, **args) -> dict:
    response, failure = session.call(operation, args)
    assert failure is None, failure.message
    return response


def _finish_and_inject(session, thread: str, job_id: str) -> list:
    _checked(session, "observe_outcome", job_id=job_id, outcome="completed", payload="ok")
    _checked(session, "begin_turn", thread_id=thread)
    response, failure = session.call("turn_boundary", {"thread_id": thread})
    return response, failure


def test_an_id_reused_after_eviction_is_a_new_job_whose_injection_is_no_repeat():
    session = _session()
    try:
        limit = session.params["retention_limit"]
        _checked(session, "start_job", thread_id="t1", tool_call_id="c-0", tool_name="search", job_id="job-x")
        response, failure = _finish_and_inject(session, "t1", "job-x")
        assert failure is None and any(e.get("job_id") == "job-x" for e in response["effects"])
        for i in range(limit + 1):  # finished jobs past the retention limit evict job-x
            _checked(
                session,
                "start_job",
                thread_id="t1",
                tool_call_id=f"c-{i + 1}",
                tool_name="search",
                job_id=f"filler-{i}",
            )
            _checked(session, "observe_outcome", job_id=f"filler-{i}", outcome="completed", payload="ok")
        assert "job-x" not in session.model.keys()
        _checked(session, "start_job", thread_id="t1", tool_call_id="c-again", tool_name="search", job_id="job-x")
        assert session.model.births["job-x"] == 2
        response, failure = _finish_and_inject(session, "t1", "job-x")
        assert failure is None, failure.message
        assert any(e.get("job_id") == "job-x" for e in response["effects"])
    finally:
        session.close()


def test_one_job_injected_twice_still_breaks_the_invariant():
    session = _session()
    try:
        _checked(session, "start_job", thread_id="t1", tool_call_id="c-0", tool_name="search", job_id="job-x")
        response, failure = _finish_and_inject(session, "t1", "job-x")
        assert failure is None
        injected = [e for e in response["effects"] if e.get("effect") == "message_injected"]
        assert injected
        # the same job's injection reported again, later (what a double-injecting runtime says)
        again = {"result": {}, "effects": injected}
        failure = session.check_observed([(len(session.trace), "turn_boundary", again)])
        assert failure is not None and failure.kind == "invariant"
        assert "inject_at_most_once" in failure.message and "'job-x'" in failure.message
        assert "again at step" in failure.message
    finally:
        session.close()
