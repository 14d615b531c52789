"""Spec expressions: CEL, compiled once, evaluated safely.

Guards, computed values and invariants in a spec are CEL expressions
(Common Expression Language). They are parsed by a CEL implementation, never
by Python's ``eval``; a spec can only call the functions listed here.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import cel

from .errors import ExpressionError

__all__ = ["Expression", "compile_expression", "fields_used", "PURE_FUNCTIONS", "MODEL_FUNCTIONS", "text_of_size", "fill"]

# Variables bound by CEL comprehension macros (`xs.filter(x, ...)`) are
# reported as references by the parser; they are not free variables.
_MACRO_VAR = re.compile(r"\.(?:all|exists|exists_one|filter|map)\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*,")
_DOTTED = re.compile(r"^(?!(?:true|false|null|in)$)[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")
_OPERATOR = re.compile(r"^(_.*_|@.*|!_|-_)$")
_BUILTINS = {
    "size", "has", "int", "uint", "double", "string", "bytes", "bool", "type", "dyn", "duration",
    "timestamp", "matches", "contains", "startsWith", "endsWith", "exists", "all", "exists_one",
    "filter", "map", "max", "min", "lowerAscii", "upperAscii", "join", "split", "replace", "trim",
    "indexOf", "lastIndexOf", "substring", "in",
    "_[_]",  # indexing a list or map
}


def fill(template: str, values: dict) -> str:
    """Fill ``{name}`` placeholders; unknown placeholders stay as written."""
    return re.sub(r"\{([A-Za-z_][A-Za-z0-9_]*)\}",
                  lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), template)


def text_of_size(size_bytes: int, lines: int) -> str:
    """An ASCII text of exactly ``size_bytes`` bytes spread over exactly ``lines`` lines."""
    size_bytes, lines = int(size_bytes), max(1, int(lines))
    if size_bytes < 2 * lines - 1:
        raise ValueError(f"text({size_bytes}, {lines}): {lines} lines need at least {2 * lines - 1} bytes")
    body = size_bytes - (lines - 1)  # bytes left after the newlines
    base, extra = divmod(body, lines)
    return "\n".join("x" * (base + (1 if i < extra else 0)) for i in range(lines))


PURE_FUNCTIONS: dict[str, Callable] = {
    "fill": fill,
    "text": text_of_size,
    "line_count": lambda s: s.count("\n") + 1,
    "byte_size": lambda s: len(s.encode("utf-8")),
    # A value's JSON text (non-ASCII kept as is): what a runtime that serialises
    # a payload before measuring or writing it produces.
    "to_json": lambda v: json.dumps(v, ensure_ascii=False),
    # The last n items of a list (all of it when shorter; none when n <= 0).
    "last_n": lambda xs, n: list(xs)[max(0, len(list(xs)) - int(n)):] if int(n) > 0 else [],
    # The smallest / largest item of a list, or `default` when it is empty.
    "least": lambda xs, default: min(list(xs), default=default),
    "greatest": lambda xs, default: max(list(xs), default=default),
    # The strings of a list joined with a separator.
    "join": lambda xs, sep: str(sep).join(str(x) for x in xs),
    # Items in first-occurrence order, without repeats.
    "distinct": lambda xs: list(dict.fromkeys(xs)),
    # The positions of a list's items: [0, 1, ..., size - 1] (to map with an index).
    "indices": lambda xs: list(range(len(list(xs)))),
    # The position of x in a list, or -1.
    "index_of": lambda xs, x: list(xs).index(x) if x in list(xs) else -1,
    # An integer power (exponential backoff: base * pow(2, attempt)).
    "pow": lambda b, e: int(b) ** int(e),
}

# Provided by the model at evaluation time (they read model state or the
# implementation's observation); listed here so specs can be checked statically.
MODEL_FUNCTIONS = frozenset({"known", "table_has", "table_get", "record", "observed", "observed_effect",
                             "smallest_free_key", "free_key", "lookup"})


@dataclass
class Expression:
    """A compiled CEL expression and where it was written."""

    source: str
    where: str
    program: Any = field(repr=False)
    variables: frozenset[str] = frozenset()
    functions: frozenset[str] = frozenset()

    def evaluate(self, env: dict, functions: dict[str, Callable] | None = None) -> Any:
        if self.path is not None:
            return self._lookup(env)
        if self.fast is not None:
            try:
                return self.fast(env)
            except _NotFast:
                pass  # unexpected value shapes: let CEL decide (and report)
        # The binding converts every variable it is given into CEL values, so
        # hand it only the ones this expression uses (payloads can be large).
        env = {name: env[name] for name in self.variables if name in env}
        if self.functions:
            context = cel.Context()
            for name in self.functions:
                fn = (functions or {}).get(name) or PURE_FUNCTIONS.get(name)
                if fn is not None:
                    context.add_function(name, fn)
            context.update(env)
            target: Any = context
        else:
            target = env
        try:
            return self.program.execute(target)
        except KeyError as exc:
            raise ExpressionError(f"`{self.source}`: no field {exc.args[0]!r} in the value", self.where) from None
        except (RuntimeError, TypeError, ValueError) as exc:
            raise ExpressionError(f"`{self.source}`: {exc}", self.where) from None

    path: tuple[str, ...] | None = None  # set when the expression is a plain dotted name
    fast: Callable[[dict], Any] | None = None  # exact Python evaluation of a few trivial shapes

    def _lookup(self, env: dict) -> Any:
        head, *rest = self.path
        if head not in env:
            raise ExpressionError(f"`{self.source}`: undefined name {head!r}", self.where)
        value = env[head]
        for part in rest:
            if not isinstance(value, dict) or part not in value:
                raise ExpressionError(f"`{self.source}`: no field {part!r} in the value", self.where)
            value = value[part]
        return value

    def unknown_names(self, variables: set[str] | frozenset[str]) -> list[str]:
        """Free variables and functions this expression uses that are not available."""
        missing = sorted(v for v in self.variables if v not in variables)
        missing += sorted(f"{f}()" for f in self.functions
                          if f not in PURE_FUNCTIONS and f not in MODEL_FUNCTIONS and f not in _BUILTINS)
        return missing


class _NotFast(Exception):
    """A fast path met values it does not handle exactly like CEL."""


_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_PATH = rf"(?!(?:true|false|null|in)\b){_NAME}(?:\.{_NAME})*"
_MAP_ITEM = re.compile(rf"\s*'({_NAME})'\s*:\s*({_PATH})\s*")
_IN = re.compile(rf"^\s*({_PATH})\s+in\s+({_PATH})\s*$")
_NOT = re.compile(rf"^\s*!\s*({_PATH})\s*$")


def _getter(path: str):
    head, *rest = path.split(".")

    def get(env: dict):
        if head not in env:
            raise _NotFast()
        value = env[head]
        for part in rest:
            if not isinstance(value, dict) or part not in value:
                raise _NotFast()
            value = value[part]
        return value
    return get


def _fast_path(source: str):
    """Python evaluation for three trivial shapes, with CEL's exact semantics for
    the value types they accept (anything else falls back to CEL):
    a map literal of field reads, ``a.b in c``, and ``!a.b``."""
    text = source.strip()
    if text.startswith("{") and text.endswith("}") and "{" not in text[1:-1] and "}" not in text[1:-1]:
        items = [_MAP_ITEM.fullmatch(part) for part in text[1:-1].split(",")] if text[1:-1].strip() else []
        if all(items):
            getters = [(m.group(1), _getter(m.group(2))) for m in items]
            return lambda env: {key: get(env) for key, get in getters}
    match = _IN.match(text)
    if match:
        item, container = _getter(match.group(1)), _getter(match.group(2))

        def contains(env):
            value, pool = item(env), container(env)
            if not isinstance(pool, list) or not isinstance(value, str) or not all(isinstance(p, str) for p in pool):
                raise _NotFast()
            return value in pool
        return contains
    match = _NOT.match(text)
    if match:
        get = _getter(match.group(1))

        def negate(env):
            value = get(env)
            if not isinstance(value, bool):
                raise _NotFast()
            return not value
        return negate
    return None


def fields_used(source: str, var: str) -> frozenset[str] | None:
    """The fields of ``var`` an expression reads (``var.field``), or None when it
    uses ``var`` as a whole (e.g. passes it to a function) and needs every field."""
    if re.search(rf"\b{re.escape(var)}\b(?!\s*\.)", source):
        return None
    return frozenset(re.findall(rf"\b{re.escape(var)}\.([A-Za-z_][A-Za-z0-9_]*)", source))


def compile_expression(source: Any, where: str) -> Expression:
    """Compile CEL text; raise ExpressionError with a readable message on bad syntax."""
    if isinstance(source, bool):
        source = "true" if source else "false"
    elif source is None:
        source = "null"
    elif isinstance(source, (int, float)):
        source = repr(source)
    if not isinstance(source, str) or not source.strip():
        raise ExpressionError("an expression must be a non-empty CEL string", where)
    try:
        program = cel.compile(source)
    except (ValueError, RuntimeError) as exc:
        detail = str(exc).split("ERROR: <input>:", 1)[-1].strip()
        raise ExpressionError(f"invalid CEL expression `{source}`: {detail}", where) from None
    bound = set(_MACRO_VAR.findall(source))
    path = tuple(source.strip().split(".")) if _DOTTED.match(source.strip()) else None
    variables = frozenset(v for v in program.variables() if v not in bound)
    functions = frozenset(f for f in program.functions() if not _OPERATOR.match(f))
    return Expression(source=source, where=where, program=program, variables=variables, functions=functions,
                      path=path, fast=None if path else _fast_path(source))
