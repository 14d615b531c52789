"""Every command the README shows works as written (issue 35, item 6):

- each `conformance ...` line of its shell blocks names a real command whose
  options and values parse (click, without running it), and every file or
  directory of this checkout it names exists;
- the commands of the spec authors' screen run and pass on the bundled specs;
- the README starts with exactly two commands, and the failure it shows is
  what the kit prints for that example (slow: it runs it).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest
from cli_result import kit

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def shell_blocks(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", text, flags=re.S)


def commands() -> list[list[str]]:
    """The README's `conformance` command lines, split as a shell would (comments dropped)."""
    out = []
    for block in shell_blocks(README):
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            if words and words[0] == "conformance":
                out.append(words[1:])
    return out


def test_the_readme_starts_with_exactly_two_commands():
    first_two = shell_blocks(README)[:2]
    assert [len([line for line in block.splitlines() if line.strip()]) for block in first_two] == [1, 1]
    assert "conformance run thread-jobs" in first_two[0] and first_two[1].strip() == "python3 tests/run_installed.py"


def test_the_readme_shows_many_commands():
    assert len(commands()) >= 10  # the parsing found them (the first, `.venv/bin/conformance ...`, aside)


@pytest.mark.parametrize("argv", commands(), ids=lambda argv: " ".join(argv)[:60])
def test_each_command_parses_and_names_files_that_exist(argv):
    from conformance.cli.common import cli

    group_context = cli.make_context("conformance", list(argv), resilient_parsing=True)
    name, command, rest = cli.resolve_command(group_context, list(argv))
    assert command is not None, argv
    try:
        command.make_context(name, rest, parent=group_context)  # parses and checks every option and value
    except click.exceptions.Exit:
        pass  # --help and the like
    for word in rest:
        if "/" in word and not word.startswith(("-", "origin/")) and "*" not in word:
            local = word.split()[-1] if " " in word else word  # "node examples/x.js": the file
            if local.startswith(("spec/", "examples/", "docs/")):
                assert (ROOT / local).exists(), f"{' '.join(argv)}: {local} does not exist in this checkout"


@pytest.mark.parametrize(
    "argv",
    [a for a in commands() if a[0] in ("validate", "lint", "check-spec", "specs", "docs")],
    ids=lambda argv: " ".join(argv)[:60],
)
def test_the_spec_authors_commands_pass_on_the_bundled_specs(argv):
    args = [str(p.relative_to(ROOT)) for p in sorted(ROOT.glob(argv[1]))] if "*" in " ".join(argv) else []
    proc = kit(argv[0], *(args or argv[1:2]), *[a for a in argv[2:] if "*" not in a], cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _shown_failure() -> str:
    match = re.search(r"## What a failure looks like.*?```text\n(.*?)```", README, flags=re.S)
    assert match, "the README shows a failure in a ```text block"
    return match.group(1)


@pytest.mark.slow
def test_the_failure_the_readme_shows_is_what_the_kit_prints(tmp_path):
    shown = _shown_failure()
    example = ROOT / "examples" / "accepted-deviation"
    for name in ("runtime.py", "deviations.yaml"):
        (tmp_path / name).write_bytes((example / name).read_bytes())
    proc = kit(
        "run",
        "thread-jobs",
        "--adapter",
        "runtime:DemoAdapter",
        "--deviations",
        "deviations.yaml",
        cwd=tmp_path,
        pythonpath=tmp_path,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    printed = [line.rstrip() for line in proc.stdout.splitlines()]
    for line in shown.splitlines():
        if line.strip() and "…" not in line and not line.lstrip().startswith("progress:"):
            assert line.rstrip() in printed, f"the README shows {line!r}, the kit no longer prints it:\n{proc.stdout}"
