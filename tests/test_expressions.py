"""Spec expressions: CEL compiled safely; the Python fast paths agree with CEL exactly."""
import pytest
from hypothesis import given, settings, strategies as st

from statemachines import ExpressionError, compile_expression
from statemachines.expressions import fields_used, text_of_size

values = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(["a", "b", "running"]),
                   st.lists(st.sampled_from(["a", "b", "running"]), max_size=3))
records = st.fixed_dictionaries({"status": values, "flag": values, "id": values})


def both(source, env):
    expr = compile_expression(source, "test")
    try:
        expected = ("ok", expr.program.execute(env))
    except Exception as exc:  # noqa: BLE001 - CEL's verdict, whatever it is
        expected = ("error", type(exc).__name__)
    try:
        got = ("ok", expr.evaluate(env))
    except ExpressionError:
        got = ("error", expected[1] if expected[0] == "error" else "ExpressionError")
    return expected, got


@settings(max_examples=300, deadline=None)
@given(job=records, wanted=values)
def test_fast_paths_agree_with_cel(job, wanted):
    env = {"job": job, "wanted": wanted}
    for source in ("job.status in wanted", "!job.flag", "{'s': job.status, 'i': job.id}", "job.status"):
        expected, got = both(source, env)
        assert got == expected, (source, env)


def test_no_python_eval_and_clear_errors():
    sneaky = compile_expression("__import__('os').system('true')", "spec.yaml:3")
    assert "system()" in sneaky.unknown_names({"args"})  # the spec check rejects it by name
    with pytest.raises(ExpressionError, match="Undefined variable or function"):
        sneaky.evaluate({})  # and CEL never reaches Python
    with pytest.raises(ExpressionError, match="spec.yaml:4"):
        compile_expression("a ==", "spec.yaml:4")


def test_fields_used_and_text_of_size():
    assert fields_used("job.a && job.b == 1", "job") == {"a", "b"}
    assert fields_used("record(job)", "job") is None
    text = text_of_size(25, 4)
    assert len(text.encode()) == 25 and text.count("\n") + 1 == 4
