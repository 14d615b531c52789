"""An operation's steps compiled, one method per step kind.

``StepCompiler._STEP`` maps each kind a spec may write (``steps.STEP_KINDS``)
to the method that compiles it into its class (``steps.STEP_CLASSES``); the
model's ``Model._STEP`` interprets each class (tests/test_step_dispatch.py
checks both tables cover exactly the same kinds). A method returns None when
one of the step's expressions fails to compile: its problem is recorded, so
the spec being built is never returned, and the step is left out."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..language.expressions import Expression
from ..load.spec import EffectDecl
from . import steps as S
from .compile_context import CompileContext

__all__ = ["StepCompiler"]


def _every_compiled(values: dict[str, Expression | None]) -> dict[str, Expression] | None:
    """``values`` when every expression in it compiled; None when one failed
    (its problem is recorded, so the spec being built is never returned)."""
    compiled = {name: e for name, e in values.items() if e is not None}
    return compiled if len(compiled) == len(values) else None


@dataclass(frozen=True)
class _StepSite:
    """One operation step being compiled: its mapping, its kind and where it is."""

    raw: dict  # the whole step: some kinds read keys beside their own (`error`, `message`, `do`, `else`)
    kind: str
    path: tuple  # the step's path in the spec
    where: str  # file:line of the step

    @property
    def body(self) -> Any:
        """The value under the step's kind (`find: {...}` -> the mapping)."""
        return self.raw[self.kind]

    @property
    def at(self) -> tuple:
        """The path of the step's kind key, where problems with its body point."""
        return self.path + (self.kind,)


@dataclass(frozen=True)
class _QueryParts:
    """What `for_each` and `collect` share: the names in scope inside, which
    records (scope, states, condition) and the condition over all of them."""

    inner: set[str]
    scope: Expression | None
    states: frozenset[str] | None
    condition: Expression | None
    condition_all: Expression | None


class StepCompiler(CompileContext):
    """Compiles an operation's (or ``on_clock``'s) steps, checking what they name."""

    def _error_spec(self, raw: dict, path: tuple, scope: set[str]) -> S.ErrorSpec | None:
        """An error a step answers with: a kind the operation declares and a message (None if it fails to compile)."""
        if raw["kind"] not in self._op_errors:
            self.problem(
                path + ("kind",),
                f"error kind {raw['kind']!r} is not listed in operation {self._op_name}'s errors",
                f"add it: errors: [{', '.join(sorted(self._op_errors | {raw['kind']}))}]",
                code="undeclared-error",
            )
        message = self.expr(raw["message"], path + ("message",), scope)
        return S.ErrorSpec(raw["kind"], message) if message is not None else None

    def _fields(self, raw: dict, path: tuple, scope: set[str], *, creating: bool) -> dict[str, Expression] | None:
        """The fields a `create` or `set` writes; None when a value fails to compile."""
        known = set(self.entity.fields) | set(self.entity.internal)
        out: dict[str, Expression | None] = {}
        for fname, source in raw.items():
            if fname not in known:
                self.problem(
                    path + (fname,),
                    f"unknown field {fname!r} of {self.entity.name}",
                    f"fields: {', '.join(sorted(known))}",
                )
            elif fname == self.lifecycle.field:
                self.problem(
                    path + (fname,),
                    f"{fname!r} is the lifecycle field; it changes only by `fire`"
                    if not creating
                    else f"{fname!r} is set to the initial state on create; do not set it",
                )
            out[fname] = self.expr(source, path + (fname,), scope)
        return _every_compiled(out)

    def _steps(self, raw_steps: list, path: tuple, scope: set[str]) -> list[S.Step]:
        out = []
        for i, raw in enumerate(raw_steps):
            step = self._step(raw, path + (i,), scope)
            if step is not None:
                out.append(step)
        return out

    def _need_bound(self, name: str, scope: set[str], path: tuple) -> None:
        if name not in scope:
            self.problem(path, f"{name!r} is not bound here", "bind it first with `find`, `create` or `for_each`")

    # Each step kind has a method below that compiles it: None when one of the
    # step's expressions fails to compile (the problem is recorded, so the spec
    # being built is never returned and the step is left out).
    def _step(self, raw: dict, path: tuple, scope: set[str]) -> S.Step | None:
        kind = next(k for k in S.STEP_KINDS if k in raw)
        return self._STEP[kind](self, _StepSite(raw, kind, path, self.where(path)), scope)

    def _let(self, site: _StepSite, scope: set[str]) -> S.Let | None:
        values = _every_compiled({k: self.expr(v, site.at + (k,), scope) for k, v in site.body.items()})
        scope.update(site.body)
        self._records.difference_update(site.body)  # a let rebinds: its type is not known
        return S.Let(values, site.where) if values is not None else None

    def _require(self, site: _StepSite, scope: set[str]) -> S.Require | None:
        condition = self.cond(site.body, site.at, scope, "a `require` condition")
        error = self._error_spec(site.raw["error"], site.path + ("error",), scope)
        return S.Require(condition, error, site.where) if condition is not None and error is not None else None

    def _reject(self, site: _StepSite, scope: set[str]) -> S.Reject | None:
        error = self._error_spec(site.body, site.at, scope)
        return S.Reject(error, site.where) if error is not None else None

    def _check(self, site: _StepSite, scope: set[str]) -> S.Check | None:
        condition = self.cond(site.body, site.at, scope, "a `check`")
        return S.Check(condition, site.raw["message"], site.where) if condition is not None else None

    def _find(self, site: _StepSite, scope: set[str]) -> S.Find:
        body, p = site.body, site.at
        if ("key" in body) == ("by" in body):
            self.problem(p, "find needs exactly one of `key` or `by`")
        by_field, by_value = self._find_by(body["by"], p + ("by",), scope) if "by" in body else (None, None)
        scope_expr = self.expr(body["scope"], p + ("scope",), scope) if "scope" in body else None
        if scope_expr is not None and not self.entity.scope_field:
            self.problem(
                p + ("scope",),
                "find with `scope` needs a scope policy",
                "add policies: {scope: {kind: scope, field: ...}}",
            )
        step = S.Find(
            body["as"],
            self.expr(body["key"], p + ("key",), scope) if "key" in body else None,
            by_field,
            by_value,
            scope_expr,
            self._error_spec(body["missing"], p + ("missing",), scope) if "missing" in body else None,
            site.where,
        )
        scope.add(body["as"])
        self._records.add(body["as"])
        return step

    def _find_by(self, by: dict, path: tuple, scope: set[str]) -> tuple[str, Expression | None]:
        """`find: {by: {field: value}}`: the field (a unique index or the key) and the value's expression."""
        by_field, by_source = next(iter(by.items()))
        if by_field not in self.entity.unique_indexes and by_field != self.entity.key:
            self.problem(
                path,
                f"find by {by_field!r} needs a unique index on it",
                f"declare entity.indexes.{by_field}: {{unique: true}}",
            )
        return by_field, self.expr(by_source, path + (by_field,), scope)

    def _create(self, site: _StepSite, scope: set[str]) -> S.Create | None:
        body, p = site.body, site.at
        fields = self._fields(body["fields"], p + ("fields",), scope, creating=True)
        if self.entity.key not in body["fields"]:
            self.problem(p + ("fields",), f"create must set the key field {self.entity.key!r}")
        scope.add(body["as"])
        self._records.add(body["as"])
        return S.Create(body["as"], fields, site.where) if fields is not None else None

    def _fire(self, site: _StepSite, scope: set[str]) -> S.Fire:
        body, p = site.body, site.at
        if body["trigger"] not in self.lifecycle.triggers:
            self.problem(
                p + ("trigger",),
                f"unknown trigger {body['trigger']!r}",
                f"triggers: {', '.join(sorted(self.lifecycle.triggers))}",
            )
        self._need_bound(body["on"], scope, p + ("on",))
        otherwise = body.get("otherwise", "ignore")
        err = None if otherwise == "ignore" else self._error_spec(otherwise, p + ("otherwise",), scope)
        if body.get("as"):
            scope.add(body["as"])
            self._records.discard(body["as"])
        return S.Fire(body["trigger"], body["on"], body.get("as"), err, site.where)

    def _set(self, site: _StepSite, scope: set[str]) -> S.SetFields | None:
        body, p = site.body, site.at
        self._need_bound(body["on"], scope, p + ("on",))
        fields = self._fields(body["fields"], p + ("fields",), scope, creating=False)
        return S.SetFields(body["on"], fields, site.where) if fields is not None else None

    def _when(self, site: _StepSite, scope: set[str]) -> S.When | None:
        cond = self.cond(site.body, site.at, scope, "a `when` condition")
        then = self._steps(site.raw["do"], site.path + ("do",), scope)
        other = self._steps(site.raw.get("else") or [], site.path + ("else",), scope)
        return S.When(cond, then, other, site.where) if cond is not None else None

    def _emit(self, site: _StepSite, scope: set[str]) -> S.Emit | None:
        body, p = site.body, site.at
        if body["effect"] not in self.effects:
            self.problem(
                p + ("effect",),
                f"unknown effect {body['effect']!r}",
                f"declared effects: {', '.join(self.effects) or '(none)'}",
            )
        fields: dict[str, Expression | S.MatcherSpec] = {}
        failed = False
        declared = set((self.effects.get(body["effect"]) or EffectDecl("", {})).schema.get("properties") or {})
        for fname, value in (body.get("fields") or {}).items():
            if declared and fname not in declared:
                self.problem(
                    p + ("fields", fname),
                    f"effect {body['effect']} has no field {fname!r}",
                    f"its fields: {', '.join(sorted(declared))}",
                )
            emitted = self._emitted_value(value, p + ("fields", fname), scope)
            if emitted is None:
                failed = True
            else:
                fields[fname] = emitted
        return S.Emit(body["effect"], fields, site.where) if not failed else None

    def _emitted_value(self, value: Any, path: tuple, scope: set[str]) -> Expression | S.MatcherSpec | None:
        """An emitted field's value: an expression, or a mapping of matcher kinds to operands."""
        if not isinstance(value, dict):
            return self.expr(value, path, scope)
        return S.MatcherSpec(
            tuple((k, None if k == "any" else self.expr(v, path + (k,), scope)) for k, v in value.items())
        )

    def _query(self, site: _StepSite, scope: set[str]) -> _QueryParts:
        """What `for_each` and `collect` share: the records they go over and how they are ordered."""
        body, p, ent = site.body, site.at, self.entity.name
        if body.get("ordering") and body["ordering"] not in self.orderings:
            self.problem(
                p + ("ordering",),
                f"unknown ordering {body['ordering']!r}",
                f"orderings: {', '.join(self.orderings) or '(none)'}",
            )
        scope_expr = self.expr(body["scope"], p + ("scope",), scope) if "scope" in body else None
        states = self._states_filter(body.get("states"), p + ("states",))
        inner = scope | {ent}
        records = set(self._records)
        self._records.add(ent)
        cond = self.cond(body["where"], p + ("where",), inner, "a `where` condition") if "where" in body else None
        self._records = records
        cond_all = (
            self.expr(f"kit_records.map({ent}, ({body['where']}))", p + ("where",), None, max_chars=None)
            if cond is not None
            else None
        )
        return _QueryParts(inner, scope_expr, states, cond, cond_all)

    def _for_each(self, site: _StepSite, scope: set[str]) -> S.ForEach:
        body, p, ent = site.body, site.at, self.entity.name
        query = self._query(site, scope)
        loop_scope = set(query.inner)
        loop_scope.discard(body["as"]) if body["as"] != ent else None
        loop_scope.add(body["as"])
        self._records.add(body["as"])
        steps = self._steps(body["do"], p + ("do",), loop_scope)
        scope.update(n for n in loop_scope if n not in (ent, body["as"]))
        return S.ForEach(
            bind=body["as"],
            scope=query.scope,
            states=query.states,
            condition=query.condition,
            ordering=body.get("ordering"),
            condition_all=query.condition_all,
            fields=self._projection([(body.get("where"), p + ("where",))], ent),
            body=steps,
            where=site.where,
        )

    def _for_items(self, site: _StepSite, scope: set[str]) -> S.ForItems | None:
        body, p = site.body, site.at
        items = self.expr(body["in"], p + ("in",), scope)
        loop_scope = set(scope) | {body["as"]}
        records = set(self._records)
        self._records.discard(body["as"])  # a value, not a record of the entity
        steps = self._steps(body["do"], p + ("do",), loop_scope)
        self._records = records
        scope.update(n for n in loop_scope if n != body["as"])
        return S.ForItems(bind=body["as"], items=items, body=steps, where=site.where) if items is not None else None

    def _collect(self, site: _StepSite, scope: set[str]) -> S.Collect | None:
        body, p, ent = site.body, site.at, self.entity.name
        query = self._query(site, scope)
        select = self.expr(body["select"], p + ("select",), query.inner)
        select_all = (
            self.expr(f"kit_records.map({ent}, ({body['select']}))", p + ("select",), None, max_chars=None)
            if select
            else None
        )
        scope.add(body["as"])
        fields = self._projection([(body.get("where"), p + ("where",)), (body["select"], p + ("select",))], ent)
        if select is None:
            return None
        return S.Collect(
            bind=body["as"],
            scope=query.scope,
            states=query.states,
            condition=query.condition,
            ordering=body.get("ordering"),
            condition_all=query.condition_all,
            fields=fields,
            select=select,
            where=site.where,
            select_all=select_all,
        )

    def _apply(self, site: _StepSite, scope: set[str]) -> S.Apply:
        body, p = site.body, site.at
        self._check_applied_policy(body, p)
        if body.get("on"):
            self._need_bound(body["on"], scope, p + ("on",))
        scope_expr = self.expr(body["scope"], p + ("scope",), scope) if "scope" in body else None
        if body.get("as"):
            scope.add(body["as"])
        return S.Apply(body["policy"], body.get("on"), body.get("as"), scope_expr, site.where)

    def _check_applied_policy(self, body: dict, path: tuple) -> None:
        """An `apply` names a declared policy of a kind a step applies, with what that kind needs."""
        policy = self.policies.get(body["policy"])
        if policy is None:
            self.problem(
                path + ("policy",),
                f"unknown policy {body['policy']!r}",
                f"policies: {', '.join(self.policies) or '(none)'}",
            )
        elif policy.kind == "inline_or_spill" and not (body.get("on") and body.get("as")):
            self.problem(
                path, "apply of an inline_or_spill policy needs `on` (the entity) and `as` (a name for the verdict)"
            )
        elif policy.kind == "keep_newest" and policy.config.get("scope") and "scope" not in body:
            self.problem(path, f"apply of {body['policy']} needs `scope` (which {policy.config['scope']} to trim)")
        elif policy.kind not in ("inline_or_spill", "keep_newest"):
            self.problem(path + ("policy",), f"a {policy.kind} policy is not applied by a step")

    def _table_key(self, site: _StepSite, scope: set[str]) -> Expression | None:
        """`put` and `drop`: the table must be declared; the key's expression."""
        body, p = site.body, site.at
        if body["table"] not in self.tables:
            self.problem(
                p + ("table",),
                f"unknown table {body['table']!r}",
                f"declare it under state.tables (known: {', '.join(self.tables) or 'none'})",
            )
        return self.expr(body["key"], p + ("key",), scope)

    def _put(self, site: _StepSite, scope: set[str]) -> S.Put | None:
        body, p = site.body, site.at
        key = self._table_key(site, scope)
        value = self.expr(body["value"], p + ("value",), scope) if "value" in body else None
        return S.Put(body["table"], key, value, site.where) if key is not None else None

    def _drop(self, site: _StepSite, scope: set[str]) -> S.Drop | None:
        key = self._table_key(site, scope)
        return S.Drop(site.body["table"], key, site.where) if key is not None else None

    def _counter(self, site: _StepSite, scope: set[str]) -> S.Counter:
        body = site.body
        if body["name"] not in self.counters:
            self.problem(site.at + ("name",), f"unknown counter {body['name']!r}", "declare it under state.counters")
        scope.add(body["as"])
        return S.Counter(body["name"], body["as"], site.where)

    def _reset(self, site: _StepSite, scope: set[str]) -> S.Reset:
        return S.Reset(site.where)

    def _remove(self, site: _StepSite, scope: set[str]) -> S.Remove:
        self._need_bound(site.body["on"], scope, site.at + ("on",))
        return S.Remove(site.body["on"], site.where)

    def _advance(self, site: _StepSite, scope: set[str]) -> S.Advance | None:
        if self._op_name == "on_clock":
            self.problem(site.at, "on_clock steps run while the clock moves; they cannot move it themselves")
        to = self.expr(site.body["to"], site.at + ("to",), scope)
        return S.Advance(to, site.where) if to is not None else None

    def _result(self, site: _StepSite, scope: set[str]) -> S.Result | None:
        body, p = site.body, site.at
        value: Expression | dict[str, Expression] | None = (
            _every_compiled({k: self.expr(v, p + (k,), scope) for k, v in body.items()})
            if isinstance(body, dict)
            else self.expr(body, p, scope)
        )
        return S.Result(value, site.where) if value is not None else None

    # Each step kind (steps.STEP_KINDS) -> the method compiling it; the model's
    # Model._STEP interprets each compiled class (tests/test_step_dispatch.py).
    _STEP: dict[str, Callable[[StepCompiler, _StepSite, set[str]], S.Step | None]] = {
        "let": _let,
        "require": _require,
        "reject": _reject,
        "check": _check,
        "find": _find,
        "create": _create,
        "fire": _fire,
        "set": _set,
        "when": _when,
        "emit": _emit,
        "for_each": _for_each,
        "for_items": _for_items,
        "collect": _collect,
        "apply": _apply,
        "put": _put,
        "drop": _drop,
        "counter": _counter,
        "reset": _reset,
        "result": _result,
        "remove": _remove,
        "advance": _advance,
    }
