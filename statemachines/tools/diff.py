"""What changed between two versions of a spec, and what it does to implementations.

Each change names what changed (a state, transition, operation's arguments,
result, errors or steps, a parameter's default or bounds, a profile, policy,
effect, invariant or scenario), says whether it makes the spec *stricter*
(an implementation that conformed may now fail), *looser* (every conforming
implementation still conforms, and more may) or *neutral*, and lists the
scenarios it touches: those that name it directly, those whose walk on the
model takes it, and those whose predicted outcomes differ between the two
versions (scenarios are followed on each model with ``dryrun``). The
suggested version bump follows: major for anything stricter, minor for
looser, patch for neutral.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..load.spec import Spec
from .behaviour import BehaviourDiff, diff_behaviour
from .dryrun import ScenarioWalk, parameter_sets, scenario_operations, walk_scenarios
from .lint import parameters_read
from .search_budget import SearchBudget

__all__ = [
    "Change",
    "SpecDiff",
    "diff_specs",
    "schema_direction",
    "render_diff_markdown",
    "render_behaviour_markdown",
    "STRICTER",
    "LOOSER",
    "NEUTRAL",
]

STRICTER, LOOSER, NEUTRAL = "stricter", "looser", "neutral"
_BUMP = {STRICTER: "major", LOOSER: "minor", NEUTRAL: "patch"}
_RANK = {"none": 0, "patch": 1, "minor": 2, "major": 3}


@dataclass
class Change:
    area: str  # state, transition, operation, parameter, profile, policy, effect, invariant, scenario, ...
    subject: str  # e.g. "retention_limit", "start_job.args", "running -finish-> completed"
    what: str  # human description: "default 20 -> 5"
    impact: str  # stricter | looser | neutral
    why: str  # why that impact
    scenarios: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "area": self.area,
            "subject": self.subject,
            "what": self.what,
            "impact": self.impact,
            "why": self.why,
            "scenarios": self.scenarios,
        }


@dataclass
class SpecDiff:
    old: dict
    new: dict
    changes: list[Change]
    predictions: list[dict]  # scenarios whose predicted outcome differs: {scenario, parameters, step, old, new}
    behaviour: BehaviourDiff | None = None  # both models over one scope (None: not searched)

    @property
    def bump(self) -> str:
        """The smallest version bump these changes call for."""
        return max((_BUMP[c.impact] for c in self.changes), key=_RANK.__getitem__, default="none")

    @property
    def declared_bump(self) -> str:
        """The bump the new file's version makes over the old one."""
        try:
            a, b = ([int(x) for x in v.split(".")] for v in (self.old["version"], self.new["version"]))
        except (ValueError, AttributeError):
            return "none"
        if b[0] != a[0]:
            return "major" if b[0] > a[0] else "none"
        if b[1] != a[1]:
            return "minor" if b[1] > a[1] else "none"
        return "patch" if b[2] > a[2] else "none"

    @property
    def version_ok(self) -> bool:
        return _RANK[self.declared_bump] >= _RANK[self.bump]

    def suggested_version(self) -> str:
        try:
            major, minor, patch = (int(x) for x in self.old["version"].split("."))
        except (ValueError, AttributeError):
            return self.old.get("version") or "?"
        return {
            "major": f"{major + 1}.0.0",
            "minor": f"{major}.{minor + 1}.0",
            "patch": f"{major}.{minor}.{patch + 1}",
            "none": self.old["version"],
        }[self.bump]

    def to_dict(self) -> dict:
        return {
            "old": self.old,
            "new": self.new,
            "bump": self.bump,
            "declared_bump": self.declared_bump,
            "suggested_version": self.suggested_version(),
            "version_ok": self.version_ok,
            "changes": [c.to_dict() for c in self.changes],
            "predictions": self.predictions,
            "behaviour": None if self.behaviour is None else self.behaviour.to_dict(),
        }


# -- JSON Schema direction ---------------------------------------------------
_IGNORED = {"description", "title", "examples", "default", "$comment"}
_LOWER_BOUNDS = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
_UPPER_BOUNDS = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")


def _combine(directions) -> str:
    found = {d for d in directions if d != "same"}
    if not found:
        return "same"
    return found.pop() if len(found) == 1 else "changed"


def _as_set(value) -> set:
    return {json.dumps(v, sort_keys=True) for v in (value if isinstance(value, list) else [value])}


def _const_as_enum(schema: dict) -> dict:
    """``const: x`` is ``enum: [x]``, so const -> enum comparisons have a direction."""
    if "const" in schema and "enum" not in schema:
        out = {k: v for k, v in schema.items() if k != "const"}
        out["enum"] = [schema["const"]]
        return out
    return schema


def schema_direction(old: Any, new: Any) -> str:
    """How ``new`` relates to ``old`` as a set of accepted values: "same",
    "wider" (accepts more), "narrower" (accepts less) or "changed" (neither,
    or a keyword this comparison does not reason about). ``x-`` hints ignored."""
    if old == new:
        return "same"
    if not isinstance(old, dict) or not isinstance(new, dict):
        return "changed"
    old, new = _const_as_enum(old), _const_as_enum(new)
    out = []
    keys = {k for k in set(old) | set(new) if k not in _IGNORED and not k.startswith("x-")}
    for key in keys:
        a, b = old.get(key), new.get(key)
        if a != b:
            keyword = _KEYWORD_DIRECTIONS.get(key)
            out.append("changed" if keyword is None else keyword(a, b, old))
    return _combine(out)


def _dropped_or_added(a: Any, b: Any) -> str | None:
    """A constraint dropped accepts more, one added accepts less; None when both are there."""
    if a is None or b is None:
        return "wider" if b is None else "narrower"
    return None


def _values_direction(a: Any, b: Any, _old: dict) -> str:
    """``type`` and ``enum``: more allowed values accept more."""
    if (dropped := _dropped_or_added(a, b)) is not None:
        return dropped
    sa, sb = _as_set(a), _as_set(b)
    return "wider" if sb > sa else "narrower" if sb < sa else "changed"


def _bound_direction(lower: bool) -> Callable[[Any, Any, dict], str]:
    """A lower bound that goes down, or an upper bound that goes up, accepts more."""

    def direction(a: Any, b: Any, _old: dict) -> str:
        if (dropped := _dropped_or_added(a, b)) is not None:
            return dropped
        return "wider" if (b < a) == lower else "narrower"

    return direction


def _required_direction(a: Any, b: Any, _old: dict) -> str:
    sa, sb = set(a or []), set(b or [])
    return "narrower" if sb > sa else "wider" if sb < sa else "changed"


def _unique_items_direction(_a: Any, b: Any, _old: dict) -> str:
    return "narrower" if b else "wider"


def _additional_properties_direction(a: Any, b: Any, _old: dict) -> str:
    if a is False or b is False:
        return "narrower" if b is False else "wider"
    return schema_direction(a or {}, b or {})


def _items_direction(a: Any, b: Any, _old: dict) -> str:
    return schema_direction(a or {}, b or {})


def _properties_direction(a: Any, b: Any, old: dict) -> str:
    """Each property's own direction; a property added or removed accepts
    more where the object was closed to others, less where it was open."""
    a, b = a or {}, b or {}
    closed = old.get("additionalProperties") is False
    out = []
    for prop in set(a) | set(b):
        if prop in a and prop in b:
            out.append(schema_direction(a[prop], b[prop]))
        elif prop in b:  # a new property: accepted where it was refused, constrained where it was free
            out.append("wider" if closed else "narrower")
        else:
            out.append("narrower" if closed else "wider")
    return _combine(out)


# How a change of one keyword changes what a schema accepts (any other keyword: "changed").
_KEYWORD_DIRECTIONS: dict[str, Callable[[Any, Any, dict], str]] = {
    "type": _values_direction,
    "enum": _values_direction,
    **{key: _bound_direction(lower=True) for key in _LOWER_BOUNDS},
    **{key: _bound_direction(lower=False) for key in _UPPER_BOUNDS},
    "required": _required_direction,
    "uniqueItems": _unique_items_direction,
    "additionalProperties": _additional_properties_direction,
    "items": _items_direction,
    "properties": _properties_direction,
}


# -- the comparison ----------------------------------------------------------------
def _identity(spec: Spec) -> dict:
    return {"id": spec.id, "version": spec.version, "title": spec.title, "path": spec.path}


def _strip_prose(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_prose(v) for k, v in value.items() if k not in ("description", "summary", "title")}
    if isinstance(value, list):
        return [_strip_prose(v) for v in value]
    return value


def _fmt(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _transition_key(t) -> tuple:
    return (t.trigger, tuple(sorted(t.sources)), t.dest)


def _transition_label(key: tuple) -> str:
    trigger, sources, dest = key
    return f"{'|'.join(sources)} -{trigger}-> {dest}"


class _Differ:
    def __init__(self, old: Spec, new: Spec):
        self.old, self.new = old, new
        self.changes: list[Change] = []
        sets_old, sets_new = dict(parameter_sets(old)), dict(parameter_sets(new))
        self.labels = [label for label in sets_new if label in sets_old]
        self.walks_old = self._walks(old, sets_old)
        self.walks_new = self._walks(new, sets_new)
        self.predictions = self._prediction_changes()
        self.changed_ids = {p["scenario"] for p in self.predictions}
        self.scenario_ids = [s.id for s in new.scenarios] + [
            s.id for s in old.scenarios if s.id not in {x.id for x in new.scenarios}
        ]

    @staticmethod
    def _walks(spec: Spec, sets: dict) -> dict[tuple[str, str], ScenarioWalk]:
        return {(w.scenario, w.parameters): w for w in walk_scenarios(spec, list(sets.items()))}

    def add(self, area, subject, what, impact, why, scenarios=()) -> None:
        order = {sid: i for i, sid in enumerate(self.scenario_ids)}
        self.changes.append(
            Change(area, subject, what, impact, why, sorted(set(scenarios), key=lambda s: order.get(s, len(order))))
        )

    # which scenarios relate to what -------------------------------------------------
    def _calling(self, op: str) -> set[str]:
        return {sc.id for spec in (self.old, self.new) for sc in spec.scenarios if op in scenario_operations(sc.steps)}

    def _walked(self, test) -> set[str]:
        return {
            w.scenario
            for walks in (self.walks_old, self.walks_new)
            for w in walks.values()
            if w.skipped is None and test(w)
        }

    def _reading_param(self, name: str) -> set[str]:
        """Scenarios whose own text reads the parameter, or that call an operation
        (or move the clock past steps) reading it, and whose prediction changed."""
        direct, gated = set(), set()
        for spec in (self.old, self.new):
            for sc in spec.scenarios:
                raw = _raw_scenario(spec, sc.id)
                if name in parameters_read({"steps": raw.get("steps")}):
                    direct.add(sc.id)
                if name in parameters_read({"assumes": raw.get("assumes")}):
                    gated.add(sc.id)  # counts only when it now applies where it did not, or the reverse
        readers = {op for spec in (self.old, self.new) for op in spec.operations if name in _op_reads(spec, op)}
        clock = any(name in _clock_reads(spec) for spec in (self.old, self.new))
        related = {
            sc.id
            for spec in (self.old, self.new)
            for sc in spec.scenarios
            if scenario_operations(sc.steps) & readers or (clock and _advances(sc.steps))
        }
        return direct | ((related | gated) & self.changed_ids)

    def _prediction_changes(self) -> list[dict]:
        out = []
        for (sid, label), new_walk in self.walks_new.items():
            old_walk = self.walks_old.get((sid, label))
            if old_walk is None:
                continue
            if bool(old_walk.skipped) != bool(new_walk.skipped):
                out.append(
                    {
                        "scenario": sid,
                        "parameters": label,
                        "step": 0,
                        "old": {"skipped": old_walk.skipped} if old_walk.skipped else {"applies": True},
                        "new": {"skipped": new_walk.skipped} if new_walk.skipped else {"applies": True},
                    }
                )
                continue
            if old_walk.skipped:
                continue
            for i, (a, b) in enumerate(zip(old_walk.trace, new_walk.trace)):
                if a != b:
                    out.append({"scenario": sid, "parameters": label, "step": i + 1, "old": a, "new": b})
                    break
            else:
                if len(old_walk.trace) != len(new_walk.trace):
                    n = min(len(old_walk.trace), len(new_walk.trace))
                    out.append(
                        {
                            "scenario": sid,
                            "parameters": label,
                            "step": n + 1,
                            "old": old_walk.trace[n] if n < len(old_walk.trace) else None,
                            "new": new_walk.trace[n] if n < len(new_walk.trace) else None,
                        }
                    )
        return out

    # the areas -----------------------------------------------------------------------
    def run(self) -> list[Change]:
        self.identity()
        self.parameters()
        self.profiles()
        self.states()
        self.transitions()
        self.operations()
        self.policies()
        self.effects()
        self.invariants()
        self.scenarios()
        self.exploration()
        return self.changes

    def identity(self) -> None:
        o, n = self.old, self.new
        if o.id != n.id:
            self.add("spec", "id", f"id {o.id} -> {n.id}", STRICTER, "implementations and reports name the spec by id")
        for name in ("title", "description"):
            if getattr(o, name) != getattr(n, name):
                self.add("spec", name, f"{name} changed", NEUTRAL, "prose only")

    def parameters(self) -> None:
        old, new = self.old.parameters, self.new.parameters
        for name in sorted(set(old) | set(new)):
            a, b = old.get(name), new.get(name)
            if a is None:
                self.add(
                    "parameter",
                    name,
                    f"added (default {_fmt(new[name].default)}, {new[name].bounds()})",
                    NEUTRAL,
                    "a new parameter changes nothing by itself; what reads it is compared separately",
                )
                continue
            if b is None:
                self.add(
                    "parameter",
                    name,
                    "removed",
                    STRICTER,
                    "implementations that declare it are now refused",
                    self._reading_param(name),
                )
                continue
            scenarios = self._reading_param(name)
            if a.type != b.type:
                self.add(
                    "parameter",
                    name,
                    f"type {a.type} -> {b.type}",
                    STRICTER,
                    "declared values of the old type are refused",
                    scenarios,
                )
            if a.default != b.default:
                self.add(
                    "parameter",
                    name,
                    f"default {_fmt(a.default)} -> {_fmt(b.default)}",
                    STRICTER,
                    "an implementation that follows the default (no profile, nothing declared) must now "
                    f"behave as {name} = {_fmt(b.default)}",
                    scenarios,
                )
            bounds = schema_direction(_param_schema(a), _param_schema(b))
            if bounds != "same":
                impact = LOOSER if bounds == "wider" else STRICTER
                self.add(
                    "parameter",
                    name,
                    f"bounds {a.bounds()} -> {b.bounds()}",
                    impact,
                    "more values may be declared"
                    if impact == LOOSER
                    else "values implementations could declare before are now refused",
                    scenarios,
                )
            if a.fixed != b.fixed:
                impact = STRICTER if b.fixed else LOOSER
                self.add(
                    "parameter",
                    name,
                    "now fixed" if b.fixed else "no longer fixed",
                    impact,
                    "implementations may no longer declare another value"
                    if b.fixed
                    else "implementations may now declare their own value",
                    scenarios,
                )
            if a.description != b.description:
                self.add("parameter", name, "description changed", NEUTRAL, "prose only")

    def profiles(self) -> None:
        old, new = self.old.profiles, self.new.profiles
        for name in sorted(set(old) | set(new)):
            label = f"profile {name}"
            affected = {p["scenario"] for p in self.predictions if p["parameters"] == label}
            if name not in old:
                self.add("profile", name, "added", NEUTRAL, "no implementation declares it yet")
            elif name not in new:
                self.add("profile", name, "removed", STRICTER, "implementations declaring it are now refused")
            else:
                a, b = old[name].parameters, new[name].parameters
                for key in sorted(set(a) | set(b)):
                    if a.get(key, "∅") != b.get(key, "∅"):
                        what = (
                            f"sets {key} = {_fmt(b[key])}"
                            if key not in a
                            else f"no longer sets {key} (was {_fmt(a[key])})"
                            if key not in b
                            else f"{key} {_fmt(a[key])} -> {_fmt(b[key])}"
                        )
                        self.add(
                            "profile",
                            name,
                            what,
                            STRICTER,
                            f"implementations of profile {name} must now behave differently",
                            affected,
                        )
                if old[name].description != new[name].description:
                    self.add("profile", name, "description changed", NEUTRAL, "prose only")

    def states(self) -> None:
        old, new = self.old.lifecycle.states, self.new.lifecycle.states
        for name in sorted(set(old) | set(new)):
            touched = self._walked(lambda w, n=name: n in w.states)
            if name not in old:
                self.add("state", name, "added", STRICTER, "implementations must now report and handle it", touched)
            elif name not in new:
                self.add("state", name, "removed", STRICTER, "implementations that enter it now diverge", touched)
            else:
                a, b = old[name], new[name]
                for flag in ("initial", "terminal"):
                    if getattr(a, flag) != getattr(b, flag):
                        self.add(
                            "state",
                            name,
                            f"{flag}: {getattr(a, flag)} -> {getattr(b, flag)}",
                            STRICTER,
                            "what the model predicts around this state changes",
                            touched,
                        )
        if self.old.lifecycle.field != self.new.lifecycle.field:
            self.add(
                "lifecycle",
                "field",
                f"{self.old.lifecycle.field} -> {self.new.lifecycle.field}",
                STRICTER,
                "records report their state under another field",
            )

    def transitions(self) -> None:
        def index(spec):
            return {_transition_key(t): t for t in spec.lifecycle.transitions}

        old, new = index(self.old), index(self.new)
        for key in sorted(set(old) | set(new)):
            trigger = key[0]
            touched = self._walked(lambda w, k=key: any(f"{s} -{k[0]}-> {k[2]}" in w.transitions for s in k[1]))
            related = self._walked(lambda w, t=trigger: any(f" -{t}-> " in x for x in w.transitions))
            label = _transition_label(key)
            if key not in old:
                self.add(
                    "transition",
                    label,
                    "added",
                    STRICTER,
                    "the model now lets records move this way",
                    touched | (related & self.changed_ids),
                )
            elif key not in new:
                self.add(
                    "transition",
                    label,
                    "removed",
                    STRICTER,
                    "implementations that still move this way diverge",
                    touched | (related & self.changed_ids),
                )
            else:
                ga, gb = (t.guard.source if t.guard else None for t in (old[key], new[key]))
                if ga != gb:
                    self.add(
                        "transition",
                        label,
                        f"guard {ga!r} -> {gb!r}",
                        STRICTER,
                        "the model predicts this move in other cases",
                        touched | (related & self.changed_ids),
                    )

    def operations(self) -> None:
        old, new = self.old.operations, self.new.operations
        for name in sorted(set(old) | set(new)):
            callers = self._calling(name)
            if name not in old:
                self.add("operation", name, "added", STRICTER, "implementations must now offer it", callers)
            elif name not in new:
                self.add("operation", name, "removed", LOOSER, "the kit no longer calls it", callers)
            else:
                self._operation(name, callers)
        if _strip_prose(self.old.raw.get("on_clock")) != _strip_prose(self.new.raw.get("on_clock")):
            self.add(
                "operation",
                "on_clock",
                "clock steps changed",
                STRICTER,
                "what time must produce changed",
                {sc.id for spec in (self.old, self.new) for sc in spec.scenarios if _advances(sc.steps)}
                & self.changed_ids,
            )

    def _operation(self, name: str, callers: set[str]) -> None:
        """The changes of an operation both versions have."""
        a, b = self.old.operations[name], self.new.operations[name]
        raw_a, raw_b = (self.old.raw.get("operations") or {})[name], (self.new.raw.get("operations") or {})[name]
        self._operation_args(name, raw_a, raw_b, callers)
        self._operation_result(name, callers)
        if a.errors != b.errors:
            added, removed = sorted(set(b.errors) - set(a.errors)), sorted(set(a.errors) - set(b.errors))
            what = "errors " + ", ".join([f"+{k}" for k in added] + [f"-{k}" for k in removed])
            self.add(
                "operation",
                f"{name}.errors",
                what,
                NEUTRAL,
                "the declared list alone predicts nothing; its steps decide which error is expected",
                callers,
            )
        if _strip_prose(raw_a.get("steps")) != _strip_prose(raw_b.get("steps")):
            self.add(
                "operation",
                f"{name}.steps",
                "steps changed",
                STRICTER,
                "the model's prediction for this operation changed",
                callers,
            )
        if (a.assumes.source if a.assumes else None) != (b.assumes.source if b.assumes else None):
            self.add(
                "operation",
                f"{name}.assumes",
                "offered under other parameters",
                STRICTER,
                "some profiles must now offer it (or no longer may)",
                callers,
            )
        if a.summary != b.summary:
            self.add("operation", name, "summary changed", NEUTRAL, "prose only")

    def _operation_args(self, name: str, raw_a: dict, raw_b: dict, callers: set[str]) -> None:
        args = schema_direction(self.old.operations[name].args_schema, self.new.operations[name].args_schema)
        if args != "same":
            impact = LOOSER if args == "narrower" else STRICTER
            self.add(
                "operation",
                f"{name}.args",
                f"argument schema {_direction_words(args)}",
                impact,
                "the kit sends only arguments implementations already accept"
                if impact == LOOSER
                else "the kit may now send arguments implementations never had to accept",
                callers,
            )
        elif _strip_prose(raw_a.get("args")) != _strip_prose(raw_b.get("args")):
            self.add(
                "operation",
                f"{name}.args",
                "argument generation hints (x-draw) changed",
                NEUTRAL,
                "what the exploration draws, not what is allowed",
                callers,
            )

    def _operation_result(self, name: str, callers: set[str]) -> None:
        result = schema_direction(self.old.operations[name].result_schema, self.new.operations[name].result_schema)
        if result != "same":
            impact = LOOSER if result == "wider" else STRICTER
            self.add(
                "operation",
                f"{name}.result",
                f"result schema {_direction_words(result)}",
                impact,
                "more results are accepted" if impact == LOOSER else "results accepted before may now be refused",
                callers,
            )

    def policies(self) -> None:
        old, new = self.old.policies, self.new.policies
        for name in sorted(set(old) | set(new)):
            acted = self._walked(lambda w, n=name: any(e.startswith(n + ".") for e in w.policies))
            appliers = {
                op for spec in (self.old, self.new) for op in spec.operations if name in _policies_applied(spec, op)
            }
            related = {sid for op in appliers for sid in self._calling(op)} & self.changed_ids
            if name not in old:
                self.add(
                    "policy", name, f"added ({new[name].kind})", STRICTER, "the model now enforces it", acted | related
                )
            elif name not in new:
                self.add(
                    "policy",
                    name,
                    f"removed ({old[name].kind})",
                    STRICTER,
                    "implementations that still enforce it now diverge",
                    acted | related,
                )
            else:
                a, b = old[name], new[name]
                if a.kind != b.kind or _strip_prose(a.config) != _strip_prose(b.config):
                    changed = sorted(k for k in set(a.config) | set(b.config) if a.config.get(k) != b.config.get(k))
                    what = (
                        "kind " + f"{a.kind} -> {b.kind}"
                        if a.kind != b.kind
                        else "; ".join(f"{k} {_fmt(a.config.get(k))} -> {_fmt(b.config.get(k))}" for k in changed)
                    )
                    self.add("policy", name, what, STRICTER, "the model enforces it differently", acted | related)
                elif a.description != b.description:
                    self.add("policy", name, "description changed", NEUTRAL, "prose only")

    def effects(self) -> None:
        old, new = self.old.effects, self.new.effects
        for name in sorted(set(old) | set(new)):
            seen = self._walked_effect(name)
            if name not in old:
                self.add(
                    "effect",
                    name,
                    "added",
                    NEUTRAL,
                    "declared only; emit steps (compared with the steps) decide when it is expected",
                    seen,
                )
            elif name not in new:
                self.add(
                    "effect", name, "removed", NEUTRAL, "declared only; the steps that emitted it changed too", seen
                )
            else:
                direction = schema_direction(old[name].schema, new[name].schema)
                if direction != "same":
                    impact = LOOSER if direction == "wider" else STRICTER
                    self.add(
                        "effect",
                        name,
                        f"schema {_direction_words(direction)}",
                        impact,
                        "more effect payloads are accepted"
                        if impact == LOOSER
                        else "effect payloads accepted before may now be refused",
                        seen,
                    )

    def _walked_effect(self, name: str) -> set[str]:
        def emits(w):
            return any(e.get("effect") == name for step in w.trace for e in step.get("effects") or [])

        return self._walked(emits)

    def invariants(self) -> None:
        old = {i.id: i for i in self.old.invariants}
        new = {i.id: i for i in self.new.invariants}
        for name in sorted(set(old) | set(new)):
            a, b = old.get(name), new.get(name)
            # Observed invariants judge the implementation; the others check the model's own consistency.
            observed = (a or new[name]).kind == "observed" or (b is not None and b.kind == "observed")
            if a is None:
                self.add(
                    "invariant",
                    name,
                    "added",
                    STRICTER if observed else NEUTRAL,
                    "checked on what implementations do" if observed else "checks the model's own consistency",
                )
            elif b is None:
                self.add(
                    "invariant",
                    name,
                    "removed",
                    LOOSER if a.kind == "observed" else NEUTRAL,
                    "no longer checked on implementations"
                    if a.kind == "observed"
                    else "checked the model's own consistency",
                )
            elif (a.kind, a.check.source if a.check else None, a.observed) != (
                b.kind,
                b.check.source if b.check else None,
                b.observed,
            ):
                self.add(
                    "invariant",
                    name,
                    "check changed",
                    STRICTER if observed else NEUTRAL,
                    "checked differently on what implementations do"
                    if observed
                    else "checks the model's own consistency",
                )

    def scenarios(self) -> None:
        # A scenario runs in lockstep with the model: an implementation that matches the model passes
        # it unless its written expectations contradict the model, which is the spec's own error.
        old = {s.id: s for s in self.old.scenarios}
        new = {s.id: s for s in self.new.scenarios}
        for sid in [s.id for s in self.old.scenarios if s.id not in new] + [s.id for s in self.new.scenarios]:
            if sid not in old:
                self.add(
                    "scenario",
                    sid,
                    f"added ({new[sid].title})",
                    NEUTRAL,
                    "a new case of what the model already demands",
                    [sid],
                )
            elif sid not in new:
                self.add(
                    "scenario",
                    sid,
                    f"removed ({old[sid].title})",
                    NEUTRAL,
                    "one case fewer; the model still demands the behaviour",
                    [sid],
                )
            else:
                ra, rb = _raw_scenario(self.old, sid), _raw_scenario(self.new, sid)
                if _strip_prose(ra) != _strip_prose(rb):
                    self.add(
                        "scenario",
                        sid,
                        "steps or expectations changed",
                        NEUTRAL,
                        "another case of what the model demands",
                        [sid],
                    )
                elif ra != rb:
                    self.add("scenario", sid, "title or description changed", NEUTRAL, "prose only", [sid])

    def exploration(self) -> None:
        if _strip_prose(self.old.raw.get("exploration")) != _strip_prose(self.new.raw.get("exploration")):
            self.add(
                "exploration",
                "exploration",
                "changed",
                NEUTRAL,
                "what the stateful exploration tries, not what the spec demands",
            )


def _param_schema(p) -> dict:
    schema: dict = {"type": p.type}
    if p.enum is not None:
        schema["enum"] = list(p.enum)
    if p.minimum is not None:
        schema["minimum"] = p.minimum
    if p.maximum is not None:
        schema["maximum"] = p.maximum
    return schema


def _direction_words(direction: str) -> str:
    return {"wider": "widened (accepts more)", "narrower": "narrowed (accepts less)", "changed": "changed"}[direction]


def _raw_scenario(spec: Spec, sid: str) -> dict:
    return next((s for s in spec.raw.get("scenarios") or [] if isinstance(s, dict) and s.get("id") == sid), {})


def _advances(steps) -> bool:
    from ..load.scenario import AdvanceStep, RepeatStep

    return any(isinstance(s, AdvanceStep) or (isinstance(s, RepeatStep) and _advances(s.steps)) for s in steps)


def _policies_applied(spec: Spec, op: str) -> set[str]:
    text = json.dumps((spec.raw.get("operations") or {}).get(op, {}).get("steps"))
    return set(re.findall(r'"policy":\s*"([^"]+)"', text))


def _op_reads(spec: Spec, op: str) -> set[str]:
    raw = (spec.raw.get("operations") or {}).get(op, {})
    policies = {name: (spec.raw.get("policies") or {}).get(name) for name in _policies_applied(spec, op)}
    return parameters_read({"operations": {op: raw}, "policies": policies})


def _clock_reads(spec: Spec) -> set[str]:
    expiring = {n: p for n, p in (spec.raw.get("policies") or {}).items() if (p or {}).get("kind") == "expire"}
    return parameters_read({"on_clock": spec.raw.get("on_clock"), "policies": expiring})


def diff_specs(
    old: Spec, new: Spec, behaviour: bool = False, time_limit: float | None = None, budget: SearchBudget | None = None
) -> SpecDiff:
    """The changes between two versions; with ``behaviour``, also the
    behaviours possible under one and not the other (``behaviour.py``,
    within ``budget``, or ``time_limit`` seconds)."""
    differ = _Differ(old, new)
    changes = differ.run()
    found = diff_behaviour(old, new, time_limit=time_limit, budget=budget) if behaviour else None
    return SpecDiff(_identity(old), _identity(new), changes, differ.predictions, found)


# -- Markdown ----------------------------------------------------------------------
_ICON = {STRICTER: "🔴 stricter", LOOSER: "🟢 looser", NEUTRAL: "⚪ neutral"}


def _cell(text: Any) -> str:
    return " ".join(str(text).replace("|", "\\|").replace("<", "&lt;").split())


def _step_text(step: dict | None) -> str:
    if step is None:
        return "(no such step)"
    if "skipped" in step:
        return f"skipped ({step['skipped']})"
    if "applies" in step:
        return "runs"
    if "advance_ms" in step:
        return f"advance {step['advance_ms']} ms -> effects {_fmt(step.get('effects'))}"
    outcome = f"error {_fmt(step['error'])}" if "error" in step else f"result {_fmt(step.get('result'))}"
    text = f"{step.get('call')}({_fmt(step.get('args'))}) -> {outcome}"
    if step.get("effects"):
        text += f", effects {_fmt(step['effects'])}"
    return text if len(text) <= 240 else text[:239] + "…"


def _call_text(step: dict) -> str:
    if "advance_ms" in step:
        return f"advance {step['advance_ms']} ms"
    return f"{step['call']}({', '.join(f'{k}={_fmt(v)}' for k, v in step['args'].items())})"


def render_behaviour_markdown(found: BehaviourDiff | None) -> list[str]:
    """The behaviour section: each behaviour's sentence and its shortest sequence."""
    if found is None:
        return []
    lines = ["### Behaviour that changed", ""]
    reach = (
        f"stopped at {found.stopped}"
        if found.stopped
        else f"complete within depth {found.depth}"
        if found.complete
        else "incomplete"
    )
    lines.append(
        f"Both versions' models over the new version's check scope, in lockstep: {found.states} pairs of "
        f"states, {found.seconds:.1f} s; {reach}. Each behaviour below is possible under one version and not "
        "the other, with its shortest operation sequence (`gen-N`: the id an earlier call chose)."
    )
    lines += [f"- scope: {_cell(note)}" for note in found.notes]
    lines += [f"- ⚠️ {_cell(problem)}" for problem in found.problems]
    if found.exhausted:
        lines.append(f"- ⚠️ the search ran out of {_cell(found.exhausted)}: the list below is partial")
    lines.append("")
    if not found.behaviours:
        lines += ["No behaviour within the scope differs between the two versions.", ""]
        return lines
    for i, b in enumerate(found.behaviours, 1):
        steps = " → ".join(f"`{_cell(_call_text(step))}`" for step in (x.as_dict() for x in b.path))
        lines.append(f"{i}. **{_cell(b.sentence)}.**  ")
        lines.append(f"   {len(b.path)} step(s): {steps}")
    lines.append("")
    return lines


def render_diff_markdown(diff: SpecDiff, max_predictions: int = 30) -> str:
    old, new = diff.old, diff.new
    lines = [f"## Spec change: {new['id']} {old['version']} → {new['version']}", ""]
    if not diff.changes:
        lines += ["No change that affects implementations or scenarios.", ""]
        return "\n".join(lines + render_behaviour_markdown(diff.behaviour))
    counts = {k: sum(1 for c in diff.changes if c.impact == k) for k in (STRICTER, LOOSER, NEUTRAL)}
    lines.append(
        f"**{len(diff.changes)} change(s):** {counts[STRICTER]} stricter, {counts[LOOSER]} looser, "
        f"{counts[NEUTRAL]} neutral. **Suggested version bump: {diff.bump}** "
        f"(`{old['version']}` → `{diff.suggested_version()}`)."
    )
    if not diff.version_ok:
        lines.append("")
        said = "the same version" if diff.declared_bump == "none" else f"a {diff.declared_bump} bump"
        lines.append(
            f"> ⚠️ The new file says `{new['version']}` ({said}); these changes call for a "
            f"{diff.bump} bump: `{diff.suggested_version()}`."
        )
    lines += ["", "| Change | Impact | Why | Affected scenarios |", "|---|---|---|---|"]
    for c in diff.changes:
        scenarios = ", ".join(c.scenarios) if c.scenarios else "—"
        lines.append(
            f"| {c.area} `{_cell(c.subject)}`: {_cell(c.what)} | {_ICON[c.impact]} | {_cell(c.why)} "
            f"| {_cell(scenarios)} |"
        )
    lines.append("")
    if diff.predictions:
        lines += [
            "<details><summary>Scenarios whose predicted outcome changes "
            f"({len({p['scenario'] for p in diff.predictions})})</summary>",
            "",
        ]
        by_scenario: dict[str, list[dict]] = {}
        for p in diff.predictions:
            by_scenario.setdefault(p["scenario"], []).append(p)
        for sid, entries in list(by_scenario.items())[:max_predictions]:
            p = entries[0]
            where = ", ".join(e["parameters"] for e in entries)
            step = "whether it runs" if p["step"] == 0 else f"step {p['step']}"
            lines.append(
                f"- **{sid}** ({where}), {step}: was `{_cell(_step_text(p['old']))}`, "
                f"now `{_cell(_step_text(p['new']))}`"
            )
        if len(by_scenario) > max_predictions:
            lines.append(f"- … and {len(by_scenario) - max_predictions} more scenarios (see `--json`)")
        lines += ["", "</details>", ""]
    return "\n".join(lines + render_behaviour_markdown(diff.behaviour))
