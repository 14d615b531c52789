"""Operation steps: the small imperative vocabulary a spec uses to say what an
operation does to the model. Each step kind is a dataclass; the model
(``model.py``) interprets them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from ..language.expressions import Expression

__all__ = [
    "ErrorSpec",
    "MatcherSpec",
    "Let",
    "Require",
    "Reject",
    "Check",
    "Find",
    "Create",
    "Fire",
    "SetFields",
    "When",
    "Emit",
    "ForEach",
    "ForItems",
    "LOOPS",
    "walk_steps",
    "Collect",
    "Apply",
    "Put",
    "Drop",
    "Counter",
    "Reset",
    "Result",
    "Remove",
    "Advance",
    "Step",
    "STEP_CLASSES",
    "STEP_KINDS",
]


@dataclass(frozen=True)
class ErrorSpec:
    kind: str
    message: Expression


@dataclass(frozen=True)
class MatcherSpec:
    """How an observed value is judged: each entry is a matcher kind and the
    expression giving its operand (``equals``, ``contains``, ``endswith``,
    ``matches``, ``file_contains``, ``any``)."""

    checks: tuple[tuple[str, Expression | None], ...]


@dataclass
class Let:
    values: dict[str, Expression]
    where: str = ""


@dataclass
class Require:
    condition: Expression
    error: ErrorSpec
    where: str = ""


@dataclass
class Reject:
    error: ErrorSpec
    where: str = ""


@dataclass
class Check:
    condition: Expression
    message: str
    where: str = ""


@dataclass
class Find:
    bind: str
    key: Expression | None
    by_field: str | None
    by_value: Expression | None
    scope: Expression | None
    missing: ErrorSpec | None
    where: str = ""


@dataclass
class Create:
    bind: str
    fields: dict[str, Expression]
    where: str = ""


@dataclass
class Fire:
    trigger: str
    target: str
    bind: str | None
    otherwise: ErrorSpec | None
    where: str = ""


@dataclass
class SetFields:
    target: str
    fields: dict[str, Expression]
    where: str = ""


@dataclass
class When:
    condition: Expression
    then: list[Step]
    otherwise: list[Step]
    where: str = ""


@dataclass
class Emit:
    effect: str
    fields: dict[str, Expression | MatcherSpec]
    where: str = ""


@dataclass
class _Query:
    bind: str
    scope: Expression | None
    states: frozenset[str] | None
    condition: Expression | None
    ordering: str | None
    condition_all: Expression | None = None  # the condition mapped over all candidates in one evaluation
    fields: frozenset | None = None  # record fields the condition and selection read (None: all)


@dataclass
class ForEach(_Query):
    body: list[Step] = field(default_factory=list)
    where: str = ""


@dataclass
class ForItems:
    """Runs ``body`` once for each value of a list (``items``, a CEL list, for
    instance a table entry's list), bound ``as`` a name: for what the model
    keeps beside its records, such as a queue entry that outlived its record."""

    bind: str
    items: Expression
    body: list[Step] = field(default_factory=list)
    where: str = ""


@dataclass
class Collect(_Query):
    select: Expression = field(kw_only=True)
    where: str = ""
    select_all: Expression | None = None


@dataclass
class Apply:
    policy: str
    target: str | None
    bind: str | None
    scope: Expression | None
    where: str = ""


@dataclass
class Put:
    table: str
    key: Expression
    value: Expression | None
    where: str = ""


@dataclass
class Drop:
    table: str
    key: Expression
    where: str = ""


@dataclass
class Counter:
    name: str
    bind: str
    where: str = ""


@dataclass
class Reset:
    where: str = ""


@dataclass
class Remove:
    """Forget one record: it is gone as if it never existed."""

    target: str
    where: str = ""


@dataclass
class Advance:
    """The operation waits: the virtual clock runs to ``to`` (timers fire on the way)."""

    to: Expression
    where: str = ""


@dataclass
class Result:
    value: Expression | dict
    where: str = ""


Step = (
    Let
    | Require
    | Reject
    | Check
    | Find
    | Create
    | Fire
    | SetFields
    | When
    | Emit
    | ForEach
    | ForItems
    | Collect
    | Apply
    | Put
    | Drop
    | Counter
    | Reset
    | Result
    | Remove
    | Advance
)

# Each step kind, as a spec writes it, and the class it compiles to. The
# compiler (``compile_steps.StepCompiler._STEP``) builds each kind and the model
# (``model.Model._STEP``) interprets each class; tests/test_step_dispatch.py
# checks both tables cover exactly these.
STEP_CLASSES: dict[str, type[Step]] = {
    "let": Let,
    "require": Require,
    "reject": Reject,
    "check": Check,
    "find": Find,
    "create": Create,
    "fire": Fire,
    "set": SetFields,
    "when": When,
    "emit": Emit,
    "for_each": ForEach,
    "for_items": ForItems,
    "collect": Collect,
    "apply": Apply,
    "put": Put,
    "drop": Drop,
    "counter": Counter,
    "reset": Reset,
    "result": Result,
    "remove": Remove,
    "advance": Advance,
}
STEP_KINDS = tuple(STEP_CLASSES)

# The step kinds whose ``body`` runs once per record or value: what walks the
# steps nested in others treats them alike.
LOOPS: tuple[type[ForEach], type[ForItems]] = (ForEach, ForItems)


def walk_steps(steps: list) -> Iterator[Step]:
    """Every step, and the steps nested in it (a `when`'s both branches, a
    loop's body), depth first in the order they are written."""
    for step in steps:
        yield step
        if isinstance(step, When):
            yield from walk_steps(step.then)
            yield from walk_steps(step.otherwise)
        elif isinstance(step, LOOPS):
            yield from walk_steps(step.body)
