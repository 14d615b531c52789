"""docs/ci.md's pull-request recipe for spec changes (issue 13, item 5): its
shell step, run for real in a git repository whose branch changes a spec,
lints nothing itself but posts `conformance diff` of every whole spec that
changed (to the job summary and, through `gh pr comment`, to the pull
request) and fails when the version is bumped too little."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SPEC_DIR = ROOT / "spec"

pytestmark = pytest.mark.skipif(
    shutil.which("git") is None or shutil.which("bash") is None, reason="needs git and bash"
)


def _recipe_script() -> str:
    """The `run: |` block of the step named 'Spec diff, posted on the pull request'."""
    text = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    step = text.split("- name: Spec diff, posted on the pull request", 1)[1]
    block = step.split("run: |\n", 1)[1].split("```", 1)[0]
    lines = block.splitlines()
    indent = len(lines[0]) - len(lines[0].lstrip())
    script = "\n".join(line[indent:] for line in lines)
    # What GitHub fills in before the shell runs.
    return script.replace("${{ github.event.pull_request.number }}", "42")


def _executable(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        timeout=60,
        env={
            **os.environ,
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@example.org",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.org",
        },
    )


@pytest.mark.slow
def test_the_recipe_posts_the_diff_of_each_changed_spec_and_fails_on_a_missing_bump(tmp_path):
    repo = tmp_path / "repo"
    (repo / "spec").mkdir(parents=True)
    for name in ("thread-jobs.yaml", "thread-jobs.scenarios.yaml"):
        shutil.copy(SPEC_DIR / name, repo / "spec" / name)
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "base")
    _git(repo, "branch", "-f", "base")
    spec = repo / "spec" / "thread-jobs.yaml"
    text, count = re.subn(
        r"(\n  retention_limit:\n    type: integer\n    default: )20\n", r"\g<1>5\n", spec.read_text(encoding="utf-8")
    )
    assert count == 1
    spec.write_text(text, encoding="utf-8")

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _executable(bin_dir / "conformance", f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m conformance.cli \"$@\"\n")
    posted = tmp_path / "gh-calls.txt"
    _executable(
        bin_dir / "gh",
        f"#!/bin/sh\necho \"$@\" >> {shlex.quote(str(posted))}\ncat \"$5\" >> {shlex.quote(str(posted))}\n",
    )
    summary = tmp_path / "summary.md"
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "BASE": "base",
        "GITHUB_STEP_SUMMARY": str(summary),
        "GH_TOKEN": "unused",
    }
    proc = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", _recipe_script()],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)  # the version kept: too little a bump
    assert "Traceback" not in proc.stderr, proc.stderr
    calls = posted.read_text(encoding="utf-8")
    assert calls.startswith("pr comment 42 --body-file spec-diff.md"), calls
    for shown in (calls, summary.read_text(encoding="utf-8")):
        assert "parameter `retention_limit`: default 20 -> 5" in shown and "stricter" in shown, shown
        assert "B6, B7, B8" in shown and "Suggested version bump: major" in shown, shown
