"""Every ```yaml block of the README and docs/ parses with yaml.safe_load, so
a reader can copy it as it is (a GitHub Actions `${{ }}` inside a {flow
mapping} does not parse). A block that is meant as a fragment says so in its
fence: ```yaml fragment."""

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(
    r"^(?P<indent>[ \t]*)```(?P<info>ya?ml\b[^\n]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.MULTILINE | re.DOTALL
)


def yaml_blocks(text: str) -> list[tuple[int, str, str]]:
    """(line of the fence, info string, body) of each ```yaml block."""
    blocks = []
    for match in FENCE.finditer(text):
        indent = match.group("indent")
        body = "".join(
            line[len(indent) :] if line.startswith(indent) else line
            for line in match.group("body").splitlines(keepends=True)
        )
        blocks.append((text.count("\n", 0, match.start()) + 1, match.group("info").strip(), body))
    return blocks


DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCKS = [
    (path, line, body)
    for path in DOCUMENTS
    for line, info, body in yaml_blocks(path.read_text(encoding="utf-8"))
    if "fragment" not in info.split()
]


def test_the_blocks_are_found():
    assert len(DOCUMENTS) > 5 and len(BLOCKS) > 20
    assert any(path.name == "ci.md" for path, _, _ in BLOCKS)


@pytest.mark.parametrize(
    "path, line, body", BLOCKS, ids=[f"{p.relative_to(ROOT).as_posix()}:{n}" for p, n, _ in BLOCKS]
)
def test_yaml_block_parses(path, line, body):
    try:
        yaml.safe_load(body)
    except yaml.YAMLError as exc:
        pytest.fail(f"{path.relative_to(ROOT)}:{line}: the yaml block does not parse: {exc}")


def test_the_check_catches_an_expression_in_a_flow_mapping():
    text = "x\n```yaml\nwith: {name: shard-${{ matrix.shard }}, path: p}\n```\n\n  ```yaml fragment\n  a: [\n  ```\n"
    [(line, info, body), (_, fragment_info, _)] = yaml_blocks(text)
    assert line == 2 and info == "yaml" and fragment_info == "yaml fragment"
    with pytest.raises(yaml.YAMLError):
        yaml.safe_load(body)


def test_the_sharding_workflow_names_each_shards_artifact():
    [workflow] = [
        yaml.safe_load(body)
        for path, _, body in BLOCKS
        if path.name == "ci.md" and "--shard ${{ matrix.shard }}/4" in body
    ]
    uploads = [
        step["with"]
        for step in workflow["jobs"]["conformance"]["steps"]
        if step.get("uses", "").startswith("actions/upload-artifact")
    ]
    assert uploads == [{"name": "shard-${{ matrix.shard }}", "path": "shard-${{ matrix.shard }}"}]
