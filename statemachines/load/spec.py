"""The compiled form of a lifecycle spec: plain dataclasses, no behaviour."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..language.expressions import Expression
from .source import SourceMap

__all__ = [
    "Parameter",
    "Profile",
    "Entity",
    "State",
    "Transition",
    "Lifecycle",
    "Ordering",
    "Policy",
    "EffectDecl",
    "Operation",
    "Invariant",
    "Scenario",
    "Exploration",
    "Spec",
]


@dataclass(frozen=True)
class Parameter:
    name: str
    type: str
    default: Any
    minimum: float | None = None
    maximum: float | None = None
    enum: tuple | None = None
    fixed: bool = False
    description: str = ""

    def violation(self, value: Any) -> str | None:
        """Why ``value`` is not allowed for this parameter, or None."""
        kinds: dict[str, tuple[type, ...]] = {
            "integer": (int,),
            "number": (int, float),
            "string": (str,),
            "boolean": (bool,),
        }
        wrong_kind = isinstance(value, bool) and self.type != "boolean" or not isinstance(value, kinds[self.type])
        if wrong_kind:
            return f"{self.name} must be {self.type}, got {value!r}"
        if self.enum is not None and value not in self.enum:
            return f"{self.name} must be one of {list(self.enum)}, got {value!r}"
        if self.minimum is not None and value < self.minimum:
            return f"{self.name} must be >= {self.minimum:g}, got {value!r}"
        if self.maximum is not None and value > self.maximum:
            return f"{self.name} must be <= {self.maximum:g}, got {value!r}"
        return None

    def bounds(self) -> str:
        if self.enum is not None:
            return "one of " + ", ".join(map(str, self.enum))
        if self.minimum is not None or self.maximum is not None:
            lo = "" if self.minimum is None else f"{self.minimum:g}"
            hi = "" if self.maximum is None else f"{self.maximum:g}"
            return f"{lo}..{hi}"
        return "any " + self.type


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    parameters: dict


@dataclass(frozen=True)
class Entity:
    name: str
    key: str
    fields: dict
    internal: dict
    unique_indexes: tuple[str, ...]
    scope_field: str | None

    @property
    def collection(self) -> str:
        """The name a spec uses for a list of these entities (e.g. ``jobs``)."""
        return self.name + "s"


@dataclass(frozen=True)
class State:
    name: str
    initial: bool
    terminal: bool
    description: str = ""


@dataclass(frozen=True)
class Transition:
    trigger: str
    sources: tuple[str, ...]
    dest: str
    guard: Expression | None
    where: str


@dataclass(frozen=True)
class Lifecycle:
    field: str
    states: dict[str, State]
    transitions: tuple[Transition, ...]

    @property
    def initial(self) -> str:
        return next(s.name for s in self.states.values() if s.initial)

    @property
    def terminal(self) -> frozenset[str]:
        return frozenset(s.name for s in self.states.values() if s.terminal)

    @property
    def triggers(self) -> frozenset[str]:
        return frozenset(t.trigger for t in self.transitions)


@dataclass(frozen=True)
class Ordering:
    name: str
    by: tuple[str, ...]
    description: str = ""


@dataclass(frozen=True)
class Policy:
    name: str
    kind: str
    config: dict
    exprs: dict[str, Expression]
    description: str = ""


@dataclass(frozen=True)
class EffectDecl:
    name: str
    schema: dict
    description: str = ""


@dataclass
class Operation:
    name: str
    summary: str
    args_schema: dict
    result_schema: dict | None
    errors: tuple[str, ...]
    steps: list
    read_only: bool = False
    assumes: Expression | None = None  # over params: is the operation offered under these parameters?

    def offered(self, params: dict) -> bool:
        return self.assumes is None or self.assumes.evaluate_bool({"params": params}, role="an operation's `assumes`")


@dataclass(frozen=True)
class Invariant:
    id: str
    description: str
    kind: str  # "each" | "scope" | "observed"
    check: Expression | None = None
    observed: dict | None = None


@dataclass
class Scenario:
    id: str
    title: str
    category: str
    description: str
    steps: list
    where: str
    requires: tuple[str, ...] = ()
    assumes: Expression | None = None
    not_applicable: str = ""  # why the scenario cannot hold where `assumes` fails
    race_runs: int | None = None  # runs of a scenario with concurrent steps (None: the run's default)


@dataclass
class Exploration:
    pools: dict[str, list]
    weights: dict[str, int]
    advance_ms: list[int]
    probe: dict | None
    batches: list[dict]
    concurrent: list[dict]
    limits: list[dict] = field(default_factory=list)  # probed at their edges (statemachines.tools.limits)
    derived_races: bool = True  # race every pair of operations writing one record (statemachines.tools.races)


@dataclass
class Spec:
    """A loaded, validated lifecycle spec."""

    id: str
    version: str
    title: str
    description: str
    path: str
    parameters: dict[str, Parameter]
    profiles: dict[str, Profile]
    entity: Entity
    lifecycle: Lifecycle
    tables: tuple[str, ...]
    counters: tuple[str, ...]
    orderings: dict[str, Ordering]
    policies: dict[str, Policy]
    effects: dict[str, EffectDecl]
    definitions: dict
    operations: dict[str, Operation]
    invariants: list[Invariant]
    scenarios: list[Scenario]
    exploration: Exploration
    implementations: dict[str, str]
    on_clock: list = field(default_factory=list)
    timers: tuple[str, ...] = ()  # record fields holding instants at which on_clock must run
    table_timers: tuple[tuple[str, str], ...] = ()  # (table, field): instants held by a table's entries
    source_map: SourceMap = field(repr=False, default_factory=SourceMap)
    raw: dict = field(repr=False, default_factory=dict)

    def offered_operations(self, params: dict) -> frozenset[str]:
        """The operations an implementation with these parameters exposes."""
        return frozenset(name for name, op in self.operations.items() if op.offered(params))

    def default_parameters(self) -> dict:
        return {name: p.default for name, p in self.parameters.items()}

    def lifecycle_summary(self) -> dict:
        """The lifecycle as plain data (for reports and diagrams)."""
        return {
            "entity": self.entity.name,
            "field": self.lifecycle.field,
            "states": [
                {"name": s.name, "initial": s.initial, "terminal": s.terminal} for s in self.lifecycle.states.values()
            ],
            "transitions": [
                {
                    "trigger": t.trigger,
                    "source": list(t.sources),
                    "dest": t.dest,
                    "guard": t.guard.source if t.guard else None,
                }
                for t in self.lifecycle.transitions
            ],
        }
