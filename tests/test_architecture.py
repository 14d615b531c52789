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

# ARCHITECTURE.md's table: each room, and the rooms of the kit it may import.
# A module belongs to the room with the longest matching prefix.
ROOMS = {
    "statemachines": {"statemachines"},
    "conformance.errors": set(),
    "conformance.specs": {"conformance.errors"},
    "conformance.adapters.adapter": set(),
    "conformance.adapters": {"conformance.adapters", "conformance.errors"},
    "conformance.reporting": {"conformance.reporting"},
    "conformance.traces.format": {"statemachines"},  # the trace format: the engine records with it
    "conformance.traces": {
        "conformance.traces",
        "conformance.engine",
        "conformance.adapters",
        "conformance.errors",
        "conformance.specs",
        "statemachines",
    },
    "conformance.engine": {
        "conformance.engine",
        "conformance.traces.format",
        "conformance.adapters",
        "conformance.errors",
        "conformance.specs",
        "conformance.reporting",
        "statemachines",
    },
    # front doors: everything below them
    "conformance.cli": {"conformance", "statemachines"},
    "conformance.pytest_plugin": {"conformance", "statemachines"},
    "conformance.mutants": {"conformance", "statemachines"},
    "conformance.fuzzing": {"conformance", "statemachines"},
    "conformance.scaffold": {"conformance", "statemachines"},
    "conformance.progress": {"conformance"},
    "conformance.workers": {"conformance", "statemachines"},
    "conformance.spec_revision": {"statemachines"},
    "conformance.schema_files": {
        "statemachines",
        "conformance.adapters",
        "conformance.reporting",
        "conformance.traces.format",
    },
    "conformance.__main__": {"conformance"},
    "conformance": {"conformance.adapters"},  # the package's lazy surface
    # references: the adapter protocol only (the CLI reference's wiring also reaches the command adapter)
    "lifecycle_references": {"lifecycle_references", "conformance.adapters.adapter"},
    "lifecycle_references.async_cli.wiring": {"lifecycle_references", "conformance.adapters"},
}


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


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(ROOT)) for p in MODULES])
def test_every_module_imports_only_the_rooms_its_room_may(path):
    name = module_name(path)
    room = room_of(name)
    assert room is not None, f"{name} is in no room of ARCHITECTURE.md's table (add it there and to ROOMS)"
    allowed = ROOMS[room] | {room}
    bad = {n for n in kit_imports(path) if not any(under(a, n) for a in allowed)}
    assert not bad, f"{name} (room {room}) imports {sorted(bad)}; it may import only {sorted(allowed)}"


def documented_rooms() -> set[str]:
    """The rooms named in the first column of ARCHITECTURE.md's table, as dotted names
    (`conformance/cli.py`, `pytest_plugin.py` -> conformance.cli, conformance.pytest_plugin)."""
    rooms = set()
    for line in (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8").splitlines():
        paths = re.findall(r"`([^`]+)`", line.split("|")[1]) if line.startswith("| `") else []
        folder = paths[0].rpartition("/")[0] if paths else ""
        for path in paths:
            path = path if "/" in path else f"{folder}/{path}"
            rooms.add(path.removesuffix("/").removesuffix(".py").removesuffix("/__init__").replace("/", "."))
    return rooms


def test_every_room_is_a_row_of_the_architecture_table():
    documented = documented_rooms()
    missing = sorted({room_of(module_name(p)) for p in MODULES} - documented - {None})
    assert not missing, f"rooms of ROOMS with modules but no row in ARCHITECTURE.md's table: {missing}"


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
