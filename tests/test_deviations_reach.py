"""Deviations that reach past a bug that changes state (docs/deviations.md):
an ``avoid`` reads the model's record the call addresses, and a schema
failure can be accepted like any divergence, counted apart in the report.

In process, through one ``Session`` on thread-jobs' reference: no run, no
subprocess.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
import yaml

from conformance.engine.deviations import DeviationsError, load_deviations
from conformance.engine.session import Session
from conformance.reporting import render_summary_markdown, validate_report
from conformance.specs import resolve_spec
from lifecycle_references.thread_jobs import ReferenceAdapter
from statemachines import load_spec

START = {"thread_id": "t1", "tool_call_id": "c1", "tool_name": "shell", "job_id": "j1"}


@pytest.fixture(scope="module")
def spec():
    return load_spec(resolve_spec("thread-jobs"))


def _file(tmp_path: Path, entries: list[dict]) -> Path:
    path = tmp_path / "deviations.yaml"
    path.write_text(yaml.safe_dump({"deviations": 1, "entries": entries}, sort_keys=False), encoding="utf-8")
    return path


def _session(spec, factory=ReferenceAdapter) -> Session:
    session = Session(spec, spec.default_parameters(), factory)
    session.reset()
    return session


def _terminal_avoid() -> dict:
    return {
        "id": "NO-LATE-OUTCOME",
        "reason": "Our runtime overwrites a finished job; we never report a second outcome.",
        "avoid": {
            "operation": "observe_outcome",
            "when": "record != null && record.status in ['completed', 'failed', 'cancelled', 'timed_out']",
        },
    }


def test_avoid_reads_the_record_the_call_addresses(spec, tmp_path):
    session = _session(spec)
    session.deviations = load_deviations(_file(tmp_path, [_terminal_avoid()]), spec=spec)
    _, failure = session.call("start_job", START)
    assert failure is None
    outcome = {"job_id": "j1", "outcome": "completed", "payload": "done"}
    assert session.avoided("observe_outcome", outcome) is None  # the job is running: the outcome is sent
    _, failure = session.call("observe_outcome", outcome)
    assert failure is None
    entry = session.avoided("observe_outcome", outcome)  # now it is terminal: a second outcome is not
    assert entry is not None and entry.id == "NO-LATE-OUTCOME"
    assert entry.example is not None and entry.example["record"]["status"] == "completed"
    assert session.avoided("observe_outcome", {**outcome, "job_id": "j2"}) is None  # no such record: null
    report = session.deviations.to_report()
    assert report["avoided"] == 1
    session.close()


def test_an_accept_may_not_read_the_record(spec, tmp_path):
    entry = {"id": "X", "reason": "r", "accept": {"path": "error", "when": "record.status == 'completed'"}}
    with pytest.raises(DeviationsError, match=r"reads record; it may read .*failure"):
        load_deviations(_file(tmp_path, [entry]), spec=spec)


class _GoneJobEffect(ReferenceAdapter):
    """Reports an injected message with no job id after the job it was for
    is gone: an effect that breaks its declared schema."""

    def call(self, operation: str, args: dict) -> Any:
        answer = super().call(operation, args)
        if operation == "list_jobs":
            answer = {
                **answer,
                "effects": [{"effect": "message_injected", "thread_id": "t1", "role": "assistant", "text": "late"}],
            }
        return answer


def test_a_schema_failure_is_accepted_counted_and_listed(spec, tmp_path):
    entry = {
        "id": "GONE-JOB-EFFECT",
        "reason": "A delivery whose job was evicted carries no job id.",
        "accept": {"operation": "list_jobs", "path": "effects", "when": "failure == 'schema' || size(expected) == 0"},
    }
    session = _session(spec, _GoneJobEffect)
    _, failure = session.call("list_jobs", {"thread_id": "t1"})
    assert failure is not None and failure.kind == "schema"  # without the file: a schema failure
    session.deviations = load_deviations(_file(tmp_path, [entry]), spec=spec, today=dt.date(2026, 1, 1))
    session.reset()
    _, failure = session.call("list_jobs", {"thread_id": "t1"})
    assert failure is None, failure
    block = session.deviations.to_report()
    (listed,) = block["entries"]
    assert listed["schema_count"] == 1 and block["schema_accepted"] == 1
    assert listed["count"] == 2  # the schema failure, and then the effect the model does not predict
    assert listed["schema_example"]["path"] == "effects[0]"
    assert "job_id" in listed["schema_example"]["expected"]  # the schema's message
    report = {"verdict": "pass", "exit_code": 0, "scenarios": [], "deviations": block}
    summary = render_summary_markdown(report)
    assert "1 of them a schema failure" in summary
    assert not [e for e in validate_report(report) if "deviations" in e]
    session.close()


def test_a_schema_failure_not_covered_still_fails(spec, tmp_path):
    entry = {"id": "OTHER", "reason": "r", "accept": {"operation": "list_jobs", "path": "result.jobs"}}
    session = _session(spec, _GoneJobEffect)
    session.deviations = load_deviations(_file(tmp_path, [entry]), spec=spec)
    _, failure = session.call("list_jobs", {"thread_id": "t1"})
    assert failure is not None and failure.kind == "schema" and failure.path == "effects[0]"
    session.close()


def test_the_docs_examples_load(spec, tmp_path):
    """Every whole deviations file docs/deviations.md shows is valid for thread-jobs."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "deviations.md").read_text(encoding="utf-8")
    blocks = [b for b in text.split("```yaml\n")[1:] if b.startswith("deviations: 1\nspec: thread-jobs")]
    assert len(blocks) >= 3
    for i, block in enumerate(blocks):
        path = tmp_path / f"example-{i}.yaml"
        path.write_text(block.split("```")[0], encoding="utf-8")
        load_deviations(path, spec=spec)


def test_merged_shards_add_up_accepted_schema_failures():
    from conformance.engine.shards import merge_deviations

    def section(count: int, schema: int) -> dict:
        entry = {"id": "E", "kind": "accept", "reason": "r", "count": count, "schema_count": schema}
        return {
            "file": "d.yaml",
            "accepted": count,
            "avoided": 0,
            "schema_accepted": schema,
            "expired": [],
            "entries": [entry],
        }

    merged = merge_deviations([section(3, 1), section(4, 2)])
    assert merged is not None
    assert merged["schema_accepted"] == 3 and merged["entries"][0]["schema_count"] == 3
    assert merged["accepted"] == 7 and merged["entries"][0]["count"] == 7
