"""Which arguments name a new record: the value a call gives its record.

Most arguments drawn from the keys seen are lookups: ``cancel_job(job_id)``
must find the job or answer "not found". Some name the record a call
creates, as thread-jobs' ``start_job(job_id)`` does with an explicit id. The
two differ in what the kit may draw: a lookup may be given any key never
issued (an implementation must find nothing), but a new record's name ends
up wherever the implementation keeps the record, in a file name for one. A
name like ``./job-2`` is a key no implementation can store under its own
name without leaving its directory, so drawing it would fail correct code.

An argument names a new record when the key field of a ``create`` in its
operation's steps takes its value: directly (``job_id: args.job_id``) or
through ``let`` values (``let job_id: has(args.job_id) ? args.job_id :
...``). An argument a string parameter fills in by name (thread-jobs'
``spill_file_name: "{tool_name}-{job_id}.log"``) ends up in a file name
too (``file_name_arguments``). Pure data: no Hypothesis here.
"""

from __future__ import annotations

import re

from ..language.expressions import Expression
from ..load.spec import Spec
from ..model import steps as S

__all__ = ["creating_operations", "file_name_arguments", "naming_arguments"]

_ARGUMENT = re.compile(r"\bargs\.([A-Za-z_][A-Za-z0-9_]*)")
_FILLED_IN = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def naming_arguments(spec: Spec) -> frozenset[tuple[str, str]]:
    """(operation, argument) of each argument whose value may become the key
    of a record its operation creates."""
    named: set[tuple[str, str]] = set()
    for name, op in spec.operations.items():
        lets: dict[str, Expression] = {}
        for step in S.walk_steps(op.steps):
            if isinstance(step, S.Let):
                lets.update(step.values)
        for step in S.walk_steps(op.steps):
            if isinstance(step, S.Create) and spec.entity.key in step.fields:
                named.update((name, arg) for arg in _arguments_in(step.fields[spec.entity.key], lets, set()))
    return frozenset(named)


def file_name_arguments(spec: Spec, params: dict) -> frozenset[tuple[str, str]]:
    """(operation, argument) of each argument that a string parameter's
    value names in braces, as a file name template does: under these
    parameters its value may become part of a file name."""
    filled = {name for value in params.values() if isinstance(value, str) for name in _FILLED_IN.findall(value)}
    return frozenset(
        (op_name, arg)
        for op_name, op in spec.operations.items()
        for arg in (op.args_schema.get("properties") or {})
        if arg in filled
    )


def creating_operations(spec: Spec) -> frozenset[str]:
    """The operations with a step that creates a record."""
    return frozenset(
        name for name, op in spec.operations.items() if any(isinstance(s, S.Create) for s in S.walk_steps(op.steps))
    )


def _arguments_in(expr: Expression, lets: dict[str, Expression], visited: set[str]) -> set[str]:
    """The arguments ``expr`` reads, also through the ``let`` values it names."""
    found = set(_ARGUMENT.findall(expr.source))
    for variable in expr.variables:
        if variable in lets and variable not in visited:
            visited.add(variable)
            found |= _arguments_in(lets[variable], lets, visited)
    return found
