"""Passive conformance: `conformance run --record` writes traces, and
`conformance check-trace` checks recorded traces against a spec with the
same model, checks and reports as a live run.

- traces recorded from each bundled reference pass;
- the same trace with one answer edited fails at that line;
- (traces recorded from every shipped mutant fail exactly where the live run
  failed, scenario by scenario: tests/test_mutants.py, on the run it makes anyway);
- overlapping operations no sequential order explains fail as a
  linearizability failure, those some order explains pass;
- a trace that cannot be read is an error naming file:line, exit 2.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_result import kit as run_kit

from conformance.reporting import validate_report
from conformance.traces import check_trace_run

SPECS = ["thread-jobs", "task-progress", "async-jobs", "async-command"]


def kit(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_kit(*args, cwd=cwd)


def report_of(directory: Path) -> dict:
    report = json.loads((directory / "report.json").read_text(encoding="utf-8"))
    assert validate_report(report) == []
    return report


def record(base: Path, spec: str, *scenarios: str) -> None:
    """Record the reference's scenarios of ``spec`` (all when none are named)
    as traces in ``base / spec``."""
    chosen = [arg for scenario in scenarios for arg in ("--scenario", scenario)] or ["--no-stateful"]
    out = ["--record", str(base / spec), "--report-dir", str(base / f"{spec}-run")]
    proc = kit("run", spec, *chosen, *out, cwd=base)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def thread_jobs_traces(tmp_path_factory):
    """thread-jobs scenarios N3 and N4 of its reference, recorded once (the
    fast tests edit these)."""
    base = tmp_path_factory.mktemp("thread-jobs-traces")
    record(base, "thread-jobs", "N3", "N4")
    return base


@pytest.mark.slow
@pytest.mark.parametrize("spec", SPECS)
def test_traces_recorded_from_a_reference_pass(spec, tmp_path):
    # the scenario matrix of the spec's reference, recorded by this test alone: a fixture shared by
    # the four specs recorded all four in every pytest-xdist worker that ran one of them
    recorded = tmp_path / "recorded"
    recorded.mkdir()
    record(recorded, spec)
    traces = sorted((recorded / spec).glob("*.jsonl"))
    live = report_of(recorded / f"{spec}-run")
    applicable = {s["id"] for s in live["scenarios"] if s["verdict"] == "pass"}
    assert {t.stem for t in traces} == applicable  # one trace per scenario that ran
    proc = kit("check-trace", spec, *map(str, traces), "--report-dir", str(tmp_path / "r"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = report_of(tmp_path / "r")
    assert report["verdict"] == "pass" and len(report["scenarios"]) == len(traces)
    assert all(s["category"] == "trace" for s in report["scenarios"])


def test_an_edited_answer_fails_at_its_line(thread_jobs_traces, tmp_path):
    lines = (thread_jobs_traces / "thread-jobs" / "N3.jsonl").read_text(encoding="utf-8").splitlines()
    number = next(i for i, line in enumerate(lines, 1) if '"status": "running"' in line and '"result"' in line)
    lines[number - 1] = lines[number - 1].replace('"status": "running"', '"status": "completed"', 1)
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join(lines) + "\n", encoding="utf-8")

    proc = kit("check-trace", "thread-jobs", str(edited), "--report-dir", str(tmp_path / "r"), cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    failure = report_of(tmp_path / "r")["scenarios"][0]["failure"]
    assert failure["kind"] == "schema"  # a start answers "running" only: the spec's result schema says so
    assert failure["message"].startswith(f"{edited}:{number}: start_job"), failure["message"]
    assert "status" in failure["message"].splitlines()[0]
    assert f">  {number:>5} | " in failure["message"] or f"> {number:>6} | " in failure["message"]


HEADER = {"trace": 1, "spec": {"id": "thread-jobs", "version": "1.0.0"}, "implementation": {"name": "hand-written"}}
START = {"call": "begin_turn", "args": {"thread_id": "t1"}, "result": {}, "effects": [], "at_ms": 0}


def _start_job(job_id: str, answer: dict, start: int, end: int) -> dict:
    return {
        "call": "start_job",
        "args": {"thread_id": "t1", "tool_call_id": "c1", "tool_name": "build", "job_id": job_id},
        **answer,
        "effects": [],
        "start_ms": start,
        "end_ms": end,
    }


def _write(path: Path, events: list[dict]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in [HEADER, START, *events]), encoding="utf-8")
    return path


def test_overlapping_operations_some_order_explains_pass(tmp_path):
    trace = _write(
        tmp_path / "ok.jsonl",
        [
            _start_job(
                "j2",
                {
                    "error": {
                        "kind": "job_exists_for_tool_call",
                        "message": "Background job already exists for tool_call_id",
                    }
                },
                10,
                30,
            ),
            _start_job("j1", {"result": {"mode": "background", "job_id": "j1", "status": "running"}}, 12, 20),
        ],
    )
    report = check_trace_run("thread-jobs", [str(trace)], None)
    assert report["verdict"] == "pass", report["scenarios"]


def test_overlapping_operations_no_order_explains_fail_as_linearizability(tmp_path):
    trace = _write(
        tmp_path / "lost-update.jsonl",
        [
            _start_job("j1", {"result": {"mode": "background", "job_id": "j1", "status": "running"}}, 10, 30),
            _start_job("j2", {"result": {"mode": "background", "job_id": "j2", "status": "running"}}, 12, 20),
        ],
    )
    report = check_trace_run("thread-jobs", [str(trace)], None)
    assert report["verdict"] == "fail"
    failure = report["scenarios"][0]["failure"]
    assert failure["kind"] == "linearizability", failure
    assert failure["message"].startswith(f"{trace}:3: ")  # the group starts at line 3


def test_the_same_operations_one_after_the_other_are_judged_in_order(tmp_path):
    trace = _write(
        tmp_path / "sequential.jsonl",
        [
            _start_job("j1", {"result": {"mode": "background", "job_id": "j1", "status": "running"}}, 10, 11),
            _start_job("j2", {"result": {"mode": "background", "job_id": "j2", "status": "running"}}, 12, 13),
        ],
    )
    report = check_trace_run("thread-jobs", [str(trace)], None)
    failure = report["scenarios"][0]["failure"]
    assert failure["kind"] == "divergence" and failure["message"].startswith(f"{trace}:4: start_job")


def test_resets_split_a_trace_into_sessions(tmp_path):
    ok = {
        "call": "start_job",
        "args": {"thread_id": "t1", "tool_call_id": "c1", "tool_name": "build", "job_id": "j1"},
        "result": {"mode": "background", "job_id": "j1", "status": "running"},
        "effects": [],
    }
    trace = _write(tmp_path / "two.jsonl", [ok, {"reset": True}, START, ok])
    report = check_trace_run("thread-jobs", [str(trace)], None)
    assert [s["id"] for s in report["scenarios"]] == ["two.jsonl:2", "two.jsonl:5"]
    assert report["verdict"] == "pass"


@pytest.mark.parametrize(
    "content, line, words",
    [
        (
            '{"trace": 1, "spec": {"id": "thread-jobs"}}\n{"call": "begin_turn", "args": {}, "result": {}}\nnot json\n',
            3,
            "not a JSON object",
        ),
        ('{"call": "begin_turn", "args": {}, "result": {}}\n', 1, "the first line must be the header"),
        ('{"trace": 2, "spec": {"id": "thread-jobs"}}\n', 1, "trace format 2 is not supported"),
        ('{"trace": 1, "spec": {"id": "task-progress"}}\n', 1, "the trace is of spec 'task-progress'"),
        (
            '{"trace": 1, "spec": {"id": "thread-jobs"}}\n{"call": "begin_turn", "args": {}}\n',
            2,
            "needs exactly one of `result` and `error`",
        ),
        ('{"trace": 1, "spec": {"id": "thread-jobs"}, "profile": "nope"}\n', 1, "profile 'nope' is not defined"),
    ],
)
def test_a_trace_that_cannot_be_read_names_its_line(tmp_path, content, line, words):
    trace = tmp_path / "bad.jsonl"
    trace.write_text(content, encoding="utf-8")
    proc = kit("check-trace", "thread-jobs", str(trace), "--report-dir", str(tmp_path / "r"), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{trace}:{line}" in proc.stderr and words in proc.stderr, proc.stderr
    report = report_of(tmp_path / "r")
    assert report["verdict"] == "error" and report["problems"][0]["where"] == f"{trace}:{line}"


def test_to_scenario_turns_the_failing_stretch_into_a_reviewable_scenario(thread_jobs_traces, tmp_path):
    import shutil

    import yaml

    lines = (thread_jobs_traces / "thread-jobs" / "N4.jsonl").read_text(encoding="utf-8").splitlines()
    number = next(i for i, line in enumerate(lines, 1) if '"injected": ["j1"]' in line)
    lines[number - 1] = lines[number - 1].replace('"injected": ["j1"]', '"injected": []', 1)
    edited = tmp_path / "lost-injection.jsonl"
    edited.write_text("\n".join(lines) + "\n", encoding="utf-8")
    scenario_file = tmp_path / "regression.yaml"

    proc = kit(
        "check-trace",
        "thread-jobs",
        str(edited),
        "--to-scenario",
        str(scenario_file),
        "--scenario-id",
        "T1",
        "--report-dir",
        str(tmp_path / "r"),
        cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"wrote scenario T1 to {scenario_file}" in proc.stdout
    scenario = yaml.safe_load(scenario_file.read_text(encoding="utf-8"))["scenarios"][0]
    assert scenario["id"] == "T1" and f"line {number}" in scenario["title"]
    assert scenario["steps"][-1]["call"] == "turn_boundary"
    assert scenario["steps"][-1]["expect"]["result"] == {"injected": []}  # what the trace observed
    # it assumes the recorded parameters, so pasted as is it does not run under another profile
    assert "params.max_bytes == " in scenario["assumes"] and "recorded under" in scenario["not_applicable"]

    # Added to a copy of the spec's matrix it is a valid scenario; the reference
    # passes every step but the last, whose expectation the author must review.
    spec_dir = tmp_path / "spec"
    spec_dir.mkdir()
    root = Path(__file__).resolve().parents[1] / "spec"
    for name in (
        "thread-jobs.yaml",
        "thread-jobs.scenarios.yaml",
        "lifecycle-spec-fragment.schema.json",
        "lifecycle-spec.schema.json",
    ):
        shutil.copy(root / name, spec_dir / name)
    matrix = spec_dir / "thread-jobs.scenarios.yaml"
    doc = yaml.safe_load(matrix.read_text(encoding="utf-8"))
    doc["scenarios"].append(scenario)
    matrix.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    assert kit("validate", str(spec_dir / "thread-jobs.yaml"), cwd=tmp_path).returncode == 0
    run = kit(
        "run",
        str(spec_dir / "thread-jobs.yaml"),
        "--scenario",
        "T1",
        "--no-stateful",
        "--report-dir",
        str(tmp_path / "r2"),
        cwd=tmp_path,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    failure = report_of(tmp_path / "r2")["scenarios"][0]["failure"]
    assert failure["kind"] == "expectation" and failure["message"].startswith("scenario T1")
    assert failure["step"] == len([s for s in failure["steps"]]) - 1  # the last step, nothing before it


def test_trace_writer_writes_what_check_trace_reads(tmp_path):
    from conformance.traces import TraceError, TraceWriter

    path = tmp_path / "own.jsonl"
    with TraceWriter(path, "thread-jobs", "1.0.0", implementation={"name": "my-runtime"}) as trace:
        trace.call("begin_turn", {"thread_id": "t1"}, result={}, effects=[], at_ms=0)
        trace.call(
            "start_job",
            {"thread_id": "t1", "tool_call_id": "c1", "tool_name": "build", "job_id": "j1"},
            result={"mode": "background", "job_id": "j1", "status": "running"},
            effects=[],
            at_ms=0,
        )
        trace.clock(10)
        trace.call(
            "start_job",
            {"thread_id": "t1", "tool_call_id": "c1", "tool_name": "build", "job_id": "j2"},
            error={"kind": "job_exists_for_tool_call", "message": "Background job already exists for tool_call_id"},
            effects=[],
            at_ms=10,
        )
        with pytest.raises(TraceError, match="exactly one of result= and error="):
            trace.call("list_jobs", {"thread_id": "t1"})
    report = check_trace_run("thread-jobs", [str(path)], None)
    assert report["verdict"] == "pass", report["scenarios"]
    assert len(path.read_text().splitlines()) == 5


@pytest.mark.slow
@pytest.mark.skipif(__import__("shutil").which("node") is None, reason="Node.js is not installed")
def test_the_node_runtime_records_its_own_trace_and_it_checks(tmp_path):
    root = Path(__file__).resolve().parents[1]
    trace = tmp_path / "node.jsonl"
    adapter = f"node {root / 'examples' / 'node-thread-jobs' / 'adapter.js'} --record-trace {trace}"
    run = kit(
        "run",
        "thread-jobs",
        "--adapter-cmd",
        adapter,
        "--no-stateful",
        "--report-dir",
        str(tmp_path / "r1"),
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    ran = [s for s in report_of(tmp_path / "r1")["scenarios"] if s["verdict"] == "pass"]
    check = kit("check-trace", "thread-jobs", str(trace), "--report-dir", str(tmp_path / "r2"), cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    assert len(report_of(tmp_path / "r2")["scenarios"]) == len(ran)  # one session per scenario it answered
