"""A constructor that hangs (here in the adapter's own reset(), which it
calls) is reported with where it hung, not only as "did not start"."""

import os
import subprocess
import sys
import threading

import pytest

from conformance.engine.runner import RunConfig, run_conformance

ROOT_SPEC = "thread-jobs"
HANGING = '''
import time


class InitReset:
    def __init__(self, **options):
        self.reset(0)

    def reset(self, now_ms):
        time.sleep(3600)
'''


@pytest.mark.slow
def test_the_cli_names_what_the_constructor_was_doing(tmp_path):
    (tmp_path / "hanging.py").write_text(HANGING, encoding="utf-8")
    proc = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "conformance.cli",
            "run",
            ROOT_SPEC,
            "--adapter",
            "hanging:InitReset",
            "--timeout",
            "1",
            "--no-stateful",
            "--report-dir",
            str(tmp_path / "r"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path), "COLUMNS": "250"},
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    text = " ".join((proc.stdout + proc.stderr).split())
    assert (
        "did not start within 1s: its constructor was still in reset (hanging.py:10), called from __init__ "
        "(hanging.py:7)" in text
    ), text


def test_off_the_main_thread_too(tmp_path):
    namespace: dict = {}
    exec(compile(HANGING, str(tmp_path / "hanging.py"), "exec"), namespace)  # the test's own adapter, not spec text
    box = []
    worker = threading.Thread(
        target=lambda: box.append(
            run_conformance(
                RunConfig(
                    spec_path=ROOT_SPEC,
                    adapter_factory=namespace["InitReset"],
                    adapter_label="hanging",
                    report_dir=None,
                    stateful=False,
                    timeout_s=1,
                )
            )
        ),
        daemon=True,
    )
    worker.start()
    worker.join(60)
    [report] = box
    assert report["verdict"] == "error"
    [message] = [p["message"] for p in report["problems"]]
    assert (
        "did not start within 1s: its constructor was still in reset (hanging.py:10), called from __init__ "
        "(hanging.py:7)" in message
    ), message
