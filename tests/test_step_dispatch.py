"""The compiler and the model dispatch operation steps by tables keyed by the
same step kinds: every kind a spec may write is compiled to its class
(steps.STEP_CLASSES) and every such class is interpreted, nothing more."""

import typing
from pathlib import Path

from statemachines import Model, load_spec
from statemachines.model import steps as S
from statemachines.model.compile_steps import StepCompiler
from statemachines.tools.dryrun import _DryModel

SPEC_DIR = Path(__file__).resolve().parent.parent / "spec"
MAIN_SPECS = sorted(p for p in SPEC_DIR.glob("*.yaml") if ".scenarios." not in p.name)


def every_step(steps: list):
    for step in steps:
        yield step
        if isinstance(step, S.When):
            yield from every_step(step.then + step.otherwise)
        if isinstance(step, S.ForEach):
            yield from every_step(step.body)


def test_the_compiler_builds_exactly_the_step_kinds():
    assert set(StepCompiler._STEP) == set(S.STEP_KINDS)


def test_the_model_interprets_exactly_the_compiled_step_classes():
    assert set(Model._STEP) == set(S.STEP_CLASSES.values())
    assert set(_DryModel._STEP) == set(Model._STEP)


def test_each_kind_compiles_to_its_own_class():
    for kind, build in StepCompiler._STEP.items():
        returns = typing.get_type_hints(build)["return"]
        classes = (set(typing.get_args(returns)) or {returns}) - {type(None)}  # X, or X | None
        assert classes == {S.STEP_CLASSES[kind]}, kind


def test_every_step_kind_is_a_key_of_the_spec_format():
    from statemachines.load.schema_check import spec_format_schema

    text = str(spec_format_schema())
    missing = [kind for kind in S.STEP_KINDS if f"'{kind}'" not in text]
    assert not missing, f"step kinds the spec format's schema never names: {missing}"


def test_the_bundled_specs_compile_only_to_step_classes_the_model_runs():
    seen = set()
    for path in MAIN_SPECS:
        spec = load_spec(path)
        step_lists = [op.steps for op in spec.operations.values()] + [spec.on_clock]
        for steps in step_lists:
            for step in every_step(steps):
                assert type(step) in Model._STEP, (path, step)
                seen.add(type(step))
    assert len(seen) > len(S.STEP_CLASSES) // 2  # the bundled specs use most kinds
