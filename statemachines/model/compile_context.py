"""What every part of compiling a spec shares: where a path is, the problems
found so far, and expressions compiled with their names and (for conditions)
their types checked.

``CompileContext`` is the base of the step compiler (``compile_steps``) and of
the spec builder (``compiler._Builder``), which sets the spec's parts below
as it builds them."""

from __future__ import annotations

from typing import Any

from ..errors import ExpressionError, Problem
from ..language.expressions import (
    MAX_EXPRESSION_CHARS,
    PURE_FUNCTIONS,
    Expression,
    compile_expression,
    fields_used,
    type_name,
)
from ..load.source import SourceMap
from ..load.spec import EffectDecl, Entity, Lifecycle, Operation, Ordering, Parameter, Policy, Profile

__all__ = ["CompileContext"]

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


class CompileContext:
    """The spec being compiled, its source map and the problems found so far."""

    # The spec's parts, set by the builder as it builds them (in this order).
    parameters: dict[str, Parameter]
    profiles: dict[str, Profile]
    definitions: dict
    lifecycle: Lifecycle
    orderings: dict[str, Ordering]
    entity: Entity
    tables: tuple[str, ...]
    counters: tuple[str, ...]
    effects: dict[str, EffectDecl]
    policies: dict[str, Policy]
    operations: dict[str, Operation]
    # The operation whose steps are being compiled: its errors and name.
    _op_errors: set[str]
    _op_name: str

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
