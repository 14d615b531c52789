"""The probe after a step of the exploration asks the implementation about
the scopes whose records the step changed in the model (Model.read_token);
the whole probe, every scope, ends every example. A probe's prediction is
reused (not worked out and compared again) only for an answer identical to
the one that passed last time, about records the model has not changed
since. So nothing the probe could catch is missed: a change the
implementation makes to another scope shows in that scope's answer at the
end of the example (or at its next probe), which is then judged in full, and
the exploration's shrunk counterexample ends at the step that made it."""

from __future__ import annotations

import pytest

from conformance.engine.runner import RunConfig, prepare, run_conformance
from conformance.specs import resolve_spec
from lifecycle_references.thread_jobs.adapter import ReferenceAdapter
from statemachines import Model


def _start(thread: str, call: str) -> tuple[str, dict]:
    return "start_job", {"thread_id": thread, "tool_call_id": call, "tool_name": "build"}


class ForgetsOtherThread(ReferenceAdapter):
    """The reference, except that a third start anywhere makes the list of
    thread t2 come back empty: a change to a scope the step did not touch."""

    def reset(self, now_ms):
        self.starts = 0
        return super().reset(now_ms)

    def call(self, operation, args):
        if operation == "start_job":
            self.starts += 1
        response = super().call(operation, args)
        if operation == "list_jobs" and args.get("thread_id") == "t2" and self.starts >= 3:
            return {"result": {"jobs": []}, "effects": []}
        return response


def _session(factory=None):
    prepared = prepare(
        RunConfig(
            spec_path=resolve_spec("thread-jobs"), profile="quick", seed=1, report_dir=None, adapter_factory=factory
        )
    )
    return prepared.session


def _predictions_of(monkeypatch, operation: str) -> list:
    seen: list = []
    original = Model.predict

    def counting(self, op, args, observation=None):
        if op == operation:
            seen.append(dict(args))
        return original(self, op, args, observation)

    monkeypatch.setattr(Model, "predict", counting)
    return seen


def test_after_a_step_only_the_scopes_it_changed_are_asked_and_predicted(monkeypatch):
    session = _session()
    try:
        session.reset()
        for op, args in (_start("t1", "c1"), _start("t2", "c2")):
            assert session.call(op, args)[1] is None
            assert session.probe(when_changed=True) is None
        predicted = _predictions_of(monkeypatch, "list_jobs")
        calls = session.calls
        assert session.call(*_start("t1", "c3"))[1] is None
        assert session.probe(when_changed=True) is None
        assert session.calls - calls == 2  # the start, and the probe of t1: t2 did not change
        assert [a["thread_id"] for a in predicted] == ["t1"]
        # The whole probe asks every scope; t2's answer is the one that passed: not predicted again.
        calls = session.calls
        assert session.probe() is None
        assert session.calls - calls == len(session.probe_calls())
        assert [a["thread_id"] for a in predicted] == ["t1"]
        coverage = session.model.coverage.counts["operations"]["list_jobs"]
        assert coverage >= 5  # reused predictions still count in the coverage
        # A change to t2 makes its probe ask, and predict, again.
        assert session.call(*_start("t2", "c4"))[1] is None
        assert session.probe(when_changed=True) is None
        assert [a["thread_id"] for a in predicted] == ["t1", "t2"]
    finally:
        session.close()


def test_a_change_the_implementation_makes_to_another_scope_is_caught_by_the_whole_probe():
    session = _session(ForgetsOtherThread)
    try:
        session.reset()
        for op, args in (_start("t2", "c1"), _start("t1", "c2")):
            assert session.call(op, args)[1] is None
            assert session.probe(when_changed=True) is None
        assert session.call(*_start("t1", "c3"))[1] is None  # the third start: t2's list comes back empty
        assert session.probe(when_changed=True) is None  # the step changed t1 only
        failure = session.probe()  # the whole probe, as at the end of every example
        assert failure is not None and failure.kind == "divergence"
        assert failure.message.startswith("probe after the last step: list_jobs: result.jobs")
        assert failure.steps[-1]["args"]["thread_id"] == "t2"
    finally:
        session.close()


@pytest.mark.slow
def test_the_exploration_catches_a_change_to_another_scope_and_ends_at_the_step_that_made_it():
    from conformance.engine.stateful import run_stateful

    prepared = prepare(
        RunConfig(
            spec_path=resolve_spec("thread-jobs"),
            profile="quick",
            seed=1,
            report_dir=None,
            adapter_factory=ForgetsOtherThread,
        )
    )
    try:
        outcome = run_stateful(
            prepared.spec,
            prepared.session,
            profile="quick",
            seed=1,
            capabilities=prepared.identity.get("capabilities") or {},
        )
    finally:
        prepared.session.close()
    assert outcome.verdict == "fail"
    failure = outcome.failure
    assert failure.message.startswith("probe after the last step: list_jobs: result.jobs"), failure.message
    assert failure.steps[-1]["args"]["thread_id"] == "t2"
    # What a run reports, shrunk and reduced: the three starts that made the change, then
    # the probe of the scope it changed.
    for seed in (1, 2):
        report = run_conformance(
            RunConfig(
                spec_path=resolve_spec("thread-jobs"),
                profile="quick",
                seed=seed,
                report_dir=None,
                adapter_factory=ForgetsOtherThread,
                scenarios=False,
                max_failures=1,
            )
        )
        steps = report["stateful"]["failure"]["steps"]
        assert [step.get("operation") for step in steps] == ["start_job"] * 3 + ["list_jobs"], steps
        assert steps[-1]["args"]["thread_id"] == "t2"


def test_a_reset_forgets_what_passed_and_a_clock_move_only_what_read_the_clock():
    session = _session()
    try:
        session.reset()
        assert session.call(*_start("t1", "c1"))[1] is None
        assert session.probe() is None
        model = session.model
        ((reads, token),) = {
            (passed.reads, passed.token) for key, passed in session._probe_passed.items() if '"t1"' in key[1]
        }
        assert model.read_token(reads) == token
        assert session.advance(5) is None
        # list_jobs reads no `now`: the clock alone cannot change its prediction
        assert model.read_token(reads) == token
        predicted = []
        original = model._predict
        model._predict = lambda *a: predicted.append(a[0]) or original(*a)
        assert session.probe() is None
        assert predicted == []  # both answers the same as before, about the same records: nothing predicted again
        session.reset()
        assert model.read_token(reads) != token  # a new example: nothing carries over
    finally:
        session.close()


def test_an_operation_that_reads_the_clock_is_predicted_again_after_a_clock_move(tmp_path):
    from pathlib import Path

    from statemachines import load_spec, resolve_parameters

    text = Path(resolve_spec("thread-jobs")).read_text(encoding="utf-8")
    assert text.count("- result: \"{'jobs': jobs}\"") == 1
    spec_path = tmp_path / "thread-jobs.yaml"
    scenarios = Path(resolve_spec("thread-jobs")).with_name("thread-jobs.scenarios.yaml")
    (tmp_path / scenarios.name).write_text(scenarios.read_text(encoding="utf-8"), encoding="utf-8")
    spec_path.write_text(
        text.replace("- result: \"{'jobs': jobs}\"", "- result: \"{'jobs': jobs, 'at': now}\""), encoding="utf-8"
    )
    spec = load_spec(str(spec_path))
    model = Model(spec, resolve_parameters(spec, None, {})[0])
    model.reset(0)
    model.track_reads = True
    model.predict("list_jobs", {"thread_id": "t1"})
    reads = model.last_reads
    token = model.read_token(reads)
    model.advance(5)
    assert model.read_token(reads) != token
    model.predict("inspect_job", {"thread_id": "t1", "job_id": "job-1"})
    still = model.last_reads  # inspect_job reads no clock
    before = model.read_token(still)
    model.advance(9)
    assert model.read_token(still) == before


class ForgetsThreadA(ReferenceAdapter):
    """The reference, except that thread "a"'s list comes back empty: only a
    probe of that thread can show it, and the pool lists t1 and t2."""

    def call(self, operation, args):
        if operation == "list_jobs" and args.get("thread_id") == "a":
            return {"result": {"jobs": []}, "effects": []}
        return super().call(operation, args)


def test_the_probe_reads_a_thread_the_pool_does_not_list_once_a_call_names_it():
    # a replay's reduction may rename thread t2 to "a": the probe must still read it
    session = _session(ForgetsThreadA)
    try:
        session.reset()
        pooled = [args["thread_id"] for _, args in session.probe_calls()]
        assert pooled == ["t1", "t2"]
        assert session.call(*_start("a", "c1"))[1] is None
        assert [args["thread_id"] for _, args in session.probe_calls()] == ["t1", "t2", "a"]
        failure = session.probe(when_changed=True)
        assert failure is not None and failure.operation == "list_jobs" and failure.args["thread_id"] == "a", failure
        session.reset()  # a new example starts from the pool again
        assert [args["thread_id"] for _, args in session.probe_calls()] == pooled
    finally:
        session.close()
