"""The adapter protocol v1 as JSON lines (see docs/adapter-protocol.md).

This module only builds and reads messages; ``conformance.adapters.stdio`` moves them
over a subprocess's pipes. Every message type has a JSON Schema in
``conformance/schemas/protocol/`` (``<type>.request.json`` and
``<type>.response.json``).

Reading is defensive: :meth:`ResponseReader.read` turns any line a program
may print (bytes that are not UTF-8, huge lines, deeply nested JSON, numbers
Python cannot hold, answers to requests that were never sent or were already
answered) either into a :class:`Response` or into a :class:`ProtocolError`
that quotes the offending line. It never raises anything else and its cost
is bounded by the line length cap.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import jsonschema

from ..errors import ConformanceError
from .json_values import INT_RANGE_TEXT, json_problem

__all__ = [
    "PROTOCOL_VERSION",
    "MESSAGE_TYPES",
    "MAX_LINE_BYTES",
    "MAX_DEPTH",
    "SCHEMA_DIR",
    "ProtocolError",
    "Response",
    "ResponseReader",
    "encode",
    "hello_request",
    "reset_request",
    "clock_request",
    "call_request",
    "bye_request",
    "parse_line",
    "validate_message",
    "load_schema",
    "quote_line",
    "major_version",
]

PROTOCOL_VERSION = 1
MESSAGE_TYPES = ("hello", "reset", "clock", "call", "bye")
MAX_LINE_BYTES = 16 * 1024 * 1024  # one response line, newline excluded
MAX_DEPTH = 64  # nesting of arrays/objects in one message
SCHEMA_DIR = resources.files("conformance").joinpath("schemas", "protocol")
_QUOTE_CHARS = 300  # how much of an offending line an error quotes
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")


class ProtocolError(ConformanceError):
    """A program broke the wire protocol. ``line`` is the offending line
    (bytes) or None; ``id`` is the request the line answers, when it names
    one that was waiting (e.g. an answer breaking its message's schema)."""

    def __init__(self, message: str, line: bytes | None = None, id: int | None = None):
        self.line, self.id = line, id
        super().__init__(message + (f": {quote_line(line)}" if line is not None else ""))


@dataclass(frozen=True)
class Response:
    """One answer: the request it answers, that request's type, and the
    message (a dict, ``id`` included)."""

    id: int
    type: str
    message: dict


def quote_line(line: bytes | str | None) -> str:
    """A short, printable rendering of a line for error messages."""
    if line is None:
        return "<no line>"
    if isinstance(line, str):
        line = line.encode("utf-8", "surrogatepass")
    size = len(line)
    text = line[: _QUOTE_CHARS * 4].decode("utf-8", "backslashreplace")
    text = text.rstrip("\r\n")
    if len(text) > _QUOTE_CHARS:
        text = text[:_QUOTE_CHARS]
        return repr(text) + f"... ({size} bytes in all)"
    return repr(text)


def major_version(version: Any) -> str:
    """ "1.4.2" -> "1"; a non-string version has no major number."""
    return str(version).strip().split(".")[0] if isinstance(version, str) else ""


# ------------------------------------------------------------------ schemas
@cache
def load_schema(type_: str, direction: str) -> dict:
    """The JSON Schema of one message: ``direction`` is request or response."""
    if type_ not in MESSAGE_TYPES or direction not in ("request", "response"):
        raise ValueError(f"no protocol schema for {type_!r} {direction!r}")
    return json.loads((SCHEMA_DIR / f"{type_}.{direction}.json").read_text(encoding="utf-8"))


@cache
def _validators(type_: str, direction: str):
    schema = load_schema(type_, direction)
    branches = [(b, jsonschema.Draft202012Validator(b)) for b in schema.get("oneOf", ())]
    return jsonschema.Draft202012Validator(schema), branches


def _where(path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "the message"


def validate_message(message: Any, type_: str, direction: str = "response") -> str | None:
    """Why ``message`` breaks its schema (one readable sentence), or None."""
    validator, branches = _validators(type_, direction)
    if validator.is_valid(message):
        return None
    if branches and isinstance(message, dict):
        # Explain against the form the message meant (the one whose required
        # keys it has most of), not "is not valid under any of the given schemas".
        _, chosen = max(branches, key=lambda b: sum(1 for key in b[0].get("required", ()) if key in message))
        errors = list(chosen.iter_errors(message))
        if not errors:
            return "it matches more than one form of this message"
    else:
        errors = list(validator.iter_errors(message))
    if not errors:
        return None
    error = jsonschema.exceptions.best_match(errors)
    at = _where(error.absolute_path)
    return f"{at}: {error.message}" if at != "the message" else error.message


# ------------------------------------------------------------------ building
def encode(message: dict) -> bytes:
    """One line on the wire (ASCII-safe JSON, compact, with its newline)."""
    return (json.dumps(message, ensure_ascii=True, separators=(",", ":"), allow_nan=False) + "\n").encode("ascii")


def hello_request(id: int, spec_id: str, spec_version: str) -> dict:
    return {"id": id, "type": "hello", "protocol": PROTOCOL_VERSION, "spec": {"id": spec_id, "version": spec_version}}


def reset_request(id: int, now_ms: int) -> dict:
    return {"id": id, "type": "reset", "now_ms": int(now_ms)}


def clock_request(id: int, now_ms: int) -> dict:
    return {"id": id, "type": "clock", "now_ms": int(now_ms)}


def call_request(id: int, operation: str, args: dict) -> dict:
    return {"id": id, "type": "call", "operation": operation, "args": args}


def bye_request(id: int) -> dict:
    return {"id": id, "type": "bye"}


# ------------------------------------------------------------------ reading
def _reject_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"the number {text[:40]} is too large for a double")
    return value


def _check_tree(value: Any, check_strings: bool) -> str | None:
    """Depth limit (and, when asked, strings that are not valid Unicode),
    checked without recursion."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            if depth > MAX_DEPTH:
                return f"the message nests deeper than {MAX_DEPTH} levels"
            if check_strings:
                stack.extend((k, depth) for k in node)
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            if depth > MAX_DEPTH:
                return f"the message nests deeper than {MAX_DEPTH} levels"
            stack.extend((v, depth + 1) for v in node)
        elif check_strings and isinstance(node, str):
            try:
                node.encode("utf-8")
            except UnicodeEncodeError:
                return "a string holds a lone UTF-16 surrogate escape (not valid Unicode)"
    return None


class _Unreadable(float):
    """A number Python's json refuses (NaN, Infinity, a too long integer),
    parsed anyway only to say where it is."""

    text: str  # what stood in the line, or what the number was

    def __new__(cls, text: str) -> _Unreadable:
        self = super().__new__(cls, "nan")
        self.text = text
        return self


def _where_not_json(text: str) -> str | None:
    """``<path> is <value>`` for the first number of a line Python's json
    refused (NaN, Infinity, an integer too long to convert), or None."""
    try:
        message = json.loads(
            text,
            parse_constant=_Unreadable,
            parse_int=lambda s: (
                int(s)
                if len(s) <= 4000
                else _Unreadable(
                    f"an integer of {len(s.lstrip('-'))} digits, outside the integers answers may hold "
                    f"({INT_RANGE_TEXT})"
                )
            ),
            parse_float=lambda s: _Unreadable(s) if float(s) in (float("inf"), float("-inf")) else float(s),
        )
    except (ValueError, RecursionError):
        return None
    stack = [(message, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, _Unreadable):
            why = "" if node.text.startswith("an integer") else ", which JSON cannot carry"
            return f"{path or '(the message)'} is {node.text}{why}"
        if isinstance(node, dict):
            stack.extend((v, f"{path}.{k}" if path else str(k)) for k, v in reversed(list(node.items())))
        elif isinstance(node, list):
            stack.extend((v, f"{path}[{i}]") for i, v in reversed(list(enumerate(node))))
    return None


def parse_line(line: bytes) -> dict:
    """One line -> a JSON object, or ProtocolError quoting the line."""
    if not isinstance(line, (bytes, bytearray)):
        raise ProtocolError(f"expected a line of bytes, got {type(line).__name__}")
    line = bytes(line)
    if len(line) > MAX_LINE_BYTES + 2:  # allow for "\r\n"
        raise ProtocolError(f"the program printed a line longer than {MAX_LINE_BYTES} bytes", line)
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError(
            f"the program printed a line that is not UTF-8 ({exc.reason} at byte {exc.start})", line
        ) from None
    try:
        message = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except RecursionError:
        raise ProtocolError(f"the program printed a line nesting deeper than {MAX_DEPTH} levels", line) from None
    except ValueError as exc:  # JSONDecodeError, huge integers, NaN/Infinity
        where = _where_not_json(text)
        raise ProtocolError(f"the program printed a line that is not JSON ({where or exc})", line) from None
    if not isinstance(message, dict):
        raise ProtocolError(f"the program printed a line that is a JSON {type(message).__name__}, not an object", line)
    problem = _check_tree(message, check_strings=bool(_SURROGATE_ESCAPE.search(line)))
    if problem and "surrogate" in problem:
        found = json_problem(message)
        problem = f"{found[0]} {found[1]}" if found else problem
    if problem:
        raise ProtocolError(f"the program printed a line that breaks the protocol ({problem})", line)
    return message


class ResponseReader:
    """Matches response lines to the requests sent, by id.

    ``sent(id, type)`` registers a request; ``read(line)`` parses one line
    and returns the :class:`Response` for a pending request, or raises
    ProtocolError for a line that is not a valid answer: not JSON, not an
    object, no integer id, an id never sent ("unknown id"), an id already
    answered ("answered twice"), or a message breaking its schema.
    ``abandon(id)`` forgets a request whose caller gave up (a timeout); a
    late answer to it is then dropped (``read`` returns None). Thread-safe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[int, str] = {}
        self._answered: set[int] = set()
        self._abandoned: set[int] = set()

    def sent(self, id: int, type_: str) -> None:
        with self._lock:
            self._pending[id] = type_

    def abandon(self, id: int) -> None:
        with self._lock:
            if self._pending.pop(id, None) is not None:
                self._abandoned.add(id)

    def pending(self) -> dict[int, str]:
        with self._lock:
            return dict(self._pending)

    def read(self, line: bytes) -> Response | None:
        message = parse_line(line)
        id = message.get("id")
        if "id" not in message:
            raise ProtocolError(
                "the program printed a response without an id (every response carries the id of the "
                "request it answers)",
                line,
            )
        if isinstance(id, bool) or not isinstance(id, int):
            raise ProtocolError(
                f"the program printed a response whose id is not an integer ({json.dumps(id)[:40]})", line
            )
        with self._lock:
            type_ = self._pending.pop(id, None)
            if type_ is None:
                if id in self._abandoned:
                    self._abandoned.discard(id)
                    self._answered.add(id)
                    return None
                if id in self._answered:
                    raise ProtocolError(f"the program answered request {id} twice; the second answer", line)
                raise ProtocolError(
                    f"the program answered unknown request id {id} (no request with that id was sent)", line
                )
            self._answered.add(id)
        if (
            type_ == "hello"
            and message.get("protocol", PROTOCOL_VERSION) != PROTOCOL_VERSION
            and "error" not in message
        ):
            # Another protocol's hello may have another shape: say which
            # version it speaks rather than how its shape differs.
            return Response(id, type_, message)
        problem = validate_message(message, type_, "response")
        if problem:
            raise ProtocolError(
                f"the program answered {type_} request {id} with a message that breaks the protocol's "
                f"{type_}.response schema ({problem})",
                line,
                id=id,
            )
        return Response(id, type_, message)
