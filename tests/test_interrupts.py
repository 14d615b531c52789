"""Interrupts keep what was done: SIGINT and SIGTERM stop a run cleanly,
every report is written with the verdict ``interrupted``, adapter programs
and their children are stopped, and the exit code is 130 / 143. The same
when the signal comes from inside a call into the implementation (a
KeyboardInterrupt the implementation raises by itself, with no signal, is its
own failure instead: tests/test_hostile_runtime.py). A run never leaves an
earlier run's verdict in its report directory.

Each run goes through the real command line in a child process, the way a
terminal or a CI runner would signal it.
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
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from scenario_verdicts import conforms

from conformance.engine.loaded_specs import load_spec_once
from conformance.reporting import validate_report
from lifecycle_references.thread_jobs import ReferenceAdapter

ROOT = Path(__file__).resolve().parents[1]


def _thread_jobs_counts() -> tuple[int, int]:
    """The bundled thread-jobs' scenarios: all, and those that apply under the defaults."""
    from conformance.engine.scenarios import not_applicable_ids

    spec = load_spec_once(ROOT / "spec" / "thread-jobs.yaml")
    inapplicable = not_applicable_ids(spec, spec.default_parameters(), {"concurrent": True})
    return len(spec.scenarios), len(spec.scenarios) - len(inapplicable)


ALL_SCENARIOS, APPLICABLE = _thread_jobs_counts()  # 42 and 39 today (N11, E14, B9 are for psi-runtime)
PY = shlex.quote(sys.executable)
EXAMPLE_ADAPTER = ROOT / "examples" / "python-stdio" / "adapter.py"


def _start(args: list[str], cwd: Path, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-P", "-m", "conformance.cli", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200", "CONFORMANCE_PROGRESS_INTERVAL": "0.3", **env},
    )


def _wait_for(proc: subprocess.Popen, needle: str, deadline_s: float = 180) -> list[str]:
    """Read the kit's stderr (plain progress lines) until one matches the
    regular expression ``needle``."""
    seen: list[str] = []
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
        if re.search(needle, line):
            return seen
    proc.kill()
    raise AssertionError(f"never saw {needle!r} on stderr:\n{''.join(seen)}")


def _finish(proc: subprocess.Popen) -> tuple[int, str]:
    out, err = proc.communicate(timeout=120)
    text = out + err
    assert "Traceback" not in text, text
    assert "Aborted!" not in text, text
    return proc.returncode, text


def _reports(report_dir: Path) -> dict:
    report = json.loads((report_dir / "report.json").read_text(encoding="utf-8"))
    assert validate_report(report) == [], validate_report(report)
    return report


def _assert_reports_say_interrupted(report_dir: Path, report: dict, code: int) -> None:
    assert report["verdict"] == "interrupted" and report["exit_code"] == code
    problem = next(p for p in report["problems"] if p["kind"] == "interrupted")
    assert "The reports hold only what finished" in problem["message"]
    junit = ET.parse(report_dir / "junit.xml").getroot()
    errors = list(junit.iter("error"))
    assert errors and errors[0].get("type") == "interrupted", ET.tostring(junit, encoding="unicode")[:2000]
    assert "INTERRUPTED" in (report_dir / "summary.md").read_text(encoding="utf-8")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"  # a zombie has exited; only its parent's bookkeeping is left


# ------------------------------------------------------------ signals from outside
@pytest.mark.slow
def test_sigint_during_the_exploration_keeps_the_finished_scenarios(tmp_path):
    report_dir = tmp_path / "reports"
    proc = _start(["run", "thread-jobs", "--profile", "deep", "--report-dir", str(report_dir)], cwd=tmp_path)
    _wait_for(proc, r"examples [1-9]\d*/")  # the whole matrix ran; the exploration is under way
    proc.send_signal(signal.SIGINT)
    code, text = _finish(proc)

    assert code == 130, text
    report = _reports(report_dir)
    _assert_reports_say_interrupted(report_dir, report, 130)
    assert len(report["scenarios"]) == APPLICABLE and all(conforms(s) for s in report["scenarios"])
    stateful = report["stateful"]
    assert stateful["verdict"] == "interrupted" and stateful["profile"] == "deep"
    assert 1 <= stateful["examples"] < 600
    assert f"interrupted by SIGINT (Ctrl-C): {ALL_SCENARIOS} of {ALL_SCENARIOS} scenarios finished" in text
    assert "Verdict: INTERRUPTED" in text and "exit code 130" in text


WRAPPER = textwrap.dedent('''\
    """The example stdio adapter, started behind a helper child of its own
    (as a real runtime's worker would be), recording both pids."""
    import os, runpy, subprocess, sys
    child = subprocess.Popen(["sleep", "300"])
    with open(sys.argv[1], "a") as pids:
        pids.write(f"{os.getpid()} {child.pid}\\n")
    sys.argv = [sys.argv[2]]
    runpy.run_path(sys.argv[0], run_name="__main__")
    ''')


@pytest.mark.slow
def test_sigterm_stops_the_adapter_program_and_its_children(tmp_path):
    wrapper, pids = tmp_path / "wrapper.py", tmp_path / "pids.txt"
    wrapper.write_text(WRAPPER, encoding="utf-8")
    command = f"{PY} {shlex.quote(str(wrapper))} {shlex.quote(str(pids))} {shlex.quote(str(EXAMPLE_ADAPTER))}"
    report_dir = tmp_path / "reports"
    proc = _start(
        [
            "run",
            str(ROOT / "spec" / "thread-jobs.yaml"),
            "--adapter-cmd",
            command,
            "--profile",
            "deep",
            "--report-dir",
            str(report_dir),
        ],
        cwd=ROOT,
    )
    _wait_for(proc, r"examples [1-9]\d*/")
    started = [int(p) for line in pids.read_text().split("\n") if line for p in line.split()]
    assert started and any(_alive(pid) for pid in started), "the adapter program should be running now"
    proc.send_signal(signal.SIGTERM)
    code, text = _finish(proc)

    assert code == 143, text
    report = _reports(report_dir)
    _assert_reports_say_interrupted(report_dir, report, 143)
    assert "interrupted by SIGTERM" in text
    # every program the run started, and every child they started, is gone
    everything = [int(p) for line in pids.read_text().split("\n") if line for p in line.split()]
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in everything) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in everything if _alive(pid)], "processes left behind by the interrupted run"


SLOW_ADAPTER = textwrap.dedent('''\
    """The thread-jobs reference, slow to reset (a real runtime restarting)."""
    import time
    from lifecycle_references.thread_jobs import ReferenceAdapter

    class SlowAdapter(ReferenceAdapter):
        def reset(self, now_ms):
            time.sleep(0.15)
            return super().reset(now_ms)
    ''')


@pytest.mark.slow
def test_sigint_during_the_matrix_reports_the_scenarios_that_finished(tmp_path):
    (tmp_path / "slow_adapter.py").write_text(SLOW_ADAPTER, encoding="utf-8")
    report_dir = tmp_path / "reports"
    proc = _start(
        ["run", "thread-jobs", "--adapter", "slow_adapter:SlowAdapter", "--report-dir", str(report_dir)], cwd=tmp_path
    )
    _wait_for(proc, rf"scenarios ([3-9]|1\d|2[0-5])/{ALL_SCENARIOS}")
    proc.send_signal(signal.SIGINT)
    code, text = _finish(proc)

    assert code == 130, text
    report = _reports(report_dir)
    _assert_reports_say_interrupted(report_dir, report, 130)
    finished = len(report["scenarios"])
    assert 3 <= finished < APPLICABLE
    assert report["stateful"] is None  # never started
    problem = next(p for p in report["problems"] if p["kind"] == "interrupted")
    # The count includes scenarios found not applicable (listed apart from the verdicts).
    skipped_as_not_applicable = len((report.get("not_applicable") or {}).get("scenarios") or [])
    assert f"{finished + skipped_as_not_applicable} of {ALL_SCENARIOS} scenarios finished" in problem["message"]
    assert problem["where"].startswith("scenario ") and "was running and is not reported" in problem["message"]


# ------------------------------------------------------------ a Ctrl-C that lands inside a call
INTERRUPTING_ADAPTER = textwrap.dedent('''\
    import os, signal
    from lifecycle_references.thread_jobs import ReferenceAdapter

    class InterruptingAdapter(ReferenceAdapter):
        """The 12th call is where the user's Ctrl-C lands (a SIGINT to the kit's process)."""
        calls = 0

        def call(self, operation, args):
            InterruptingAdapter.calls += 1
            if InterruptingAdapter.calls == 12:
                os.kill(os.getpid(), signal.SIGINT)
            return super().call(operation, args)
    ''')


def test_a_ctrl_c_inside_a_call_ends_the_run_as_interrupted(tmp_path):
    (tmp_path / "interrupting.py").write_text(INTERRUPTING_ADAPTER, encoding="utf-8")
    report_dir = tmp_path / "reports"
    proc = _start(
        ["run", "thread-jobs", "--adapter", "interrupting:InterruptingAdapter", "--report-dir", str(report_dir)],
        cwd=tmp_path,
    )
    code, text = _finish(proc)

    assert code == 130, text
    report = _reports(report_dir)
    _assert_reports_say_interrupted(report_dir, report, 130)
    problem = next(p for p in report["problems"] if p["kind"] == "interrupted")
    assert problem["message"].startswith("interrupted by SIGINT (Ctrl-C): "), problem
    assert problem["where"].startswith("scenario "), problem
    assert report["scenarios"], "the scenarios before the interrupt are reported"


def test_ctrl_c_in_other_commands_exits_130_not_1(tmp_path):
    proc = _start(["mutants", "thread-jobs", "--profile", "quick"], cwd=tmp_path)
    _wait_for(proc, "progress: mutant 1/")
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    code, text = _finish(proc)
    assert code == 130, text
    assert "interrupted" in text


def test_help_names_the_exit_codes():
    for command in ("run", "replay"):
        proc = subprocess.run(
            [sys.executable, "-P", "-m", "conformance.cli", command, "--help"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        assert "130 interrupted (Ctrl-C, SIGINT)" in proc.stdout and "143" in proc.stdout, proc.stdout


# ------------------------------------------------------------ never an old verdict
def test_a_run_replaces_the_previous_reports_even_when_it_crashes(tmp_path, monkeypatch):
    from conformance.engine import runner

    report_dir = tmp_path / "reports"
    report_dir.mkdir()
    (report_dir / "report.json").write_text('{"verdict": "pass"}', encoding="utf-8")
    (report_dir / "counterexample-stateful.yaml").write_text("steps: []\n", encoding="utf-8")
    (report_dir / "notes.txt").write_text("the user's own file\n", encoding="utf-8")

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the kit")

    monkeypatch.setattr(runner, "run_scenario", broken)
    report = runner.run_conformance(runner.RunConfig(spec_path="thread-jobs", report_dir=str(report_dir)))

    assert report["verdict"] == "error" and report["exit_code"] == 2
    written = _reports(report_dir)
    assert written["verdict"] == "error"
    problem = written["problems"][-1]
    assert problem["kind"] == "internal-error" and "RuntimeError: a bug in the kit" in problem["message"]
    assert problem["where"] == "scenario N1"  # the first scenario hit the bug
    assert not (report_dir / "counterexample-stateful.yaml").exists()
    assert (report_dir / "notes.txt").exists()  # only the kit's own files are removed


BROKEN_THEN_INTERRUPTED = textwrap.dedent('''\
    import os, signal
    from lifecycle_references.thread_jobs import ReferenceAdapter

    class BrokenAdapter(ReferenceAdapter):
        """Answers every call with an unknown error from its 30th call on, and
        the user presses Ctrl-C (SIGINT) at its 31st: while the exploration
        is shrinking the failure it found."""
        calls = 0

        def call(self, operation, args):
            BrokenAdapter.calls += 1
            if BrokenAdapter.calls == 31:
                os.kill(os.getpid(), signal.SIGINT)
            if BrokenAdapter.calls >= 30:
                return {"error": {"kind": "worn_out", "message": "this build breaks after 30 calls"}}
            return super().call(operation, args)
    ''')


@pytest.mark.slow
def test_an_interrupt_while_shrinking_keeps_the_failure_found_so_far(tmp_path):
    (tmp_path / "broken_adapter.py").write_text(BROKEN_THEN_INTERRUPTED, encoding="utf-8")
    report_dir = tmp_path / "reports"
    proc = _start(
        [
            "run",
            "thread-jobs",
            "--adapter",
            "broken_adapter:BrokenAdapter",
            "--no-scenarios",
            "--report-dir",
            str(report_dir),
        ],
        cwd=tmp_path,
    )
    code, text = _finish(proc)

    assert code == 130, text
    report = _reports(report_dir)
    assert report["verdict"] == "interrupted"
    stateful = report["stateful"]
    assert stateful["verdict"] == "interrupted" and stateful["failure"] is not None, stateful
    assert "shortest failing sequence found so far" in stateful["failure"]["message"]
    assert "worn_out" in stateful["failure"]["message"] or "worn_out" in json.dumps(stateful["failure"])
    assert (report_dir / "counterexample-stateful.yaml").exists()
    assert stateful["failure"]["replay"].startswith("conformance replay ")
    problem = next(p for p in report["problems"] if p["kind"] == "interrupted")
    assert "found a failure (reported, not fully shrunk)" in problem["message"]


LARGE_ANSWER_THEN_TERMINATED = textwrap.dedent('''\
    import os, signal
    from lifecycle_references.thread_jobs import ReferenceAdapter

    HUGE = "x" * 32_000_000  # a delivery queue grown over many retries, as its error quotes it

    class LargeAnswerAdapter(ReferenceAdapter):
        """From its 30th call on, refuses every call that should succeed, with
        an error quoting a 32 MB value. When the next example starts (the
        exploration is shrinking the failure) the CI runner sends SIGTERM: to
        this process, or to the one that started it when it runs as a worker
        of `--workers 2`."""
        calls = 0
        refused = False

        def reset(self, now_ms):
            if LargeAnswerAdapter.refused:
                LargeAnswerAdapter.refused = False
                os.kill(os.getppid() if os.environ.get("SIGNAL_THE_PARENT") else os.getpid(), signal.SIGTERM)
            return super().reset(now_ms)

        def call(self, operation, args):
            LargeAnswerAdapter.calls += 1
            answer = super().call(operation, args)
            if LargeAnswerAdapter.calls >= 30 and "error" not in answer:
                LargeAnswerAdapter.refused = True
                return {"error": {"kind": "worn_out", "message": HUGE}}
            return answer
    ''')


@pytest.mark.slow
@pytest.mark.hypothesis  # in the conformance process it starts
@pytest.mark.xdist_group("signals")  # counts wall time
@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_sigterm_while_shrinking_a_failure_with_a_large_answer_writes_the_reports_promptly(tmp_path, workers):
    # The failure's first line quotes the whole answer: the counterexample file
    # once carried it, through the pure-Python YAML emitter, which took minutes
    # after the SIGTERM, before report.json was written; the CI runner killed
    # the run first and found no report (with --workers, the parent killed the
    # worker after its grace and lost the failure).
    (tmp_path / "large_answer.py").write_text(LARGE_ANSWER_THEN_TERMINATED, encoding="utf-8")
    report_dir = tmp_path / "reports"
    args = ["run", "thread-jobs", "--adapter", "large_answer:LargeAnswerAdapter", "--no-scenarios"]
    env = {"SIGNAL_THE_PARENT": "1"} if workers == "2" else {}
    proc = _start([*args, "--workers", workers, "--report-dir", str(report_dir)], cwd=tmp_path, **env)
    try:
        proc.wait(timeout=40)  # seconds: a CI runner's grace after its SIGTERM is shorter than that
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        written = (report_dir / "report.json").exists()
        raise AssertionError(
            f"still running 40 s after it started (the SIGTERM came within seconds); report.json: {written}"
        ) from None
    code, text = _finish(proc)

    assert code == 143, text
    report = _reports(report_dir)
    _assert_reports_say_interrupted(report_dir, report, 143)
    stateful = report["stateful"]
    assert stateful["failure"] is not None and "worn_out" in stateful["failure"]["message"], stateful
    counterexample = next(report_dir.glob("counterexample-stateful*.yaml"))
    assert counterexample.stat().st_size < 100_000  # the failure's summary line cut; report.json has the value


LATE_SIGTERM = textwrap.dedent('''\
    import os, signal, threading, time
    from lifecycle_references.thread_jobs import ReferenceAdapter

    def terminate_soon():
        time.sleep(0.1)  # the kit has closed the implementation and waits (0.5 s) for this thread
        os.kill(os.getpid(), signal.SIGTERM)  # the CI runner's SIGTERM
        time.sleep(2)

    class LateSigterm(ReferenceAdapter):
        """Passes; its close() leaves a thread that outlives it, and the SIGTERM
        arrives while the kit is closing and writing the reports."""

        def close(self):
            threading.Thread(target=terminate_soon, name="late-sigterm").start()
            return super().close()
    ''')


@pytest.mark.xdist_group("signals")  # the signal must land in a window of wall time
def test_a_sigterm_after_the_checks_still_writes_the_reports(tmp_path):
    (tmp_path / "late.py").write_text(LATE_SIGTERM, encoding="utf-8")
    report_dir = tmp_path / "reports"
    proc = _start(
        ["run", "thread-jobs", "--adapter", "late:LateSigterm", "--scenario", "N1", "--no-stateful"]
        + ["--report-dir", str(report_dir)],
        cwd=tmp_path,
    )
    code, text = _finish(proc)

    assert code == 143, text
    report = _reports(report_dir)
    assert report["verdict"] == "interrupted" and report["exit_code"] == 143
    assert [s["verdict"] for s in report["scenarios"]] == ["pass"]  # every check had finished: all reported
    problem = next(p for p in report["problems"] if p["kind"] == "interrupted")
    assert "every check had ended" in problem["message"], problem
    assert "INTERRUPTED" in (report_dir / "summary.md").read_text(encoding="utf-8")
    assert (report_dir / "junit.xml").exists()
    assert "stopping: closing the implementation and writing the reports" in text  # said on the kit's stderr


def test_an_interrupt_lost_in_a_gc_callback_is_raised_at_the_next_checkpoint(capfd):
    # Python runs signal handlers between any two bytecodes, also inside a
    # garbage-collector callback (Hypothesis installs one), where the raise is
    # printed and dropped. The run must still stop, and print no traceback.
    import gc

    from conformance.engine import interrupts

    def callback(phase, info):
        if phase == "start":
            gc.callbacks.remove(callback)
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(10_000):  # the handler runs in here
                pass

    with interrupts.signals_stop_the_run():
        gc.callbacks.append(callback)
        gc.collect()
        with pytest.raises(KeyboardInterrupt) as raised:
            interrupts.checkpoint()
    assert isinstance(raised.value, interrupts.Interrupted) and raised.value.exit_code == 130
    assert "Traceback" not in capfd.readouterr().err
    interrupts.checkpoint()  # outside the run nothing is pending


def test_a_second_signal_does_not_interrupt_the_first_on_its_way_up(capfd):
    # The except blocks the first interrupt passes through save what the run
    # found (the failures so far, their counterexample files); a second signal
    # there once raised again and replaced it, losing them.
    from conformance.engine import interrupts

    saved = []
    with interrupts.signals_stop_the_run():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises in here
        except KeyboardInterrupt as exc:
            first = exc
            os.kill(os.getpid(), signal.SIGTERM)  # the second, while the first is on its way up
            time.sleep(0.05)
            saved.append("the failures found so far")
        assert isinstance(first, interrupts.Interrupted) and first.exit_code == 143 and saved
    assert "stopping: closing the implementation and writing the reports" in capfd.readouterr().err


class _WornOut(ReferenceAdapter):
    """A thread-jobs implementation that answers every call with an unknown
    error from its 30th call on: the exploration finds that failure at once."""

    calls = 0

    def call(self, operation, args):
        _WornOut.calls += 1
        if _WornOut.calls >= 30:
            return {"error": {"kind": "worn_out", "message": "this build breaks after 30 calls"}}
        return super().call(operation, args)


@pytest.mark.hypothesis
@pytest.mark.parametrize(
    ("where", "said"),
    [
        ("before the reduction", "found a failure (reported, not fully shrunk)"),
        ("while sorting by cause", "had found 1 distinct failure(s), reported, and was sorting them by cause"),
    ],
)
def test_an_interrupt_between_the_exploration_and_the_report_keeps_its_failure(tmp_path, monkeypatch, where, said):
    """A Ctrl-C after the exploration found a failure, in the gaps between
    the phases that keep their own findings (before the reduction starts;
    while the failures found are sorted by cause), still reports the failure."""
    from conformance.engine import runner

    if where == "before the reduction":
        enter = runner._ExampleWatch.enter

        def enter_then_interrupted(self, phase):
            enter(self, phase)
            if phase == "reducing":
                raise KeyboardInterrupt

        monkeypatch.setattr(runner._ExampleWatch, "enter", enter_then_interrupted)
    else:

        def interrupted(failures):
            raise KeyboardInterrupt

        monkeypatch.setattr(runner, "_shortest_of_each", interrupted)
    monkeypatch.setattr(_WornOut, "calls", 0)
    report_dir = tmp_path / "reports"
    config = runner.RunConfig(
        spec_path="thread-jobs",
        adapter_factory=_WornOut,
        adapter_label="worn-out",
        profile="quick",
        scenarios=False,
        report_dir=str(report_dir),
    )
    report = runner.run_conformance(config)

    assert report["verdict"] == "interrupted" and report["exit_code"] == 130
    written = _reports(report_dir)
    stateful = written["stateful"]
    assert stateful["verdict"] == "interrupted" and "worn_out" in json.dumps(stateful["failure"]), stateful
    assert (report_dir / "counterexample-stateful.yaml").exists()
    problem = next(p for p in written["problems"] if p["kind"] == "interrupted")
    assert said in problem["message"], problem["message"]
