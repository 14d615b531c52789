"""Races the spec implies: an operation that writes a record, called twice at once.

An operation writes a record when it finds it by an argument (``find: {key:
args.job_id}``) and then fires a trigger on it or sets its fields. Two
identical such calls at the same moment are the at-most-once race (a double
complete, a double cancel, a double notify): exactly one may take effect,
whichever it is. The exploration runs each one as a concurrent group
(checked for linearizability like the declared ones) unless the spec already
declares a group racing that operation with itself on that argument, and the
coverage report counts which ran.

Pairs of *different* operations writing one record are not derived: two
orders of such calls may differ only in state no later answer shows, which no
check can then tell apart. A spec declares those races it can observe
(``exploration.concurrent``).

Pure data: no Hypothesis here.
"""
from __future__ import annotations

import re
from . import steps as S
from .lint import walk_steps
from .spec import Spec

__all__ = ["record_writers", "derived_races"]

_ARG = re.compile(r"\s*args\.([A-Za-z_][A-Za-z0-9_]*)\s*")


def record_writers(spec: Spec) -> dict[str, list[str]]:
    """Per argument name: the operations that find a record by that argument
    and then change it (fire a trigger on it or set its fields), in spec order."""
    writers: dict[str, list[str]] = {}
    for name, op in spec.operations.items():
        found: dict[str, str] = {}  # bound name -> the argument it was found by
        written: list[str] = []
        for step in walk_steps(op.steps):
            if isinstance(step, S.Find) and step.key is not None:
                match = _ARG.fullmatch(step.key.source)
                if match:
                    found[step.bind] = match.group(1)
            elif isinstance(step, (S.Fire, S.SetFields)) and step.target in found:
                if found[step.target] not in written:
                    written.append(found[step.target])
        for arg in written:
            writers.setdefault(arg, []).append(name)
    return writers


def _declared(spec: Spec, pair: tuple[str, str], arg: str) -> bool:
    """Whether a declared concurrent group already races ``pair`` on ``arg``."""
    for group in spec.exploration.concurrent:
        if arg not in group["same_args"]:
            continue
        rest = list(group["calls"])
        for call in pair:
            if call not in rest:
                break
            rest.remove(call)
        else:
            return True
    return False


def derived_races(spec: Spec) -> list[dict]:
    """The concurrent groups the spec implies and does not declare: each
    operation that writes a record, twice with identical arguments. Shaped
    like ``exploration.concurrent`` entries, with ``identical: True`` (the
    second call repeats the first one's arguments) and ``derived: True``."""
    out: list[dict] = []
    if not spec.exploration.derived_races:
        return out
    weights, seen = spec.exploration.weights, set()
    for arg, ops in record_writers(spec).items():
        for op in ops:
            if op in seen or weights.get(op, 1) <= 0 or _declared(spec, (op, op), arg):
                continue  # weighted 0: never explored
            seen.add(op)
            out.append({"name": f"{op}_twice", "calls": [op, op], "same_args": [arg], "assumes": None,
                        "identical": True, "derived": True,
                        "description": f"derived: {op} writes the record found by {arg}; the same call twice at once"})
    return out
