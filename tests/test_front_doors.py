"""One engine behind every front door: the command, the pytest plugin, the
workers and mutation testing run the engine's public phases
(``run_conformance``, ``prepare``), never the scenario runner or the
exploration themselves, so none of them can skip the reduction, the
grouping of failures by cause or the counterexample files."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "conformance"

# fuzzing.py is left out: HypoFuzz fuzzes a Hypothesis test itself, so it
# builds the exploration's test (engine/stateful.py: exploration_test) by
# design; a failure it finds is replayed by a plain `pytest` run.
FRONT_DOORS = sorted(
    [PACKAGE / "pytest_plugin.py", PACKAGE / "workers.py", PACKAGE / "mutants.py", *(PACKAGE / "cli").glob("*.py")]
)
FORBIDDEN = {"run_stateful", "run_scenario", "explore"}


def _uses(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of every import or call of a forbidden name."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name in FORBIDDEN]
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if name in FORBIDDEN:
                found.append((node.lineno, name))
        elif isinstance(node, ast.Attribute) and node.attr in FORBIDDEN:
            found.append((node.lineno, node.attr))  # e.g. passed on as stateful.run_stateful
    return sorted(set(found))


def test_the_front_doors_are_listed():
    assert PACKAGE / "cli" / "run.py" in FRONT_DOORS and PACKAGE / "cli" / "replay.py" in FRONT_DOORS
    assert all(path.is_file() for path in FRONT_DOORS)


@pytest.mark.parametrize("path", FRONT_DOORS, ids=lambda p: str(p.relative_to(ROOT)))
def test_front_door_runs_only_the_engines_public_phases(path):
    uses = _uses(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    assert not uses, (
        f"{path.relative_to(ROOT)} calls the scenario runner or the exploration itself "
        f"({', '.join(f'line {line}: {name}' for line, name in uses)}); "
        "go through conformance.engine.runner.run_conformance instead"
    )


def test_the_check_sees_a_direct_call():
    source = (
        "from conformance.engine.stateful import run_stateful\n"
        "import conformance.engine.scenarios as s\n"
        "s.run_scenario(1, 2, 3)\n"
    )
    assert _uses(ast.parse(source)) == [(1, "run_stateful"), (3, "run_scenario")]
