"""The layering in ARCHITECTURE.md holds, there are no import circles, and
public names are declared."""

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("statemachines", "conformance", "lifecycle_references")
KIT = PACKAGES + ("lifecycle_specs",)
MODULES = sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def table_rows(text: str) -> list[list[str]]:
    """The cells of each row of the Markdown table under "## Rooms" (header and rule left out)."""
    section = text.split("\n## Rooms", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip().strip("|").split("|") for line in section.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row] for row in rows[2:]]


def room_names(cell: str) -> list[str]:
    """The rooms a first cell names, as dotted names: `conformance/cli/`, `pytest_plugin.py`
    -> conformance.cli, conformance.pytest_plugin (a bare file is in the first path's folder)."""
    paths = re.findall(r"`([^`]+)`", cell)
    folder = paths[0].rstrip("/").rpartition("/")[0] if paths else ""
    names = []
    for path in paths:
        path = path if "/" in path else f"{folder}/{path}"
        names.append(path.removesuffix("/").removesuffix(".py").removesuffix("/__init__").replace("/", "."))
    return names


def kit_names(cell: str) -> set[str]:
    """The rooms of the kit a third cell names (dotted names in backticks)."""
    return {name for name in re.findall(r"`([^`]+)`", cell) if name.split(".")[0] in KIT}


def read_rooms(text: str) -> dict[str, set[str]]:
    """ARCHITECTURE.md's layer table: each room, and the rooms of the kit it may import."""
    rooms: dict[str, set[str]] = {}
    for row in table_rows(text):
        for room in room_names(row[0]):
            rooms[room] = kit_names(row[2])
    return rooms


# Each room, and the rooms of the kit it may import, read from ARCHITECTURE.md.
# A module belongs to the room with the longest matching prefix.
ROOMS = read_rooms((ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8"))


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # resolve relative imports against the module's package
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                names.add(".".join(base + ([node.module] if node.module else [])))
            else:
                names.add(node.module)
    return names


def kit_imports(path: Path) -> set[str]:
    return {n for n in imports_of(path) if n.split(".")[0] in KIT}


def room_of(name: str) -> str | None:
    matches = [room for room in ROOMS if name == room or name.startswith(room + ".")]
    return max(matches, key=len) if matches else None


def under(prefix: str, name: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def forbidden_imports(name: str, imported: set[str]) -> set[str]:
    """Of ``imported`` (kit modules), those the room of module ``name`` may not import."""
    room = room_of(name)
    assert room is not None, f"{name} is in no room of ARCHITECTURE.md's table (add a row for it)"
    allowed = ROOMS[room] | {room}
    return {n for n in imported if not any(under(a, n) for a in allowed)}


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(ROOT)) for p in MODULES])
def test_every_module_imports_only_the_rooms_its_room_may(path):
    name = module_name(path)
    bad = forbidden_imports(name, kit_imports(path))
    room = room_of(name)
    assert not bad, f"{name} (room {room}) imports {sorted(bad)}; it may import only {sorted(ROOMS[room] | {room})}"


def test_the_layer_table_is_read_from_the_document():
    # every package and sub-package of the kit (not the references' own) is a row or holds rows
    packages = {module_name(p) for p in MODULES if p.name == "__init__.py"}
    packages = {n for n in packages if n.count(".") <= 1 and not n.startswith("lifecycle_references.")}
    assert len(packages) >= 11 and len(ROOMS) >= 20
    missing = sorted(n for n in packages if n not in ROOMS and not any(r.startswith(n + ".") for r in ROOMS))
    assert not missing, f"packages with no row in ARCHITECTURE.md's table: {missing}"
    for sub in ("language", "load", "model", "tools"):
        assert f"statemachines.{sub}" in ROOMS
    assert ROOMS["statemachines.errors"] == set()
    assert ROOMS["conformance.adapters.adapter"] == set()
    assert ROOMS["statemachines.model"] == {"statemachines.errors", "statemachines.language", "statemachines.load"}
    assert "conformance.cli" in ROOMS and "conformance.pytest_plugin" in ROOMS


def test_the_table_catches_an_import_against_the_layers():
    # down the layers is allowed; back up one, or across into the harness, is not
    assert not forbidden_imports("statemachines.model.compiler", {"statemachines.load.spec", "statemachines.errors"})
    assert forbidden_imports("statemachines.language.expressions", {"statemachines.model.model"})
    assert forbidden_imports("statemachines.load.spec", {"statemachines.tools.lint"})
    assert forbidden_imports("statemachines.tools.lint", {"conformance.engine.runner"})
    assert forbidden_imports("conformance.adapters.stdio", {"conformance.engine.session"})
    assert forbidden_imports("lifecycle_references.thread_jobs.adapter", {"statemachines"})
    assert not forbidden_imports("lifecycle_references.async_cli.wiring", {"conformance.adapters.command"})
    with pytest.raises(AssertionError, match="in no room"):
        forbidden_imports("elsewhere.module", set())


def test_a_table_is_parsed_row_by_row():
    text = """# x

## Rooms

| room | job | may import (kit) | may import (outside) |
|---|---|---|---|
| `statemachines/load/` | loading; reads `lifecycle_specs` as data | `statemachines.errors`, `statemachines.language` | `yaml` |
| `conformance/cli/`, `pytest_plugin.py` | front doors | `conformance`, `statemachines` | `click` |
| `conformance/errors.py` | the root exception | — | stdlib |

## Next
| `not/a/room.py` | | `conformance` | |
"""
    assert read_rooms(text) == {
        "statemachines.load": {"statemachines.errors", "statemachines.language"},
        "conformance.cli": {"conformance", "statemachines"},
        "conformance.pytest_plugin": {"conformance", "statemachines"},
        "conformance.errors": set(),
    }


def test_statemachines_never_imports_hypothesis_or_pytest():
    for path in MODULES:
        if module_name(path).startswith("statemachines"):
            bad = {n for n in imports_of(path) if n.split(".")[0] in ("hypothesis", "pytest", "conformance")}
            assert not bad, f"{path}: {bad}"


def test_reference_implementations_are_independent_of_the_model():
    for path in MODULES:
        if module_name(path).startswith("lifecycle_references"):
            assert not {n for n in kit_imports(path) if n.split(".")[0] == "statemachines"}, path


def test_no_import_circles():
    names = {module_name(p): p for p in MODULES}

    def target(imported: str) -> str | None:
        while imported and imported not in names:  # `from pkg import name` names a module or something in pkg
            imported = imported.rpartition(".")[0]
        return imported or None

    graph = {
        name: {
            t
            for n in kit_imports(path)
            if (t := target(n)) and t != name and not name.startswith(t + ".") and not t.startswith(name + ".")
        }
        for name, path in names.items()
    }
    # a package's __init__ importing its own submodules is not a circle; anything else is
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt) :] + [nxt]
                pytest.fail("import circle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_public_surface():
    import conformance

    assert set(conformance.__all__) >= {"Adapter", "RunConfig", "run_conformance", "conformance_suite"}
    for name in conformance.__all__:
        assert getattr(conformance, name) is not None


def test_the_protocol_has_one_path():
    """The 0.1.0 shim ``conformance.adapter`` is gone: the protocol is
    ``conformance.adapters`` (or ``from conformance import Adapter``)."""
    import conformance
    from conformance.adapters import Adapter

    assert conformance.Adapter is Adapter
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("conformance.adapter")


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(ROOT)) for p in MODULES])
def test_public_names_are_declared(path):
    if path.name == "__main__.py":
        pytest.skip("entry point")
    with __import__("warnings").catch_warnings():
        __import__("warnings").simplefilter("ignore", DeprecationWarning)
        module = importlib.import_module(module_name(path))
    if path.name == "__init__.py" and not hasattr(module, "__all__"):
        assert not [n for n in vars(module) if not n.startswith("_")], f"{path} exports names without __all__"
        return
    assert hasattr(module, "__all__"), f"{path} has no __all__"
    for name in module.__all__:
        assert hasattr(module, name), f"{path}: __all__ names missing {name}"
