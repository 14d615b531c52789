"""Judging an observed value against a predicted one.

Predictions are JSON values, except where the implementation may choose
(a temp-file path, a message's wording): there the model puts a ``Matcher``.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass
from typing import Any

from ..language.expressions import type_name

__all__ = [
    "Matcher",
    "Difference",
    "NotARegularFile",
    "first_difference",
    "read_regular_file",
    "to_jsonable",
    "use_file_reader",
]


# Past the payload's own size, how much more a file may hold before
# file_contains/file_json stop reading it (the payload must be in there or be
# its JSON document; pretty-printing may add several times its size).
_SLACK_BYTES = 1024 * 1024
_SLACK_FACTOR = 4


class NotARegularFile(OSError):
    """The path names something other than a regular file; the message says what."""


_NotAFile = NotARegularFile


def _kind_of(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def read_regular_file(path: str, limit: int) -> bytes:
    """At most ``limit`` bytes of a regular file. Whatever else the path
    names (a FIFO, a device such as /dev/zero, a directory, a socket, also
    behind a symbolic link) is refused without reading or waiting: the file
    is opened non-blocking and checked with fstat before the first read."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except IsADirectoryError:
        raise _NotAFile(f"{path} is a directory") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            via = f" (a symbolic link to {os.path.realpath(path)})" if os.path.islink(path) else ""
            raise _NotAFile(f"{path}{via} is {_kind_of(mode)}")
        chunks, left = [], limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


_file_reader = None  # None: the disk (read_regular_file, bounded); else reader(path) -> text


def use_file_reader(reader=None):
    """Where the file matchers (``file_contains``, ``file_equals``,
    ``file_json``) read files: the disk (None, the default: regular files
    only, and never more than the check needs), or ``reader(path) -> text``
    raising OSError, e.g. the file contents a recorded trace holds. Returns
    the previous reader."""
    global _file_reader
    previous, _file_reader = _file_reader, reader
    return previous


def _bytes_needed(kind: str, operand: Any) -> int:
    """How much of a file the check reads at most: one byte past the payload
    for file_equals (enough to see the file is longer), a generous multiple
    for file_contains and file_json."""
    if kind == "file_equals":
        return len(str(operand).encode("utf-8", "surrogatepass")) + 1
    size = (
        len(str(operand).encode("utf-8", "surrogatepass"))
        if kind == "file_contains"
        else len(json.dumps(operand, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    )
    return size * _SLACK_FACTOR + _SLACK_BYTES


def _read_file(kind: str, operand: Any, path: str) -> tuple[str | None, str | None]:
    """(the file's text, None) or (None, why the check fails without it)."""
    if _file_reader is not None:
        try:
            return _file_reader(path), None
        except OSError as exc:
            return None, f"expected a readable file, but {exc.strerror or exc}"
        except UnicodeDecodeError:
            return None, "expected a UTF-8 text file"
    limit = _bytes_needed(kind, operand)
    try:
        data = read_regular_file(path, limit)
    except _NotAFile as exc:
        return None, f"expected a regular file, but {exc}"
    except OSError as exc:
        return None, f"expected a readable file, but {exc.strerror or exc}"
    if len(data) >= limit:
        if kind == "file_equals":
            return None, (
                f"expected the file to hold exactly the payload ({limit - 1} bytes as UTF-8), but it holds more"
            )
        return None, f"expected the file to hold the payload, but it is larger than {limit:,} bytes (not read further)"
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return None, "expected a UTF-8 text file"


@dataclass(frozen=True)
class Matcher:
    """A predicate over an observed value: ``checks`` is a tuple of (kind, operand)."""

    checks: tuple

    def failure(self, value: Any) -> str | None:
        for kind, operand in self.checks:
            if kind == "any":
                continue
            if kind == "equals":
                if value != operand:
                    return f"expected {_brief(operand)}, got {_brief(value)}"
                continue
            if not isinstance(value, str):
                return f"expected a string, got {_kind(value)}"
            if kind == "contains" and str(operand) not in value:
                return f"expected text containing {_brief(_short(operand))}"
            if kind == "endswith" and not value.endswith(str(operand)):
                return f"expected a value ending with {_brief(operand)}"
            if kind == "matches" and not re.search(str(operand), value):
                return f"expected a value matching /{operand}/, got {_brief(value, 120)}"
            if kind in ("file_contains", "file_equals", "file_json"):
                content, why = _read_file(kind, operand, value)
                if why:
                    return why
                assert content is not None  # _read_file gives the text or why there is none
                why = _file_failure(kind, operand, content)
                if why:
                    return why
        return None

    def describe(self) -> dict:
        return {"$match": {kind: _short(op) for kind, op in self.checks}}

    def __repr__(self) -> str:
        return f"Matcher({self.describe()['$match']!r})"


def _file_failure(kind: str, operand: Any, content: str) -> str | None:
    if kind == "file_contains":
        if str(operand) not in content:
            return f"expected the file to hold the payload ({len(str(operand))} chars)"
    elif kind == "file_equals":
        if content != str(operand):
            return (
                f"expected the file to hold exactly the payload ({len(str(operand))} chars), "
                f"got {len(content)} chars: {_short(content, 60)!r}"
            )
    else:  # file_json: one JSON document whose value is the operand
        try:
            document = json.loads(content)
        except ValueError as exc:
            return f"expected the file to be one JSON document, but it is not ({exc})"
        if document != operand:
            return (
                f"expected the file's JSON document to be the payload ({_short(operand, 60)!r}), "
                f"got {_short(document, 60)!r}"
            )
    return None


def _short(value: Any, limit: int = 120) -> Any:
    if isinstance(value, str) and len(value) > limit:
        return value[:limit] + f"... ({len(value)} chars)"
    return value


def _kind(value: Any) -> str:
    """What ``value`` is, with the value as JSON: null, an object, a string "x", ..."""
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "a list"
    return f"{type_name(value)} {_brief(value, 80)}"


def _brief(value: Any, limit: int = 300) -> str:
    """``value`` as JSON (as traces and reports show it: "x", null, true), cut
    past ``limit`` characters (an answer may be megabytes; the whole value is
    the failure's evidence, not its message)."""
    try:
        text = json.dumps(to_jsonable(value), ensure_ascii=False, sort_keys=True, default=repr)
    except ValueError:  # e.g. an integer too long to print, NaN
        try:
            text = repr(value)
        except ValueError:
            return f"<a {type(value).__name__} too large to print>"
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


@dataclass(frozen=True)
class Difference:
    path: str
    expected: Any
    observed: Any
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


_MISSING = object()


def _same(expected: Any, observed: Any) -> bool:
    if isinstance(expected, bool) or isinstance(observed, bool):
        return type(expected) is type(observed) and expected == observed
    if isinstance(expected, (int, float)) and isinstance(observed, (int, float)):
        return expected == observed
    return type(expected) is type(observed) and expected == observed


def _plainly_same(expected: Any, observed: Any) -> bool:
    """A quick True for the most common agreeing values: equal strings,
    nulls, integers (not booleans), and objects of those, compared as
    ``first_difference`` would (extra observed keys allowed). False means
    "look closely", not "different"."""
    kind = type(expected)
    if kind is str or kind is int or expected is None:
        return type(observed) is kind and observed == expected
    if kind is dict and type(observed) is dict:
        for key, value in expected.items():
            kind = type(value)
            if not (kind is str or kind is int or value is None):
                return False
            got = observed.get(key, _MISSING)
            if type(got) is not kind or got != value:
                return False
        return True
    return False


def first_difference(expected: Any, observed: Any, path: str = "") -> Difference | None:
    """The first place where ``observed`` does not satisfy ``expected``.

    Mappings: every expected key must be present and match (extra observed keys
    are the result schema's business); of several differing keys the first in
    sorted order is reported, whatever order the prediction was built in.
    Lists: same length, item by item.
    """
    if isinstance(expected, Matcher):
        why = expected.failure(observed)
        return Difference(path or "(value)", expected.describe(), observed, why) if why else None
    if isinstance(expected, dict):
        return _mapping_difference(expected, observed, path)
    if isinstance(expected, list):
        return _list_difference(expected, observed, path)
    if not _same(expected, observed):
        return Difference(path or "(value)", expected, observed, f"expected {_brief(expected)}, got {_brief(observed)}")
    return None


def _mapping_difference(expected: dict, observed: Any, path: str) -> Difference | None:
    if not isinstance(observed, dict):
        return Difference(
            path or "(value)", to_jsonable(expected), observed, f"expected an object, got {_kind(observed)}"
        )
    for key, value in expected.items():
        got = observed.get(key, _MISSING)
        if got is _MISSING or (not _plainly_same(value, got) and first_difference(value, got) is not None):
            # CEL builds maps in no fixed order (the same expression gives
            # its keys in another order each time), so which difference
            # comes "first" is decided by the keys' sorted order, never by
            # the order a prediction happened to be built in: the same
            # answers always get the same report (only failures pay for it).
            return _first_by_sorted_key(expected, observed, path)
    return None


def _list_difference(expected: list, observed: Any, path: str) -> Difference | None:
    if not isinstance(observed, list):
        return Difference(path or "(value)", to_jsonable(expected), observed, f"expected a list, got {_kind(observed)}")
    for i, (e, o) in enumerate(zip(expected, observed)):
        if _plainly_same(e, o):
            continue
        diff = first_difference(e, o, f"{path}[{i}]")
        if diff:
            return diff
    if len(expected) != len(observed):
        return Difference(
            path or "(value)",
            to_jsonable(expected),
            observed,
            f"expected {len(expected)} item(s), got {len(observed)}",
        )
    return None


def _first_by_sorted_key(expected: dict, observed: dict, path: str) -> Difference | None:
    for key in sorted(expected, key=str):
        sub = f"{path}.{key}" if path else key
        got = observed.get(key, _MISSING)
        if got is _MISSING:
            return Difference(sub, to_jsonable(expected[key]), None, "missing")
        diff = first_difference(expected[key], got, sub)
        if diff:
            return diff
    return None


def to_jsonable(value: Any) -> Any:
    """A prediction as plain JSON (matchers described), for reports."""
    if isinstance(value, Matcher):
        return value.describe()
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_jsonable(v) for v in value]
    return value
