"""The exploration's own Hypothesis test (``stateful.exploration_test``): a
``@given`` test whose examples are runs of steps, a span per step led by the
choice to stop, so that Hypothesis shrinks a failing run to its fewest
steps; and enum arguments drawn as one primitive choice that picks what the
schema's strategy (``st.sampled_from`` of its values, simplest first) would pick."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from hypothesis import HealthCheck, Verbosity
from hypothesis import settings as Settings
from hypothesis.internal.conjecture.data import ConjectureData

from conformance.engine.loaded_specs import load_spec_once
from conformance.engine.schema_draws import from_schema
from conformance.engine.stateful import _schema_drawer, exploration_test
from conformance.specs import bundled_specs
from statemachines.tools.limits import strip_hints

pytestmark = pytest.mark.hypothesis  # drives Hypothesis: tests/hypothesis_marker.py


def _settings(examples: int) -> Settings:
    return Settings(
        max_examples=examples,
        deadline=None,
        database=None,
        verbosity=Verbosity.quiet,
        suppress_health_check=list(HealthCheck),
    )


class _Broken(Exception):
    pass


def _runs(fails_after=None):
    """An example that records the values of its steps, and fails once it has
    seen ``fails_after`` steps with a value of 3 or more."""
    runs: list[list[int]] = []

    class Example:
        def __init__(self):
            self.values: list[int] = []
            runs.append(self.values)
            self.torn_down = False

        def step(self, value):
            self.values.append(value)
            if fails_after is not None and sum(v >= 3 for v in self.values) >= fails_after:
                raise _Broken(list(self.values))

        def teardown(self):
            self.torn_down = True

    return runs, Example


def _draw(data):
    return data.draw_integer(0, 9)


def test_every_example_runs_between_one_step_and_the_step_count():
    runs, example = _runs()
    test = exploration_test(example, _draw, step_count=7, settings=_settings(40), key="t", seed=3)
    test()
    assert len(runs) >= 20
    assert all(1 <= len(values) <= 7 for values in runs)
    assert max(len(values) for values in runs) == 7  # examples run to the step count


def test_a_failing_run_shrinks_to_its_fewest_steps_and_smallest_values():
    runs, example = _runs(fails_after=2)
    test = exploration_test(example, _draw, step_count=30, settings=_settings(200), key="t", seed=5)
    with pytest.raises(_Broken) as raised:
        test()
    # two steps of value 3: the steps that did not matter deleted, the values lowered
    assert raised.value.args[0] == [3, 3]


def test_the_same_seed_draws_the_same_runs():
    first, example = _runs()
    exploration_test(example, _draw, step_count=10, settings=_settings(15), key="t", seed=11)()
    again, example = _runs()
    exploration_test(example, _draw, step_count=10, settings=_settings(15), key="t", seed=11)()
    assert first == again


def _enum_schemas():
    out = []
    for bundled in bundled_specs():
        spec = load_spec_once(str(bundled.path))
        for op, operation in spec.operations.items():
            for prop, schema in ((operation.args_schema or {}).get("properties") or {}).items():
                if isinstance(schema, dict) and not schema.get("x-draw") and ("enum" in schema or "const" in schema):
                    out.append((f"{bundled.name}: {op}.{prop}", strip_hints(schema)))
    return out


ENUMS = _enum_schemas()


_EXPLORE = textwrap.dedent("""\
    import hashlib, json, sys
    if sys.argv[1] == "with":
        import constants_here  # a module of the user's, full of numbers and names
    from conformance.engine.runner import RunConfig, prepare
    from conformance.engine.stateful import run_stateful
    from conformance.specs import resolve_spec

    prepared = prepare(RunConfig(spec_path=resolve_spec("thread-jobs"), profile="quick", seed=4, report_dir=None))
    calls = []
    call = prepared.session.call
    prepared.session.call = lambda op, args, **kw: calls.append([op, args]) or call(op, args, **kw)
    outcome = run_stateful(prepared.spec, prepared.session, profile="quick", seed=4, capabilities={})
    print(outcome.verdict, outcome.steps, hashlib.sha256(json.dumps(calls, sort_keys=True).encode()).hexdigest())
    """)


@pytest.mark.slow
def test_the_same_seed_explores_the_same_whatever_else_the_process_loaded(tmp_path):
    # Hypothesis sometimes draws constants found in the source of the modules a
    # process has loaded; the exploration does not, so the command line, a pytest
    # session and a worker that ran other tests all explore a seed the same way.
    (tmp_path / "constants_here.py").write_text(
        f"NUMBERS = {list(range(300))}\nNAMES = {[f't{n}' for n in range(60)]}\n", encoding="utf-8"
    )
    (tmp_path / "explore.py").write_text(_EXPLORE, encoding="utf-8")
    runs = [
        subprocess.run(
            [sys.executable, str(tmp_path / "explore.py"), which],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
        )
        for which in ("without", "with")
    ]
    for done in runs:
        assert done.returncode == 0 and done.stdout.startswith("pass "), done.stderr
    assert runs[0].stdout == runs[1].stdout  # the same steps, calls and arguments


def test_the_bundled_specs_have_enum_arguments():
    assert len(ENUMS) >= 3, ENUMS


@pytest.mark.parametrize(
    "schema",
    [s for _, s in ENUMS] + [{"enum": [3, 1, "a", None]}, {"const": "x"}],
    ids=[n for n, _ in ENUMS] + ["mixed", "const"],
)
def test_an_enum_is_one_choice_picking_what_the_schema_strategy_picks(schema):
    drawer, strategy = _schema_drawer(schema), from_schema(schema)
    values = schema.get("enum", [schema.get("const")])
    seen = []
    for index in range(len(values)):
        ours, theirs = ConjectureData.for_choices([index]), ConjectureData.for_choices([index])
        value = drawer(ours)
        assert value == theirs.draw(strategy)
        assert [n.value for n in ours.nodes] == [n.value for n in theirs.nodes]
        seen.append(value)
    assert sorted(map(repr, seen)) == sorted(map(repr, values))  # every value can be drawn


def test_a_failing_exploration_shrinks_without_hypothesiss_line_tracing(monkeypatch):
    """Hypothesis's explain phase traces every line each shrinking example
    runs (a trace function on every line, before Python 3.12), which made
    shrinking two to three times slower; the kit never prints its explanation."""
    from hypothesis import Phase
    from hypothesis.core import StateForActualGivenExecution

    from conformance.engine.runner import RunConfig, run_conformance
    from conformance.engine.stateful import phases_without_explain
    from conformance.mutants import load_mutants
    from conformance.specs import resolve_spec

    assert phases_without_explain(tuple(Phase)) == tuple(p for p in Phase if p is not Phase.explain)
    assert phases_without_explain((Phase.explicit, Phase.reuse)) == (Phase.explicit, Phase.reuse)
    traced = []
    should_trace = StateForActualGivenExecution._should_trace  # Hypothesis supports patching it
    monkeypatch.setattr(
        StateForActualGivenExecution, "_should_trace", lambda self: traced.append(should_trace(self)) or traced[-1]
    )
    mutant = load_mutants(load_spec_once(resolve_spec("thread-jobs")).implementations["mutants"])[
        "inspect_cross_thread"
    ]
    report = run_conformance(
        RunConfig(
            spec_path="thread-jobs",
            adapter_factory=mutant.factory,
            scenarios=False,
            profile="quick",
            seed=1,
            report_dir=None,
            max_failures=1,
        )
    )
    assert report["stateful"]["verdict"] == "fail", report["stateful"]
    assert traced and not any(traced), traced
