"""Prove a spec's own rules before any implementation runs (``check-spec``).

The spec's model is explored breadth first over every state reachable within
a small scope the spec declares (``check.scope``): parameter values, the
values each argument takes (pools, enums, the ids of the records that exist
plus a few unknown ones), clock moves, and bounds on depth, records and
states. Each state is counted once by a canonical form: records, tables,
counters and clock, with the values of symmetric namespaces (each pool, the
record keys, values the implementation would choose) renamed in order of
first appearance, so two states that differ only by which thread or which
job id was used merge.

What it finds, each with the shortest operation sequence that reaches it:
invariants violated, operations whose predicted result or effects break
their declared schemas (or raise an undeclared error kind), steps that fail
to evaluate; and then what was never reached (lifecycle states,
transitions, error kinds, policy acts) and records that can get stuck (in a
non-terminal state from which no sequence within the scope reaches a
terminal one). Where the model would read a value the implementation
chooses, a fresh ``gen-N`` stands in and ``check`` steps are skipped, as in
``dryrun``.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator

from ..errors import EvaluationBudgetError, StatemachinesError
from ..load.spec import Spec
from ..model.model import POLICY_ACTS, Model, Prediction
from .dryrun import StandInModel, _plain
from .limits import EDGE_CLASSES, limit_edges
from .search_budget import CEILINGS, SearchBudget, ceiling_note

__all__ = [
    "CheckFinding",
    "CheckReport",
    "CheckStats",
    "EVERY_STATE_REACHED",
    "Scope",
    "ScopeModel",
    "Transition",
    "canonical_form",
    "check_spec",
    "declared_scope",
    "load_state",
    "save_state",
    "operation_arguments",
    "scenario_yaml",
    "scope_of",
    "search_counts",
]

GENERATED = "gen-"  # prefix of the values that stand in for the implementation's choices
DEFAULT_MAX_DEPTH = 6
DEFAULT_MAX_RECORDS = 3
DEFAULT_MAX_STATES = 200_000
_ABSENT = object()  # an optional argument left out
VIOLATIONS = ("invariant", "result-schema", "effect-schema", "undeclared-error", "step-error", "stuck", "policy")


@dataclass(frozen=True)
class Scope:
    """The small instance a spec is checked on (``check.scope``, then overrides)."""

    parameters: dict
    pools: dict[str, list]
    unknown_keys: tuple = ("unknown",)
    generated: tuple = ()  # stand-ins for values the implementation chooses (default gen-1, gen-2, ...)
    args: dict[str, dict[str, list]] = field(default_factory=dict)
    skip: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()  # "operation.argument": optional arguments tried with their schema's values too
    advance_ms: tuple[int, ...] = ()
    max_depth: int = DEFAULT_MAX_DEPTH
    max_records: int = DEFAULT_MAX_RECORDS
    max_states: int = DEFAULT_MAX_STATES
    declared: bool = True  # False: the spec declares no check.scope (defaults everywhere)
    ceilinged: tuple[str, ...] = ()  # what the spec asked for over the kit's ceilings, and what was searched


@dataclass(frozen=True)
class Transition:
    """One step of a path: an operation call or a clock move."""

    operation: str | None  # None: the clock moves
    args: tuple = ()  # (name, value) pairs, in the schema's order
    advance_ms: int = 0

    def as_dict(self) -> dict:
        if self.operation is None:
            return {"advance_ms": self.advance_ms}
        return {"call": self.operation, "args": dict(self.args)}


@dataclass
class CheckFinding:
    kind: str  # one of VIOLATIONS, or "unreached-state" | "unreached-transition" | "unreached-error" | ...
    subject: str
    message: str
    where: str | None = None  # file:line of the invariant, operation or declaration concerned
    path: list[Transition] = field(default_factory=list)

    @property
    def violation(self) -> bool:
        return self.kind in VIOLATIONS

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"kind": self.kind, "subject": self.subject, "message": self.message}
        out["where"] = self.where
        if self.violation:
            out["path"] = [step.as_dict() for step in self.path]
        return out


@dataclass
class CheckStats:
    states: int = 0
    transitions: int = 0
    depth: int = 0
    seconds: float = 0.0
    complete: bool = True  # every state within the depth bound explored
    closed: bool = True  # no state waited at the depth bound: the reachable states are exhausted
    stopped: str | None = None  # the bound that stopped the exploration
    pruned: int = 0  # successors over max_records, not explored further
    exhausted: str | None = None  # the command's budget that ran out (time, memory, expression cost, a ceiling)

    @property
    def states_per_second(self) -> float:
        return self.states / self.seconds if self.seconds > 0 else 0.0


@dataclass
class CheckReport:
    spec_id: str
    path: str
    scope: Scope
    stats: CheckStats
    findings: list[CheckFinding] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # the scope itself is unusable

    @property
    def violations(self) -> list[CheckFinding]:
        return [f for f in self.findings if f.violation]

    @property
    def unreached(self) -> list[CheckFinding]:
        return [f for f in self.findings if not f.violation]

    def to_dict(self) -> dict:
        stats = self.stats
        return {
            "spec": self.spec_id,
            "path": self.path,
            "scope": {
                "declared": self.scope.declared,
                "parameters": self.scope.parameters,
                "max_depth": self.scope.max_depth,
                "max_records": self.scope.max_records,
                "max_states": self.scope.max_states,
            },
            "states": stats.states,
            "transitions": stats.transitions,
            "depth": stats.depth,
            "seconds": round(stats.seconds, 3),
            "states_per_second": round(stats.states_per_second, 1),
            "complete": stats.complete,
            "closed": stats.closed,
            "stopped": stats.stopped,
            "exhausted": stats.exhausted,
            "ceilinged": list(self.scope.ceilinged),
            "pruned": stats.pruned,
            "problems": list(self.problems),
            "violations": [f.to_dict() for f in self.violations],
            "unreached": [f.to_dict() for f in self.unreached],
        }


# -- the scope ----------------------------------------------------------------
def _int(value: Any, name: str, problems: list[str]) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        problems.append(f"check.scope.{name} must be a non-negative integer, not {value!r}")
        return 0
    return value


def declared_scope(spec: Spec) -> dict:
    """The spec's ``check.scope`` as written ({} when it declares none)."""
    return dict(((spec.raw.get("check") or {}).get("scope")) or {})


_OPTIONS = {"max_depth": "--depth", "max_records": "--max-records", "max_states": "--max-states"}


def _ceilinged(raw: dict, over: dict, problems: list[str], notes: list[str]) -> dict[str, int]:
    """The scope's bounds: the user's overrides as given, the spec's own
    values within the kit's ceilings (search_budget.CEILINGS)."""
    bounds = {}
    defaults = (
        ("max_depth", DEFAULT_MAX_DEPTH),
        ("max_records", DEFAULT_MAX_RECORDS),
        ("max_states", DEFAULT_MAX_STATES),
    )
    for name, default in defaults:
        if name in over:
            bounds[name] = _int(over[name], name, problems)
            continue
        value = _int(raw.get(name, default), name, problems)
        if value > CEILINGS[name]:
            notes.append(ceiling_note(name, value, _OPTIONS[name]))
            value = CEILINGS[name]
        bounds[name] = value
    return bounds


def _few(values: Any, name: str, most: int, notes: list[str]) -> list:
    """A list of values the spec gives (a pool, an argument's values), within ``most``."""
    values = list(values) if isinstance(values, list | tuple) else []
    if len(values) > most:
        notes.append(
            f"check.scope {name} lists {len(values):,} values, over the kit's ceiling of {most} for a received "
            f"spec; searched with the first {most} (name a larger ceiling yourself with --max-values)"
        )
        return values[:most]
    return values


def scope_of(spec: Spec, overrides: dict | None = None, raw: dict | None = None) -> tuple[Scope, list[str]]:
    """The spec's declared scope (or ``raw``, another version's) with
    ``overrides`` (max_depth, max_states, max_records, max_values,
    parameters: the user's) on top, and the problems found in it. What the
    spec asks for beyond the kit's ceilings is cut to them (``ceilinged``)."""
    raw = declared_scope(spec) if raw is None else dict(raw)
    over = dict(overrides or {})
    problems: list[str] = []
    notes: list[str] = []
    most = over.pop("max_values", None) or CEILINGS["values"]
    params = spec.default_parameters()
    params.update(raw.get("parameters") or {})
    params.update(over.pop("parameters", None) or {})
    for name, value in params.items():
        declared = spec.parameters.get(name)
        bad = f"unknown parameter {name}" if declared is None else declared.violation(value)
        if bad:
            problems.append(f"check.scope parameter {name}: {bad}")
    bounds = _ceilinged(raw, over, problems, notes)
    skip = tuple(raw.get("skip") or ())
    problems += [f"check.scope.skip names no operation: {op}" for op in skip if op not in spec.operations]
    pools = {**spec.exploration.pools, **(raw.get("pools") or {})}
    args = {
        op: {arg: _few(v, f"args.{op}.{arg}", most, notes) for arg, v in dict(values).items()}
        for op, values in (raw.get("args") or {}).items()
    }
    scope = Scope(
        parameters=params,
        pools={name: _few(values, f"pool {name}", most, notes) for name, values in pools.items()},
        unknown_keys=tuple(_few(raw.get("unknown_keys", ["unknown"]), "unknown_keys", most, notes)),
        generated=tuple(_few(raw.get("generated") or (), "generated", most, notes)),
        args=args,
        skip=skip,
        optional=tuple(raw.get("optional") or ()),
        advance_ms=tuple(
            _int(ms, "advance_ms", problems) for ms in _few(raw.get("advance_ms") or (), "advance_ms", most, notes)
        ),
        declared=bool(raw),
        ceilinged=tuple(notes),
        **bounds,
    )
    return scope, problems + _unknown_arguments(spec, scope)


def _unknown_arguments(spec: Spec, scope: Scope) -> list[str]:
    """The scope's ``args`` and ``optional`` entries that name no operation or argument."""
    named = [(op, arg) for op, values in scope.args.items() for arg in values]
    named += [(item.partition(".")[0], item.partition(".")[2]) for item in scope.optional]
    problems = []
    for op, arg in named:
        operation = spec.operations.get(op)
        if operation is None:
            problems.append(f"check.scope names no operation: {op}")
        elif arg not in (operation.args_schema.get("properties") or {}):
            problems.append(f"check.scope names no argument {arg} of {op}")
    return sorted(set(problems))


# -- arguments ------------------------------------------------------------------
def _deref(spec: Spec, schema: Any) -> dict:
    """A property's schema with a ``#/definitions/...`` reference followed."""
    seen = 0
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and seen < 20:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema, seen = spec.definitions.get(name, {}), seen + 1
    return schema if isinstance(schema, dict) else {}


def _type_default(schema: dict) -> list | None:
    """One plain value of a schema's type (the scope may name others)."""
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    if kind == "boolean":
        return [False, True]
    if kind == "string":
        return ["a" * max(1, int(schema.get("minLength", 1)))]
    if kind == "integer":
        return [int(schema.get("minimum", 0))]
    if kind == "array":
        return [[]] if int(schema.get("minItems", 0)) == 0 else None
    if kind == "object":
        return [{}]
    return None


def _schema_values(spec: Spec, scope: Scope, schema: dict, keys: list) -> list | None:
    """The values an argument with this schema takes in the scope, or None (no rule gives any)."""
    schema = _deref(spec, schema)
    hint = schema.get("x-draw")
    draw = hint if isinstance(hint, dict) else {}
    if "keys" in draw:
        return keys + [k for k in scope.unknown_keys if k not in keys]
    if "pool" in draw and draw["pool"] in scope.pools:
        return list(scope.pools[draw["pool"]])
    if "const" in schema:
        return [schema["const"]]
    if isinstance(schema.get("enum"), list):
        return list(schema["enum"])
    if isinstance(schema.get("items"), dict) and int(schema.get("minItems", 0)) <= 1:
        items = _schema_values(spec, scope, schema["items"], keys) or []
        return ([[]] if int(schema.get("minItems", 0)) == 0 else []) + [[item] for item in items]
    return _type_default(schema)


def _property_values(spec: Spec, scope: Scope, operation: str, prop: str, schema: dict, keys: list) -> list | None:
    required = prop in (spec.operations[operation].args_schema.get("required") or ())
    declared = scope.args.get(operation, {}).get(prop)
    if declared is not None:
        return list(declared) if required else [_ABSENT, *declared]
    if required:
        return _schema_values(spec, scope, schema, keys)
    if f"{operation}.{prop}" in scope.optional:
        return [_ABSENT, *(_schema_values(spec, scope, schema, keys) or ())]
    return [_ABSENT]


def operation_arguments(spec: Spec, scope: Scope, operation: str, keys: list) -> Iterator[tuple]:
    """Every argument combination of ``operation`` in the scope, given the
    record keys that exist now; each as (name, value) pairs."""
    properties = spec.operations[operation].args_schema.get("properties") or {}
    names, choices = [], []
    for prop, schema in properties.items():
        values = _property_values(spec, scope, operation, prop, schema, keys)
        if values is None:
            raise _ScopeError(f"no values for {operation}.{prop}: name them in check.scope.args.{operation}")
        names.append(prop)
        choices.append(values)
    for combo in itertools.product(*choices):
        yield tuple((n, v) for n, v in zip(names, combo) if v is not _ABSENT)


class _ScopeError(StatemachinesError):
    pass


# -- the model, driven without an implementation -------------------------------------
class ScopeModel(StandInModel):
    """The model with deterministic stand-ins for the implementation's choices."""

    def __init__(self, spec: Spec, params: dict, stand_ins: tuple = ()):
        super().__init__(spec, params)
        self.stand_ins = stand_ins
        self.generated: list[str] = []  # the stand-ins the current call used

    def _invent(self) -> str:
        """The first stand-in that no record has as its key and this call has not used."""
        taken = self.store.records
        for value in self.stand_ins:
            if value not in taken and value not in self.generated:
                break
        else:
            n = 1
            while f"{GENERATED}{n}" in taken or f"{GENERATED}{n}" in self.generated:
                n += 1
            value = f"{GENERATED}{n}"
        self.generated.append(value)
        return value


def save_state(model: Model) -> tuple:
    return (model.now, model.store.copy(), {k: dict(v) for k, v in model.tables.items()}, dict(model.counters))


def load_state(model: Model, snap: tuple) -> None:
    now, store, tables, counters = snap
    model.now, model.store = now, store.copy()
    model.tables = {k: dict(v) for k, v in tables.items()}
    model.counters = dict(counters)
    model._touched.clear()
    model._touched_scopes.clear()
    model.births.clear()


# -- canonical form -----------------------------------------------------------------------
class _Renamer:
    """Symmetric values renamed in order of first appearance, one namespace each."""

    def __init__(self, namespaces: dict[Any, str]):
        self.namespaces = namespaces  # value -> namespace
        self.names: dict[Any, str] = {}
        self.counts: dict[str, int] = {}

    def __call__(self, value: Any) -> Any:
        kind = value.__class__
        if kind is str:
            return self.rename(value)
        if kind is dict:
            return (tuple(value), tuple(map(self, value.values())))
        if kind is list or kind is tuple:
            return ("[", *map(self, value))
        return value

    def rename(self, value: str) -> str:
        name = self.names.get(value)
        if name is not None:
            return name
        space = self.namespaces.get(value) or ("key" if value.startswith(GENERATED) else None)
        if space is None:
            return value
        self.counts[space] = self.counts.get(space, 0) + 1
        name = self.names[value] = f"{space}#{self.counts[space]}"
        return name


def _namespaces(scope: Scope) -> dict[Any, str]:
    """Each pool's values are one namespace: every state tries all of them, so
    they are interchangeable; so are the stand-ins for the implementation's
    choices. Keys named in the scope (unknown keys, a key an argument gives)
    are not: they stay as they are."""
    spaces: dict[Any, str] = {value: "key" for value in scope.generated}
    for pool, values in scope.pools.items():
        for value in values:
            if isinstance(value, str):
                spaces.setdefault(value, pool)
    return spaces


def canonical_form(model: Model, scope: Scope, namespaces: dict | None = None) -> tuple[tuple, dict]:
    """The state's canonical form and the names its record keys got in it
    (``namespaces``: ``_namespaces(scope)``, computed once by a caller that asks often)."""
    keys = list(model.store.records)
    rename = _Renamer(_namespaces(scope) if namespaces is None else namespaces)
    records = tuple(rename(record) for record in model.store.records.values())
    tables = tuple(
        (name, tuple(sorted((rename(k), rename(v)) for k, v in table.items())))
        for name, table in sorted(model.tables.items())
    )
    form = (model.now, records, tables, tuple(sorted(model.counters.items())))
    return form, {key: rename.names.get(key, key) for key in keys}


# -- limit edges ---------------------------------------------------------------------------
def _measure(value: Any, unit: str) -> int | None:
    """An argument's size as a limit counts it: an integer itself, a string in its unit."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if not isinstance(value, str):
        return None
    if unit == "bytes":
        return len(value.encode("utf-8"))
    if unit == "lines":
        return len(value.splitlines())
    return len(value)


@dataclass
class _LimitTargets:
    """The edges of the spec's declared limits (``exploration.limits``) under
    the scope's parameters that a move can take: an argument's size, a clock
    move. (Batch counts are the exploration's own device; the search has no batches.)"""

    args: dict[tuple[str, str], list[tuple[str, str, dict[int, str]]]] = field(default_factory=dict)
    clock: dict[int, list[tuple[str, str]]] = field(default_factory=dict)  # ms -> (limit, class)
    wanted: dict[tuple[str, str], str] = field(default_factory=dict)  # (limit, class) -> what takes it
    where: dict[str, int] = field(default_factory=dict)  # limit -> its index in exploration.limits

    def edges_of(self, move: Transition) -> Iterator[tuple[str, str]]:
        if move.operation is None:
            yield from self.clock.get(move.advance_ms, ())
            return
        for arg, value in move.args:
            for name, unit, classes in self.args.get((move.operation, arg), ()):
                edge = classes.get(_measure(value, unit))  # type: ignore[arg-type]  # None finds nothing
                if edge is not None:
                    yield name, edge


def _limit_targets(spec: Spec, scope: Scope) -> _LimitTargets:
    out = _LimitTargets()
    declared = {limit["name"]: (i, limit) for i, limit in enumerate(spec.exploration.limits)}
    for edges in limit_edges(spec, scope.parameters):
        index, limit = declared[edges.name]
        out.where[edges.name] = index
        by_value = {edges.edge_value(c): c for c in EDGE_CLASSES}
        for (op, arg), table in edges.args.items():
            if op in scope.skip:
                continue
            out.args.setdefault((op, arg), []).append((edges.name, limit["unit"], by_value))
            for edge in table:
                out.wanted.setdefault((edges.name, edge), f"{op}.{arg} {edges.edge_value(edge)} {limit['unit']}")
        for edge, ms in edges.clock.items():
            out.clock.setdefault(ms, []).append((edges.name, edge))
            out.wanted.setdefault((edges.name, edge), f"clock move of {ms} ms (advance_ms)")
    return out


# -- exploration ---------------------------------------------------------------------------
@dataclass
class _Node:
    snap: tuple
    depth: int
    parent: int | None
    step: Transition | None
    names: dict  # record key -> its canonical name
    statuses: dict  # canonical name -> lifecycle state
    edges: list = field(default_factory=list)  # (child id, {name here: name there})
    expanded: bool = False
    cut: bool = False  # a successor was not kept (over max_records), or the state breaks an invariant


class _Explorer:
    def __init__(self, spec: Spec, scope: Scope, budget: SearchBudget):
        self.spec, self.scope, self.budget = spec, scope, budget
        self.model = ScopeModel(spec, scope.parameters, scope.generated)
        self.model.reset(0)
        self.nodes: list[_Node] = []
        self.index: dict[tuple, int] = {}
        self.stats = CheckStats()
        self.found: dict[tuple, CheckFinding] = {}
        self.operations = [op for op in spec.operations if op in spec.offered_operations(scope.parameters)]
        self.operations = [op for op in self.operations if op not in scope.skip]
        self.validators = _validators(spec)
        self.namespaces = _namespaces(scope)
        self.judged: set[tuple] = set()  # (validator, value) pairs already judged
        self.at_most_once = [p for p in spec.policies.values() if p.kind == "at_most_once"]
        self.limits = _limit_targets(spec, scope)
        self.until_every_state = False
        # An expression that spent its evaluation's cost budget (each try takes up to its
        # CPU limit): the search stops there, with that finding, instead of meeting it again.
        self.budget_spent: str | None = None
        self.edges_seen: set[tuple[str, str]] = set()  # (limit, edge class) some move took

    # the graph
    def add(self, parent: int | None, step: Transition | None, depth: int) -> tuple[int, bool]:
        form, names = canonical_form(self.model, self.scope, self.namespaces)
        known = self.index.get(form)
        if known is not None:
            return known, False
        field_name = self.spec.lifecycle.field
        statuses = {names[k]: r.get(field_name) for k, r in self.model.store.records.items()}
        self.nodes.append(_Node(save_state(self.model), depth, parent, step, names, statuses))
        self.index[form] = len(self.nodes) - 1
        self.stats.depth = max(self.stats.depth, depth)
        return len(self.nodes) - 1, True

    def path(self, node_id: int | None, last: Transition | None = None) -> list[Transition]:
        steps: list[Transition] = [] if last is None else [last]
        while node_id is not None and self.nodes[node_id].step is not None:
            node = self.nodes[node_id]
            steps.append(node.step)  # type: ignore[arg-type]  # checked in the loop condition
            node_id = node.parent
        return steps[::-1]

    def report(self, kind: str, subject: str, message: str, where: str | None, node: int, last: Transition) -> None:
        if (kind, subject) not in self.found:  # breadth first: the first is a shortest
            self.found[(kind, subject)] = CheckFinding(kind, subject, message, where, self.path(node, last))

    # one state's successors
    def moves(self, node: _Node) -> Iterator[Transition]:
        keys = list(node.snap[1].records)
        for op in self.operations:
            for args in operation_arguments(self.spec, self.scope, op, keys):
                yield Transition(op, args)
        for ms in self.scope.advance_ms:
            yield Transition(None, advance_ms=ms)

    def expand(self, node_id: int) -> None:
        node = self.nodes[node_id]
        node.expanded = True
        for move in self.moves(node):
            if self.budget_spent is not None or self.out_of_budget(node.depth):
                break
            load_state(self.model, node.snap)
            self.model.generated = []
            self.stats.transitions += 1
            if not self.take(node_id, move):
                node.cut = node.cut or len(self.model.store) > self.scope.max_records
                continue
            child, new = self.add(node_id, move, node.depth + 1)
            renamed = {node.names[k]: self.nodes[child].names[k] for k in node.names if k in self.nodes[child].names}
            node.edges.append((child, renamed))
            if new and self.violated(child, node_id, move):
                self.nodes[child].expanded = self.nodes[child].cut = True  # a broken state is not explored further

    def take(self, node_id: int, move: Transition) -> bool:
        """Apply a move to the model; False when it cannot be followed."""
        try:
            if move.operation is None:
                prediction = self.model.advance(self.model.now + move.advance_ms)
            else:
                prediction = self.model.predict(move.operation, dict(move.args))
        except (StatemachinesError, KeyError, TypeError, ValueError, AttributeError) as exc:
            if isinstance(exc, EvaluationBudgetError):
                self.budget_spent = exc.where or "an expression"
            subject = move.operation or "on_clock"
            message = str(exc) if isinstance(exc, StatemachinesError) else f"{type(exc).__name__}: {exc}"
            where = self.where(("operations", subject) if move.operation else ("on_clock",))
            self.report("step-error", subject, message, where, node_id, move)
            return False
        self.judge(node_id, move, prediction)
        self.judge_delivery(node_id, move, prediction)
        if prediction.error is None:  # an edge is reached by a call that goes through, not one refused
            self.edges_seen.update(self.limits.edges_of(move))
        if len(self.model.store) > self.scope.max_records:
            self.stats.pruned += 1
            return False
        return True

    def violated(self, child: int, parent: int, move: Transition) -> bool:
        try:
            broken = self.model.check_invariants()
        except StatemachinesError as exc:
            if isinstance(exc, EvaluationBudgetError):
                self.budget_spent = exc.where or "an invariant"
            self.report("step-error", "invariants", str(exc), None, parent, move)
            return True
        for inv_id, message in broken:
            index = next(i for i, inv in enumerate(self.spec.invariants) if inv.id == inv_id)
            self.report("invariant", inv_id, message, self.where(("invariants", index)), parent, move)
        return bool(broken)

    def judge(self, node_id: int, move: Transition, prediction: Prediction) -> None:
        """The prediction against the operation's declared result, errors and effects."""
        op = move.operation
        if op is not None:
            declared = self.spec.operations[op]
            if prediction.error is not None and prediction.error.get("kind") not in declared.errors:
                kind = prediction.error.get("kind")
                message = f"{op} predicts error {kind}, which it does not declare (errors: {list(declared.errors)})"
                self.report("undeclared-error", f"{op}: {kind}", message, self.where(("operations", op)), node_id, move)
            validator = self.validators.get(("result", op))
            if prediction.error is None and validator is not None:
                self.schema_problem(validator, _plain(prediction.result), "result-schema", op, node_id, move)
        for effect in prediction.effects:
            name = effect.get("effect")
            validator = self.validators.get(("effect", name))
            body = {k: _plain(v) for k, v in effect.items() if k != "effect"}
            if validator is not None:
                self.schema_problem(validator, body, "effect-schema", f"{op or 'clock'}: {name}", node_id, move)

    def judge_delivery(self, node_id: int, move: Transition, prediction: Prediction) -> None:
        """An at-most-once policy's promise: the record an effect it guards is
        delivered for had its flag unset before the call and set after it
        (else a later call may deliver it again)."""
        before = self.nodes[node_id].snap[1]
        for policy in self.at_most_once:
            flag, key_field = policy.config["flag"], policy.config.get("key") or self.spec.entity.key
            for effect in prediction.effects:
                if effect.get("effect") != policy.config["effect"]:
                    continue
                key = effect.get(key_field)
                if not isinstance(key, str | int):
                    continue
                old, new = before.get(key), self.model.store.get(key)
                if old is not None and old.get(flag):
                    said = "was already set before the call: it is delivered twice"
                elif new is not None and not new.get(flag):
                    said = "is not set after the call: a later call delivers it again"
                else:
                    continue
                message = f"policy {policy.name}: {policy.config['effect']} for {key}, whose {flag} {said}"
                where = self.where(("policies", policy.name))
                self.report("policy", f"{policy.name}: {policy.config['effect']}", message, where, node_id, move)

    def schema_problem(self, validator, value: Any, kind: str, subject: str, node_id: int, move: Transition) -> None:
        seen = (id(validator), repr(value))
        if seen in self.judged:
            return
        self.judged.add(seen)
        # A prediction may name only part of the answer (the rest is compared
        # loosely), so a missing required property is not the spec's fault.
        error = next((e for e in validator.iter_errors(value) if e.validator != "required"), None)
        if error is not None:
            where = self.where(("operations", move.operation or "on_clock"))
            at = "/".join(str(p) for p in error.absolute_path) or "(top)"
            self.report(kind, subject, f"{subject} predicts {value!r}: at {at}, {error.message}", where, node_id, move)

    def where(self, path: tuple) -> str | None:
        file, line = self.spec.source_map.locate(path)
        return f"{file}:{line}" if file else None

    # the whole search
    def run(self) -> None:
        start = time.perf_counter()
        root, _ = self.add(None, None, 0)
        queue = deque([root])
        while queue:
            node_id = queue.popleft()
            node = self.nodes[node_id]
            if node.expanded:
                continue
            if node.depth >= self.scope.max_depth:
                self.stats.closed = False
                continue
            if self.bound_hit(start):
                break
            before = len(self.nodes)
            self.expand(node_id)
            queue.extend(range(before, len(self.nodes)))
        self.stats.states = len(self.nodes)
        self.stats.seconds = time.perf_counter() - start

    def out_of_budget(self, depth: int) -> bool:
        """Checked at every move, inside one state's expansion too: the states
        bound and the command's budget (time, memory, expression cost)."""
        if len(self.nodes) >= self.scope.max_states:
            self.stats.stopped = f"max_states {self.scope.max_states}"
            if any(note.startswith("check.scope.max_states ") for note in self.scope.ceilinged):
                self.stats.exhausted = f"the kit's ceiling of {self.scope.max_states:,} states"
        elif self.budget.over(len(self.nodes), depth):
            self.stats.stopped = self.stats.exhausted = self.budget.spent
        else:
            return False
        self.stats.complete = self.stats.closed = False
        return True

    def bound_hit(self, start: float) -> bool:
        if self.budget_spent is not None:
            self.stats.stopped = f"{self.budget_spent} spent the cost budget of one evaluation"
        elif self.until_every_state and len(self.model.coverage.counts["states"]) >= len(self.spec.lifecycle.states):
            self.stats.stopped = EVERY_STATE_REACHED
        elif self.stats.stopped is None and not self.out_of_budget(0):
            return False
        self.stats.complete = self.stats.closed = False
        return True


def _validators(spec: Spec) -> dict[tuple, Draft202012Validator]:
    out: dict[tuple, Draft202012Validator] = {}
    for name, op in spec.operations.items():
        if op.result_schema is not None:
            out[("result", name)] = Draft202012Validator({**op.result_schema, "definitions": spec.definitions})
    for name, effect in spec.effects.items():
        out[("effect", name)] = Draft202012Validator({**effect.schema, "definitions": spec.definitions})
    return out


# -- after the search: what was never reached, what can get stuck -----------------------------------
def _unreached(explorer: _Explorer) -> list[CheckFinding]:
    spec, counts = explorer.spec, explorer.model.coverage.counts
    where = explorer.where
    out = [
        CheckFinding(
            "unreached-state", state, f"no record reaches state {state}", where(("lifecycle", "states", state))
        )
        for state in spec.lifecycle.states
        if state not in counts["states"]
    ]
    for i, t in enumerate(spec.lifecycle.transitions):
        for source in t.sources:
            name = f"{source} -{t.trigger}-> {t.dest}"
            if name not in counts["transitions"]:
                message = f"transition {name} never fires"
                out.append(CheckFinding("unreached-transition", name, message, where(("lifecycle", "transitions", i))))
    for op in explorer.operations:
        for kind in spec.operations[op].errors:
            if f"{op}: {kind}" not in counts["outcomes"]:
                message = f"{op} never raises {kind}"
                out.append(CheckFinding("unreached-error", f"{op}: {kind}", message, where(("operations", op))))
    for (name, edge), what in explorer.limits.wanted.items():
        if (name, edge) not in explorer.edges_seen:
            message = f"limit {name} is never tried {edge} its value: no {what} in the scope"
            out.append(
                CheckFinding(
                    "unreached-limit",
                    f"{name}.{edge}",
                    message,
                    where(("exploration", "limits", explorer.limits.where[name])),
                )
            )
    for policy in spec.policies.values():
        for event, says in POLICY_ACTS.get(policy.kind, ()):
            if f"{policy.name}.{event}" not in counts["policies"]:
                message = f"policy {policy.name} never {says}"
                out.append(
                    CheckFinding(
                        "unreached-policy", f"{policy.name}.{event}", message, where(("policies", policy.name))
                    )
                )
    return out


def _can_finish(explorer: _Explorer) -> set[tuple[int, str]]:
    """(state, record) pairs from which the record can reach a terminal state
    within the explored graph, or a state whose successors were cut (over
    max_records, or broken: counted as able, since nothing is known)."""
    terminal = explorer.spec.lifecycle.terminal
    good: set[tuple[int, str]] = set()
    back: dict[tuple[int, str], list[tuple[int, str]]] = {}
    for node_id, node in enumerate(explorer.nodes):
        for name, status in node.statuses.items():
            if status in terminal or node.cut:
                good.add((node_id, name))
        for child, renamed in node.edges:
            for here, there in renamed.items():
                back.setdefault((child, there), []).append((node_id, here))
    queue = deque(good)
    while queue:
        for pred in back.get(queue.popleft(), ()):
            if pred not in good:
                good.add(pred)
                queue.append(pred)
    return good


def _stuck(explorer: _Explorer) -> list[CheckFinding]:
    """Records seen within the first half of the depth bound that no sequence
    of the remaining steps (at least half the bound) brings to a terminal state."""
    if not explorer.stats.complete:
        return []
    good = _can_finish(explorer)
    out: dict[str, CheckFinding] = {}
    horizon = explorer.scope.max_depth // 2
    for node_id, node in enumerate(explorer.nodes):  # breadth first order: the first is a shortest
        if node.depth > horizon:
            break
        for name, status in node.statuses.items():
            if (node_id, name) in good or status in out:
                continue
            steps = explorer.scope.max_depth - node.depth
            message = f"a record in state {status} here reaches no terminal state in {steps} more step(s)"
            where = explorer.where(("lifecycle", "states", status))
            out[status] = CheckFinding("stuck", status, message, where, explorer.path(node_id))
    return list(out.values())


EVERY_STATE_REACHED = "every lifecycle state reached"  # CheckStats.stopped of a search with until_every_state


def check_spec(
    spec: Spec,
    overrides: dict | None = None,
    time_limit: float | None = None,
    until_every_state: bool = False,
    budget: SearchBudget | None = None,
) -> CheckReport:
    """Explore the spec's model over its declared scope (with ``overrides``),
    within ``budget`` (default: ``time_limit`` seconds, the kit's memory
    budget; ``stats.exhausted`` says what ran out). ``until_every_state``:
    stop as soon as every lifecycle state has been reached (``stopped`` is
    then EVERY_STATE_REACHED), for a caller that asks only which states are
    unreachable (lint)."""
    scope, problems = scope_of(spec, overrides)
    report = CheckReport(spec.id, spec.path, scope, CheckStats(), problems=problems)
    if problems:
        report.stats.complete = report.stats.closed = False
        return report
    explorer = _Explorer(spec, scope, budget or SearchBudget(time_limit_s=time_limit))
    explorer.until_every_state = until_every_state
    try:
        explorer.run()
    except _ScopeError as exc:
        report.problems.append(str(exc))
        report.stats.complete = report.stats.closed = False
        return report
    except MemoryError:  # what the memory budget did not see coming: the search ends, with what it found
        explorer.stats.stopped = explorer.stats.exhausted = "the memory it could get"
        explorer.stats.complete = explorer.stats.closed = False
        explorer.stats.states = len(explorer.nodes)
    report.stats = explorer.stats
    report.findings = list(explorer.found.values()) + _stuck(explorer) + _unreached(explorer)
    return report


MOVES_PER_STATE = 1000  # search_counts: moves per state it may take on average (one wide state has millions)


def search_counts(spec: Spec, max_states: int = 400) -> dict[str, dict[str, int]]:
    """What the model counted (``Coverage`` counts: outcomes, transitions,
    triples, ...) over the breadth-first search of the spec's declared scope,
    stopped after ``max_states`` states or ``MOVES_PER_STATE`` times as many
    moves (bounds in counts, not seconds, so the answer is the same on every
    machine). Empty counts when the scope is invalid."""
    scope, problems = scope_of(spec, {"max_states": max_states})
    if problems:
        return {}
    explorer = _Explorer(spec, scope, SearchBudget(max_moves=max_states * MOVES_PER_STATE))
    try:
        explorer.run()
    except _ScopeError:
        return {}
    return explorer.model.coverage.as_dict()


# -- a path as a scenario for the matrix ---------------------------------------------------------
def _scenario_steps(spec: Spec, scope: Scope, path: list[Transition]) -> list[dict]:
    """The path's steps, with the values the implementation chooses saved
    from its responses and used through ``${name}``."""
    model = ScopeModel(spec, scope.parameters, scope.generated)
    model.reset(0)
    saved: dict[str, str] = {}  # generated value -> variable
    steps: list[dict] = []
    for move in path:
        step = move.as_dict()
        if move.operation is not None:
            step["args"] = {k: _use_saved(v, saved) for k, v in step["args"].items()}
        model.generated = []
        try:
            prediction = (
                model.advance(model.now + move.advance_ms)
                if move.operation is None
                else model.predict(move.operation, dict(move.args))
            )
        except (StatemachinesError, KeyError, TypeError, ValueError, AttributeError):
            steps.append(step)
            break
        for value in model.generated:
            at = _find_value(prediction.result, value, "result")
            if at is not None and value not in saved:
                saved[value] = f"v{len(saved) + 1}"
                step.setdefault("save", {})[saved[value]] = at
        steps.append(step)
    return steps


def _use_saved(value: Any, saved: dict[str, str]) -> Any:
    if isinstance(value, str) and value in saved:
        return "${" + saved[value] + "}"
    if isinstance(value, list):
        return [_use_saved(v, saved) for v in value]
    return value


def _find_value(node: Any, value: str, at: str) -> str | None:
    if node == value:
        return at
    if isinstance(node, dict):
        for k, v in node.items():
            found = _find_value(v, value, f"{at}.{k}")
            if found:
                return found
    if isinstance(node, list):
        for i, v in enumerate(node):
            found = _find_value(v, value, f"{at}.{i}")
            if found:
                return found
    return None


def scenario_yaml(spec: Spec, scope: Scope, finding: CheckFinding) -> str:
    """A finding's path as a scenario to paste under ``scenarios:`` (YAML
    whose values are written in JSON's flow style, which YAML reads)."""
    import json
    import re

    ident = "check-" + re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{finding.kind}-{finding.subject}").strip("-")
    lines = [
        f"- id: {ident}",
        f"  title: {json.dumps(f'{finding.kind}: {finding.subject}')}",
        "  category: edge",
        f"  description: {json.dumps(finding.message, ensure_ascii=False)}",
        "  steps:",
    ]
    lines += [f"    - {json.dumps(step, ensure_ascii=False)}" for step in _scenario_steps(spec, scope, finding.path)]
    return "\n".join(lines) + "\n"
