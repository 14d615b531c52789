"""The reference async CLI (conformance/reference/async_cli/) conforms to
spec/async-command.yaml when the kit runs it as a real program, and its state
survives concurrent invocations."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import lifecycle_references
from conformance.adapters.command import kill_marked_processes
from conformance.engine import stateful
from conformance.engine.runner import RunConfig, run_conformance
from lifecycle_references.async_cli.wiring import CONFIG

# -S skips site-packages for a fast start, so the tool's package is put on the
# path where it is installed (not the source tree, which would hide packaging bugs).
INSTALLED_ROOT = str(Path(lifecycle_references.__file__).resolve().parents[1])

ROOT = Path(__file__).resolve().parents[1]
SPEC = str(ROOT / "spec" / "async-command.yaml")


@pytest.fixture
def small_exploration(monkeypatch):
    # Every step is a process start: a smaller budget than `quick` keeps this
    # test short; `conformance run` (profile ci) runs the full exploration.
    monkeypatch.setitem(
        stateful.PROFILES,
        "quick",
        {"max_examples": 12, "stateful_step_count": 20, "shrink_s": 10, "shrink_examples": 50},
    )


@pytest.mark.slow
def test_reference_conforms_scenarios_and_exploration(small_exploration, tmp_path):
    report = run_conformance(RunConfig(spec_path=SPEC, profile="quick", report_dir=str(tmp_path)))
    failures = [s["failure"]["message"] for s in report["scenarios"] if s.get("failure")]
    if report.get("stateful") and report["stateful"].get("failure"):
        failures.append(report["stateful"]["failure"]["message"])
    assert report["verdict"] == "pass", (report["problems"], failures)
    assert len(report["scenarios"]) == 32 and report["stateful"]["examples"] >= 12
    assert report["implementation"]["name"] == "reference-async-cli"
    coverage = report["stateful"]["coverage"]
    assert {"running -finish-> complete", "running -fail-> failed", "running -cancel-> cancelled"} <= set(
        coverage["transitions"]
    )


@pytest.mark.slow
@pytest.mark.parametrize("profile", ["strict-envelope", "timeout-exit-code"])
def test_reference_follows_each_profile(profile):
    # Each racing scenario runs once: a profile changes what the tool prints and how it exits, not
    # its locking, and the 20 runs of the races (three quarters of the matrix's processes) are the
    # default profile's, in test_reference_conforms_scenarios_and_exploration.
    report = run_conformance(
        RunConfig(spec_path=SPEC, adapter_options={"profile": profile}, stateful=False, report_dir=None, race_runs=1)
    )
    assert report["verdict"] == "pass", [s.get("failure") for s in report["scenarios"] if s.get("failure")]
    assert report["implementation"]["profile"] == profile


def test_a_profile_the_tool_does_not_follow_fails():
    # Declaring the timeout-exit-code profile while running the tool in its
    # default mode (exit 4 for a timed-out job) must not pass.
    broken = _run_with_env({"ASYNC_CLI_PROFILE": ""}, {"profile": "timeout-exit-code"}, ("N6", "B3"))
    assert broken["verdict"] == "fail"
    assert "result.exit_code: expected 7, got 4" in broken["scenarios"][0]["failure"]["message"]


def _run_with_env(env: dict, options: dict, only: tuple) -> dict:
    """Run with a profile declared to the kit but a different one given to the tool."""
    from conformance.adapters.command import CommandAdapter

    def factory():
        adapter = CommandAdapter(CONFIG, **options)
        adapter.extra_env["ASYNC_CLI_PROFILE"] = env["ASYNC_CLI_PROFILE"]
        return adapter

    return run_conformance(RunConfig(spec_path=SPEC, adapter_factory=factory, only=only, report_dir=None))


# ------------------------------------------------------- the tool itself

TOKEN = f"test-reference-async-cli-{os.getpid()}"


@pytest.fixture(autouse=True)
def no_leftover_workers():
    yield
    kill_marked_processes(TOKEN)  # every worker these tests started, lost jobs' workers too


def tool(state: Path, clock: Path, *args: str, mutant: str | None = None) -> tuple[int, dict]:
    env = dict(
        os.environ,
        PYTHONPATH=INSTALLED_ROOT,
        ASYNC_CLI_STATE_DIR=str(state),
        ASYNC_CLI_CLOCK_FILE=str(clock),
        CONFORMANCE_COMMAND_RUN=TOKEN,
    )
    env.pop("ASYNC_CLI_MUTANT", None)
    if mutant:
        env["ASYNC_CLI_MUTANT"] = mutant
    proc = subprocess.run(
        [sys.executable, "-S", "-m", "lifecycle_references.async_cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    return proc.returncode, json.loads(proc.stdout)


def concurrent_builds(tmp_path: Path, n: int, mutant: str | None = None) -> tuple[list, dict]:
    state, clock = tmp_path / "state", tmp_path / "clock"
    state.mkdir()
    clock.write_text("0")
    answers: list = [None] * n
    barrier = threading.Barrier(n)

    def build(i):
        barrier.wait()
        answers[i] = tool(
            state, clock, "build", "--target", f"t{i}", "--work-ms", "5000", "--outcome", "complete", mutant=mutant
        )

    threads = [threading.Thread(target=build, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    jobs = json.loads((state / "jobs.json").read_text())["jobs"]
    _kill_workers(jobs)
    return answers, jobs


def _kill_workers(jobs: dict) -> None:
    deadline = time.monotonic() + 2
    for job in jobs.values():
        while not job.get("worker_pid") and time.monotonic() < deadline:
            time.sleep(0.05)
        if job.get("worker_pid"):
            try:
                os.kill(job["worker_pid"], 9)
            except OSError:
                pass


@pytest.mark.slow
def test_concurrent_invocations_keep_every_job(tmp_path):
    answers, jobs = concurrent_builds(tmp_path, 8)
    ids = [data["data"]["job_id"] for code, data in answers]
    assert all(code == 0 for code, _ in answers)
    assert len(set(ids)) == 8, f"two builds got the same id: {ids}"
    assert sorted(jobs) == sorted(ids), "a build's job is missing from the state"


@pytest.mark.slow
def test_the_unlocked_mutant_loses_jobs_under_the_same_load(tmp_path):
    # The check above has teeth: without the lock, concurrent builds collide.
    answers, jobs = concurrent_builds(tmp_path, 8, mutant="unlocked_state")
    ids = [data["data"]["job_id"] for code, data in answers]
    assert len(set(ids)) < 8 or len(jobs) < 8


def test_concurrent_cancels_and_statuses_agree(tmp_path):
    state, clock = tmp_path / "state", tmp_path / "clock"
    clock.write_text("100")
    _, started = tool(state, clock, "build", "--target", "app", "--work-ms", "5000", "--outcome", "complete")
    job_id = started["data"]["job_id"]
    results: list = []
    lock = threading.Lock()

    def run(*args):
        out = tool(state, clock, *args)
        with lock:
            results.append((args[1], out))

    threads = [threading.Thread(target=run, args=("job", "cancel" if i % 2 else "status", job_id)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    cancels = [out for kind, out in results if kind == "cancel"]
    assert len(cancels) == 4
    assert all(code == 0 and data["data"]["status"] == "cancelled" for code, data in cancels)
    assert sum(1 for _, data in cancels if not data["warnings"]) == 1, "exactly one cancel did the cancelling"
    code, final = tool(state, clock, "job", "status", job_id)
    assert code == 4 and final["data"]["status"] == "cancelled" and final["data"]["terminal"] is True


def test_the_worker_is_detached_and_settles_the_job_itself(tmp_path):
    state, clock = tmp_path / "state", tmp_path / "clock"
    clock.write_text("0")
    _, started = tool(state, clock, "build", "--target", "app", "--work-ms", "500", "--outcome", "failed")
    job_id = started["data"]["job_id"]
    deadline = time.monotonic() + 5
    pid = None
    while pid is None and time.monotonic() < deadline:
        pid = json.loads((state / "jobs.json").read_text())["jobs"][job_id]["worker_pid"]
        time.sleep(0.02)
    assert pid, "no worker recorded itself"
    try:
        job = json.loads((state / "jobs.json").read_text())["jobs"][job_id]
        assert os.getsid(pid) == job["worker_sid"] != os.getsid(0), "the worker is not in a session of its own"
        clock.write_text("500")  # no status call: the worker alone notices the end
        status = None
        while status != "failed" and time.monotonic() < deadline + 5:
            status = json.loads((state / "jobs.json").read_text())["jobs"][job_id]["status"]
            time.sleep(0.05)
        assert status == "failed"
    finally:
        try:
            os.kill(pid, 9)
        except OSError:
            pass


@pytest.mark.slow
def test_cli_run_and_replay_commands_name_the_config(tmp_path):
    command = [
        sys.executable,
        "-P",
        "-m",
        "conformance.cli",
        "run",
        SPEC,
        "--adapter-cli",
        str(CONFIG),
        "--scenario",
        "E1",
        "--report-dir",
        str(tmp_path),
    ]
    proc = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads((tmp_path / "report.json").read_text())["implementation"]["adapter"] == str(CONFIG)
    # A tool with the not-found bug: the failure says what is wrong and how to replay it.
    env = dict(os.environ, ASYNC_CLI_MUTANT="not_found_exits_one")
    proc = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=300, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "result.exit_code: expected 5, got 1" in proc.stdout
    assert f"replay: conformance run {SPEC} --adapter-cli {CONFIG} --scenario E1" in proc.stdout


def test_cancel_stops_the_worker(tmp_path):
    state, clock = tmp_path / "state", tmp_path / "clock"
    clock.write_text("0")
    _, started = tool(state, clock, "build", "--target", "app", "--work-ms", "5000", "--outcome", "complete")
    job_id = started["data"]["job_id"]
    deadline = time.monotonic() + 5
    pid = None
    while pid is None and time.monotonic() < deadline:
        pid = json.loads((state / "jobs.json").read_text())["jobs"][job_id]["worker_pid"]
        time.sleep(0.02)
    assert pid and _alive(pid)
    code, answer = tool(state, clock, "job", "cancel", job_id)
    assert code == 0 and answer["data"]["status"] == "cancelled"
    while _alive(pid) and time.monotonic() < deadline + 3:
        time.sleep(0.02)
    assert not _alive(pid), "the cancelled job's worker is still running"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
