"""Answers checked against the spec's schemas: the compiled subset
(conformance/engine/answer_schemas.py) agrees with jsonschema exactly, and
every schema of the bundled specs is compiled."""

import copy
import json

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

from conformance.adapters.json_values import MAX_DEPTH, is_plain_answer, json_problem
from conformance.engine.answer_schemas import AnswerSchema, compile_subset, json_equal
from conformance.engine.loaded_specs import load_spec_once
from conformance.engine.schema_draws import UnsupportedSchema, from_schema
from conformance.specs import bundled_specs

pytestmark = pytest.mark.hypothesis  # drives Hypothesis: tests/hypothesis_marker.py


def _bundled_schemas():
    out = []
    for bundled in bundled_specs():
        name, spec = bundled.name, load_spec_once(str(bundled.path))
        out += [(f"{name}: {op} result", o.result_schema) for op, o in spec.operations.items() if o.result_schema]
        out += [(f"{name}: effect {e}", s.schema) for e, s in spec.effects.items()]
    return out


SCHEMAS = _bundled_schemas()

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(-2, 2, allow_nan=False)
    | st.sampled_from([0.0, 1.0, "", "a", "running", "completed", "job-1", "é", "x" * 5]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["job_id", "status", "jobs", "effect", "thread_id", "kind", "text", "x"]), inner, max_size=4
        )
    ),
    max_leaves=12,
)


def test_every_bundled_schema_is_compiled():
    assert SCHEMAS, "no bundled schemas found"
    missing = [label for label, schema in SCHEMAS if compile_subset(schema) is None]
    assert not missing, f"checked by jsonschema alone (slow): {missing}"


def _mutations(value):
    """The value, and copies with one part changed: a key dropped, a value of another kind."""
    yield value
    if isinstance(value, dict):
        for key in list(value)[:6]:
            dropped = dict(value)
            del dropped[key]
            yield dropped
            for other in (None, 1, "x", True, [], {}, 1.5, -1):
                changed = dict(value)
                changed[key] = other
                yield changed
            for inner in _mutations(value[key]):
                if inner is not value[key]:
                    changed = dict(value)
                    changed[key] = inner
                    yield changed
    elif isinstance(value, list) and value:
        yield value[1:]
        yield value + [value[0]]
        yield [None] + value[1:]


def _valid_examples(schema, n: int = 12) -> list:
    """Values the kit's schema strategy (engine/schema_draws.py) draws from the schema (none where
    it uses a keyword the strategy does not draw, such as $ref, or where it cannot satisfy it, or
    for the few large schemas it takes a minute to give up on: their valid answers are checked
    by every run of the bundled references)."""
    found: list = []
    if len(json.dumps(schema)) > 1500:
        return found

    try:
        strategy = from_schema(schema)
    except UnsupportedSchema:
        return found

    @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(strategy)
    def draw(value):
        found.append(value)

    try:
        draw()
    except Unsatisfiable:
        pass
    return found


@pytest.mark.parametrize("label,schema", SCHEMAS, ids=[label for label, _ in SCHEMAS])
def test_the_compiled_subset_agrees_with_jsonschema_on_each_bundled_schema(label, schema):
    fast, full, answer = compile_subset(schema), jsonschema.Draft202012Validator(schema), AnswerSchema(schema)
    checked = {True: 0, False: 0}
    examples = _valid_examples(schema)
    others: list = []  # random JSON values, drawn with a fixed seed

    @settings(max_examples=60, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(other=json_values)
    def random_values(other):
        others.append(other)

    random_values()
    for value in [*(m for e in examples for m in _mutations(e)), *others]:
        expected = full.is_valid(value)
        assert fast(value) == expected, (label, value)
        assert (answer.first_error(value) is None) == expected, (label, value)
        checked[expected] += 1
    assert checked[False], checked  # the invalid verdict was exercised
    if examples:  # valid values could be drawn: the valid verdict was exercised too
        assert checked[True], checked


KEYWORD_SCHEMAS = [
    {"type": "integer"},
    {"type": ["string", "null"]},
    {"type": "number", "minimum": 0, "exclusiveMaximum": 2},
    {"enum": [1, "a", None, [1], {"a": True}]},
    {"const": True},
    {"const": 1},
    {"const": {"a": [1, 2]}},
    {"type": "string", "minLength": 1, "maxLength": 2, "pattern": "^a"},
    {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 2, "uniqueItems": True},
    {"contains": {"const": "a"}},
    {"allOf": [{"type": "object"}, {"required": ["a"]}]},
    {"anyOf": [{"type": "string"}, {"type": "integer"}]},
    {"oneOf": [{"type": "number"}, {"type": "integer"}]},
    {"not": {"type": "null"}},
    {"properties": {"a": {"type": "integer"}}, "additionalProperties": False},
    {"properties": {"a": {}}, "additionalProperties": {"type": "string"}, "required": ["a"]},
    {"type": "object", "description": "annotations only", "title": "t", "format": "date-time"},
    True,
    False,
]
EDGE_VALUES = [
    None,
    True,
    False,
    0,
    1,
    1.0,
    1.5,
    2,
    -1,
    "",
    "a",
    "ab",
    "abc",
    "b",
    [],
    [1],
    [1, 1],
    [1, 1.0],
    [True, 1],
    ["a"],
    [1, 2, 3],
    {},
    {"a": 1},
    {"a": True},
    {"a": 1, "b": "x"},
    {"a": [1, 2]},
    {"b": 2},
    {"a": 1.0},
]


@pytest.mark.parametrize("schema", KEYWORD_SCHEMAS, ids=[str(s)[:60] for s in KEYWORD_SCHEMAS])
def test_each_compiled_keyword_agrees_with_jsonschema_at_its_edges(schema):
    fast, full = compile_subset(schema), jsonschema.Draft202012Validator(schema)
    assert fast is not None
    for value in EDGE_VALUES:
        assert fast(value) == full.is_valid(value), (schema, value)


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#/definitions/a"},
        {"if": {"type": "string"}},
        {"items": [{}]},
        {"prefixItems": [{}], "items": {}},
        {"patternProperties": {"a": {}}},
        {"type": "float"},
        {"contains": {}, "minContains": 2},
        {"minimum": "1"},
    ],
)
def test_anything_outside_the_subset_is_left_to_jsonschema(schema):
    assert compile_subset(schema) is None
    assert AnswerSchema(schema).compiled is False


def test_json_equality_is_json_schemas():
    assert json_equal(1, 1.0) and json_equal([1, {"a": 2}], [1.0, {"a": 2.0}])
    assert not json_equal(True, 1) and not json_equal(False, 0) and not json_equal([True], [1])
    assert not json_equal("1", 1) and not json_equal([], {}) and not json_equal({"a": 1}, {"a": 1, "b": 2})


@settings(max_examples=200, deadline=None)
@given(value=json_values)
def test_the_answer_walk_passes_exactly_what_the_careful_walk_passes(value):
    assert is_plain_answer(value) == (json_problem(value) is None)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 2**63, {1: "a"}, "\ud800", b"x", {"a": ("t",)}])
def test_the_answer_walk_refuses_what_json_cannot_carry(bad):
    assert not is_plain_answer({"result": {"v": [bad]}})
    assert json_problem({"result": {"v": [bad]}}) is not None


def test_the_answer_walk_leaves_deep_nesting_to_the_careful_walk():
    deep = inner = []
    for _ in range(MAX_DEPTH + 5):
        inner.append([])
        inner = inner[0]
    assert not is_plain_answer(deep)
    assert json_problem(deep) is not None
    shallow = copy.deepcopy([[[1]]])
    assert is_plain_answer(shallow)
