"""Implementations that misbehave at run time (issue 12, items 2, 4, 5, 6, 12, 16).

Not wrong answers (tests/test_bad_input.py) but wrong behaviour of the
implementation as a running thing: a close() that hangs, exits or raises
KeyboardInterrupt; a KeyboardInterrupt or sys.exit of its own; threads left
behind; output on the kit's stdout, fd 1 closed; a stdio program whose
children hold its stdout or detach; a command-line tool's detached workers
when the run is stopped by SIGTERM.

Every test runs the real command line in a child process under a timeout and
requires: no traceback, no hang, the documented exit code, report.json valid
against its schema and naming what happened, and (where processes are
involved) nothing left running.

Exit codes (README, ARCHITECTURE.md, docs/ci.md): a fault of the implementation
fails the run (1) — a close() that hangs, raises, calls sys.exit or raises
KeyboardInterrupt; a call that raises KeyboardInterrupt or SystemExit — and
describe() or the constructor failing that way is an adapter-loading error
(2). Only a signal the kit receives (a real Ctrl-C, SIGTERM) interrupts the
run (130, 143). Threads left behind do not change the verdict's code.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conformance.reporting import validate_report

FIXTURES = Path(__file__).resolve().parent / "fixtures"
STDIO = FIXTURES / "stdio"
MARKER = "HOSTILE-PRINT"  # what tests/fixtures/hostile_adapters.py prints


def _env(**extra: str) -> dict:
    env = dict(os.environ)
    env.pop("CONFORMANCE_DEBUG", None)
    # The fixture module imports from its own directory; the kit under test
    # stays the installed one (no source tree on the path, and -P below).
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(FIXTURES), env.get("PYTHONPATH")]))
    env["COLUMNS"] = "200"
    env.update(extra)
    return env


class Run:
    def __init__(self, proc: subprocess.CompletedProcess, seconds: float, report_dir: Path):
        self.code, self.stdout, self.stderr = proc.returncode, proc.stdout, proc.stderr
        self.seconds, self.report_dir = seconds, report_dir

    def describe(self) -> str:
        return f"exit {self.code} after {self.seconds:.1f}s\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"

    def report(self) -> dict:
        report = json.loads((self.report_dir / "report.json").read_text(encoding="utf-8"))
        assert validate_report(report) == [], validate_report(report)
        return report

    def problems(self, kind: str) -> list[dict]:
        return [p for p in self.report()["problems"] if p["kind"] == kind]


def kit(tmp_path: Path, *args: str, timeout: float = 120, **env: str) -> Run:
    report_dir = tmp_path / "reports"
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "conformance.cli", *args, "--report-dir", str(report_dir)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=_env(**env),
        timeout=timeout,
    )
    run = Run(proc, time.monotonic() - started, report_dir)
    for text in (run.stdout, run.stderr):
        assert "Traceback" not in text, run.describe()
        assert "Aborted!" not in text, run.describe()
        assert "internal error" not in text, run.describe()
    return run


def run_adapter(tmp_path: Path, attr: str, *args: str, timeout: float = 120) -> Run:
    return kit(tmp_path, "run", "thread-jobs", "--adapter", f"hostile_adapters:{attr}", *args, timeout=timeout)


def scenarios(*ids: str) -> list[str]:
    return ["--no-stateful", *[arg for sid in ids for arg in ("--scenario", sid)]]


def by_id(report: dict, sid: str) -> dict:
    return next(s for s in report["scenarios"] if s["id"] == sid)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError, PermissionError):
        return False
    return state != "Z"  # a zombie has exited


def wait_until_gone(pids: list[int], seconds: float = 10) -> list[int]:
    deadline = time.monotonic() + seconds
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")


# ------------------------------------------------------------------ item 2: close()
@pytest.mark.slow
@pytest.mark.parametrize(
    "attr, kind, says",
    [
        # close() gets the timeout, but at least 5 s (a program's bye and exit may take longer than a call)
        pytest.param("CloseHangs", "timeout", "close() at the end of the run did not return within 5s", id="hangs"),
        pytest.param(
            "CloseExits", "implementation-error", "close() at the end of the run raised SystemExit: 7", id="sys-exit-7"
        ),
    ],
)
def test_close_that_hangs_or_exits_fails_the_run_with_a_report(tmp_path, attr, kind, says):
    run = run_adapter(tmp_path, attr, *scenarios("N1", "N2"), "--timeout", "0.5", timeout=90)

    assert run.code == 1, run.describe()  # not 7, not a hang (the hang outlasts the run's limit), not a traceback
    report = run.report()
    assert report["verdict"] == "fail" and report["exit_code"] == 1
    assert {by_id(report, s)["verdict"] for s in ("N1", "N2")} == {"pass"}
    problem = next(p for p in report["problems"] if p["kind"] == kind)
    assert problem["where"] == "closing the implementation" and says in problem["message"], problem
    assert says in run.stdout + run.stderr, run.describe()
    assert "Verdict: FAIL" in run.stdout, run.describe()
    # CI sees it as a failed check, not as green
    junit = ET.parse(run.report_dir / "junit.xml").getroot()
    failures = list(junit.iter("failure"))
    assert failures and failures[0].get("type") == kind, ET.tostring(junit, encoding="unicode")[:2000]


@pytest.mark.slow
def test_close_hanging_after_a_timed_out_call_does_not_hang_the_restart(tmp_path):
    # N2 times out in inspect_job; starting N3 closes the implementation
    # (a restart), whose close() hangs as well; then the end of the run does.
    run = run_adapter(tmp_path, "CloseHangsAfterTimeout", *scenarios("N1", "N2", "N3"), "--timeout", "0.5", timeout=90)

    assert run.code == 1, run.describe()  # the hangs outlast the run's limit: the kit did not wait for them
    report = run.report()
    assert by_id(report, "N1")["verdict"] == "pass"
    assert by_id(report, "N2")["failure"]["kind"] == "timeout"
    restart = [p for p in run.problems("timeout") if "before the implementation was started again" in p["message"]]
    assert restart and restart[0]["where"] == "scenario N3", report["problems"]
    assert [p for p in run.problems("timeout") if p["where"] == "closing the implementation"], report["problems"]


# ---------------------------------------------------------- item 4: KeyboardInterrupt
OWN = "the implementation's own: no Ctrl-C or signal reached the kit"


def test_keyboardinterrupt_raised_by_a_call_is_that_calls_failure(tmp_path):
    run = run_adapter(tmp_path, "KeyboardInterruptOnInspect", *scenarios("N1", "N2", "N3"))

    assert run.code == 1, run.describe()  # not 130: nobody pressed Ctrl-C; not click's exit 1 "Aborted!"
    report = run.report()
    assert report["verdict"] == "fail"
    assert by_id(report, "N1")["verdict"] == "pass"
    for sid in ("N2", "N3"):  # the run went on after the first one
        failure = by_id(report, sid)["failure"]
        assert failure["kind"] == "implementation-error"
        assert f"inspect_job raised KeyboardInterrupt ({OWN})" in failure["message"], failure
    assert not run.problems("interrupted")


@pytest.mark.parametrize(
    "attr, code, kind, says",
    [
        pytest.param(
            "KeyboardInterruptInDescribe",
            2,
            "adapter-error",
            f"describe() failed: KeyboardInterrupt ({OWN})",
            id="describe",
        ),
        pytest.param(
            "KeyboardInterruptInClose",
            1,
            "implementation-error",
            f"close() at the end of the run raised KeyboardInterrupt ({OWN})",
            id="close",
        ),
        pytest.param("ExitsInConstructor", 2, "adapter-error", "failed to start: SystemExit: 5", id="constructor-exit"),
    ],
)
def test_keyboardinterrupt_or_exit_outside_calls_is_reported_as_such(tmp_path, attr, code, kind, says):
    run = run_adapter(tmp_path, attr, *scenarios("N1"))

    assert run.code == code, run.describe()
    report = run.report()
    assert report["exit_code"] == code and report["verdict"] == ("error" if code == 2 else "fail")
    problem = next(p for p in report["problems"] if p["kind"] == kind)
    assert says in problem["message"], problem
    assert says in run.stderr + run.stdout, run.describe()


# ------------------------------------------------------------ item 5: threads left behind
def test_a_non_daemon_thread_left_behind_does_not_keep_the_kit_alive(tmp_path):
    # The thread sleeps 60 s: a kit waiting for it would run into this timeout.
    run = run_adapter(tmp_path, "LeavesThread", *scenarios("N1", "N2"), timeout=45)

    assert run.code == 0, run.describe()
    assert "Verdict: PASS" in run.stdout, run.describe()
    report = run.report()
    assert report["verdict"] == "pass" and report["exit_code"] == 0  # threads do not change the verdict
    problem = run.problems("threads-left")
    assert problem and "hostile-non-daemon-worker" in problem[0]["message"], report["problems"]
    assert "non-daemon thread" in run.stdout + run.stderr  # the console says so too


# ------------------------------------------------------------------ item 6: output
def test_an_implementations_output_is_kept_per_case_and_not_in_the_kits(tmp_path):
    run = run_adapter(tmp_path, "PrintsEverywhere", *scenarios("N1", "N2"))

    assert run.code == 0, run.describe()
    assert MARKER not in run.stdout and MARKER not in run.stderr, run.describe()
    assert "\x1b[2J" not in run.stdout, "the implementation's escape sequence reached the kit's console"
    assert "Verdict: PASS" in run.stdout
    assert "the implementation printed" in run.stdout and "kept in report.json" in run.stdout, run.describe()
    report = run.report()
    for sid in ("N1", "N2"):
        output = by_id(report, sid)["output"]
        assert f"{MARKER} stdout" in output["stdout"] and f"{MARKER} fd1" in output["stdout"], output
        assert f"{MARKER} stderr" in output["stderr"], output
        assert output["stdout_bytes"] == len(output["stdout"].encode()) and output["stderr_bytes"] > 0
    # each case holds its own calls only: N1 completes a tool synchronously, N2 starts a background job
    assert "complete_sync" in by_id(report, "N1")["output"]["stdout"]
    assert "complete_sync" not in by_id(report, "N2")["output"]["stdout"]


@pytest.mark.slow
def test_the_explorations_output_is_kept_and_bounded(tmp_path):
    run = run_adapter(tmp_path, "PrintsALot", "--no-scenarios", "--profile", "quick")

    assert run.code == 0, run.describe()
    assert MARKER not in run.stdout + run.stderr
    report = run.report()
    output = report["stateful"]["output"]  # the last example that printed
    assert output["stdout_bytes"] >= 91_000
    assert len(output["stdout"].encode()) <= 4096 + 100 and "earlier bytes not kept" in output["stdout"]
    assert len((run.report_dir / "report.json").read_bytes()) < 200_000


def test_an_implementation_closing_fd_1_does_not_silence_the_verdict(tmp_path):
    run = run_adapter(tmp_path, "ClosesStdout", *scenarios("N1", "N2"))

    assert run.code == 0, run.describe()
    assert "Bad file descriptor" not in run.stdout + run.stderr
    assert "Verdict: PASS" in run.stdout and "reports: " in run.stdout, run.describe()
    report = run.report()
    assert report["verdict"] == "pass"
    # the kit put its capture back on fd 1 for the next case: N2's output is kept
    assert f"{MARKER} start_job after fd 1 was closed" in by_id(report, "N2")["output"]["stdout"]


# ------------------------------------------------------------ item 12: stdio programs
@needs_proc
@pytest.mark.parametrize("program", ["forks_child_holding_stdout.py", "detaches_worker.py"])
def test_a_stdio_programs_children_and_detached_workers_are_stopped(tmp_path, program):
    pids = tmp_path / "pids.txt"
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(STDIO / program))} {shlex.quote(str(pids))}"
    run = kit(
        tmp_path, "run", "thread-jobs", "--adapter-cmd", command, *scenarios("N1", "N2"), "--timeout", "5", timeout=90
    )

    # closing is bounded although the child holds the program's stdout (it sleeps past the run's limit)
    assert run.code == 0, run.describe()
    report = run.report()
    assert report["verdict"] == "pass"
    started = [int(line) for line in pids.read_text().split()]
    assert started, "the program should have started a child"
    assert wait_until_gone(started) == [], "processes the program started outlived the run"


# ----------------------------------------------------- item 16: SIGTERM, command adapter
def _marked(tmpdir: Path, exclude: int) -> dict[int, int]:
    """pid -> parent pid of every process started with TMPDIR=tmpdir (this test's kit and what it started)."""
    needle = f"TMPDIR={tmpdir}".encode()
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == exclude:
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if needle in environ.split(b"\0") and alive(int(entry)):
            found[int(entry)] = ppid
    return found


@pytest.mark.slow
@needs_proc
def test_sigterm_during_a_command_adapter_run_stops_its_workers_and_removes_its_state(tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    report_dir = tmp_path / "reports"
    # async-command's default implementation is the bundled CLI tool: each
    # background job is a worker that detaches itself (double fork, setsid).
    proc = subprocess.Popen(
        [
            sys.executable,
            "-P",
            "-m",
            "conformance.cli",
            "run",
            "async-command",
            "--profile",
            "deep",
            "--report-dir",
            str(report_dir),
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(TMPDIR=str(tmpdir)),
    )
    try:
        deadline = time.monotonic() + 150
        detached: dict[int, int] = {}
        while time.monotonic() < deadline and proc.poll() is None:
            detached = {pid: ppid for pid, ppid in _marked(tmpdir, proc.pid).items() if ppid != proc.pid}
            if detached:
                break
            time.sleep(0.05)
        assert detached, "the run never started a detached worker; cannot test their clean-up"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    text = out + err
    assert "Traceback" not in text, text

    assert proc.returncode == 143, text
    report = json.loads((report_dir / "report.json").read_text(encoding="utf-8"))
    assert validate_report(report) == []
    assert report["verdict"] == "interrupted" and report["exit_code"] == 143
    assert any(p["kind"] == "interrupted" and "SIGTERM" in p["message"] for p in report["problems"])
    left = wait_until_gone(list(_marked(tmpdir, proc.pid)), seconds=10)
    assert left == [], f"processes of the run outlived it: {left} (detached workers seen: {sorted(detached)})"
    leftovers = sorted(p.name for p in tmpdir.iterdir() if re.match(r"conformance-", p.name))
    assert leftovers == [], f"temporary state left behind in {tmpdir}: {leftovers}"


@needs_proc
def test_a_closed_command_adapter_starts_nothing(tmp_path):
    # The race behind item 16: when a signal ends the run, calls of a
    # concurrent group still run on their own threads while the adapter is
    # closed. A call that starts after close() must start no process (it
    # would carry no run token, so nothing could stop its workers later).
    from lifecycle_references.async_cli.wiring import ReferenceAdapter

    mark = f"HOSTILE_RUN_{os.getpid()}_{time.monotonic_ns()}"
    adapter = ReferenceAdapter()
    adapter.extra_env[mark] = "1"
    adapter.reset(0)
    started = adapter.call("start_job", {"target": "t1", "work_ms": 5000, "outcome": "complete"})
    assert started["result"]["exit_code"] == 0, started
    adapter.close()
    late = adapter.call("start_job", {"target": "t2", "work_ms": 5000, "outcome": "complete"})

    assert late.get("error", {}).get("kind") == "command_failed_to_start", late
    assert "the adapter is closed" in late["error"]["message"]
    needle = f"{mark}=1".encode()
    running = [
        int(e) for e in os.listdir("/proc") if e.isdigit() and alive(int(e)) and needle in _environ(int(e)).split(b"\0")
    ]
    assert wait_until_gone(running) == [], "a process of the closed adapter is still running"
    assert not Path(adapter.root).exists(), "the adapter's temporary directory was left behind"


def _environ(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""
