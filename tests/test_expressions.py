"""Spec expressions: CEL compiled safely; the Python fast paths agree with CEL exactly."""

import dataclasses
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statemachines import ExpressionError, compile_expression
from statemachines.language.cel_subset import NotSubset, compile_subset
from statemachines.language.expressions import Expression, fields_used, text_of_size

values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from(["a", "b", "running"]),
    st.lists(st.sampled_from(["a", "b", "running"]), max_size=3),
)
records = st.fixed_dictionaries({"status": values, "flag": values, "id": values})


def both(source, env):
    expr = compile_expression(source, "test")
    try:
        expected = ("ok", expr.program.execute(env))
    except Exception as exc:
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


# ------------------------------------------------ the CEL subset (statemachines/language/cel_subset.py)
def _tagged(value):
    """A value with every item's kind spelled out: True and 1, 1 and 1.0 differ."""
    if isinstance(value, list):
        return ["list", [_tagged(v) for v in value]]
    if isinstance(value, dict):
        return ["map", sorted((str(k), _tagged(v)) for k, v in value.items())]
    return [type(value).__name__, repr(value) if isinstance(value, float) else value]  # nan equals nan


def _cel_and_subset(source, env, functions=None):
    """(CEL's result, the subset's), or None when the subset leaves these values to CEL."""
    expr = compile_expression(source, "test")
    subset = compile_subset(source, {})
    assert subset is not None, f"{source} is not in the subset"
    try:
        got = ("ok", _tagged(subset(env, functions)))
    except NotSubset:
        return None
    cel_only = dataclasses.replace(expr, subset=None, fast=None, path=None)
    try:
        expected = ("ok", _tagged(cel_only.evaluate(env, functions)))
    except ExpressionError:
        expected = ("error",)
    return expected, got


SUBSET_SOURCES = (
    "a == b",
    "a != b",
    "a < b",
    "a >= b",
    "a in c",
    "!(a in c)",
    "a + b",
    "a - b",
    "a * b",
    "a / b",
    "a % b",
    "-a",
    "!a",
    "a && b",
    "a || b",
    "a ? b : c",
    "size(a)",
    "a.size()",
    "string(a)",
    "has(m.a)",
    "has(m.z)",
    "m.a",
    "m['a']",
    "c[0]",
    "c[a]",
    "[a, b] == c",
    "{'x': a, 'y': [b]}",
    "c.filter(v, v == a)",
    "c.map(v, [v, a])",
    "c.all(v, v != b)",
    "c.exists(v, v == a)",
    "c.filter(v, v in c).size() <= a",
    "has(m.a) && m.a != null ? m.a : c",
    "m.a == null || b == 'x'",
    "(a + 1) * 2 - b / 3 % 4",
    "'pre-' + string(a) + '-' + string(b)",
    "a in m",
    "9223372036854775807 + a",
    "c + [a]",
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.integers(-(1 << 64), 1 << 64),
    st.sampled_from(["", "a", "x", "é", "running"]),
    st.floats(-2, 2, allow_nan=False),
)
cel_values = st.one_of(
    scalars, st.lists(scalars, max_size=3), st.dictionaries(st.sampled_from(["a", "b", "z"]), scalars, max_size=3)
)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(a=cel_values, b=cel_values, c=cel_values, m=cel_values)
def test_the_cel_subset_agrees_with_cel_on_every_value(a, b, c, m):
    env = {"a": a, "b": b, "c": c, "m": m}
    for source in SUBSET_SOURCES:
        both = _cel_and_subset(source, env)
        if both is not None:
            assert both[1] == both[0], (source, env)


def test_the_cel_subset_leaves_what_it_does_not_know_to_cel():
    for source in (
        "int(a) == 1",
        "a.startsWith('x')",
        "a == 1.5",
        "a == 2u",
        "a == r'x'",
        "a == 'it\\'s'",
        "dyn(a)",
        "a.b.c()",
        "[1, 2].exists_one(v, v == 1)",
    ):
        assert compile_expression(source, "test").subset is None, source
    expr = compile_expression("fill(t, {'n': a}) + known(a)", "test")  # a model function, handed over at evaluation
    assert expr.subset is not None
    with pytest.raises(ExpressionError):
        expr.evaluate({"t": "{n}", "a": "x"}, {"known": lambda key: 1})  # string + int: CEL's error, not Python's
    assert expr.evaluate({"t": "{n}-", "a": "x"}, {"known": lambda key: "k"}) == "x-k"


# async-command drives its tool, a process per call: a smaller exploration than quick's, and its
# racing scenarios run once (their 20 runs evaluate the same expressions again), still evaluate
# every one of its 22 expressions, about 6,000 times in all, in a third of the time.
SMALLER_RUN = {
    "async-command": ({"max_examples": 12, "stateful_step_count": 20}, {"race_runs": 1}),
}


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["thread-jobs", "task-progress", "async-jobs@task-table", "async-command"])
def test_every_expression_of_a_bundled_spec_gives_what_cel_gives(spec, monkeypatch):
    # Every evaluation of a quick run (scenarios and exploration) is done both ways.
    from conformance.engine import stateful
    from conformance.engine.runner import RunConfig, run_conformance

    original = Expression.evaluate
    checked, wrong = [0], []

    def both_ways(self, env, functions=None):
        reference = dataclasses.replace(self, subset=None, fast=None, path=None)
        try:
            expected = ("ok", original(reference, env, functions))
        except ExpressionError as exc:
            expected = ("error", exc)
        if self.subset is not None:
            checked[0] += 1
            try:
                got = ("ok", original(self, env, functions))
            except ExpressionError:
                got = ("error", None)
            if got[0] != expected[0] or (got[0] == "ok" and _tagged(got[1]) != _tagged(expected[1])):
                wrong.append((self.source, self.where, got, expected))
        if expected[0] == "error":
            raise expected[1]
        return expected[1]

    monkeypatch.setattr(Expression, "evaluate", both_ways)
    name, _, profile = spec.partition("@")
    exploration, run = SMALLER_RUN.get(name, ({}, {}))
    monkeypatch.setitem(stateful.PROFILES, "quick", {**stateful.PROFILES["quick"], **exploration})
    report = run_conformance(
        RunConfig(
            spec_path=name,
            profile="quick",
            seed=1,
            report_dir=None,
            adapter_options={"profile": profile} if profile else {},
            **run,
        )
    )
    assert report["verdict"] == "pass", report["verdict"]
    assert checked[0] > 1000 and not wrong, wrong[:5]


def test_the_kit_does_not_load_cels_command_line_until_someone_uses_it():
    # cel's package imports its interactive command line (typer, prompt_toolkit,
    # pygments) on import; the kit never uses it, so it loads only when used.
    code = (
        "import sys, statemachines, conformance.cli\n"
        "assert 'prompt_toolkit' not in sys.modules and 'typer' not in sys.modules, 'loaded at start'\n"
        "assert statemachines.compile_expression('1 + 2', 'test').evaluate({}) == 3\n"
        "import cel, cel.cli\n"
        "assert callable(cel.cli.main) and 'typer' in sys.modules, 'cel.cli loads when used'\n"
        "from cel.cli import app\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_the_cpu_budget_reads_the_clock_lazily_and_still_stops_a_long_evaluation(monkeypatch):
    """Reading a thread's CPU clock is a system call (tens of microseconds under
    load): a small evaluation never reads it, a long one still stops at the
    budget's CPU time."""
    from statemachines.language import expressions

    readings = []
    real = expressions.time.thread_time
    monkeypatch.setattr(expressions.time, "thread_time", lambda: readings.append(1) or real())
    small = compile_expression("size(jobs.filter(j, j.status == 'running')) >= 0", "test")
    assert small.evaluate({"jobs": [{"status": "running"}, {"status": "done"}]}) is True
    assert readings == []

    budget = expressions._Budget(10**9, 0.0)  # no CPU time at all
    ticks = 0
    while not budget.spent and ticks < 1000:
        budget.tick()
        ticks += 1
    assert budget.spent and "CPU time" in budget.why, budget.why
    assert ticks <= 32 and len(readings) <= 2, (ticks, readings)


class _Text(str):
    pass


class _Number(int):
    pass


_INT64 = (-(1 << 63), (1 << 63) - 1)
_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(1 << 64), 1 << 64),
    st.sampled_from([_INT64[0], _INT64[1], _INT64[1] + 1, _Number(3), _Number(1 << 70)]),
    st.floats(allow_nan=False),
    st.text(max_size=3),
    st.builds(_Text, st.text(max_size=2)),
    st.tuples(st.integers()),
)
_nested = st.recursive(
    _leaves,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2) | st.integers(0, 2), inner, max_size=3)
    ),
    max_leaves=12,
)


def _deep(value, levels: int):
    for _ in range(levels):
        value = [value]
    return value


def _judged(check, value) -> bool:
    try:
        check(value)
    except NotSubset:
        return False
    return True


def _exact_as_specified(value, depth=0):
    """What a result must be to be handed back by CEL unchanged (isinstance, as first written)."""
    if isinstance(value, (str, bool, float)) or value is None:
        return
    if depth > 50:
        raise NotSubset()
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise NotSubset()
    elif isinstance(value, list):
        for item in value:
            _exact_as_specified(item, depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise NotSubset()
            _exact_as_specified(item, depth + 1)
    else:
        raise NotSubset()


def _plain_as_specified(value, depth=0):
    """What crosses into a function as the binding would hand it over (as first written)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        ok = True
    elif isinstance(value, int):
        ok = _INT64[0] <= value <= _INT64[1]
    else:
        ok = isinstance(value, (list, dict))
    if not ok or depth > 50:
        raise NotSubset()
    if isinstance(value, list):
        for item in value:
            _plain_as_specified(item, depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise NotSubset()
            _plain_as_specified(item, depth + 1)


@settings(max_examples=400, deadline=None)
@given(value=_nested, levels=st.sampled_from([0, 1, 49, 50, 51, 52]))
def test_the_fast_value_checks_judge_as_their_definitions(value, levels):
    # _exact and _plain walk the built-in types without a call per value; any other type
    # (a str or int subclass, a tuple) and the depth limit are judged as written above.
    from statemachines.language.cel_subset import _exact, _plain

    value = _deep(value, levels)
    assert _judged(_exact, value) == _judged(_exact_as_specified, value)
    assert _judged(_plain, value) == _judged(_plain_as_specified, value)


def test_cels_string_methods_run_as_the_guide_says():
    # validate accepted these names (CEL's string extension) while a run refused
    # them as undefined: the kit now provides them
    env = {"j": "build-0001", "pad": "  a b  "}
    cases = {
        "j.substring(0, size(j) - 1)": "build-000",
        "j.substring(6)": "0001",
        "j.charAt(0) + j.charAt(10)": "b",
        "j.indexOf('-')": 5,
        "j.indexOf('0', 7)": 7,
        "j.indexOf('x')": -1,
        "j.lastIndexOf('0')": 8,
        "j.upperAscii()": "BUILD-0001",
        "'ÉtÉ'.lowerAscii()": "ÉtÉ",
        "j.replace('0', '')": "build-1",
        "j.replace('0', '', 1)": "build-001",
        "j.split('-')": ["build", "0001"],
        "'a-b-c'.split('-', 2)": ["a", "b-c"],
        "'a-b'.split('-', 0)": [],
        "pad.trim()": "a b",
    }
    for source, wanted in cases.items():
        assert compile_expression(source, "test").evaluate(env) == wanted, source
    with pytest.raises(ExpressionError, match="index 99 is out of range for a string of 10 character"):
        compile_expression("j.substring(0, 99)", "spec.yaml:3").evaluate(env)
