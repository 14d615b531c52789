"""What one run of the kit's command line returned and printed, for the tests
that run it as a user would (test_bad_input, test_hostile_inputs, test_hostile_data),
and ``kit``: one run of the command line with this interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Result", "kit"]

_SHOWN = 6000  # characters of each stream an assertion message shows (an answer may be megabytes)


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str
    seconds: float = 0.0

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def describe(self) -> str:
        return (
            f"exit {self.returncode} after {self.seconds:.1f}s\n--- stdout\n{self.stdout[-_SHOWN:]}\n"
            f"--- stderr\n{self.stderr[-_SHOWN:]}"
        )


def kit(*args: str, cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    """``conformance ARGS`` run by this interpreter in ``cwd`` (with ``pythonpath``
    for an implementation's module); it must never end in a traceback."""
    env = {**os.environ, "COLUMNS": "200"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "conformance.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    return proc
