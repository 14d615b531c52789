"""Loading an implementation's adapter from ``module:attribute``."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import AdapterLoadError
from .adapter import Adapter

__all__ = ["resolve_target", "adapter_factory", "parse_options"]


def resolve_target(target: str) -> Any:
    """Import ``package.module:attribute``; errors say what to fix."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise AdapterLoadError(f"adapter target {target!r} must look like package.module:Attribute")
    if str(Path.cwd()) not in sys.path:
        # Let users name modules of the project they run in; appended, so that a
        # checkout of a package never hides the installed one.
        sys.path.append(str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise AdapterLoadError(
            f"cannot import module {module_name!r} for adapter {target!r}: {exc}; is it installed or on PYTHONPATH?"
        ) from None
    except BaseException as exc:  # the module failed while importing: sys.exit() and Ctrl-C of its own too
        if getattr(exc, "signum", None) is not None:
            raise  # a signal the kit received (engine.interrupts.Interrupted): it stops the run
        what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise AdapterLoadError(f"importing {module_name!r} failed: {what}") from None
    value: Any = module
    for part in attr.split("."):
        if not hasattr(value, part):
            raise AdapterLoadError(f"module {module_name!r} has no attribute {attr!r} (adapter {target!r})")
        value = getattr(value, part)
    return value


def parse_options(pairs: list[str] | tuple[str, ...]) -> dict[str, str]:
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise AdapterLoadError(f"adapter option {pair!r} must look like KEY=VALUE")
        options[key.strip()] = value
    return options


def adapter_factory(target: str, options: dict | None = None) -> Callable[[], Adapter]:
    """A callable that builds a fresh adapter for ``target`` with ``options``."""
    factory = resolve_target(target)
    if not callable(factory):
        raise AdapterLoadError(f"adapter {target!r} is not callable; name an Adapter class or factory")
    options = dict(options or {})

    def build() -> Adapter:
        try:
            adapter = factory(**options)
        except TypeError as exc:
            raise AdapterLoadError(f"adapter {target!r} rejected options {options}: {exc}") from None
        except Exception as exc:
            raise AdapterLoadError(f"adapter {target!r} failed to start: {type(exc).__name__}: {exc}") from None
        for method in ("describe", "reset", "call"):
            if not callable(getattr(adapter, method, None)):
                raise AdapterLoadError(
                    f"adapter {target!r} has no {method}() method; subclass conformance.adapters.adapter.Adapter"
                )
        return adapter

    return build
