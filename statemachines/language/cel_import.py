"""The CEL implementation the kit evaluates spec expressions with (the
``common-expression-language`` package), imported without its interactive
command line."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys

__all__ = ["cel", "import_cel"]


def import_cel():  # -> the cel module
    """``import cel`` without loading its interactive command line yet.

    The ``cel`` package's ``__init__`` imports its ``cel.cli`` module (typer,
    prompt_toolkit, pygments: about 0.1 s, a quarter of every ``conformance``
    start) although the kit never uses it. ``cel.cli`` is put in place as a
    module whose contents load on first use (PEP 562's module ``__getattr__``),
    so anyone who does use it still gets all of it."""
    if "cel" not in sys.modules and "cel.cli" not in sys.modules:
        try:
            package = importlib.util.find_spec("cel")
            found = (
                importlib.machinery.PathFinder.find_spec("cel.cli", package.submodule_search_locations)
                if package is not None and package.submodule_search_locations
                else None
            )
        except (ImportError, ValueError):
            found = None
        if found is not None and found.loader is not None and hasattr(found.loader, "exec_module"):
            module = importlib.util.module_from_spec(found)

            def load(name):
                del module.__getattr__
                found.loader.exec_module(module)
                return getattr(module, name)

            module.__getattr__ = load
            sys.modules["cel.cli"] = module
    import cel as imported

    return imported


cel = import_cel()
