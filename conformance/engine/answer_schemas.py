"""Checking answers against the spec's result and effect schemas, fast.

Every answer an implementation gives is checked against the JSON Schema its
operation declares for the result, and each effect against its own. The
``jsonschema`` validator does this exactly, but it builds an error iterator,
descends through scopes and checks every keyword through a dispatch table:
tens of microseconds for a small answer, more than the implementation and
the model's prediction together in a stateful exploration.

The schemas a spec writes use a small part of JSON Schema (types,
properties, required, enum, const, bounds, lengths, items, contains,
allOf/anyOf/oneOf, ...). :func:`compile_subset` turns such a schema once
into nested closures that answer only "valid or not"; a schema with any
keyword outside that part gets none, and is checked by ``jsonschema`` alone.
:class:`AnswerSchema` uses the closures first and asks ``jsonschema`` only
when they say "invalid", so every error message and path still comes from
``jsonschema``, and ``jsonschema`` has the last word: the closures only ever
save it work on answers that are valid. ``tests/test_answer_schemas.py``
checks that both agree on random values for every schema of every bundled
spec.

No code is generated from a schema: the closures are built from its values
(``eval``/``exec`` are never used on spec text).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sized
from typing import Any

import jsonschema

__all__ = ["AnswerSchema", "compile_subset", "json_equal"]

Check = Callable[[Any], bool]

# Keywords that only annotate: they never make an instance invalid (``format``
# included: ``jsonschema`` asserts it only when given a format checker, which
# the kit does not).
_ANNOTATIONS = frozenset(
    {
        "description",
        "title",
        "$comment",
        "examples",
        "default",
        "deprecated",
        "readOnly",
        "writeOnly",
        "format",
        "$schema",
    }
)


def json_equal(one: Any, two: Any) -> bool:
    """Equality as JSON Schema means it (``enum``, ``const``,
    ``uniqueItems``): ``true`` is not ``1``, ``1`` is ``1.0``, lists and
    objects item by item."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return one == two
    if isinstance(one, list) and isinstance(two, list):
        return len(one) == len(two) and all(json_equal(a, b) for a, b in zip(one, two))
    if isinstance(one, dict) and isinstance(two, dict):
        return one.keys() == two.keys() and all(json_equal(one[k], two[k]) for k in one)
    if isinstance(one, bool) or isinstance(two, bool):
        return type(one) is type(two) and one == two
    if isinstance(one, (list, dict)) or isinstance(two, (list, dict)):
        return False
    return one == two


def _is_number(value: Any) -> bool:
    return (type(value) is int or type(value) is float) and not isinstance(value, bool)


_TYPES: dict[str, Check] = {
    "object": lambda v: type(v) is dict,
    "array": lambda v: type(v) is list,
    "string": lambda v: type(v) is str,
    "boolean": lambda v: type(v) is bool,
    "null": lambda v: v is None,
    "number": _is_number,
    "integer": lambda v: type(v) is int or (type(v) is float and v.is_integer()),
}


class _Unsupported(Exception):
    """The schema uses something outside the compiled subset."""


def compile_subset(schema: Any) -> Check | None:
    """A function telling whether a JSON value is valid against ``schema``,
    or None when the schema uses a keyword this module does not compile.
    Meant for the values ``is_plain_json`` accepts (dicts, lists, strings,
    numbers, booleans, None)."""
    try:
        return _compile(schema)
    except _Unsupported:
        return None


def _compile(schema: Any) -> Check:
    if schema is True:
        return lambda v: True
    if schema is False:
        return lambda v: False
    if not isinstance(schema, dict):
        raise _Unsupported()
    checks: list[Check] = []
    for keyword, value in schema.items():
        if keyword in _ANNOTATIONS or keyword in ("properties", "additionalProperties", "required"):
            continue
        maker = _KEYWORDS.get(keyword)
        if maker is None:
            raise _Unsupported()
        checks.append(maker(value, schema))
    if "properties" in schema or "additionalProperties" in schema or "required" in schema:
        checks.append(_object(schema))
    if not checks:
        return lambda v: True
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks
        return lambda v: first(v) and second(v)
    checks_t = tuple(checks)
    return lambda v: all(check(v) for check in checks_t)


def _type(value, schema) -> Check:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names or any(name not in _TYPES for name in names):
        raise _Unsupported()
    tests = tuple(_TYPES[name] for name in names)
    if len(tests) == 1:
        return tests[0]
    return lambda v: any(test(v) for test in tests)


def _object(schema) -> Check:
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    additional = schema.get("additionalProperties", True)
    if (
        not isinstance(properties, dict)
        or not isinstance(required, list)
        or not all(isinstance(name, str) for name in required)
    ):
        raise _Unsupported()
    compiled = {name: _compile(sub) for name, sub in properties.items()}
    # properties whose schema accepts anything need no look
    looked = tuple((name, check) for name, check in compiled.items() if properties[name] not in ({}, True))
    required_t = tuple(required)
    extra = None if additional is True or additional == {} else _compile(additional)

    def check(v) -> bool:
        if type(v) is not dict:
            return True
        for name in required_t:
            if name not in v:
                return False
        for name, sub in looked:
            if name in v and not sub(v[name]):
                return False
        if extra is not None:
            for name, item in v.items():
                if name not in compiled and not extra(item):
                    return False
        return True

    return check


def _enum(value, schema) -> Check:
    if not isinstance(value, list):
        raise _Unsupported()
    options = tuple(value)
    if all(type(o) is str for o in options):
        texts = frozenset(options)
        return lambda v: type(v) is str and v in texts
    return lambda v: any(json_equal(v, o) for o in options)


def _const(value, schema) -> Check:
    if type(value) is str:
        return lambda v: type(v) is str and v == value
    return lambda v: json_equal(v, value)


def _bound(compare):
    def make(value, schema) -> Check:
        if not _is_number(value):
            raise _Unsupported()
        return lambda v: not _is_number(v) or compare(v, value)

    return make


def _size(of: type[Sized], compare):
    """A bound on the length of a string (``minLength``...) or a list (``minItems``...)."""

    def make(value, schema) -> Check:
        if type(value) is not int or value < 0:
            raise _Unsupported()
        return lambda v: type(v) is not of or compare(len(v), value)

    return make


def _pattern(value, schema) -> Check:
    if not isinstance(value, str):
        raise _Unsupported()
    try:
        search = re.compile(value).search
    except re.error:
        raise _Unsupported() from None
    return lambda v: type(v) is not str or search(v) is not None


def _items(value, schema) -> Check:
    if "prefixItems" in schema or isinstance(value, list):
        raise _Unsupported()
    sub = _compile(value)
    return lambda v: type(v) is not list or all(sub(item) for item in v)


def _contains(value, schema) -> Check:
    if "minContains" in schema or "maxContains" in schema:
        raise _Unsupported()
    sub = _compile(value)
    return lambda v: type(v) is not list or any(sub(item) for item in v)


def _unique(value, schema) -> Check:
    if value is False:
        return lambda v: True
    if value is not True:
        raise _Unsupported()

    def check(v) -> bool:
        if type(v) is not list:
            return True
        return all(not json_equal(v[i], v[j]) for i in range(len(v)) for j in range(i + 1, len(v)))

    return check


def _schemas(value) -> tuple:
    if not isinstance(value, list) or not value:
        raise _Unsupported()
    return tuple(_compile(sub) for sub in value)


def _all_of(value, schema) -> Check:
    subs = _schemas(value)
    return lambda v: all(sub(v) for sub in subs)


def _any_of(value, schema) -> Check:
    subs = _schemas(value)
    return lambda v: any(sub(v) for sub in subs)


def _one_of(value, schema) -> Check:
    subs = _schemas(value)
    return lambda v: sum(1 for sub in subs if sub(v)) == 1


def _not(value, schema) -> Check:
    sub = _compile(value)
    return lambda v: not sub(v)


_KEYWORDS: dict[str, Callable[[Any, dict], Check]] = {
    "type": _type,
    "enum": _enum,
    "const": _const,
    "minimum": _bound(lambda v, b: v >= b),
    "maximum": _bound(lambda v, b: v <= b),
    "exclusiveMinimum": _bound(lambda v, b: v > b),
    "exclusiveMaximum": _bound(lambda v, b: v < b),
    "minLength": _size(str, lambda n, b: n >= b),
    "maxLength": _size(str, lambda n, b: n <= b),
    "pattern": _pattern,
    "items": _items,
    "minItems": _size(list, lambda n, b: n >= b),
    "maxItems": _size(list, lambda n, b: n <= b),
    "uniqueItems": _unique,
    "contains": _contains,
    "allOf": _all_of,
    "anyOf": _any_of,
    "oneOf": _one_of,
    "not": _not,
}


class AnswerSchema:
    """One schema of a spec (an operation's result, an effect): the first
    error of a value, as ``jsonschema`` reports it, or None. The compiled
    subset answers for valid values; ``jsonschema`` for the rest."""

    def __init__(self, schema: Any):
        self.schema = schema
        self.full = jsonschema.Draft202012Validator(schema)
        self.fast = compile_subset(schema)

    @property
    def compiled(self) -> bool:
        """Whether the compiled subset covers this schema (else every check is ``jsonschema``'s)."""
        return self.fast is not None

    def first_error(self, value: Any) -> jsonschema.ValidationError | None:
        if self.fast is not None and self.fast(value):
            return None
        return next(iter(self.full.iter_errors(value)), None)

    def errors(self, value: Any) -> list[jsonschema.ValidationError]:
        """Every way ``value`` breaks the schema (none: it fits)."""
        if self.fast is not None and self.fast(value):
            return []
        return list(self.full.iter_errors(value))
