"""Follow a spec's scenarios on its model alone, without an implementation.

Spec authors' tools need to know what each scenario exercises (which
transitions it fires, which errors it raises, which policies act) and what
the model predicts along the way. This runs every scenario against the model
under every parameter set the spec names (its defaults and each profile).
Where the model would read a value the implementation chooses
(``observed(...)``) a fresh placeholder stands in, and ``check`` steps (which
judge such choices) are skipped: the walk follows the spec's own logic only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import StatemachinesError
from ..load.params import resolve_parameters
from ..load.scenario import AdvanceStep, CallStep, ConcurrentStep, RepeatStep, render
from ..load.source import list_index
from ..load.spec import Scenario, Spec
from ..model import steps as S
from ..model.matchers import Matcher
from ..model.model import Model, Prediction

__all__ = ["ScenarioWalk", "StandInModel", "walk_scenarios", "parameter_sets", "scenario_operations", "MAX_WALK_STEPS"]

MAX_WALK_STEPS = 20_000  # calls one scenario may make on the model (a runaway `repeat` stops here)


@dataclass
class ScenarioWalk:
    """What one scenario did on the model under one parameter set."""

    scenario: str
    parameters: str  # "defaults" or "profile <name>"
    skipped: str | None = None  # why the scenario does not apply under these parameters
    problem: str | None = None  # why the walk stopped early (its coverage is then partial)
    operations: set = field(default_factory=set)
    transitions: set = field(default_factory=set)  # "src -trigger-> dest"
    states: set = field(default_factory=set)
    outcomes: set = field(default_factory=set)  # "operation: kind" or "operation: ok"
    policies: set = field(default_factory=set)  # "<policy>.<event>" (see _DryModel)
    trace: list = field(default_factory=list)  # predictions, for comparing two versions of a spec


def parameter_sets(spec: Spec) -> list[tuple[str, dict]]:
    """The spec's defaults, then each profile's values."""
    out = [("defaults", spec.default_parameters())]
    for name in spec.profiles:
        values, problems = resolve_parameters(spec, name, {})
        if not problems:
            out.append((f"profile {name}", values))
    return out


def scenario_operations(steps: list) -> set[str]:
    names: set[str] = set()
    for step in steps:
        if isinstance(step, CallStep):
            names.add(step.operation)
        elif isinstance(step, ConcurrentStep):
            names.update(call.operation for call in step.calls)
        elif isinstance(step, RepeatStep):
            names |= scenario_operations(step.steps)
    return names


def _skip_check(model: Model, step: S.Check, frame: dict, out: Prediction) -> None:
    """Checks judge the implementation's own choices; stand-ins would fail them."""


class StandInModel(Model):
    """The model driven without an implementation: what the implementation
    would choose (an observed value: a generated id, a path) is a stand-in
    from ``_invent``, and the checks that judge those choices are skipped."""

    def _invent(self) -> str:
        raise NotImplementedError

    def _predict(self, operation: str, args: dict, observation: dict | None):
        self._stood_in: dict = {}  # one answer has one value at a path: the same stand-in each time it is read
        return super()._predict(operation, args, observation)

    def _stand_in(self, where: tuple):
        stood_in = getattr(self, "_stood_in", None)
        if stood_in is None:
            return self._invent()
        if where not in stood_in:
            stood_in[where] = self._invent()
        return stood_in[where]

    def _observed(self, path: str):
        return self._stand_in(("result", path))

    def _observed_effect(self, effect: str, field_name: str, where: dict | None = None):
        return self._stand_in(("effect", effect, field_name, repr(sorted((where or {}).items()))))

    _STEP = {**Model._STEP, S.Check: _skip_check}


class _DryModel(StandInModel):
    """The model with numbered stand-ins, for a dry run of the scenarios."""

    def __init__(self, spec: Spec, params: dict):
        super().__init__(spec, params)
        self.invented = 0

    def _invent(self) -> str:
        self.invented += 1
        return f"dry-run-{self.invented}"


def _plain(value: Any) -> Any:
    if isinstance(value, Matcher):
        return str(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _pick(response: dict, target: str, invent) -> Any:
    """A saved value from the prediction; one the model leaves to the
    implementation (it predicts no such value) is a placeholder."""
    node: Any = response
    for part in target.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and list_index(part, len(node)) is not None:
            node = node[int(part)]
        else:
            return invent()
    return node


class _Stop(Exception):
    pass


class _Walker:
    def __init__(self, model: _DryModel, walk: ScenarioWalk):
        self.model, self.walk, self.calls = model, walk, 0

    def run(self, steps: list, env: dict) -> None:
        for step in steps:
            if isinstance(step, CallStep):
                self.call(step, env)
            elif isinstance(step, AdvanceStep):
                ms = step.ms if isinstance(step.ms, int) else int(render(step.ms, env))
                prediction = self.model.advance(self.model.now + ms)
                self.walk.trace.append({"advance_ms": ms, "effects": _plain(prediction.effects)})
            elif isinstance(step, RepeatStep):
                times = step.times if isinstance(step.times, int) else int(render(step.times, env))
                for i in range(times):
                    if step.var:
                        env[step.var] = i
                    self.run(step.steps, env)
            elif isinstance(step, ConcurrentStep):
                for call in step.calls:  # one interleaving: the order written
                    self.call(call, env)

    def call(self, step: CallStep, env: dict) -> None:
        self.calls += 1
        if self.calls > MAX_WALK_STEPS:
            raise _Stop(f"more than {MAX_WALK_STEPS} calls")
        args = render(step.args, env)
        prediction = self.model.predict(step.operation, args)
        response = {"effects": _plain(prediction.effects)}
        if prediction.error is not None:
            response["error"] = prediction.error
        else:
            response["result"] = _plain(prediction.result)
        self.walk.trace.append({"call": step.operation, "args": _plain(args), **response})
        for name, target in step.save.items():
            env[name] = _pick(response, target, self.model._invent)


def _walk(spec: Spec, scenario: Scenario, label: str, params: dict) -> ScenarioWalk:
    walk = ScenarioWalk(scenario.id, label)
    if scenario.assumes is not None and not scenario.assumes.evaluate_bool(
        {"params": params}, role="a scenario's `assumes`"
    ):
        walk.skipped = f"assumes {scenario.assumes.source}"
        return walk
    absent = sorted(scenario_operations(scenario.steps) - spec.offered_operations(params))
    if absent:
        walk.skipped = f"calls {', '.join(absent)}, not offered"
        return walk
    model = _DryModel(spec, params)
    model.reset(0)
    try:
        _Walker(model, walk).run(scenario.steps, {"params": params})
    except _Stop as stop:
        walk.problem = str(stop)
    except (StatemachinesError, KeyError, TypeError, ValueError, AttributeError) as exc:
        walk.problem = f"{type(exc).__name__}: {exc}" if not isinstance(exc, StatemachinesError) else str(exc)
    counts = model.coverage.counts
    walk.operations = set(counts["operations"])
    walk.transitions = set(counts["transitions"])
    walk.states = set(counts["states"])
    walk.outcomes = set(counts["outcomes"])
    walk.policies = set(counts["policies"])
    return walk


def walk_scenarios(spec: Spec, parameter_sets_: list[tuple[str, dict]] | None = None) -> list[ScenarioWalk]:
    """Every scenario under every parameter set (defaults and profiles, unless given)."""
    sets = parameter_sets_ if parameter_sets_ is not None else parameter_sets(spec)
    return [_walk(spec, scenario, label, params) for scenario in spec.scenarios for label, params in sets]
