"""The layering in ARCHITECTURE.md holds, and public names are declared."""
import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MODULES = sorted(p for pkg in ("statemachines", "conformance") for p in (ROOT / pkg).rglob("*.py"))


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


def under(folder: str):
    return [p for p in MODULES if p.is_relative_to(ROOT / folder)]


def test_statemachines_never_imports_hypothesis_or_pytest():
    for path in under("statemachines"):
        bad = {n for n in imports_of(path) if n.split(".")[0] in ("hypothesis", "pytest", "conformance")}
        assert not bad, f"{path}: {bad}"


def test_reference_implementations_are_independent_of_the_model():
    for path in under("conformance/reference"):
        kit = {n for n in imports_of(path) if n.split(".")[0] in ("statemachines", "conformance")}
        allowed = {n for n in kit if n == "conformance.adapter" or n.startswith("conformance.reference")}
        assert kit == allowed, f"{path} imports {kit - allowed}"


def test_reporting_imports_no_other_kit_module():
    for path in under("conformance/reporting"):
        kit = {n for n in imports_of(path) if n.split(".")[0] in ("statemachines", "conformance")}
        assert all(n.startswith("conformance.reporting") for n in kit), f"{path}: {kit}"


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(ROOT)) for p in MODULES])
def test_public_names_are_declared(path):
    if path.name == "__main__.py":
        pytest.skip("entry point")
    module = importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"))
    if path.name == "__init__.py" and not hasattr(module, "__all__"):
        assert not [n for n in vars(module) if not n.startswith("_")], f"{path} exports names without __all__"
        return
    assert hasattr(module, "__all__"), f"{path} has no __all__"
    for name in module.__all__:
        assert hasattr(module, name), f"{path}: __all__ names missing {name}"
