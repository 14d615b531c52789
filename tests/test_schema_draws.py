"""Values drawn from JSON Schemas through Hypothesis's public strategies
(engine/schema_draws.py): every drawn value is valid, enums are drawn
simplest first, and a keyword outside the supported part is refused by
name, for a spec when the exploration is built, never mid-run."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance.engine.schema_draws import UnsupportedSchema, enum_values, from_schema, simplest_first
from conformance.engine.stateful import Explorer
from statemachines import SpecError, load_spec, resolve_parameters

pytestmark = pytest.mark.hypothesis  # drives Hypothesis: tests/hypothesis_marker.py

ROOT = Path(__file__).resolve().parent.parent

SCHEMAS = [
    {"type": "string", "maxLength": 12},
    {"type": "string", "minLength": 1},
    {"type": "string", "pattern": "^job-[0-9]+$", "maxLength": 8},
    {"type": "integer", "minimum": 0, "maximum": 100000},
    {"type": "number", "minimum": 0, "exclusiveMaximum": 2},
    {"type": ["string", "null"]},
    {"type": "boolean"},
    {"enum": [3, 1, "a", None]},
    {"const": {"a": [1, 2]}},
    {"type": "array", "items": {"enum": ["running", "failed"]}, "maxItems": 6, "uniqueItems": True},
    {"type": "array", "items": {"type": "integer"}, "contains": {"const": 7}, "maxItems": 3},
    {
        "type": "object",
        "properties": {"id": {"type": "string", "minLength": 1}, "n": {"type": "integer"}},
        "required": ["id"],
        "additionalProperties": False,
    },
    {"oneOf": [{"type": "object", "properties": {"ok": {"const": True}}, "required": ["ok"]}, {"type": "null"}]},
    {"allOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]}, {"required": ["b"]}]},
    {"properties": {"type": {"const": "string"}}, "required": ["type"], "title": "no type, an object"},
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=[str(i) for i in range(len(SCHEMAS))])
def test_every_drawn_value_is_valid(schema):
    validator = jsonschema.Draft202012Validator(schema)

    @settings(max_examples=40, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(from_schema(schema))
    def draw(value):
        assert validator.is_valid(value), value

    draw()


def test_enums_are_drawn_simplest_first():
    assert simplest_first([3, 1, "bb", "a", None, -1, True, False, [1], {"a": 1}, 0.5]) == [
        None,
        False,
        True,
        -1,
        1,
        3,
        0.5,
        "a",
        "bb",
        [1],
        {"a": 1},
    ]
    assert enum_values({"type": "boolean"}) == [False, True]
    assert enum_values({"enum": ["b", "a", 1], "type": "string"}) == ["a", "b"]  # only the valid ones
    assert enum_values({"type": "string"}) is None


@pytest.mark.parametrize(
    "schema,keyword,where",
    [
        ({"type": "string", "not": {"const": ""}}, "not", "schema"),
        ({"properties": {"a": {"$ref": "#/definitions/x"}}}, "$ref", "schema/properties/a"),
        ({"type": "array", "items": {"if": {}}}, "if", "schema/items"),
    ],
)
def test_a_keyword_it_cannot_draw_is_refused_by_name_and_place(schema, keyword, where):
    with pytest.raises(UnsupportedSchema) as caught:
        from_schema(schema)
    message = str(caught.value)
    assert message.startswith(f"{where}: ") and repr(keyword) in message
    assert "x-draw: {pool: NAME}" in message  # how to fix it


def test_a_spec_argument_it_cannot_draw_is_a_spec_error_when_the_exploration_is_built():
    spec = load_spec(ROOT / "spec" / "thread-jobs.yaml")  # a fresh copy, changed here alone
    params, _ = resolve_parameters(spec, None, None)
    op = next(name for name, o in spec.operations.items() if "result" in (o.args_schema.get("properties") or {}))
    spec.operations[op].args_schema["properties"]["result"] = {"type": "string", "not": {"const": "x"}}
    with pytest.raises(SpecError) as caught:
        Explorer(spec, params, concurrent=False)
    text = str(caught.value)
    assert f"operation {op}, argument result" in text and "'not'" in text


def test_the_bundled_specs_arguments_are_all_drawable():
    for path in sorted((ROOT / "spec").glob("*.yaml")):
        if path.name.endswith(".scenarios.yaml"):
            continue
        spec = load_spec(path)
        params, _ = resolve_parameters(spec, None, None)
        explorer = Explorer(spec, params, concurrent=True)
        for op in spec.offered_operations(params):
            explorer.args_plan(op)  # every argument's drawer builds


def test_a_drawn_string_is_the_public_text_strategy():
    # the exploration's strings are st.text of UTF-8 encodable characters, sized by the schema
    assert repr(from_schema({"type": "string", "maxLength": 3})) == repr(
        st.text(st.characters(codec="utf-8"), min_size=0, max_size=3)
    )
