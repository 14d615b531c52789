"""What one run of the kit's command line returned and printed, for the tests
that run it as a user would (test_bad_input, test_hostile_inputs, test_hostile_data)."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Result"]

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
        return (f"exit {self.returncode} after {self.seconds:.1f}s\n--- stdout\n{self.stdout[-_SHOWN:]}\n"
                f"--- stderr\n{self.stderr[-_SHOWN:]}")
