"""What JSON can carry, checked where an implementation's answer enters the kit.

The adapter protocol speaks JSON values only. An in-process implementation can
hand the kit anything Python holds, and a program's JSON text can hold numbers
other readers cannot: so every answer is checked once, at the boundary, for

- NaN and Infinity (not JSON at all),
- object keys that are not strings (Python's json would silently turn ``1``
  into ``"1"``),
- integers outside the signed 64-bit range, ``-2**63 .. 2**63 - 1``: the
  range of the spec's expressions (CEL ``int``) and of most JSON readers'
  integers (a 5,000-digit one cannot even be printed by default),
- strings holding lone surrogates (no UTF-8 encoding exists for them),
- other Python objects (dates, bytes, sets...), nesting deeper than
  :data:`MAX_DEPTH`, and circular references.

:func:`json_problem` finds the first such value with its JSON path (e.g.
``result.jobs[2].load``, ``is NaN, which JSON cannot carry``); :func:`json_safe` returns a copy that JSON
can carry, each offending value described in a string, for reports. The
common case (an answer with no problem) costs one walk without paths; the
paths are only worked out once something is wrong.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = [
    "MAX_DEPTH",
    "MIN_INT",
    "MAX_INT",
    "INT_RANGE_TEXT",
    "json_problem",
    "json_safe",
    "is_plain_json",
    "is_plain_answer",
]

MIN_INT = -(2**63)
MAX_INT = 2**63 - 1
INT_RANGE_TEXT = "signed 64-bit, -2^63 .. 2^63-1"
MAX_DEPTH = 200  # nesting of arrays/objects in one answer


def is_plain_json(value: Any) -> bool:
    """True when ``value`` holds only JSON: dicts with string keys, lists,
    strings, booleans, None, finite floats and integers within range. Strings
    are not looked into (see :func:`json_problem`). No recursion, no paths."""
    return _plain_walk(value, strict=False)


def is_plain_answer(value: Any) -> bool:
    """True when ``value`` holds nothing :func:`json_problem` would find: what
    :func:`is_plain_json` checks, and also that every string has a UTF-8
    encoding (no lone surrogate) and that arrays and objects nest at most
    :data:`MAX_DEPTH` deep. The check every answer gets; False sends it to
    the careful walk."""
    return _plain_walk(value, strict=True)


def _plain_walk(value: Any, *, strict: bool) -> bool:
    """One walk, level by level, no paths. ``strict``: strings and depth too."""
    level = [value]
    depth = 0
    containers = 0  # a circular value would loop forever: past this many, the careful walk decides
    while level:
        below: list = []
        found = _plain_level(level, below, strict)
        if found < 0:
            return False
        containers += found
        if below:
            depth += 1
            if (strict and depth >= MAX_DEPTH) or containers > 1_000_000:
                return False  # deep (or circular): the careful walk decides
        level = below
    return True


def _plain_level(level: list, below: list, strict: bool) -> int:
    """Check one level's nodes, putting what their arrays and objects hold in
    ``below``: how many arrays and objects the level has, or -1 when a node is
    not plain (or is for the careful walk to decide)."""
    push = below.extend
    containers = 0
    for node in level:
        kind = type(node)
        if kind is str:
            if strict and not node.isascii():
                try:
                    node.encode("utf-8")
                except UnicodeEncodeError:  # a lone surrogate
                    return -1
            continue
        if kind is bool or node is None:
            continue
        if kind is int:
            if MIN_INT <= node <= MAX_INT:
                continue
            return -1
        if kind is float:
            if node - node == 0.0:  # false for NaN and the infinities
                continue
            return -1
        if kind is dict:
            for key in node:
                if type(key) is not str:
                    return -1
            push(node.values())
        elif kind is list:
            push(node)
        else:
            return -1  # subclasses and other types: the careful walk decides
        containers += 1
    return containers


def _key_text(key: Any) -> str:
    if isinstance(key, str):
        return key if key.isidentifier() else _quote(key)
    return f"[{_describe_scalar(key)}]"


def _quote(text: str) -> str:
    shown = text if len(text) <= 60 else text[:60] + "…"
    return "[" + repr(shown) + "]"


def _join(path: str, key: Any) -> str:
    part = _key_text(key)
    if part.startswith("["):
        return f"{path}{part}" if path else part
    return f"{path}.{part}" if path else part


def _int_digits(value: int) -> str:
    """Decimal digits of an integer, without converting it to text (which
    Python refuses for very long ones)."""
    bits = abs(value).bit_length()
    if bits <= 1000:
        return f"{len(str(abs(value)))} digits"
    return f"about {int(bits * math.log10(2)) + 1} digits"  # within one digit: enough to say how large


def _describe_scalar(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        if MIN_INT <= value <= MAX_INT:
            return str(int(value))
        return f"an integer of {_int_digits(value)}"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return repr(value)
    return f"a {type(value).__name__}"


def _value_problem(value: Any) -> str | None:
    """What is wrong with one non-container value, or None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return (
                f"is a string holding a lone surrogate (U+{ord(value[exc.start]):04X} at character "
                f"{exc.start}), which has no UTF-8 encoding"
            )
        return None
    if isinstance(value, int):
        if MIN_INT <= value <= MAX_INT:
            return None
        return f"is {_describe_scalar(value)}, outside the integers answers may hold ({INT_RANGE_TEXT})"
    if isinstance(value, float):
        if math.isfinite(value):
            return None
        return f"is {_describe_scalar(value)}, which JSON cannot carry"
    return f"is a Python {type(value).__name__}, which is not a JSON value"


def json_problem(value: Any, root: str = "") -> tuple[str, str] | None:
    """``(path, what is wrong)`` for the first value JSON cannot carry (depth
    first, object keys in sorted order so the answer is stable), or None.
    ``root`` starts every path (e.g. ``"result"``); the answer itself is
    ``root`` or, when that is empty, ``"(the answer)"``."""
    seen: set[int] = set()
    stack: list[tuple[Any, str, int]] = [(value, root, 0)]
    while stack:
        node, path, depth = stack.pop()
        where = path or "(the answer)"
        if isinstance(node, (dict, list)):
            if depth >= MAX_DEPTH:
                return where, f"nests deeper than {MAX_DEPTH} levels"
            if id(node) in seen:
                return where, "refers back to a value that holds it (a circular reference)"
            seen.add(id(node))
            if isinstance(node, dict):
                keys = list(node)
                for key in keys:
                    if not isinstance(key, str):
                        return where, (
                            f"has the key {_describe_scalar(key)} ({type(key).__name__}); JSON object keys are strings"
                        )
                    problem = _value_problem(key)
                    if problem:
                        return where, f"has a key that {problem}"
                for key in sorted(keys, reverse=True):
                    stack.append((node[key], _join(path, key), depth + 1))
            else:
                for i in range(len(node) - 1, -1, -1):
                    stack.append((node[i], f"{path}[{i}]", depth + 1))
            continue
        problem = _value_problem(node)
        if problem:
            return where, problem
    return None


def json_safe(value: Any) -> Any:
    """A copy of ``value`` that JSON can carry: each value it cannot carry is
    replaced by a string saying what it was (``"<NaN: not JSON>"``), keys that
    are not strings by their description, nesting past :data:`MAX_DEPTH` and
    circular references by a note. Strings are shared, not copied."""
    return _safe(value, 0, set())


def _safe(value: Any, depth: int, active: set) -> Any:
    if isinstance(value, (dict, list)):
        if depth >= MAX_DEPTH:
            return f"<nested deeper than {MAX_DEPTH} levels: not shown>"
        if id(value) in active:
            return "<circular reference: not JSON>"
        active.add(id(value))
        try:
            if isinstance(value, list):
                return [_safe(v, depth + 1, active) for v in value]
            out = {}
            for key, item in value.items():
                if isinstance(key, str):
                    name = (
                        key if _value_problem(key) is None else key.encode("utf-8", "backslashreplace").decode("ascii")
                    )
                else:
                    name = f"<key {_describe_scalar(key)}: not a string>"
                out[name] = _safe(item, depth + 1, active)
            return out
        finally:
            active.discard(id(value))
    problem = _value_problem(value)
    if problem is None:
        return value if type(value) in (str, int, float, bool) or value is None else _plain(value)
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, (int, float)):
        return f"<{_describe_scalar(value)}: not JSON>"
    try:
        shown = repr(value)
    except Exception:
        shown = f"a {type(value).__name__}"
    if len(shown) > 200:
        shown = shown[:200] + "…"
    return f"<{shown}: not JSON>"


def _plain(value: Any) -> Any:
    """A str/int/float subclass (an enum member, say) as the plain value JSON writes."""
    for kind in (bool, str, int, float):
        if isinstance(value, kind):
            return kind(value)
    return value
