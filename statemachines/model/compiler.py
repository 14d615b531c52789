"""Turn a spec file into a validated ``Spec``.

Stages, each reporting every problem it finds (file:line, what, how to fix):
safe YAML load (with ``include:`` fragments) -> structure against the JSON
Schema of the format -> build with CEL compilation -> semantic checks
(unknown states, triggers, operations, fields, variables, bounds). Every
problem is collected and raised together as one ``SpecError``.

The builder (``_Builder``) is a ``compile_steps.StepCompiler``, which
compiles operation steps by one table of step kinds, on a
``compile_context.CompileContext`` (source locations, problems, expressions
with their names and types checked).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..errors import ExpressionError, Problem, SpecError
from ..language.expressions import Expression, type_name
from ..load.includes import IncludeRefused, is_spec_fragment, resolve_include
from ..load.scenario import AdvanceStep, CallStep, ConcurrentStep, RepeatStep, ScenarioStep, template_names
from ..load.schema_check import (
    check_replay_structure,
    check_scenarios_structure,
    check_structure,
    spec_format_schema,
)
from ..load.source import MAX_INCLUDES, SourceMap, WholeSpec, load_yaml_file, load_yaml_text, read_spec_text
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
from .compile_steps import StepCompiler

__all__ = ["load_spec", "compile_spec", "load_spec_data", "load_replay_file", "load_scenario_file"]

# Capabilities a scenario may require of an implementation (a closed list).
FEATURES = frozenset({"concurrent"})
BATCH_WEIGHT = 2  # a batch's share of the drawn steps unless it says (an operation of weight 1 has one)
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


def load_spec_data(path: str | Path) -> tuple[dict, SourceMap]:
    """Load a spec file and the fragments it includes, merged, with a source
    map; each distinct fragment read once, the whole within ``WholeSpec``'s caps."""
    path = Path(path)
    whole = WholeSpec()
    text = read_spec_text(path, regular_only=True)
    whole.take_text(text, str(path))
    data, smap = load_yaml_text(text, str(path), whole)
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
    includes = includes if isinstance(includes, list) else []
    if len(includes) > MAX_INCLUDES:
        problems.append(
            smap.problem(
                ("include",),
                f"`include:` lists {len(includes):,} entries, over the limit of {MAX_INCLUDES}; none was read",
                "a spec includes a handful of fragments; list each once",
            )
        )
        includes = []
    seen: dict[str, int] = {}  # real path -> the entry that read it
    for index, name in enumerate(includes):
        if not isinstance(name, str):
            continue  # the structure check names it
        entry = smap.problem(("include", index), "")
        part, part_map = _load_fragment(path, name, entry, problems, (seen, index, whole))
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


def _load_fragment(
    spec_path: Path, name: str, entry: Problem, problems: list[Problem], read: tuple[dict[str, int], int, WholeSpec]
):
    """One included fragment, read only from where includes may come from
    (``includes.py``), once (``read``: the real paths read so far, with the
    index of the entry that read each; this entry's index; what the whole
    spec may still add up to); refusals are problems at the `include:`
    entry's line. Returns (data, source map) or (None, None)."""
    seen, index, whole = read

    def refuse(message: str, hint: str) -> tuple[None, None]:
        problems.append(Problem(message, entry.file, entry.line, hint))
        return None, None

    try:
        shown, real = resolve_include(spec_path.parent, name)
        if str(real) in seen:
            return refuse(
                f"include {name!r} names the same file as include entry {seen[str(real)] + 1}; it is read once",
                "list each fragment once in `include:`",
            )
        seen[str(real)] = index
        text = read_spec_text(real, shown=str(shown), regular_only=True)
        whole.take_text(text, str(shown))
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
        return load_yaml_text(text, str(shown), whole)
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


class _Builder(StepCompiler):
    """Builds a Spec, collecting problems instead of stopping at the first."""

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
        self._op_errors: set[str] = set()
        self._op_name = "on_clock"
        on_clock = self._steps(d.get("on_clock") or [], ("on_clock",), set(_BASE_VARS))
        timers, table_timers = self._timers(d.get("timers") or ())
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
            table_timers=table_timers,
            source_map=self.smap,
            raw=d,
        )

    def _timers(self, raw: Sequence) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
        """The `timers:` entries: record fields, and `{table, field}` pairs
        (instants a table's entries hold), each checked against what the spec declares."""
        fields: list[str] = []
        tables: list[tuple[str, str]] = []
        known = set(self.entity.fields) | set(self.entity.internal)
        for i, entry in enumerate(raw):
            if isinstance(entry, dict):
                if entry["table"] not in self.tables:
                    self.problem(
                        ("timers", i, "table"),
                        f"timer table {entry['table']!r} is not declared",
                        f"declare it under state.tables (tables: {', '.join(self.tables) or '(none)'})",
                    )
                tables.append((entry["table"], entry["field"]))
            elif entry not in known:
                self.problem(
                    ("timers", i),
                    f"timer field {entry!r} is not a field of {self.entity.name}",
                    f"fields: {', '.join(sorted(known))}",
                )
            else:
                fields.append(entry)
        return tuple(fields), tuple(tables)

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
        states = self._states(lc["states"])
        initials = [s.name for s in states.values() if s.initial]
        transitions = tuple(self._transition(i, t, states) for i, t in enumerate(lc["transitions"]))
        if len(initials) == 1:
            self._check_reachable(initials[0], states, transitions)
        return Lifecycle(lc["field"], states, transitions)

    def _states(self, raw: dict) -> dict[str, State]:
        """The lifecycle's states: exactly one initial, at least one terminal."""
        states = {
            name: State(
                name, bool((s or {}).get("initial")), bool((s or {}).get("terminal")), (s or {}).get("description", "")
            )
            for name, s in raw.items()
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
        return states

    def _transition(self, i: int, t: dict, states: dict[str, State]) -> Transition:
        """One transition: known states, none leaving a terminal one, a boolean guard."""
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
        return Transition(t["trigger"], sources, t["dest"], guard, self.where(path))

    def _check_reachable(self, initial: str, states: dict[str, State], transitions: tuple[Transition, ...]) -> None:
        """Every state can be reached from the initial one."""
        reach, frontier = {initial}, [initial]
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
                    f"state {name!r} cannot be reached from the initial state {initial!r}",
                    "add a transition into it or remove it",
                )

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
            exprs = self._policy_expressions(kind, config, path)
            self._check_policy_config(kind, config, path)
            out[name] = Policy(name, kind, config, exprs, pol.get("description", ""))
        return out

    def _policy_expressions(self, kind: str, config: dict, path: tuple) -> dict[str, Expression]:
        """A policy's expressions (its required ones, then the optional ones it
        gives) compiled over the entity; those that fail are left out (their
        problems are recorded)."""
        exprs: dict[str, Expression | None] = {}
        self._records = {self.entity.name}
        required = [(key, {"params", "now", "terminal_states"}) for key in _POLICY_EXPRS.get(kind, ())]
        optional = [
            (key, {"args", "params", "now", "terminal_states"})
            for key in _POLICY_OPTIONAL_EXPRS.get(kind, ())
            if key in config
        ]
        for key, names in required + optional:
            allowed = names | {self.entity.name}
            exprs[key] = (
                self.cond(config[key], path + (key,), allowed, f"a {kind} policy's `{key}`")
                if key in _POLICY_CONDITIONS
                else self.expr(config[key], path + (key,), allowed)
            )
        self._records = set()
        return {key: e for key, e in exprs.items() if e is not None}

    def _check_policy_config(self, kind: str, config: dict, path: tuple) -> None:
        """A policy's ordering, retention scope, states, flag and effect name what the spec declares."""
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

    def _check_orderings(self) -> None:
        known = set(self.entity.fields) | set(self.entity.internal)
        for name, ordering in self.orderings.items():
            for f in ordering.by:
                if f not in known:
                    self.problem(("orderings", name, "by"), f"ordering {name} sorts by unknown field {f!r}")

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
        probe = self._probe(ex["probe"], ex.get("pools") or {}) if ex.get("probe") else None
        batches = [self._batch(i, b) for i, b in enumerate(ex.get("batches") or [])]
        return Exploration(
            pools=dict(ex.get("pools") or {}),
            weights=dict(ex.get("weights") or {}),
            advance_ms=list(ex.get("advance_ms") or [0, 1]),
            probe=probe,
            batches=batches,
            concurrent=[self._concurrent_group(i, c) for i, c in enumerate(ex.get("concurrent") or [])],
            limits=self._limits(ex.get("limits") or [], batches),
            derived_races=bool(ex.get("derived_races", True)),
        )

    def _probe(self, pr: dict, pools: dict) -> dict:
        """`exploration.probe`: the read-only call that shows the whole visible state."""
        if pr["call"] not in self.data["operations"]:
            self.problem(("exploration", "probe", "call"), f"unknown operation {pr['call']!r}")
        if pr.get("for_pool") and pr["for_pool"] not in pools:
            self.problem(("exploration", "probe", "for_pool"), f"unknown pool {pr['for_pool']!r}")
        return {
            "call": pr["call"],
            "for_pool": pr.get("for_pool"),
            "args": self.expr(pr["args"], ("exploration", "probe", "args"), {"params", "pool_value"}),
        }

    def _check_arguments_named(self, op: str, names: list, path: tuple) -> None:
        """Each of ``names`` is an argument of operation ``op`` (a known one)."""
        props = set((self.data["operations"][op].get("args") or {}).get("properties") or {})
        for a in names:
            if a not in props:
                self.problem(path, f"operation {op} has no argument {a!r}")

    def _batch(self, i: int, b: dict) -> dict:
        """One of `exploration.batches`: a count of items taken through phases of calls."""
        path = ("exploration", "batches", i)
        count = {k: self.expr(b["count"][k], path + ("count", k), {"params"}) for k in ("min", "max")}
        phases = [
            phase for j, ph in enumerate(b["phases"]) if (phase := self._batch_phase(ph, j, path + ("phases", j)))
        ]
        return {
            "name": b["name"],
            "description": b.get("description", ""),
            "count": count,
            "weight": self._batch_weight(b, path),
            "shared": dict(b.get("shared") or {}),
            "phases": phases,
            "assumes": self._assumes(b["assumes"], path + ("assumes",)) if "assumes" in b else None,
        }

    def _batch_weight(self, b: dict, path: tuple) -> float:
        """A batch's share of the drawn steps (the schema bounds it); whole
        hundredths only, so the engine can give every weight whole slots."""
        weight = b.get("weight", BATCH_WEIGHT)
        if (Fraction(str(weight)) * 100).denominator != 1:
            self.problem(
                path + ("weight",),
                f"batch weight {weight} has more than two decimal places",
                hint="round it to hundredths, e.g. `weight: 0.25`",
            )
        return weight

    def _batch_phase(self, ph: dict, j: int, path: tuple) -> dict | None:
        """One phase of a batch: a call per item, or once; None when its operation is unknown."""
        if ph["call"] not in self.data["operations"]:
            self.problem(path + ("call",), f"unknown operation {ph['call']!r}")
            return None
        self._check_arguments_named(ph["call"], list(ph.get("args") or {}) + list(ph.get("omit") or []), path)
        if ph.get("once") and j == 0:
            self.problem(
                path + ("once",),
                "the first phase cannot run once: there is no item yet",
                hint="start the items in an earlier phase, then add the phase that runs once",
            )
        names = {"params", "shared", "batch", "index", "item"}
        return {
            "call": ph["call"],
            "order": ph.get("order", "given"),
            "once": bool(ph.get("once")),
            "advance_ms": list(ph.get("advance_ms") or [0]),
            "omit": list(ph.get("omit") or []),
            "args": {k: self.expr(v, path + ("args", k), names) for k, v in (ph.get("args") or {}).items()},
        }

    def _concurrent_group(self, i: int, c: dict) -> dict:
        """One of `exploration.concurrent`: calls made at once, some arguments
        the same. A call listed under ``args`` gets those arguments from the
        shared ones (its own may name the record otherwise, e.g. in a list),
        so only the other calls must name every ``same_args`` argument."""
        path = ("exploration", "concurrent", i)
        per_call = c.get("args") or {}
        for op in per_call:
            if op not in c["calls"]:
                self.problem(
                    path + ("args", op),
                    f"{op!r} is not one of the group's calls",
                    hint=f"name one of {', '.join(c['calls'])}",
                )
        for op in c["calls"]:
            if op not in self.data["operations"]:
                self.problem(path + ("calls",), f"unknown operation {op!r}")
            elif op in per_call:
                self._check_arguments_named(op, list(per_call[op]), path + ("args", op))
            else:
                self._check_arguments_named(op, list(c.get("same_args") or []), path + ("same_args",))
        if per_call and all(op in per_call for op in c["calls"]):
            self.problem(
                path + ("args",),
                "every call gets its arguments from the shared ones: none draws them",
                hint="leave at least one call out of `args`: the shared arguments are its drawn ones",
            )
        names = {"params", "shared"}
        return {
            "name": c["name"],
            "calls": list(c["calls"]),
            "same_args": list(c.get("same_args") or []),
            "assumes": self._assumes(c["assumes"], path + ("assumes",)) if "assumes" in c else None,
            "args": {
                op: {k: self.expr(v, path + ("args", op, k), names) for k, v in exprs.items()}
                for op, exprs in per_call.items()
                if op in c["calls"] and op in self.data["operations"]
            },
        }

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
        ops, out = self.data["operations"], []
        seen: dict[str, str] = {}  # limit name -> where it was declared first
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
        out = []
        seen: dict[str, str] = {}  # scenario id -> where it was declared first
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
        self._check_call_args(op, args, path)
        expect = raw.get("expect")
        if expect:
            self._check_expect(op, expect, path + ("expect",))
        step = CallStep(
            op_name,
            self._template(args, path + ("args",), names),
            dict(raw.get("save") or {}),
            self._template(expect, path + ("expect",), names) if expect else None,
            self.where(path),
            raw.get("answered"),
        )
        for name, target in step.save.items():
            if target.split(".", 1)[0] not in ("result", "error", "effects"):
                self.problem(path + ("save", name), f"save path {target!r} must start with result., error. or effects.")
            names.add(name)
        return step

    def _check_call_args(self, op: Operation, args: dict, path: tuple) -> None:
        """A scenario call names only the operation's arguments, and all it requires."""
        props = op.args_schema.get("properties") or {}
        for a in args:
            if a not in props:
                self.problem(
                    path + ("args", a),
                    f"operation {op.name} has no argument {a!r}",
                    f"its arguments: {', '.join(props) or '(none)'}",
                )
        for a in op.args_schema.get("required") or []:
            if a not in args:
                self.problem(path + ("args",), f"operation {op.name} needs argument {a!r}")

    def _check_expect(self, op: Operation, expect: dict, path: tuple) -> None:
        """A scenario call expects only error kinds the operation declares and known effects."""
        err = expect.get("error")
        if err and err["kind"] not in op.errors:
            self.problem(
                path + ("error", "kind"),
                f"{op.name} never fails with {err['kind']!r}",
                f"its errors: {', '.join(op.errors) or '(none)'}",
            )
        for j, eff in enumerate(expect.get("effects") or []):
            if eff.get("effect") not in self.effects:
                self.problem(path + ("effects", j), f"unknown effect {eff.get('effect')!r}")

    def _scenario_steps(self, raw_steps: list, path: tuple, names: set[str]) -> list[ScenarioStep]:
        out = []
        for i, raw in enumerate(raw_steps):
            step = self._scenario_step(raw, path + (i,), names)
            if step is not None:
                out.append(step)
        return out

    def _scenario_step(self, raw: dict, path: tuple, names: set[str]) -> ScenarioStep | None:
        """One scenario step (None when it names an unknown operation or an expression fails to compile)."""
        if "call" in raw:
            return self._call_step(raw, path, names)
        if "advance_ms" in raw:
            ms = raw["advance_ms"]
            amount = ms if isinstance(ms, int) else self.expr(ms, path + ("advance_ms",), names)
            return AdvanceStep(amount, self.where(path)) if amount is not None else None
        if "repeat" in raw:
            return self._repeat_step(raw["repeat"], path, names)
        calls = [self._call_step(c, path + ("concurrently", j), names) for j, c in enumerate(raw["concurrently"])]
        return ConcurrentStep([c for c in calls if c], dict(raw.get("expect") or {}), self.where(path))

    def _repeat_step(self, rep: dict, path: tuple, names: set[str]) -> RepeatStep | None:
        """`repeat`: steps run a number of times; names they save stay bound after it, its variable does not."""
        times = (
            rep["times"]
            if isinstance(rep["times"], int)
            else self.expr(rep["times"], path + ("repeat", "times"), names)
        )
        inner = set(names) | ({rep["as"]} if rep.get("as") else set())
        steps = self._scenario_steps(rep["steps"], path + ("repeat", "steps"), inner)
        names.update(n for n in inner if n != rep.get("as"))
        return RepeatStep(times, rep.get("as"), steps, self.where(path)) if times is not None else None


def load_scenario_file(spec: Spec, path: str | Path) -> list:
    """A team's own scenarios (a file with a `scenarios:` list, as a spec
    fragment holds it: a kept counterexample, for one) compiled against
    ``spec``; an id the spec's matrix has already is a problem."""
    data, smap = load_yaml_file(path)
    if not isinstance(data, dict) or not isinstance(data.get("scenarios"), list):
        raise SpecError([smap.problem((), "a scenario file needs a `scenarios:` list")])
    shape = check_scenarios_structure(data, smap)
    if shape:
        raise SpecError(shape)
    builder = _Builder({**spec.raw, "scenarios": data["scenarios"]}, smap, str(path))
    builder.operations, builder.effects = spec.operations, spec.effects
    builder.parameters, builder.profiles = spec.parameters, spec.profiles
    scenarios = builder._scenarios()
    known = {s.id: s.where for s in spec.scenarios}
    for i, scenario in enumerate(scenarios):
        if scenario.id in known:
            builder.problem(
                ("scenarios", i, "id"), f"scenario id {scenario.id!r} is the spec's already ({known[scenario.id]})"
            )
    if builder.problems:
        raise SpecError(builder.problems)
    return scenarios


def load_replay_file(spec: Spec, path: str | Path):
    """Load a counterexample (a `steps:` list in scenario form) against ``spec``."""
    data, smap = load_yaml_file(path)
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list) or not data["steps"]:
        raise SpecError([smap.problem((), "a replay file needs a non-empty `steps:` list")])
    shape = check_replay_structure(data, smap)
    if shape:
        raise SpecError(shape)
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
