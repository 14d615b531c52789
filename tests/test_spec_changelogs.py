"""Each bundled spec's changelog (spec/<name>.changelog.md): what changed in
each version, newest first, the spec's own version on top, and for a major
change what an implementation must re-check; `conformance specs` shows it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.specs import bundled_specs, changelog_path, changelog_problems, changelog_versions
from statemachines import load_spec

ROOT = Path(__file__).resolve().parent.parent
BUNDLED = bundled_specs()


def _kit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "conformance.cli", *args], capture_output=True, text=True, timeout=300, cwd=ROOT
    )


@pytest.mark.parametrize("bundled", BUNDLED, ids=[b.name for b in BUNDLED])
def test_each_bundled_spec_has_a_changelog_up_to_its_version(bundled):
    path = changelog_path(bundled.path)
    assert path is not None, f"{bundled.name} has no {bundled.name}.changelog.md beside it"
    text = path.read_text(encoding="utf-8")
    spec = load_spec(bundled.path)
    assert changelog_problems(text, spec.version) == []
    versions = [version for version, _ in changelog_versions(text)]
    assert versions[-1].endswith(".0.0")  # down to the first version


def test_a_major_change_without_what_to_recheck_is_a_problem():
    text = "## 2.0.0 (major)\n\nNew parameters.\n\n## 1.0.1\n\n- a scenario\n\n## 1.0.0\n\n- first\n"
    assert changelog_problems(text, "2.0.0") == [
        "2.0.0 is a major change but does not say what to re-check (a `Re-check` paragraph)"
    ]
    assert changelog_problems(text.replace("New parameters.", "Re-check: the start."), "2.0.0") == []
    assert changelog_problems(text, "2.0.1")[0] == "its newest section is 2.0.0, the spec is 2.0.1"
    assert "its sections are not newest first" in changelog_problems("## 1.0.0\n\n## 1.0.1\n", "1.0.0")
    assert changelog_problems("# nothing\n", "1.0.0") == ["it has no `## VERSION` section"]


def test_specs_shows_the_changelog():
    listed = _kit("specs", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert rows["thread-jobs"]["changelog"].endswith("thread-jobs.changelog.md")
    assert "major 2.0.0" in rows["thread-jobs"]["changes"]
    shown = _kit("specs", "--changelog", "thread-jobs")
    assert shown.returncode == 0, shown.stderr
    assert "## 2.0.0 (major)" in shown.stdout and "Re-check when moving from 1.x" in shown.stdout
    table = _kit("specs")
    assert "conformance specs --changelog NAME" in table.stdout


def test_a_spec_without_a_changelog_says_where_it_would_be(tmp_path):
    spec = tmp_path / "mine.yaml"
    spec.write_text((ROOT / "spec" / "task-progress.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    shown = _kit("specs", "--changelog", str(spec))
    assert shown.returncode == 2 and "mine.changelog.md" in shown.stderr
