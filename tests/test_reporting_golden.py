"""Whole outputs of the report writers, pinned byte for byte.

tests/test_reporting.py checks pieces; these pin the entire console summary,
junit.xml and summary.md of two reports that reach the rarer branches (stub
operations, long messages, deviations, coverage gates, an interrupted run),
so that a refactoring of a writer cannot change its output unseen.

After an intended change of the output, regenerate the expected files with
``python tests/test_reporting_golden.py`` and review the diff.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from rich.console import Console

from conformance.reporting import render_console_summary, render_junit_xml, render_summary_markdown

HERE = Path(__file__).resolve().parent / "fixtures" / "reports"
REPORTS = ("rich", "interrupted")


def _console_text(report: dict) -> str:
    console = Console(record=True, width=120, force_terminal=False, file=io.StringIO())
    render_console_summary(report, console)
    return console.export_text(styles=True)


WRITERS = {
    "console.txt": _console_text,
    "junit.xml": render_junit_xml,
    "summary.md": render_summary_markdown,
}


def _load(name: str) -> dict:
    return json.loads((HERE / f"{name}.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("suffix", WRITERS)
@pytest.mark.parametrize("name", REPORTS)
def test_writer_output_is_unchanged(name, suffix):
    expected = (HERE / f"{name}.{suffix}").read_text(encoding="utf-8")
    assert WRITERS[suffix](_load(name)) == expected


if __name__ == "__main__":
    for name in REPORTS:
        for suffix, write in WRITERS.items():
            (HERE / f"{name}.{suffix}").write_text(write(_load(name)), encoding="utf-8", newline="\n")
    sys.exit(0)
