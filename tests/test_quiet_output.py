"""No third-party library's log lines in a front door's output: the model's
lifecycle machine (the ``transitions`` library) is never asked to fire a
trigger the record's state does not take, which the library would log as a
warning per call: not in pytest's captured log of a failed item, not in the
log of an in-process implementation that configures logging itself."""

from __future__ import annotations

from cli_result import kit

pytest_plugins = ["pytester"]

# The thread-jobs mutant that fails B6, with logging configured as an
# application would: every warning of every logger goes to its log file.
ADAPTER = """
import logging
from lifecycle_references.thread_jobs.mutants import MUTANTS
logging.basicConfig(filename="app.log", level=logging.WARNING)
def Adapter(**options):
    return MUTANTS["evict_at_limit"].factory(**options)
"""


def test_the_command_leaves_no_library_log_line(tmp_path):
    (tmp_path / "mutant_adapter.py").write_text(ADAPTER, encoding="utf-8")
    proc = kit(
        "run", "thread-jobs", "--adapter", "mutant_adapter:Adapter", "--no-stateful", "--scenario", "B6",
        "--report-dir", "reports", cwd=tmp_path, pythonpath=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "WARNING" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    log = tmp_path / "app.log"
    assert not log.exists() or "transitions" not in log.read_text(encoding="utf-8"), log.read_text(encoding="utf-8")


def test_a_failing_pytest_item_shows_no_captured_library_log(pytester):
    pytester.makepyprojecttoml("[tool.pytest.ini_options]\n")
    pytester.makepyfile(
        mutant_adapter=ADAPTER,
        test_my_runtime="""
        from conformance.pytest_plugin import conformance_suite
        test_thread_jobs = conformance_suite("thread-jobs", adapter="mutant_adapter:Adapter")
    """,
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-k", "B6", timeout=600)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*test_thread_jobs[[]B6[]]*"])
    result.stdout.no_fnmatch_line("*transitions.core*")
    result.stdout.no_fnmatch_line("*Captured log*")
