"""The tutorial in docs/spec-language.md, run from its files in
examples/spec-tutorial/: the spec validates, lints clean, passes against the
small reference and fails against the mutant."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from conformance.cli import cli

TUTORIAL = Path(__file__).resolve().parent.parent / "examples" / "spec-tutorial"


@pytest.fixture
def in_tutorial(monkeypatch, tmp_path):
    monkeypatch.chdir(TUTORIAL)  # the adapters are imported as modules of this directory
    return tmp_path


def invoke(*args):
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_tutorial_spec_validates_and_lints_clean(in_tutorial):
    code, out = invoke("validate", "print-queue.yaml")
    assert code == 0, out
    code, out = invoke("lint", "--strict", "print-queue.yaml")
    assert code == 0, out
    assert "0 finding(s), 0 suppressed" in out


@pytest.mark.hypothesis  # its run explores (tests/hypothesis_marker.py)
def test_tutorial_reference_passes(in_tutorial):
    code, out = invoke(
        "run",
        "print-queue.yaml",
        "--adapter",
        "print_queue:PrintQueueAdapter",
        "--profile",
        "quick",
        "--report-dir",
        str(in_tutorial / "ref"),
    )
    assert code == 0, out
    assert "Verdict: PASS" in out
    code, out = invoke(
        "run",
        "print-queue.yaml",
        "--adapter",
        "print_queue:PrintQueueAdapter",
        "--adapter-opt",
        "max_copies=50",
        "--no-stateful",
        "--report-dir",
        str(in_tutorial / "office"),
    )
    assert code == 0, out


def test_tutorial_mutant_fails(in_tutorial):
    code, out = invoke(
        "run",
        "print-queue.yaml",
        "--adapter",
        "print_queue_mutant:StubbornQueueAdapter",
        "--no-stateful",
        "--report-dir",
        str(in_tutorial / "mutant"),
    )
    assert code == 1, out
    assert "N2 Cancel a queued job and a printing one  [divergence]" in out
    assert 'expected "cancelled", got "printing"' in out


def test_tutorial_files_are_the_ones_the_guide_names():
    guide = (TUTORIAL.parent.parent / "docs" / "spec-language.md").read_text()
    for name in ("print-queue.yaml", "print_queue:PrintQueueAdapter", "print_queue_mutant:StubbornQueueAdapter"):
        assert name in guide
    assert {p.name for p in TUTORIAL.iterdir() if p.suffix in (".py", ".yaml")} == {
        "print-queue.yaml",
        "print_queue.py",
        "print_queue_mutant.py",
    }
