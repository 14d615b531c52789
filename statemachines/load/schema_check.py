"""Structural check of a spec against the JSON Schema of the spec format."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from importlib import resources

import jsonschema

from ..errors import Problem
from .source import SourceMap

__all__ = [
    "SPEC_SCHEMA_PATH",
    "spec_format_schema",
    "check_structure",
    "check_replay_structure",
    "check_scenarios_structure",
]

# Written in the repository's spec/ and shipped inside the installed package
# ``lifecycle_specs`` (see setup.py): read as a package resource, never through
# a path into the source tree.
SPEC_SCHEMA_PATH = resources.files("lifecycle_specs").joinpath("lifecycle-spec.schema.json")


@lru_cache(maxsize=1)
def spec_format_schema() -> dict:
    return json.loads(SPEC_SCHEMA_PATH.read_text(encoding="utf-8"))


def _fmt_path(path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _branches(error: jsonschema.ValidationError) -> list:
    """The schemas a `oneOf` (or `anyOf`) error chose between."""
    value = error.validator_value
    return value if isinstance(value, list) else []


def _schema_properties(error: jsonschema.ValidationError) -> dict:
    """The `properties` of the schema an error is about (none when it is not an object schema)."""
    schema = error.schema
    return dict(schema.get("properties", {})) if isinstance(schema, Mapping) else {}


def _narrow(error: jsonschema.ValidationError) -> list[jsonschema.ValidationError]:
    """For a `oneOf` over step or value kinds, report the errors of the branch the
    author evidently meant (the one whose required key is present)."""
    if error.validator != "oneOf" or not isinstance(error.instance, dict):
        return [error]
    for index, branch in enumerate(_branches(error)):
        required = branch.get("required") if isinstance(branch, dict) else None
        if required and required[0] in error.instance:
            sub = [e for e in error.context if e.schema_path and e.schema_path[0] == index]
            return [leaf for e in sub for leaf in _narrow(e)] or [error]
    return [error]


def _hint(error: jsonschema.ValidationError) -> str | None:
    if error.validator == "additionalProperties":
        allowed = sorted(_schema_properties(error))
        return f"allowed keys here: {', '.join(allowed)}" if allowed else None
    if error.validator == "oneOf" and isinstance(error.instance, dict):
        kinds = [b["required"][0] for b in _branches(error) if isinstance(b, dict) and b.get("required")]
        if kinds:
            return "each entry needs exactly one of: " + ", ".join(kinds)
    if error.validator == "enum":
        return "use one of: " + ", ".join(map(str, _branches(error)))
    return None


@lru_cache(maxsize=1)
def _replay_schema() -> dict:
    """A replay file: a non-empty `steps:` list of scenario steps (the spec format's)."""
    return {
        "$defs": spec_format_schema()["$defs"],
        "type": "object",
        "required": ["steps"],
        "properties": {"steps": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/scenario_step"}}},
    }


@lru_cache(maxsize=1)
def _scenarios_schema() -> dict:
    """A team's scenario file: a `scenarios:` list of the spec format's scenarios."""
    return {
        "$defs": spec_format_schema()["$defs"],
        "type": "object",
        "required": ["scenarios"],
        "properties": {"scenarios": {"type": "array", "items": {"$ref": "#/$defs/scenario"}}},
    }


def check_scenarios_structure(data, smap: SourceMap) -> list[Problem]:
    """Every structural problem of a scenario file, each located to file:line."""
    return check_structure(data, smap, _scenarios_schema())


def check_replay_structure(data, smap: SourceMap) -> list[Problem]:
    """Every structural problem of a replay file's steps, each located to file:line."""
    return check_structure(data, smap, _replay_schema())


def check_structure(data, smap: SourceMap, schema: dict | None = None) -> list[Problem]:
    """Every structural problem of ``data``, each located to file:line."""
    validator = jsonschema.Draft202012Validator(schema or spec_format_schema())
    problems = []
    for error in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
        for leaf in _narrow(error):
            path = list(leaf.absolute_path)
            message = leaf.message
            if leaf.validator == "additionalProperties" and isinstance(leaf.instance, dict):
                # Point at each unexpected key's own line, not at its parent mapping.
                allowed = set(_schema_properties(leaf))
                for key in (k for k in leaf.instance if k not in allowed):
                    problems.append(
                        smap.problem(
                            path + [key], f"{_fmt_path(path)}: unknown key, {key!r} was unexpected", _hint(leaf)
                        )
                    )
                continue
            if leaf.validator == "oneOf" and isinstance(leaf.instance, dict):
                message = f"{_fmt_path(path)}: not a known entry (keys: {', '.join(map(str, leaf.instance))})"
            elif len(message) > 300:
                message = message[:300] + "..."
            else:
                message = f"{_fmt_path(path)}: {message}"
            problems.append(smap.problem(path, message, _hint(leaf)))
    return problems
