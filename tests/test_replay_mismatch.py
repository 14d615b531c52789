"""A failure that Hypothesis's replay of the same draws does not repeat is
still reported as what it was (its kind, its step, the answer that broke the
rule), with a note that the replay passed; and the draws that pick a record
by position pick the same call's record in a concurrent group whatever order
the scheduler gave the ids in, so a deterministic implementation replays."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_result import kit as run_kit

from conformance.engine.stateful import in_call_order

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"


def test_keys_first_seen_in_a_concurrent_group_are_ordered_by_the_call_that_got_them():
    answers = [
        {"result": {"job": {"job_id": "job-3", "status": "running"}}},
        {"result": {"job": {"job_id": "job-2", "status": "running"}}},
        {"error": {"kind": "too_many"}},
    ]
    assert in_call_order(["job-2", "job-3"], answers) == ["job-3", "job-2"]
    # the other schedule: the same calls got the other ids
    answers[0]["result"]["job"]["job_id"], answers[1]["result"]["job"]["job_id"] = "job-2", "job-3"
    assert in_call_order(["job-2", "job-3"], answers) == ["job-2", "job-3"]
    # a key no answer holds keeps its place after the others; booleans never count as ids
    assert in_call_order([1, "x", "job-3"], [{"ok": True}, {"id": "job-3"}]) == ["job-3", 1, "x"]


def test_a_record_drawn_by_its_place_is_the_same_calls_whichever_call_won_the_race():
    """The model holds a concurrent group's records in the order that
    explained the answers, which the scheduler chose; the draws of live
    records read them in the order the example first saw them (by call),
    so a replay whose race went the other way picks the same call's record."""
    from conformance.engine.runner import RunConfig, prepare
    from conformance.engine.stateful import Explorer, _Stats, build_example
    from lifecycle_references.thread_jobs.adapter import ReferenceAdapter

    session = prepare(
        RunConfig(spec_path="thread-jobs", adapter_factory=ReferenceAdapter, adapter_label="ref", report_dir=None)
    ).session
    try:
        explorer = Explorer(session.spec, session.params, concurrent=True)
        machine = build_example(session.spec, session, explorer, _Stats())()
        answers = {}
        for job, call in (("job-3", "c1"), ("job-2", "c2")):  # the second call's start took effect first
            args = {"thread_id": "t1", "tool_call_id": call, "tool_name": "search", "job_id": job}
            answers[job], failure = session.call("start_job", args)
            assert failure is None, failure
        assert explorer.live_keys() == ["job-3", "job-2"]  # the model's order: the scheduler's
        machine.group_answers = [answers["job-2"], answers["job-3"]]  # call 1 got job-2, call 2 job-3
        machine._note_keys()
        assert machine.keys == ["job-2", "job-3"]
        assert explorer.live_keys() == ["job-2", "job-3"]  # by call, as every replay sees them
        for job in ("job-3", "job-2"):  # pending_cancel: neither initial nor terminal
            assert session.call("cancel_job", {"thread_id": "t1", "job_id": job, "requested_by": "user"})[1] is None
        assert explorer.intermediate_keys() == ["job-2", "job-3"]
        explorer.begin_example()  # a new example starts with the model's order again
        assert explorer.live_keys() == ["job-3", "job-2"]
    finally:
        session.close()


@pytest.mark.slow
def test_a_failure_the_replay_does_not_repeat_keeps_its_kind_and_evidence(tmp_path):
    proc = run_kit(
        "run",
        "thread-jobs",
        "--adapter",
        "once_wrong:OnceWrongAdapter",
        "--no-scenarios",
        "--profile",
        "ci",  # not quick: the exploration must reach an inspect_job of a job that exists
        "--seed",
        "1",
        "--report-dir",
        str(tmp_path / "r"),
        cwd=tmp_path,
        pythonpath=FIXTURES,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    failure = json.loads((tmp_path / "r" / "report.json").read_text(encoding="utf-8"))["stateful"]["failure"]
    # the rule the answer broke, not a bare "nondeterministic"
    assert failure["kind"] == "divergence", failure
    assert failure["operation"] == "inspect_job", failure
    assert failure["path"] == "result.job.status", failure
    assert "did not fail again" in failure["message"], failure["message"]
    wrong = failure["steps"][failure["step"]]
    assert wrong["operation"] == "inspect_job" and "result" in wrong["observed"], wrong
