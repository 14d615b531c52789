"""report.json: serialisation and validation against report.schema.json."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from .errors import ReportingError

__all__ = ["SCHEMA_PATH", "load_report", "load_schema", "render_json", "validate_report"]

SCHEMA_PATH = resources.files("conformance").joinpath("schemas", "report.schema.json")


@lru_cache(maxsize=1)
def load_schema() -> dict:
    try:
        return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReportingError(f"cannot read report schema {SCHEMA_PATH}: {exc}") from exc


def _where(path) -> str:
    # Same notation as a failure's "path" field: scenarios[1].failure.kind
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<root>"


def _leaves(error: ValidationError) -> Iterator[ValidationError]:
    """The errors that name what is actually wrong.

    A oneOf error only says "not valid under any of the given schemas". Once
    the alternatives the value is not even shaped like (``null`` in the
    nullable ``oneOf [null, X]`` pattern) are set aside, if a single
    alternative is left its own errors are the useful ones.
    """
    shaped = [e for e in error.context or [] if not (e.validator == "type" and not e.relative_path)]
    if shaped and len({e.relative_schema_path[0] for e in shaped}) == 1:
        for sub in shaped:
            yield from _leaves(sub)
    else:
        yield error


def validate_report(report: Any) -> list[str]:
    """Schema errors as sorted ``"path: message"`` strings; empty when valid."""
    validator = Draft202012Validator(load_schema())
    found = set()
    for error in validator.iter_errors(report):
        for leaf in _leaves(error):
            message = leaf.message if len(leaf.message) <= 200 else leaf.message[:199] + "…"
            found.add(f"{_where(leaf.absolute_path)}: {message}")
    return sorted(found)


def render_json(report: dict) -> str:
    try:
        # allow_nan=False: NaN/Infinity are not JSON and break other readers.
        return json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    except (TypeError, ValueError) as exc:
        raise ReportingError(f"report is not JSON-compatible: {exc}") from exc


def load_report(path: str | Path) -> dict:
    """Read a report.json back, e.g. to re-render its summaries."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReportingError(f"cannot read report {path}: {exc}") from exc
