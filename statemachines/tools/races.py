"""Races the spec implies: operations that write one record, called at once.

An operation writes a record when it finds it by an argument (``find: {key:
args.job_id}``) and then fires a trigger on it or sets its fields. Two such
calls at the same moment on the same record race:

- the same operation twice with identical arguments is the at-most-once race
  (a double complete, a double cancel, a double notify): exactly one may take
  effect, whichever it is (``<op>_twice``);
- two different operations on the same record that conflict, i.e. one
  writes a field the other reads or writes (firing a trigger reads and writes
  the record's ``status``): a cancel racing a finish, a progress report
  racing a completion. The outcome must be theirs in some order
  (``<op>_and_<other>``). Operations touching disjoint fields commute; their
  race shows nothing and is left out.

The exploration runs each as a concurrent group (checked for linearizability
like the declared ones) unless the spec already declares a group racing those
operations on that argument, and the coverage report counts which ran. Two
orders may end in states no answer tells apart yet; the check keeps the
others and tries them when a later answer contradicts its choice
(conformance/engine/linearize.py).

Pure data: no Hypothesis here.
"""

from __future__ import annotations

import dataclasses
import itertools
import re

from ..load.spec import Spec
from ..model import steps as S

__all__ = ["record_writers", "record_access", "derived_races"]

_ARG = re.compile(r"\s*args\.([A-Za-z_][A-Za-z0-9_]*)\s*")
_STATUS = "status"  # what firing a trigger reads and writes


def _sources(step) -> list[str]:
    """The CEL text of every expression a step holds (directly, or in a dict or list)."""
    out: list[str] = []
    for item in dataclasses.fields(step):
        value = getattr(step, item.name)
        values = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else [value]
        out += [v.source for v in values if isinstance(getattr(v, "source", None), str)]
    return out


def record_access(spec: Spec, name: str) -> dict[str, tuple[set, set]]:
    """Per argument an operation finds a record by: the record's fields it
    reads and those it writes (firing a trigger reads and writes ``status``)."""
    found: dict[str, str] = {}  # bound name -> the argument it was found by
    access: dict[str, tuple[set, set]] = {}
    for step in S.walk_steps(spec.operations[name].steps):
        if isinstance(step, S.Find) and step.key is not None:
            match = _ARG.fullmatch(step.key.source)
            if match:
                found[step.bind] = match.group(1)
                access.setdefault(match.group(1), (set(), set()))
        if isinstance(step, S.Fire) and step.target in found:
            reads, writes = access[found[step.target]]
            reads.add(_STATUS)
            writes.add(_STATUS)
        elif isinstance(step, S.SetFields) and step.target in found:
            access[found[step.target]][1].update(step.fields)
        for source in _sources(step):
            for bind, arg in found.items():
                access[arg][0].update(re.findall(rf"\b{re.escape(bind)}\.([A-Za-z_][A-Za-z0-9_]*)", source))
    return access


def _conflict(spec: Spec, first: str, second: str, arg: str) -> bool:
    """Whether one writes a field of the record the other reads or writes."""
    reads_a, writes_a = record_access(spec, first).get(arg, (set(), set()))
    reads_b, writes_b = record_access(spec, second).get(arg, (set(), set()))
    return bool(writes_a & (reads_b | writes_b) or writes_b & reads_a)


def record_writers(spec: Spec) -> dict[str, list[str]]:
    """Per argument name: the operations that find a record by that argument
    and then change it (fire a trigger on it or set its fields), in spec order."""
    writers: dict[str, list[str]] = {}
    for name, op in spec.operations.items():
        found: dict[str, str] = {}  # bound name -> the argument it was found by
        written: list[str] = []
        for step in S.walk_steps(op.steps):
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
    operation that writes a record twice with identical arguments, then each
    pair of different conflicting operations writing records found by the
    same argument, on the same record. Shaped like ``exploration.concurrent`` entries, with
    ``derived: True``, and ``identical: True`` where the second call repeats
    the first one's arguments."""
    out: list[dict] = []
    if not spec.exploration.derived_races:
        return out
    weights, seen = spec.exploration.weights, set()
    writers = {arg: [op for op in ops if weights.get(op, 1) > 0] for arg, ops in record_writers(spec).items()}
    for arg, ops in writers.items():  # weighted 0: never explored
        for op in ops:
            if op in seen or _declared(spec, (op, op), arg):
                continue
            seen.add(op)
            out.append(
                {
                    "name": f"{op}_twice",
                    "calls": [op, op],
                    "same_args": [arg],
                    "assumes": None,
                    "identical": True,
                    "derived": True,
                    "description": f"derived: {op} writes the record found by {arg}; the same call twice at once",
                }
            )
    pairs = set()
    for arg, ops in writers.items():
        for first, second in itertools.combinations(ops, 2):
            if (
                (first, second) in pairs
                or _declared(spec, (first, second), arg)
                or not _conflict(spec, first, second, arg)
            ):
                continue
            pairs.add((first, second))
            out.append(
                {
                    "name": f"{first}_and_{second}",
                    "calls": [first, second],
                    "same_args": [arg],
                    "assumes": None,
                    "identical": False,
                    "derived": True,
                    "description": f"derived: {first} and {second} both write the record found by {arg}; "
                    f"both at once on the same record",
                }
            )
    return out
