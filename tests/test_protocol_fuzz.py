"""Fuzzing the protocol reader (conformance.adapters.stdio_protocol): whatever a program
prints, reading it either gives a response or raises ProtocolError -- never
another exception, never a hang -- and every valid message round-trips.
"""

from __future__ import annotations

import json
import types

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from conformance.adapters import stdio_protocol
from conformance.adapters.stdio_protocol import (
    MAX_DEPTH,
    MAX_LINE_BYTES,
    MESSAGE_TYPES,
    ProtocolError,
    Response,
    ResponseReader,
    bye_request,
    call_request,
    clock_request,
    encode,
    hello_request,
    load_schema,
    parse_line,
    reset_request,
    validate_message,
)
from conformance.engine.schema_draws import from_schema
from conformance.errors import ConformanceError

pytestmark = pytest.mark.hypothesis  # drives Hypothesis: tests/hypothesis_marker.py

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=30,
)


def read_any(line: bytes, reader: ResponseReader | None = None):
    """Read one line; only a Response, None (a late answer) or ProtocolError is allowed."""
    reader = reader or ResponseReader()
    for id, type_ in enumerate(MESSAGE_TYPES, start=1):
        reader.sent(id, type_)
    try:
        out = reader.read(line)
    except ProtocolError as exc:
        assert isinstance(exc, ConformanceError)
        assert str(exc)
        return exc
    assert out is None or isinstance(out, Response)
    return out


def test_protocol_error_is_a_conformance_error():
    assert issubclass(ProtocolError, ConformanceError)


@FUZZ
@given(st.binary(max_size=512))
@example(b"")
@example(b"\n")
@example(b"\xff\xfe{}\n")
@example(b'{"id": 1, "ok": true}\xc3')
@example(b'{"id": 1e999, "ok": true}')
@example(b'{"id": 1, "ok": true, "x": NaN}')
@example(b'{"id": 1, "ok": true, "x": "\\ud800"}')
@example(b'{"id": 1, "ok": true, "x": "\\ud83d\\ude00"}')
@example(b'{"id": ' + b"9" * 5000 + b', "ok": true}')
@example(b'{"id": true, "ok": true}')
@example(b'{"ok": true}')
@example(b"[1, 2]")
def test_random_bytes_give_a_response_or_a_protocol_error(line):
    read_any(line)


@FUZZ
@given(json_values, st.sampled_from(["\n", "\r\n", ""]))
def test_random_json_gives_a_response_or_a_protocol_error(value, ending):
    line = (json.dumps(value) + ending).encode()
    out = read_any(line)
    if not isinstance(value, dict):
        assert isinstance(out, ProtocolError)


@pytest.mark.slow
@FUZZ
@given(
    st.dictionaries(
        st.sampled_from(
            ["id", "ok", "result", "error", "effects", "protocol", "specs", "implementation", "capabilities", "extra"]
        ),
        json_values | st.integers(-3, 8),
        max_size=6,
    )
)
def test_response_shaped_junk_gives_a_response_or_a_protocol_error(message):
    out = read_any(json.dumps(message).encode())
    if isinstance(out, Response):
        assert validate_message(out.message, out.type) is None or out.type == "hello"


@pytest.mark.parametrize("depth", [MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 500, 5000, 200_000])
def test_deep_nesting_is_bounded(depth):
    line = b'{"id": 1, "result": ' + b"[" * depth + b"]" * depth + b"}"
    reader = ResponseReader()
    reader.sent(1, "call")
    try:
        out = reader.read(line)
    except ProtocolError as exc:
        assert depth + 1 > MAX_DEPTH, exc
        assert "nest" in str(exc)
    else:
        assert depth + 1 <= MAX_DEPTH and out.message["id"] == 1


def test_unbalanced_open_brackets_are_an_error():
    with pytest.raises(ProtocolError):
        parse_line(b"[" * 1_000_000)


def test_a_line_over_the_cap_is_refused_without_parsing(monkeypatch):
    line = b'{"id": 1, "result": "' + b"x" * MAX_LINE_BYTES + b'"}\n'
    parsed = []
    monkeypatch.setattr(stdio_protocol, "json", types.SimpleNamespace(loads=lambda *a, **k: parsed.append(a) or {}))
    with pytest.raises(ProtocolError, match="longer than") as caught:
        parse_line(line)
    assert parsed == []
    assert len(str(caught.value)) < 1000  # the offending line is quoted, not dumped


def test_a_long_line_under_the_cap_is_read():
    payload = "y" * (4 * 1024 * 1024)
    reader = ResponseReader()
    reader.sent(7, "call")
    out = reader.read(encode({"id": 7, "result": payload, "effects": []}))
    assert out.message["result"] == payload


def test_unknown_and_duplicate_ids():
    reader = ResponseReader()
    reader.sent(1, "reset")
    with pytest.raises(ProtocolError, match="unknown request id 2") as caught:
        reader.read(b'{"id": 2, "ok": true}\n')
    assert caught.value.line == b'{"id": 2, "ok": true}\n'
    assert reader.read(b'{"id": 1, "ok": true}\n').type == "reset"
    with pytest.raises(ProtocolError, match="answered request 1 twice"):
        reader.read(b'{"id": 1, "ok": true}\n')
    reader.sent(3, "call")
    reader.abandon(3)
    assert reader.read(b'{"id": 3, "result": {}}') is None  # late answer after a timeout: dropped
    with pytest.raises(ProtocolError, match="twice"):
        reader.read(b'{"id": 3, "result": {}}')


def test_a_schema_breaking_answer_names_its_request():
    reader = ResponseReader()
    reader.sent(4, "call")
    with pytest.raises(ProtocolError, match=r"call\.response schema \(effects\[0\]") as caught:
        reader.read(b'{"id": 4, "result": {}, "effects": [{"name": "x"}]}')
    assert caught.value.id == 4


# ------------------------------------------------------------ round trips
ids = st.integers(1, 2**53 - 1)
failures = st.fixed_dictionaries({"kind": st.text(max_size=20), "message": st.text(max_size=40)})
effects = st.lists(
    st.fixed_dictionaries(
        {"effect": st.text(min_size=1, max_size=20)}, optional={"job_id": st.text(max_size=8), "extra": json_values}
    ),
    max_size=3,
)
refusals = st.fixed_dictionaries({"id": ids, "error": failures})
valid_responses = {
    "hello": st.fixed_dictionaries(
        {
            "id": ids,
            "protocol": st.just(1),
            "implementation": st.fixed_dictionaries(
                {"name": st.text(min_size=1, max_size=20), "version": st.text(max_size=8)},
                optional={"homepage": st.text(max_size=20)},
            ),
            "specs": st.lists(
                st.fixed_dictionaries(
                    {"id": st.text(max_size=20), "version": st.text(max_size=8)},
                    optional={
                        "profile": st.none() | st.text(max_size=10),
                        "parameters": st.dictionaries(st.text(max_size=10), json_values, max_size=3),
                    },
                ),
                min_size=1,
                max_size=3,
            ),
        },
        optional={"capabilities": st.fixed_dictionaries({}, optional={"concurrent": st.booleans()})},
    )
    | refusals,
    "reset": st.fixed_dictionaries({"id": ids, "ok": st.just(True)}) | refusals,
    "clock": st.fixed_dictionaries({"id": ids, "ok": st.just(True)}, optional={"effects": effects}) | refusals,
    "call": (
        st.fixed_dictionaries({"id": ids, "result": json_values}, optional={"effects": effects})
        | st.fixed_dictionaries({"id": ids, "error": failures}, optional={"effects": effects})
    ),
    "bye": st.fixed_dictionaries({"id": ids, "ok": st.just(True)}) | refusals,
}


def _round_trip(type_: str, message: dict) -> None:
    assert validate_message(message, type_) is None
    reader = ResponseReader()
    reader.sent(message["id"], type_)
    out = reader.read(encode(message))
    assert out == Response(message["id"], type_, message)


@pytest.mark.parametrize("type_", MESSAGE_TYPES)
@FUZZ
@given(data=st.data())
def test_valid_responses_round_trip(type_, data):
    _round_trip(type_, data.draw(valid_responses[type_]))


def _response_schema(type_: str) -> dict:
    schema = dict(load_schema(type_, "response"))
    schema.pop("$id", None)
    return schema


@pytest.mark.parametrize("type_", MESSAGE_TYPES)
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_anything_the_response_schemas_allow_round_trips(type_, data):
    # Slow to generate (oneOf + closed objects), hence few examples; the
    # hand-written strategies above cover the shapes in depth.
    message = data.draw(from_schema(_response_schema(type_)))
    if type_ == "hello" and "error" not in message:
        message["protocol"] = 1
    _round_trip(type_, message)


requests = st.one_of(
    st.builds(hello_request, st.integers(1, 2**53 - 1), st.text(max_size=20), st.text(max_size=10)),
    st.builds(reset_request, st.integers(1, 2**53 - 1), st.integers(0, 2**53 - 1)),
    st.builds(clock_request, st.integers(1, 2**53 - 1), st.integers(0, 2**53 - 1)),
    st.builds(
        call_request,
        st.integers(1, 2**53 - 1),
        st.text(min_size=1, max_size=20),
        st.dictionaries(st.text(max_size=8), json_values, max_size=4),
    ),
    st.builds(bye_request, st.integers(1, 2**53 - 1)),
)


@FUZZ
@given(requests)
def test_built_requests_match_their_schema_and_round_trip(request):
    assert validate_message(request, request["type"], "request") is None
    line = encode(request)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    line.decode("ascii")  # ASCII-safe whatever the strings hold
    assert parse_line(line) == json.loads(line)
    assert json.loads(line) == request or any(isinstance(v, float) for v in _leaves(request))


def _leaves(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(v)
    else:
        yield value
