"""What a spec change does to behaviour: both versions' models over one scope.

``conformance diff`` compares two versions of a spec field by field and
scenario by scenario; this compares what they *do*. Both models are driven
in lockstep, breadth first, over the same small scope (``check-spec``'s:
the new version's ``check.scope``), every operation sequence within it; a
pair of states is explored once. At the first step where the two versions
part (an error kind, a record evicted or expired, a state change, a record
created, an effect, a result), the sequence is a behaviour possible under
one and not the other: it is kept with its shortest operation sequence and
one sentence, built from the model's own terms (the entity, its states, the
policy that acted and what it does, error kinds), of what differs at its end.

A parameter the scope fixes would hide a change of that parameter (a scope
with retention 1 shows nothing of 20 -> 10), so where the two versions'
values differ and the scope sets it, both are searched at small values that
keep their order: the smaller at the scope's value, the larger one above it.
Where the scope does not set it, each version keeps its own value. What was
done is said in ``notes``.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..errors import StatemachinesError
from ..load.spec import Spec
from ..model.matchers import Matcher
from ..model.model import Prediction
from .check import (
    Scope,
    ScopeModel,
    Transition,
    canonical_form,
    declared_scope,
    load_state,
    operation_arguments,
    save_state,
    scope_of,
)
from .dryrun import _plain
from .search_budget import SearchBudget

__all__ = ["Behaviour", "BehaviourDiff", "StepOutcome", "diff_behaviour", "search_scopes"]

DEFAULT_TIME_LIMIT_S = 30.0
MAX_BEHAVIOURS = 12
_UNSET = object()
_FAILURES = (StatemachinesError, KeyError, TypeError, ValueError, AttributeError)


@dataclass
class StepOutcome:
    """What one step did on one version's model, in the model's terms."""

    error: str | None = None  # the error kind, or None
    failed: str | None = None  # the step could not be evaluated
    result: Any = None
    created: tuple = ()  # keys
    removed: dict = field(default_factory=dict)  # key -> (status, policy act "retention.evicted" or None)
    changed: dict = field(default_factory=dict)  # key -> (status before, status after)
    fields: dict = field(default_factory=dict)  # key -> {field: value it was set to}, the lifecycle field aside
    effects: tuple = ()  # (effect name, its plain fields as JSON)
    acts: tuple = ()  # policy events this step hit, e.g. ("retention.evicted",)


@dataclass
class Behaviour:
    """A behaviour possible under one version and not the other."""

    path: list[Transition]
    aspect: str  # failed | error | removed | changed | created | fields | effects | result
    sentence: str
    old: str  # what the old version does at the end, briefly
    new: str

    def to_dict(self) -> dict:
        return {
            "aspect": self.aspect,
            "sentence": self.sentence,
            "old": self.old,
            "new": self.new,
            "path": [step.as_dict() for step in self.path],
        }


@dataclass
class BehaviourDiff:
    behaviours: list[Behaviour]
    notes: list[str]  # how the scope was chosen
    parameters: dict  # name -> [old value, new value] searched
    states: int = 0  # pairs of states explored
    depth: int = 0
    seconds: float = 0.0
    complete: bool = True
    stopped: str | None = None
    problems: list[str] = field(default_factory=list)
    exhausted: str | None = None  # the command's budget that ran out (time, memory, expression cost, a ceiling)

    def to_dict(self) -> dict:
        return {
            "behaviours": [b.to_dict() for b in self.behaviours],
            "notes": list(self.notes),
            "parameters": self.parameters,
            "states": self.states,
            "depth": self.depth,
            "seconds": round(self.seconds, 3),
            "complete": self.complete,
            "stopped": self.stopped,
            "exhausted": self.exhausted,
            "problems": list(self.problems),
        }


# -- one scope for both ------------------------------------------------------------
def _spread(name: str, old: Any, new: Any, base: Any, specs: tuple[Spec, Spec]) -> tuple[Any, Any, str] | None:
    """Small values for a parameter the versions set differently and the scope
    fixes at ``base``: the smaller at ``base``, the larger one above it."""
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (old, new, base)):
        return old, new, f"{name}: {old!r} -> {new!r}, searched as written (the scope's {base!r} would hide it)"
    low, high = base, base + 1
    pair = (low, high) if old < new else (high, low)
    if any(spec.parameters[name].violation(v) for spec, v in zip(specs, pair)):
        return None
    return (
        *pair,
        f"{name}: {old} -> {new} searched as {pair[0]} -> {pair[1]} (the scope's {base} for the smaller, "
        f"{base + 1} for the larger: the order of the two versions kept, small enough for the scope's depth)",
    )


def search_scopes(old: Spec, new: Spec, overrides: dict | None = None) -> tuple[Scope, Scope, list[str], list[str]]:
    """The new version's scope for both versions, with the parameters they
    set differently kept apart; (old's scope, new's scope, notes, problems)."""
    raw = declared_scope(new)
    fixed = dict(raw.get("parameters") or {})
    old_params, new_params, notes = dict(fixed), dict(fixed), []
    for name in sorted(set(old.parameters) & set(new.parameters)):
        a, b = old.parameters[name].default, new.parameters[name].default
        if a == b:
            continue
        if name not in fixed:
            old_params[name], new_params[name] = a, b
            notes.append(f"{name}: {a!r} -> {b!r}, each version searched with its own value")
            continue
        spread = _spread(name, a, b, fixed[name], (old, new))
        if spread is None:
            notes.append(f"{name}: {a!r} -> {b!r}, searched at the scope's {fixed[name]!r} (no smaller pair fits)")
            continue
        old_params[name], new_params[name], note = spread
        notes.append(note)
    over = dict(overrides or {})
    extra = over.pop("parameters", None) or {}
    old_raw, dropped = _fitted(raw, old)
    if dropped:
        notes.append(f"for the old version, the scope's entries for what it lacks are left out: {', '.join(dropped)}")
    old_scope, old_problems = scope_of(old, {**over, "parameters": {**old_params, **extra}}, old_raw)
    new_scope, new_problems = scope_of(new, {**over, "parameters": {**new_params, **extra}}, raw)
    if not raw:
        notes.append("the new version declares no check.scope: the default bounds apply")
    problems = [f"old version: {p}" for p in old_problems] + [f"new version: {p}" for p in new_problems]
    return old_scope, new_scope, notes, problems


def _fitted(raw: dict, spec: Spec) -> tuple[dict, list[str]]:
    """The new version's scope without the operations and arguments the old
    version lacks (an operation added by the change, say); and what was left out."""

    def has(op: str, arg: str | None = None) -> bool:
        operation = spec.operations.get(op)
        return operation is not None and (arg is None or arg in (operation.args_schema.get("properties") or {}))

    out, dropped = dict(raw), []
    args = {}
    for op, values in (raw.get("args") or {}).items():
        kept = {arg: v for arg, v in values.items() if has(op, arg)}
        dropped += [f"{op}.{arg}" for arg in values if arg not in kept]
        if kept:
            args[op] = kept
    out["args"] = args
    optional = [item for item in raw.get("optional") or () if has(*item.split(".", 1))]
    dropped += [item for item in raw.get("optional") or () if item not in optional]
    out["optional"] = optional
    out["skip"] = [op for op in raw.get("skip") or () if has(op)]
    dropped += [op for op in raw.get("skip") or () if not has(op)]
    return out, sorted(set(dropped))


# -- one step on one model -----------------------------------------------------------------
def _step(model: ScopeModel, move: Transition) -> StepOutcome:
    before = {k: dict(r) for k, r in model.store.records.items()}
    acts_before = dict(model.coverage.counts["policies"])
    model.generated = []
    try:
        if move.operation is None:
            prediction = model.advance(model.now + move.advance_ms)
        else:
            prediction = model.predict(move.operation, dict(move.args))
    except _FAILURES as exc:
        return StepOutcome(failed=str(exc) if isinstance(exc, StatemachinesError) else type(exc).__name__)
    return _outcome(model, prediction, before, acts_before)


def _outcome(model: ScopeModel, prediction: Prediction, before: dict, acts_before: dict) -> StepOutcome:
    field_name = model.spec.lifecycle.field
    records = model.store.records
    after = {k: r.get(field_name) for k, r in records.items()}
    acts = tuple(sorted(name for name, n in model.coverage.counts["policies"].items() if n > acts_before.get(name, 0)))
    removals = [a for a in acts if a.endswith((".evicted", ".expired"))]
    return StepOutcome(
        error=(prediction.error or {}).get("kind"),
        result=_plain(prediction.result),
        created=tuple(k for k in after if k not in before),
        removed={
            k: (r.get(field_name), removals[0] if removals else None) for k, r in before.items() if k not in after
        },
        changed={
            k: (before[k].get(field_name), s)
            for k, s in after.items()
            if k in before and before[k].get(field_name) != s
        },
        fields={
            k: changes for k, r in records.items() if k in before and (changes := _set_fields(before[k], r, field_name))
        },
        effects=tuple((e.get("effect"), _effect_text(e)) for e in prediction.effects),
        acts=acts,
    )


def _set_fields(before: dict, after: dict, lifecycle_field: str) -> dict:
    return {f: v for f, v in after.items() if f != lifecycle_field and before.get(f, _UNSET) != v}


def _effect_text(effect: dict) -> str:
    """An effect's fields as JSON; a field the implementation fills (a matcher) as its checks."""
    fields = {k: dict(v.checks) if isinstance(v, Matcher) else _plain(v) for k, v in effect.items() if k != "effect"}
    return json.dumps(fields, ensure_ascii=False, default=repr)


# -- saying what differs -------------------------------------------------------------------------
class _Words:
    """Sentences in the spec's own terms: its entity, scope field, policies."""

    def __init__(self, spec: Spec):
        self.spec = spec
        self.entity = spec.entity.name

    def record(self, key: Any) -> str:
        return f"{self.entity} {key}"

    def act(self, event: str | None) -> str:
        """How a record went: ``evicted by policy retention (the oldest by completion_order)``."""
        if event is None:
            return "removed"
        name, _, what = event.partition(".")
        policy = self.spec.policies.get(name)
        if policy is not None and policy.kind == "keep_newest":
            return f"{what} by policy {name} (the oldest by {policy.config.get('ordering')})"
        return f"{what} by policy {name}"

    def call(self, move: Transition) -> str:
        if move.operation is None:
            return f"the clock moves {move.advance_ms} ms"
        return f"{move.operation}({', '.join(f'{k}={v}' for k, v in move.args)})"


@dataclass
class _Walk:
    """The new version's outcomes along a path, with each record's last known
    status and scope value (an evicted record keeps what it had)."""

    outcomes: list[StepOutcome] = field(default_factory=list)
    status: dict = field(default_factory=dict)
    scope: dict = field(default_factory=dict)


def _history(spec: Spec, path: list[Transition], walk: _Walk, with_last: bool) -> str:
    """The path before its end (``with_last``: up to and with it), in the
    model's terms: how many records reached a terminal state (of one scope
    value, when the spec scopes records)."""
    terminal = spec.lifecycle.terminal
    outcomes = walk.outcomes if with_last else walk.outcomes[:-1]
    ended = [k for o in outcomes for k, (_, to) in o.changed.items() if to in terminal]
    ended += [k for o in outcomes for k in o.created if walk.status.get(k) in terminal and k not in ended]
    if not ended:
        before = len(path) - 1
        return f"after {before} step{'s' if before > 1 else ''}" if before else "at the first step"
    scope_field = spec.entity.scope_field
    scopes = {walk.scope.get(k) for k in ended}
    where = f" of {scope_field} {next(iter(scopes))}" if scope_field and len(scopes) == 1 and None not in scopes else ""
    many = f"{len(ended)} {spec.entity.name}s" if len(ended) > 1 else f"a {spec.entity.name}"
    return f"after {many}{where} {'reach' if len(ended) > 1 else 'reaches'} a terminal state"


def _difference(words: _Words, move: Transition, old: StepOutcome, new: StepOutcome) -> tuple[str, str, str] | None:
    """(aspect, what new does, what old does) for the first aspect that differs."""
    for aspect in ("failed", "error", "removed", "changed", "created", "fields", "effects", "result"):
        a, b = getattr(old, aspect), getattr(new, aspect)
        if a != b:
            say = _SAY[aspect]
            return aspect, say(words, move, b, a, False), say(words, move, a, b, True)
    return None


def _verb(present: str, past: str, is_past: bool) -> str:
    return past if is_past else present


def _say_failed(words: _Words, move: Transition, value: Any, other: Any, past: bool) -> str:
    if value:
        return f"{words.call(move)} {_verb('cannot', 'could not', past)} be evaluated ({value})"
    return f"it {_verb('evaluates', 'evaluated', past)}"


def _say_error(words: _Words, move: Transition, value: Any, other: Any, past: bool) -> str:
    if value:
        return f"{'it' if past else words.call(move)} {_verb('fails', 'failed', past)} with {value}"
    return f"{'it' if past else words.call(move)} {_verb('succeeds', 'succeeded', past)}"


def _say_removed(words: _Words, move: Transition, value: dict, other: dict, past: bool) -> str:
    if value:
        be = _verb("is", "was", past)
        return "; ".join(f"{words.record(k)} ({status}) {be} {words.act(act)}" for k, (status, act) in value.items())
    kept = ", ".join(str(k) for k in other)
    if past:
        return "it was kept" if len(other) == 1 else "they were kept"
    return f"{words.entity} {kept} {'is' if len(other) == 1 else 'are'} kept"


def _say_changed(words: _Words, move: Transition, value: dict, other: dict, past: bool) -> str:
    subject = "it" if past else words.call(move)
    if not value:
        leaves = _verb("leaves", "left", past)
        return ", ".join(f"{subject} {leaves} {words.record(k)} {frm}" for k, (frm, _) in other.items())
    moves = _verb("moves", "moved", past)
    return ", ".join(f"{subject} {moves} {words.record(k)} from {frm} to {to}" for k, (frm, to) in value.items())


def _say_fields(words: _Words, move: Transition, value: dict, other: dict, past: bool) -> str:
    subject = "it" if past else words.call(move)
    sets = _verb("sets", "set", past)
    parts = []
    for key in dict.fromkeys([*value, *other]):
        mine, theirs = value.get(key, {}), other.get(key, {})
        differ = [f for f in dict.fromkeys([*mine, *theirs]) if mine.get(f, _UNSET) != theirs.get(f, _UNSET)]
        said = [f"{f} to {json.dumps(_plain(mine[f]), default=repr)}" for f in differ if f in mine]
        kept = [f for f in differ if f not in mine]
        if said:
            parts.append(f"{subject} {sets} {words.record(key)}'s {', '.join(said)}")
        if kept:
            parts.append(f"{subject} {_verb('leaves', 'left', past)} {words.record(key)}'s {', '.join(kept)} as it was")
    return "; ".join(parts)


def _say_created(words: _Words, move: Transition, value: tuple, other: tuple, past: bool) -> str:
    creates = _verb("creates", "created", past)
    made = ", ".join(words.record(k) for k in value) if value else f"no {words.entity}"
    return f"{move.operation} {creates} {made}"


def _say_effects(words: _Words, move: Transition, value: tuple, other: tuple, past: bool) -> str:
    extra = [f"{name} {fields}" for name, fields in value if (name, fields) not in other]
    emits = _verb("emits", "emitted", past)
    subject = "it" if past else words.call(move)
    return f"{subject} {emits} {'; '.join(extra)}" if extra else f"{subject} {emits} no such effect"


def _say_result(words: _Words, move: Transition, value: Any, other: Any, past: bool) -> str:
    text = json.dumps(value, ensure_ascii=False, default=repr)
    text = text if len(text) <= 160 else text[:159] + "…"
    return f"{'it' if past else words.call(move)} {_verb('answers', 'answered', past)} {text}"


_SAY = {
    "failed": _say_failed,
    "error": _say_error,
    "removed": _say_removed,
    "changed": _say_changed,
    "created": _say_created,
    "fields": _say_fields,
    "effects": _say_effects,
    "result": _say_result,
}


# -- the search --------------------------------------------------------------------------------------
@dataclass
class _Pair:
    snaps: tuple[tuple, tuple]
    depth: int
    parent: int | None
    step: Transition | None


class _Lockstep:
    """Both versions' models, breadth first over the same moves."""

    def __init__(self, old: Spec, new: Spec, scopes: tuple[Scope, Scope], budget: SearchBudget):
        self.old, self.new, self.scopes = old, new, scopes
        self.models = (
            ScopeModel(old, scopes[0].parameters, scopes[0].generated),
            ScopeModel(new, scopes[1].parameters, scopes[1].generated),
        )
        for model in self.models:
            model.reset(0)
        self.scope = scopes[1]
        shared = set(old.operations) & set(new.operations)
        offered = old.offered_operations(scopes[0].parameters) & new.offered_operations(scopes[1].parameters)
        self.operations = [op for op in new.operations if op in shared and op in offered and op not in self.scope.skip]
        self.pairs: list[_Pair] = []
        self.index: dict[tuple, int] = {}
        self.found: dict[tuple, Behaviour] = {}
        self.budget = budget
        self.stopped: str | None = None
        self.exhausted: str | None = None
        self.closed = True
        self.words = _Words(new)
        self.last: tuple[StepOutcome, StepOutcome] = (StepOutcome(), StepOutcome())

    def add(self, parent: int | None, step: Transition | None, depth: int) -> int | None:
        form = tuple(canonical_form(model, scope)[0] for model, scope in zip(self.models, self.scopes))
        if form in self.index:
            return None
        self.index[form] = len(self.pairs)
        self.pairs.append(_Pair((save_state(self.models[0]), save_state(self.models[1])), depth, parent, step))
        return len(self.pairs) - 1

    def path(self, pair_id: int | None) -> list[Transition]:
        steps: list[Transition] = []
        while pair_id is not None and self.pairs[pair_id].step is not None:
            steps.append(self.pairs[pair_id].step)  # type: ignore[arg-type]  # checked in the loop condition
            pair_id = self.pairs[pair_id].parent
        return steps[::-1]

    def moves(self, pair: _Pair) -> Iterator[Transition]:
        """One pair's moves, one at a time (a wide scope has millions)."""
        keys = list(dict.fromkeys([*pair.snaps[1][1].records, *pair.snaps[0][1].records]))
        for op in self.operations:
            for args in operation_arguments(self.new, self.scope, op, keys):
                yield Transition(op, args)
        for ms in self.scope.advance_ms:
            yield Transition(None, advance_ms=ms)

    def out_of_budget(self, depth: int) -> bool:
        """Checked at every move, inside one pair's expansion too."""
        if self.stopped is not None:
            return True
        if len(self.pairs) >= self.scope.max_states:
            self.stopped = f"max_states {self.scope.max_states}"
            if any(note.startswith("check.scope.max_states ") for note in self.scope.ceilinged):
                self.exhausted = f"the kit's ceiling of {self.scope.max_states:,} states"
        elif self.budget.over(len(self.pairs), depth):
            self.stopped = self.exhausted = self.budget.spent
        return self.stopped is not None

    def expand(self, pair_id: int) -> None:
        pair = self.pairs[pair_id]
        for move in self.moves(pair):
            if self.out_of_budget(pair.depth):
                return
            outcomes = []
            for model, snap in zip(self.models, pair.snaps):
                load_state(model, snap)
                outcomes.append(_step(model, move))
            differs = _difference(self.words, move, outcomes[0], outcomes[1])
            if differs is not None:
                self.last = (outcomes[0], outcomes[1])
                self.note(pair_id, move, differs)
                continue
            if max(len(m.store) for m in self.models) <= self.scope.max_records:
                self.add(pair_id, move, pair.depth + 1)

    def note(self, pair_id: int, move: Transition, differs: tuple[str, str, str]) -> None:
        aspect, new_text, old_text = differs
        key = (aspect, move.operation, _kind(aspect, self.last[0]), _kind(aspect, self.last[1]))
        if key in self.found or len(self.found) >= MAX_BEHAVIOURS:
            return
        path = [*self.path(pair_id), move]
        history = _history(self.new, path, self._replay(path), with_last=aspect == "removed")
        sentence = f"{history}, {new_text}; before, {old_text}"
        self.found[key] = Behaviour(path, aspect, sentence, old_text, new_text)

    def _replay(self, path: list[Transition]) -> _Walk:
        """The new version's model along ``path``."""
        model, walk = self.models[1], _Walk()
        model.reset(0)
        field_name, scope_field = self.new.lifecycle.field, self.new.entity.scope_field
        for move in path:
            walk.outcomes.append(_step(model, move))
            for key, record in model.store.records.items():
                walk.status[key] = record.get(field_name)
                walk.scope[key] = record.get(scope_field) if scope_field else None
        return walk

    def run(self) -> None:
        queue = deque([self.add(None, None, 0)])
        while queue:
            pair_id = queue.popleft()
            if pair_id is None:
                continue
            if self.pairs[pair_id].depth >= self.scope.max_depth:
                self.closed = False
                continue
            if self.out_of_budget(self.pairs[pair_id].depth):
                break
            before = len(self.pairs)
            self.expand(pair_id)
            queue.extend(range(before, len(self.pairs)))


def _kind(aspect: str, outcome: StepOutcome) -> Any:
    """What a behaviour is, without its keys and values: one behaviour is
    listed once, not once per record, outcome or argument value."""
    if aspect == "removed":
        return tuple(sorted({act or "" for _, act in outcome.removed.values()}))
    if aspect == "changed":
        return tuple(sorted(set(outcome.changed.values())))
    if aspect == "created":
        return len(outcome.created)
    if aspect == "fields":
        return tuple(sorted({f for changes in outcome.fields.values() for f in changes}))
    if aspect == "effects":
        return tuple(sorted({name for name, _ in outcome.effects}))
    if aspect == "error":
        return outcome.error
    return None


def diff_behaviour(
    old: Spec,
    new: Spec,
    overrides: dict | None = None,
    time_limit: float | None = None,
    budget: SearchBudget | None = None,
) -> BehaviourDiff:
    """Behaviours possible under one version and not the other, within the
    new version's scope and ``budget`` (default: ``time_limit`` seconds, the
    kit's memory budget; ``exhausted`` says what ran out)."""
    old_scope, new_scope, notes, problems = search_scopes(old, new, overrides)
    parameters = {
        name: [old_scope.parameters.get(name), new_scope.parameters.get(name)]
        for name in sorted(set(old_scope.parameters) | set(new_scope.parameters))
        if old_scope.parameters.get(name) != new_scope.parameters.get(name)
    }
    out = BehaviourDiff([], notes, parameters, problems=problems)
    if problems:
        out.complete = False
        return out
    if budget is None:
        budget = SearchBudget(time_limit_s=DEFAULT_TIME_LIMIT_S if time_limit is None else time_limit)
    search = _Lockstep(old, new, (old_scope, new_scope), budget)
    out.notes += [note for note in new_scope.ceilinged if note not in out.notes]
    alone = sorted(set(old.operations) ^ set(new.operations))
    if alone:
        out.notes.append(f"not called (in one version only; see the changes above): {', '.join(alone)}")
    start = time.perf_counter()
    try:
        search.run()
    except StatemachinesError as exc:  # a scope without values for an argument
        out.problems.append(str(exc))
    except MemoryError:  # what the memory budget did not see coming: the search ends, with what it found
        search.stopped = search.exhausted = "the memory it could get"
    out.seconds = time.perf_counter() - start
    out.behaviours = sorted(search.found.values(), key=lambda b: len(b.path))
    out.states = len(search.pairs)
    out.depth = max((p.depth for p in search.pairs), default=0)
    out.stopped = search.stopped
    out.exhausted = search.exhausted
    out.complete = search.stopped is None and not out.problems
    return out
