"""When the model needs a value from an answer that lacks it (a generated id,
a spilled payload's path), the failure says what was expected and what came
instead, as every other difference does: an error where the model predicted
success is "expected success, got error ...". A spec's ``check`` of an
answer (async-command: "an unknown job's reply must carry an error object")
speaks only once the rest of the answer is as predicted.

Through one ``Session`` on thread-jobs' and async-command's references.
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance.engine.session import Session
from conformance.specs import resolve_spec
from lifecycle_references.thread_jobs import ReferenceAdapter
from statemachines import load_spec


@pytest.fixture(scope="module")
def spec():
    return load_spec(resolve_spec("thread-jobs"))


class RefusesStarts(ReferenceAdapter):
    """Answers every start with an error, as a runtime whose restart kept a
    stale tool-call table would."""

    def call(self, operation: str, args: dict) -> Any:
        if operation == "start_job":
            return {"error": {"kind": "tool_call_resolved", "message": "c1 already resolved"}}
        return super().call(operation, args)


class NeverSpills(ReferenceAdapter):
    """Keeps every payload inline, however large (its effects never list a spill)."""

    def call(self, operation: str, args: dict) -> Any:
        answer = super().call(operation, args)
        if operation == "observe_outcome" and isinstance(answer, dict) and "result" in answer:
            effects = [e for e in answer.get("effects", []) if e.get("effect") != "payload_spilled"]
            answer = {**answer, "effects": effects}
        return answer


def _session(spec, factory) -> Session:
    session = Session(spec, spec.default_parameters(), factory)
    session.reset()
    return session


def test_an_error_where_a_generated_id_was_expected_says_expected_success(spec):
    session = _session(spec, RefusesStarts)
    try:
        _, failure = session.call("start_job", {"thread_id": "t1", "tool_call_id": "c1", "tool_name": "shell"})
    finally:
        session.close()
    assert failure is not None and failure.kind == "divergence"
    assert failure.message.startswith(
        "start_job: expected success, got error tool_call_resolved: c1 already resolved; expected result.job_id"
    ), failure.message


def test_a_missing_effect_the_spec_takes_a_value_from_is_said_as_expected(spec):
    session = _session(spec, NeverSpills)
    limit = session.params["max_bytes"]  # 25,600 bytes under the defaults
    try:
        _, failure = session.call(
            "start_job", {"thread_id": "t1", "tool_call_id": "c1", "tool_name": "shell", "job_id": "j1"}
        )
        assert failure is None
        outcome = {"job_id": "j1", "outcome": "completed", "payload": "x" * (limit + 1)}
        _, failure = session.call("observe_outcome", outcome)
    finally:
        session.close()
    assert failure is not None and failure.kind == "divergence"
    assert "expected a payload_spilled effect (the spec takes its path from it), but the answer reported none" in (
        failure.message
    ), failure.message
    # why the model spilled it, in the policy's own measures
    assert f"policy payload spills this payload: {limit + 1} UTF-8 byte(s) > max_bytes {limit}" in failure.message


def test_a_spill_by_line_count_says_how_lines_are_counted(spec):
    """An independent runtime counted a payload's newlines as its lines, so
    1,000 newlines stayed inline; the spec counts newlines + 1. The message
    says so, with the count, where the reader had to count by hand."""
    session = _session(spec, NeverSpills)
    limit = session.params["max_lines"]
    try:
        _, failure = session.call(
            "start_job", {"thread_id": "t1", "tool_call_id": "c1", "tool_name": "shell", "job_id": "j1"}
        )
        assert failure is None
        _, failure = session.call("observe_outcome", {"job_id": "j1", "outcome": "completed", "payload": "x\n" * limit})
    finally:
        session.close()
    assert failure is not None and failure.kind == "divergence"
    assert f"{limit + 1} line(s) (newlines + 1) > max_lines {limit}" in failure.message, failure.message


# -- a check of the answer comes after the answer's own difference -------------------


@pytest.fixture(scope="module")
def command_spec():
    return load_spec(resolve_spec("async-command"))


def _build_then_look(command_spec, factory, job_id: str):
    session = _session(command_spec, factory)
    try:
        _, failure = session.call("start_job", {"target": "app", "work_ms": 1000, "outcome": "complete"})
        assert failure is None, failure
        return session.call("job_status", {"job_id": job_id})[1]
    finally:
        session.close()


def test_a_job_found_for_an_id_never_issued_is_reported_as_that_not_as_a_missing_error_object(command_spec):
    # The spec checks that an unknown job's reply carries an error object, a
    # check written for a reply that is otherwise right. A tool that answers
    # with the job an abbreviation names differs long before that: exit 3 (running) for 5.
    from lifecycle_references.async_cli.wiring import MUTANTS

    failure = _build_then_look(command_spec, MUTANTS["abbreviated_ids"].factory, "build-000")
    assert failure is not None and failure.kind == "divergence"
    # 3: running; the job's record printed where none was expected is named too
    expected = "job_status: result.exit_code: expected 5, got 3; also result.stdout.data differs"
    assert failure.message == expected, failure.message
    assert (failure.expected, failure.observed) == (5, 3)


def test_a_check_still_names_what_it_checks_when_the_rest_of_the_answer_is_right(command_spec):
    from lifecycle_references.async_cli.wiring import ReferenceAdapter

    class ErrorNull:
        """The reference tool, but an unknown job's reply has error: null."""

        def __init__(self, **options):
            self.inner = ReferenceAdapter(**options)

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def call(self, operation, args):
            answer = self.inner.call(operation, args)
            stdout = answer.get("result", {}).get("stdout")
            if isinstance(stdout, dict) and stdout.get("ok") is False and stdout.get("data") is None:
                stdout["error"] = None
            return answer

    failure = _build_then_look(command_spec, ErrorNull, "build-9999")
    assert failure is not None and failure.kind == "divergence"
    assert "an unknown job's reply has ok false, so its envelope must carry an error object" in failure.message
