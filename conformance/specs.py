"""Finding a spec by name or by path.

Placeholder for issue 9 item 1: the integrator replaces the body of
:func:`resolve_spec` with a lookup of specs bundled as package resources (and
of the ``lifecycle_conformance.specs`` entry point group). Callers use only
this function, so they follow that change without edits.
"""
from __future__ import annotations

from pathlib import Path

__all__ = ["resolve_spec"]

_SPEC_DIR = Path(__file__).resolve().parent.parent / "spec"


def resolve_spec(name_or_path: str, *, relative_to: str | None = None) -> str:
    """The file of a spec: ``name_or_path`` as a path (against ``relative_to``
    when it is relative and that directory is given), else a bundled spec of
    that name. Unknown names come back unchanged, so loading them reports
    "cannot read spec" with what the user wrote."""
    path = Path(name_or_path)
    if relative_to is not None and not path.is_absolute():
        candidate = Path(relative_to) / path
        if candidate.is_file():
            return str(candidate)
    elif path.is_file():
        return str(path)
    if path.name == name_or_path and not path.suffix:
        bundled = _SPEC_DIR / f"{name_or_path}.yaml"
        if bundled.is_file():
            return str(bundled)
    return name_or_path
