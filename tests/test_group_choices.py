"""The ids a concurrent group's calls got are recorded with each call, so a
replay that runs the group one call at a time, or sees the calls land in
another order, names the same records in the steps after it
(conformance/engine/linearize.py, engine/reduce.py)."""

from __future__ import annotations

import threading

from conformance.engine.reduce import replay_steps, steps_of_trace, without_choices
from conformance.engine.runner import RunConfig, prepare
from lifecycle_references.thread_jobs.adapter import ReferenceAdapter


def _start(call_id: str) -> tuple[str, dict]:
    return "start_job", {"thread_id": "t1", "tool_call_id": call_id, "tool_name": "build"}


def _cancel(job_id: str) -> dict:
    return {"thread_id": "t1", "job_id": job_id, "requested_by": "user"}


class SecondStartFirst(ReferenceAdapter):
    """The reference, but of two racing starts the one for c2 lands first, so
    it gets the first generated id: the order the calls are not listed in."""

    def reset(self, now_ms):
        self.landed = threading.Event()
        return super().reset(now_ms)

    def call(self, operation, args):
        if operation == "start_job" and args.get("tool_call_id") == "c1":
            self.landed.wait(5)
        try:
            return super().call(operation, args)
        finally:
            if operation == "start_job" and args.get("tool_call_id") == "c2":
                self.landed.set()


def _session(adapter_class):
    config = RunConfig(spec_path="thread-jobs", adapter_factory=adapter_class, adapter_label="fixture", report_dir=None)
    return prepare(config).session


def _recorded_race() -> list[dict]:
    """Two starts racing (c2 lands first), then c1's job cancelled: the steps as a reduction gets them."""
    session = _session(SecondStartFirst)
    try:
        session.reset()
        answers, failure = session.call_concurrently([_start("c1"), _start("c2")])
        assert failure is None, failure.message
        assert [a["result"]["job_id"] for a in answers] == ["job-2", "job-1"]
        _, failure = session.call("cancel_job", _cancel("job-2"))  # c1's job
        assert failure is None, failure.message
        return steps_of_trace(session.trace)
    finally:
        session.close()


def test_each_call_of_a_group_keeps_the_ids_it_got():
    steps = _recorded_race()
    group = steps[0]["concurrently"]
    assert [call["chosen"] for call in group] == [["job-2"], ["job-1"]]


def test_a_replay_one_call_at_a_time_names_the_records_the_group_made():
    steps = _recorded_race()
    one_by_one = [dict(call) for call in steps[0]["concurrently"]] + steps[1:]
    session = _session(ReferenceAdapter)  # c1 now starts first and gets job-1
    try:
        names: dict = {}
        assert replay_steps(session, one_by_one, names) is None
        assert names == {"job-2": "job-1", "job-1": "job-2"}
        cancel = session.trace[-1]
        assert cancel["operation"] == "cancel_job" and cancel["args"] == _cancel("job-1")  # c1's job again
    finally:
        session.close()


def test_a_counterexample_file_holds_no_ids_chosen_inside_a_group():
    steps = without_choices(_recorded_race())
    assert all("chosen" not in call for call in steps[0]["concurrently"])
    assert steps[0]["concurrently"][0] == {"call": "start_job", "args": _start("c1")[1]}
    assert "chosen" not in steps[1]
