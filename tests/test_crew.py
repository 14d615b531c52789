"""The start line of a concurrent group's calls (conformance/engine/crew.py)."""

from __future__ import annotations

import sys
import threading

import pytest

from conformance.engine.crew import RACE_SWITCH_INTERVAL_S, Crew, StartLine, fine_switching
from conformance.engine.runner import RunConfig, prepare
from conformance.specs import resolve_spec
from lifecycle_references.thread_jobs.adapter import ReferenceAdapter


def _race(line: StartLine, crew: Crew, n: int, body) -> None:
    for i in range(n):

        def run(release, i=i):
            line.start(5)
            try:
                outcome = (True, body(i))
            except Exception as exc:
                outcome = (False, exc)
            release()
            line.finish(i, outcome)

        crew.submit(run)


def test_no_call_starts_before_every_thread_has_arrived():
    crew, line, started, arrived = Crew(), StartLine(3), [], []
    try:

        def body(i):
            started.append((i, len(arrived)))
            return i

        for i in range(3):

            def run(release, i=i):
                arrived.append(i)
                line.start(5)
                out = (True, body(i))
                release()
                line.finish(i, out)

            crew.submit(run)
        assert line.wait(5)
        assert all(seen == 3 for _, seen in started)  # each call began once all three were at the line
        assert line.outcomes == [(True, 0), (True, 1), (True, 2)]
    finally:
        crew.close()


def test_the_last_thread_to_arrive_goes_first():
    crew = Crew()
    try:
        for _ in range(20):
            line, order, arrivals = StartLine(3), [], []
            lock = threading.Lock()

            for i in range(3):

                def run(release, i=i, lock=lock, arrivals=arrivals, line=line, order=order):
                    with lock:
                        arrivals.append(i)
                    line.start(5)
                    order.append(i)  # no blocking call before this: the leader holds the interpreter
                    release()
                    line.finish(i, (True, i))

                crew.submit(run)
            assert line.wait(5)
            assert order[0] == arrivals[-1]
    finally:
        crew.close()


def test_a_thread_that_never_comes_does_not_hold_the_others_for_ever():
    crew, line = Crew(), StartLine(2)  # two expected, one comes
    try:

        def run(release):
            line.start(0.2)
            release()
            line.finish(0, (True, "went"))

        crew.submit(run)
        assert not line.wait(1.0)  # call 1 never finished, and waiting for it ended
        assert line.outcomes[0] == (True, "went") and line.outcomes[1] is None
    finally:
        crew.close()


def test_wait_returns_at_the_first_failure_once_every_call_before_it_finished():
    crew, line = Crew(), StartLine(3)
    gate = threading.Event()
    try:

        def body(i):
            if i == 0:
                raise ValueError("call 0 failed")
            if i == 2:
                gate.wait(5)  # still running when the kit is told
            return i

        _race(line, crew, 3, body)
        assert line.wait(5)
        assert line.outcomes[0][0] is False and isinstance(line.outcomes[0][1], ValueError)
        gate.set()
    finally:
        gate.set()
        crew.close()


def test_a_failure_after_a_running_call_waits_for_that_call():
    crew, line = Crew(), StartLine(2)
    release_first = threading.Event()
    try:

        def body(i):
            if i == 0:
                release_first.wait(5)
                return "slow"
            raise ValueError("call 1 failed")

        _race(line, crew, 2, body)
        assert not line.wait(0.3)  # call 1 failed, but call 0 (before it) still runs
        release_first.set()
        assert line.wait(5)
        assert line.outcomes[0] == (True, "slow") and line.outcomes[1][0] is False
    finally:
        release_first.set()
        crew.close()


class NanInConcurrentAnswers(ReferenceAdapter):
    """The reference, except that one start answers with a job id JSON cannot carry."""

    def call(self, operation, args):
        response = super().call(operation, args)
        if operation == "start_job" and args.get("tool_call_id") == "c2":
            return {**response, "result": {**response["result"], "job_id": float("nan")}}
        return response


def test_a_concurrent_answer_that_is_not_json_fails_and_the_trace_stays_json():
    import json

    session = prepare(
        RunConfig(
            spec_path=resolve_spec("thread-jobs"),
            profile="quick",
            seed=1,
            report_dir=None,
            adapter_factory=NanInConcurrentAnswers,
        )
    ).session
    try:
        session.reset()
        starts = [
            ("start_job", {"thread_id": "t1", "tool_call_id": call, "tool_name": "build"}) for call in ("c1", "c2")
        ]
        _, failure = session.call_concurrently(starts)
        assert failure is not None and "job_id" in failure.message
        group = next(entry for entry in session.trace if "concurrently" in entry)
        json.dumps(session.trace, allow_nan=False)  # what the reports carry: plain JSON
        assert isinstance(group["concurrently"][1]["observed"]["result"]["job_id"], str)  # the NaN, written as text
        assert group["concurrently"][0]["observed"]["result"]["job_id"].startswith(
            "job-"
        )  # the plain answer, as it came
    finally:
        session.close()


def test_racing_groups_switch_threads_finely_and_restore_the_interval():
    before = sys.getswitchinterval()
    with fine_switching():
        assert sys.getswitchinterval() == pytest.approx(min(before, RACE_SWITCH_INTERVAL_S))
        with fine_switching():  # another session's group racing at the same time
            pass
        assert sys.getswitchinterval() == pytest.approx(min(before, RACE_SWITCH_INTERVAL_S))
    assert sys.getswitchinterval() == before
