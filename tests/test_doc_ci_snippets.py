"""Every GitHub Actions snippet in the README and docs/ validates against
GitHub's published JSON Schemas (SchemaStore's github-workflow.json and
github-action.json, vendored in tests/fixtures/github-schemas with their
source: no network here), and so does the kit's own action; third-party
actions are pinned by full commit SHA.

A ```yaml block is a workflow when it has `jobs:`; a job when it has
`steps:` that are GitHub steps (validated inside a one-job workflow); a list
of steps when it is a list of mappings with `uses:` or `run:` (validated as
a job's steps). Other blocks (pre-commit configs, specs, counterexample
files, whose steps are the kit's `call:`s) are not GitHub Actions files."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "tests" / "fixtures" / "github-schemas"
ACTION = ROOT / ".github" / "actions" / "conformance" / "action.yml"
OWN_ACTION = "OWNER/lifecycle-conformance/"  # the kit's own action: the reader pins the release they take
SHA_PIN = re.compile(r"^[^@\s]+@[0-9a-f]{40}$")

_spec = importlib.util.spec_from_file_location("doc_yaml_blocks", ROOT / "tests" / "test_doc_yaml_blocks.py")
assert _spec and _spec.loader
_blocks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_blocks)


def _validator(name: str) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(json.loads((SCHEMAS / name).read_text(encoding="utf-8")))


def _as_workflow(value) -> dict | None:
    """The block as a whole workflow, or None when it is no GitHub Actions file."""
    if isinstance(value, dict) and "jobs" in value:
        # PyYAML reads YAML 1.1, where a bare `on` is the boolean true; GitHub reads the key `on`
        return {("on" if key is True else key): item for key, item in value.items()}
    if isinstance(value, dict) and "steps" in value and _github_steps(value["steps"]):
        return {"on": "push", "jobs": {"job": {"runs-on": "ubuntu-latest", **value}}}
    if _github_steps(value):
        return {"on": "push", "jobs": {"job": {"runs-on": "ubuntu-latest", "steps": value}}}
    return None


def _github_steps(value) -> bool:
    """Whether ``value`` is a list of GitHub Actions steps (each with `uses:`
    or `run:`), not the kit's own steps (a counterexample file's `call:`)."""
    return (
        isinstance(value, list) and bool(value) and all(isinstance(s, dict) and {"uses", "run"} & set(s) for s in value)
    )


def _snippets() -> list[tuple[str, dict]]:
    found = []
    for path in _blocks.DOCUMENTS:
        for line, info, body in _blocks.yaml_blocks(path.read_text(encoding="utf-8")):
            if "fragment" in info.split():
                continue
            workflow = _as_workflow(yaml.safe_load(body))
            if workflow is not None:
                found.append((f"{path.relative_to(ROOT).as_posix()}:{line}", workflow))
    return found


SNIPPETS = _snippets()


def _uses(workflow: dict) -> list[str]:
    return [
        step["uses"]
        for job in workflow["jobs"].values()
        for step in job.get("steps", [])
        if isinstance(step, dict) and "uses" in step
    ]


def _problems(validator: jsonschema.Draft7Validator, value) -> list[str]:
    return [
        f"{'/'.join(map(str, error.absolute_path)) or '(top)'}: {error.message[:300]}"
        for error in validator.iter_errors(value)
    ]


def test_the_snippets_are_found():
    where = [name for name, _ in SNIPPETS]
    assert sum(name.startswith("docs/ci.md") for name in where) >= 3, where
    assert any(name.startswith("README.md") for name in where), where


@pytest.mark.parametrize("name, workflow", SNIPPETS, ids=[name for name, _ in SNIPPETS])
def test_workflow_snippet_validates_against_githubs_schema(name, workflow):
    problems = _problems(_validator("github-workflow.json"), workflow)
    assert not problems, f"{name}: not a valid GitHub workflow:\n" + "\n".join(problems)


@pytest.mark.parametrize("name, workflow", SNIPPETS, ids=[name for name, _ in SNIPPETS])
def test_third_party_actions_in_snippets_are_pinned_by_commit(name, workflow):
    loose = [u for u in _uses(workflow) if not u.startswith((OWN_ACTION, "./")) and not SHA_PIN.match(u)]
    assert not loose, f"{name}: pin these by full commit SHA (the tag in a comment): {loose}"


def test_the_kits_action_validates_and_pins_its_actions_by_commit():
    action = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
    problems = _problems(_validator("github-action.json"), action)
    assert not problems, "action.yml is not a valid GitHub action:\n" + "\n".join(problems)
    uses = [step["uses"] for step in action["runs"]["steps"] if "uses" in step]
    assert uses and all(SHA_PIN.match(u) for u in uses), uses


def test_the_check_catches_a_workflow_without_on():
    workflow = {"jobs": {"j": {"runs-on": "ubuntu-latest", "steps": [{"run": "true"}]}}}
    assert _problems(_validator("github-workflow.json"), workflow)
    assert not _problems(_validator("github-workflow.json"), {"on": "push", **workflow})


def test_the_vendored_schemas_name_their_source():
    source = (SCHEMAS / "SOURCE.md").read_text(encoding="utf-8")
    for name in ("github-workflow.json", "github-action.json"):
        assert f"https://json.schemastore.org/{name}" in source
        assert json.loads((SCHEMAS / name).read_text(encoding="utf-8"))["$id"].endswith(name)


def _snippet_jobs() -> list[tuple[str, str, dict]]:
    """(where, job name, job) of every job the snippets write out (a whole
    workflow's jobs, or a block that is one job); a list of steps has no job."""
    found = []
    for path in _blocks.DOCUMENTS:
        for line, info, body in _blocks.yaml_blocks(path.read_text(encoding="utf-8")):
            value = yaml.safe_load(body)
            if "fragment" in info.split() or _as_workflow(value) is None:
                continue
            where = f"{path.relative_to(ROOT).as_posix()}:{line}"
            if isinstance(value, dict) and "jobs" in value:
                found += [(where, name, job) for name, job in value["jobs"].items()]
            elif isinstance(value, dict) and "steps" in value:
                found.append((where, "(the job)", value))
    return found


JOBS = _snippet_jobs()
ACTION_INPUTS = set(yaml.safe_load(ACTION.read_text(encoding="utf-8"))["inputs"])


def _own_action_steps(workflow: dict) -> list[dict]:
    return [
        step
        for job in workflow["jobs"].values()
        for step in job.get("steps", [])
        if isinstance(step, dict) and str(step.get("uses", "")).startswith(OWN_ACTION)
    ]


def test_every_job_in_the_snippets_sets_a_timeout():
    assert len(JOBS) >= 4, JOBS
    missing = [f"{where} {name}" for where, name, job in JOBS if "timeout-minutes" not in job]
    assert not missing, f"jobs without timeout-minutes (a hung run holds the runner for 6 hours): {missing}"


@pytest.mark.parametrize("name, workflow", SNIPPETS, ids=[name for name, _ in SNIPPETS])
def test_the_kits_action_gets_only_inputs_it_declares(name, workflow):
    for step in _own_action_steps(workflow):
        unknown = set(step.get("with", {})) - ACTION_INPUTS
        assert not unknown, f"{name}: the action has no input(s) {sorted(unknown)}"


@pytest.mark.parametrize("name, workflow", SNIPPETS, ids=[name for name, _ in SNIPPETS])
def test_an_in_process_adapter_is_installed_into_the_kits_python(name, workflow):
    # The action sets up its own Python: a `pip install` step before it installs
    # into another one. Only its `install` input reaches the kit's Python.
    for step in _own_action_steps(workflow):
        given = step.get("with", {})
        if given.get("adapter"):
            assert given.get("install"), f"{name}: an in-process adapter needs the action's `install` input"
    # A job that runs `conformance run --adapter` itself installs the kit and the project in one go.
    for job in workflow["jobs"].values():
        runs = [str(s["run"]) for s in job.get("steps", []) if isinstance(s, dict) and "run" in s]
        for i, run in enumerate(runs):
            if "conformance run" in run and "--adapter " in run:
                installs = [r.split() for r in runs[:i] if "pip install" in r]
                assert any("lifecycle-conformance" in words and "." in words for words in installs), (
                    f"{name}: `{run.strip()[:60]}...` needs the project installed beside the kit"
                )
