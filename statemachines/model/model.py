"""The executable reference model compiled from a spec.

One ``transitions.Machine`` holds the lifecycle; entity records are plain
dicts driven through it by a thin handle (no machine per entity). Operation
steps from the spec are interpreted against an indexed store, a virtual
clock and the spec's parameters. ``predict`` says what an operation must
return and which effects it must produce; it reads the implementation's
observation only where the spec lets the implementation choose (a generated
id, a temp-file path): the spec reads the observation and checks it
(``check``), or predicts a ``Matcher``.

Records live in an indexed store (by key, scope and unique fields) and are
driven through the machine by a one-slot handle, so the cost of an operation
does not grow with unrelated records. Each step class has its interpreter in
``Model._STEP`` (``compile_steps.StepCompiler._STEP`` builds the same kinds,
tests/test_step_dispatch.py). ``on_clock`` steps run when the clock moves:
at every instant a ``timers:`` field of a record holds on the way, in time
order, then at the target time, so a retry computed from its own firing
instant stays exact; an operation that waits (``advance: {to: ...}``) runs
the same clock inside the call. ``remove`` forgets a record. An operation's
``assumes`` says whether the parameters offer it.

For the harness's probe reuse the model keeps a ``revision`` (grows whenever
the visible state may have changed) and, for a read-only prediction, what it
read (``read_token``: the scopes' record versions, the tables, the clock when
the steps read ``now``).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from transitions import Machine

from ..errors import ExpressionError, ObservationError
from ..language.expressions import Expression, compile_expression, fields_used
from ..load.source import list_index
from ..load.spec import Invariant, Spec
from . import steps as S
from .matchers import Matcher
from .store import EntityStore

__all__ = ["Model", "Prediction", "Coverage", "NO_RECORD", "POLICY_ACTS", "BOUNDARY_CLASSES"]

# What a policy of each kind does when it acts: coverage event suffixes
# (``<policy>.<event>``) and how to say each. A policy counts as exercised
# when every one of its events was hit.
POLICY_ACTS = {
    "scope": (("excluded", "hides another scope's record"),),
    "ordering": (("ordered", "orders two or more records"),),
    "keep_newest": (("evicted", "evicts a record"),),
    "expire": (("expired", "expires a record"),),
    "at_most_once": (("delivered", "delivers"),),
    "inline_or_spill": (("inline", "keeps a payload inline"), ("spilled", "spills a payload")),
}
# The sides of a policy's limit where behaviour switches, per kind.
BOUNDARY_CLASSES = {
    "keep_newest": (("at_limit", "exactly at the limit"), ("evicted", "over the limit")),
    "inline_or_spill": (
        ("inline", "within the limits"),
        ("at_limit", "exactly at a limit"),
        ("spilled", "over a limit"),
    ),
}


@dataclass
class Prediction:
    """What the model says an operation must produce."""

    result: Any = None
    error: dict | None = None
    effects: list = field(default_factory=list)
    # Keys of the records this call created, and values the spec let the
    # implementation choose (a generated id, a path), in the order the model
    # met them: what a replay with fewer steps renames (engine/reduce.py).
    chosen: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None


NO_RECORD = "(no record)"  # the state a triple names when the operation's find met no record


class Coverage:
    """Counts of what a run exercised: operations, outcomes, transitions, states,
    policies, races (the exploration's concurrent groups, by name), limits
    (the edges of ``exploration.limits`` the exploration drew, "limit.class"),
    pairs (two consecutive transitions of one record, "t1 then t2") and
    triples (the state of the record an operation found, the operation and
    its outcome, "state: op -> outcome"). ``last`` holds each record's latest
    transition, for its next pair."""

    CATEGORIES = ("operations", "outcomes", "transitions", "states", "policies", "races", "limits", "pairs", "triples")

    # Plain dicts, not Counters: the model copies its coverage with every
    # snapshot (each order a concurrent group's check tries), and a dict copy
    # is several times cheaper than building a Counter.
    def __init__(self) -> None:
        self.counts: dict[str, dict[str, int]] = {c: {} for c in self.CATEGORIES}
        self.last: dict[Any, str] = {}
        # When a list (``record_orders``): each decision an ordering made while
        # the model's state changed, as (ordering, the keys of the records it
        # ordered), for telling which failures one rule of the spec explains.
        self.orders: list[tuple[str, frozenset]] | None = None

    def record_orders(self) -> Coverage:
        """This coverage, now also noting the orderings' decisions (``orders``)."""
        self.orders = []
        return self

    def moved(self, key: Any, transition: str) -> None:
        """A record took ``transition``: count the pair with its previous one."""
        previous = self.last.get(key)
        self.last[key] = transition
        if previous is not None:
            self.hit("pairs", f"{previous} then {transition}")

    def hit(self, category: str, name: str, n: int = 1) -> None:
        counts = self.counts[category]
        counts[name] = counts.get(name, 0) + n

    def merge(self, other: Coverage) -> None:
        for c, theirs in other.counts.items():
            mine = self.counts[c]
            for name, n in theirs.items():
                mine[name] = mine.get(name, 0) + n

    def copy(self) -> Coverage:
        out = Coverage.__new__(Coverage)
        out.counts = {c: dict(v) for c, v in self.counts.items()}
        out.orders = None if self.orders is None else list(self.orders)
        out.last = dict(self.last)
        return out

    def as_dict(self) -> dict:
        return {c: dict(sorted(v.items())) for c, v in self.counts.items()}


class _Abort(Exception):
    """An operation step rejected the call: the prediction is an error."""

    def __init__(self, kind: str, message: str):
        self.kind, self.message = kind, message


def _handle_class(field_name: str):
    """A one-slot wrapper exposing a record's lifecycle field as an attribute,
    which is how ``transitions`` reads and writes a model's state."""

    def get(self):
        return self.record[field_name]

    def put(self, value):
        self.record[field_name] = value

    return type("EntityHandle", (), {"__slots__": ("record",), field_name: property(get, put)})


# The step kinds that may change the model's state (the others only read it).
_WRITES = frozenset({S.Create, S.Fire, S.SetFields, S.Apply, S.Put, S.Drop, S.Counter, S.Reset, S.Remove, S.Advance})


def _reads(node: Any, variable: str) -> bool:
    """Whether any expression in ``node`` (steps, and everything nested in
    them: conditions, messages, nested steps) reads ``variable``."""
    if isinstance(node, Expression):
        return variable in node.variables
    if isinstance(node, dict):
        return any(_reads(value, variable) for value in node.values())
    if isinstance(node, (list, tuple, set, frozenset)):
        return any(_reads(value, variable) for value in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        return any(_reads(getattr(node, f.name), variable) for f in dataclasses.fields(node))
    return False


def _writes(steps: list) -> bool:
    """Whether any of these steps (or the steps nested in them) changes the model's state."""
    for step in steps:
        if type(step) in _WRITES:
            return True
        if isinstance(step, S.When) and (_writes(step.then) or _writes(step.otherwise)):
            return True
        if isinstance(step, S.LOOPS) and _writes(step.body):
            return True
    return False


def _finds(steps: list) -> list[S.Find]:
    """The ``find`` steps among these steps and those nested in them, in order."""
    found: list[S.Find] = []
    for step in steps:
        if isinstance(step, S.Find):
            found.append(step)
        elif isinstance(step, S.When):
            found += _finds(step.then) + _finds(step.otherwise)
        elif isinstance(step, S.LOOPS):
            found += _finds(step.body)
    return found


def _checks(spec: Spec, kind: str) -> list[tuple[Invariant, Expression]]:
    """The spec's invariants of one kind (`each` record, or per `scope`) with their checks."""
    return [(inv, inv.check) for inv in spec.invariants if inv.kind == kind and inv.check is not None]


def _as_list(checks: list[tuple[Invariant, Expression]]) -> str:
    return "[" + ", ".join(f"({check.source})" for _, check in checks) + "]"


def _all_in_one(checks: list[tuple[Invariant, Expression]]) -> Expression | None:
    """The per-record invariants' checks the kit evaluates itself (its CEL
    subset) as one CEL list, evaluated once per touched record. A check
    outside the subset (a regex, say) is left out: one such check in the list
    would hand every evaluation of all of them to the CEL binding."""
    own = [(inv, check) for inv, check in checks if _evaluated_by_kit(check)]
    return _compiled_list(_as_list(own)) if own else None


def _evaluated_by_kit(check: Expression) -> bool:
    """Whether the kit evaluates ``check`` itself (its CEL subset or a fast path)."""
    return check.subset is not None or check.fast is not None


@functools.lru_cache(maxsize=64)
def _compiled_list(source: str) -> Expression:
    """One compilation per list (a Model is made per session: every replay and
    every trace checked makes one); an Expression is never changed once made."""
    return compile_expression(source, "invariants", max_chars=None)


def _scope_fields_read(check: Expression, collection: str) -> frozenset | None:
    """The record fields a scope invariant reads through its macro's variable
    (`jobs.all(j, j.f ...)`), so only those are handed to CEL; None (all) when
    it uses the whole collection otherwise."""
    macro = re.search(r"\.(?:all|exists|exists_one|filter|map)\(\s*([A-Za-z_]\w*)\s*,", check.source)
    bare = re.search(rf"\b{collection}\b(?!\s*\.(?:all|exists|exists_one|filter|map|size)\()", check.source)
    if not macro or bare:
        return None
    var = macro.group(1)
    # the macro's own binding, `filter(j, ...`, is not a use of the whole record
    return fields_used(re.sub(rf"\(\s*{var}\s*,", "(", check.source), var)


def _spill_why(policy: str, lines: int, max_lines: Any, size: int, max_bytes: Any) -> str:
    """Why policy ``policy`` spilled a payload, in its measures: a reader
    counting lines by hand needs the rule (newlines + 1) beside the count."""
    over = [
        f"{lines} line(s) (newlines + 1) > max_lines {max_lines}" if lines > max_lines else None,
        f"{size} UTF-8 byte(s) > max_bytes {max_bytes}" if size > max_bytes else None,
    ]
    return f"policy {policy} spills this payload: " + " and ".join(o for o in over if o)


class Model:
    def __init__(self, spec: Spec, params: dict):
        self.spec = spec
        self.params = dict(params)
        self.entity = spec.entity
        self.field = spec.lifecycle.field
        self.terminal_states = sorted(spec.lifecycle.terminal)
        self.coverage = Coverage()
        # operations whose steps change nothing (probes, lists): Model.peek predicts them in place
        self._read_only = frozenset(name for name, op in spec.operations.items() if not _writes(op.steps))
        # ...and those of them whose steps never read the clock (`now`): a clock move alone
        # cannot change what they predict (Model.read_token)
        self._clock_free = frozenset(name for name in self._read_only if not _reads(spec.operations[name].steps, "now"))
        self._handle = _handle_class(self.field)
        self.machine = self._build_machine()
        self._public = tuple(self.entity.fields)
        self.now = 0
        # Grows whenever the state may have changed (a step that writes, the
        # clock, a reset): equal revisions mean the same visible state, so the
        # harness need not look at the implementation's state again.
        self.revision = 0
        # How many times a record was created under each key: one created again
        # under a key that was freed (evicted, removed) is another record.
        self.births: dict = {}
        self.store = EntityStore(self.entity.key, self.entity.scope_field, self.entity.unique_indexes)
        self.tables: dict[str, dict] = {t: {} for t in spec.tables}
        self.counters: dict[str, int] = {c: 0 for c in spec.counters}
        self._observation: dict | None = None
        self._fns = self._functions()  # CEL callbacks; they read the current observation through self
        self._sort_keys: dict = {}  # ordering name -> its sort key (Model._sort_key)
        self._scope_policy = next((p.name for p in spec.policies.values() if p.kind == "scope"), None)
        self._ordering_policy = {p.config["ordering"]: p.name for p in spec.policies.values() if p.kind == "ordering"}
        self._observation_problem: str | None = None
        self._spill_verdicts: list[tuple] = []  # this prediction's spills, measured, for messages
        self._chosen: list | None = None  # the prediction's ``chosen`` while one is made
        self._reading_only = False  # a prediction of an operation that changes nothing is being made
        self._clock_orders: dict | None = None  # while a clock move notes orders: ordering -> keys it ordered
        self._subject: str | None = None  # the state of the record the prediction's first find met
        self._touched: set = set()
        self._touched_scopes: set = set()
        # What a read-only prediction depends on, so the harness can tell that
        # it would come out the same again (Model.read_token): a version per
        # scope's records, one for all records, one for the tables, and an
        # epoch that grows whenever the whole state is replaced.
        self.epoch = 0
        self._scope_versions: dict = {}
        self._records_version = 0
        self._tables_version = 0
        self.track_reads = False  # set by the harness around a prediction it may want to reuse
        self._reads: list | None = None  # while tracked: [scopes read, read every record, read a table]
        self.last_reads: tuple | None = None  # what the last tracked prediction read
        self.last_hits: Coverage | None = None  # and what it counted in the coverage
        # All per-record invariants in one CEL evaluation per touched record.
        self._each = _checks(spec, "each")
        self._each_all = _all_in_one(self._each)
        self._each_apart = tuple(not _evaluated_by_kit(check) for _, check in self._each)  # not in _each_all
        self._each_fields = fields_used(_as_list(self._each), self.entity.name) if self._each else None
        self._scopes = _checks(spec, "scope")
        self._scope_fields = {inv.id: _scope_fields_read(check, self.entity.collection) for inv, check in self._scopes}

    # -- the lifecycle machine --------------------------------------------
    def _build_machine(self) -> Machine:
        lifecycle = self.spec.lifecycle
        transitions = []
        for t in lifecycle.transitions:
            spec = {"trigger": t.trigger, "source": list(t.sources), "dest": t.dest}
            if t.guard is not None:
                spec["conditions"] = [self._guard(t.guard)]
            transitions.append(spec)
        return Machine(
            model=None,
            states=list(lifecycle.states),
            transitions=transitions,
            initial=lifecycle.initial,
            auto_transitions=False,
            send_event=True,
            model_attribute=self.field,
            ignore_invalid_triggers=True,
        )

    def _guard(self, expression):
        def condition(event) -> bool:
            return expression.evaluate_bool(event.kwargs["env"], event.kwargs["functions"], role="a transition guard")

        return condition

    # -- lifecycle of the model itself ------------------------------------
    def reset(self, now_ms: int = 0) -> None:
        self.revision += 1
        self.epoch += 1
        self.births.clear()
        self.coverage.last.clear()
        self.now = now_ms
        self._touched.clear()
        self._touched_scopes.clear()
        self.store.clear()
        for table in self.tables.values():
            table.clear()
        for name in self.counters:
            self.counters[name] = 0

    def snapshot(self) -> tuple:
        return (
            self.now,
            self.store.copy(),
            {k: dict(v) for k, v in self.tables.items()},
            dict(self.counters),
            self.coverage.copy(),
            dict(self.births),
        )

    def restore(self, snap: tuple, *, again: bool = True) -> None:
        """Go back to a snapshot. ``again=False``: the snapshot is never
        restored again, so the model takes its copies over (no second copy)."""
        now, store, tables, counters, coverage, births = snap
        self.revision += 1
        self.epoch += 1
        if not again:
            self.now, self.store, self.tables, self.counters, self.coverage, self.births = snap
            return
        self.now, self.store, self.tables, self.counters, self.coverage, self.births = (
            now,
            store.copy(),
            {k: dict(v) for k, v in tables.items()},
            dict(counters),
            coverage.copy(),
            dict(births),
        )

    def advance(self, now_ms: int) -> Prediction:
        """Move the virtual clock; run the spec's ``on_clock`` steps and
        time-based policies; return the effects time must produce."""
        out = Prediction(result={})
        self._run_clock(now_ms, out)
        return out

    def _run_clock(self, target: int, out: Prediction) -> None:
        """Run time forward to ``target``: the on_clock steps run at every
        instant a timer field holds on the way (in time order, each timer
        seeing the clock at its own instant), then at ``target``."""
        target = max(self.now, int(target))
        self.revision += 1
        if self.coverage.orders is not None:
            self._clock_move_orders(target, out)
            return
        self._tick_to(target, out)

    def _clock_move_orders(self, target: int, out: Prediction) -> None:
        """``_tick_to`` noting, per ordering, every record it ordered in the
        whole move as one decision: records due at different instants of one
        move are ordered by the clock, then by the ordering, as one order."""
        outer, self._clock_orders = self._clock_orders, {}
        try:
            self._tick_to(target, out)
        finally:
            moved, self._clock_orders = self._clock_orders, outer
        for ordering, keys in moved.items():
            if len(keys) >= 2 and self.coverage.orders is not None:
                self.coverage.orders.append((ordering, frozenset(keys)))

    def _tick_to(self, target: int, out: Prediction) -> None:
        while self.spec.timers or self.spec.table_timers:
            due = [t for t in self._timer_instants() if self.now < t < target]
            if not due:
                break
            self.now = min(due)
            self._tick(out)
        self.now = target
        self._tick(out)

    def _timer_instants(self) -> Iterator[int]:
        """Every instant a timer holds: the records' timer fields, then the
        timer fields of tables' entries (a map, or a list of maps)."""
        for rec in self.store.all():
            for f in self.spec.timers:
                if rec.get(f) is not None:
                    yield rec[f]
        for table, f in self.spec.table_timers:
            for value in self.tables[table].values():
                for entry in value if isinstance(value, list | tuple) else (value,):
                    if isinstance(entry, dict) and isinstance(entry.get(f), int):
                        yield entry[f]

    def _tick(self, out: Prediction) -> None:
        if self.spec.on_clock:
            frame = {"args": {}, "params": self.params, "now": self.now, "terminal_states": self.terminal_states}
            try:
                self._run(self.spec.on_clock, frame, out)
            except _Abort as abort:
                raise ExpressionError(f"on_clock steps may not reject ({abort.kind})", "on_clock") from None
        for policy in self.spec.policies.values():
            if policy.kind == "expire":
                self._expire(policy)

    # -- queries used by the harness ----------------------------------------
    def keys(self) -> list:
        return list(self.store.records)

    def record(self, key) -> dict | None:
        rec = self.store.get(key)
        return None if rec is None else {f: rec.get(f) for f in self._public}

    def addressed(self, operation: str, args: dict) -> list[dict]:
        """The records (public fields) that ``operation`` called with ``args``
        would find now, in the order its ``find`` steps name them: each step
        whose key (or ``by`` value) reads only the call's arguments, the
        parameters and the clock. Changes nothing and counts nothing."""
        op = self.spec.operations.get(operation)
        if op is None:
            return []
        frame = {"args": args, "params": self.params, "now": self.now, "terminal_states": self.terminal_states}
        found: list[dict] = []
        for step in _finds(op.steps):
            record = self._found_by(step, frame)
            if record is not None and all(record is not seen for seen in found):
                found.append(record)
        return [{f: rec.get(f) for f in self._public} for rec in found]

    def _found_by(self, step: S.Find, frame: dict) -> dict | None:
        """The record a ``find`` step names from ``frame`` alone, or None
        (none there, or its key reads what only the steps before it bind)."""
        try:
            if step.key is not None:
                return self.store.get(step.key.evaluate(frame, self._fns))
            if step.by_field is not None and step.by_value is not None:
                return self.store.find_by(step.by_field, step.by_value.evaluate(frame, self._fns))
        except (ExpressionError, TypeError):
            return None
        return None

    # -- predicting one operation ---------------------------------------------
    def peek(self, operation: str, args: dict, observation: dict | None = None) -> Prediction:
        """What ``operation`` must produce now, leaving the model as it is and
        counting nothing in its coverage (an order being tried, not a step
        taken). Cheap for an operation that changes nothing (a probe); any
        other runs on a snapshot that is then restored."""
        if operation in self._read_only:
            coverage, self.coverage = self.coverage, Coverage()
            try:
                return self.predict(operation, args, observation)
            finally:
                self.coverage = coverage
        snap = self.snapshot()
        try:
            return self.predict(operation, args, observation)
        finally:
            self.restore(snap, again=False)

    def would_change(self, operation: str, args: dict, key: Any) -> bool:
        """Whether ``operation``, made now without an observation, would succeed
        and change the record under ``key``, leaving the model as it is (a
        snapshot restored, as for ``peek``). False when no record has that
        key, and when the answer needs a value the implementation chooses
        (ObservationError): the model cannot tell then."""
        before = self.store.records.get(key)
        if before is None:
            return False
        before = copy.deepcopy(before)
        snap = self.snapshot()
        try:
            return self.predict(operation, args).ok and self.store.records.get(key) != before
        except ObservationError:
            return False
        finally:
            self.restore(snap, again=False)

    def predict(self, operation: str, args: dict, observation: dict | None = None) -> Prediction:
        """Apply ``operation`` to the model and return what it must produce.

        Raises ObservationError when the spec needs a value the implementation
        chose and the observation does not provide it acceptably.
        """
        if self.track_reads and operation in self._read_only and self._reads is None:
            return self._predict_tracked(operation, args, observation)
        return self._predict(operation, args, observation)

    def _predict(self, operation: str, args: dict, observation: dict | None) -> Prediction:
        op = self.spec.operations[operation]
        self._observation = observation
        self._observation_problem = None
        self._spill_verdicts = []
        self._reading_only = operation in self._read_only
        self.coverage.hit("operations", operation)
        out = Prediction()
        self._chosen = out.chosen
        self._subject = None
        frame = {"args": args, "params": self.params, "now": self.now, "terminal_states": self.terminal_states}
        try:
            self._run(op.steps, frame, out)
        except _Abort as abort:
            out.error = {"kind": abort.kind, "message": abort.message}
            out.result = None
            self.coverage.hit("outcomes", f"{operation}: {abort.kind}")
            if self._subject is not None:
                self.coverage.hit("triples", f"{self._subject}: {operation} -> {abort.kind}")
        else:
            if out.result is None:
                out.result = {}
            self.coverage.hit("outcomes", f"{operation}: ok")
            if self._subject is not None:
                self.coverage.hit("triples", f"{self._subject}: {operation} -> ok")
        finally:
            self._observation = None
            self._chosen = None
            self._reading_only = False
        return out

    def _predict_tracked(self, operation: str, args: dict, observation: dict | None) -> Prediction:
        """``predict`` of an operation that changes nothing, noting what it
        read (``last_reads``) and what it counted (``last_hits``)."""
        counted, self.coverage = self.coverage, Coverage()
        self._reads = [[], False, False]
        try:
            return self._predict(operation, args, observation)
        finally:
            scopes, everything, tables = self._reads
            self._reads = None
            self.last_reads = (tuple(dict.fromkeys(scopes)), everything, tables, operation not in self._clock_free)
            self.last_hits, self.coverage = self.coverage, counted
            counted.merge(self.last_hits)

    def read_token(self, reads: tuple) -> tuple:
        """A value that is the same whenever what ``reads`` (a tracked
        prediction's ``last_reads``) covers is the same: the records of the
        scopes it read (or all records), the tables if it read them, the clock
        if its operation's steps read it."""
        scopes, everything, tables, clock = reads
        versions = self._scope_versions
        return (
            self.epoch,
            self.now if clock else None,
            self._records_version if everything else tuple(versions.get(scope, 0) for scope in scopes),
            self._tables_version if tables else None,
        )

    def _changed(self, record: dict) -> None:
        """A record was created, changed or removed: what read it may differ now."""
        self._records_version += 1
        if self.entity.scope_field:
            scope = record.get(self.entity.scope_field)
            self._scope_versions[scope] = self._scope_versions.get(scope, 0) + 1

    def _read_all(self) -> None:
        if self._reads is not None:
            self._reads[1] = True

    def _read_tables(self) -> None:
        if self._reads is not None:
            self._reads[2] = True

    # -- step interpreter ---------------------------------------------------
    def _functions(self) -> dict:
        """The kit's CEL functions that read the model (each notes what it read, Model.read_token)."""

        def reading_all(fn: Callable) -> Callable:
            def read(*args: Any) -> Any:
                self._read_all()
                return fn(*args)

            return read

        def reading_tables(fn: Callable) -> Callable:
            def read(*args: Any) -> Any:
                self._read_tables()
                return fn(*args)

            return read

        return {
            "known": reading_all(lambda key: key in self.store.records),
            "table_has": reading_tables(lambda name, key: key in self.tables[name]),
            "table_get": reading_tables(lambda name, key: self.tables[name].get(key)),
            "record": lambda rec: {f: rec.get(f) for f in self._public},
            "observed": self._observed,
            "observed_effect": self._observed_effect,
            "smallest_free_key": reading_all(self._smallest_free_key),
            "free_key": reading_all(self._free_key),
            "lookup": reading_all(self.record),  # a record's public fields, or null
        }

    def _smallest_free_key(self, prefix: str, start: int) -> str:
        """``prefix + N`` for the smallest N >= start that no record has as its key."""
        n = int(start)
        while f"{prefix}{n}" in self.store.records:
            n += 1
        return f"{prefix}{n}"

    def _free_key(self, preferred: str, separator: str, start: int) -> str:
        """``preferred`` if no record has it, else ``preferred + separator + N``
        for the smallest free N >= start."""
        if preferred not in self.store.records:
            return preferred
        return self._smallest_free_key(f"{preferred}{separator}", start)

    def _eval(self, expression, frame: dict):
        try:
            value = expression.evaluate(frame, self._fns)
        except ExpressionError:
            # An expression over the implementation's response failed because the
            # response lacks what it reads (e.g. size() of a missing list): that is
            # the response's fault, said plainly, not the spec's.
            if self._observation_problem:
                problem, self._observation_problem = self._observation_problem, None
                raise ObservationError(problem, expression.where) from None
            raise
        if self._observation_problem:
            problem, self._observation_problem = self._observation_problem, None
            raise ObservationError(problem, expression.where)
        return value

    def _cond(self, expression, frame: dict, role: str) -> bool:
        """A condition's value, which must be a boolean (never a truthy string)."""
        return expression.boolean(self._eval(expression, frame), role)

    def _observed(self, path: str):
        node: Any = self._observation
        for part in str(path).split("."):
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and list_index(part, len(node)) is not None:
                node = node[int(part)]
            else:
                self._observation_problem = (
                    f"expected {path} in the answer (the spec takes a value from it), but the answer has none"
                )
                return None
        self._note_chosen(node)
        return node

    def _note_chosen(self, value: Any) -> None:
        if isinstance(value, str) and self._chosen is not None and value not in self._chosen:
            self._chosen.append(value)

    def _observed_effect(self, effect: str, field_name: str, where: dict | None = None):
        """The field of the first reported effect of this kind (whose fields
        equal those of ``where``, when given: one of several spills in a call)."""
        for item in (self._observation or {}).get("effects") or []:
            if (
                isinstance(item, dict)
                and item.get("effect") == effect
                and field_name in item
                and all(item.get(k) == v for k, v in dict(where or {}).items())
            ):
                self._note_chosen(item[field_name])
                return item[field_name]
        self._observation_problem = (
            f"expected a {effect} effect (the spec takes its {field_name} from it), but the answer reported none"
            + "".join(f"; {_spill_why(*spilled)}" for spilled in self._spill_verdicts)
        )
        return None

    def _run(self, steps: list, frame: dict, out: Prediction) -> None:
        for step in steps:
            if type(step) in _WRITES:
                self.revision += 1
            try:
                self._STEP[type(step)](self, step, frame, out)
            except (ArithmeticError, LookupError, TypeError, ValueError, RecursionError) as exc:
                # A value of the wrong kind reached the model's own code (an `advance` target that is a
                # string, a limit that is a list): the spec's error at this step, never a crash.
                raise ExpressionError(f"{type(exc).__name__}: {exc}", getattr(step, "where", "") or "a step") from None

    def _error(self, err: S.ErrorSpec, frame: dict) -> _Abort:
        return _Abort(err.kind, str(self._eval(err.message, frame)))

    def _let(self, step: S.Let, frame, out):
        for name, expr in step.values.items():
            frame[name] = self._eval(expr, frame)

    def _require(self, step: S.Require, frame, out):
        if not self._cond(step.condition, frame, "a `require` condition"):
            raise self._error(step.error, frame)

    def _reject(self, step: S.Reject, frame, out):
        raise self._error(step.error, frame)

    def _check(self, step: S.Check, frame, out):
        if not self._cond(step.condition, frame, "a `check`"):
            values = {k: v for k, v in frame.items() if isinstance(v, (str, int, float, bool))}
            message = step.message
            for k, v in values.items():
                message = message.replace("{" + k + "}", str(v))
            raise ObservationError(message, step.where, result=out.result)

    def _find(self, step: S.Find, frame, out):
        if self._reads is not None:
            self._reads[1] = True
        if step.key is not None:
            record = self.store.get(self._eval(step.key, frame))
        else:
            assert step.by_field is not None  # compiled: a find without `key` has `by`
            record = self.store.find_by(step.by_field, self._eval(step.by_value, frame))
        if record is not None and step.scope is not None:
            if record.get(self.entity.scope_field) != self._eval(step.scope, frame):
                record = None
                if self._scope_policy:
                    self.coverage.hit(
                        "policies", f"{self._scope_policy}.excluded"
                    )  # another scope's record stayed hidden
        if self._subject is None:  # the state of the record the operation is about (Coverage "triples")
            self._subject = NO_RECORD if record is None else record[self.field]
        if record is None and step.missing is not None:
            raise self._error(step.missing, frame)
        frame[step.bind] = record

    def _create(self, step: S.Create, frame, out):
        record: dict[str, Any] = {f: None for f in self.entity.fields}
        record.update({f: None for f in self.entity.internal})
        for name, expr in step.fields.items():
            record[name] = self._eval(expr, frame)
        record[self.field] = self.spec.lifecycle.initial
        key = record[self.entity.key]
        if key in self.store.records:
            raise ExpressionError(
                f"create: a {self.entity.name} with key {key!r} already exists; the spec "
                f"must reject duplicates before creating",
                step.where,
            )
        self.store.add(record)
        self.coverage.last.pop(key, None)  # another record under a freed key: no pair with the old one
        self.births[key] = self.births.get(key, 0) + 1
        self._touch(record)
        self.coverage.hit("states", record[self.field])
        frame[step.bind] = record
        self._note_chosen(key)  # a replay with fewer steps renames it by creation order

    def _trigger(self, event, record, frame) -> bool:
        handle = self._handle()
        handle.record = record
        return bool(event.trigger(handle, env=frame, functions=self._fns))

    def _fire(self, step: S.Fire, frame, out):
        record = frame[step.target]
        before = record[self.field]
        event = self.machine.events[step.trigger]
        # A trigger the record's state does not take is normal for a spec (it
        # just does not fire); asking the machine would log a warning per call.
        fired = before in event.transitions and self._trigger(event, record, frame)
        if self._observation_problem:
            problem, self._observation_problem = self._observation_problem, None
            raise ObservationError(problem, step.where)
        if fired:
            after = record[self.field]
            move = f"{before} -{step.trigger}-> {after}"
            self.coverage.hit("transitions", move)
            self.coverage.moved(record[self.entity.key], move)
            self.coverage.hit("states", after)
            self._touch(record)
        elif step.otherwise is not None:
            raise self._error(step.otherwise, frame)
        if step.bind:
            frame[step.bind] = bool(fired)

    def _set(self, step: S.SetFields, frame, out):
        record = frame[step.target]
        if self.entity.scope_field in step.fields:
            self._changed(record)  # the old scope changes too (_touch marks the new one)
        for name, expr in step.fields.items():
            self.store.update(record, name, self._eval(expr, frame))
        self._touch(record)

    def _when(self, step: S.When, frame, out):
        self._run(step.then if self._cond(step.condition, frame, "a `when` condition") else step.otherwise, frame, out)

    def _emit(self, step: S.Emit, frame, out):
        effect: dict[str, Any] = {"effect": step.effect}
        for name, value in step.fields.items():
            if isinstance(value, S.MatcherSpec):
                effect[name] = Matcher(
                    tuple((kind, None if expr is None else self._eval(expr, frame)) for kind, expr in value.checks)
                )
            else:
                effect[name] = self._eval(value, frame)
        for policy in self.spec.policies.values():
            if policy.kind == "at_most_once" and policy.config["effect"] == step.effect:
                self.coverage.hit("policies", f"{policy.name}.delivered")
        out.effects.append(effect)

    def _select(self, step, frame) -> list[dict]:
        if step.scope is not None:
            scope = self._eval(step.scope, frame)
            if self._reads is not None:
                self._reads[0].append(scope)
            pool = self.store.in_scope(scope)
        else:
            if self._reads is not None:
                self._reads[1] = True
            pool = self.store.all()
        chosen = [r for r in pool if step.states is None or r[self.field] in step.states]
        if step.condition is not None and chosen:
            if step.condition.fast is not None or step.condition.path is not None:
                keep = self._each_record(step.condition, frame, chosen)
            else:
                keep = self._eval(step.condition_all, {**frame, "kit_records": self._project(chosen, step.fields)})
            for k in keep:
                step.condition.boolean(k, "a `where` condition")
            chosen = [r for r, k in zip(chosen, keep) if k]
        if step.ordering:
            chosen.sort(key=self._sort_key(step.ordering))
            if self._clock_orders is not None:
                self._clock_orders.setdefault(step.ordering, set()).update(r.get(self.entity.key) for r in chosen)
            elif self.coverage.orders is not None and len(chosen) >= 2 and not self._reading_only:
                self._note_order(step.ordering, chosen)
            if len(chosen) >= 2 and step.ordering in self._ordering_policy:
                self.coverage.hit("policies", f"{self._ordering_policy[step.ordering]}.ordered")
            first = self.spec.orderings[step.ordering].by[0]
            if any(a.get(first) == b.get(first) for a, b in zip(chosen, chosen[1:])):
                self.coverage.hit("policies", f"{step.ordering}.tie")  # the tie-break decided an order
        return chosen

    def _note_order(self, ordering: str, records: list[dict]) -> None:
        assert self.coverage.orders is not None
        self.coverage.orders.append((ordering, frozenset(r.get(self.entity.key) for r in records)))

    def _each_record(self, expression, frame: dict, records: list[dict]) -> list:
        """Evaluate a per-record expression record by record (for expressions
        with a direct Python evaluation, this beats one CEL call over a list)."""
        env = dict(frame)
        out = expression.evaluate_each(env, self.entity.name, records)  # no functions: no observation read
        if out is not None:
            return out
        out = []
        for record in records:
            env[self.entity.name] = record
            out.append(self._eval(expression, env))
        return out

    @staticmethod
    def _project(records: list[dict], fields) -> list[dict]:
        """Only the fields an expression reads: converting whole records into CEL values is what costs."""
        if fields is None:
            return records
        return [{f: r.get(f) for f in fields} for r in records]

    def _sort_key(self, ordering_name: str):
        """Records in an ordering's order: by each field in turn, a missing
        (null) value first. Built once per ordering; the key is one flat
        tuple (present, value, present, value, ...), which orders exactly as
        the pairs would, without a generator per record."""
        key = self._sort_keys.get(ordering_name)
        if key is None:
            fields = tuple(self.spec.orderings[ordering_name].by)
            if len(fields) == 1:
                (first,) = fields

                def key(rec):
                    a = rec.get(first)
                    return (a is not None, a)
            elif len(fields) == 2:
                first, second = fields

                def key(rec):
                    a, b = rec.get(first), rec.get(second)
                    return (a is not None, a, b is not None, b)
            else:

                def key(rec):
                    out = []
                    for f in fields:
                        value = rec.get(f)
                        out += (value is not None, value)
                    return tuple(out)

            self._sort_keys[ordering_name] = key
        return key

    def _for_each(self, step: S.ForEach, frame, out):
        for record in self._select(step, frame):
            if record[self.entity.key] not in self.store.records:
                continue  # removed by an earlier iteration
            frame[step.bind] = record
            self._run(step.body, frame, out)

    def _for_items(self, step: S.ForItems, frame, out):
        items = self._eval(step.items, frame)
        if items is None:
            return
        if not isinstance(items, list | tuple):
            raise ExpressionError(f"for_items needs a list, got {type(items).__name__}", step.where)
        for item in list(items):
            frame[step.bind] = item
            self._run(step.body, frame, out)

    def _collect(self, step: S.Collect, frame, out):
        chosen = self._select(step, frame)
        if step.select.fast is not None or step.select.path is not None:
            frame[step.bind] = self._each_record(step.select, frame, chosen)
        else:
            chosen = self._project(chosen, step.fields)
            frame[step.bind] = list(self._eval(step.select_all, {**frame, "kit_records": chosen})) if chosen else []

    def _apply(self, step: S.Apply, frame, out):
        policy = self.spec.policies[step.policy]
        if policy.kind == "inline_or_spill":
            # The policy's `payload` is evaluated with the entity's name bound
            # to the record being judged (`on`), whatever the step called it.
            scoped = {**frame, self.entity.name: frame.get(step.target)} if step.target in frame else frame
            payload = (
                self._eval(policy.exprs["payload"], scoped)
                if "payload" in policy.exprs
                else frame["args"].get(policy.config["arg"], "")
            )
            text = payload if isinstance(payload, str) else str(payload)
            if "serialised" in policy.exprs and self._cond(policy.exprs["serialised"], scoped, "`serialised`"):
                text = json.dumps(text, ensure_ascii=False)
            lines, size = text.count("\n") + 1, len(text.encode("utf-8"))
            max_lines = self._eval(policy.exprs["max_lines"], frame)
            max_bytes = self._eval(policy.exprs["max_bytes"], frame)
            inline = lines <= max_lines and size <= max_bytes
            if not inline:
                self._spill_verdicts.append((policy.name, lines, max_lines, size, max_bytes))
            self.coverage.hit("policies", f"{policy.name}.{'inline' if inline else 'spilled'}")
            if size == max_bytes or lines == max_lines:
                self.coverage.hit("policies", f"{policy.name}.at_limit")
            frame[step.bind] = inline
        elif policy.kind == "keep_newest":
            self._keep_newest(policy, self._eval(step.scope, frame) if step.scope else None, frame)

    def _keep_newest(self, policy, scope_value, frame) -> None:
        states = policy.config.get("states")
        wanted = (
            self.spec.lifecycle.terminal
            if states == "terminal"
            else frozenset(self.spec.lifecycle.states) - self.spec.lifecycle.terminal
            if states == "non_terminal"
            else frozenset(states)
            if states
            else None
        )
        pool = self.store.in_scope(scope_value) if scope_value is not None else self.store.all()
        candidates = [r for r in pool if wanted is None or r[self.field] in wanted]
        limit = int(self._eval(policy.exprs["limit"], frame))
        if len(candidates) == limit:
            self.coverage.hit("policies", f"{policy.name}.at_limit")
        if len(candidates) <= limit:
            return
        candidates.sort(key=self._sort_key(policy.config["ordering"]))
        if self.coverage.orders is not None:
            self._note_order(policy.config["ordering"], candidates)
        for record in candidates[: len(candidates) - limit]:
            self.store.remove(record[self.entity.key])
            self._changed(record)
            self.coverage.hit("policies", f"{policy.name}.evicted")
        if scope_value is not None:
            self._touched_scopes.add(scope_value)

    def _expire(self, policy) -> None:
        ent = self.entity.name
        frame = {"params": self.params, "now": self.now, "terminal_states": self.terminal_states}
        for record in self.store.all():
            frame[ent] = record
            if self._cond(policy.exprs["when"], frame, "an expiry condition"):
                self.store.remove(record[self.entity.key])
                self._changed(record)
                self.coverage.hit("policies", f"{policy.name}.expired")

    def _put(self, step: S.Put, frame, out):
        value = True if step.value is None else self._eval(step.value, frame)
        self.tables[step.table][self._eval(step.key, frame)] = value
        self._tables_version += 1

    def _drop(self, step: S.Drop, frame, out):
        self.tables[step.table].pop(self._eval(step.key, frame), None)
        self._tables_version += 1

    def _counter(self, step: S.Counter, frame, out):
        self.counters[step.name] += 1
        frame[step.bind] = self.counters[step.name]

    def _reset(self, step: S.Reset, frame, out):
        self.reset(self.now)

    def _remove(self, step: S.Remove, frame, out):
        record: dict = frame[step.target]
        if self.store.get(record[self.entity.key]) is record:
            self.store.remove(record[self.entity.key])
            self._changed(record)
            self.coverage.hit("policies", "removed")
            if self.entity.scope_field:
                self._touched_scopes.add(record.get(self.entity.scope_field))

    def _advance(self, step: S.Advance, frame, out):
        target = self._eval(step.to, frame)
        if target is None or int(target) < self.now:
            raise ExpressionError(f"advance: `{step.to.source}` gave {target!r}, before now ({self.now})", step.where)
        self._run_clock(int(target), out)
        frame["now"] = self.now

    def _result(self, step: S.Result, frame, out):
        if isinstance(step.value, dict):
            out.result = {k: self._eval(v, frame) for k, v in step.value.items()}
        else:
            out.result = self._eval(step.value, frame)

    def _touch(self, record: dict) -> None:
        self._changed(record)
        self._touched.add(record[self.entity.key])
        if self.entity.scope_field:
            self._touched_scopes.add(record.get(self.entity.scope_field))

    _STEP: dict[type, Callable[[Model, Any, dict, Prediction], None]] = {
        S.Let: _let,
        S.Require: _require,
        S.Reject: _reject,
        S.Check: _check,
        S.Find: _find,
        S.Create: _create,
        S.Fire: _fire,
        S.SetFields: _set,
        S.When: _when,
        S.Emit: _emit,
        S.ForEach: _for_each,
        S.ForItems: _for_items,
        S.Collect: _collect,
        S.Apply: _apply,
        S.Put: _put,
        S.Drop: _drop,
        S.Counter: _counter,
        S.Reset: _reset,
        S.Result: _result,
        S.Remove: _remove,
        S.Advance: _advance,
    }

    # -- invariants -----------------------------------------------------------
    def _each_results(self, env: dict) -> list:
        """Each per-record check's value, in the spec's order: those in the
        one list evaluated together, any other alone."""
        together = iter(self._each_all.evaluate(env) if self._each_all is not None else ())
        return [
            check.evaluate(env) if apart else next(together) for (_, check), apart in zip(self._each, self._each_apart)
        ]

    def check_invariants(self) -> list[tuple[str, str]]:
        """Spec invariants over what was touched since the last check: (id, message) per violation."""
        violations = []
        ent = self.entity.name
        base = {"params": self.params, "now": self.now, "terminal_states": self.terminal_states}
        if self._each:
            for key in self._touched:
                record = self.store.get(key)
                if record is None:
                    continue
                view = record if self._each_fields is None else {f: record.get(f) for f in self._each_fields}
                env = {**base, ent: view}
                try:
                    results = self._each_results(env)
                except ExpressionError:
                    # One invariant failed: evaluate each alone, so the error names it and its file:line.
                    results = [check.evaluate(env) for _, check in self._each]
                for (inv, check), ok in zip(self._each, results):
                    if not check.boolean(ok, f"invariant {inv.id}"):
                        violations.append((inv.id, f"{inv.description or inv.id} (violated by {ent} {key})"))
        for inv, check in self._scopes:
            for scope_value in self._touched_scopes:
                records = self._project(list(self.store.in_scope(scope_value)), self._scope_fields.get(inv.id))
                if not check.evaluate_bool({**base, self.entity.collection: records}, role=f"invariant {inv.id}"):
                    violations.append(
                        (inv.id, f"{inv.description or inv.id} (violated in {self.entity.scope_field} {scope_value})")
                    )
        self._touched.clear()
        self._touched_scopes.clear()
        return violations
