"""Reducing a failing step list after Hypothesis, by replaying it.

Hypothesis shrinks the choices that generated a sequence; what it hands back
can still carry steps the failure does not need and arguments bigger or
stranger than it needs (a shrink budget runs out; a step's draws depend on
state). Here the failing steps themselves are replayed against the
implementation, the same way ``conformance replay`` runs a counterexample
file, and made smaller while the *same* failure (its kind, operation and
path, indexes aside) still happens:

1. keep only the last steps (1, 2, 4, ... before the failing one) with the
   steps that first named the records they name, when that still fails;
   run each concurrent group one call at a time when the bug does not
   need the race (its calls can then go one by one, and every later replay
   is deterministic); drop every step of one kind (all clock moves, all
   calls of one operation); drop whole records (every step that created or
   names one id; half of them, then quarters, ..., then one by one; an
   explicit id shaped like the dropped ones, job-33, moves down with them);
   when none of that removes anything, records named by the implementation
   get their names as explicit keys, so that dropping one no longer renames
   the others (``job-10`` beside ``job-2`` stays so), a call that asked for
   a taken name asks for the generated one it got (``bg_1-2``), and records
   go again; then
   steps: chunks of halving size, then single steps (delta debugging); a
   long trace first gets the calls of one operation made alike where the
   failure allows (``simplify_together``), so that the one-by-one tries on
   its identical calls are one replay, not one each; an optional argument
   that some calls of an operation pass, all with one value, is given to
   every call of it when whole kinds of steps can then go
   (``spread_together``: every start taking the duration some had, the
   others' explicit finishes go);
   a call that only moved the clock (one that waits) becomes that clock
   move, the failing call too when what differs is the effects the time
   delivered; two clock moves in a row become one;
2. simplify the arguments that are left: first one argument of one
   operation in every call at once (left out, or the same simplest value),
   then an optional argument naming a record (an explicit id: the
   implementation then chooses one, and later steps follow it), then each
   one: a value its schema's enum or pool lists earlier; the shortest
   strings, then ASCII ones; the smallest numbers (clock moves too); fewer
   list items;
3. repeat while anything got smaller, within a budget of replays
   (engine/budgets.py). A candidate that replays as one already seen not
   to fail (the same calls, up to the names recorded for the
   implementation's choices: engine/replay_keys.py) is not replayed again
   and costs no replay.

The calls of a concurrent group keep the values each chose (``chosen``, as
the linearization met them), so a replay that runs the group one call at a
time, or in which its calls land in another order, renames them as it does a
plain call's.

The result is deterministic for a deterministic implementation (every try
is in a fixed order, and the budget counts replays, not seconds, so a busy
machine reduces as far as an idle one), and every step of it is needed:
dropping any one of them loses the failure (unless the budget ran out
first, or the implementation's calls were slower than the time guard, on
average or in calls whose cost grew, which the failure says).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jsonschema

from ..errors import AdapterLoadError
from .budgets import REDUCE_REPLAYS, ReplayBudget, SlowCalls
from .failures import Failure, same_bug, signature
from .interrupts import checkpoint
from .key_shapes import reshaped
from .replay_keys import choices_made, replay_key

if TYPE_CHECKING:
    from .session import Session

__all__ = [
    "explain_race",
    "group_checks",
    "mentions",
    "race_note",
    "race_tries",
    "reduce_failure",
    "replay_steps",
    "steps_of_trace",
    "without_choices",
]

# How many orders of one concurrent group are re-run one call at a time.
MAX_ORDERS = 24
# How many replays steps with a concurrent group get before they count as not failing:
# at least RACE_TRIES, more when the race shows in fewer of the first replays of the
# whole list (RACE_SAMPLE of them), so that a step the failure does not need is
# wrongly kept with a chance under RACE_MISS, up to MAX_RACE_TRIES.
RACE_TRIES = 3
RACE_SAMPLE = 12
RACE_MISS = 0.01
MAX_RACE_TRIES = 24


def race_tries(rate: float) -> int:
    """How many replays a candidate with races gets when the race showed in
    ``rate`` of the replays of the whole list: enough that a candidate that
    still fails is missed with a chance under RACE_MISS, within
    RACE_TRIES..MAX_RACE_TRIES."""
    if rate >= 1:
        return RACE_TRIES
    needed = math.ceil(math.log(RACE_MISS) / math.log(1 - rate))
    return max(RACE_TRIES, min(MAX_RACE_TRIES, needed))


def race_note(seen: tuple[int, int] | None, tries: int) -> str | None:
    """What a reduction's message says when its race (``seen``: replays of
    the whole list that showed it, of those made) showed too seldom for
    ``tries`` replays per candidate to tell a step the failure needs from an
    unlucky schedule, as on a loaded machine; None when it showed often
    enough, or the list has no race."""
    if seen is None:
        return None
    hits, tried = seen
    if not hits:
        return (
            f"not reduced: its race did not show again in {tried} replays of the whole list; "
            "on a less loaded machine it may"
        )
    if (1 - hits / tried) ** tries <= RACE_MISS:
        return None
    return (
        f"its race showed in only {hits} of {tried} replays of the whole list, so steps it does not "
        "need may have been kept; on a less loaded machine the same seed may reduce further"
    )


def group_checks(trace: list[dict]) -> set[int]:
    """Positions of the probe calls the session made right after a concurrent
    group, to judge which order of it explains the state (``follow_up`` in
    the trace): part of that group's check, which every replay of the group
    makes again, so not steps of their own."""
    checks: set[int] = set()
    for index, step in enumerate(trace):
        after_group = index > 0 and ("concurrently" in trace[index - 1] or index - 1 in checks)
        if after_group and step.get("follow_up"):
            checks.add(index)
    return checks


def steps_of_trace(trace: list[dict]) -> list[dict]:
    """A session trace as replayable steps (the counterexample file's form),
    without the group checks (``group_checks``) a replay makes by itself."""
    steps = []
    checks = group_checks(trace)
    for index, step in enumerate(trace):
        if index in checks:
            continue
        if "advance_ms" in step:
            steps.append({"advance_ms": step["advance_ms"]})
        elif "concurrently" in step:
            group = {"concurrently": [_replayable_call(c) for c in step["concurrently"]]}
            if step.get("order"):
                group["order"] = list(step["order"])
            steps.append(group)
        elif "operation" in step:
            steps.append(_replayable_call(step))
    return steps


def _replayable_call(call: dict) -> dict:
    """A call from the trace (alone or in a concurrent group), as a step list
    holds it: its operation, arguments and the values it chose."""
    step = {"call": call["operation"], "args": call["args"]}
    if call.get("chosen"):
        step["chosen"] = list(call["chosen"])
    return step


def without_choices(steps: list[dict]) -> list[dict]:
    """``steps`` without what the implementation chose when they were recorded,
    nor the order a group's calls took (a counterexample file's form: its
    replay chooses afresh, and races its groups again)."""

    def plain(step: dict) -> dict:
        out = {k: v for k, v in step.items() if k not in ("chosen", "order")}
        if "concurrently" in step:
            out["concurrently"] = [plain(call) for call in step["concurrently"]]
        return out

    return [plain(step) for step in steps]


def _renamed(value: Any, names: dict) -> Any:
    """``value`` with every string that is a key of ``names`` replaced by its
    value, and every near miss of one (engine/key_shapes.py) by the same near
    miss of its value."""
    if isinstance(value, str):
        return names[value] if value in names else _reshaped_along(value, names)
    if isinstance(value, dict):
        return {k: _renamed(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_renamed(v, names) for v in value]
    return value


def _reshaped_along(value: str, names: dict) -> str:
    """A near miss of a renamed value, renamed along (or ``value`` as it is)."""
    for before, now in names.items():
        if isinstance(before, str) and isinstance(now, str):
            again = reshaped(value, before, now)
            if again is not None:
                return again
    return value


def replay_steps(
    session: Session,
    steps: list[dict],
    names: dict | None = None,
    clocks: list | None = None,
    *,
    probe_each: bool = False,
) -> Failure | None:
    """Run ``steps`` from a fresh implementation; the first failure, or None.

    Values the implementation chose when the steps were recorded (a step's
    ``chosen``: generated ids, paths) are mapped to what it chooses in this
    replay, in later steps' arguments: with an earlier start dropped, the
    job once called ``job-5`` may now be ``job-4``, and the steps that named
    it must name ``job-4``. ``names`` (when given) receives that mapping:
    recorded value -> this replay's value; ``clocks`` (when given), the
    virtual clock after each step that passed. ``probe_each``: after each
    step, the spec's probe looks at what the step changed, as the exploration
    does, so the replay fails where the implementation's visible state first
    parts from the model's, not only where a step's own answer shows it.

    A call the deviations file ``avoid``s is never sent: the replay stops
    before it and answers None (the steps do not show the failure), so no
    reduced or hunted counterexample holds one."""
    session.reset()
    names = {} if names is None else names
    for step in steps:
        checkpoint()
        if "advance_ms" in step:
            failure = session.advance(step["advance_ms"])
        elif "concurrently" in step:
            calls = [(c["call"], _renamed(c["args"], names) if names else c["args"]) for c in step["concurrently"]]
            if any(session.avoided(op, args, count=False) is not None for op, args in calls):
                return None
            at = len(session.trace)
            failure = session.call_concurrently(calls)[1]
            if failure is None and at < len(session.trace):
                replayed = session.trace[at].get("concurrently") or []
                for call, again in zip(step["concurrently"], replayed):
                    _rename_chosen(call, again, names)
        else:
            args = _renamed(step["args"], names) if names else step["args"]
            if session.avoided(step["call"], args, count=False) is not None:
                return None
            failure = session.call(step["call"], args)[1]
            if failure is None and session.trace:
                _rename_chosen(step, session.trace[-1], names)
        if failure is None and probe_each:
            failure = session.probe(when_changed=True)
        if failure is not None:
            return failure
        if clocks is not None:
            clocks.append(max(session.now, session.model.now))  # a waiting call moves the model's
    return None


def _rename_chosen(step: dict, replayed: dict, names: dict) -> None:
    """Later steps name what ``step`` chose when it was recorded by what its
    replay (``replayed``, its trace entry) chose instead."""
    for before, now in zip(step.get("chosen") or (), replayed.get("chosen") or ()):
        if before != now:
            names[before] = now


def replay_or_none(
    session: Session, steps: list[dict], *, probe_each: bool = False, budget: ReplayBudget | None = None
) -> Failure | None:
    """``replay_steps`` for a search beside the reduction: the first failure,
    or None when the steps pass or the implementation cannot be started
    again; one replay of ``budget`` spent, when given."""
    started, slow = time.perf_counter(), session.slow_calls.now()
    try:
        return replay_steps(session, steps, probe_each=probe_each)
    except AdapterLoadError:
        return None
    finally:
        if budget is not None:
            budget.replayed(len(steps), started, SlowCalls.since(session.slow_calls.now(), slow))


class _Reducer:
    def __init__(self, session: Session, target: tuple, budget: ReplayBudget):
        self.session, self.target, self.budget = session, target, budget
        self.tries = 0
        self.best_failure: Failure | None = None
        self.validators: dict[str, Any] = {}
        self.renamed: dict = {}  # the last replay's renaming: recorded value -> replayed value
        self.race_tries = RACE_TRIES
        self.race_seen: tuple[int, int] | None = None  # replays of the whole list that showed its race, of those made
        self.kept: list[dict] = []  # the last list ``fails`` saw fail
        self.not_failing: set[str] = set()  # replay keys of lists replayed without the failure
        self.named_in_vain: set[str] = set()  # replay keys of lists records_under_own_names left as they were
        self.timed_in_vain: set[tuple[str, str]] = set()  # (operation, argument) ends_by_time tried in vain

    def out_of_budget(self) -> bool:
        return self.budget.spent_out()

    def fails_renumbered(self, candidate: list[dict], dropped: list[dict]) -> bool:
        """Whether ``candidate`` fails with each explicit id shaped like the
        ones the ``dropped`` steps created given the number the next record
        of that shape would get (``build-0010``, the id after nine builds,
        becomes ``build-0001`` once no build is left): a bug about the next id
        or a collision with it keeps its id that way. ``kept`` holds the list
        that failed."""
        renumbered = _first_free(candidate, dropped, self.session.spec.entity.key)
        return renumbered is not None and not self.out_of_budget() and self.fails(renumbered)

    def fails(self, steps: list[dict]) -> bool:
        """Whether ``steps`` still end in the target failure (kept when they do).
        Steps that race calls get up to ``race_tries`` replays, each giving
        another call of a group the head start: one replay in which the
        threads happened not to interleave must not make a step that the
        failure does not need look needed. A list that replays as one seen
        not to fail (engine/replay_keys.py) is not replayed again: the
        rounds that confirm nothing more can go meet most of theirs twice."""
        key = replay_key(steps)
        if key is not None and key in self.not_failing or self.avoids(steps):
            return False
        for attempt in range(self.race_tries if _races(steps) else 1):
            if self.replay_fails(steps, attempt):
                self.kept = steps
                return True
            if self.out_of_budget():
                break
        if key is not None and choices_made(steps, steps_of_trace(self.session.trace)):
            self.not_failing.add(key)
        return False

    def avoids(self, steps: list[dict]) -> bool:
        """Whether a call of ``steps`` is one the deviations file avoids
        whatever the state: such a candidate is rejected unreplayed (one
        avoided only in some state is stopped before it is sent: replay_steps)."""
        deviations = self.session.deviations
        return deviations is not None and any(
            deviations.avoids_by_arguments(call["call"], call["args"]) is not None
            for step in steps
            for call in _calls_of(step)
        )

    def replay_fails(self, steps: list[dict], attempt: int = 0, clocks: list | None = None) -> bool:
        """One replay of ``steps`` (call ``-1 - attempt`` of each group leads;
        ``clocks`` receives the virtual clock after each step)."""
        self.tries += 1
        self.session.head_start = -1 - attempt
        self.renamed = {}
        calls, started, slow = self.session.calls, time.perf_counter(), self.session.slow_calls.now()
        try:
            failure = replay_steps(self.session, steps, self.renamed, clocks)
        except AdapterLoadError:
            return False
        finally:
            self.session.head_start = -1
            self.budget.replayed(
                self.session.calls - calls, started, SlowCalls.since(self.session.slow_calls.now(), slow)
            )
        if failure is not None and _same_target(signature(failure), self.target):
            self.best_failure = failure
            return True
        return False

    def replays(self, steps: list[dict]) -> bool:
        """Whether the whole list fails again. A list without races replays
        once. One with races is replayed RACE_SAMPLE times or more (one try
        is a replay, ``fails`` gives it ``race_tries``), and how often the race
        showed sets how many tries every later candidate gets: on a loaded
        machine a race that shows in one replay of four needs far more than
        three to tell a needed step from an unlucky schedule."""
        if not _races(steps):
            return self.fails(steps)
        hits = tried = 0
        # Past RACE_SAMPLE replays only while fewer than two showed the race (a rate
        # from one hit is a guess), up to four times as many.
        while (tried < RACE_SAMPLE or (hits < 2 and tried < 4 * RACE_SAMPLE)) and not self.out_of_budget():
            hits += self.replay_fails(steps, tried)
            tried += 1
        self.race_seen = (hits, tried)
        if not hits:
            return False
        self.race_tries = race_tries(hits / tried)
        return True

    # -- 1. fewer steps ---------------------------------------------------------
    def keep_tail(self, steps: list[dict]) -> list[dict]:
        """The last step with the 1, 2, 4, ... steps before it, and the steps
        that first named a record these name (the start that created the job
        a cancel names): a bug most often needs a few steps just before it
        shows, and these candidates are short, so each replay is cheap. The
        first that fails is kept; past half of the steps, none is tried."""
        first: dict[str, int] = {}
        for index, step in enumerate(steps):
            for name in _step_names(step):
                first.setdefault(name, index)
        size = 1
        while size < len(steps) - 1 and not self.out_of_budget():
            keep = set(range(len(steps) - 1 - size, len(steps)))
            todo = list(keep)
            while todo:  # the steps that first named what the kept ones name, and what those name
                for name in _step_names(steps[todo.pop()]):
                    index = first[name]
                    if index not in keep:
                        keep.add(index)
                        todo.append(index)
            if len(keep) * 2 > len(steps):
                break
            candidate = [step for index, step in enumerate(steps) if index in keep]
            if self.fails(candidate) or self.fails_renumbered(
                candidate, [step for index, step in enumerate(steps) if index not in keep]
            ):
                return self.as_replayed(self.kept)
            size *= 2
        return steps

    def drop_kinds(self, steps: list[dict]) -> list[dict]:
        """Drop every step of one kind at once (every clock move, every call
        of one operation, every concurrent group), the failing last step
        aside: a long trace often carries dozens of steps of a kind the
        failure does not need, which one replay can then rule out."""
        for kind in sorted({_kind(step) for step in steps[:-1]}):
            if self.out_of_budget():
                break
            candidate = [step for step in steps[:-1] if _kind(step) != kind] + steps[-1:]
            if self.fails(candidate) or self.fails_renumbered(candidate, [s for s in steps[:-1] if _kind(s) == kind]):
                steps = self.kept
        return steps

    def drop_records(self, steps: list[dict], coarse_first: bool = False) -> list[dict]:
        """Drop every step about a record at once: the call that created it
        (its id among the step's ``chosen`` values, or given as the entity's
        key argument) and every later step naming it. A retention bug needs
        N records; its trace holds many more, each made of several steps that
        only go away together. Records go in halving chunks (half of them at
        once, then quarters, ...), then one by one. When the steps left give
        an explicit id shaped like the dropped ones (``job-33`` after
        ``job-1`` .. ``job-32`` went), they are also tried with every such
        name moved down past the dropped numbers (``job-1``): an id chosen to
        collide with the implementation's counter needs the same shift.
        With ``coarse_first``, no smaller chunks are tried when no chunk
        down to an eighth of the records could go (``_COARSE_PARTS``): see
        ``records_under_own_names``."""
        key_field = self.session.spec.entity.key
        names = _record_names(steps, key_field)
        size = max(1, len(names) // 2)
        finest_coarse, freed = max(1, len(names) // _COARSE_PARTS), False
        while size >= 1 and not self.out_of_budget():
            if coarse_first and not freed and size < finest_coarse:
                break  # nothing went in halves, quarters or eighths: the failure needs most records
            start = 0
            while start < len(names) and not self.out_of_budget():
                chunk = names[start : start + size]
                group = {i for i, step in enumerate(steps) if any(_names(step, name) for name in chunk)}
                candidate = [step for i, step in enumerate(steps) if i not in group]
                kept = None
                if group and candidate:
                    if self.fails(candidate):
                        kept = candidate
                    else:
                        shifted = _shifted(candidate, chunk, key_field)
                        kept = shifted if shifted is not None and self.fails(shifted) else None
                if kept is None:
                    start += size
                else:
                    freed = True
                    names = (
                        names[:start] + names[start + size :] if kept is candidate else _record_names(kept, key_field)
                    )
                    steps = kept
            size //= 2
        return steps

    def explicit_keys(self, steps: list[dict]) -> list[dict]:
        """Give every call of one operation that created a record under a
        generated name that name as an explicit key argument (the entity's
        key, or an optional ``id``/``..._id`` string the operation takes),
        one argument of one operation per replay. A generated name depends on
        the records before it: ``job-10`` becomes ``job-9`` once one start
        before it goes, so a bug about how ids compare (``job-10`` sorts
        before ``job-2`` as text) keeps every start while names are
        generated; given explicitly, each name stays whatever goes, and
        ``drop_records`` can take the others away."""
        for operation, arg in self.key_arguments(steps):
            if self.out_of_budget():
                break
            candidate = [_with_explicit_key(step, operation, arg) for step in steps]
            if candidate != steps and all(self.within_schema(s) for s in candidate) and self.fails(candidate):
                steps = self.as_replayed(candidate)
        return self.taken_names(steps)

    def records_under_own_names(self, steps: list[dict]) -> list[dict]:
        """``explicit_keys``, then ``drop_records``, once per list: a list that
        replays as one already given its own names (the round that starts
        from the replay's own names gives such a list), or as what that gave
        when no record went, is left as it is. The round before this one
        already tried every record alone under generated names; explicit
        names free records a few of which the failure needs (``job-2`` and
        ``job-10`` compared as text), and when the failure needs at most a
        few of them, some half, quarter or eighth of the records can go. So
        when none can, the chunks stop there (a retention bug needing every
        one of 64 records costs 14 replays here instead of 126)."""
        key = replay_key(steps)
        if key is not None and key in self.named_in_vain:
            return steps
        named = self.drop_records(self.explicit_keys(steps), coarse_first=True)
        if len(named) >= len(steps):
            self.named_in_vain.update(k for k in (key, replay_key(named)) if k is not None)
        return named

    def taken_names(self, steps: list[dict]) -> list[dict]:
        """A call that asked for a name and got another (``bg_1`` taken, it
        got ``bg_1-2``) asks for the name it got instead, one call at a time,
        also without the later steps about that record: a key of the
        generated shape, given explicitly, needs none of the steps that made
        the implementation generate it (the record that took ``bg_1``) or
        freed it again (its end, its eviction), which can then go."""
        keys = self.key_arguments(steps)
        for index in range(len(steps) - 1):
            if self.out_of_budget():
                break
            step = steps[index]
            for operation, arg in keys:
                changed = _with_taken_name(step, operation, arg)
                if changed is step or not self.within_schema(changed):
                    continue
                candidate = steps[:index] + [changed] + steps[index + 1 :]
                # and without the later steps about that record (they ended and evicted it to free its name)
                name = changed["args"][arg]
                later = [s for s in steps[index + 1 : -1] if not _names(s, name)]
                unused = steps[:index] + [changed] + later + steps[-1:]
                kept = next((c for c in (candidate, unused) if self.fails(c)), None)
                if kept is not None:
                    steps = self.as_replayed(kept)
                    break
        return steps

    def key_arguments(self, steps: list[dict]) -> list[tuple[str, str]]:
        """(operation, argument) pairs that may give a record its name: an
        optional string argument that is the entity's key or is named ``id``
        or ``..._id``, of an operation whose calls here created a record."""
        key_field = self.session.spec.entity.key
        out = []
        for name in sorted({s["call"] for s in steps if "call" in s and s.get("chosen")}):
            operation = self.session.spec.operations.get(name)
            if operation is None:
                continue
            required = set(operation.args_schema.get("required") or ())
            for arg, schema in sorted((operation.args_schema.get("properties") or {}).items()):
                named = arg == key_field or arg == "id" or arg.endswith("_id")
                if named and arg not in required and isinstance(schema, dict) and schema.get("type") == "string":
                    out.append((name, arg))
        return out

    def merge_clock_moves(self, steps: list[dict]) -> list[dict]:
        """Two clock moves in a row become one move by their sum (timers
        still fire at their own instants, in time order)."""
        index = 0
        while index < len(steps) - 1 and not self.out_of_budget():
            a, b = steps[index], steps[index + 1]
            if "advance_ms" in a and "advance_ms" in b:
                candidate = steps[:index] + [{"advance_ms": a["advance_ms"] + b["advance_ms"]}] + steps[index + 2 :]
                if self.fails(candidate):
                    steps = candidate
                    continue
            index += 1
        return steps

    def without_races(self, steps: list[dict], failure: Failure) -> list[dict]:
        """Every concurrent group run one call after another, when the
        failure is not itself a race (a plain divergence met after some
        groups) and still shows so: a list without races replays the same
        way every time, so each later candidate needs one replay instead of
        many (a replay through a command-line tool costs a process per step).
        Else, when the failure still shows with the groups left out, without
        them. ``steps`` themselves otherwise, after one or two replays."""
        if failure.kind == "linearizability" or not _races(steps):
            return steps
        calls = [call for step in steps for call in (self.one_by_one(step) if "concurrently" in step else [step])]
        if self.replay_fails(calls):
            return self.as_replayed(calls)
        # The failure may not need the groups at all, only what came between them.
        without = [step for step in steps[:-1] if "concurrently" not in step] + steps[-1:]
        if len(without) < len(steps) and not _races(without) and self.replay_fails(without):
            return self.as_replayed(without)
        return steps

    def split_groups(self, steps: list[dict]) -> list[dict]:
        """Run each group of concurrent calls one call after another instead,
        when the failure does not need the race: the calls then count as
        steps of their own, and the ones the bug does not need can go."""
        index = 0
        while index < len(steps) and not self.out_of_budget():
            step = steps[index]
            if "concurrently" in step:
                calls = self.one_by_one(step)
                candidate = steps[:index] + calls + steps[index + 1 :]
                if self.fails(candidate):
                    steps = self.as_replayed(candidate)
                    index += len(calls)
                    continue
            index += 1
        return steps

    def one_by_one(self, group: dict) -> list[dict]:
        """A concurrent group's calls one after another, in the order their
        effects took when the group was recorded (its ``order``: answers that
        showed the second call winning replay as the second call first), then
        the probe calls the session made after the group to judge it (``group_checks``),
        which no longer come by themselves once the calls are not a group:
        the failure may show only there. ``drop_steps`` takes them away
        when it does not."""
        calls = [{k: v for k, v in c.items() if k in ("call", "args", "chosen")} for c in group["concurrently"]]
        order = group.get("order")
        if isinstance(order, list) and sorted(order) == list(range(len(calls))):
            calls = [calls[i] for i in order]  # as their effects took place when the group was recorded
        if not self.session.observe_after_concurrent:
            return calls
        return calls + [{"call": op, "args": args} for op, args in self.session.probe_calls()]

    def drop_group_calls(self, steps: list[dict]) -> list[dict]:
        """Drop single calls from a concurrent group (a group left with one
        call becomes a plain step): a group often holds calls that lost
        their race and changed nothing (three starts refused for a tool call
        the fourth took), which ``split_groups`` cannot drop when only the
        group's winner, not its first call, sets up the failure."""
        index = 0
        while index < len(steps) and not self.out_of_budget():
            calls = steps[index].get("concurrently") or []
            dropped = False
            for position in range(len(calls)):
                rest = calls[:position] + calls[position + 1 :]
                left = [{"concurrently": rest}] if len(rest) > 1 else self.one_by_one({"concurrently": rest})
                candidate = steps[:index] + left + steps[index + 1 :]
                if self.out_of_budget():
                    break
                if self.fails(candidate):
                    steps, dropped = self.as_replayed(candidate), True
                    break
            if not dropped:
                index += 1
        return steps

    def in_own_names(self, steps: list[dict]) -> list[dict] | None:
        """``steps`` as a replay of them sent and answered them: every name
        the implementation chose is the one this replay got, and later steps
        name it so. Candidates renamed by replays (a record dropped, a group
        split) can leave a step's ``chosen`` names out of step with the names
        later steps use, so that dropping that record no longer carries the
        renaming along; a round from the replay's own names can go on.
        None when nothing changes or the list no longer fails."""
        if not self.fails(steps) or self.best_failure is None:
            return None
        fresh = steps_of_trace(self.best_failure.steps)
        if len(fresh) != len(steps) or fresh == steps:
            return None
        return fresh

    def as_replayed(self, steps: list[dict]) -> list[dict]:
        """``steps`` as the replay that just failed recorded them: calls that
        were concurrent now say which records they created (``chosen``), so
        that dropping an earlier one renames them in later steps. ``steps``
        themselves when the recording does not match them step for step."""
        replayed = steps_of_trace(self.session.trace)
        if len(replayed) != len(steps) or any(_kind(a) != _kind(b) for a, b in zip(replayed, steps)):
            return steps
        recorded = {now: before for before, now in self.renamed.items()}  # in the names later steps use
        return [_with_replayed_choices(step, again, recorded) for step, again in zip(steps, replayed)]

    def drop_steps(self, steps: list[dict], smallest: int = 1) -> list[dict]:
        """Drop chunks of steps, halving the chunk down to ``smallest`` steps."""
        size = max(1, len(steps) // 2)
        while size >= smallest and not self.out_of_budget():
            start = 0
            while start < len(steps) and not self.out_of_budget():
                candidate = steps[:start] + steps[start + size :]
                if candidate and self.fails(candidate):
                    steps = candidate  # the same start now names the next chunk
                else:
                    start += size
            size //= 2
        return steps

    # -- 2. simpler arguments -----------------------------------------------------
    def within_schema(self, step: dict) -> bool:
        """Whether every call of ``step`` passes arguments its operation's schema
        accepts: a simpler value outside it (an empty id, type "") is a
        different input, which the implementation may rightly refuse."""
        for call in _calls_of(step):
            operation = self.session.spec.operations.get(call.get("call", ""))
            if operation is None:
                continue
            validator = self.validators.get(operation.name)
            if validator is None:
                validator = self.validators[operation.name] = jsonschema.Draft202012Validator(operation.args_schema)
            if not validator.is_valid(call.get("args") or {}):
                return False
        return True

    def simplify_together(self, steps: list[dict]) -> list[dict]:
        """Simplify one argument of one operation in every call at once: leave
        an optional one out, else give every call the same simplest value that
        keeps the failure (e.g. every start's random text becomes ""). One
        replay can then stand for dozens of the one-at-a-time tries below."""
        names = set(_record_names(steps, self.session.spec.entity.key))
        for operation, arg in _operation_arguments(steps):
            values = _argument_values(steps, operation, arg)
            if any(isinstance(v, str) and v in names for v in values):
                continue  # record names tie steps together: never rewritten
            steps = self.simplest_together(steps, operation, arg, values)
            if self.out_of_budget():
                return steps
        return steps

    def simplest_together(self, steps: list[dict], operation: str, arg: str, values: list) -> list[dict]:
        """``steps`` with argument ``arg`` of every call of ``operation`` left
        out, or else set to the simplest common value, that still fails (the
        first candidate that does); ``steps`` themselves when none does."""
        for simpler in [_LEAVE_OUT, *_common_simpler(values)]:
            if self.out_of_budget():
                return steps
            candidate = [_with_argument(step, operation, arg, simpler) for step in steps]
            if candidate == steps or not all(self.within_schema(step) for step in candidate):
                continue
            if self.fails(candidate):
                return candidate
        return steps

    def spread_together(self, steps: list[dict]) -> list[dict]:
        """Give an optional argument to every call of an operation when the
        calls that pass it all pass one value and the others leave it out, if
        whole kinds of steps can then go (``drop_kinds``): with every start
        taking the one duration some starts had, the explicit finishes of the
        others are no longer needed, and one clock move ends every job.
        Kept only when the list gets shorter."""
        names = set(_record_names(steps, self.session.spec.entity.key))
        for operation, arg in _operation_arguments(steps):
            if self.out_of_budget():
                break
            value = _shared_by_some(steps, operation, arg)
            if value is _LEAVE_OUT or (isinstance(value, str) and value in names):
                continue
            candidate = [_with_argument(step, operation, arg, value, everywhere=True) for step in steps]
            if not all(self.within_schema(step) for step in candidate) or not self.fails(candidate):
                continue
            shorter = self.drop_kinds(candidate)
            if len(shorter) < len(steps):
                steps = shorter
        return steps

    def ends_by_time(self, steps: list[dict]) -> list[dict]:
        """Records ended by time instead of one call each: every call of an
        operation given the smallest value of an optional integer argument
        none of them passes (a start given a duration), one clock move of that
        much after the last of them, then ``drop_kinds`` (the explicit
        finishes go). Kept only when the list gets shorter: a trace that
        ended 65 jobs with 65 finishes becomes 65 starts and one clock move.
        An argument tried in vain is not tried again."""
        if _races(steps):
            return steps
        for operation, arg, value in self.unpassed_integers(steps):
            if self.out_of_budget():
                break
            self.timed_in_vain.add((operation, arg))
            candidate = [_with_argument(step, operation, arg, value, everywhere=True) for step in steps]
            last = max((i for i, step in enumerate(candidate[:-1]) if step.get("call") == operation), default=None)
            if last is None or not all(self.within_schema(step) for step in candidate):
                continue
            candidate = [*candidate[: last + 1], {"advance_ms": value}, *candidate[last + 1 :]]
            if not self.fails(candidate):
                continue
            shorter = self.drop_kinds(candidate)
            if len(shorter) < len(steps):
                steps = shorter
                self.timed_in_vain.discard((operation, arg))
        return steps

    def unpassed_integers(self, steps: list[dict]) -> list[tuple[str, str, int]]:
        """(operation, argument, smallest value) for each optional integer
        argument that no call of its operation in ``steps`` passes, the
        operations in the order the steps first call them."""
        found = []
        for operation in dict.fromkeys(step["call"] for step in steps[:-1] if "call" in step):
            spec_op = self.session.spec.operations.get(operation)
            schema = getattr(spec_op, "args_schema", None) or {}
            required = set(schema.get("required") or ())
            passed = {arg for step in steps if step.get("call") == operation for arg in (step.get("args") or {})}
            for arg, prop in sorted((schema.get("properties") or {}).items()):
                if (operation, arg) in self.timed_in_vain or arg in required or arg in passed:
                    continue
                if isinstance(prop, dict) and prop.get("type") == "integer":
                    low = prop.get("minimum")
                    found.append((operation, arg, low if isinstance(low, int) and low > 0 else 1))
        return found

    def listed_before(self, step: dict, slot: tuple, value: Any) -> list:
        """The values an argument's schema lists before ``value`` (its
        ``enum``, or the exploration pool it is drawn from), first first: the
        first of a list is its simplest, and the one the result settles on
        whichever value the exploration happened to draw."""
        if len(slot) < 2 or slot[-2] != "args":
            return []
        call = step if slot[0] == "args" else step["concurrently"][slot[1]]
        operation = self.session.spec.operations.get(call.get("call", ""))
        schema = (operation.args_schema.get("properties") or {}).get(slot[-1]) if operation else None
        if not isinstance(schema, dict):
            return []
        listed = schema.get("enum")
        pool = (schema.get("x-draw") or {}).get("pool") if isinstance(schema.get("x-draw"), dict) else None
        if not isinstance(listed, list) and pool is not None:
            listed = self.session.spec.exploration.pools.get(pool)
        if not isinstance(listed, list) or value not in listed:
            return []
        return list(listed[: listed.index(value)])

    def leave_out_names(self, steps: list[dict]) -> list[dict]:
        """Leave out an optional argument that names a record (an explicit
        job id): the implementation then chooses the name, and the steps
        after it that named the record are renamed to what it chose (the
        replay maps a step's ``chosen`` values). A start that reused an
        existing id to collide with it may not be needed at all once its
        id is its own; a bug that needs an explicit id keeps it. Every such argument goes
        at once first (one replay: of the names ``records_under_own_names``
        gave 64 records, few are needed), then one at a time."""
        names = set(_record_names(steps, self.session.spec.entity.key))
        unnamed = [self.name_left_out(step, names) or step for step in steps]
        if sum(a is not b for a, b in zip(unnamed, steps)) > 1 and self.fails(unnamed):
            return self.as_replayed(unnamed)
        index = 0
        while index < len(steps) and not self.out_of_budget():
            left = self.without_a_name(steps, index, names)
            if left is not None:
                steps = left
                names = set(_record_names(steps, self.session.spec.entity.key))
            index += 1
        return steps

    def without_a_name(self, steps: list[dict], index: int, names: set[str]) -> list[dict] | None:
        """``steps`` (as replayed) with the first optional argument of step
        ``index`` that names a record left out, when that still fails; None
        when no such argument can go."""
        for without in self.names_left_out(steps[index], names):
            candidate = list(steps)
            candidate[index] = without
            if self.fails(candidate):
                return self.as_replayed(candidate)
        return None

    def name_left_out(self, step: dict, names: set[str]) -> dict | None:
        """``step`` without every optional argument naming a record that it
        can do without (``names_left_out`` at once); None when it has none."""
        gone = self.leavable_names(step, names)
        if not gone:
            return None
        at_once = {**step, "args": {k: v for k, v in step["args"].items() if k not in gone}}
        return at_once if self.within_schema(at_once) else None

    def names_left_out(self, step: dict, names: set[str]) -> list[dict]:
        """``step`` with one optional argument that names a record left out,
        for each such argument the step's schema lets it do without."""
        return [
            {**step, "args": {k: v for k, v in step["args"].items() if k != arg}}
            for arg in self.leavable_names(step, names)
        ]

    def leavable_names(self, step: dict, names: set[str]) -> list[str]:
        """The optional arguments of ``step`` that name a record (one of
        ``names``) and that the step's schema lets it leave out, each alone."""
        operation = self.session.spec.operations.get(step["call"]) if "call" in step else None
        args = step.get("args")
        if operation is None or not isinstance(args, dict):
            return []
        required = set(operation.args_schema.get("required") or ())
        return [
            arg
            for arg, value in args.items()
            if arg not in required
            and isinstance(value, str)
            and value in names
            and self.within_schema({**step, "args": {k: v for k, v in args.items() if k != arg}})
        ]

    def calls_to_clock_moves(self, steps: list[dict]) -> list[dict]:
        """A call that moved the virtual clock (an operation that waits for a
        job) becomes that clock move alone, when the failure needs only the
        time that passed: the steps that kept a job running only so that the
        wait had something to wait for can then go too."""
        clocks: list = []
        if _races(steps) or not self.replay_fails(steps, clocks=clocks) or len(clocks) < len(steps) - 1:
            return steps  # a race replays differently; a list that did not fail again, or failed early, stays
        clocks.append(max(self.session.now, self.session.model.now))  # where the failing call moved it
        # Effects owed by the time that passed show on a clock move as on a wait: the failing call too.
        for index in range(len(steps) if _in_effects(self.target) else len(steps) - 1):
            if self.out_of_budget():
                break
            moved = clocks[index] - (clocks[index - 1] if index else 0)
            if "call" not in steps[index] or steps[index].get("chosen") or moved <= 0:
                continue  # a call that created a record stays: later steps name it
            candidate = steps[:index] + [{"advance_ms": moved}] + steps[index + 1 :]
            if self.fails(candidate):
                steps = candidate
        return steps

    def simplify_arguments(self, steps: list[dict]) -> list[dict]:
        # A record's name ties steps together (the start that made it, the
        # status command that names it): changed in one place it names another
        # record, or none, and the failure left would be another bug.
        names = set(_record_names(steps, self.session.spec.entity.key))
        for index in range(len(steps)):
            done: set = set()
            while True:  # slots change when a list gets shorter: look again after each success
                slot = next((w for w in _argument_slots(steps[index]) if w not in done), None)
                if slot is None:
                    break
                done.add(slot)
                value = _get(steps[index], slot)
                if isinstance(value, str) and value in names:
                    continue
                for simpler in self.listed_before(steps[index], slot, value) + _simpler_values(value):
                    if self.out_of_budget():
                        return steps
                    candidate = list(steps)
                    candidate[index] = _set(steps[index], slot, simpler)
                    if not self.within_schema(candidate[index]):
                        continue
                    if self.fails(candidate):
                        steps = candidate
                        # The simplest value that keeps the failure (candidates come simplest
                        # first); the slot is looked at again, from its new value: a round
                        # leaves each argument as simple as it gets, and the next round of
                        # the reduction, with nothing changed, can end it.
                        done.discard(slot)
                        break
        return steps


def explain_race(session: Session, failure: Failure) -> Failure:
    """A concurrent group that matched no sequential order, re-run one call at
    a time in each order after the same earlier steps. If some order shows a
    plain divergence, the bug is sequential and that divergence is the
    report; otherwise the linearizability failure stands, with what each order
    did one at a time."""
    if failure.kind != "linearizability" or not failure.steps:
        return failure
    groups = [i for i, step in enumerate(failure.steps) if "concurrently" in step]
    if not groups:
        return failure
    prefix = steps_of_trace(failure.steps[: groups[-1]])
    after = steps_of_trace(failure.steps[groups[-1] + 1 :])  # the probe that looked at the state after the race
    calls = [(c["operation"], c["args"]) for c in failure.steps[groups[-1]]["concurrently"]]
    tried = []
    deferred = session.defer_model_invariants
    session.defer_model_invariants = False
    try:
        for order in itertools.islice(itertools.permutations(range(len(calls))), MAX_ORDERS):
            label = " then ".join(f"call {i}" for i in order)
            steps = prefix + [{"call": calls[i][0], "args": calls[i][1]} for i in order] + after
            try:
                found = replay_steps(session, steps)
            except AdapterLoadError:
                break
            if found is None:
                tried.append(f"  {label}, one at a time: no difference")
            elif found.step is not None and found.step < len(prefix):
                tried.append(f"  {label}, one at a time: the earlier steps did not replay the same way")
            elif found.kind in ("divergence", "invariant", "schema"):
                found.message += (
                    f"\n(first seen inside {len(calls)} concurrent calls, which matched no sequential "
                    f"order; run one at a time in the order {label} they show this plain difference, "
                    f"so the bug is not a race)"
                )
                return found
            else:
                tried.append(f"  {label}, one at a time: {found.message.splitlines()[0]}")
    finally:
        session.defer_model_invariants = deferred
    if tried:
        failure.message += "\nRun one call at a time after the same earlier steps, each order:\n" + "\n".join(tried)
    return failure


_LONG = 24  # steps: a longer trace is first cut down by big chunks
_COARSE_PARTS = 8  # drop_records(coarse_first=True): the smallest chunk tried before giving up, 1/8 of the records


def reduce_failure(session: Session, failure: Failure, budget: ReplayBudget | None = None) -> Failure:
    """The same failure after the shortest, simplest step list replaying found
    within ``budget`` (the ci profile's replays when None); the failure
    itself when it does not replay. ``budget.stopped`` then says why the
    reduction stopped early, if it did."""
    budget = ReplayBudget(REDUCE_REPLAYS["ci"]) if budget is None else budget
    steps = steps_of_trace(failure.steps)
    if steps and budget.guard.slow():  # an earlier reduction of the run found the calls slow
        return dataclasses.replace(failure, message=f"{failure.message}\n(not reduced: {budget.guard.why()})")
    if not steps or budget.spent_out():
        return failure
    reducer = _Reducer(session, signature(failure), budget)
    deferred = session.defer_model_invariants
    session.defer_model_invariants = False  # every step checks them, as a replay does
    try:
        steps = reducer.without_races(steps, failure)
        if not reducer.replays(steps):
            # It does not replay as a plain step list (e.g. it needs the exploration's probe), or its race
            # did not show again.
            budget.unreplayed = True
            note = race_note(reducer.race_seen, reducer.race_tries)
            return dataclasses.replace(failure, message=f"{failure.message}\n({note})") if note else failure
        steps = reducer.keep_tail(steps)
        if len(steps) > _LONG:
            # A long trace first loses whole kinds of steps and big chunks (each replay
            # of it is slow; one that drops half of it halves every later replay).
            steps = reducer.drop_kinds(steps)
            steps = reducer.drop_steps(steps, smallest=max(2, len(steps) // 16))
            # Calls of one operation made alike (a few replays) make the one-by-one tries
            # below alike too: dropping any one of 64 identical starts is one replay, not 64.
            steps = reducer.simplify_together(steps)
            steps = reducer.spread_together(steps)
            steps = reducer.ends_by_time(steps)
        refreshed = False
        while not reducer.out_of_budget():
            before = (len(steps), _size(steps))
            steps = reducer.split_groups(steps)  # first: without races, every later try replays the same way
            steps = reducer.drop_group_calls(steps)
            steps = reducer.drop_kinds(steps)
            steps = reducer.drop_records(steps)
            steps = reducer.drop_steps(steps)
            if (len(steps), _size(steps)) == before:  # stuck: names the steps give themselves may free records
                steps = reducer.records_under_own_names(steps)
            steps = reducer.calls_to_clock_moves(steps)
            steps = reducer.merge_clock_moves(steps)
            steps = reducer.simplify_together(steps)
            steps = reducer.spread_together(steps)
            steps = reducer.ends_by_time(steps)
            steps = reducer.leave_out_names(steps)
            steps = reducer.simplify_arguments(steps)
            if (len(steps), _size(steps)) != before:
                # The next round starts from the replay's own names (one replay), so
                # that when it finds nothing to change the reduction is done.
                steps, refreshed = reducer.in_own_names(steps) or steps, True
            elif refreshed or (fresh := reducer.in_own_names(steps)) is None:
                break
            else:
                steps, refreshed = fresh, True  # one more round, from the replay's own names
        budget.stopped = budget.stop_reason()  # before the last replay below, which is owed whatever is left
        # End on the reduced list itself, so the failure's steps and evidence are this replay's.
        if not reducer.fails(steps) or reducer.best_failure is None:
            return failure
        reduced = reducer.best_failure
    finally:
        session.defer_model_invariants = deferred
    original = len(steps_of_trace(failure.steps))
    if len(steps) < original:
        note = f"reduced from {original} to {len(steps)} step(s) by replaying it ({reducer.tries} replays)"
    elif _size(steps) < _size(steps_of_trace(failure.steps)):
        note = f"{len(steps)} step(s); replaying made their arguments simpler ({reducer.tries} replays)"
    else:
        note = f"{len(steps)} step(s); replaying found nothing to remove"
    if budget.stopped:
        note += f"; {budget.stopped}"
    if race := race_note(reducer.race_seen, reducer.race_tries):
        note += f"; {race}"
    reduced.message += f"\n({note})"
    reduced.seed = failure.seed
    return reduced


# ------------------------------------------------------------------- records


def _in_effects(target: tuple) -> bool:
    """Whether a failure signature is a difference in the effects a step delivered."""
    return target[0] == "divergence" and bool(target[2]) and str(target[2]).startswith("effects")


def _same_target(found: tuple, target: tuple) -> bool:
    """Whether a replay's failure is the one being reduced: the same bug
    (failures.same_bug), or the same difference in delivered effects shown
    by a clock move instead of the call that waited (or the other way
    round): the effects are the time's, not the call's answer."""
    if same_bug(found, target):
        return True
    return _in_effects(found) and found[2] == target[2] and None in (found[1], target[1])


def _with_replayed_choices(step: dict, again: dict, recorded: dict) -> dict:
    """``step`` as its replay (``again``) recorded it: a call that chose
    names says which (``recorded`` maps them to the names later steps use),
    and a group takes the order its calls took effect in that replay."""
    if "call" in step and "chosen" not in step and again.get("chosen"):
        return {**step, "chosen": [recorded.get(v, v) for v in again["chosen"]]}
    if "concurrently" in step and again.get("order") and again["order"] != step.get("order"):
        return {**step, "order": list(again["order"])}
    return step


def _races(steps: list[dict]) -> bool:
    """Whether any of ``steps`` races calls (a replay may then go another way)."""
    return any("concurrently" in step for step in steps)


def _kind(step: dict) -> str:
    """What a step is, for dropping all of a kind at once."""
    if "advance_ms" in step:
        return "clock move"
    if "concurrently" in step:
        return "concurrent " + " ".join(c.get("call", "") for c in step["concurrently"])
    return "call " + str(step.get("call"))


_LEAVE_OUT = object()  # simplify_together: the argument not passed at all


def _operation_arguments(steps: list[dict]) -> list[tuple[str, str]]:
    """Every (operation, argument name) the calls of ``steps`` pass, in a fixed order."""
    return sorted(
        {
            (call["call"], arg)
            for step in steps
            for call in _calls_of(step)
            if isinstance(call.get("args"), dict)
            for arg in call["args"]
        },
        key=str,
    )


def _argument_values(steps: list[dict], operation: str, arg: str) -> list:
    """The values every call of ``operation`` in ``steps`` passes as ``arg``."""
    return [
        call["args"][arg]
        for step in steps
        for call in _calls_of(step)
        if call.get("call") == operation and isinstance(call.get("args"), dict) and arg in call["args"]
    ]


def _common_simpler(values: list) -> list:
    """Values simpler than every one of ``values``, simplest first: the
    candidates all of them could take at once."""
    kinds = {type(v) for v in values}
    if len(kinds) != 1:
        return []
    kind = kinds.pop()
    if kind is str:
        out = ["", "a"] if any(values) else [""]
        return [v for v in out if any(v != value for value in values)]
    if kind is int:
        return [v for v in (0, 1) if any(v != value for value in values)]
    if kind is list:
        return [[]] if any(values) else []
    return []


def _shared_by_some(steps: list[dict], operation: str, arg: str) -> Any:
    """The one value every call of ``operation`` that passes ``arg`` passes,
    when other calls of it leave ``arg`` out; else ``_LEAVE_OUT``."""
    calls = sum(
        call.get("call") == operation and isinstance(call.get("args"), dict)
        for step in steps
        for call in _calls_of(step)
    )
    values = _argument_values(steps, operation, arg)
    if not values or len(values) == calls or any(value != values[0] for value in values):
        return _LEAVE_OUT
    return values[0]


def _with_argument(step: dict, operation: str, arg: str, value: Any, *, everywhere: bool = False) -> dict:
    """``step`` with argument ``arg`` of every call of ``operation`` that
    passes it (``everywhere``: of every call of it) set to ``value`` (left
    out for ``_LEAVE_OUT``)."""

    def changed(call: dict) -> dict:
        args = call.get("args")
        if call.get("call") != operation or not isinstance(args, dict) or (arg not in args and not everywhere):
            return call
        args = {k: v for k, v in args.items() if k != arg}
        if value is not _LEAVE_OUT:
            args[arg] = value
        return {**call, "args": args}

    if "concurrently" in step:
        calls = [changed(c) for c in step["concurrently"]]
        return step if all(a is b for a, b in zip(calls, step["concurrently"])) else {**step, "concurrently": calls}
    return changed(step) if "call" in step else step


def _with_explicit_key(step: dict, operation: str, arg: str) -> dict:
    """``step`` with its generated name given as argument ``arg``, when it is a
    plain call of ``operation`` that created a record and does not pass ``arg``."""
    args = step.get("args")
    chosen = step.get("chosen") or ()
    if step.get("call") != operation or not isinstance(args, dict) or arg in args or not chosen:
        return step
    if not isinstance(chosen[0], str):
        return step
    return {**step, "args": {**args, arg: chosen[0]}}


def _with_taken_name(step: dict, operation: str, arg: str) -> dict:
    """``step`` asking, as argument ``arg``, for the name it was given instead
    of the one it asked for (``step`` itself when it got what it asked for)."""
    args = step.get("args")
    chosen = step.get("chosen") or ()
    if step.get("call") != operation or not isinstance(args, dict) or not isinstance(args.get(arg), str):
        return step
    if not chosen or not isinstance(chosen[0], str) or chosen[0] == args[arg]:
        return step
    return {**step, "args": {**args, arg: chosen[0]}}


def _calls_of(step: dict) -> list[dict]:
    return list(step["concurrently"]) if "concurrently" in step else [step] if "call" in step else []


def _record_names(steps: list[dict], key_field: str) -> list[str]:
    """Names of records the steps create or address, in order of first sight."""
    names: dict[str, None] = {}
    for step in steps:
        for call in _calls_of(step):
            for value in call.get("chosen") or ():
                names.setdefault(value, None)
            value = _key_argument(call, key_field)
            if isinstance(value, str) and value:
                names.setdefault(value, None)
    return list(names)


_NUMBERED = re.compile(r"^(.*?)([0-9]{1,18})$")  # ASCII, int() of it never fails


def _numbered(value: Any) -> tuple[str, str] | None:
    """A name's prefix and trailing digits (``job-`` and ``33``), or None when
    it is not a string ending in a number."""
    match = _NUMBERED.match(value) if isinstance(value, str) else None
    return (match.group(1), match.group(2)) if match else None


def _key_argument(call: dict, key_field: str) -> Any:
    """The value a call passes as the entity's key argument (None without one)."""
    args = call.get("args")
    return args.get(key_field) if isinstance(args, dict) else None


def _renamed_steps(steps: list[dict], moved: dict[str, str], *, chosen: bool) -> list[dict]:
    """``steps`` with every argument named in ``moved`` renamed (and a plain
    call's ``chosen`` names too, with ``chosen``)."""
    out = []
    for step in steps:
        if "concurrently" in step:
            out.append(
                {**step, "concurrently": [{**c, "args": _renamed(c.get("args"), moved)} for c in step["concurrently"]]}
            )
        elif "call" in step:
            renamed = {**step, "args": _renamed(step.get("args"), moved)}
            if chosen and step.get("chosen"):
                renamed["chosen"] = _renamed(step["chosen"], moved)
            out.append(renamed)
        else:
            out.append(step)
    return out


def _moved_down(names: set[str], below: dict[str, list[int]]) -> dict[str, str]:
    """Each of ``names`` shaped like a dropped one (a prefix of ``below``, then
    a number) -> the name with that number lowered by the dropped numbers under
    it; a zero-padded number keeps its width ("0033" does not become "09")."""
    moved: dict[str, str] = {}
    for value in names:
        parts = _numbered(value)
        if parts is None or parts[0] not in below:
            continue
        prefix, digits = parts
        fewer = sum(1 for n in below[prefix] if n < int(digits))
        if fewer:
            moved[value] = prefix + str(int(digits) - fewer).zfill(len(digits) if digits[0] == "0" else 0)
    return moved


def _shifted(steps: list[dict], dropped: list[str], key_field: str) -> list[dict] | None:
    """``steps`` with every name shaped like a dropped record's (the same
    prefix, then a number: ``job-`` and ``33``) moved down by as many dropped
    numbers as lie below it (a zero-padded number keeps its width); None when
    no explicit key argument would move (generated names follow a replay by
    themselves)."""
    below: dict[str, list[int]] = {}
    for name in dropped:
        parts = _numbered(name)
        if parts:
            below.setdefault(parts[0], []).append(int(parts[1]))
    moved = _moved_down(set().union(*map(_step_names, steps)), below) if below else {}
    if not any(_key_argument(call, key_field) in moved for step in steps for call in _calls_of(step)):
        return None
    return _renamed_steps(steps, moved, chosen=True)


def _created_widths(dropped: list[dict]) -> dict[str, int]:
    """Prefix -> width of the number (0: not zero-padded) of each numbered name
    the ``dropped`` steps created; the last such name of a prefix decides."""
    widths: dict[str, int] = {}
    for step in dropped:
        for call in _calls_of(step):
            for name in call.get("chosen") or ():
                parts = _numbered(name)
                if parts:
                    widths[parts[0]] = len(parts[1]) if parts[1][0] == "0" else 0
    return widths


def _first_free(steps: list[dict], dropped: list[dict], key_field: str) -> list[dict] | None:
    """``steps`` with every explicit ``key_field`` argument shaped like a
    name the ``dropped`` steps created (a prefix, then a number), and not
    created by ``steps`` themselves, renamed to the next name of that shape
    after those ``steps`` create (a zero-padded number keeps its width); None
    when nothing would change."""
    widths = _created_widths(dropped)
    if not widths:
        return None
    created = {name for step in steps for call in _calls_of(step) for name in call.get("chosen") or ()}
    prefixes = [parts[0] for parts in map(_numbered, created) if parts]
    count = {prefix: prefixes.count(prefix) for prefix in widths}
    moved: dict[str, str] = {}
    for step in steps:
        for call in _calls_of(step):
            value = _key_argument(call, key_field)
            parts = _numbered(value)
            if parts and parts[0] in widths and value not in created:
                moved[value] = parts[0] + str(count[parts[0]] + 1).zfill(widths[parts[0]])
    moved = {k: v for k, v in moved.items() if k != v}
    if not moved:
        return None
    return _renamed_steps(steps, moved, chosen=False)


def _step_names(step: dict) -> set[str]:
    """The strings a step's calls created (``chosen``) or pass as arguments
    (which may name records)."""
    out: set[str] = set()
    for call in _calls_of(step):
        out.update(v for v in call.get("chosen") or () if isinstance(v, str))
        _strings(call.get("args"), out)
    return out


def _strings(value: Any, out: set) -> None:
    if isinstance(value, str):
        out.add(value)
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, out)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out)


def _names(step: dict, name: str) -> bool:
    """Whether ``step`` created the record ``name`` or passes it as an argument."""
    for call in _calls_of(step):
        if name in (call.get("chosen") or ()):
            return True
        if mentions(call.get("args"), name):
            return True
    return False


def mentions(value: Any, name: str) -> bool:
    """Whether ``name`` stands, whole, as a string anywhere in ``value``."""
    if isinstance(value, str):
        return value == name
    if isinstance(value, dict):
        return any(mentions(v, name) for v in value.values())
    if isinstance(value, list):
        return any(mentions(v, name) for v in value)
    return False


# -------------------------------------------------------------- argument slots


def _argument_slots(step: dict) -> list[tuple]:
    """Paths to every leaf argument of a step, e.g. ("args", "payload"), and
    a clock move's milliseconds."""
    if "advance_ms" in step:
        return [("advance_ms",)]
    if "concurrently" in step:
        roots: list[tuple] = [("concurrently", i, "args") for i in range(len(step["concurrently"]))]
    elif "args" in step:
        roots = [("args",)]
    else:
        return []
    slots: list[tuple] = []
    for root in roots:
        _leaves(_get(step, root), root, slots)
    return slots


def _leaves(value: Any, where: tuple, out: list) -> None:
    if isinstance(value, dict):
        for key in value:
            _leaves(value[key], where + (key,), out)
    elif isinstance(value, list):
        out.append(where)  # the list itself: fewer items
        for i, item in enumerate(value):
            _leaves(item, where + (i,), out)
    else:
        out.append(where)


def _get(node: Any, where: tuple) -> Any:
    for part in where:
        node = node[part]
    return node


def _set(node: Any, where: tuple, value: Any) -> Any:
    if not where:
        return value
    head, rest = where[0], where[1:]
    copy: list | dict = list(node) if isinstance(node, list) else dict(node)
    copy[head] = _set(node[head], rest, value)
    return copy


def _simpler_int(value: int) -> list:
    out = [v for v in (0, 1) if abs(v) < abs(value)]
    if abs(value) > 1:
        out += [value // 2] if value > 0 else [-(abs(value) // 2)]
    if value < 0:
        out.append(-value)
    return out


def _simpler_float(value: float) -> list:
    return [v for v in (0.0, 1.0, float(int(value))) if abs(v) < abs(value) or v != value]


def _simpler_str(value: str) -> list:
    """The empty string, a prefix, the text made ASCII, then as many "a"s."""
    out = [""] if value else []
    if len(value) > 1:
        out += [value[:1], value[: len(value) // 2]]
    out.append("".join(c if c.isascii() and c.isprintable() else "a" for c in value))
    out.append("a" * len(value))
    return out


def _simpler_list(value: list) -> list:
    """No items, a prefix, then (for a short list) each item left out in turn."""
    out: list[list] = [[]] if value else []
    if len(value) > 1:
        out += [value[:1], value[: len(value) // 2]]
        if len(value) <= 16:
            out += [value[:i] + value[i + 1 :] for i in range(len(value))]
    return out


_SIMPLER: dict[type, Callable[[Any], list]] = {
    int: _simpler_int,
    float: _simpler_float,
    str: _simpler_str,
    list: _simpler_list,
}


def _simpler_values(value: Any) -> list:
    """Candidates simpler than ``value``, simplest first."""
    if isinstance(value, bool) or value is None:
        return [False] if value is True else []
    simpler = next((f for kind, f in _SIMPLER.items() if isinstance(value, kind)), None)
    return _unique(simpler(value), value) if simpler else []


def _unique(values: list, original: Any) -> list:
    seen, out = [], []
    for v in values:
        if v != original and v not in seen:
            seen.append(v)
            out.append(v)
    return out


def _size(steps: list[dict]) -> int:
    """How big the arguments are, all in all (characters of their JSON)."""
    import json

    return len(json.dumps(steps, sort_keys=True, default=str, ensure_ascii=False))
