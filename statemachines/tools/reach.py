"""What the model can never do under a set of parameters, and why.

Coverage gates (``run --min-coverage``) count what a run exercised against
what the spec declares; an error kind, a transition or a state that the
model itself cannot reach under the implementation's parameters is not a
gap in the run. This module works that out from the model's own steps, by
rules that are sound (what it calls unreachable really is), never by a list:

- A branch of ``when`` whose condition reads only ``params`` is taken or not
  the same way on every call: the other branch is dead under these
  parameters. An operation these parameters do not offer is never called.
- A ``require`` whose condition always holds never raises its error. A
  condition always holds when it reads only ``params`` and is true; when one
  operand of ``||`` always holds, or every operand of ``&&`` does; or when it
  compares the size of a ``collect`` (one value per record) with a value of
  the parameters that no run can reach: ``size(v) < E`` holds while fewer
  than E records exist, so it holds in every test when no test can create E
  records (``Bound``: how many a test can create at most, worked out by the
  engine from the exploration's step bound, its batches and the scenarios).
- An error kind is unreachable when every step that can raise it is dead or
  never raises it; a transition when every ``fire`` of its trigger is (in an
  operation not offered, or in a dead branch), or when its ``guard`` never
  holds (it reads only ``params`` and is false, or one operand of its ``&&``
  is, or every operand of its ``||``); a state (not the initial one) when
  every transition into it is.

Anything the rules cannot decide counts as reachable: a gate may still ask
for what a run cannot do, but never excuses what it can.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..errors import ExpressionError
from ..language.expressions import MODEL_FUNCTIONS, Expression, compile_expression
from ..load.spec import Spec, Transition
from ..model import steps as S

__all__ = ["Bound", "Unreachable", "unreachable_items", "creates_per_call", "never_answers"]


@dataclass(frozen=True)
class Bound:
    """The most records one test (a scenario run, an exploration example) can
    create, and how that number was reached; ``max_records`` None: unknown."""

    max_records: int | None
    why: str = ""


@dataclass(frozen=True)
class Unreachable:
    """One coverage item the model cannot reach under the parameters."""

    category: str  # "error-kinds" | "transitions" | "states" (coverage.CATEGORIES)
    item: str  # as coverage reports name it
    reason: str


@dataclass
class _Sites:
    """What the live steps can do, and why the dead ones cannot."""

    errors: set[str] = field(default_factory=set)  # kinds a live step can raise
    fired: set[str] = field(default_factory=set)  # triggers a live step fires
    why_not: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # ("error"|"fire", name) -> reasons


@dataclass(frozen=True)
class _Context:
    params: dict
    bound: Bound | None
    collects: frozenset[str]  # names bound only by `collect` in this operation


# -- the conditions -----------------------------------------------------------------------------
def _param_only(expr: Expression) -> bool:
    return expr.variables <= {"params"} and not (expr.functions & MODEL_FUNCTIONS)


def _constant(expr: Expression, params: dict):
    """The value of a condition that reads only the parameters, or None."""
    if not _param_only(expr):
        return None
    try:
        value = expr.evaluate({"params": params})
    except ExpressionError:
        return None
    return value if isinstance(value, (bool, int)) else None


def _shown_params(text: str, params: dict) -> str:
    names = sorted(set(re.findall(r"params\.(\w+)", text)))
    return ", ".join(f"{n} = {json.dumps(params.get(n))}" for n in names if n in params)


def _top_level(text: str) -> Iterator[tuple[int, str]]:
    """(index, character) of the characters outside brackets and string literals."""
    depth, i, quote = 0, 0, ""
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0:
            yield i, ch
        i += 1


def _unwrapped(text: str) -> str:
    """``text`` without brackets around all of it."""
    text = text.strip()
    while text.startswith("(") and text.endswith(")"):
        inner = text[1:-1]
        if not _balanced(inner):
            break
        text = inner.strip()
    return text


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:  # string literals with brackets in them make this say False: then nothing is unwrapped
        depth += (ch in "([{") - (ch in ")]}")
        if depth < 0:
            return False
    return depth == 0


def _split(text: str, operator: str) -> list[str]:
    """``text`` split at its top-level ``operator`` (``||`` or ``&&``); one part when there is none."""
    cuts = [i for i, ch in _top_level(text) if text.startswith(operator, i)]
    if any(ch == "?" for _, ch in _top_level(text)):
        return [text]  # a conditional binds looser than || and &&
    bounds = [0, *(c + len(operator) for c in cuts)]
    ends = [*cuts, len(text)]
    return [text[a:b].strip() for a, b in zip(bounds, ends)]


_SIZE_BELOW = re.compile(r"^size\((\w+)\)\s*(<=|<)\s*(.+)$", re.DOTALL)
_ABOVE_SIZE = re.compile(r"^(.+?)\s*(>=|>)\s*size\((\w+)\)$", re.DOTALL)


def _count_holds(text: str, where: str, ctx: _Context) -> str | None:
    """Why ``size(v) < E`` (or ``<=``, or ``E > size(v)``) always holds: v
    collects records, and no test creates E of them."""
    if any(ch == "?" for _, ch in _top_level(text)):
        return None  # `size(v) < a ? b : c` is a conditional, not a comparison with `a ? b : c`
    match = _SIZE_BELOW.match(text)
    if match:
        name, op, limit = match.groups()
    else:
        match = _ABOVE_SIZE.match(text)
        if not match:
            return None
        limit, op, name = match.groups()
        op = "<" if op == ">" else "<="
    bound = ctx.bound
    if name not in ctx.collects or bound is None or bound.max_records is None:
        return None
    try:
        expr = compile_expression(limit.strip(), where)
    except ExpressionError:
        return None
    value = _constant(expr, ctx.params)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    most = bound.max_records
    if most > (value - 1 if op == "<" else value):
        return None
    return (
        f"`{text}` always holds: {name} holds one value per record, a test of this run creates at most "
        f"{most} record(s) ({bound.why}), and {limit.strip()} is {value}"
    )


def _holds(text: str, where: str, ctx: _Context) -> str | None:
    """Why the condition ``text`` is true on every call under these parameters and bound, or None."""
    text = _unwrapped(text)
    try:
        expr = compile_expression(text, where)
    except ExpressionError:
        return None
    if _constant(expr, ctx.params) is True:
        here = _shown_params(text, ctx.params)
        return f"`{text}` is true here" + (f" ({here})" if here else "")
    either = _split(text, "||")
    if len(either) > 1:
        return next((why for part in either if (why := _holds(part, where, ctx))), None)
    both = _split(text, "&&")
    if len(both) > 1:
        reasons = [_holds(part, where, ctx) for part in both]
        return "; ".join(r for r in reasons if r) if all(reasons) else None
    return _count_holds(text, where, ctx)


# -- the steps ------------------------------------------------------------------------------------
def _raised(step) -> str | None:
    if isinstance(step, (S.Require, S.Reject)):
        return step.error.kind
    if isinstance(step, S.Find) and step.missing is not None:
        return step.missing.kind
    if isinstance(step, S.Fire) and step.otherwise is not None:
        return step.otherwise.kind
    return None


def _dead(steps: list, why: str, sites: _Sites) -> None:
    """Steps of a branch never taken: each error and fire in them, with why."""
    for step in S.walk_steps(steps):
        kind = _raised(step)
        if kind is not None:
            sites.why_not.setdefault(("error", kind), []).append(why)
        if isinstance(step, S.Fire):
            sites.why_not.setdefault(("fire", step.trigger), []).append(why)


def _walk(steps: list, ctx: _Context, sites: _Sites) -> None:
    for step in steps:
        if isinstance(step, S.When):
            _walk_when(step, ctx, sites)
            continue
        if isinstance(step, S.LOOPS):
            _walk(step.body, ctx, sites)
            continue
        if isinstance(step, S.Fire):
            sites.fired.add(step.trigger)
        kind = _raised(step)
        if kind is None:
            continue
        why = _holds(step.condition.source, step.where, ctx) if isinstance(step, S.Require) else None
        if why is None:
            sites.errors.add(kind)
        else:
            sites.why_not.setdefault(("error", kind), []).append(f"{step.where}: {why}")


def _walk_when(step: S.When, ctx: _Context, sites: _Sites) -> None:
    value = _constant(step.condition, ctx.params)
    if not isinstance(value, bool):
        _walk(step.then, ctx, sites)
        _walk(step.otherwise, ctx, sites)
        return
    here = _shown_params(step.condition.source, ctx.params)
    why = f"{step.where}: `{step.condition.source}` is {str(value).lower()} here" + (f" ({here})" if here else "")
    _walk(step.then if value else step.otherwise, ctx, sites)
    _dead(step.otherwise if value else step.then, why, sites)


def _collect_names(steps: list) -> frozenset[str]:
    """Names bound by ``collect`` and by nothing else in these steps."""
    collected: set[str] = set()
    other: set[str] = set()
    for step in S.walk_steps(steps):
        if isinstance(step, S.Collect):
            collected.add(step.bind)
        elif isinstance(step, S.Let):
            other.update(step.values)
        elif isinstance(step, (S.Find, S.Create, S.ForEach, S.Counter)):
            other.add(step.bind)
        elif isinstance(step, (S.Fire, S.Apply)) and step.bind:
            other.add(step.bind)
    return frozenset(collected - other)


def _sites(spec: Spec, params: dict, bound: Bound | None) -> _Sites:
    sites = _Sites()
    offered = spec.offered_operations(params)
    for name, op in spec.operations.items():
        if name in offered:
            _walk(op.steps, _Context(params, bound, _collect_names(op.steps)), sites)
        else:
            _dead(op.steps, f"only in {name}, which these parameters do not offer", sites)
    _walk(spec.on_clock, _Context(params, bound, _collect_names(spec.on_clock)), sites)
    return sites


def creates_per_call(spec: Spec, params: dict) -> int | None:
    """The most records one call of an offered operation (or one clock move)
    creates; None when a ``create`` repeats (inside ``for_each``) or the
    clock creates records."""
    if any(isinstance(step, S.Create) for step in S.walk_steps(spec.on_clock)):
        return None
    most = 0
    offered = spec.offered_operations(params)
    for name in offered:
        steps = spec.operations[name].steps
        if any(
            isinstance(s, S.ForEach) and any(isinstance(b, S.Create) for b in S.walk_steps(s.body))
            for s in S.walk_steps(steps)
        ):
            return None
        most = max(most, sum(isinstance(s, S.Create) for s in S.walk_steps(steps)))
    return most


# -- the items --------------------------------------------------------------------------------------
def _because(reasons: list[str]) -> str:
    unique = list(dict.fromkeys(reasons))
    return unique[0] if len(unique) == 1 else "; ".join(unique)


def _error_kinds(spec: Spec, params: dict, bound: Bound | None) -> list[Unreachable]:
    """Each offered operation's declared error kinds that no live step of it raises."""
    out = []
    for name in sorted(spec.offered_operations(params), key=list(spec.operations).index):
        op_sites = _Sites()
        op = spec.operations[name]
        _walk(op.steps, _Context(params, bound, _collect_names(op.steps)), op_sites)
        for kind in op.errors:
            reasons = op_sites.why_not.get(("error", kind))
            if kind not in op_sites.errors and reasons:
                out.append(Unreachable("error-kinds", f"{name}: {kind}", f"never raised: {_because(reasons)}"))
    return out


def _never_holds(text: str, where: str, params: dict) -> str | None:
    """Why the guard ``text`` is false on every call under these parameters, or None."""
    text = _unwrapped(text)
    try:
        expr = compile_expression(text, where)
    except ExpressionError:
        return None
    if _constant(expr, params) is False:
        here = _shown_params(text, params)
        return f"`{text}` is false here" + (f" ({here})" if here else "")
    both = _split(text, "&&")
    if len(both) > 1:
        return next((why for part in both if (why := _never_holds(part, where, params))), None)
    either = _split(text, "||")
    if len(either) > 1:
        reasons = [_never_holds(part, where, params) for part in either]
        return "; ".join(r for r in reasons if r) if all(reasons) else None
    return None


def _transition_why_not(t: Transition, sites: _Sites, params: dict) -> str | None:
    """Why the transition ``t`` never happens under these parameters, or None."""
    if t.guard is not None:
        why = _never_holds(t.guard.source, t.where, params)
        if why is not None:
            return f"its guard never holds: {t.where}: {why}"
    reasons = sites.why_not.get(("fire", t.trigger))
    if t.trigger in sites.fired or not reasons:
        return None
    return f"trigger {t.trigger} is never fired: {_because(reasons)}"


def _transitions(spec: Spec, sites: _Sites, params: dict) -> list[Unreachable]:
    out: list[Unreachable] = []
    for t in spec.lifecycle.transitions:
        why = _transition_why_not(t, sites, params)
        if why is not None:
            out.extend(Unreachable("transitions", f"{src} -{t.trigger}-> {t.dest}", why) for src in t.sources)
    return out


def _states(spec: Spec, dead_transitions: list[Unreachable]) -> list[Unreachable]:
    dead = {u.item for u in dead_transitions}
    out = []
    for state in spec.lifecycle.states:
        if state == spec.lifecycle.initial:
            continue
        into = [
            f"{src} -{t.trigger}-> {t.dest}" for t in spec.lifecycle.transitions if t.dest == state for src in t.sources
        ]
        if into and all(name in dead for name in into):
            out.append(Unreachable("states", state, f"reached only by transitions that never fire: {', '.join(into)}"))
    return out


def unreachable_items(spec: Spec, params: dict, bound: Bound | None = None) -> list[Unreachable]:
    """The error kinds, transitions and states the model cannot reach under
    ``params`` when no test creates more than ``bound.max_records`` records
    (None: no bound is known, so only the parameters decide)."""
    transitions = _transitions(spec, _sites(spec, params, bound), params)
    return _error_kinds(spec, params, bound) + transitions + _states(spec, transitions)


# -- one operation on a record in one state ------------------------------------------------------------
def _subject_find(steps: list) -> S.Find | None:
    """The ``find`` whose record's state is an operation's "state" (Coverage
    triples): its first step that finds, when it is written at the top."""
    first = next((step for step in S.walk_steps(steps) if isinstance(step, S.Find)), None)
    return first if first is not None and any(step is first for step in steps) else None


def _always_fires(spec: Spec, trigger: str, state: str, params: dict) -> str | None:
    """The transition by ``trigger`` out of ``state`` that fires on every
    call under these parameters (no guard, or one on parameters that holds), or None."""
    for t in spec.lifecycle.transitions:
        if t.trigger != trigger or state not in t.sources:
            continue
        if t.guard is None:
            return f"{state} -{trigger}-> {t.dest}"
        if _constant(t.guard, params) is True:
            return f"{state} -{trigger}-> {t.dest} (its guard `{t.guard.source}` holds here)"
    return None


def never_answers(spec: Spec, params: dict, state: str, operation: str, kind: str) -> str | None:
    """Why ``operation``, meeting a record in ``state``, never answers the
    error ``kind`` under these parameters, or None. Sound for one shape: the
    only step that raises ``kind`` is the ``otherwise`` of the one ``fire``
    on the record the operation found first, nothing else sets that
    record's state before it, and the lifecycle has a transition by that
    trigger out of ``state`` that always fires."""
    op = spec.operations.get(operation)
    steps = op.steps if op is not None else []
    found = _subject_find(steps)
    if found is None or state not in spec.lifecycle.states:
        return None
    raising = [step for step in S.walk_steps(steps) if _raised(step) == kind]
    fires = [step for step in S.walk_steps(steps) if isinstance(step, S.Fire) and step.target == found.bind]
    if len(fires) != 1 or raising != fires:
        return None
    rebinds = any(
        getattr(step, "bind", None) == found.bind and step is not found
        for step in S.walk_steps(steps)
        if isinstance(step, (S.Find, S.Create, S.ForEach))
    )
    sets_state = any(
        isinstance(step, S.SetFields) and step.target == found.bind and spec.lifecycle.field in step.fields
        for step in S.walk_steps(steps)
    )
    move = None if rebinds or sets_state else _always_fires(spec, fires[0].trigger, state, params)
    if move is None:
        return None
    return f"{fires[0].where}: its only `{kind}` is the fire of {fires[0].trigger}, and {move} always fires"
