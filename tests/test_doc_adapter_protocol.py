"""docs/adapter-protocol.md's examples are messages the kit accepts: each
hello and hello answer fits the protocol's schema, names a bundled spec, and
declares a version of the spec's major number (what the handshake requires),
so a reader who copies one is not refused at the handshake."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conformance.adapters.stdio_protocol import major_version, validate_message
from conformance.engine.loaded_specs import load_spec_once
from conformance.specs import resolve_spec

DOC = Path(__file__).resolve().parent.parent / "docs" / "adapter-protocol.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _json_values(body: str) -> list:
    """The JSON values of a block, one after another (a request and its answer)."""
    decoder, values, at = json.JSONDecoder(), [], 0
    while body[at:].strip():
        at += len(body[at:]) - len(body[at:].lstrip())
        value, at = decoder.raw_decode(body, at)
        values.append(value)
    return values


def _messages(text: str) -> list[dict]:
    """Every JSON message of the doc: ```json blocks, and the `>`/`<` lines of a session."""
    found = []
    for info, body in FENCE.findall(text):
        if info == "json":
            found += _json_values(body)
        elif not info:
            found += [json.loads(line[2:]) for line in body.splitlines() if line.startswith(("> {", "< {"))]
    return found


MESSAGES = _messages(DOC.read_text(encoding="utf-8"))
HELLOS = [m for m in MESSAGES if m.get("type") == "hello"]
ANSWERS = [m for m in MESSAGES if "specs" in m]


def _bundled_major(spec_id: str) -> str:
    return major_version(load_spec_once(resolve_spec(spec_id)).version)


def test_the_examples_are_found():
    assert len(HELLOS) >= 2 and len(ANSWERS) >= 2


@pytest.mark.parametrize("hello", HELLOS, ids=lambda m: json.dumps(m["spec"]))
def test_a_hello_names_a_bundled_spec_at_its_major_version(hello):
    assert validate_message(hello, "hello", "request") is None
    assert major_version(hello["spec"]["version"]) == _bundled_major(hello["spec"]["id"]), hello


@pytest.mark.parametrize("answer", ANSWERS, ids=lambda m: json.dumps(m["specs"]))
def test_a_hello_answer_declares_a_version_the_kit_accepts(answer):
    assert validate_message(answer, "hello") is None
    for entry in answer["specs"]:
        assert major_version(entry["version"]) == _bundled_major(entry["id"]), (
            f"{entry}: the kit refuses another major version than its bundled {entry['id']}'s"
        )
