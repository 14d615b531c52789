"""The JSON Schemas the kit ships, by name, for ``conformance schema``.

Editors validate spec files against the spec format's schema (a
``# yaml-language-server: $schema=...`` comment); an installed user saves
``conformance schema spec`` to a file and points that comment at it. Each
schema is read through the module that uses it, so what is printed is what
the kit checks against.
"""

from __future__ import annotations

import json
from collections.abc import Callable

__all__ = ["SCHEMA_NAMES", "schema_document", "schema_json"]


def _spec() -> dict:
    from statemachines.load.schema_check import spec_format_schema

    return spec_format_schema()


def _spec_fragment() -> dict:
    """A file another spec includes (`include:`): the spec format with no key required."""
    schema = dict(_spec())
    schema.pop("required", None)
    schema["$id"] = schema.get("$id", "").replace(".json", "-fragment.json")
    schema["title"] = f"{schema.get('title', 'lifecycle spec')} (a fragment included by a spec)"
    return schema


def _report() -> dict:
    from .reporting.json_report import load_schema

    return load_schema()


def _command_adapter() -> dict:
    from .adapters.command_config import SCHEMA_PATH

    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def _protocol() -> dict:
    """Every message of the stdio protocol in one document: a message is valid
    when it matches one of them (the kit itself checks each against its own)."""
    from .adapters.stdio_protocol import MESSAGE_TYPES, load_schema

    defs = {
        f"{type_}.{direction}": load_schema(type_, direction)
        for type_ in MESSAGE_TYPES
        for direction in ("request", "response")
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://lifecycle-conformance.dev/schemas/protocol.json",
        "title": "stdio adapter protocol v1: every request and response line (docs/adapter-protocol.md)",
        "$defs": defs,
        "anyOf": [{"$ref": f"#/$defs/{name}"} for name in defs],
    }


def _deviations() -> dict:
    """A deviations file (docs/deviations.md); the engine checks files against this same document."""
    from importlib import resources

    return json.loads(
        resources.files("conformance").joinpath("schemas", "deviations.schema.json").read_text(encoding="utf-8")
    )


def _trace() -> dict:
    from .traces.format import trace_schema

    return trace_schema()


_LOADERS: dict[str, Callable[[], dict]] = {
    "spec": _spec,
    "spec-fragment": _spec_fragment,
    "report": _report,
    "protocol": _protocol,
    "command-adapter": _command_adapter,
    "trace": _trace,
    "deviations": _deviations,
}
SCHEMA_NAMES = tuple(_LOADERS)


def schema_document(name: str) -> dict:
    """The schema called ``name`` (one of :data:`SCHEMA_NAMES`)."""
    if name not in _LOADERS:
        raise KeyError(f"unknown schema {name!r}; known: {', '.join(SCHEMA_NAMES)}")
    return _LOADERS[name]()


def schema_json(name: str) -> str:
    return json.dumps(schema_document(name), indent=2, ensure_ascii=False) + "\n"
