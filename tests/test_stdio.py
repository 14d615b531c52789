"""The stdio transport (docs/adapter-protocol.md): any program speaking JSON
lines on stdin/stdout is checked like an in-process adapter.

End-to-end tests run the real command line (``python -m conformance.cli run
SPEC --adapter-cmd CMD``) in a subprocess against the programs in
``tests/fixtures/stdio/``: each wraps the kit's reference runtime through the
example adapter (``examples/python-stdio/adapter.py``) and misbehaves in one
way. Every run must finish, write its report, say what happened, and print
no traceback. Exit codes: 1 for misbehaviour during the run, 2 for a program
refused at the handshake (or one that cannot start).

The unit tests at the end drive :class:`conformance.adapters.stdio.StdioAdapter`
directly: concurrency by id, restarts after a crash, close() on a hung
program, the stderr ring buffer and the line length cap.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest
from scenario_verdicts import conforms

from conformance.adapters.stdio import STDERR_TAIL_BYTES, ProgramExited, StdioAdapter, split_command, stdio_factory
from conformance.adapters.stdio_protocol import MAX_LINE_BYTES, ProtocolError
from conformance.engine.loaded_specs import load_spec_once
from conformance.errors import AdapterLoadError

ROOT = Path(__file__).resolve().parents[1]
SPEC = "spec/thread-jobs.yaml"


def _default_scenarios() -> int:
    from conformance.engine.scenarios import not_applicable_ids

    spec = load_spec_once(ROOT / SPEC)
    return len(spec.scenarios) - len(not_applicable_ids(spec, spec.default_parameters(), {"concurrent": True}))


DEFAULT_SCENARIOS = _default_scenarios()  # 31 seed rows + B10-B14 + regressions R1, R2 today
VERSION = load_spec_once(ROOT / SPEC).version  # the bundled thread-jobs version
# The running interpreter, never a `python` from PATH (it may lack the kit).
PY = shlex.quote(sys.executable)
EXAMPLE = f"{PY} examples/python-stdio/adapter.py"


def fixture(name: str, *args: str) -> str:
    return " ".join([PY, f"tests/fixtures/stdio/{name}.py", *args])


class Run:
    def __init__(self, proc: subprocess.CompletedProcess, report_dir: Path, duration: float):
        self.code, self.out, self.duration = proc.returncode, proc.stdout + proc.stderr, duration
        path = report_dir / "report.json"
        assert path.exists(), f"no report.json was written\n{self.out}"
        self.report = json.loads(path.read_text(encoding="utf-8"))

    @property
    def scenarios(self) -> dict:
        return {s["id"]: s for s in self.report["scenarios"]}

    def failures(self, kind: str | None = None) -> list[dict]:
        found = [s["failure"] for s in self.report["scenarios"] if s.get("failure")]
        if self.report.get("stateful") and self.report["stateful"].get("failure"):
            found.append(self.report["stateful"]["failure"])
        return [f for f in found if kind is None or f["kind"] == kind]


def run_kit(
    tmp_path: Path,
    command: str,
    *options: str,
    env: dict | None = None,
    timeout: float = 240,
    subcommand: tuple[str, ...] = ("run", SPEC),
) -> Run:
    report_dir = tmp_path / "report"
    argv = [
        sys.executable,
        "-P",
        "-m",
        "conformance.cli",
        *subcommand,
        "--adapter-cmd",
        command,
        "--report-dir",
        str(report_dir),
        "--timeout",
        "2",
        *options,
    ]
    started = time.perf_counter()
    proc = subprocess.run(
        argv,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )
    run = Run(proc, report_dir, time.perf_counter() - started)
    assert "Traceback" not in run.out, run.out
    assert "internal error" not in run.out, run.out
    return run


def assert_went_on(run: Run, minimum_passed: int = 1) -> None:
    """Every scenario got a verdict and some passed: the run was not cut short."""
    verdicts = [s["verdict"] for s in run.report["scenarios"]]
    # every scenario that applies under the defaults (N11, E14, B9 are for the psi-runtime profile)
    assert len(verdicts) == DEFAULT_SCENARIOS, verdicts
    assert verdicts.count("pass") >= minimum_passed, verdicts


# ------------------------------------------------------------ correct programs
@pytest.mark.slow
def test_the_python_example_passes_scenarios_and_stateful(tmp_path):
    run = run_kit(tmp_path, EXAMPLE, "--profile", "quick")
    assert run.code == 0, run.out
    report = run.report
    assert report["verdict"] == "pass"
    assert report["implementation"]["adapter"] == EXAMPLE
    assert report["implementation"]["name"] == "reference-thread-jobs"
    assert report["implementation"]["capabilities"] == {"concurrent": False}
    assert report["stateful"]["verdict"] == "pass" and report["stateful"]["steps"] > 100
    verdicts = {s["verdict"] for s in report["scenarios"]}
    assert verdicts <= {"pass", "skip"}
    # scenarios needing concurrency are skipped: the example answers one request at a time
    assert {s["id"] for s in report["scenarios"] if s["verdict"] == "skip"} == {"B1", "B2", "B4", "B12", "B13", "R2"}


@pytest.mark.slow
def test_a_concurrent_program_answering_out_of_order_passes(tmp_path):
    run = run_kit(tmp_path, fixture("concurrent"), "--no-stateful")
    assert run.code == 0, run.out
    assert run.report["implementation"]["capabilities"] == {"concurrent": True}
    assert all(conforms(s) for s in run.report["scenarios"]), run.out


# ------------------------------------------------------------ misbehaving programs
@pytest.mark.slow
def test_a_program_exiting_mid_run_is_reported_with_status_and_stderr_and_restarted(tmp_path):
    command = fixture("exits_midrun")
    run = run_kit(tmp_path, command, "--no-stateful")
    assert run.code == 1, run.out
    errors = run.failures("implementation-error")
    assert errors, run.out
    message = errors[0]["message"]
    assert "ProgramExited" in message and "exited with status 3" in message
    assert "fatal: simulated crash in" in message  # the stderr tail
    assert "the tail of its stderr" in message
    # the program was started again: later scenarios ran, and some passed
    ids = [s["id"] for s in run.report["scenarios"]]
    first_failure = next(i for i, s in enumerate(run.report["scenarios"]) if s["failure"])
    assert any(s["verdict"] == "pass" for s in run.report["scenarios"][first_failure + 1 :]), ids
    assert_went_on(run)
    replays = [f["replay"] for f in run.failures()]
    assert all(f"--adapter-cmd {shlex.quote(command)}" in r for r in replays), replays


@pytest.mark.hypothesis  # its run explores (tests/hypothesis_marker.py)
def test_a_crash_during_the_stateful_exploration_is_an_implementation_error(tmp_path):
    run = run_kit(tmp_path, fixture("exits_midrun"), "--no-scenarios", "--profile", "quick")
    assert run.code == 1, run.out
    failure = run.report["stateful"]["failure"]
    assert failure["kind"] in ("implementation-error", "nondeterminism"), failure
    assert "exited with status 3" in failure["message"]


@pytest.mark.slow
def test_a_hung_program_times_out_is_killed_and_the_run_goes_on(tmp_path):
    tag = f"hang-{uuid.uuid4().hex}"
    run = run_kit(tmp_path, fixture("hangs", tag), "--no-stateful")
    assert run.code == 1, run.out
    e11 = run.scenarios["E11"]
    assert e11["verdict"] == "fail" and e11["failure"]["kind"] == "timeout", e11
    assert "retry_job did not answer within 2s" in e11["failure"]["message"]
    assert [s["id"] for s in run.report["scenarios"] if s["verdict"] == "fail"] == ["E11"]
    assert_went_on(run, minimum_passed=25)  # the program hangs for ever: a kit that waited would not end
    # the program ignores SIGTERM; it must still be gone (killed), not orphaned
    leftover = subprocess.run(["pgrep", "-f", tag], capture_output=True, text=True)
    assert leftover.stdout.strip() == "", f"left running: {leftover.stdout}"


def failed_only(run: Run, *ids: str) -> None:
    failed = [s["id"] for s in run.report["scenarios"] if s["verdict"] in ("fail", "error")]
    assert failed == list(ids), run.out
    assert_went_on(run, minimum_passed=35 - 4 - len(ids))


def test_a_non_json_line_is_a_protocol_error_quoting_the_line(tmp_path):
    run = run_kit(tmp_path, fixture("garbage"), "--no-stateful")
    assert run.code == 1, run.out
    failed_only(run, "E3", "E13")  # the scenarios calling observe_llm_error
    for failure in run.failures():
        assert failure["kind"] == "implementation-error", failure
        assert failure["operation"] == "observe_llm_error"
        assert (
            "observe_llm_error raised ProtocolError: the program printed a line that is not JSON" in failure["message"]
        )
        assert "'DEBUG handling observe_llm_error'" in failure["message"]  # the offending line


def test_an_answer_with_an_unknown_id_is_a_protocol_error(tmp_path):
    run = run_kit(tmp_path, fixture("unknown_id"), "--no-stateful")
    assert run.code == 1, run.out
    failed_only(run, "E12")  # the scenario calling restart
    failure = run.scenarios["E12"]["failure"]
    assert failure["kind"] == "implementation-error" and failure["operation"] == "restart"
    assert re.search(
        r"restart raised ProtocolError: the program answered unknown request id (\d+) .*"
        r"'\{\"id\": \1, \"result\": \{\}, \"effects\": \[\]\}'",
        failure["message"],
    ), failure["message"]


def test_two_answers_to_one_request_are_a_protocol_error(tmp_path):
    run = run_kit(tmp_path, fixture("answers_twice"), "--no-stateful")
    assert run.code == 1, run.out
    failed_only(run, "E12")
    failure = run.scenarios["E12"]["failure"]
    assert failure["kind"] == "implementation-error", failure
    # noticed at the next request, which fails with the offending line
    assert failure["operation"] == "inspect_job"
    assert re.search(
        r"ProtocolError: the program answered request (\d+) twice; the second answer: "
        r"'\{\"id\": \1, \"result\": \{\}",
        failure["message"],
    ), failure["message"]


def test_a_result_breaking_the_operation_schema_names_the_schema_path(tmp_path):
    run = run_kit(tmp_path, fixture("bad_schema"), "--no-stateful")
    assert run.code == 1, run.out
    n2 = run.scenarios["N2"]["failure"]
    assert n2["kind"] == "schema", n2
    assert n2["path"] == "result.job_id"
    assert "schema path properties/job_id/type" in n2["message"] and "7 is not of type 'string'" in n2["message"]
    assert run.scenarios["N1"]["verdict"] == "pass"  # no start_job there
    assert_went_on(run)


def test_a_program_answering_differently_on_replay_is_reported_as_nondeterministic(tmp_path):
    run = run_kit(tmp_path, fixture("nondeterministic"), "--no-stateful")
    assert run.code == 1, run.out
    kinds = {f["kind"] for f in run.failures()}
    assert kinds == {"nondeterminism"}, run.out
    message = run.failures()[0]["message"]
    assert "answered differently when the same steps were replayed" in message
    assert "wrong order" in message
    assert_went_on(run, minimum_passed=20)


def test_a_report_with_nondeterminism_validates(tmp_path):
    run = run_kit(tmp_path, fixture("nondeterministic"), "--no-stateful")
    assert {f["kind"] for f in run.failures()} == {"nondeterminism"}
    assert [p for p in run.report["problems"] if p["kind"] == "report-error"] == []


@pytest.mark.slow
def test_nondeterminism_in_the_stateful_exploration(tmp_path):
    run = run_kit(tmp_path, fixture("nondeterministic"), "--no-scenarios", "--profile", "quick")
    assert run.code == 1, run.out
    failure = run.report["stateful"]["failure"]
    assert failure["kind"] in ("nondeterminism", "divergence"), failure


@pytest.mark.parametrize(
    "command, said",
    [
        (fixture("protocol2"), "the program speaks protocol 2, the kit speaks protocol 1"),
        (fixture("wrong_spec"), "the program implements task-queue 1.0.0"),
        (fixture("wrong_spec", "thread-jobs", "3.0.0"), "the program implements thread-jobs 3.0.0"),
    ],
    ids=["protocol-2", "another-spec", "another-major-version"],
)
def test_a_program_speaking_something_else_is_refused_at_the_handshake(tmp_path, command, said):
    run = run_kit(tmp_path, command)
    assert run.code == 2, run.out
    report = run.report
    assert report["verdict"] == "error" and report["scenarios"] == []
    message = report["problems"][0]["message"]
    assert report["problems"][0]["kind"] == "adapter-error"
    assert message.startswith("handshake refused: "), message
    assert said in message
    assert f"expected protocol 1 and spec thread-jobs 2.x (the kit runs thread-jobs {VERSION})" in message
    assert report["implementation"]["adapter"] == command
    assert said.split(",")[0] in run.out.replace("\n", "")
    # another major version of the same spec: the versions, and where what changed is written
    pointer = "`conformance specs --changelog thread-jobs`"
    if said.startswith("the program implements thread-jobs"):
        assert f"The program declares thread-jobs 3.0.0 and the kit runs {VERSION}" in message and pointer in message
    else:
        assert pointer not in message


@pytest.mark.parametrize(
    "command, said",
    [
        ("no-such-program-xyz --flag", "cannot start the adapter program 'no-such-program-xyz --flag'"),
        (f"{PY} -c 'import sys; sys.exit(4)'", "handshake failed: the program exited with status 4"),
        ("", "the adapter command is empty"),
        ("'unbalanced", "cannot split adapter command"),
        (f"{PY} -c 'import time; time.sleep(60)'", "did not answer within 2s"),
    ],
    ids=["missing", "exits-at-once", "empty", "bad-quotes", "silent"],
)
def test_a_program_that_cannot_start_is_an_adapter_error(tmp_path, command, said):
    run = run_kit(tmp_path, command)
    assert run.code == 2, run.out
    assert said in run.report["problems"][0]["message"]


def test_adapter_cmd_excludes_adapter(tmp_path):
    argv = [
        sys.executable,
        "-P",
        "-m",
        "conformance.cli",
        "run",
        SPEC,
        "--adapter-cmd",
        EXAMPLE,
        "--adapter",
        "lifecycle_references.thread_jobs:ReferenceAdapter",
        "--report-dir",
        str(tmp_path),
    ]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "cannot be combined with --adapter" in proc.stderr


@pytest.mark.slow
def test_replay_commands_use_adapter_cmd_and_work(tmp_path):
    command = fixture("bad_schema")
    run = run_kit(tmp_path, command, "--no-stateful", "--scenario", "N2")
    assert run.code == 1
    replay = run.scenarios["N2"]["failure"]["replay"]
    assert replay == f"conformance run {SPEC} --adapter-cmd {shlex.quote(command)} --scenario N2"
    assert run.report["replay"].startswith(f"conformance run {SPEC} --adapter-cmd {shlex.quote(command)} ")
    # `conformance replay` of a steps file takes --adapter-cmd as well
    steps = tmp_path / "steps.yaml"
    steps.write_text(
        textwrap.dedent("""\
        id: start-one
        title: start one job
        steps:
          - call: start_job
            args: {thread_id: t1, tool_call_id: c1, tool_name: build}
        """),
        encoding="utf-8",
    )
    replayed = run_kit(tmp_path / "replay", command, subcommand=("replay", SPEC, str(steps)))
    assert replayed.code == 1, replayed.out
    failure = replayed.report["scenarios"][0]["failure"]
    assert failure["kind"] == "schema" and failure["path"] == "result.job_id"
    assert f"--adapter-cmd {shlex.quote(command)}" in failure["replay"]
    ok = run_kit(tmp_path / "replay-ok", EXAMPLE, subcommand=("replay", SPEC, str(steps)))
    assert ok.code == 0, ok.out


# ------------------------------------------------------------ StdioAdapter directly
def python_program(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


SPEC_ID = ("thread-jobs", VERSION)


@pytest.fixture
def adapters():
    made: list[StdioAdapter] = []

    def make(command) -> StdioAdapter:
        adapter = StdioAdapter(command, *SPEC_ID, cwd=str(ROOT))
        made.append(adapter)
        return adapter

    yield make
    for adapter in made:
        adapter.close()


def test_concurrent_calls_are_routed_by_id(adapters):
    adapter = adapters(split_command(fixture("concurrent")))
    assert adapter.describe()["capabilities"] == {"concurrent": True}
    adapter.reset(0)
    results: dict[int, dict] = {}

    def start(i: int) -> None:
        results[i] = adapter.call(
            "start_job", {"thread_id": "t1", "tool_call_id": f"c{i}", "tool_name": "x", "job_id": f"j{i}"}
        )

    threads = [threading.Thread(target=start, args=(i,)) for i in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert {i: r["result"]["job_id"] for i, r in results.items()} == {i: f"j{i}" for i in range(24)}
    listed = adapter.call("list_jobs", {"thread_id": "t1"})["result"]["jobs"]
    assert len(listed) == 24


def test_a_crash_fails_the_pending_call_and_reset_restarts(adapters):
    adapter = adapters(split_command(fixture("exits_midrun")))
    adapter.describe()
    adapter.reset(0)
    first_pid = adapter.pid
    for _ in range(4):
        assert "result" in adapter.call("list_jobs", {"thread_id": "t1"})
    with pytest.raises(ProgramExited, match="exited with status 3") as caught:
        adapter.call("list_jobs", {"thread_id": "t1"})
    assert "fatal: simulated crash in list_jobs (call 5)" in str(caught.value)
    with pytest.raises(ProgramExited):  # still dead until the next reset
        adapter.call("list_jobs", {"thread_id": "t1"})
    adapter.reset(0)
    assert adapter.pid != first_pid
    assert adapter.call("list_jobs", {"thread_id": "t1"}) == {"result": {"jobs": []}, "effects": []}


def test_close_never_blocks_on_a_hung_program(adapters):
    adapter = adapters(split_command(fixture("hangs")))
    adapter.describe()
    adapter.reset(0)
    pid = adapter.pid
    outcome: list = []

    def stuck() -> None:
        try:
            adapter.call("retry_job", {})
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=stuck, daemon=True)
    thread.start()
    time.sleep(0.5)
    closer = threading.Thread(target=adapter.close, daemon=True)
    closer.start()
    closer.join(60)  # the program hangs for ever: a close() that waited for it would never return
    assert not closer.is_alive(), "close() blocked on the hung program"
    thread.join(60)
    assert outcome and isinstance(outcome[0], ProgramExited)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_timeout_on_the_main_thread_abandons_the_request_and_reset_restarts(adapters):
    adapter = adapters(split_command(fixture("hangs")))
    adapter.describe()
    adapter.reset(0)
    pid = adapter.pid

    class Alarm(Exception):
        pass

    def on_alarm(signum, frame):
        raise Alarm()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        with pytest.raises(Alarm):
            adapter.call("retry_job", {})
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    adapter.reset(0)  # the connection is stale: a new process, a fresh handshake
    assert adapter.pid != pid
    assert "result" in adapter.call("list_jobs", {"thread_id": "t1"})


def test_the_stderr_ring_buffer_keeps_only_the_tail(adapters):
    adapter = adapters(
        python_program("""
        import sys
        for i in range(20000):
            sys.stderr.write(f"log line {i}\\n")
        sys.stderr.write("the very end\\n")
        sys.exit(5)
    """)
    )
    with pytest.raises(AdapterLoadError) as caught:
        adapter.describe()
    message = str(caught.value)
    assert "exited with status 5" in message and "its stderr ends with 'the very end'" in message
    tail = message.split("---\n", 1)[1]
    assert len(tail.encode()) <= STDERR_TAIL_BYTES and "log line 19999" in tail and "log line 0\n" not in tail


def test_a_huge_line_is_a_protocol_error_not_a_memory_blowup(adapters):
    adapter = adapters(
        python_program(f"""
        import sys, json
        hello = json.loads(sys.stdin.readline())
        sys.stdout.write(json.dumps({{"id": hello["id"], "protocol": 1,
            "implementation": {{"name": "huge", "version": "0"}},
            "specs": [{{"id": "thread-jobs", "version": "2.0.0"}}]}}) + "\\n")
        sys.stdout.flush()
        for line in sys.stdin:
            request = json.loads(line)
            sys.stdout.write('{{"id": ' + str(request["id"]) + ', "result": "' + "x" * {MAX_LINE_BYTES + 10} + '"}}\\n')
            sys.stdout.flush()
    """)
    )
    adapter.describe()
    with pytest.raises(ProtocolError, match="longer than 16777216 bytes") as caught:
        adapter.reset(0)
    assert '{"id": 2, "result": "xxx' in str(caught.value)
    assert len(str(caught.value)) < 1000


def test_a_reset_answered_with_an_error_says_so(adapters):
    adapter = adapters(
        python_program("""
        import sys, json
        for line in sys.stdin:
            r = json.loads(line)
            if r["type"] == "hello":
                out = {"protocol": 1, "implementation": {"name": "x", "version": "0"},
                       "specs": [{"id": "thread-jobs", "version": "2.4.0", "parameters": {"retention_limit": 3}}]}
            else:
                out = {"error": {"kind": "broken", "message": "cannot reset today"}}
            sys.stdout.write(json.dumps({"id": r["id"], **out}) + "\\n")
            sys.stdout.flush()
    """)
    )
    assert adapter.describe() == {
        "name": "x",
        "version": "0",
        "profile": None,
        "parameters": {"retention_limit": 3},
        "capabilities": {},
    }
    with pytest.raises(Exception, match="answered reset with error broken: cannot reset today"):
        adapter.reset(0)


def test_the_factory_checks_the_command_and_builds_fresh_programs():
    with pytest.raises(AdapterLoadError):
        stdio_factory("", {"id": "thread-jobs", "version": "1.0.0"})
    build = stdio_factory(EXAMPLE, SPEC_ID, cwd=str(ROOT))
    first, second = build(), build()
    try:
        assert first.pid != second.pid
        assert first.describe()["name"] == second.describe()["name"] == "reference-thread-jobs"
    finally:
        first.close()
        second.close()
