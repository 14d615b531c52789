"""The pytest plugin: a team's suite gets one item per scenario plus the exploration."""
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run_suite(tmp_path, adapter_line: str, *extra):
    test_file = tmp_path / "test_my_runtime.py"
    test_file.write_text(textwrap.dedent(f"""
        from conformance.pytest_plugin import conformance_suite
        test_thread_jobs = conformance_suite({str(ROOT / 'spec/thread-jobs.yaml')!r}, {adapter_line}
                                             profile="quick")
    """))
    return subprocess.run([sys.executable, "-P", "-m", "pytest", str(test_file), "-q", "-p", "no:cacheprovider",
                           "-o", "addopts=", *extra], cwd=tmp_path, capture_output=True, text=True, timeout=600)


def test_reference_passes_every_item(tmp_path):
    proc = _run_suite(tmp_path, "", "--co")
    assert "test_thread_jobs[N1]" in proc.stdout and "test_thread_jobs[B8]" in proc.stdout
    assert "test_thread_jobs[stateful]" in proc.stdout
    proc = _run_suite(tmp_path, "", "-k", "N1 or B7 or E9 or stateful")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "5 passed" in proc.stdout  # N1, N10, B7, E9, stateful


def test_mutant_fails_its_scenario_with_a_readable_failure(tmp_path):
    (tmp_path / "mutant_adapter.py").write_text(textwrap.dedent("""
        from lifecycle_references.thread_jobs.mutants import MUTANTS
        def Adapter(**options):
            return MUTANTS["evict_at_limit"].factory(**options)
    """))
    proc = _run_suite(tmp_path, "adapter='mutant_adapter:Adapter',", "-k", "B6 or N1", "--conformance-seed", "3")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 failed, 2 passed" in proc.stdout  # B6 fails; N1 and N10 pass
    assert "test_thread_jobs[B6]" in proc.stdout
    assert "conformance run" in proc.stdout and "--scenario B6" in proc.stdout
    assert "Traceback" not in proc.stdout
