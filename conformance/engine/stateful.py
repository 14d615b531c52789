"""The Hypothesis stateful suite, generated from a spec.

Nothing here is written per lifecycle: the actions come from the spec's
operations (weighted by ``exploration.weights``), its batches (long runs that
reach deep states such as a full retention window), its concurrent groups
(races, checked for linearizability) and clock moves. Arguments are drawn
from the operations' JSON Schemas, from pools (seeds, not limits: a share
of the draws leaves the pool for near misses of its values and values of
the argument's schema, ``engine/pool_draws.py``), from the bundle of entity keys
seen so far (live and evicted, so forbidden calls are tried too) and from
policies (payloads around the spill limits). After every step the
spec's probe compares the implementation's whole visible state with the model.

The test is a plain ``@given(st.data())`` (``exploration_test``) running the
stateful runner's loop for one rule: a span per step, led by the choice to
stop, so Hypothesis deletes steps and ends examples early as it would a state
machine's. Drawers are built once per spec and parameters; a step is one draw
of raw, state-independent values (``engine/choices.py``: an integer per
index, pick or count, a string per payload) that ``carry_out`` resolves
against the state. The probe runs in full at the end of each example and
after each concurrent group; after any other step that changed the model
(``Model.revision``) only the probe calls whose prediction reads what changed
(``Model.read_token``), and a probe answer identical to one that passed,
about unchanged records, reuses its prediction. While it runs the
exploration switches off Hypothesis's draws of constants from the source of
loaded modules (so a seed explores the same way from the command line,
pytest or a worker) and collects the young GC generation less often.
Failures shrink for a number of examples per profile (not wall time), only
the first failure's bug (``failures.same_bug``); then ``reduce`` replays
them smaller. The example database is kept under the report directory, per
spec, parameters and implementation; the failures it saved are replayed
after an exploration that found nothing, never before it, and what they
exercise is not counted (a run with saved failures counts what one without
them counts). ``Explorer.draw_step`` and
``carry_out`` are the one action generator the kit and the benchmark share.
Steering (``engine/steering.py``, each choice off by default: measured, none
helped): each example may draw which kinds of action it leaves out (swarm
testing), part of the key draws may take the record whose recent history is
rarest, and each example may report to Hypothesis's ``target()`` what rare
pairs and triples it reached.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import gc
import math
import time
import unittest
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from hypothesis import HealthCheck, Phase, Verbosity, event, given, reject
from hypothesis import settings as Settings
from hypothesis import strategies as st
from hypothesis import target as hypothesis_target
from hypothesis.control import current_build_context
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import Flaky, FlakyStrategyDefinition, InvalidArgument

from statemachines import (
    ExpressionError,
    Spec,
    SpecError,
    derived_races,
    exploration_applies,
    file_name_arguments,
    limit_edges,
    naming_arguments,
    text_of_size,
)
from statemachines.tools.limits import strip_hints

from ..errors import AdapterLoadError, ConformanceFailure
from . import choices, hypothesis_support, schema_draws, steering
from .budgets import CallGuard, SlowCalls
from .failures import DATA_ERRORS, Failure, same_bug, signature
from .key_shapes import OWN_FRESH, near_miss, shaped_key
from .pool_draws import BeyondPools
from .profiles import BEYOND_POOLS, PROFILES
from .session import Session
from .steering import RARE_PICK, Steering, Swarm

NEAR_MISS_PICK = 64  # fresh-key picks from here to 127 draw a near miss of a key seen (key_shapes)

# Live records a racing group's key may move to, at most, to find one every call would change.
CONTEST_TRIES = 4

if TYPE_CHECKING:
    from statemachines import Model

__all__ = [
    "PROFILES",
    "StatefulOutcome",
    "Explorer",
    "Driver",
    "carry_out",
    "build_example",
    "exploration_test",
    "run_stateful",
    "phases_without_explain",
]

_NOT_REPLAYED = (
    "\n(Hypothesis's replay of this sequence did not fail again: the implementation may "
    "behave nondeterministically here, e.g. a race, or a concurrent group gave its ids in another order)"
)


class _NotOffered(BaseException):
    """An operation answered not_implemented: the exploration starts again
    without drawing it (a BaseException so Hypothesis does not shrink it)."""

    def __init__(self, failure: Failure, examples: int, steps: int) -> None:
        super().__init__(failure.operation)
        self.failure, self.examples, self.steps = failure, examples, steps


class _ShrinkBudgetSpent(BaseException):
    """Ends Hypothesis' shrinking early (a BaseException so it is not taken
    for a test failure); the shortest failure seen so far is reported."""


@dataclass
class StatefulOutcome:
    verdict: str
    profile: str
    seed: int
    examples: int = 0
    steps: int = 0
    duration_s: float = 0.0
    failure: Failure | None = None
    coverage: dict = field(default_factory=dict)
    explored: int = 0  # examples generated before the first failure (all, when none): shrinking's left out
    # The failure as the exploration first met it, before Hypothesis shrank it: the runner's
    # reduction starts from it too, since shrinking may end on a path that replays longer.
    found_first: Failure | None = None
    # What the time guard found when it ended shrinking early (engine/budgets.py), else "":
    # the runner's reduction replaces the message, and must say it again.
    guarded: str = ""
    # Draws of pool-drawn arguments beyond their pools: the share set, and how many
    # draws took the pool, a near miss, a value of the schema (pool_draws.BeyondPools.counts).
    beyond_pools: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "verdict": self.verdict,
            "profile": self.profile,
            "seed": self.seed,
            "examples": self.examples,
            "steps": self.steps,
            "duration_s": round(self.duration_s, 3),
            "coverage": self.coverage,
            "failure": self.failure.to_dict() if self.failure else None,
            **({"beyond_pools": self.beyond_pools} if self.beyond_pools else {}),
        }


_ABSENT = choices.ABSENT


def _schema_drawer(schema: dict, where: str = "schema") -> choices.Drawer:
    """How values of a JSON Schema are drawn (``engine/schema_draws.py``). An
    enum (a const, a boolean) is one primitive choice: the index of its value,
    simplest first, the same index ``st.sampled_from`` of those values draws,
    so the values and how they shrink are the same, without a nested
    strategy's span and checks. Anything else is drawn through its strategy."""
    values = schema_draws.enum_values(schema)
    if values:
        return choices.sampled(values)
    return choices.nested(schema_draws.from_schema(schema, where))


def _check_drawable(spec: Spec, offered: frozenset[str]) -> None:
    """Every argument of an offered operation that is drawn from its schema
    uses keywords the kit can draw; else a ``SpecError`` naming each."""
    problems = []
    for op in sorted(offered):
        for prop, sub in (spec.operations[op].args_schema.get("properties") or {}).items():
            if isinstance(sub, dict) and not sub.get("x-draw") and "x-draw" in (sub.get("items") or {}):
                sub = sub["items"]
            draw = sub.get("x-draw") or {} if isinstance(sub, dict) else {}
            if {"keys", "policy", "pool"} & set(draw):
                continue
            path = ("operations", op, "args", "properties", prop)
            try:
                schema_draws.check_supported(strip_hints(sub), f"operation {op}, argument {prop}")
            except schema_draws.UnsupportedSchema as exc:
                problems.append(spec.source_map.problem(path, str(exc)))
    if problems:
        raise SpecError(problems)


def _edges_by_target(
    limits: list,
) -> tuple[dict[int, list[str]], dict[tuple[str, str], dict], dict[str, dict[int, list[str]]]]:
    """The declared limits' edges by what they sit on: clock instants, an
    operation's argument values, a batch's sizes; each naming its edges
    (``limit.edge``)."""
    clock_edges: dict[int, list[str]] = {}
    arg_edges: dict[tuple[str, str], dict] = {}
    batch_edges: dict[str, dict[int, list[str]]] = {}
    for limit in limits:
        for edge, ms in limit.clock.items():
            clock_edges.setdefault(ms, []).append(f"{limit.name}.{edge}")
        for target, table in limit.args.items():
            for edge, values in table.items():
                for value in values:
                    arg_edges.setdefault(target, {}).setdefault(value, []).append(f"{limit.name}.{edge}")
        for name, table in limit.batches.items():
            for edge, n in table.items():
                batch_edges.setdefault(name, {}).setdefault(n, []).append(f"{limit.name}.{edge}")
    return clock_edges, arg_edges, batch_edges


class Explorer:
    """Strategies for one spec and one set of parameter values."""

    def __init__(
        self,
        spec: Spec,
        params: dict,
        concurrent: bool,
        absent: frozenset[str] = frozenset(),
        beyond_pools: float = BEYOND_POOLS,
    ):
        self.spec, self.params = spec, params
        # a profile may expose only some operations; ``absent``: those the implementation does not offer
        offered = spec.offered_operations(params) - absent
        _check_drawable(spec, offered)  # a schema keyword the kit cannot draw: said now, not mid-run
        # Races the spec implies (each operation writing a record twice at once,
        # each conflicting pair on one record: statemachines.tools.races).
        self.derived = (
            tuple(g for g in derived_races(spec) if exploration_applies(g, params, offered)) if concurrent else ()
        )
        # Declared limits (statemachines.tools.limits): which drawn values sit at an
        # edge, per target, so a draw can be counted ("boundary-classes").
        self.limits = limit_edges(spec, params)
        self.clock_edges, self.arg_edges, self.batch_edges = _edges_by_target(self.limits)
        # Arguments naming the record their call creates (statemachines.tools.naming):
        # their near misses are never paths, which only a lookup may be given.
        self.naming = naming_arguments(spec)
        # Pool-drawn arguments leave their pool in `beyond_pools` percent of the draws
        # (engine/pool_draws.py); those that may end up in a file name are never paths there.
        self.beyond = BeyondPools(beyond_pools, self.naming | file_name_arguments(spec, params))
        self.actions = self._weighted_actions(offered, concurrent)
        self._plans: dict = {}
        self.action_index = choices.integers(0, len(self.actions) - 1)
        # engine/steering.py: swarm testing (kinds of action an example leaves
        # out) and the counts that steer key draws, snapshot per example
        self.steering = Steering(dataclasses.replace(steering.CHOICES))
        labels = [_action_label(action) for action in self.actions]
        # Races are never left out: a check-then-act window needs the concurrent groups,
        # and an example without them lost those kills (engine/steering.py).
        races = frozenset(label for label in labels if label.startswith("concurrent ") or label == "derived")
        self.swarm = Swarm(labels, self.steering.choices.swarm, always=races)
        self._swarm_drawn = False
        self.advance_ms = self._clock_moves()
        self._batch_plans: dict = {}
        self.model: Model | None = None  # set by the state machine, for drawing live keys
        # Where a concurrent group created records in an order other than its calls': each key's
        # place in the order of first sight (engine/stateful.py in_call_order). None otherwise.
        self.sight: dict | None = None
        self._payloads = {
            name: self._payload_drawer(policy)
            for name, policy in spec.policies.items()
            if policy.kind == "inline_or_spill"
        }
        # which derived race: always one choice, even when there is one race (the choices Hypothesis recorded stay valid)
        self.derived_index = choices.integers(0, len(self.derived) - 1) if self.derived else None

    def _weighted_actions(self, offered: frozenset[str], concurrent: bool) -> list[tuple[str, Any]]:
        """What a step can be, each as often as its weight: the offered
        operations (``exploration.weights``), the batches, the concurrent
        groups and derived races (when the implementation runs calls
        concurrently) and clock moves."""
        ex, params = self.spec.exploration, self.params
        shares: list[tuple[tuple[str, Any], Fraction]] = []
        for name in self.spec.operations:
            if name in offered:
                shares.append((("call", name), Fraction(ex.weights.get(name, 1))))
        for batch in ex.batches:
            if exploration_applies(batch, params, offered):
                shares.append((("batch", batch), Fraction(str(batch["weight"]))))
        if concurrent:
            for group in ex.concurrent:
                if exploration_applies(group, params, offered):
                    shares.append((("concurrent", group), Fraction(2)))
            if self.derived:
                # together one declared group's share per three of them, between one and six
                shares.append((("derived", None), Fraction(max(2, min(12, len(self.derived) // 3 * 2)))))
        if ex.advance_ms or self.clock_edges:
            shares.append((("advance", None), Fraction(2)))
        return _slots(shares)

    def begin_example(self) -> None:
        """A new example starts: it draws its swarm with its first step, and
        steers by the counts of the examples before it."""
        self._swarm_drawn = False
        self.sight = None
        self.beyond.used.clear()
        self.steering.begin_example(getattr(self.model, "coverage", None))

    def _clock_moves(self) -> choices.Drawer | None:
        """How a clock move's milliseconds are drawn: from ``exploration.advance_ms``,
        and half of the time at a limit's edge when there are such edges."""
        ex = self.spec.exploration
        moves = choices.sampled(ex.advance_ms) if ex.advance_ms else None
        if self.clock_edges:  # half of the clock moves sit at a limit's edge
            edges = choices.sampled(sorted(self.clock_edges))
            moves = choices.either(moves, edges) if moves is not None else edges
        return moves

    def _payload_drawer(self, policy):
        env = {"params": self.params}
        max_lines = int(policy.exprs["max_lines"].evaluate(env))
        max_bytes = int(policy.exprs["max_bytes"].evaluate(env))
        edges = [text_of_size(max_bytes, 1), text_of_size(max_bytes + 1, 1)]
        if 2 * max_lines - 1 <= max_bytes:
            edges.append(text_of_size(2 * max_lines - 1, max_lines))
        edges.append(text_of_size(2 * max_lines + 1, max_lines + 1))
        edges.append("é" * (max_bytes // 2 + 1))  # few characters, more bytes than allowed
        return choices.either(choices.text("ab \n", 12), choices.sampled(edges))

    # -- argument draws ----------------------------------------------------------
    # Every drawer is built once per spec and parameter set, from Hypothesis's
    # primitive choices (engine/choices.py: a third of the cost of nested
    # strategies). A draw is "raw": its shape never depends on the state (an
    # index, not a key), so replaying a sequence after a race changed the state
    # never confuses Hypothesis; the raw value becomes an argument only against
    # the current state (``_resolve``).
    def _raw_drawer(self, op: str, prop: str, schema: dict):
        """How one argument is drawn, and how the draw becomes a value: (drawer, kind)."""
        draw = schema.get("x-draw") if isinstance(schema, dict) else None
        items = schema.get("items") if isinstance(schema, dict) else None
        if not draw and isinstance(items, dict) and "x-draw" in items:  # a list of drawn values (e.g. ids)
            item, kind = self._raw_drawer(op, prop, items)
            return (
                choices.list_of(item, int(schema.get("minItems", 0)), int(schema.get("maxItems", 3))),
                ("list", kind),
            )
        if draw and "keys" in draw:
            return (
                choices.tuple_of([choices.integers(0, 99), choices.integers(0, 255)]),
                ("key", float(draw.get("fresh", 0.1)), (op, prop) not in self.naming),
            )
        if draw and "policy" in draw:
            drawer = self._payloads[draw["policy"]]
        elif draw and "pool" in draw:
            values = self.spec.exploration.pools[draw["pool"]]
            pooled = ("pool", draw["pool"], self.beyond.argument(op, prop, schema, values))
            drawer = self.beyond.drawer(pooled[2])
            edges = self.arg_edges.get((op, prop))
            if edges:  # a third of the draws sit at a declared limit's edge
                return choices.either(drawer, drawer, choices.sampled(list(edges))), ("edge", edges, pooled)
            return drawer, pooled
        else:
            drawer = _schema_drawer(strip_hints(schema), f"operation {op}, argument {prop}")
        edges = self.arg_edges.get((op, prop))
        if edges:  # a third of the draws sit at a declared limit's edge
            return choices.either(drawer, drawer, choices.sampled(list(edges))), ("edge", edges)
        return drawer, ("value",)

    def args_plan(self, op: str, omit=()):
        """One drawer of every argument of ``op`` (but ``omit``), and the kinds
        that turn its draw into arguments; built once per (op, omit)."""
        key = (op, tuple(omit))
        plan = self._plans.get(key)
        if plan is None:
            schema = self.spec.operations[op].args_schema
            required = set(schema.get("required") or ())
            names, parts, kinds = [], [], []
            for prop, sub in (schema.get("properties") or {}).items():
                if prop in omit:
                    continue
                drawer, kind = self._raw_drawer(op, prop, sub)
                names.append(prop)
                kinds.append(kind)
                # an optional argument is sent half of the time
                parts.append(drawer if prop in required else choices.optional(drawer))
            plan = self._plans[key] = (choices.tuple_of(parts), tuple(names), tuple(kinds))
        return plan

    def _resolve(self, raw: Any, kind: tuple, keys: list) -> Any:
        if kind[0] == "value":
            return raw
        if kind[0] == "pool":
            return self.beyond.resolve(raw, kind[1], kind[2])
        if kind[0] == "edge":
            if len(kind) > 2:
                raw = self.beyond.resolve(raw, kind[2][1], kind[2][2])
            self.hit_edges(kind[1].get(raw) if isinstance(raw, (str, int)) else None)
            return raw
        if kind[0] == "list":
            return [self._resolve(item, kind[1], keys) for item in raw]
        # A key: mostly one the model holds now (non-terminal ones first), else any
        # key ever seen (evicted ones too), else a fresh one: forbidden calls get
        # tried. A quarter of the draws go to records in an intermediate state
        # (neither initial nor terminal, such as a job whose cancel is pending):
        # they are short-lived and few, and the rules that break live there.
        roll, pick = raw
        fresh, lookup = kind[1], kind[2]  # a lookup may be a path; a new record's name never is
        if not keys or roll < fresh * 100:
            # Half of the fresh keys take the shape of the keys the implementation
            # handed out (after "job-3": "job-4", the id it will generate next, or
            # one after): an explicit key that a later generated one collides with.
            # A quarter are near misses of a key seen ("job-", "3", "job-03"):
            # an id never issued that a lenient lookup takes for an issued one.
            if pick >= 128:
                return (keys and shaped_key(keys, pick)) or f"k{pick % 4 + 1}"
            if pick >= NEAR_MISS_PICK:
                return (keys and near_miss(keys, pick - NEAR_MISS_PICK, paths=lookup)) or f"k{pick % 4 + 1}"
            return f"k{pick % 4 + 1}"
        if pick % 8 == 7 and len(keys) <= 2 and _one_issued(keys):
            # While the implementation has handed out one key only, an eighth of
            # the draws try a near miss of it: an abbreviation of a key tells only
            # while no other key shares its prefix, with sequential ids that is now.
            return near_miss(keys, pick >> 3, paths=lookup) or keys[0]
        if roll < fresh * 100 + 25:
            choices = self.intermediate_keys() or self.live_keys() or keys
        else:
            choices = (self.live_keys() if roll < 55 + fresh * 50 else []) or keys
        if pick >= RARE_PICK and len(choices) > 1 and self.steering.choices.rare_keys and self._coverage_kept():
            return self.steering.rarest(choices, self.model)  # the record whose recent history is rarest
        return choices[pick % len(choices)]

    def _coverage_kept(self) -> bool:
        """Whether the model counts coverage (the benchmark's bare driver keeps keys only)."""
        return getattr(self.model, "coverage", None) is not None

    def hit_edges(self, names) -> None:
        """Count limit edges a drawn value sits at (nothing without a model's
        coverage: the benchmark's bare driver keeps only the keys)."""
        coverage = getattr(self.model, "coverage", None) if names else None
        if coverage is not None:
            for name in names:
                coverage.hit("limits", name)

    def batch_plan(self, batch: dict) -> dict:
        """A batch's drawers: its count (within bounds fixed by the
        parameters), its shared values and each phase's clock moves."""
        plan = self._batch_plans.get(batch["name"])
        if plan is None:
            env = {"params": self.params}
            low = int(batch["count"]["min"].evaluate(env))
            high = max(low, int(batch["count"]["max"].evaluate(env)))
            pools = self.spec.exploration.pools
            count = choices.integers(low, high)
            edges = self.batch_edges.get(batch["name"])
            if edges:  # half of the counts sit at a declared limit's edge
                count = choices.either(count, choices.sampled(sorted(edges)))
            plan = self._batch_plans[batch["name"]] = {
                "count": count,
                "shared": {name: choices.sampled(pools[how["pool"]]) for name, how in batch["shared"].items()},
                "advance": [choices.sampled(phase["advance_ms"]) for phase in batch["phases"]],
            }
        return plan

    def contested(
        self,
        calls: list[tuple[str, dict]],
        shared: tuple,
        raw: tuple,
        first: str,
        regroup: Callable[..., list] | None = None,
    ) -> list:
        """A racing group's calls, most of the time moved onto a record they
        contest: one that each call, made alone now, would change (a running
        task for a completion and a progress update; a finished one for
        racing notifiers). On a record one of them leaves as it is (a
        completion of a pending task answers "not changed"), most
        check-then-act windows never open. Three draws in four move, to the
        first record from the drawn pick on (of up to CONTEST_TRIES among the
        non-terminal records, then as many among the terminal ones) that
        every call changes; the fourth keeps the drawn record, so races on
        refusals and no-ops are still tried. ``regroup(calls, key=...)``
        re-derives the arguments a group's ``args`` sets from the shared
        ones, for a call that names the record otherwise (``with_group_args``).
        A shared list of keys (a list-writer raced with itself, its calls
        alike) is moved to the one record, by the pick of its first item; an
        empty one is not moved."""
        if self.model is None or not self.steering.choices.contested_races or not self._coverage_kept():
            return calls
        name = next((n for n in shared if self._is_key(first, n)), None)
        pick = None if name is None else self._key_pick(first, name, raw)
        drawn = next((args[name] for _, args in calls if name in args), None)
        listed = name is not None and self._key_kind(first, name) == "list"  # a list of keys: moved to [key]
        if listed:
            drawn = drawn[0] if isinstance(drawn, list) and drawn else None
        if name is None or pick is None or pick % 4 == 3 or self._all_change(calls, drawn):
            return calls
        for candidates in self._records_by_liveness():
            start = pick % len(candidates)
            for key in (candidates[(start + i) % len(candidates)] for i in range(min(CONTEST_TRIES, len(candidates)))):
                value = [key] if listed else key
                moved = [(op, {**args, name: value}) if name in args else (op, args) for op, args in calls]
                if regroup is not None:
                    moved = regroup(moved, key={name: key})
                if self._all_change(moved, key):
                    return moved
        return calls

    def with_group_args(self, group: dict, calls: list, shared: dict, key: dict | None = None) -> list:
        """``calls`` with the arguments the group's ``args`` sets per call,
        evaluated over the shared values (``key``: a shared value moved)."""
        scope = {"params": self.params, "shared": {**shared, **(key or {})}}
        exprs = group.get("args") or {}
        return [
            (op, {**args, **{k: expr.evaluate(scope) for k, expr in exprs[op].items()}}) if op in exprs else (op, args)
            for op, args in calls
        ]

    def _records_by_liveness(self) -> list[list]:
        """The keys of the records the model holds, as up to two non-empty
        lists: the non-terminal ones, then the terminal ones. A race that
        only a finished record opens (notifiers racing to send its one
        notification) must reach one while other records still run."""
        model = self.model
        if model is None:
            return []
        field, terminal = model.field, model.spec.lifecycle.terminal
        active: list = []
        finished: list = []
        for key, record in model.store.records.items():  # one pass: every key draw reads the first list
            (finished if record[field] in terminal else active).append(key)
        return [self.in_sight_order(group) for group in (active, finished) if group]

    def in_sight_order(self, keys: list) -> list:
        """``keys`` (the model's, in the order it created the records) in the
        order the example first saw them. The two differ only after a
        concurrent group created records: the model holds them in the order
        that explained the answers, which the scheduler chose; a draw that
        picks a record by its place then picks the same call's record when
        Hypothesis replays the example, whichever call won."""
        sight = self.sight
        if sight is None:
            return keys
        last = len(sight)
        return sorted(keys, key=lambda key: sight.get(key, last) if isinstance(key, (str, int)) else last)

    def _all_change(self, calls: list[tuple[str, dict]], key: Any) -> bool:
        """Whether each of ``calls``, made alone now, would change the record
        under ``key`` (``Model.would_change``)."""
        model = self.model
        return model is not None and key is not None and all(model.would_change(op, args, key) for op, args in calls)

    def _key_kind(self, op: str, name: str) -> str | None:
        """``key`` for an argument of ``op`` naming a record, ``list`` for a list
        of such keys (the job tool's ``cancel``), None for anything else."""
        _, names, kinds = self.args_plan(op)
        if name not in names:
            return None
        kind = kinds[names.index(name)]
        if kind[0] == "key":
            return "key"
        return "list" if kind[0] == "list" and kind[1][0] == "key" else None

    def _is_key(self, op: str, name: str) -> bool:
        return self._key_kind(op, name) is not None

    def _key_pick(self, op: str, name: str, raw: tuple) -> int | None:
        """The pick of the raw draw of key argument ``name`` of ``op`` (of a
        list of keys: of its first item; None when it is empty)."""
        index = self.args_plan(op)[1].index(name)
        value = raw[index] if index < len(raw) else None
        if isinstance(value, list):
            value = value[0] if value else None
        return value[1] if isinstance(value, tuple) and len(value) == 2 else None

    def intermediate_keys(self) -> list:
        """Keys of records the model holds now in a state that is neither initial nor terminal."""
        model = self.model
        if model is None:
            return []
        lifecycle = model.spec.lifecycle
        skip = lifecycle.terminal | {lifecycle.initial}
        return self.in_sight_order([k for k, r in model.store.records.items() if r[model.field] not in skip])

    def live_keys(self) -> list:
        """Keys of the non-terminal records the model holds now; when there
        are none, of the terminal ones."""
        return next(iter(self._records_by_liveness()), [])

    def resolve_args(self, op: str, raw: tuple, keys: list, omit=()) -> dict:
        """The arguments of ``op`` from a raw draw of ``args_plan(op, omit)``."""
        _, names, kinds = self.args_plan(op, omit)
        return {
            name: self._resolve(value, kind, keys)
            for name, kind, value in zip(names, kinds, raw)
            if value is not _ABSENT
        }

    def draw_step(self, data):
        """A whole step: the action and every raw value it needs, drawn as
        primitive choices in one strategy (one draw per step is far cheaper
        for Hypothesis than one per value, and its shape never depends on
        the state)."""
        if not self._swarm_drawn:  # an example's first step draws what it leaves out
            self._swarm_drawn = True
            self.swarm.draw(data)
        kind, what = self.actions[self.swarm.kept(self.action_index(data))]
        if kind == "call":
            return kind, what, self.args_plan(what)[0](data)
        if kind == "advance":
            return kind, self.advance_ms(data)
        if kind == "derived":
            kind, what = "concurrent", self.derived[self.derived_index(data)]
        if kind == "concurrent":
            raws = [self.args_plan(op)[0](data) for op in what["calls"]]
            # Which call leads the race (Session.head_start): drawn, so one seed
            # tries every order of a group instead of the scheduler's favourite
            # one (0, where shrinking goes, is the last call, the default lead).
            return kind, what, raws, data.draw_integer(0, len(what["calls"]) - 1)
        plan = self.batch_plan(what)
        n = plan["count"](data)
        shared = {name: drawer(data) for name, drawer in plan["shared"].items()}
        phases = []
        for phase, advance in zip(what["phases"], plan["advance"]):
            if phase.get("once"):  # one draw; which item it serves is decided when carried out
                order = [n - 1]
            else:
                order = list(range(n)) if phase["order"] == "given" else choices.permutation(data, n)
            args = self.args_plan(phase["call"], phase["omit"] + list(phase["args"]))[0]
            phases.append((order, [(advance(data), args(data)) for _ in order]))
        return kind, what, n, shared, phases


def _slots(shares: list[tuple[tuple[str, Any], Fraction]]) -> list[tuple[str, Any]]:
    """The weighted action list: each action in as many slots as its share,
    every share scaled by the least factor that makes them all whole (1 when
    every weight is whole, so the list, and what a seed draws, stay as they
    were; a batch of weight 0.25 takes one slot where a weight of 1 takes four)."""
    scale = math.lcm(*(share.denominator for _, share in shares)) if shares else 1
    actions: list[tuple[str, Any]] = []
    for action, share in shares:
        actions += [action] * int(share * scale)
    return actions


def _action_label(action: tuple[str, Any]) -> str:
    """The kind of action a slot of the weighted list is, for swarm testing:
    an operation, a batch, a concurrent group, the derived races, clock moves."""
    kind, what = action
    if kind == "call":
        return f"call {what}"
    if kind in ("batch", "concurrent"):
        return f"{kind} {what['name']}"
    return kind


class Driver:
    """Where generated actions go: the kit's checking session, or (in the
    benchmark) an implementation called bare. ``carry_out`` uses only this."""

    def call(self, operation: str, args: dict) -> dict:
        """One call's answer."""
        raise NotImplementedError

    def advance(self, ms: int) -> None:
        """Move the virtual clock by ``ms``."""
        raise NotImplementedError

    def concurrently(self, calls: list[tuple[str, dict]], lead: int = -1) -> list | None:
        """The calls made at once: their answers, in call order (None: none was
        made). Call ``lead`` (counted from the end when negative) starts first."""
        raise NotImplementedError


class _Checked(Driver):
    """The kit's driver: every call judged by the session; a failure stops the example."""

    def __init__(self, session: Session, stats: _Stats):
        self.session, self.stats = session, stats

    def check(self, failure: Failure | None) -> None:
        if failure is not None:
            if failure.kind == "not-implemented" and self.stats.first is None:
                raise _NotOffered(failure, self.stats.examples, self.stats.steps)
            self.stats.failing = True
            if not self.stats.failed(failure):
                # Another bug met while shrinking the first: not the failure being
                # shrunk, so Hypothesis must not slip to it (which one a run ended
                # with would then depend on where shrinking stopped).
                reject()
            self.stats.raised = ConformanceFailure(failure)
            raise self.stats.raised
        self.stats.check_budget()  # slow calls may end shrinking in the middle of an example

    def call(self, operation: str, args: dict) -> dict:
        if self.session.avoided(operation, args) is not None:
            return {}  # an accepted deviation says not to send this input (counted in the report)
        response, failure = self.session.call(operation, args)
        self.check(failure)
        return response  # type: ignore[return-value]  # None only with a failure, which check() raised

    def advance(self, ms: int) -> None:
        self.check(self.session.advance(ms))

    def concurrently(self, calls: list[tuple[str, dict]], lead: int = -1) -> list | None:
        calls = [(op, args) for op, args in calls if self.session.avoided(op, args) is None]
        if len(calls) == 1:
            return [self.call(*calls[0])]
        if calls:
            self.session.head_start = lead
            try:
                responses, failure = self.session.call_concurrently(calls)
            finally:
                self.session.head_start = -1
            self.check(failure)
            return responses
        return None


def _one_issued(keys: list) -> bool:
    """Whether one key only of those seen is not one of the kit's own fresh names."""
    return sum(1 for key in keys if key not in OWN_FRESH) == 1


def in_call_order(keys: list, answers: list) -> list:
    """Keys first seen in a concurrent group, ordered by the call whose answer
    holds them (keys no answer holds keep their order, last). Which call got
    which id is the scheduler's choice; ordered this way, the draws that pick
    a record by its position pick the same call's record when the example is
    replayed, so Hypothesis can replay and shrink it."""
    position: dict[Any, int] = {}
    for index, answer in enumerate(answers):
        for value in _scalars(answer):
            position.setdefault(value, index)
    return sorted(
        keys, key=lambda key: position.get(key, len(answers)) if isinstance(key, (str, int)) else len(answers)
    )


def _scalars(value, depth: int = 0):
    if isinstance(value, dict):
        if depth < 4:
            for item in value.values():
                yield from _scalars(item, depth + 1)
    elif isinstance(value, list):
        if depth < 4:
            for item in value[:64]:
                yield from _scalars(item, depth + 1)
    elif isinstance(value, (str, int)) and not isinstance(value, bool):
        yield value


def carry_out(explorer: Explorer, step: tuple, machine, driver: Driver) -> None:
    """Carry out one drawn step (``Explorer.step``): its raw draws become
    arguments against the state as it is now."""
    kind, what = step[0], step[1]
    keys = machine.keys
    if kind == "call":
        driver.call(what, explorer.resolve_args(what, step[2], keys))
    elif kind == "advance":
        explorer.hit_edges(explorer.clock_edges.get(what))
        driver.advance(what)
    elif kind == "concurrent":
        shared: dict = {}
        calls = []
        regroup = None
        lead = step[3] - 1  # drawn 0 is the last call, 1 the first, ...
        if what.get("identical"):  # the same call twice (a derived race): the first one's arguments for all
            args = explorer.resolve_args(what["calls"][0], step[2][0], keys)
            calls = [(op, copy.deepcopy(args)) for op in what["calls"]]
            fixed = (what.get("args") or {}).get(what["calls"][0]) or {}
            if fixed:  # the arguments the group fixes (a list-writer's other lists, its mode)
                calls = explorer.with_group_args(what, calls, {})
            # the record the race is on first (a list-writer's list), never one the group fixes
            shared_names = tuple(n for n in sorted(args, key=lambda n: n not in what["same_args"]) if n not in fixed)
        else:
            for op, raw in zip(what["calls"], step[2]):
                args = explorer.resolve_args(op, raw, keys)
                for name in what["same_args"]:
                    if name in shared:
                        args[name] = shared[name]
                    elif name in args:
                        shared[name] = args[name]
                calls.append((op, args))
            shared_names = tuple(shared)
            if what.get("args"):  # calls that name the record otherwise (in a list): set from the shared values
                calls = explorer.with_group_args(what, calls, shared)
                regroup = functools.partial(explorer.with_group_args, what, shared=shared)
        calls = explorer.contested(calls, shared_names, step[2][0], what["calls"][0], regroup)
        machine.group_answers = driver.concurrently(calls, lead)
    elif kind == "batch":
        _carry_out_batch(explorer, step, machine, driver)


def _carry_out_batch(explorer: Explorer, step: tuple, machine, driver: Driver) -> None:
    _, batch, n, shared, phases = step
    params = explorer.params
    machine.batches += 1
    explorer.hit_edges(explorer.batch_edges.get(batch["name"], {}).get(n))
    items: list[dict] = [{} for _ in range(n)]
    for phase, (order, draws) in zip(batch["phases"], phases):
        omit = phase["omit"] + list(phase["args"])
        if phase.get("once"):  # once, for the last item that went through every earlier phase
            whole = [i for i, item in enumerate(items) if not any(value is None for value in item.values())]
            order = whole[-1:]
        for index, (ms, raw) in zip(order, draws):
            item = items[index]
            if any(value is None for value in item.values()):
                continue  # an earlier phase failed for this item; later phases need its result
            if ms:
                driver.advance(ms)
            args = explorer.resolve_args(phase["call"], raw, machine.keys, omit)
            scope = {"params": params, "shared": shared, "batch": machine.batches, "index": index, "item": item}
            args.update({k: expr.evaluate(scope) for k, expr in phase["args"].items()})
            response = driver.call(phase["call"], args)
            item[phase["call"]] = (
                response.get("result") if isinstance(response, dict) and "result" in response else None
            )


@dataclass
class _Stats:
    examples: int = 0
    steps: int = 0
    shrink_s: float = 30.0
    shrink_examples: int = 100
    first_failure_at: float | None = None
    first_failure_example: int = 0
    timed_out: bool = False  # shrinking was ended by the guard (slow calls), not by shrink_examples
    calls: Callable[[], int] = lambda: 0  # calls into the implementation so far (Session.calls)
    first_failure_calls: int = 0
    # The slow calls so far (Session.slow_calls.now: how many, their seconds), and at the first failure.
    slow_calls: Callable[[], tuple[int, float]] = lambda: (0, 0.0)
    first_failure_slow: tuple[int, float] = (0, 0.0)
    slow: str = ""  # what the guard found, when it ended shrinking
    spent: bool = False  # the budget is spent: the example running now ends without another call
    raised: ConformanceFailure | None = None  # the last example's failure, as Hypothesis keeps it
    best: Failure | None = None
    first: Failure | None = None  # the first failure kept, as found (before shrinking)
    failures: int = 0
    failing: bool = False  # the current example has failed
    pin: bool = True  # shrink the first failure's bug only (False: a long campaign takes every failure)
    pinned: tuple | None = None  # the first plain failure's signature (failures.signature): the bug being shrunk
    others: int = 0  # failures of other bugs (failures.same_bug) met while shrinking (left to --max-failures)

    def failed(self, failure: Failure) -> bool:
        """Keep the shortest failing step list of the first plain (not race)
        failure's bug (``failures.same_bug``: its signature, or another wrong
        answer of its operation); False for a failure of another bug. Stop
        shrinking when the budget is spent."""
        if self.pin:
            if self.pinned is None:
                # A race that matched no order may be a plain bug first met inside a
                # concurrent group: shrinking may still slip from it to a plain
                # failure, which is the sharper report; a plain failure pins its bug.
                if failure.kind != "linearizability":
                    self.pinned, self.best = signature(failure), None
            elif not same_bug(signature(failure), self.pinned):
                self.others += 1
                self.check_budget()
                return False
        self.failures += 1
        if self.first_failure_at is None:
            self.first_failure_at, self.first_failure_example = time.perf_counter(), self.examples
            self.first_failure_calls, self.first_failure_slow = self.calls(), self.slow_calls()
        if self.best is None:  # the first failure kept, or a plain one that pins its bug after a race
            self.first = failure
        if self.best is None or len(failure.steps) <= len(self.best.steps):
            self.best = failure
        self.check_budget()
        return True

    def check_budget(self) -> None:
        """End Hypothesis's shrinking once it has tried ``shrink_examples``
        examples since the first failure (with ``shrink_s`` 0, at the first
        failure), or run ``shrink_s`` seconds with calls into the
        implementation slower than the guard: on average, or those slower
        than it each taking ``shrink_s`` in all (engine/budgets.py). Checked
        as each example starts, at each failure and after each step."""
        if self.first_failure_at is None or self.shrink_s == float("inf"):
            return  # a long campaign (conformance.fuzzing): Hypothesis and HypoFuzz decide
        if not self.shrink_s or self.examples - self.first_failure_example >= self.shrink_examples:
            self.spent = True
            raise _ShrinkBudgetSpent()
        elapsed = time.perf_counter() - self.first_failure_at
        if elapsed > self.shrink_s:
            guard = CallGuard(calls=self.calls() - self.first_failure_calls, seconds=elapsed, allowance_s=self.shrink_s)
            guard.add(0, 0.0, SlowCalls.since(self.slow_calls(), self.first_failure_slow))
            if guard.slow():
                self.timed_out, self.slow, self.spent = True, guard.why(), True
                raise _ShrinkBudgetSpent()

    def let_go(self) -> None:
        """Drop what the last example's failure held: Hypothesis keeps the
        exception of every failing example it ran (its cache of results, up
        to thousands), and with its evidence and traceback every answer of
        that example stayed in memory, each a copy of its own; an
        implementation whose answers grow with every retry filled gigabytes
        while shrinking. The failures kept (``best``, ``first``) are the kit's
        own; the exception Hypothesis raises at the end is its replay's."""
        raised, self.raised = self.raised, None
        if raised is not None:
            raised.failure = dataclasses.replace(raised.failure, steps=[], args=None, expected=None, observed=None)
            raised.__traceback__ = None  # its frames held the step's answer


def _example_over() -> bool:
    """Whether Hypothesis has ended the running example already: its choices
    ran out while it drew the next step (common while shrinking), and the
    machine's teardown runs in a ``finally`` with that stop in flight. The
    example is then discarded whatever it would show; a probe now could only
    replace the stop with a failure or a rejection Hypothesis can no longer
    record (it raised ``Frozen``, an internal error that lost the report)."""
    try:
        return bool(getattr(current_build_context().data, "frozen", False))
    except InvalidArgument:  # no example running (a machine driven by hand)
        return False


def build_example(
    spec: Spec,
    session: Session,
    explorer: Explorer,
    stats: _Stats,
    on_example: Callable[[int, bool], Any] | None = None,
) -> type:
    """The class of one example of the exploration: made fresh for every
    example (it resets the session), it carries out each drawn step through
    ``session`` and probes once more at the end (``teardown``).
    ``on_example`` is told the number of each example as it starts, and
    whether it is shrinking's (a failure was found)."""
    explorer.model = session.model
    driver = _Checked(session, stats)

    class SpecExample:
        def __init__(self) -> None:
            stats.let_go()
            stats.examples += 1
            stats.check_budget()  # shrinking's examples are counted as they start
            session.reset()
            self.keys: list = []  # every key seen, in order of first sight (evicted ones too)
            self._seen: set = set()
            self.batches = 0
            self.group_answers = None  # the answers of the concurrent group this step ran, in call order
            self.unprobed = False  # a step ran whose probe was skipped
            stats.failing = False
            self.observing = hypothesis_support.observing()  # each step then names its features
            if stats.first_failure_at is not None:
                explorer.steering.freeze()  # shrinking reads its choices as the failing example did
            explorer.begin_example()
            if on_example is not None:
                on_example(stats.examples, stats.first_failure_at is not None)

        def _note_keys(self) -> None:
            new = [key for key in session.model.keys() if key not in self._seen]
            answers, self.group_answers = self.group_answers, None
            if len(new) > 1 and answers:
                ordered = in_call_order(new, answers)
                if ordered != new and explorer.sight is None:  # the model's order parts from the calls' now
                    explorer.sight = {key: i for i, key in enumerate(self.keys) if isinstance(key, (str, int))}
                new = ordered
            if explorer.sight is not None:
                explorer.sight.update(
                    (key, len(self.keys) + i) for i, key in enumerate(new) if isinstance(key, (str, int))
                )
            self._seen.update(new)
            self.keys.extend(new)

        def step(self, step):
            stats.steps += 1
            self.unprobed = True  # until this step's probe has passed
            moved = dict(session.model.coverage.counts["transitions"]) if self.observing else None
            at = len(session.trace)
            carry_out(explorer, step, self, driver)
            if moved is not None:
                name_features(session, at, moved)
            if step[0] == "concurrent" and self.group_answers and len(self.group_answers) > 1 and session.last_race_met:
                session.model.coverage.hit("races", step[1]["name"])  # the calls met the race window
            self._note_keys()
            driver.check(session.check_model_invariants())
            # The probe looks again only when the model's state changed; a step
            # that changed nothing in the model is covered by the next probe,
            # or by the one at the end of the example.
            calls = session.calls
            driver.check(session.probe(when_changed=True))
            self.unprobed = session.calls == calls

        def teardown(self):
            if stats.spent:
                return  # shrinking's budget ended the example: no more calls
            if self.unprobed and not stats.failing and not _example_over():
                self.unprobed = False
                driver.check(session.probe())
            if explorer.steering.choices.target and not stats.failing and not _example_over():
                hypothesis_target(explorer.steering.score(session.model.coverage), label=_RARITY_LABEL)

    return SpecExample


_RARITY_LABEL = "pairs and triples reached that earlier examples reached rarely"


def name_features(session: Session, at: int, moved: dict[str, int]) -> None:
    """Hypothesis's observability is on: the step's calls (the trace from
    ``at``) name their operation and outcome, and the model's transitions
    since ``moved`` (the counts before the step) theirs, as the test case's
    features (``hypothesis.event``), which Tyche shows."""
    for entry in session.trace[at:]:
        if "advance_ms" in entry:
            event("operation: set_clock")
        for call in entry.get("concurrently") or [entry]:
            operation = call.get("operation")
            if operation is None:
                continue
            observed = call.get("observed")
            error = observed.get("error") if isinstance(observed, dict) else None
            event(f"operation: {operation}")
            event(f"outcome: {operation} -> {error.get('kind') if isinstance(error, dict) else 'ok'}")
    for name, count in session.model.coverage.counts["transitions"].items():
        if count > moved.get(name, 0):
            event(f"transition: {name}")


# One step of an example is one span of Hypothesis's choices, led by the
# choice whether to stop: the shrinker deletes steps by deleting spans, and
# ends an example early by turning that choice to True.
_STEP_LABEL = hypothesis_support.span_label("conformance exploration step")
_BUFFER_SIZE = hypothesis_support.buffer_size()


# An example allocates many short-lived objects (answers, predictions, trace
# entries, Hypothesis's choices), and with Python's default threshold (700)
# the cyclic garbage collector ran thousands of times per run (5 % of its
# time), each pass also scanning what survived. While the exploration runs
# (run_stateful; each example, for pytest and HypoFuzz), the youngest
# generation is collected after this many allocations instead; the previous
# thresholds come back after it. What an example leaves behind is still
# collected, at the same later generations.
_GC_YOUNG_THRESHOLD = 10_000


@contextmanager
def _draws_of_the_seed_alone():
    """While it lasts, Hypothesis draws no values from constants in the
    source of the modules this process has loaded ("local constants", about
    1 draw in 20 otherwise). Which modules are loaded differs between
    processes (the command line, a pytest session, a worker that ran other
    tests), so with them the same seed explored differently; without them
    an exploration depends on its seed, spec and implementation alone. The
    kit's own edge values come from the spec (statemachines/tools/limits.py)."""
    try:
        from hypothesis.internal.conjecture import providers

        collect, cache, empty = providers._get_local_constants, providers.CONSTANTS_CACHE.cache, providers.Constants()
    except (ImportError, AttributeError):  # a Hypothesis without them: nothing to switch off
        yield
        return
    if getattr(collect, "_conformance_none", False):  # switched off already (run_stateful, then each example)
        yield
        return

    def none(*args, **kwargs):
        return empty

    none._conformance_none = True
    providers._get_local_constants = none
    cache.clear()  # it holds the permitted constants worked out from the pool so far
    try:
        yield
    finally:
        providers._get_local_constants = collect
        cache.clear()


@contextmanager
def _exploring():
    """What the exploration runs under (run_stateful around its Hypothesis
    run, and each example, for pytest and HypoFuzz): the young generation
    collected every ``_GC_YOUNG_THRESHOLD`` allocations, and draws of the seed
    alone; as they were before, after it."""
    collecting = gc.get_threshold()
    if _GC_YOUNG_THRESHOLD and collecting[0] < _GC_YOUNG_THRESHOLD:
        gc.set_threshold(_GC_YOUNG_THRESHOLD, *collecting[1:])
    try:
        with _draws_of_the_seed_alone():
            yield
    finally:
        gc.set_threshold(*collecting)


def _explore(cd, new_example: Callable[[], Any], draw_step: choices.Drawer, step_count: int) -> None:
    """Run one example: up to ``step_count`` steps, each drawn by ``draw_step(cd)``.

    This is the loop of Hypothesis's stateful runner for a machine of one
    rule, without what a machine of many rules needs (rule selection, its
    feature flags and bundles, each step's text): a step is drawn whole by
    one drawer of primitive choices (``Explorer.draw_step``), inside the
    step's own span, and the kit reports steps itself. The choices keep the
    structure a state machine's have (a span per step, led by the choice to
    stop), so Hypothesis records, replays and shrinks them as it would."""
    with _exploring():
        example = new_example()
        try:
            run = 0
            while True:
                cd.start_span(_STEP_LABEL)
                must_stop = None
                if run >= step_count:
                    must_stop = True
                elif run == 0:
                    must_stop = False  # an example runs at least one step
                elif cd.length > 0.8 * _BUFFER_SIZE:
                    must_stop = True  # better fewer steps than a run over Hypothesis's choice budget
                if cd.draw_boolean(p=2**-16, forced=must_stop):
                    break
                run += 1
                example.step(draw_step(cd))
                cd.stop_span()
        finally:
            example.teardown()


def exploration_test(
    new_example: Callable[[], Any],
    draw_step: choices.Drawer,
    *,
    step_count: int,
    settings: Settings,
    key: str,
    seed: int | None = None,
    method: bool = False,
):
    """The exploration as a plain Hypothesis test: ``@given(st.data())``, each
    example a ``new_example()`` driven through up to ``step_count`` steps, each
    drawn by ``draw_step`` (``Explorer.draw_step``), then its ``teardown()``. ``key`` names it in
    Hypothesis's example database (a spec and an implementation); ``seed``
    fixes its randomness and keeps the database on; ``method``: a
    ``unittest.TestCase`` method (``self`` first), for pytest and HypoFuzz."""

    hypothesis_support.check_conjecture_api()  # a Hypothesis without the primitives: said now, by name

    def test_method(self: Any, data: Any) -> None:
        _explore(hypothesis_support.conjecture_data(data), new_example, draw_step, step_count)

    def test_function(data: Any) -> None:
        _explore(hypothesis_support.conjecture_data(data), new_example, draw_step, step_count)

    inner: Callable[..., None] = test_method if method else test_function
    inner.__name__ = inner.__qualname__ = "runTest" if method else "explore"
    test: Any = settings(given(st.data())(inner))  # it carries attributes Hypothesis reads, not in its types
    hypothesis_support.key_database(test.hypothesis.inner_test, key.encode("utf-8"))
    # pytest (conformance.pytest_plugin) and HypoFuzz key it by its node id instead
    test.hypothesis.inner_test._conformance_exploration = True
    hypothesis_support.quiet_arguments(test)  # the kit reports the steps itself
    if seed is not None:
        # On the test, not through @seed: that would switch the example database off.
        hypothesis_support.fix_seed(test, seed)
    return test


def phases_without_explain(phases: Any) -> tuple:
    """The phases Hypothesis runs by default (a loaded settings profile's), but
    its explain phase: that traces every line each shrinking example runs
    (``sys.settrace`` before Python 3.12), to say which lines only failing
    examples ran, and made a failing exploration's shrinking two to three
    times slower. The kit reports the steps of a failure itself and never
    prints Hypothesis's explanation."""
    return tuple(phase for phase in phases if phase is not Phase.explain)


def _explored_first(phases: tuple) -> tuple:
    """The exploration's phases without replaying saved failures: the seed's
    examples are drawn first, so a run that has saved failures explores, and
    counts coverage, as one without them."""
    return tuple(phase for phase in phases if phase is not Phase.reuse)


def _saved_failures(phases: tuple) -> tuple:
    """The phases of the second pass, after an exploration that found
    nothing: the failures an earlier run saved, replayed (and shrunk)."""
    return tuple(phase for phase in phases if phase in (Phase.reuse, Phase.shrink))


@contextmanager
def _coverage_kept(session: Session):
    """The coverage counts as they stand, back in place afterwards: replaying
    saved failures is not exploring (a run that has them counts what one
    without them counts)."""
    kept = session.model.coverage.copy()
    try:
        yield
    finally:
        now = session.model.coverage
        now.counts, now.last, now.orders = kept.counts, kept.last, kept.orders


def _shrink_note(stats: _Stats) -> str:
    """What the failure's message says of shrinking that its budget ended."""
    note = (
        "\n(not shrunk: shrinking was switched off)"
        if not stats.shrink_s
        else f"\n(shrinking stopped after {stats.examples - stats.first_failure_example} of its "
        f"{stats.shrink_examples} examples: {stats.slow}, so a faster implementation may shrink further; "
        f"this is the shortest of {stats.failures} failing sequences found)"
        if stats.timed_out
        else f"\n(shrinking stopped after its {stats.shrink_examples} examples; this is the shortest of "
        f"{stats.failures} failing sequences found)"
    )
    if stats.others:
        note += (
            f"\n({stats.others} sequence(s) tried while shrinking failed in another way (another operation, "
            f"a race or an invariant): another bug, left aside here; --max-failures N reports distinct failures)"
        )
    return note


def run_stateful(
    spec: Spec,
    session: Session,
    *,
    profile: str,
    seed: int,
    capabilities: dict,
    on_example=None,
    shrink_s: float | None = None,
    database: str | None = None,
    max_examples: int | None = None,
    shrink_examples: int | None = None,
    beyond_pools: float | None = None,
) -> StatefulOutcome:
    """Explore generated step sequences; on failure, report the shrunk one.
    ``max_examples``: this many examples instead of the profile's (one part
    of a run split into parts: engine/shards.py); ``shrink_examples``: this
    many examples of shrinking instead of the profile's (a later failure's
    share: engine/runner.py); ``beyond_pools``: the percent of pool-drawn
    arguments' draws that leave the pool, instead of the profile's.
    ``database``: a directory for Hypothesis's example database, so a re-run
    tries the failures found before, after its own examples found nothing
    (None: none kept).
    An operation that answers not_implemented is not drawn again: the
    exploration starts over without it (``Session.unimplemented``); with no
    operation left to draw, it fails saying so (a stub checks nothing)."""
    started, examples, steps = time.perf_counter(), 0, 0
    while True:
        absent = frozenset(session.unimplemented)
        left = spec.offered_operations(session.params) - absent
        if not left:
            return _nothing_to_draw(session, profile, seed, examples, steps, started)
        try:
            outcome = _explore_drawing(
                spec,
                session,
                absent,
                profile=profile,
                seed=seed,
                capabilities=capabilities,
                on_example=on_example,
                shrink_s=shrink_s,
                database=database,
                max_examples=max_examples,
                shrink_examples=shrink_examples,
                beyond_pools=beyond_pools,
            )
        except _NotOffered as stop:
            session.defer_model_invariants = False
            examples, steps = examples + stop.examples, steps + stop.steps
            if stop.failure.operation in left:
                continue  # drawn no more
            # not drawn (a probe's call): nothing to leave out, a failure as before
            outcome = StatefulOutcome("fail", profile, seed, failure=stop.failure)
        outcome.examples, outcome.steps = outcome.examples + examples, outcome.steps + steps
        outcome.duration_s = time.perf_counter() - started
        return outcome


def _nothing_to_draw(
    session: Session, profile: str, seed: int, examples: int, steps: int, started: float
) -> StatefulOutcome:
    said = ", ".join(sorted(session.unimplemented)) or "none"
    failure = Failure(
        kind="not-implemented",
        seed=seed,
        steps=[],
        message=(
            "the exploration has no operation to draw: every operation these parameters offer answers "
            f"not_implemented ({said})"
        ),
    )
    outcome = StatefulOutcome("fail", profile, seed, examples, steps, failure=failure)
    outcome.duration_s = time.perf_counter() - started
    return outcome


def _explore_drawing(
    spec: Spec,
    session: Session,
    absent: frozenset[str],
    *,
    profile: str,
    seed: int,
    capabilities: dict,
    on_example=None,
    shrink_s: float | None = None,
    database: str | None = None,
    max_examples: int | None = None,
    shrink_examples: int | None = None,
    beyond_pools: float | None = None,
) -> StatefulOutcome:
    """One exploration drawing the offered operations but ``absent``."""
    config = PROFILES[profile]
    started = time.perf_counter()
    stats = _Stats(
        shrink_s=config["shrink_s"] if shrink_s is None else shrink_s,
        shrink_examples=config.get("shrink_examples", _Stats.shrink_examples)
        if shrink_examples is None
        else shrink_examples,
        calls=lambda: session.calls,
        slow_calls=session.slow_calls.now,
    )
    share = config.get("beyond_pools", BEYOND_POOLS) if beyond_pools is None else beyond_pools
    explorer = Explorer(spec, session.params, bool(capabilities.get("concurrent")), absent, beyond_pools=share)
    session.defer_model_invariants = True
    example = build_example(spec, session, explorer, stats, on_example)
    phases = phases_without_explain(Settings().phases)  # a loaded profile's, but explain
    settings = Settings(
        max_examples=config["max_examples"] if max_examples is None else max_examples,
        stateful_step_count=config["stateful_step_count"],
        deadline=None,
        verbosity=Verbosity.quiet,
        print_blob=False,
        database=DirectoryBasedExampleDatabase(database) if database else None,
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
        phases=_explored_first(phases),
    )
    test = exploration_test(
        example,
        explorer.draw_step,
        step_count=config["stateful_step_count"],
        settings=settings,
        key=f"exploration:{spec.id}",
        seed=seed,
    )
    saved = (
        exploration_test(
            example,
            explorer.draw_step,
            step_count=config["stateful_step_count"],
            settings=Settings(settings, phases=_saved_failures(phases)),
            key=f"exploration:{spec.id}",
            seed=seed,
        )
        if database and Phase.reuse in phases
        else None
    )
    outcome = StatefulOutcome("pass", profile, seed)
    try:
        # Hypothesis's own work between examples allocates as much as an example; every
        # example is drawn afresh (hypothesis_support.fresh_examples_only)
        with _exploring(), hypothesis_support.fresh_examples_only(explorer.steering.choices.fresh_examples):
            test()
            if saved is not None:
                with _coverage_kept(session), contextlib.suppress(unittest.SkipTest):
                    saved()  # SkipTest: nothing was saved, so Hypothesis ran no example
    except ConformanceFailure as exc:
        outcome.verdict, outcome.failure = "fail", exc.failure
    except _ShrinkBudgetSpent:
        best = stats.best
        assert best is not None  # the budget counts only once a failure was kept
        best.message += _shrink_note(stats)
        outcome.verdict, outcome.failure = "fail", best
        outcome.guarded = stats.slow if stats.timed_out else ""
    except FlakyStrategyDefinition as exc:
        # Hypothesis replayed a sequence and it ran on where it had ended (a failure it saw is not
        # there on replay), or the kit's own generation misbehaved; never blame the implementation
        # for the latter.
        if stats.best is not None:
            outcome.verdict, outcome.failure = "fail", stats.best
            outcome.failure.message += _NOT_REPLAYED
        else:
            outcome.verdict = "error"
            outcome.failure = Failure(
                kind="spec-error",
                seed=seed,
                message=(
                    "the exploration stopped: its step generation depended on state in a way Hypothesis could "
                    f"not replay ({str(exc).splitlines()[0]}); no failure of the implementation was seen"
                ),
            )
    except Flaky as exc:
        outcome.verdict = "fail"
        if stats.best is not None:
            # A check failed on the answers the implementation gave: that is evidence enough, even if
            # Hypothesis's replay of the same draws did not fail again. The draws pick records by
            # position, so when a concurrent group's ids come out in another order the replay
            # addresses other records: the replay may differ without the implementation being at
            # fault. The runner's reduction replays the failure's own steps and arguments.
            outcome.failure = stats.best
            outcome.failure.message += _NOT_REPLAYED
        else:
            outcome.failure = Failure(
                kind="nondeterminism",
                seed=seed,
                steps=[],
                message=(
                    "the exploration's replay of a sequence gave a result other than the first run's "
                    f"({type(exc).__name__}: {str(exc).splitlines()[0]}): the implementation behaves "
                    "nondeterministically"
                ),
            )
    except AdapterLoadError as exc:
        outcome.verdict = "error"
        outcome.failure = Failure(kind="implementation-error", message=str(exc), seed=seed)
    except ExpressionError as exc:  # a spec expression of the exploration itself (a batch's args, a count) failed
        outcome.verdict = "error"
        outcome.failure = Failure(kind="spec-error", message=f"the exploration stopped: {exc}", seed=seed)
    except KeyboardInterrupt as exc:
        # Stopped by a signal: hand what the exploration had so far (the
        # shortest failure seen, if any) to the runner's interrupted report.
        outcome.verdict, outcome.failure = "interrupted", stats.best
        outcome.examples, outcome.steps = stats.examples, stats.steps
        outcome.duration_s = time.perf_counter() - started
        exc.stateful_so_far = outcome  # type: ignore[attr-defined]  # read by the runner's interrupted report
        raise
    finally:
        session.defer_model_invariants = False
    if outcome.failure is not None and outcome.failure.kind in DATA_ERRORS:
        outcome.verdict = "error"  # the spec or the input failed, not the implementation
    outcome.examples, outcome.steps = stats.examples, stats.steps
    outcome.beyond_pools = explorer.beyond.report()
    outcome.explored = stats.first_failure_example if stats.first_failure_at is not None else stats.examples
    if outcome.verdict == "fail" and stats.first is not None and stats.first is not outcome.failure:
        outcome.found_first = stats.first
    outcome.duration_s = time.perf_counter() - started
    return outcome
