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

An operation may also name the records it changes in a list argument (the
job tool's ``cancel``): a ``for_each`` whose condition is ``<entity>.<key> in
<name>`` (possibly ``&& ...``), where ``<name>`` is that argument or a ``let``
derived from it alone (``list_record_access``). Such a list-writer races
itself (``<op>_twice``: both calls alike, moved onto a record the first one's
list names) and each conflicting writer that finds the record by a scalar
argument (``<other>_and_<op>``: the list set to ``[shared.<arg>]`` by the
group's ``args``, as a declared group would). The analysis is conservative:
a name any step assigns otherwise (a ``collect``, a ``let`` reading the
records, the clock, a parameter or another argument, a function that may
change the items) is not understood, and a ``for_each`` over it derives
nothing.

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

from ..errors import ExpressionError
from ..language.expressions import Expression, compile_expression
from ..load.spec import Spec
from ..model import steps as S

__all__ = ["record_writers", "record_access", "list_record_access", "derived_races"]

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


# -- records named in a list argument ---------------------------------------------------
# What a name holds, as far as the races care: _EMPTY (the empty list: it selects
# nothing), a list argument's name (some of that argument's items, as given), or
# None (anything else, or not understood).
_EMPTY = ""
_MEMBERSHIP = re.compile(r"\s*([A-Za-z_]\w*)\.([A-Za-z_]\w*)\s+in\s+((?:args\.)?[A-Za-z_]\w*)\s*(?:&&(.*))?", re.S)
# Functions that keep the items of a list as they are (or only count, test them).
_KEEPING = frozenset({"distinct", "size", "known"})
_TRANSFORMING = re.compile(r"\.\s*(?:map|transformList|transformMap|transformMapEntry)\s*\(")


def key_lists(spec: Spec, name: str) -> list[str]:
    """The list arguments of an operation whose items are drawn as record keys
    (``items`` with ``x-draw: {keys: ...}``, as the exploration draws them)."""
    out = []
    for prop, sub in (spec.operations[name].args_schema.get("properties") or {}).items():
        items = sub.get("items") if isinstance(sub, dict) and not sub.get("x-draw") else None
        draw = items.get("x-draw") if isinstance(items, dict) else None
        if isinstance(draw, dict) and "keys" in draw:
            out.append(prop)
    return out


def _holds(expr: Expression, env: dict, lists: list[str]) -> str | None:
    """What a ``let`` value holds: the empty list, some items of one list
    argument (read directly or through names holding them), or None."""
    if expr.source.strip() == "[]":
        return _EMPTY
    if expr.functions - _KEEPING or _TRANSFORMING.search(expr.source):
        return None
    found = set()
    for var, fields in expr.reads:
        if var == "args":
            if fields is None or len(fields) != 1 or not fields <= set(lists):
                return None
            found |= fields
        elif env.get(var) is None:
            return None
        elif env[var] != _EMPTY:
            found.add(env[var])
    return found.pop() if len(found) == 1 else None


def _join(first: dict, second: dict) -> dict:
    """What each name holds after either of two branches ran."""
    return {name: first.get(name) if first.get(name) == second.get(name) else None for name in {*first, *second}}


def _list_selections(spec: Spec, steps: list, env: dict, lists: list[str], out: list) -> dict:
    """Walk ``steps`` in order, following what each name holds; append to
    ``out`` each ``for_each`` selecting records by membership of their key in
    a list argument, with that argument. Returns what the names hold after."""
    entity = spec.entity
    for step in steps:
        if isinstance(step, S.Let):
            for name, expr in step.values.items():  # one after the other, as the model does
                env[name] = _holds(expr, env, lists)
        elif isinstance(step, S.When):
            then = _list_selections(spec, step.then, dict(env), lists, out)
            env = _join(then, _list_selections(spec, step.otherwise, dict(env), lists, out))
        elif isinstance(step, S.LOOPS):
            if isinstance(step, S.ForEach) and step.condition is not None:
                match = _MEMBERSHIP.fullmatch(step.condition.source)
                rest = match.group(4) if match else None
                if (
                    match
                    and (match.group(1), match.group(2)) == (entity.name, entity.key)
                    and not (rest and ("||" in rest or "?" in rest))
                ):
                    held = match.group(3)
                    arg = held[5:] if held.startswith("args.") and held[5:] in lists else env.get(held)
                    if arg:
                        out.append((step, arg))
            body = _list_selections(spec, step.body, {**env, step.bind: None}, lists, out)
            env = {**_join(env, body), step.bind: None}  # the body runs any number of times
        elif isinstance(getattr(step, "bind", None), str):
            env[step.bind] = None  # a record, a collected list, a counter: not an argument's items
    return env


def _rebinds(body: list, bind: str) -> bool:
    """Whether a step in ``body`` binds ``bind`` again (a nested loop, a find)."""
    return any(
        getattr(step, "bind", None) == bind or (isinstance(step, S.Let) and bind in step.values)
        for step in S.walk_steps(body)
    )


def list_record_access(spec: Spec, name: str) -> dict[str, tuple[set, set]]:
    """Per list argument whose items name records (``key_lists``): the fields
    of the records an operation selects by membership of their key in it
    (``for_each`` over ``<entity>.<key> in <name>``, ``<name>`` derived from that
    argument alone) that it reads and those it writes; only arguments it writes by."""
    lists = key_lists(spec, name)
    if not lists:
        return {}
    found: list = []
    _list_selections(spec, spec.operations[name].steps, {}, lists, found)
    access: dict[str, tuple[set, set]] = {}
    for loop, arg in found:
        if _rebinds(loop.body, loop.bind):
            continue  # which record a write names is not clear
        reads, writes = access.setdefault(arg, (set(), set()))
        reads.update(dict(loop.condition.reads).get(spec.entity.name) or ())
        if loop.states is not None:
            reads.add(_STATUS)
        for step in S.walk_steps(loop.body):
            if isinstance(step, S.Fire) and step.target == loop.bind:
                reads.add(_STATUS)
                writes.add(_STATUS)
            elif isinstance(step, S.SetFields) and step.target == loop.bind:
                writes.update(step.fields)
            for source in _sources(step):
                reads.update(re.findall(rf"\b{re.escape(loop.bind)}\.([A-Za-z_][A-Za-z0-9_]*)", source))
    return {arg: rw for arg, rw in access.items() if rw[1]}


def _refused(spec: Spec, name: str, args: dict) -> bool | None:
    """Whether the operation's leading ``let`` and ``require`` steps refuse
    ``args`` under the spec's default parameters (None: they cannot be
    evaluated without the model, e.g. they read records)."""
    frame = {"args": args, "params": spec.default_parameters(), "now": 0}
    try:
        for step in spec.operations[name].steps:
            if isinstance(step, S.Let):
                for let, expr in step.values.items():
                    frame[let] = expr.evaluate(frame)
            elif isinstance(step, S.Require):
                holds = step.condition.evaluate(frame)
                if not isinstance(holds, bool):
                    return None
                if not holds:
                    return True
            else:
                break
    except ExpressionError:
        return None
    return False


def _list_call_args(spec: Spec, name: str, arg: str, key: str | None) -> dict[str, str] | None:
    """The CEL sources a racing group sets a list-writer's arguments to: its
    list ``arg`` to ``[shared.<key>]`` (None: left as drawn), its other list
    arguments naming records to ``[]``, and a boolean argument that switches
    the operation into a mode its ``require`` refuses with that list (the job
    tool's ``list``) to the value it accepts. None when the leading
    requirements refuse those arguments whatever the booleans are."""
    props = spec.operations[name].args_schema.get("properties") or {}
    cleared = {other: "[]" for other in key_lists(spec, name) if other != arg and not props[other].get("minItems")}
    sent = {arg: ["k"], **{other: [] for other in cleared}}
    if _refused(spec, name, sent) is True:
        return None
    modes = {}
    for flag, sub in props.items():
        if isinstance(sub, dict) and sub.get("type") == "boolean" and flag not in sent:
            on, off = _refused(spec, name, {**sent, flag: True}), _refused(spec, name, {**sent, flag: False})
            if on is True and off is False:
                modes[flag] = "false"
            elif on is False and off is True:
                modes[flag] = "true"
    return {**({arg: f"[shared.{key}]"} if key is not None else {}), **cleared, **modes}


def _compiled(sources: dict[str, str], where: str) -> dict[str, Expression]:
    return {name: compile_expression(source, where) for name, source in sources.items()}


def _list_races(spec: Spec, writers: dict[str, list[str]], taken: set[str]) -> list[dict]:
    """The groups racing each list-writer: itself, and each conflicting
    scalar writer of the same records (``taken``: names already in use)."""
    out: list[dict] = []
    weights = spec.exploration.weights

    def unique(name: str, arg: str) -> str:
        name = name if name not in taken else f"{name}_by_{arg}"
        taken.add(name)
        return name

    for op in spec.operations:
        if weights.get(op, 1) <= 0:
            continue
        for arg, (reads, writes) in list_record_access(spec, op).items():
            where = spec.operations[op].steps[0].where if spec.operations[op].steps else spec.path
            twice = _list_call_args(spec, op, arg, None)
            if twice is not None and not _declared(spec, (op, op), arg, (op, arg)):
                out.append(
                    {
                        "name": unique(f"{op}_twice", arg),
                        "calls": [op, op],
                        "same_args": [arg],
                        "assumes": None,
                        "args": {op: _compiled(twice, where)} if twice else {},
                        "identical": True,
                        "derived": True,
                        "description": f"derived: {op} writes the records its list {arg} names; "
                        f"the same call twice at once",
                    }
                )
            for key, others in writers.items():
                sources = _list_call_args(spec, op, arg, key)
                for other in others:
                    other_reads, other_writes = record_access(spec, other).get(key, (set(), set()))
                    if (
                        other == op
                        or sources is None
                        or not (writes & (other_reads | other_writes) or other_writes & reads)
                        or _declared(spec, (other, op), key, (op, arg))
                    ):
                        continue
                    out.append(
                        {
                            "name": unique(f"{other}_and_{op}", arg),
                            "calls": [other, op],
                            "same_args": [key],
                            "assumes": None,
                            "args": {op: _compiled(sources, where)},
                            "identical": False,
                            "derived": True,
                            "description": f"derived: {other} writes the record found by {key}, {op} "
                            f"the records its list {arg} names; both at once, the list naming that record",
                        }
                    )
    return out


def _declared(spec: Spec, pair: tuple[str, str], arg: str, listed: tuple[str, str] | None = None) -> bool:
    """Whether a declared concurrent group already races ``pair`` on ``arg``;
    ``listed`` = (operation, list argument): that call names the record in
    the list, which the group's ``args`` set from the shared ``arg`` (or, for
    the operation twice, that ``same_args`` share)."""
    for group in spec.exploration.concurrent:
        if listed is not None:
            op, items = listed
            expr = (group.get("args") or {}).get(op, {}).get(items)
            if not (
                items in group["same_args"]
                or (isinstance(expr, Expression) and arg in (dict(expr.reads).get("shared") or ()))
            ):
                continue
        elif arg not in group["same_args"]:
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
    same argument, on the same record; last, the races of each operation
    writing the records a list argument names (``_list_races``). Shaped like
    ``exploration.concurrent`` entries (``args``: compiled expressions per
    call), with ``derived: True``, and ``identical: True`` where the second
    call repeats the first one's arguments."""
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
                    "args": {},
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
                    "args": {},
                    "identical": False,
                    "derived": True,
                    "description": f"derived: {first} and {second} both write the record found by {arg}; "
                    f"both at once on the same record",
                }
            )
    taken = {group["name"] for group in (*spec.exploration.concurrent, *out)}
    return out + _list_races(spec, writers, taken)
