"""docs/spec-language.md documents every section, step kind, policy kind,
matcher and CEL helper the kit knows: adding one without documenting it
fails here."""

import json
import re
from pathlib import Path

import pytest

from statemachines.language.expressions import MODEL_FUNCTIONS, PURE_FUNCTIONS
from statemachines.model.steps import STEP_KINDS
from statemachines.tools.lint import RULES

ROOT = Path(__file__).resolve().parent.parent
GUIDE = (ROOT / "docs" / "spec-language.md").read_text()
SCHEMA = json.loads((ROOT / "spec" / "lifecycle-spec.schema.json").read_text())


def headings(part_title: str) -> set[str]:
    """The `name` headings under one '## Reference: ...' part of the guide."""
    part = GUIDE.split(f"## Reference: {part_title}\n", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^#{3,4} `([^`]+)`$", part, re.M))


def schema_step_kinds() -> set[str]:
    return {item["required"][0] for item in SCHEMA["$defs"]["steps"]["items"]["oneOf"]}


def schema_policy_kinds() -> set[str]:
    return set(SCHEMA["properties"]["policies"]["additionalProperties"]["properties"]["kind"]["enum"])


def schema_matchers() -> set[str]:
    emit = next(i for i in SCHEMA["$defs"]["steps"]["items"]["oneOf"] if i["required"] == ["emit"])
    field = emit["properties"]["emit"]["properties"]["fields"]["additionalProperties"]
    return set(next(o for o in field["oneOf"] if o.get("type") == "object")["properties"])


def schema_scenario_steps() -> set[str]:
    return {item["required"][0] for item in SCHEMA["$defs"]["scenario_step"]["oneOf"]}


@pytest.mark.parametrize(
    "part, names",
    [
        ("sections", lambda: set(SCHEMA["properties"])),
        ("step kinds", lambda: schema_step_kinds() | set(STEP_KINDS)),
        ("policy kinds", schema_policy_kinds),
        ("matchers", schema_matchers),
        ("CEL", lambda: set(PURE_FUNCTIONS) | set(MODEL_FUNCTIONS)),
        ("scenario steps", schema_scenario_steps),
    ],
)
def test_guide_documents_every_name(part, names):
    missing = names() - headings(part)
    assert not missing, f"docs/spec-language.md, '## Reference: {part}' lacks a heading for: {sorted(missing)}"


def test_each_reference_entry_has_an_example():
    for part in ("step kinds", "policy kinds", "matchers", "CEL"):
        body = GUIDE.split(f"## Reference: {part}\n", 1)[1].split("\n## ", 1)[0]
        for name, text in re.findall(r"^#{3,4} `([^`]+)`\n(.*?)(?=^#{3,4} |\Z)", body, re.M | re.S):
            assert "`" in text.replace(f"`{name}`", ""), f"{part} `{name}` has no example"


def test_guide_lists_every_lint_rule():
    for rule in RULES:
        assert f"| `{rule}` |" in GUIDE, rule


def test_headings_are_read_from_the_right_parts():
    """The checks above compare against real headings, not an empty set."""
    assert headings("step kinds") == set(STEP_KINDS)
    assert headings("policy kinds") == schema_policy_kinds()
    assert "observed" in headings("CEL") and "let" not in headings("CEL")
