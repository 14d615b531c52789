"""Values drawn from a JSON Schema, through Hypothesis's public strategies.

The exploration draws an operation's arguments from its ``args`` schema
(the ones without an ``x-draw`` hint), and the kit's own tests draw answers
and protocol messages from the schemas it ships. They need the part of JSON
Schema those schemas use, no more: ``type`` (one or a list), ``enum``,
``const``, the bounds of integers and numbers, the lengths and ``pattern``
of strings, ``items``/``minItems``/``maxItems``/``uniqueItems``/``contains``
of arrays, ``properties``/``required``/``additionalProperties`` of objects,
and ``oneOf``/``anyOf``/``allOf`` (drawn from their branches, then checked
against the whole schema). Annotations (``title``, ``description``, ...)
are ignored. Any other keyword is refused by name (``UnsupportedSchema``)
when the strategy is built, never while drawing.

An enum is drawn simplest value first (``simplest_first``: null, booleans,
numbers by size, strings by length, then arrays and objects), so its draws
shrink towards the simplest value; a boolean is the enum ``[false, true]``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from typing import Any

import jsonschema
from hypothesis import strategies as st

from ..errors import ConformanceError

__all__ = [
    "SUPPORTED_KEYWORDS",
    "UnsupportedSchema",
    "simplest_first",
    "enum_values",
    "check_supported",
    "from_schema",
    "allows",
]

# Keywords that only describe; they change nothing that is drawn.
_ANNOTATIONS = frozenset(
    {"$schema", "$id", "$comment", "title", "description", "examples", "default", "deprecated", "readOnly", "format"}
)
SUPPORTED_KEYWORDS = frozenset(
    {
        "type",
        "enum",
        "const",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "pattern",
        "items",
        "minItems",
        "maxItems",
        "uniqueItems",
        "contains",
        "properties",
        "required",
        "additionalProperties",
        "oneOf",
        "anyOf",
        "allOf",
    }
)
_OBJECT_KEYS = frozenset({"properties", "required", "additionalProperties"})
_ARRAY_KEYS = frozenset({"items", "minItems", "maxItems", "uniqueItems", "contains"})
_STRING_KEYS = frozenset({"minLength", "maxLength", "pattern"})
_NUMBER_KEYS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})

_JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
_JSON_VALUES = st.recursive(
    _JSON_SCALARS,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(), children, max_size=3),
    max_leaves=10,
)


class UnsupportedSchema(ConformanceError):
    """A schema uses a keyword the kit cannot draw values for."""

    def __init__(self, keyword: str, where: str):
        self.keyword, self.where = keyword, where
        supported = ", ".join(sorted(SUPPORTED_KEYWORDS))
        super().__init__(
            f"{where}: the JSON Schema keyword {keyword!r} is not one the kit draws values for "
            f"(it draws {supported}); give the argument an `x-draw: {{pool: NAME}}` hint with the values "
            f"to try, or express it with those keywords"
        )


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _simplicity(value: Any) -> tuple:
    """How simple a JSON value is: by kind first (null, booleans, integers,
    other numbers, strings, arrays, objects), then by size, then by text."""
    if value is None:
        return (0, 0, "")
    if isinstance(value, bool):
        return (1, int(value), "")
    if isinstance(value, int | float):
        kind = 2 if value == int(value) else 3
        return (kind, abs(value), value >= 0)  # -1 before 1
    kinds: dict[type, int] = {str: 4, list: 5, dict: 6}
    return (kinds.get(type(value), 7), len(value), _canonical(value))


def simplest_first(values: Iterable[Any]) -> list:
    """``values`` ordered simplest first (the order an enum's draws shrink in)."""
    return sorted(values, key=_simplicity)


def _validator(schema: Any) -> jsonschema.protocols.Validator:
    return jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)(schema)


def allows(schema: Any) -> Callable[[Any], bool]:
    """Whether a JSON value fits ``schema`` (its validator's ``is_valid``, built once)."""
    return _validator(schema).is_valid


def enum_values(schema: Any) -> list | None:
    """The values a schema allows when they are few and listed (an ``enum``,
    a ``const``, a boolean), simplest first; None otherwise."""
    if not isinstance(schema, dict):
        return None
    if "const" in schema:
        values = [schema["const"]]
    elif "enum" in schema:
        values = list(schema["enum"])
    elif schema.get("type") == "boolean" and set(schema) - _ANNOTATIONS == {"type"}:
        values = [False, True]
    else:
        return None
    valid = _validator(schema).is_valid
    return simplest_first(v for v in values if valid(v))


def check_supported(schema: Any, where: str = "schema") -> None:
    """Raise ``UnsupportedSchema`` for the first keyword (depth first) that
    ``from_schema`` cannot draw."""
    if isinstance(schema, bool):
        return
    if not isinstance(schema, dict):
        raise UnsupportedSchema(f"{type(schema).__name__} as a schema", where)
    for key, value in schema.items():
        if key in _ANNOTATIONS:
            continue
        if key not in SUPPORTED_KEYWORDS:
            raise UnsupportedSchema(key, where)
        for name, sub in _subschemas(key, value):
            check_supported(sub, f"{where}/{key}{name}")


def _subschemas(key: str, value: Any) -> list[tuple[str, Any]]:
    if key == "properties":
        return [(f"/{name}", sub) for name, sub in value.items()]
    if key in ("items", "contains", "additionalProperties"):
        return [("", value)]
    if key in ("oneOf", "anyOf", "allOf"):
        return [(f"/{i}", sub) for i, sub in enumerate(value)]
    return []


def from_schema(schema: Any, where: str = "schema") -> st.SearchStrategy:
    """A strategy for the JSON values ``schema`` allows (``UnsupportedSchema``
    for a keyword outside the supported part; ``where`` names the schema in
    that message)."""
    check_supported(schema, where)
    return _strategy(schema)


def _strategy(schema: Any) -> st.SearchStrategy:
    if schema is True or schema == {}:
        return _JSON_VALUES
    if schema is False:
        return st.nothing()
    values = enum_values(schema)
    if values is not None:
        return st.sampled_from(values) if values else st.nothing()
    for combinator in ("oneOf", "anyOf", "allOf"):
        if combinator in schema:
            return _combined(schema, combinator)
    types = schema.get("type", _inferred_types(schema))
    types = [types] if isinstance(types, str) else list(types)
    strategies = [_typed(schema, name) for name in types]
    return st.one_of(strategies) if len(strategies) > 1 else strategies[0]


def _inferred_types(schema: dict) -> list[str]:
    """The types a schema without ``type`` constrains (all of them when none)."""
    keys = set(schema)
    found = [
        name
        for name, own in (
            ("object", _OBJECT_KEYS),
            ("array", _ARRAY_KEYS),
            ("string", _STRING_KEYS),
            ("number", _NUMBER_KEYS),
        )
        if keys & own
    ]
    return found or ["null", "boolean", "number", "string", "array", "object"]


def _merged(base: dict, other: dict) -> dict:
    """``base`` and ``other`` as one schema: properties merged, required joined,
    any other keyword of ``other`` over ``base`` (the whole schema's check
    after drawing keeps the values honest)."""
    out = dict(base)
    for key, value in other.items():
        if key == "properties" and isinstance(out.get(key), dict):
            props = dict(out[key])
            for name, sub in value.items():
                props[name] = _merged(props[name], sub) if isinstance(props.get(name), dict) else sub
            out[key] = props
        elif key == "required" and key in out:
            out[key] = list(dict.fromkeys([*out[key], *value]))
        else:
            out[key] = value
    return out


def _combined(schema: dict, combinator: str) -> st.SearchStrategy:
    """oneOf/anyOf: a value of one branch (with the keywords around it);
    allOf: a value of all branches merged; either way checked against the
    whole schema."""
    base = {k: v for k, v in schema.items() if k != combinator}
    branches = schema[combinator]
    if combinator == "allOf":
        merged = base
        for branch in branches:
            merged = _merged(merged, branch) if isinstance(branch, dict) else merged
        drawn = _strategy(merged)
    else:
        drawn = st.one_of([_strategy(_merged(base, b) if isinstance(b, dict) else b) for b in branches])
    return drawn.filter(_validator(schema).is_valid)


def _typed(schema: dict, name: str) -> st.SearchStrategy:
    if name == "null":
        return st.none()
    if name == "boolean":
        return st.sampled_from([False, True])
    if name == "integer":
        return _integers(schema)
    if name == "number":
        return _integers(schema) | _floats(schema)
    if name == "string":
        return _strings(schema)
    if name == "array":
        return _arrays(schema)
    if name == "object":
        return _objects(schema)
    raise UnsupportedSchema(f"type {name!r}", "schema")


def _integers(schema: dict) -> st.SearchStrategy:
    low, high = schema.get("minimum"), schema.get("maximum")
    low = None if low is None else math.ceil(low)
    high = None if high is None else math.floor(high)
    if isinstance(schema.get("exclusiveMinimum"), int | float):
        low = max(low if low is not None else -math.inf, math.floor(schema["exclusiveMinimum"]) + 1)
    if isinstance(schema.get("exclusiveMaximum"), int | float):
        high = min(high if high is not None else math.inf, math.ceil(schema["exclusiveMaximum"]) - 1)
    if low is not None and high is not None and low > high:
        return st.nothing()
    return st.integers(low, high)


def _floats(schema: dict) -> st.SearchStrategy:
    low, high = schema.get("minimum"), schema.get("maximum")
    exclude_low = exclude_high = False
    if isinstance(schema.get("exclusiveMinimum"), int | float):
        low, exclude_low = schema["exclusiveMinimum"], True
    if isinstance(schema.get("exclusiveMaximum"), int | float):
        high, exclude_high = schema["exclusiveMaximum"], True
    return st.floats(
        low, high, allow_nan=False, allow_infinity=False, exclude_min=exclude_low, exclude_max=exclude_high
    )


def _strings(schema: dict) -> st.SearchStrategy:
    low, high = int(schema.get("minLength", 0)), schema.get("maxLength")
    if "pattern" not in schema:
        return st.text(st.characters(codec="utf-8"), min_size=low, max_size=high)
    pattern = re.compile(schema["pattern"])
    top = math.inf if high is None else high
    return st.from_regex(pattern).filter(lambda s: low <= len(s) <= top)


def _arrays(schema: dict) -> st.SearchStrategy:
    """A list of ``items``; with ``contains``, one value of it put among
    them (then the whole array checked: the value must fit ``items`` too)."""
    items, low, high = schema.get("items", True), int(schema.get("minItems", 0)), schema.get("maxItems")
    unique = _canonical if schema.get("uniqueItems") else None
    if "contains" not in schema:
        return st.lists(_strategy(items), min_size=low, max_size=high, unique_by=unique)
    if high is not None and high < 1:
        return st.nothing()
    rest = st.lists(
        _strategy(items), min_size=max(0, low - 1), max_size=None if high is None else high - 1, unique_by=unique
    )
    drawn = st.builds(_placed, rest, _strategy(schema["contains"]), st.integers(0, 2**16))
    return drawn.filter(_validator(schema).is_valid)


def _placed(values: list, value: Any, where: int) -> list:
    at = where % (len(values) + 1)
    return [*values[:at], value, *values[at:]]


def _objects(schema: dict) -> st.SearchStrategy:
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    needed = {name: _strategy(properties.get(name, True)) for name in sorted(required)}
    optional = {name: _strategy(sub) for name, sub in properties.items() if name not in required}
    return st.fixed_dictionaries(needed, optional=optional)
