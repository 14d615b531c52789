"""The exploration as a plain Hypothesis test (``exploration_testcase``):
pytest runs it, HypoFuzz fuzzes it, and what HypoFuzz finds is replayed
from Hypothesis's example database by an ordinary pytest run."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.hypothesis  # drives Hypothesis: tests/hypothesis_marker.py

BROKEN = textwrap.dedent('''\
    from conformance.mutants import load_mutants

    # inspect_job answers for jobs of other threads (a shipped mutant of the reference)
    Broken = load_mutants("lifecycle_references.thread_jobs.mutants:MUTANTS")["inspect_cross_thread"].factory
    ''')
TARGET = textwrap.dedent('''\
    from conformance import exploration_testcase

    TestThreadJobs = exploration_testcase("thread-jobs", adapter={adapter}, profile="quick")
    ''')
REPLAY_ONLY = textwrap.dedent('''\
    from hypothesis import Phase, settings

    # replay what the database holds: no new examples, no shrinking
    settings.register_profile("replay", phases=[Phase.explicit, Phase.reuse])
    ''')


def _project(tmp_path: Path, adapter: str | None) -> Path:
    (tmp_path / "broken_adapter.py").write_text(BROKEN, encoding="utf-8")
    (tmp_path / "conftest.py").write_text(REPLAY_ONLY, encoding="utf-8")
    (tmp_path / "test_target.py").write_text(TARGET.format(adapter=repr(adapter)), encoding="utf-8")
    return tmp_path


def _campaign_env(cwd: Path) -> dict:
    """A fuzzing campaign's environment: not a CI run. Under CI=true Hypothesis loads its
    "ci" profile, which derandomizes (HypoFuzz refuses such tests) and has no database
    (pytest could not replay what HypoFuzz found)."""
    return {**{k: v for k, v in os.environ.items() if k != "CI"}, "PYTHONPATH": str(cwd)}


def _pytest(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, "test_target.py"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env=env or {**os.environ, "PYTHONPATH": str(cwd)},
    )


def _stop(process: subprocess.Popen) -> None:
    """End a process group started with start_new_session (it may have ended already)."""
    for sig, wait_s in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=wait_s)
            break
        except subprocess.TimeoutExpired:
            continue
    if process.poll() is None:
        process.wait(timeout=10)


@pytest.mark.slow
def test_the_exploration_is_a_test_pytest_runs_and_passes_on_the_reference(tmp_path):
    proc = _pytest(_project(tmp_path, None))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "1 passed" in proc.stdout


@pytest.mark.slow
def test_a_spec_that_cannot_be_set_up_says_why(tmp_path):
    (tmp_path / "test_target.py").write_text(
        'from conformance import exploration_testcase\nTestX = exploration_testcase("no-such-spec")\n', encoding="utf-8"
    )
    proc = _pytest(tmp_path)
    assert proc.returncode != 0
    assert "no-such-spec" in proc.stdout + proc.stderr


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("hypofuzz") is None,
    reason="HypoFuzz is not installed (pip install 'lifecycle-conformance[fuzz]')",
)
def test_hypofuzz_finds_a_mutant_and_pytest_replays_it_from_the_database(tmp_path):
    project = _project(tmp_path, "broken_adapter:Broken")
    log = tmp_path / "fuzz.log"  # a file, not a pipe nobody reads while it runs
    examples = project / ".hypothesis" / "examples"
    replay = None
    deadline = time.monotonic() + 240
    # A HypoFuzz worker writes the database through a background thread, and a worker
    # process that ends right after its last write (HypoFuzz stops once every test has
    # failed) may end before the thread wrote it: then the replay has nothing to run
    # ("no test cases", exit 0) and the campaign is run again, within the same time.
    while time.monotonic() < deadline and (replay is None or replay.returncode == 0):
        with log.open("a", encoding="utf-8") as sink:
            fuzzer = subprocess.Popen(
                [
                    str(Path(sys.executable).parent / "hypothesis"),
                    "fuzz",
                    "-n",
                    "1",
                    "--no-dashboard",
                    "--",
                    "test_target.py",
                ],
                cwd=project,
                stdout=sink,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
                env=_campaign_env(project),
            )
        try:
            while time.monotonic() < deadline and fuzzer.poll() is None:
                time.sleep(5)
                if examples.is_dir() and any(examples.iterdir()):
                    replay = _pytest(project, "--hypothesis-profile=replay", env=_campaign_env(project))
                    if replay.returncode != 0:
                        break
            # HypoFuzz may have stopped by itself once its only test failed: replay what it saved
            if (replay is None or replay.returncode == 0) and examples.is_dir() and any(examples.iterdir()):
                replay = _pytest(project, "--hypothesis-profile=replay", env=_campaign_env(project))
        finally:
            _stop(fuzzer)
    output = log.read_text(encoding="utf-8", errors="replace")
    assert "fuzz 1 test" in output, output[-3000:]
    # the worker no longer crashes after shrinking what it found (conformance.fuzzing mends the old name)
    assert "slice_comments" not in output, output[-3000:]
    assert replay is not None and replay.returncode == 1, (output[-2000:], replay and replay.stdout[-2000:])
    # the replay (no generation, no shrinking) fails with the kit's own message
    assert "ConformanceFailure: inspect_job: result: expected error not_found_in_thread" in replay.stdout


def test_the_name_hypofuzz_reads_for_explain_comments_is_an_alias_of_hypothesiss():
    from hypothesis.internal.conjecture.data import ConjectureData

    import conformance.fuzzing  # noqa: F401 - importing it mends the name

    data = ConjectureData.for_choices([])
    data.freeze()
    result = data.as_result()
    # a Hypothesis before 6.170 has the old name itself; a later one gets it as an alias
    assert result.slice_comments is getattr(result, "span_comments", result.slice_comments)


def test_a_hypothesis_with_neither_name_gets_a_warning_that_says_what_to_install():
    from conformance.fuzzing import HypoFuzzCompatibilityWarning, _hypofuzz_compatibility

    class NoComments:  # a result class of a Hypothesis that renamed them again
        pass

    with pytest.warns(HypoFuzzCompatibilityWarning) as caught:
        assert _hypofuzz_compatibility(NoComments) is False
    message = str(caught[0].message)
    assert "slice_comments" in message and "span_comments" in message
    assert 'pip install "hypothesis>=' in message


def test_a_result_class_with_only_the_new_name_gets_the_old_one():
    from dataclasses import dataclass

    from conformance.fuzzing import _hypofuzz_compatibility

    @dataclass
    class Result:
        span_comments: dict

    assert _hypofuzz_compatibility(Result) is True
    assert Result({1: "x"}).slice_comments == {1: "x"}
