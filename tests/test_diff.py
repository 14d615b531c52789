"""`conformance diff`: what changed, stricter/looser/neutral, affected scenarios, version bump."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from conformance.cli import cli
from statemachines import load_spec
from statemachines.tools.diff import diff_specs, schema_direction

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "spec"
VERSION = load_spec(SPEC / "thread-jobs.yaml").version  # the bundled thread-jobs version


def copy_thread_jobs(tmp_path: Path, edit=None) -> Path:
    for name in ("thread-jobs.yaml", "thread-jobs.scenarios.yaml"):
        shutil.copy(SPEC / name, tmp_path / name)
    path = tmp_path / "thread-jobs.yaml"
    if edit:
        text = path.read_text()
        new = edit(text)
        assert new != text
        path.write_text(new)
    return path


def retention_5(text: str) -> str:
    return text.replace(
        "  retention_limit:\n    type: integer\n    default: 20\n",
        "  retention_limit:\n    type: integer\n    default: 5\n",
    )


@pytest.mark.slow
def test_retention_limit_20_to_5_is_stricter_and_names_b6_b7_b8(tmp_path):
    new = copy_thread_jobs(tmp_path, retention_5)
    result = CliRunner().invoke(cli, ["diff", str(SPEC / "thread-jobs.yaml"), str(new), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    [change] = data["changes"]
    assert (change["area"], change["subject"], change["what"], change["impact"]) == (
        "parameter",
        "retention_limit",
        "default 20 -> 5",
        "stricter",
    )
    assert {"B6", "B7", "B8"} <= set(change["scenarios"])
    assert data["bump"] == "major" and data["suggested_version"] == "3.0.0" and not data["version_ok"]
    # The model predicts differently for those scenarios, and says where.
    assert {"B6", "B7", "B8"} <= {p["scenario"] for p in data["predictions"]}
    markdown = CliRunner().invoke(cli, ["diff", str(SPEC / "thread-jobs.yaml"), str(new)]).output
    assert "| parameter `retention_limit`: default 20 -> 5 | 🔴 stricter |" in markdown
    assert "B6, B7, B8" in markdown and "Suggested version bump: major" in markdown


def test_unrelated_scenarios_are_not_listed(tmp_path):
    new = copy_thread_jobs(tmp_path, retention_5)
    change = diff_specs(load_spec(SPEC / "thread-jobs.yaml"), load_spec(new)).changes[0]
    assert "N1" not in change.scenarios and "E1" not in change.scenarios


def test_wider_bounds_are_looser_and_a_minor_bump(tmp_path):
    new = copy_thread_jobs(
        tmp_path,
        lambda t: t.replace(
            "    minimum: 1\n    maximum: 100000\n", "    minimum: 1\n    maximum: 200000\n", 1
        ).replace(f"version: {VERSION}", "version: 2.1.0"),
    )
    d = diff_specs(load_spec(SPEC / "thread-jobs.yaml"), load_spec(new))
    assert [(c.subject, c.impact) for c in d.changes] == [("retention_limit", "looser")]
    assert d.bump == "minor" and d.version_ok


def test_operation_steps_and_result_schema_changes(tmp_path):
    def edit(text):
        text = text.replace(
            "        status: {const: running}\n    errors: [tool_call_resolved, job_exists_for_tool_call",
            "        status: {enum: [running, pending_cancel]}\n    errors: [tool_call_resolved, "
            "job_exists_for_tool_call",
        )
        return text.replace(
            "      - put: {table: busy_threads, key: args.thread_id, value: \"true\"}\n",
            "      - put: {table: busy_threads, key: args.thread_id, value: \"false\"}\n",
        )

    d = diff_specs(load_spec(SPEC / "thread-jobs.yaml"), load_spec(copy_thread_jobs(tmp_path, edit)))
    found = {(c.subject, c.impact) for c in d.changes}
    assert ("start_job.result", "looser") in found
    assert ("begin_turn.steps", "stricter") in found
    begin = next(c for c in d.changes if c.subject == "begin_turn.steps")
    # Every scenario that calls begin_turn is listed.
    spec = load_spec(SPEC / "thread-jobs.yaml")
    callers = {s.id for s in spec.scenarios if any(getattr(st, "operation", None) == "begin_turn" for st in s.steps)}
    assert callers and callers <= set(begin.scenarios)


def test_same_spec_has_no_change():
    d = diff_specs(load_spec(SPEC / "thread-jobs.yaml"), load_spec(SPEC / "thread-jobs.yaml"))
    assert d.changes == [] and d.bump == "none" and d.predictions == []


@pytest.mark.parametrize(
    "old, new, direction",
    [
        ({"type": "string"}, {"type": "string", "maxLength": 5}, "narrower"),
        ({"type": "integer", "minimum": 1}, {"type": "integer", "minimum": 0}, "wider"),
        ({"enum": ["a", "b"]}, {"enum": ["a", "b", "c"]}, "wider"),
        ({"required": ["a"]}, {"required": ["a", "b"]}, "narrower"),
        (
            {"type": "object", "additionalProperties": False, "properties": {"a": {}}},
            {"type": "object", "additionalProperties": False, "properties": {"a": {}, "b": {}}},
            "wider",
        ),
        ({"type": "string", "x-draw": {"pool": "p"}}, {"type": "string"}, "same"),
        ({"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "^b"}, "changed"),
        ({"minimum": 1, "maximum": 5}, {"minimum": 0, "maximum": 4}, "changed"),
    ],
)
def test_schema_direction(old, new, direction):
    assert schema_direction(old, new) == direction


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_rev_reads_the_old_version_and_its_fragments_from_git(tmp_path):
    path = copy_thread_jobs(tmp_path)

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "spec")
    path.write_text(retention_5(path.read_text()).replace(f"version: {VERSION}", "version: 3.0.0"))
    result = CliRunner().invoke(cli, ["diff", str(path), "--rev", "HEAD", "--check-version"])
    assert result.exit_code == 0, result.output
    assert "retention_limit" in result.output and "B6, B7, B8" in result.output
    assert f"{VERSION} → 3.0.0" in result.output
    path.write_text(path.read_text().replace("version: 3.0.0", f"version: {VERSION}"))
    assert CliRunner().invoke(cli, ["diff", str(path), "--rev", "HEAD", "--check-version"]).exit_code == 1
    bad = CliRunner().invoke(cli, ["diff", str(path), "--rev", "no-such-rev"])
    assert bad.exit_code == 2 and "no-such-rev" in bad.output


def test_usage_errors():
    runner = CliRunner()
    assert runner.invoke(cli, ["diff", str(SPEC / "thread-jobs.yaml")]).exit_code == 2
    both = runner.invoke(cli, ["diff", str(SPEC / "thread-jobs.yaml"), str(SPEC / "thread-jobs.yaml"), "--rev", "HEAD"])
    assert both.exit_code == 2
