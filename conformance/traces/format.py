"""The trace format (JSON lines, version 1): reading it line by line, and
writing a session's steps as trace lines.

Reading streams: :func:`read_trace` yields one event at a time with its line
number, so a trace of any length is read in constant memory. Every line is
checked against ``conformance/schemas/trace.schema.json``; a bad line is a
:class:`TraceError` naming ``file:line`` and what to fix. Nothing here imports
the rest of the kit, so the engine may use it to record.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from statemachines.model.matchers import NotARegularFile, read_regular_file

__all__ = [
    "TRACE_FORMAT",
    "TraceError",
    "TraceHeader",
    "TraceEvent",
    "read_trace",
    "header_line",
    "lines_of_session",
    "snapshot_files",
    "trace_schema",
]

TRACE_FORMAT = 1
MAX_LINE_BYTES = 16 * 1024 * 1024


class TraceError(ValueError):
    """A trace file that cannot be read; the message names file:line."""


@dataclass
class TraceHeader:
    spec_id: str
    spec_version: str | None
    profile: str | None
    parameters: dict
    implementation: dict
    line: int = 1


@dataclass
class TraceEvent:
    """One step of a trace: ``kind`` is call, clock, concurrently or reset."""

    kind: str
    line: int
    data: dict
    calls: list[dict] = field(default_factory=list)  # a group's calls (concurrently)


_VALIDATORS: dict[str, Draft202012Validator] = {}


def trace_schema() -> dict:
    return json.loads(resources.files("conformance").joinpath("schemas", "trace.schema.json").read_text("utf-8"))


def _validator(kind: str) -> Draft202012Validator:
    """The validator of one kind of line. The schema's top level is a oneOf
    over the kinds, and each kind requires its own key and allows no other
    kind's, so a line of a known kind matches the schema exactly when it
    matches its kind's definition; checking only that one is ~5 times cheaper
    than trying every branch of the oneOf on each of a million lines."""
    if kind not in _VALIDATORS:
        schema = trace_schema()
        defs = schema["$defs"]
        _VALIDATORS[kind] = Draft202012Validator({**defs[kind], "$defs": defs} if kind in defs else schema)
    return _VALIDATORS[kind]


def _kind(obj: dict) -> str:
    for kind, key in (
        ("header", "trace"),
        ("call", "call"),
        ("clock", "clock_ms"),
        ("concurrently", "concurrently"),
        ("reset", "reset"),
    ):
        if key in obj:
            return kind
    return "unknown"


def _why(obj: Any, kind: str) -> str:
    """The most useful schema complaint for a line of a known kind."""
    if kind == "unknown":
        return (
            "an event needs one of `call`, `clock_ms`, `concurrently` or `reset` "
            "(the first line, the header, needs `trace`)"
        )
    defs = trace_schema()["$defs"]
    errors = sorted(
        Draft202012Validator({**defs[kind], "$defs": defs}).iter_errors(obj), key=lambda e: len(list(e.absolute_path))
    )
    if not errors:
        return "it does not match the trace format"
    error = errors[-1]
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    if error.validator == "oneOf" and kind == "call":
        return f"a {kind} event{where and ' at ' + where} needs exactly one of `result` and `error`"
    return f"{kind} event{(' at ' + where.lstrip('.')) if where else ''}: {error.message}"


MAX_DEPTH = 64  # levels of nesting a trace line may have (as a spec file)
INT_RANGE = (-(2**63), 2**63 - 1)  # integers a trace may hold: 64-bit


def _int(text: str) -> int:
    if len(text.lstrip("-")) > 19 or not INT_RANGE[0] <= int(text) <= INT_RANGE[1]:
        raise ValueError(f"the integer {text[:40]}{'...' if len(text) > 40 else ''} is outside the 64-bit range")
    return int(text)


def _too_deep(text: bytes) -> bool:
    """Nesting deeper than MAX_DEPTH, counted on the raw text (brackets outside strings)."""
    depth, in_string, escaped = 0, False, False
    for byte in text:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return False


def _json_line(text: bytes, path: Path, number: int) -> Any:
    """One line's JSON value, or TraceError at its line: not JSON, nested more
    than MAX_DEPTH levels, or an integer outside the 64-bit range."""
    if _too_deep(text):
        raise TraceError(f"{path}:{number}: nested more than {MAX_DEPTH} levels deep; a trace event is shallower")
    try:
        return json.loads(text.decode("utf-8"), parse_int=_int)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise TraceError(
            f"{path}:{number}: not a JSON object ({str(exc)[:200]}); each line of a trace is one JSON object"
        ) from None


def read_trace(path: str | Path) -> Iterator[TraceHeader | TraceEvent]:
    """The header, then each event, of the trace at ``path``."""
    path = Path(path)
    if not path.is_file():
        raise TraceError(f"{path}: not a readable file")
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise TraceError(f"{path}: cannot read it ({exc.strerror})") from None
    with handle:
        header_seen = False
        for number, raw in enumerate(iter(lambda: handle.readline(MAX_LINE_BYTES + 1), b""), 1):
            if len(raw) > MAX_LINE_BYTES:  # read no further than one byte past the limit
                raise TraceError(f"{path}:{number}: a line longer than {MAX_LINE_BYTES} bytes")
            text = raw.strip()
            if not text:
                continue
            obj = _json_line(text, path, number)
            if not isinstance(obj, dict):
                raise TraceError(
                    f"{path}:{number}: each line of a trace must be a JSON object, got {type(obj).__name__}"
                )
            kind = _kind(obj)
            if not header_seen:
                if kind != "header":
                    raise TraceError(
                        f"{path}:{number}: the first line must be the header, "
                        '{"trace": 1, "spec": {"id": ..., "version": ...}, ...}'
                    )
                if obj.get("trace") != TRACE_FORMAT:
                    raise TraceError(
                        f"{path}:{number}: trace format {obj.get('trace')!r} is not supported "
                        f"(this kit reads format {TRACE_FORMAT})"
                    )
            if kind == "unknown" or not _validator(kind).is_valid(obj):
                raise TraceError(f"{path}:{number}: {_why(obj, kind)}")
            if kind == "header":
                if header_seen:
                    raise TraceError(
                        f"{path}:{number}: a second header; start another session with {{\"reset\": true}} instead"
                    )
                header_seen = True
                yield TraceHeader(
                    obj["spec"]["id"],
                    obj["spec"].get("version"),
                    obj.get("profile"),
                    obj.get("parameters") or {},
                    obj.get("implementation") or {},
                    number,
                )
            elif kind == "concurrently":
                yield TraceEvent(kind, number, obj, list(obj["concurrently"]))
            else:
                yield TraceEvent(kind, number, obj)
        if not header_seen:
            raise TraceError(f"{path}: an empty trace; the first line must be the header")


# -- writing ----------------------------------------------------------------------


def header_line(
    spec_id: str, spec_version: str, *, profile: str | None, parameters: dict, implementation: dict, source: str
) -> str:
    return json.dumps(
        {
            "trace": TRACE_FORMAT,
            "spec": {"id": spec_id, "version": spec_version},
            "profile": profile,
            "parameters": parameters,
            "implementation": implementation,
            "clock": "virtual",
            "source": source,
        },
        sort_keys=False,
    )


MAX_FILE_BYTES = 1024 * 1024


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def snapshot_files(observed: Any) -> dict[str, str]:
    """The text of the regular files (at most 1 MiB each) an answer names by
    absolute path, read now while they exist."""
    files: dict[str, str] = {}
    for text in _strings(observed):
        if not text.startswith("/") or len(text) > 4096 or "\x00" in text:
            continue
        try:
            data = _read_regular_file(text, MAX_FILE_BYTES)
            if data is not None:
                files[text] = data.decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
    return files


def _read_regular_file(path: str, limit: int) -> bytes | None:
    """The bytes of a regular file of at most ``limit`` bytes, else None
    (read as the file matchers read: never a FIFO or a device, never more than needed)."""
    try:
        data = read_regular_file(path, limit + 1)
    except NotARegularFile:
        return None
    return data if len(data) <= limit else None


def _call_event(operation: str, args: dict, observed: Any, at_ms: int | None) -> dict:
    event: dict = {"call": operation, "args": args}
    if isinstance(observed, dict):
        for key in ("result", "error", "effects"):
            if key in observed:
                event[key] = observed[key]
    if at_ms is not None:
        event["at_ms"] = at_ms
    files = snapshot_files(observed)
    if files:
        event["files"] = files
    return event


def lines_of_session(steps: list[dict], probes: list[tuple[str, dict]]) -> Iterator[str]:
    """Trace lines for a session's recorded steps (``Session.trace`` entries):
    calls, clock moves (absolute), and concurrent groups with the read-only
    probe calls the kit made right after them. Steps without an answer (a
    call that timed out) end the recording: nothing after them was observed."""
    now = 0
    index = 0
    while index < len(steps):
        step = steps[index]
        index += 1
        if "advance_ms" in step:
            now = int(step["now_ms"]) if "now_ms" in step else now + int(step["advance_ms"])
            observed = step.get("observed")
            if not isinstance(observed, dict):
                return
            files = snapshot_files(observed)
            yield json.dumps(
                {"clock_ms": now, "effects": observed.get("effects", []), **({"files": files} if files else {})}
            )
        elif "concurrently" in step:
            calls = []
            for call in step["concurrently"]:
                if not isinstance(call.get("observed"), dict):
                    return
                calls.append(_call_event(call["operation"], call["args"], call["observed"], now))
            after = []
            for op, args in probes:
                if index < len(steps) and steps[index].get("operation") == op and steps[index].get("args") == args:
                    if not isinstance(steps[index].get("observed"), dict):
                        break
                    after.append(_call_event(op, args, steps[index]["observed"], now))
                    index += 1
            yield json.dumps({"concurrently": calls, **({"observed_after": after} if after else {})})
        elif "operation" in step:
            if not isinstance(step.get("observed"), dict):
                return
            yield json.dumps(_call_event(step["operation"], step["args"], step["observed"], now))
