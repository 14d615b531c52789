"""Turn a spec file into a validated ``Spec``.

Stages, each reporting every problem it finds (file:line, what, how to fix):
safe YAML load (with ``include:`` fragments) -> structure against the JSON
Schema of the format -> build with CEL compilation -> semantic checks
(unknown states, triggers, operations, fields, variables, bounds).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

from ..errors import ExpressionError, Problem, SpecError
from ..language.expressions import (
    MAX_EXPRESSION_CHARS,
    PURE_FUNCTIONS,
    Expression,
    compile_expression,
    fields_used,
    type_name,
)
from ..load.includes import IncludeRefused, is_spec_fragment, resolve_include
from ..load.scenario import AdvanceStep, CallStep, ConcurrentStep, RepeatStep, template_names
from ..load.schema_check import check_structure, spec_format_schema
from ..load.source import SourceMap, load_yaml_file, load_yaml_text, read_spec_text
from ..load.spec import (
    EffectDecl,
    Entity,
    Exploration,
    Invariant,
    Lifecycle,
    Operation,
    Ordering,
    Parameter,
    Policy,
    Profile,
    Scenario,
    Spec,
    State,
    Transition,
)
from . import steps as S

__all__ = ["load_spec", "compile_spec", "load_spec_data", "load_replay_file"]

# Capabilities a scenario may require of an implementation (a closed list).
FEATURES = frozenset({"concurrent"})
_BASE_VARS = {"args", "params", "now", "terminal_states"}
_TOP_LEVEL_KEYS = frozenset(spec_format_schema()["properties"])
_POLICY_FIELDS = {
    "scope": {"field"},
    "ordering": {"ordering"},
    "keep_newest": {"limit", "ordering"},
    "expire": {"when"},
    "at_most_once": {"flag", "effect"},
    "inline_or_spill": {"arg", "max_lines", "max_bytes"},
}
_POLICY_EXPRS = {"keep_newest": ("limit",), "expire": ("when",), "inline_or_spill": ("max_lines", "max_bytes")}
# Optional expressions of a policy: `payload` (what is measured, instead of the
# argument `arg`; it may read args) and `serialised` (measure the payload's JSON
# text instead of the raw string).
_POLICY_OPTIONAL_EXPRS = {"inline_or_spill": ("payload", "serialised")}
_POLICY_CONDITIONS = {"when", "serialised"}  # policy expressions that must be booleans
# Functions a constant expression may call and still be evaluated at load time.
_CEL_BUILTINS = frozenset(
    {
        "size",
        "int",
        "uint",
        "double",
        "string",
        "bool",
        "type",
        "dyn",
        "matches",
        "contains",
        "startsWith",
        "endsWith",
        "lowerAscii",
        "upperAscii",
        "join",
        "split",
        "replace",
        "trim",
        "indexOf",
        "lastIndexOf",
        "substring",
        "max",
        "min",
        "_[_]",
    }
) | frozenset(PURE_FUNCTIONS)


def _schema_types(schema: Any) -> list[str] | None:
    """The JSON types a declared field or argument can have, or None when unknown."""
    if not isinstance(schema, dict):
        return None
    declared = schema.get("type")
    if isinstance(declared, str):
        return [declared]
    if isinstance(declared, list) and all(isinstance(d, str) for d in declared):
        return list(declared)
    values = (
        schema["enum"] if isinstance(schema.get("enum"), list) else ([schema["const"]] if "const" in schema else None)
    )
    if values:
        return sorted({type_name(v).split()[-1] if not isinstance(v, bool) else "boolean" for v in values})
    return None


def load_spec_data(path: str | Path) -> tuple[dict, SourceMap]:
    """Load a spec file and the fragments it includes, merged, with a source map."""
    path = Path(path)
    data, smap = load_yaml_file(path)
    if not isinstance(data, dict):
        raise SpecError(
            [
                smap.problem(
                    (),
                    "a spec must be a YAML mapping at the top level",
                    "start the file with `format: lifecycle-spec/1`",
                )
            ]
        )
    problems: list[Problem] = []
    includes = data.get("include") or []
    for index, name in enumerate(includes if isinstance(includes, list) else []):
        if not isinstance(name, str):
            continue  # the structure check names it
        part, part_map = _load_fragment(path, name, smap.problem(("include", index), ""), problems)
        if part is None:
            continue
        if not isinstance(part, dict):
            problems.append(smap.problem(("include", index), f"included file {name} is not a YAML mapping"))
            continue
        for key, value in part.items():
            if key not in data:
                data[key] = value
                smap.merge(_sub(part_map, (key,)))
            elif isinstance(data[key], list) and isinstance(value, list):
                offset = len(data[key])
                data[key] = data[key] + value
                _shift(smap, part_map, key, offset)
            elif isinstance(data[key], dict) and isinstance(value, dict):
                for sub_key, sub_value in value.items():
                    if sub_key in data[key]:
                        problems.append(
                            part_map.problem(
                                (key, sub_key),
                                f"{key}.{sub_key} is defined both here and in {path.name}",
                                "define it in one file only",
                            )
                        )
                    else:
                        data[key][sub_key] = sub_value
                smap.merge(_sub(part_map, (key,)))
            else:
                problems.append(
                    part_map.problem(
                        (key,), f"`{key}` cannot be merged from an included file (only lists and mappings merge)"
                    )
                )
    if problems:
        # Keep checking what did load, so every problem is reported in one go.
        data["__load_problems__"] = problems
    return data, smap


def _load_fragment(spec_path: Path, name: str, entry: Problem, problems: list[Problem]):
    """One included fragment, read only from where includes may come from
    (``includes.py``); refusals are problems at the `include:` entry's line.
    Returns (data, source map) or (None, None)."""

    def refuse(message: str, hint: str) -> tuple[None, None]:
        problems.append(Problem(message, entry.file, entry.line, hint))
        return None, None

    try:
        shown, real = resolve_include(spec_path.parent, name)
        text = read_spec_text(real, shown=str(shown), regular_only=True)
    except IncludeRefused as exc:
        return refuse(str(exc), exc.hint)
    except SpecError as exc:  # unreadable, too big, not UTF-8, not a regular file by now
        first = exc.problems[0]
        return refuse(f"cannot read included file {name}: {first.message}", first.hint or "check the file")
    if text.strip() and is_spec_fragment(text, _TOP_LEVEL_KEYS) is False:
        return refuse(
            f"included file {name} is not a spec fragment: none of its top-level keys is a key of "
            f"the spec format (its content is not shown)",
            f"include only spec fragments (keys such as scenarios, operations, definitions); "
            f"known keys: {', '.join(sorted(_TOP_LEVEL_KEYS))}",
        )
    try:
        return load_yaml_text(text, str(shown))
    except SpecError as exc:
        problems.extend(exc.problems)
        return None, None


def _sub(part_map: SourceMap, prefix: tuple) -> SourceMap:
    out = SourceMap()
    for path, where in part_map._lines.items():
        if path[: len(prefix)] == prefix:
            out._lines[path] = where
    return out


def _shift(smap: SourceMap, part_map: SourceMap, key: str, offset: int) -> None:
    """Locations of an included list's items move by ``offset`` in the merged list."""
    for path, where in part_map._lines.items():
        if len(path) >= 2 and path[0] == key and isinstance(path[1], int):
            smap._lines[(key, path[1] + offset) + path[2:]] = where


def load_spec(path: str | Path) -> Spec:
    """Load, check and compile a spec file; raise SpecError listing every problem."""
    data, smap = load_spec_data(path)
    return compile_spec(data, smap, str(path))


def compile_spec(data: dict, smap: SourceMap | None = None, path: str = "<spec>") -> Spec:
    smap = smap or SourceMap()
    earlier = data.pop("__load_problems__", [])
    problems = earlier + check_structure(data, smap)
    if len(problems) > len(earlier):
        raise SpecError(problems)
    builder = _Builder(data, smap, path)
    spec = builder.build()
    if earlier or builder.problems:
        raise SpecError(earlier + builder.problems)
    return spec


class _Builder:
    """Builds a Spec, collecting problems instead of stopping at the first."""

    def __init__(self, data: dict, smap: SourceMap, path: str):
        self.data, self.smap, self.path = data, smap, path
        self.problems: list[Problem] = []
        self._records: set[str] = set()  # names bound to an entity record where a condition is compiled
        self._op_args: dict = {}  # the arguments schema of the operation being compiled

    # -- helpers ----------------------------------------------------------
    def where(self, path: tuple) -> str:
        file, line = self.smap.locate(path)
        return f"{file}:{line}" if line else (file or self.path)

    def problem(self, path: tuple, message: str, hint: str | None = None, code: str | None = None) -> None:
        self.problems.append(self.smap.problem(path, message, hint, code))

    def expr(
        self, source: Any, path: tuple, allowed: set[str] | None = None, *, max_chars: int | None = MAX_EXPRESSION_CHARS
    ) -> Expression | None:
        try:
            expression = compile_expression(source, self.where(path), max_chars=max_chars)
        except ExpressionError as exc:
            self.problem(
                path,
                str(exc).split(": ", 1)[-1],
                "write a CEL expression; quote string literals with single quotes inside the YAML string",
            )
            return None
        if allowed is not None:
            unknown = expression.unknown_names(allowed)
            if unknown:
                self.problem(
                    path,
                    f"`{expression.source}` uses unknown name(s): {', '.join(unknown)}",
                    f"names available here: {', '.join(sorted(allowed))}",
                )
        return expression

    def cond(self, source: Any, path: tuple, allowed: set[str] | None, role: str) -> Expression | None:
        """An expression whose value must be a boolean (a guard, requirement,
        check, condition or invariant): refused here when its type is already
        known to be something else; the model checks the rest at run time."""
        expression = self.expr(source, path, allowed)
        if expression is not None:
            what = self._known_type(expression)
            if what is not None:
                self.problem(
                    path,
                    f"`{expression.source}` is {role} and must be true or false, but it is {what}",
                    "write a comparison or a boolean, e.g. `job.status == 'done'` or `size(xs) > 0`",
                )
        return expression

    def _known_type(self, expression: Expression) -> str | None:
        """What a condition is, when it is known without running it and is not a
        boolean: a constant, or a field, parameter or argument of a declared type."""
        if not expression.variables and not (expression.functions - _CEL_BUILTINS):
            try:
                value = expression.evaluate({})
            except ExpressionError as exc:
                return f"an expression that fails ({str(exc).split(': ', 1)[-1]})"
            return None if isinstance(value, bool) else f"the constant {value!r} ({type_name(value)})"
        if expression.path is None or len(expression.path) != 2:
            return None
        head, name = expression.path
        if head == "params" and name in self.parameters:
            declared = self.parameters[name].type
            return None if declared == "boolean" else f"the {declared} parameter {name}"
        if head == "args":
            schema = (self._op_args.get("properties") or {}).get(name)
            kinds = _schema_types(schema)
            return None if kinds is None or "boolean" in kinds else f"argument {name} ({' or '.join(kinds)})"
        if head in self._records and hasattr(self, "entity"):
            schema = self.entity.fields.get(name, self.entity.internal.get(name))
            if name == self.lifecycle.field:
                return f"the lifecycle field {name} (a string)"
            kinds = _schema_types(schema)
            return (
                None
                if kinds is None or "boolean" in kinds
                else f"field {name} of {self.entity.name} ({' or '.join(kinds)})"
            )
        return None

    def _assumes(self, source: Any, path: tuple) -> Expression | None:
        """An `assumes` (over parameters): a boolean under the defaults and every profile."""
        return self._over_params(
            source,
            path,
            "an `assumes`",
            lambda v: isinstance(v, bool),
            "an `assumes` condition and must be true or false",
            "write a comparison over params, e.g. `params.max_running > 0`",
        )

    def _over_params(self, source: Any, path: tuple, role: str, fits, must: str, hint: str) -> Expression | None:
        """An expression over parameters that must evaluate, to a value ``fits``
        accepts, under the defaults and under every profile."""
        expression = self.expr(source, path, {"params"})
        if expression is None:
            return None
        defaults = {name: p.default for name, p in self.parameters.items()}
        settings = [("the defaults", defaults)] + [
            (f"profile {name}", {**defaults, **prof.parameters}) for name, prof in self.profiles.items()
        ]
        for label, params in settings:
            try:
                value = expression.evaluate({"params": params})
            except ExpressionError as exc:
                self.problem(
                    path,
                    f"`{expression.source}` fails under {label}: {str(exc).split(': ', 1)[-1]}",
                    f"{role} must evaluate under every profile",
                )
                return expression
            if not fits(value):
                self.problem(
                    path,
                    f"`{expression.source}` is {must}, but under {label} it gives {value!r} ({type_name(value)})",
                    hint,
                )
                return expression
        return expression

    # -- build ------------------------------------------------------------
    def build(self) -> Spec:
        d = self.data
        self.parameters = self._parameters()
        self.profiles = self._profiles()
        self.definitions = d.get("definitions") or {}
        self.lifecycle = self._lifecycle()
        self.orderings = {
            name: Ordering(name, tuple(o["by"]), o.get("description", ""))
            for name, o in (d.get("orderings") or {}).items()
        }
        self.entity = self._entity()
        self.tables = tuple((d.get("state") or {}).get("tables") or {})
        self.counters = tuple((d.get("state") or {}).get("counters") or {})
        self.effects = {
            name: EffectDecl(name, e.get("schema") or {"type": "object"}, e.get("description", ""))
            for name, e in (d.get("effects") or {}).items()
        }
        self.policies = self._policies()
        self._check_orderings()
        self.operations = {name: self._operation(name, op) for name, op in d["operations"].items()}
        self._op_errors, self._op_name = set(), "on_clock"
        on_clock = self._steps(d.get("on_clock") or [], ("on_clock",), set(_BASE_VARS))
        timers = tuple(d.get("timers") or ())
        for i, name in enumerate(timers):
            if name not in self.entity.fields and name not in self.entity.internal:
                self.problem(
                    ("timers", i),
                    f"timer field {name!r} is not a field of {self.entity.name}",
                    f"fields: {', '.join(sorted(set(self.entity.fields) | set(self.entity.internal)))}",
                )
        invariants = self._invariants()
        exploration = self._exploration()
        scenarios = self._scenarios()
        return Spec(
            id=d["id"],
            version=d["version"],
            title=d["title"],
            description=d.get("description", ""),
            path=self.path,
            parameters=self.parameters,
            profiles=self.profiles,
            entity=self.entity,
            lifecycle=self.lifecycle,
            tables=self.tables,
            counters=self.counters,
            orderings=self.orderings,
            policies=self.policies,
            effects=self.effects,
            definitions=self.definitions,
            operations=self.operations,
            invariants=invariants,
            scenarios=scenarios,
            exploration=exploration,
            implementations=dict(d.get("implementations") or {}),
            on_clock=on_clock,
            timers=timers,
            source_map=self.smap,
            raw=d,
        )

    def _parameters(self) -> dict[str, Parameter]:
        out = {}
        for name, p in (self.data.get("parameters") or {}).items():
            param = Parameter(
                name=name,
                type=p["type"],
                default=p["default"],
                minimum=p.get("minimum"),
                maximum=p.get("maximum"),
                enum=tuple(p["enum"]) if "enum" in p else None,
                fixed=bool(p.get("fixed", False)),
                description=p.get("description", ""),
            )
            why = param.violation(param.default)
            if why:
                self.problem(("parameters", name, "default"), f"default out of its own bounds: {why}")
            out[name] = param
        return out

    def _profiles(self) -> dict[str, Profile]:
        out = {}
        for name, prof in (self.data.get("profiles") or {}).items():
            values = prof.get("parameters") or {}
            for key, value in values.items():
                path = ("profiles", name, "parameters", key)
                if key not in self.parameters:
                    self.problem(
                        path,
                        f"profile {name} sets unknown parameter {key}",
                        f"known parameters: {', '.join(self.parameters)}",
                    )
                elif self.parameters[key].violation(value):
                    self.problem(path, f"profile {name}: {self.parameters[key].violation(value)}")
            out[name] = Profile(name, prof.get("description", ""), dict(values))
        return out

    def _lifecycle(self) -> Lifecycle:
        lc = self.data["lifecycle"]
        states = {
            name: State(
                name, bool((s or {}).get("initial")), bool((s or {}).get("terminal")), (s or {}).get("description", "")
            )
            for name, s in lc["states"].items()
        }
        initials = [s.name for s in states.values() if s.initial]
        if len(initials) != 1:
            self.problem(("lifecycle", "states"), f"exactly one state must be `initial: true` (found {len(initials)})")
        if not any(s.terminal for s in states.values()):
            self.problem(
                ("lifecycle", "states"),
                "no state is `terminal: true`",
                "mark the states where a lifecycle ends as terminal",
            )
        transitions = []
        for i, t in enumerate(lc["transitions"]):
            path = ("lifecycle", "transitions", i)
            sources = tuple([t["source"]] if isinstance(t["source"], str) else t["source"])
            for src in sources:
                if src not in states:
                    self.problem(
                        path + ("source",),
                        f"unknown state {src!r} in transition {t['trigger']}",
                        f"states: {', '.join(states)}",
                    )
                elif states[src].terminal:
                    self.problem(
                        path + ("source",),
                        f"transition {t['trigger']} leaves terminal state {src!r}",
                        "terminal states are final; remove the transition or unmark the state",
                        code="terminal-exit",
                    )
            if t["dest"] not in states:
                self.problem(
                    path + ("dest",),
                    f"unknown state {t['dest']!r} in transition {t['trigger']}",
                    f"states: {', '.join(states)}",
                )
            guard = self.cond(t["guard"], path + ("guard",), _BASE_VARS, "a transition guard") if "guard" in t else None
            transitions.append(Transition(t["trigger"], sources, t["dest"], guard, self.where(path)))
        lifecycle = Lifecycle(lc["field"], states, tuple(transitions))
        if len(initials) == 1:
            reach, frontier = {initials[0]}, [initials[0]]
            while frontier:
                here = frontier.pop()
                for t in transitions:
                    if here in t.sources and t.dest not in reach:
                        reach.add(t.dest)
                        frontier.append(t.dest)
            for name in states:
                if name not in reach:
                    self.problem(
                        ("lifecycle", "states", name),
                        f"state {name!r} cannot be reached from the initial state {initials[0]!r}",
                        "add a transition into it or remove it",
                    )
        return lifecycle

    def _entity(self) -> Entity:
        e = self.data["entity"]
        fields, internal = dict(e["fields"]), dict(e.get("internal") or {})
        if e["key"] not in fields:
            self.problem(("entity", "key"), f"key field {e['key']!r} is not among the entity fields")
        if self.lifecycle.field not in fields:
            self.problem(
                ("lifecycle", "field"),
                f"lifecycle field {self.lifecycle.field!r} is not an entity field",
                "add it under entity.fields",
            )
        indexes = tuple(e.get("indexes") or {})
        for name in indexes:
            if name not in fields:
                self.problem(("entity", "indexes", name), f"index on unknown field {name!r}")
        scope_field = None
        for name, pol in (self.data.get("policies") or {}).items():
            if pol.get("kind") == "scope":
                scope_field = pol.get("field")
                if scope_field not in fields:
                    self.problem(("policies", name, "field"), f"scope field {scope_field!r} is not an entity field")
        for name in internal:
            if name in fields:
                self.problem(("entity", "internal", name), f"{name!r} is both a field and an internal field")
        return Entity(e["name"], e["key"], fields, internal, indexes, scope_field)

    def _policies(self) -> dict[str, Policy]:
        out = {}
        for name, pol in (self.data.get("policies") or {}).items():
            path = ("policies", name)
            kind = pol["kind"]
            config = {k: v for k, v in pol.items() if k not in ("kind", "description")}
            missing = _POLICY_FIELDS[kind] - set(config)
            if missing:
                self.problem(path, f"policy {name} ({kind}) needs: {', '.join(sorted(missing))}")
                continue
            exprs = {}
            self._records = {self.entity.name}
            for key in _POLICY_EXPRS.get(kind, ()):
                allowed = {"params", "now", "terminal_states", self.entity.name}
                exprs[key] = (
                    self.cond(config[key], path + (key,), allowed, f"a {kind} policy's `{key}`")
                    if key in _POLICY_CONDITIONS
                    else self.expr(config[key], path + (key,), allowed)
                )
            for key in _POLICY_OPTIONAL_EXPRS.get(kind, ()):
                if key in config:
                    allowed = {"args", "params", "now", "terminal_states", self.entity.name}
                    exprs[key] = (
                        self.cond(config[key], path + (key,), allowed, f"a {kind} policy's `{key}`")
                        if key in _POLICY_CONDITIONS
                        else self.expr(config[key], path + (key,), allowed)
                    )
            self._records = set()
            if "ordering" in config and config["ordering"] not in self.orderings:
                self.problem(
                    path + ("ordering",),
                    f"unknown ordering {config['ordering']!r}",
                    f"orderings: {', '.join(self.orderings) or '(none declared)'}",
                )
            if kind == "keep_newest":
                if config.get("scope") and config["scope"] != self.entity.scope_field:
                    self.problem(
                        path + ("scope",),
                        f"retention scope {config['scope']!r} must be the scope "
                        f"policy's field ({self.entity.scope_field!r})",
                    )
                self._states_filter(config.get("states"), path + ("states",))
            if kind == "at_most_once":
                if config["flag"] not in self.entity.fields:
                    self.problem(path + ("flag",), f"flag {config['flag']!r} is not an entity field")
                if config["effect"] not in self.effects:
                    self.problem(path + ("effect",), f"unknown effect {config['effect']!r}")
            out[name] = Policy(name, kind, config, exprs, pol.get("description", ""))
        return out

    def _check_orderings(self) -> None:
        known = set(self.entity.fields) | set(self.entity.internal)
        for name, ordering in self.orderings.items():
            for f in ordering.by:
                if f not in known:
                    self.problem(("orderings", name, "by"), f"ordering {name} sorts by unknown field {f!r}")

    def _record_fields_read(self, source: Any, var: str, path: tuple, reads: str | None = None) -> frozenset | None:
        """The fields of ``var`` (a record of the entity) that ``source`` reads;
        one the entity does not declare is a problem at ``path``: the model
        hands CEL only the fields an expression reads, so an undeclared one
        would read as null instead of failing. ``reads``: the text to look in,
        when not ``source`` itself."""
        used = fields_used(str(source) if reads is None else reads, var)
        if used is not None and hasattr(self, "entity"):
            known = set(self.entity.fields) | set(self.entity.internal) | {self.lifecycle.field}
            for name in sorted(used - known):
                self.problem(
                    path,
                    f"`{source}` reads {var}.{name}, but {name!r} is not a field of {self.entity.name}",
                    f"fields of {self.entity.name}: {', '.join(sorted(known))} (declare it under "
                    f"`entity: fields:` or `internal:`, or fix the name)",
                )
        return used

    def _projection(self, sources: list, var: str) -> frozenset | None:
        """The record fields a query's expressions read, so only those are handed to CEL."""
        fields: set = set()
        for source, path in sources:
            if source is None:
                continue
            used = self._record_fields_read(source, var, path)
            if used is None:
                return None
            fields |= used
        return frozenset(fields)

    def _states_filter(self, value, path) -> frozenset[str] | None:
        if value is None:
            return None
        if value == "terminal":
            return self.lifecycle.terminal
        if value == "non_terminal":
            return frozenset(self.lifecycle.states) - self.lifecycle.terminal
        for s in value:
            if s not in self.lifecycle.states:
                self.problem(path, f"unknown state {s!r}", f"states: {', '.join(self.lifecycle.states)}")
        return frozenset(value)

    # -- operations ---------------------------------------------------------
    def _resolve_refs(self, schema: Any, path: tuple, seen: tuple = ()) -> Any:
        if isinstance(schema, dict):
            if "$ref" in schema:
                ref = schema["$ref"]
                name = ref.rsplit("/", 1)[-1]
                if not ref.startswith("#/definitions/") or name not in self.definitions:
                    self.problem(path, f"unresolvable $ref {ref!r}", "refer to #/definitions/<name>")
                    return {}
                if name in seen:
                    self.problem(path, f"$ref cycle through {name!r}")
                    return {}
                return self._resolve_refs(copy.deepcopy(self.definitions[name]), ("definitions", name), seen + (name,))
            return {k: self._resolve_refs(v, path + (k,), seen) for k, v in schema.items()}
        if isinstance(schema, list):
            return [self._resolve_refs(v, path + (i,), seen) for i, v in enumerate(schema)]
        return schema

    def _operation(self, name: str, op: dict) -> Operation:
        path = ("operations", name)
        args_schema = self._resolve_refs(op.get("args") or {"type": "object"}, path + ("args",))
        result_schema = self._resolve_refs(op["result"], path + ("result",)) if "result" in op else None
        self._check_draws(args_schema, path + ("args",))
        errors = tuple(op.get("errors") or ())
        self._op_errors = set(errors)
        self._op_name = name
        self._op_args, self._records = args_schema if isinstance(args_schema, dict) else {}, set()
        steps = self._steps(op["steps"], path + ("steps",), set(_BASE_VARS))
        self._op_args = {}
        assumes = self._assumes(op["assumes"], path + ("assumes",)) if "assumes" in op else None
        return Operation(
            name,
            op.get("summary", ""),
            args_schema,
            result_schema,
            errors,
            steps,
            bool(op.get("read_only", False)),
            assumes,
        )

    def _check_draws(self, schema: dict, path: tuple) -> None:
        pools = (self.data.get("exploration") or {}).get("pools") or {}
        for prop, sub in (schema.get("properties") or {}).items():
            draw = sub.get("x-draw") if isinstance(sub, dict) else None
            if not draw and isinstance(sub, dict) and isinstance(sub.get("items"), dict):
                draw, prop = sub["items"].get("x-draw"), f"{prop}.items"  # a list of drawn values
            if not draw:
                continue
            where = path + ("properties", prop, "x-draw")
            if "pool" in draw and draw["pool"] not in pools:
                self.problem(where, f"x-draw names unknown pool {draw['pool']!r}", "declare it under exploration.pools")
            if "keys" in draw and draw["keys"] != self.entity.name:
                self.problem(where, f"x-draw keys must name the entity ({self.entity.name!r})")
            if "policy" in draw and draw["policy"] not in self.policies:
                self.problem(where, f"x-draw names unknown policy {draw['policy']!r}")

    def _error_spec(self, raw: dict, path: tuple, scope: set[str]) -> S.ErrorSpec:
        if raw["kind"] not in self._op_errors:
            self.problem(
                path + ("kind",),
                f"error kind {raw['kind']!r} is not listed in operation {self._op_name}'s errors",
                f"add it: errors: [{', '.join(sorted(self._op_errors | {raw['kind']}))}]",
                code="undeclared-error",
            )
        return S.ErrorSpec(raw["kind"], self.expr(raw["message"], path + ("message",), scope))

    def _fields(self, raw: dict, path: tuple, scope: set[str], *, creating: bool) -> dict[str, Expression]:
        known = set(self.entity.fields) | set(self.entity.internal)
        out = {}
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
        return out

    def _steps(self, raw_steps: list, path: tuple, scope: set[str]) -> list:
        out = []
        for i, raw in enumerate(raw_steps):
            step = self._step(raw, path + (i,), scope)
            if step is not None:
                out.append(step)
        return out

    def _need_bound(self, name: str, scope: set[str], path: tuple) -> None:
        if name not in scope:
            self.problem(path, f"{name!r} is not bound here", "bind it first with `find`, `create` or `for_each`")

    def _step(self, raw: dict, path: tuple, scope: set[str]):
        kind = next(k for k in S.STEP_KINDS if k in raw)
        body = raw[kind]
        where = self.where(path)
        p = path + (kind,)
        ent = self.entity.name
        if kind == "let":
            values = {k: self.expr(v, p + (k,), scope) for k, v in body.items()}
            scope.update(body)
            self._records.difference_update(body)  # a let rebinds: its type is not known
            return S.Let(values, where)
        if kind == "require":
            return S.Require(
                self.cond(body, p, scope, "a `require` condition"),
                self._error_spec(raw["error"], path + ("error",), scope),
                where,
            )
        if kind == "reject":
            return S.Reject(self._error_spec(body, p, scope), where)
        if kind == "check":
            return S.Check(self.cond(body, p, scope, "a `check`"), raw["message"], where)
        if kind == "find":
            if ("key" in body) == ("by" in body):
                self.problem(p, "find needs exactly one of `key` or `by`")
            by_field = by_value = None
            if "by" in body:
                by_field, by_source = next(iter(body["by"].items()))
                if by_field not in self.entity.unique_indexes and by_field != self.entity.key:
                    self.problem(
                        p + ("by",),
                        f"find by {by_field!r} needs a unique index on it",
                        f"declare entity.indexes.{by_field}: {{unique: true}}",
                    )
                by_value = self.expr(by_source, p + ("by", by_field), scope)
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
                where,
            )
            scope.add(body["as"])
            self._records.add(body["as"])
            return step
        if kind == "create":
            fields = self._fields(body["fields"], p + ("fields",), scope, creating=True)
            if self.entity.key not in body["fields"]:
                self.problem(p + ("fields",), f"create must set the key field {self.entity.key!r}")
            scope.add(body["as"])
            self._records.add(body["as"])
            return S.Create(body["as"], fields, where)
        if kind == "fire":
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
            return S.Fire(body["trigger"], body["on"], body.get("as"), err, where)
        if kind == "set":
            self._need_bound(body["on"], scope, p + ("on",))
            return S.SetFields(body["on"], self._fields(body["fields"], p + ("fields",), scope, creating=False), where)
        if kind == "when":
            cond = self.cond(body, p, scope, "a `when` condition")
            then = self._steps(raw["do"], path + ("do",), scope)
            other = self._steps(raw.get("else") or [], path + ("else",), scope)
            return S.When(cond, then, other, where)
        if kind == "emit":
            if body["effect"] not in self.effects:
                self.problem(
                    p + ("effect",),
                    f"unknown effect {body['effect']!r}",
                    f"declared effects: {', '.join(self.effects) or '(none)'}",
                )
            fields = {}
            declared = set((self.effects.get(body["effect"]) or EffectDecl("", {})).schema.get("properties") or {})
            for fname, value in (body.get("fields") or {}).items():
                if declared and fname not in declared:
                    self.problem(
                        p + ("fields", fname),
                        f"effect {body['effect']} has no field {fname!r}",
                        f"its fields: {', '.join(sorted(declared))}",
                    )
                if isinstance(value, dict):
                    checks = tuple(
                        (k, None if k == "any" else self.expr(v, p + ("fields", fname, k), scope))
                        for k, v in value.items()
                    )
                    fields[fname] = S.MatcherSpec(checks)
                else:
                    fields[fname] = self.expr(value, p + ("fields", fname), scope)
            return S.Emit(body["effect"], fields, where)
        if kind in ("for_each", "collect"):
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
            if kind == "for_each":
                loop_scope = set(inner)
                loop_scope.discard(body["as"]) if body["as"] != ent else None
                loop_scope.add(body["as"])
                self._records.add(body["as"])
                steps = self._steps(body["do"], p + ("do",), loop_scope)
                scope.update(n for n in loop_scope if n not in (ent, body["as"]))
                step = S.ForEach(
                    bind=body["as"],
                    scope=scope_expr,
                    states=states,
                    condition=cond,
                    ordering=body.get("ordering"),
                    condition_all=cond_all,
                    body=steps,
                    where=where,
                )
                step.fields = self._projection([(body.get("where"), p + ("where",))], ent)
                return step
            select = self.expr(body["select"], p + ("select",), inner)
            select_all = (
                self.expr(f"kit_records.map({ent}, ({body['select']}))", p + ("select",), None, max_chars=None)
                if select
                else None
            )
            scope.add(body["as"])
            step = S.Collect(
                bind=body["as"],
                scope=scope_expr,
                states=states,
                condition=cond,
                ordering=body.get("ordering"),
                condition_all=cond_all,
                select=select,
                where=where,
                select_all=select_all,
            )
            step.fields = self._projection(
                [(body.get("where"), p + ("where",)), (body["select"], p + ("select",))], ent
            )
            return step
        if kind == "apply":
            policy = self.policies.get(body["policy"])
            if policy is None:
                self.problem(
                    p + ("policy",),
                    f"unknown policy {body['policy']!r}",
                    f"policies: {', '.join(self.policies) or '(none)'}",
                )
            elif policy.kind == "inline_or_spill" and not (body.get("on") and body.get("as")):
                self.problem(
                    p, "apply of an inline_or_spill policy needs `on` (the entity) and `as` (a name for the verdict)"
                )
            elif policy.kind == "keep_newest" and policy.config.get("scope") and "scope" not in body:
                self.problem(p, f"apply of {body['policy']} needs `scope` (which {policy.config['scope']} to trim)")
            elif policy.kind not in ("inline_or_spill", "keep_newest"):
                self.problem(p + ("policy",), f"a {policy.kind} policy is not applied by a step")
            if body.get("on"):
                self._need_bound(body["on"], scope, p + ("on",))
            scope_expr = self.expr(body["scope"], p + ("scope",), scope) if "scope" in body else None
            if body.get("as"):
                scope.add(body["as"])
            return S.Apply(body["policy"], body.get("on"), body.get("as"), scope_expr, where)
        if kind in ("put", "drop"):
            if body["table"] not in self.tables:
                self.problem(
                    p + ("table",),
                    f"unknown table {body['table']!r}",
                    f"declare it under state.tables (known: {', '.join(self.tables) or 'none'})",
                )
            key = self.expr(body["key"], p + ("key",), scope)
            if kind == "drop":
                return S.Drop(body["table"], key, where)
            value = self.expr(body["value"], p + ("value",), scope) if "value" in body else None
            return S.Put(body["table"], key, value, where)
        if kind == "counter":
            if body["name"] not in self.counters:
                self.problem(p + ("name",), f"unknown counter {body['name']!r}", "declare it under state.counters")
            scope.add(body["as"])
            return S.Counter(body["name"], body["as"], where)
        if kind == "reset":
            return S.Reset(where)
        if kind == "remove":
            self._need_bound(body["on"], scope, p + ("on",))
            return S.Remove(body["on"], where)
        if kind == "advance":
            if self._op_name == "on_clock":
                self.problem(p, "on_clock steps run while the clock moves; they cannot move it themselves")
            return S.Advance(self.expr(body["to"], p + ("to",), scope), where)
        if kind == "result":
            if isinstance(body, dict):
                return S.Result({k: self.expr(v, p + (k,), scope) for k, v in body.items()}, where)
            return S.Result(self.expr(body, p, scope), where)
        raise AssertionError(kind)

    # -- invariants, exploration, scenarios ----------------------------------
    def _invariants(self) -> list[Invariant]:
        out = []
        ent = self.entity.name
        for i, inv in enumerate(self.data.get("invariants") or []):
            path = ("invariants", i)
            if "observed" in inv:
                obs = inv["observed"]
                if obs["effect"] not in self.effects:
                    self.problem(path + ("observed", "effect"), f"unknown effect {obs['effect']!r}")
                if obs.get("until") and obs["until"] not in self.data["operations"]:
                    self.problem(path + ("observed", "until"), f"unknown operation {obs['until']!r}")
                out.append(Invariant(inv["id"], inv.get("description", ""), "observed", None, dict(obs)))
                continue
            if "check" not in inv:
                self.problem(path, "an invariant needs `check` (with `each` or `scope`) or `observed`")
                continue
            if "each" in inv:
                if inv["each"] != ent:
                    self.problem(path + ("each",), f"`each` must name the entity ({ent!r})")
                self._records = {ent}
                check = self.cond(
                    inv["check"], path + ("check",), {ent, "params", "now", "terminal_states"}, f"invariant {inv['id']}"
                )
                self._records = set()
                if check is not None:
                    self._record_fields_read(check.source, ent, path + ("check",))
                out.append(Invariant(inv["id"], inv.get("description", ""), "each", check))
            elif "scope" in inv:
                if inv["scope"] != self.entity.scope_field:
                    self.problem(path + ("scope",), f"`scope` must be the scope field ({self.entity.scope_field!r})")
                check = self.cond(
                    inv["check"],
                    path + ("check",),
                    {self.entity.collection, "params", "now", "terminal_states"},
                    f"invariant {inv['id']}",
                )
                if check is not None:  # the records a macro over the collection binds, e.g. jobs.all(j, j.status ...)
                    for var in dict.fromkeys(
                        re.findall(
                            rf"\b{re.escape(self.entity.collection)}\s*\.\s*(?:all|exists|"
                            rf"exists_one|filter|map)\(\s*([A-Za-z_]\w*)\s*,",
                            check.source,
                        )
                    ):
                        # the binding itself, `filter(j, ...`, is not a use of the whole record
                        body = re.sub(rf"\(\s*{var}\s*,", "(", check.source)
                        self._record_fields_read(check.source, var, path + ("check",), reads=body)
                out.append(Invariant(inv["id"], inv.get("description", ""), "scope", check))
            else:
                self.problem(path, "an invariant with `check` needs `each` or `scope`")
        return out

    def _exploration(self) -> Exploration:
        ex = self.data.get("exploration") or {}
        ops = self.data["operations"]
        for op in ex.get("weights") or {}:
            if op not in ops:
                self.problem(("exploration", "weights", op), f"weight for unknown operation {op!r}")
        probe = None
        if ex.get("probe"):
            pr = ex["probe"]
            if pr["call"] not in ops:
                self.problem(("exploration", "probe", "call"), f"unknown operation {pr['call']!r}")
            if pr.get("for_pool") and pr["for_pool"] not in (ex.get("pools") or {}):
                self.problem(("exploration", "probe", "for_pool"), f"unknown pool {pr['for_pool']!r}")
            probe = {
                "call": pr["call"],
                "for_pool": pr.get("for_pool"),
                "args": self.expr(pr["args"], ("exploration", "probe", "args"), {"params", "pool_value"}),
            }
        batches = []
        for i, b in enumerate(ex.get("batches") or []):
            path = ("exploration", "batches", i)
            count = {k: self.expr(b["count"][k], path + ("count", k), {"params"}) for k in ("min", "max")}
            phases = []
            names = {"params", "shared", "batch", "index", "item"}
            for j, ph in enumerate(b["phases"]):
                ppath = path + ("phases", j)
                if ph["call"] not in ops:
                    self.problem(ppath + ("call",), f"unknown operation {ph['call']!r}")
                    continue
                props = set((ops[ph["call"]].get("args") or {}).get("properties") or {})
                for a in list(ph.get("args") or {}) + list(ph.get("omit") or []):
                    if a not in props:
                        self.problem(ppath, f"operation {ph['call']} has no argument {a!r}")
                if ph.get("once") and j == 0:
                    self.problem(
                        ppath + ("once",),
                        "the first phase cannot run once: there is no item yet",
                        hint="start the items in an earlier phase, then add the phase that runs once",
                    )
                phases.append(
                    {
                        "call": ph["call"],
                        "order": ph.get("order", "given"),
                        "once": bool(ph.get("once")),
                        "advance_ms": list(ph.get("advance_ms") or [0]),
                        "omit": list(ph.get("omit") or []),
                        "args": {
                            k: self.expr(v, ppath + ("args", k), names) for k, v in (ph.get("args") or {}).items()
                        },
                    }
                )
            assumes = self._assumes(b["assumes"], path + ("assumes",)) if "assumes" in b else None
            batches.append(
                {
                    "name": b["name"],
                    "description": b.get("description", ""),
                    "count": count,
                    "shared": dict(b.get("shared") or {}),
                    "phases": phases,
                    "assumes": assumes,
                }
            )
        concurrent = []
        for i, c in enumerate(ex.get("concurrent") or []):
            path = ("exploration", "concurrent", i)
            for op in c["calls"]:
                if op not in ops:
                    self.problem(path + ("calls",), f"unknown operation {op!r}")
                    continue
                props = set((ops[op].get("args") or {}).get("properties") or {})
                for a in c.get("same_args") or []:
                    if a not in props:
                        self.problem(path + ("same_args",), f"operation {op} has no argument {a!r}")
            assumes = self._assumes(c["assumes"], path + ("assumes",)) if "assumes" in c else None
            concurrent.append(
                {
                    "name": c["name"],
                    "calls": list(c["calls"]),
                    "same_args": list(c.get("same_args") or []),
                    "assumes": assumes,
                }
            )
        return Exploration(
            pools=dict(ex.get("pools") or {}),
            weights=dict(ex.get("weights") or {}),
            advance_ms=list(ex.get("advance_ms") or [0, 1]),
            probe=probe,
            batches=batches,
            concurrent=concurrent,
            limits=self._limits(ex.get("limits") or [], batches),
            derived_races=bool(ex.get("derived_races", True)),
        )

    def _limit_value(self, source: str, path: tuple) -> Expression | None:
        """A limit's value (over parameters): an integer under the defaults and every profile."""
        return self._over_params(
            source,
            path,
            "a limit's value",
            lambda v: isinstance(v, int) and not isinstance(v, bool),
            "a limit and must be an integer",
            "write an integer parameter or arithmetic over params, e.g. `params.max_running`",
        )

    def _limits(self, raw: list, batches: list) -> list[dict]:
        """``exploration.limits``: each limit's value (CEL over params) and what
        is drawn at its edges: clock moves, arguments, batch counts."""
        ops, out, seen = self.data["operations"], [], {}
        batch_names = {b["name"] for b in batches}
        for i, lim in enumerate(raw):
            path = ("exploration", "limits", i)
            if lim["name"] in seen:
                self.problem(path + ("name",), f"duplicate limit name {lim['name']!r} (also at {seen[lim['name']]})")
            seen[lim["name"]] = self.where(path)
            if not (lim.get("clock") or lim.get("args") or lim.get("batches")):
                self.problem(
                    path,
                    f"limit {lim['name']!r} probes nothing",
                    hint="give it `clock: true`, `args: [operation.argument]` or `batches: [name]`",
                )
            args = []
            for j, target in enumerate(lim.get("args") or []):
                op, _, arg = target.partition(".")
                props = (ops.get(op) or {}).get("args", {}).get("properties") or {} if op in ops else None
                if props is None:
                    self.problem(path + ("args", j), f"unknown operation {op!r}")
                elif arg not in props:
                    self.problem(path + ("args", j), f"operation {op} has no argument {arg!r}")
                else:
                    args.append((op, arg))
            for j, name in enumerate(lim.get("batches") or []):
                if name not in batch_names:
                    self.problem(
                        path + ("batches", j), f"unknown batch {name!r}", hint="name one of exploration.batches"
                    )
            value = lim["value"]
            out.append(
                {
                    "name": lim["name"],
                    "description": lim.get("description", ""),
                    "value": value if isinstance(value, int) else self._limit_value(value, path + ("value",)),
                    "assumes": self._assumes(lim["assumes"], path + ("assumes",)) if "assumes" in lim else None,
                    "unit": lim.get("unit", "chars"),
                    "clock": bool(lim.get("clock")),
                    "args": args,
                    "batches": list(lim.get("batches") or []),
                }
            )
        return out

    def _scenarios(self) -> list:
        out, seen = [], {}
        for i, sc in enumerate(self.data.get("scenarios") or []):
            path = ("scenarios", i)
            if sc["id"] in seen:
                self.problem(path + ("id",), f"duplicate scenario id {sc['id']!r} (also at {seen[sc['id']]})")
            seen[sc["id"]] = self.where(path)
            names = {"params"}
            steps = self._scenario_steps(sc["steps"], path + ("steps",), names)
            requires = tuple(sc.get("requires") or ())
            for feature in requires:
                if feature not in FEATURES:
                    self.problem(
                        path + ("requires",), f"unknown feature {feature!r}", f"features: {', '.join(sorted(FEATURES))}"
                    )
            assumes = self._assumes(sc["assumes"], path + ("assumes",)) if "assumes" in sc else None
            if sc.get("not_applicable") and "assumes" not in sc:
                self.problem(
                    path + ("not_applicable",),
                    "not_applicable says why the scenario does not hold where "
                    "its assumes fails, but the scenario has no assumes",
                    "add `assumes:` (a CEL condition over params) or remove not_applicable",
                )
            out.append(
                Scenario(
                    sc["id"],
                    sc["title"],
                    sc["category"],
                    sc.get("description", ""),
                    steps,
                    self.where(path),
                    requires,
                    assumes,
                    str(sc.get("not_applicable") or ""),
                    sc.get("race_runs"),
                )
            )
        return out

    def _template(self, value: Any, path: tuple, names: set[str]) -> Any:
        if isinstance(value, dict) and set(value) == {"$expr"}:
            return self.expr(value["$expr"], path + ("$expr",), names | {"params"})
        if isinstance(value, dict):
            return {k: self._template(v, path + (k,), names) for k, v in value.items()}
        if isinstance(value, list):
            return [self._template(v, path + (j,), names) for j, v in enumerate(value)]
        if isinstance(value, str):
            for name in template_names(value):
                if name not in names:
                    self.problem(
                        path,
                        f"${{{name}}} is not defined at this point",
                        "save it from an earlier step with `save:` or use a repeat variable",
                    )
        return value

    def _call_step(self, raw: dict, path: tuple, names: set[str]) -> CallStep | None:
        op_name = raw["call"]
        op = self.operations.get(op_name)
        if op is None:
            self.problem(
                path + ("call",), f"unknown operation {op_name!r}", f"operations: {', '.join(self.operations)}"
            )
            return None
        args = raw.get("args") or {}
        props = op.args_schema.get("properties") or {}
        for a in args:
            if a not in props:
                self.problem(
                    path + ("args", a),
                    f"operation {op_name} has no argument {a!r}",
                    f"its arguments: {', '.join(props) or '(none)'}",
                )
        for a in op.args_schema.get("required") or []:
            if a not in args:
                self.problem(path + ("args",), f"operation {op_name} needs argument {a!r}")
        expect = raw.get("expect")
        if expect:
            err = expect.get("error")
            if err and err["kind"] not in op.errors:
                self.problem(
                    path + ("expect", "error", "kind"),
                    f"{op_name} never fails with {err['kind']!r}",
                    f"its errors: {', '.join(op.errors) or '(none)'}",
                )
            for j, eff in enumerate(expect.get("effects") or []):
                if eff.get("effect") not in self.effects:
                    self.problem(path + ("expect", "effects", j), f"unknown effect {eff.get('effect')!r}")
        step = CallStep(
            op_name,
            self._template(args, path + ("args",), names),
            dict(raw.get("save") or {}),
            self._template(expect, path + ("expect",), names) if expect else None,
            self.where(path),
        )
        for name, target in step.save.items():
            if target.split(".", 1)[0] not in ("result", "error", "effects"):
                self.problem(path + ("save", name), f"save path {target!r} must start with result., error. or effects.")
            names.add(name)
        return step

    def _scenario_steps(self, raw_steps: list, path: tuple, names: set[str]) -> list:
        out = []
        for i, raw in enumerate(raw_steps):
            p = path + (i,)
            if "call" in raw:
                step = self._call_step(raw, p, names)
            elif "advance_ms" in raw:
                ms = raw["advance_ms"]
                step = AdvanceStep(
                    ms if isinstance(ms, int) else self.expr(ms, p + ("advance_ms",), names), self.where(p)
                )
            elif "repeat" in raw:
                rep = raw["repeat"]
                times = rep["times"]
                if not isinstance(times, int):
                    times = self.expr(times, p + ("repeat", "times"), names)
                inner = set(names) | ({rep["as"]} if rep.get("as") else set())
                step = RepeatStep(
                    times,
                    rep.get("as"),
                    self._scenario_steps(rep["steps"], p + ("repeat", "steps"), inner),
                    self.where(p),
                )
                names.update(n for n in inner if n != rep.get("as"))
            else:
                calls = [self._call_step(c, p + ("concurrently", j), names) for j, c in enumerate(raw["concurrently"])]
                step = ConcurrentStep([c for c in calls if c], dict(raw.get("expect") or {}), self.where(p))
            if step is not None:
                out.append(step)
        return out


def load_replay_file(spec: Spec, path: str | Path):
    """Load a counterexample (a `steps:` list in scenario form) against ``spec``."""
    data, smap = load_yaml_file(path)
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list) or not data["steps"]:
        raise SpecError([smap.problem((), "a replay file needs a non-empty `steps:` list")])
    builder = _Builder(spec.raw, smap, str(path))
    builder.operations, builder.effects = spec.operations, spec.effects
    steps = builder._scenario_steps(data["steps"], ("steps",), {"params"})
    if builder.problems:
        raise SpecError(builder.problems)
    return Scenario(
        str(data.get("id", "replay")),
        str(data.get("title", f"replay of {Path(path).name}")),
        "edge",
        str(data.get("failure", "")),
        steps,
        f"{path}:1",
        tuple(data.get("requires") or ()),
    )
