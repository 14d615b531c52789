"""The plain progress line a CI log shows (conformance/progress.py): the
examples counted past the profile's say why, and the workers' parser still
reads the line."""

from __future__ import annotations

import io
from types import SimpleNamespace

from conformance.progress import PlainProgress
from conformance.workers import _Worker


def _line(done: int, total: int, phase: str) -> str:
    shown = PlainProgress(io.StringIO(), interval_s=60)
    shown.stateful_started(total)
    shown.stateful_example(done)
    shown.stateful_phase(phase, 1)
    return shown.stream.getvalue().splitlines()[-1]


def test_examples_within_the_profile_are_counted_plainly():
    line = _line(40, 100, "exploring")
    assert "examples 40/100, failures 1" in line and "past" not in line, line


def test_examples_past_the_profile_say_why():
    line = _line(130, 100, "shrinking")
    assert "examples 130/100 (past 100: shrinking a failure and looking for more)" in line, line
    seen = SimpleNamespace(examples=0, phase="", failures=0)
    _Worker._note_progress(seen, line)  # type: ignore[arg-type]
    assert (seen.examples, seen.phase, seen.failures) == (130, "shrinking", 1)
