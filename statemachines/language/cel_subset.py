"""Exact Python evaluation of the CEL a spec writes most: a compiler from a
subset of CEL to Python closures.

The model evaluates dozens of small expressions per operation (guards,
record fields, list filters, invariants). Handing each to the CEL binding
converts every variable into CEL values and back, which costs more than the
expression itself. Here an expression is parsed once into closures over
plain Python values. Nothing is ``eval``-ed: the closures are built from the
parse, operator by operator.

The subset: literals (integers, simple strings, true/false/null), names and
field selections, ``[a, b]`` lists and ``{'k': v}`` maps, indexing, ``!``,
unary ``-``, ``&&``, ``||``, ``? :``, ``== != < <= > >=``, ``in``, ``+ - * /
%`` on integers (``+`` on strings and lists), ``has()``, ``size()`` (and
``.size()``), ``string()`` of an integer or a string, the macros ``all``,
``exists``, ``filter`` and ``map``, and calls of the kit's functions.
Anything else is not compiled (``compile_subset`` returns None) and CEL
evaluates it.

Exactness: an operation meeting values it does not handle exactly as the CEL
binding does (mixed numeric types, integer overflow, a missing field, a
non-boolean condition, a string of non-ASCII characters whose ``size`` the
binding counts in bytes) raises ``NotSubset``, and the caller lets CEL
evaluate the whole expression instead, errors and all. tests/test_expressions.py
checks every expression of the bundled specs both ways.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

__all__ = ["NotSubset", "compile_subset"]

_INT64 = (-(1 << 63), (1 << 63) - 1)
_MAX_ITERATIONS = 100_000  # past this a comprehension goes to CEL, which counts the cost budget


class NotSubset(Exception):
    """The values met are outside what the subset evaluates exactly."""


class _Unsupported(Exception):
    """The text uses CEL the subset does not compile."""


_TOKEN = re.compile(
    r"""
    \s*(?:
      (?P<int>\d+)(?![.\deEuU])
    | (?P<str>'[^'\\\n]*'|"[^"\\\n]*")
    | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<op>==|!=|<=|>=|&&|\|\||[-+*/%<>!?:.,()\[\]{}])
    )""",
    re.VERBOSE,
)

_RESERVED = frozenset({"true", "false", "null", "in"})
_MACROS = frozenset({"all", "exists", "filter", "map"})


def _tokens(text: str) -> list[tuple[str, str]]:
    out, i = [], 0
    text = text.rstrip()
    while i < len(text):
        match = _TOKEN.match(text, i)
        if not match or match.end() == i:
            raise _Unsupported(text[i : i + 10])
        kind = match.lastgroup
        assert kind is not None  # every alternative of _TOKEN is a named group
        out.append((kind, match.group(kind)))
        i = match.end()
    # a string literal right before a name or string (a prefix such as r'...' or b'...') is not plain
    for (k1, v1), (k2, _) in zip(out, out[1:]):
        if k1 == "name" and k2 == "str" and v1 in ("r", "R", "b", "B", "rb", "br"):
            raise _Unsupported("prefixed string")
    return out


# ----------------------------------------------------------------- values
def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise NotSubset()  # the binding hands an integer past 64 bits over as a double
        return "int"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "map"
    raise NotSubset()  # floats, tuples, other objects: CEL decides


def _equal(a: Any, b: Any) -> bool:
    if type(a) is type(b) and (a is None or type(a) is str or type(a) is bool):
        return a == b  # the commonest comparisons, without classifying both sides
    ka, kb = _kind(a), _kind(b)
    if ka != kb:
        return False  # the binding's equality across kinds (int and double aside, refused above)
    if ka == "list":
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if ka == "map":
        if len(a) != len(b):
            return False
        for key, value in a.items():
            _kind(key)
            if key not in b or not _equal(value, b[key]):
                return False
        return True
    return a == b


def _int(value: Any) -> int:
    if _kind(value) != "int":
        raise NotSubset()
    return value


def _checked(value: int) -> int:
    if not _INT64[0] <= value <= _INT64[1]:
        raise NotSubset()  # CEL: overflow error
    return value


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise NotSubset()
    return value


def _less(a: Any, b: Any) -> bool:
    ka, kb = _kind(a), _kind(b)
    if ka != kb or ka not in ("int", "str"):
        raise NotSubset()
    if ka == "str" and not (a.isascii() and b.isascii()):
        raise NotSubset()  # code point vs byte order: leave it to CEL
    return a < b


def _size(value: Any) -> int:
    kind = _kind(value)
    if kind == "str":
        if not value.isascii():
            raise NotSubset()  # the binding counts a string's size in bytes
        return len(value)
    if kind in ("list", "map"):
        return len(value)
    raise NotSubset()


def _add(a: Any, b: Any) -> Any:
    ka, kb = _kind(a), _kind(b)
    if ka != kb:
        raise NotSubset()
    if ka == "int":
        return _checked(a + b)
    if ka in ("str", "list"):
        return a + b
    raise NotSubset()


def _arith(op: str):
    def apply(a: Any, b: Any) -> int:
        a, b = _int(a), _int(b)
        if op == "-":
            return _checked(a - b)
        if op == "*":
            return _checked(a * b)
        if b == 0:
            raise NotSubset()  # CEL: division by zero
        quotient = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)  # truncated, as CEL divides
        if op == "/":
            return _checked(quotient)
        return a - quotient * b

    return apply


def _contains(item: Any, pool: Any) -> bool:
    kind = _kind(pool)
    if kind == "list" and type(item) is str:  # `x in [...]` over names: no classifying of plain strings
        for x in pool:
            if (x == item) if type(x) is str else _equal(item, x):
                return True
        return False
    if kind == "list":
        return any(_equal(item, x) for x in pool)
    if kind == "map" and isinstance(item, str) and all(isinstance(k, str) for k in pool):
        return item in pool
    raise NotSubset()


# ----------------------------------------------------------------- parser
Node = Callable[[dict, list], Any]  # (env, [model functions, iterations left]) -> value


def _binary(apply: Callable[[Any, Any], Any], left: Node, right: Node) -> Node:
    return lambda env, ctx: apply(left(env, ctx), right(env, ctx))


class _Parser:
    def __init__(self, text: str, functions: dict[str, Callable | None]):
        self.tokens = _tokens(text)
        self.i = 0
        self.functions = functions
        self.selections: dict = {}

    def peek(self, offset: int = 0) -> tuple[str, str] | None:
        j = self.i + offset
        return self.tokens[j] if j < len(self.tokens) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        token = self.peek()
        if token is None or (value is not None and token[1] != value):
            raise _Unsupported(f"expected {value}")
        self.i += 1
        return token

    def at(self, value: str) -> bool:
        token = self.peek()
        return token is not None and token[0] == "op" and token[1] == value

    def parse(self) -> Node:
        node = self.conditional()
        if self.peek() is not None:
            raise _Unsupported("trailing text")
        return node

    def conditional(self) -> Node:
        cond = self.disjunction()
        if not self.at("?"):
            return cond
        self.take("?")
        then = self.disjunction()
        self.take(":")
        otherwise = self.conditional()
        return lambda env, ctx: then(env, ctx) if _bool(cond(env, ctx)) else otherwise(env, ctx)

    def disjunction(self) -> Node:
        node = self.conjunction()
        while self.at("||"):
            self.take()
            left, right = node, self.conjunction()

            def either(env, ctx, left=left, right=right):
                # CEL's || is commutative over errors: only plain booleans on both sides are taken here
                if _bool(left(env, ctx)):
                    return True
                return _bool(right(env, ctx))

            node = either
        return node

    def conjunction(self) -> Node:
        node = self.relation()
        while self.at("&&"):
            self.take()
            left, right = node, self.relation()

            def both(env, ctx, left=left, right=right):
                if not _bool(left(env, ctx)):
                    return False
                return _bool(right(env, ctx))

            node = both
        return node

    def relation(self) -> Node:
        node = self.addition()
        while True:
            token = self.peek()
            if (
                token is None
                or token[1] not in ("==", "!=", "<", "<=", ">", ">=", "in")
                or (token[1] == "in" and token[0] != "name")
            ):
                return node
            self.take()
            left, right, op = node, self.addition(), token[1]
            node = self._relate(op, left, right)

    @staticmethod
    def _relate(op: str, left: Node, right: Node) -> Node:
        if op == "==":
            return lambda env, ctx: _equal(left(env, ctx), right(env, ctx))
        if op == "!=":
            return lambda env, ctx: not _equal(left(env, ctx), right(env, ctx))
        if op == "in":
            return lambda env, ctx: _contains(left(env, ctx), right(env, ctx))
        if op == "<":
            return lambda env, ctx: _less(left(env, ctx), right(env, ctx))
        if op == ">":
            return lambda env, ctx: _less(right(env, ctx), left(env, ctx))
        if op == "<=":
            return lambda env, ctx: not _less(right(env, ctx), left(env, ctx))
        return lambda env, ctx: not _less(left(env, ctx), right(env, ctx))  # >=

    def addition(self) -> Node:
        node = self.multiplication()
        while self.at("+") or self.at("-"):
            op = self.take()[1]
            node = _binary(_add if op == "+" else _arith("-"), node, self.multiplication())
        return node

    def multiplication(self) -> Node:
        node = self.unary()
        while self.at("*") or self.at("/") or self.at("%"):
            apply = _arith(self.take()[1])
            node = _binary(apply, node, self.unary())
        return node

    def unary(self) -> Node:
        if self.at("!"):
            self.take()
            inner = self.unary()
            return lambda env, ctx: not _bool(inner(env, ctx))
        if self.at("-"):
            self.take()
            token = self.peek()
            if token is not None and token[0] == "int":  # a negative literal
                self.take()
                value = -int(token[1])
                return self.member(lambda env, ctx: value)
            inner = self.unary()
            return lambda env, ctx: _checked(-_int(inner(env, ctx)))
        return self.member(self.primary())

    def member(self, node: Node) -> Node:
        while True:
            if self.at("."):
                self.take()
                kind, name = self.take()
                if kind != "name":
                    raise _Unsupported("selection")
                if self.at("("):
                    node = self._method(node, name)
                else:
                    node = self._select(node, name)
            elif self.at("["):
                self.take()
                index = self.conditional()
                self.take("]")
                node = self._index(node, index)
            else:
                return node

    def _select(self, node: Node, name: str) -> Node:
        def select(env, ctx):
            value = node(env, ctx)
            if not isinstance(value, dict) or name not in value:
                raise NotSubset()  # CEL: no such key (an error)
            return value[name]

        self.selections[select] = (node, name)  # has() takes it apart
        return select

    @staticmethod
    def _index(node: Node, index: Node) -> Node:
        def at(env, ctx):
            value, key = node(env, ctx), index(env, ctx)
            if isinstance(value, list) and _kind(key) == "int" and 0 <= key < len(value):
                return value[key]
            if isinstance(value, dict) and isinstance(key, str) and key in value:
                return value[key]
            raise NotSubset()  # out of range, no such key, or a key of another kind: CEL says which

        return at

    def _method(self, target: Node, name: str) -> Node:
        self.take("(")
        if name in _MACROS:
            kind, var = self.take()
            if kind != "name" or var in _RESERVED:
                raise _Unsupported("macro variable")
            self.take(",")
            body = self.conditional()
            self.take(")")
            return _macro(name, target, var, body)
        if name == "size":
            self.take(")")
            return lambda env, ctx: _size(target(env, ctx))
        raise _Unsupported(f"method {name}")

    def _arguments(self) -> list[Node]:
        self.take("(")
        args: list[Node] = []
        if not self.at(")"):
            args.append(self.conditional())
            while self.at(","):
                self.take()
                args.append(self.conditional())
        self.take(")")
        return args

    def primary(self) -> Node:
        token = self.peek()
        if token is None:
            raise _Unsupported("end")
        kind, value = token
        parse = _BRACKETED.get(value) if kind == "op" else _ATOMS[kind]
        if parse is None:
            raise _Unsupported(value)
        self.take()
        return parse(self, value)

    def _integer(self, value: str) -> Node:
        number = _checked(int(value))
        return lambda env, ctx: number

    def _string(self, value: str) -> Node:
        text = value[1:-1]
        return lambda env, ctx: text

    def _group(self, _: str) -> Node:
        node = self.conditional()
        self.take(")")
        return node

    def _list(self, _: str) -> Node:
        items: list[Node] = []
        if not self.at("]"):
            items.append(self.conditional())
            while self.at(","):
                self.take()
                if self.at("]"):
                    break
                items.append(self.conditional())
        self.take("]")
        return lambda env, ctx: [item(env, ctx) for item in items]

    def _map(self, _: str) -> Node:
        entries = self._map_entries()
        self.take("}")
        if len({k for k, _ in entries}) != len(entries):
            raise _Unsupported("repeated map key")
        return lambda env, ctx: {key: node(env, ctx) for key, node in entries}

    def _map_entries(self) -> list[tuple[str, Node]]:
        """The ``'key': value`` entries up to the closing brace (a trailing comma allowed)."""
        entries: list[tuple[str, Node]] = []
        if self.at("}"):
            return entries
        while True:
            key_kind, key = self.take()
            if key_kind != "str":
                raise _Unsupported("map key")
            self.take(":")
            entries.append((key[1:-1], self.conditional()))
            if not self.at(","):
                return entries
            self.take()
            if self.at("}"):
                return entries

    def _name(self, value: str) -> Node:
        if value in ("true", "false"):
            constant = value == "true"
            return lambda env, ctx: constant
        if value == "null":
            return lambda env, ctx: None
        if value == "in":
            raise _Unsupported("in")
        if self.at("("):
            return self._call(value)
        return _variable(value)

    def _call(self, name: str) -> Node:
        if name == "has":
            self.take("(")
            target = self.member(self.primary())
            self.take(")")
            if target not in self.selections:
                raise _Unsupported("has() of something other than a field selection")
            holder, field = self.selections[target]

            def has(env, ctx):
                value = holder(env, ctx)
                if not isinstance(value, dict):
                    raise NotSubset()
                return field in value

            return has
        args = self._arguments()
        if name == "size" and len(args) == 1:
            return lambda env, ctx: _size(args[0](env, ctx))
        if name == "string" and len(args) == 1:

            def string(env, ctx):
                value = args[0](env, ctx)
                kind = _kind(value)
                if kind == "str":
                    return value
                if kind == "int":
                    return str(value)
                raise NotSubset()

            return string
        if name not in self.functions:
            raise _Unsupported(f"function {name}")
        pure = self.functions[name]  # None: a function the model provides at evaluation time

        def call(env, ctx):
            fn = ctx[0].get(name) or pure
            if fn is None:
                raise NotSubset()
            values = [arg(env, ctx) for arg in args]
            for value in values:
                _plain(value)
            result = fn(*values)
            _plain(result)
            return result

        return call


# How primary() parses the token it starts at: by the token's kind, and for an operator by the bracket it opens.
_ATOMS: dict[str, Callable[[_Parser, str], Node]] = {
    "int": _Parser._integer,
    "str": _Parser._string,
    "name": _Parser._name,
}
_BRACKETED: dict[str, Callable[[_Parser, str], Node]] = {
    "(": _Parser._group,
    "[": _Parser._list,
    "{": _Parser._map,
}


def _variable(name: str) -> Node:
    # a dotted name may be a message or package name in CEL; the spec's are all variables
    def variable(env, ctx):
        if name not in env:
            raise NotSubset()
        return env[name]

    return variable


# Values of these exact types are what CEL hands back unchanged (``_exact``):
# checked without a call per value, as most parts of a record are.
_SCALARS = frozenset({str, bool, float, type(None)})
_LOW, _HIGH = _INT64


def _exact(value: Any, depth: int = 0) -> None:
    """A result is what CEL would give only if CEL would hand every part of it
    back unchanged: no integer past 64 bits (a double in CEL), nothing but
    JSON-like values and floats. Lists and maps of the built-in types are
    walked here; anything else (a subclass, say) by ``_exact_any``."""
    kind = type(value)
    if kind in _SCALARS:
        return
    if depth > 50 and kind in (int, list, dict):
        raise NotSubset()
    if kind is int:
        if not _LOW <= value <= _HIGH:
            raise NotSubset()
    elif kind is list:
        for item in value:
            if type(item) not in _SCALARS:
                _exact(item, depth + 1)
    elif kind is dict:
        for key, item in value.items():
            if type(key) is not str and not isinstance(key, str):
                raise NotSubset()
            if type(item) not in _SCALARS:
                _exact(item, depth + 1)
    else:
        _exact_any(value, depth)


def _exact_any(value: Any, depth: int) -> None:
    if isinstance(value, (str, bool, float)) or value is None:
        return
    if depth > 50:
        raise NotSubset()
    if isinstance(value, int):
        _kind(value)
    elif isinstance(value, list):
        for item in value:
            _exact(item, depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise NotSubset()
            _exact(item, depth + 1)
    else:
        raise NotSubset()


def _plain(value: Any, depth: int = 0) -> None:
    """Values that cross into and out of a function as the binding would
    hand them over: JSON-like, no floats (their conversions are CEL's).
    The built-in types are checked here; anything else by ``_plain_any``."""
    if depth > 50:
        raise NotSubset()
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return
    if kind is int:
        if not _LOW <= value <= _HIGH:
            raise NotSubset()
    elif kind is list:
        for item in value:
            _plain(item, depth + 1)
    elif kind is dict:
        for key, item in value.items():
            if type(key) is not str and not isinstance(key, str):
                raise NotSubset()
            _plain(item, depth + 1)
    else:
        _plain_any(value, depth)


def _plain_any(value: Any, depth: int) -> None:
    kind = _kind(value)
    if kind == "int":
        _checked(value)
    elif kind == "list":
        for item in value:
            _plain(item, depth + 1)
    elif kind == "map":
        for key, item in value.items():
            if not isinstance(key, str):
                raise NotSubset()
            _plain(item, depth + 1)


def _macro(name: str, target: Node, var: str, body: Node) -> Node:
    def run(env, ctx):
        items = target(env, ctx)
        if not isinstance(items, list):
            raise NotSubset()  # a map's keys: CEL
        ctx[1] -= len(items)
        if ctx[1] < 0:
            raise NotSubset()  # a long loop: CEL, which counts it against the cost budget
        scope = dict(env)
        out = []
        for item in items:
            scope[var] = item
            value = body(scope, ctx)
            if name == "map":
                out.append(value)
                continue
            if not isinstance(value, bool):
                raise NotSubset()  # CEL's error handling in comprehensions is its own
            if name == "filter":
                if value:
                    out.append(item)
            elif name == "all" and not value:
                return False
            elif name == "exists" and value:
                return True
        if name == "all":
            return True
        if name == "exists":
            return False
        return out

    return run


def compile_subset(text: str, functions: dict[str, Callable | None] | None = None):
    """A function ``(env, model_functions) -> value`` evaluating ``text``
    exactly as the CEL binding does, or None when the text uses CEL outside
    the subset. It raises NotSubset for values it cannot judge exactly (then
    CEL evaluates the whole expression). ``functions``: the functions the
    expression may call, by name, each the function itself or None for one
    the model hands over at evaluation time."""
    try:
        node = _Parser(text, dict(functions or {})).parse()
    except (_Unsupported, RecursionError, NotSubset):
        return None

    def evaluate(env: dict, model_functions: dict | None = None):
        try:
            value = node(env, [model_functions or {}, _MAX_ITERATIONS])
            _exact(value)
            return value
        except NotSubset:
            raise
        except Exception:
            raise NotSubset() from None

    return evaluate
