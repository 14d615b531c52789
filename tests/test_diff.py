"""`conformance diff`: what changed, stricter/looser/neutral, affected scenarios, version bump."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from conformance.cli import cli
from conformance.engine.loaded_specs import load_spec_once
from statemachines import load_spec
from statemachines.tools.behaviour import diff_behaviour
from statemachines.tools.diff import diff_specs, render_diff_markdown, schema_direction

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "spec"
VERSION = load_spec_once(SPEC / "thread-jobs.yaml").version  # the bundled thread-jobs version


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
    result = CliRunner().invoke(cli, ["diff", str(path), "--rev", "HEAD", "--check-version", "--no-behaviour"])
    assert result.exit_code == 0, result.output
    assert "retention_limit" in result.output and "B6, B7, B8" in result.output
    assert f"{VERSION} → 3.0.0" in result.output
    path.write_text(path.read_text().replace("version: 3.0.0", f"version: {VERSION}"))
    assert (
        CliRunner().invoke(cli, ["diff", str(path), "--rev", "HEAD", "--check-version", "--no-behaviour"]).exit_code
        == 1
    )
    bad = CliRunner().invoke(cli, ["diff", str(path), "--rev", "no-such-rev"])
    assert bad.exit_code == 2 and "no-such-rev" in bad.output


def test_usage_errors():
    runner = CliRunner()
    assert runner.invoke(cli, ["diff", str(SPEC / "thread-jobs.yaml")]).exit_code == 2
    both = runner.invoke(cli, ["diff", str(SPEC / "thread-jobs.yaml"), str(SPEC / "thread-jobs.yaml"), "--rev", "HEAD"])
    assert both.exit_code == 2


def retention_10(text: str) -> str:
    return text.replace(
        "  retention_limit:\n    type: integer\n    default: 20\n",
        "  retention_limit:\n    type: integer\n    default: 10\n",
    )


def test_retention_20_to_10_states_the_newly_possible_eviction(tmp_path):
    """The scope fixes retention at 1, which would hide 20 -> 10: both are
    searched at 2 -> 1 (order kept), and the eviction is stated as a shortest
    sequence and a sentence in the model's terms."""
    new = copy_thread_jobs(tmp_path, retention_10)
    result = diff_specs(load_spec(str(SPEC / "thread-jobs.yaml")), load_spec(str(new)), behaviour=True)
    found = result.behaviour
    assert found is not None and found.complete and not found.problems
    assert found.parameters == {"retention_limit": [2, 1]}
    assert any("20 -> 10 searched as 2 -> 1" in note for note in found.notes)
    [eviction] = [b for b in found.behaviours if b.aspect == "removed"]
    assert [step.operation for step in eviction.path] == [
        "start_job",
        "start_job",
        "observe_outcome",
        "observe_outcome",
    ]
    assert len({dict(step.args).get("thread_id") for step in eviction.path[:2]}) == 1  # one thread
    assert eviction.sentence.startswith("after 2 jobs of thread_id t1 reach a terminal state, job gen-1 (")
    assert "is evicted by policy retention (the oldest by completion_order); before, it was kept" in eviction.sentence
    markdown = render_diff_markdown(result)
    assert "### Behaviour that changed" in markdown
    assert f"**{eviction.sentence}.**" in markdown
    assert '`start_job(thread_id="t1", tool_call_id="c1", tool_name="search")` → `start_job(' in markdown
    assert result.to_dict()["behaviour"]["behaviours"][0]["path"][0]["call"] == "start_job"


@pytest.mark.slow
def test_behaviour_search_reads_both_ways(tmp_path):
    new = copy_thread_jobs(tmp_path, retention_10)
    back = diff_behaviour(load_spec(str(new)), load_spec(str(SPEC / "thread-jobs.yaml")))
    [kept] = [b for b in back.behaviours if b.aspect == "removed"]
    assert (
        "job gen-1 is kept; before, job gen-1 (" in kept.sentence and "was evicted by policy retention" in kept.sentence
    )
    assert any("10 -> 20 searched as 1 -> 2" in note for note in back.notes)


def test_behaviour_search_within_a_shallower_scope_and_left_out(tmp_path):
    new = copy_thread_jobs(tmp_path, retention_10)
    same = diff_behaviour(load_spec(str(SPEC / "thread-jobs.yaml")), load_spec(str(new)), {"max_depth": 3})
    assert same.behaviours == [] and same.complete  # two finishes in a thread need depth 4
    skipped = CliRunner().invoke(cli, ["diff", str(SPEC / "thread-jobs.yaml"), str(new), "--no-behaviour", "--json"])
    assert skipped.exit_code == 0 and json.loads(skipped.output)["behaviour"] is None


def test_an_operation_one_version_lacks_is_left_out_of_the_search_and_said(tmp_path):
    def add_ping(text: str) -> str:
        text = text.replace(
            "  restart:\n    summary: The process restarts",
            "  ping:\n    summary: A liveness check.\n    args: {type: object, required: [word], properties: {word: {type: string}}}\n"
            '    result: {type: object}\n    steps:\n      - result: "{}"\n\n'
            "  restart:\n    summary: The process restarts",
        )
        return text.replace(
            "      cancel_job: {requested_by: [user]}\n",
            "      cancel_job: {requested_by: [user]}\n      ping: {word: [hi]}\n",
        )

    new = copy_thread_jobs(tmp_path, add_ping)
    found = diff_behaviour(load_spec(str(SPEC / "thread-jobs.yaml")), load_spec(str(new)), {"max_depth": 1})
    assert not found.problems and found.complete and found.behaviours == []
    assert "for the old version, the scope's entries for what it lacks are left out: ping.word" in found.notes
    assert "not called (in one version only; see the changes above): ping" in found.notes
