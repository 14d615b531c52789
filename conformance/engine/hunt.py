"""The hunt for further distinct failures after the first (``--max-failures``).

The exploration runs again, with the next seed, while the failures found so
far are masked like accepted deviations (``Session.known_failures``). Only
divergences can be masked: after a first failure of another kind (a race no
order explains, a crash) there is no hunt, and one met later is kept while
the search goes on under the masks so far. Each new failure
is reduced like the first, on a shared budget (``HuntBudgets``). A masked
bug leaves the implementation's state apart from the model's, so later reads
differ too: a new failure whose steps, replayed with the masks lifted, first
fail as one reported already is that bug's consequence (``met``, for
engine/causes.py). The run path (engine/runner.py) calls it and keeps what
it found through interrupts and faults.

A long first failure may be met again while it is masked, in another face
that reduces to fewer steps (a queue ordered by instant and id shows in
two finishes at one instant, or in ten bodies ending at one clock move):
``shorter_met`` reduces the shortest examples that met it, and a shorter
instance heads the report.

A first failure that cannot be masked and whose steps did not fail again
when replayed (a race the implementation lost by luck) could not be
reduced: ``met_again`` explores on with the next seed to meet it again, in
an instance that replays and so reduces.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from statemachines.tools.naming import creating_operations

from .budgets import CallGuard, ReplayBudget
from .failures import Failure, signature

if TYPE_CHECKING:
    from statemachines import Spec

    from .session import Session

__all__ = ["HuntSettings", "HuntBudgets", "met_again", "more_failures", "shorter_met", "unmasked"]


@dataclass(frozen=True)
class HuntSettings:
    """What the hunt may do: find up to ``max_failures`` in all, exploring
    from ``seed + 1`` on with the exploration's ``profile`` and no more
    examples in all than the exploration's ``examples`` left; ``replays``:
    the first failure's reduction budget (the hunt's reductions share a
    quarter of it)."""

    max_failures: int
    seed: int
    profile: str
    examples: int
    replays: int
    shrink_s: float | None = None
    database: str | None = None
    beyond_pools: float | None = None  # the exploration's share of draws beyond the pools (None: the profile's)


def more_failures(
    spec: Spec,
    session: Session,
    outcome: Any,
    settings: HuntSettings,
    *,
    capabilities: dict,
    on_example: Callable | None = None,
    more: list[Failure] | None = None,
    met: dict[int, set[tuple]] | None = None,
    phase: Callable[[str], None] | None = None,
    guard: CallGuard | None = None,
) -> list[Failure]:
    """Distinct failures after the first (--max-failures): the exploration runs
    again, with the next seed, while the failures found so far are masked like
    accepted deviations; only divergences can be masked (``_maskable``), so
    it starts after no other kind, and one found later is kept unmasked.
    Each new failure is reduced like the first. A masked bug
    leaves the implementation's state apart from the model's, so later reads
    differ too: a new failure whose steps, replayed with the masks lifted,
    first fail as one reported already is that bug's consequence. It is
    masked as well and listed as that failure's symptom (engine/causes.py),
    and the search goes on (a few more explorations at most, together
    generating no more examples than were left of the exploration's own).
    ``guard``: the time guard of the run's reductions (engine/budgets.py),
    which the hunt's share too; once it found the calls slow, no further
    exploration starts, and the first failure's message says so."""
    from .reduce import explain_race, replay_or_none, steps_of_trace

    more = [] if more is None else more  # the distinct failures after the first, appended as found
    met = {} if met is None else met
    phase = phase or (lambda name: None)  # the progress display's phase (_ExampleWatch.enter)
    known = {signature(outcome.failure)}
    if not _maskable(outcome.failure):
        return more  # the exploration would meet it again at once
    budgets = HuntBudgets(settings.replays, guard)
    # The hunt shares the exploration's examples: a failing run generates no more
    # examples in all than a passing one (shrinking and reduction aside), so
    # looking for more failures never makes it take many times as long.
    examples_left = settings.examples - outcome.explored
    tries = distinct = 0  # explorations run; failures found that are no symptom of an earlier one
    session.mask_hits.clear()
    try:
        _mask(session, outcome.failure)
        while 1 + distinct < settings.max_failures and tries < settings.max_failures + 1 and examples_left > 0:
            if guard is not None and guard.slow():
                outcome.failure.message += f"\n(no further failures were looked for (--max-failures): {guard.why()})"
                break
            tries += 1
            seed = settings.seed + tries
            again = _explore_on(spec, session, settings, seed, examples_left, capabilities, on_example)
            examples_left -= again.explored
            if again.verdict != "fail" or again.failure is None or not again.failure.steps:
                break
            phase("reducing")
            failure = (
                unmasked(session, functools.partial(explain_race, session, again.failure))
                if again.failure.kind == "linearizability"
                else again.failure
            )
            if signature(failure) in known:
                break  # a race that, one call at a time, shows a failure reported already: the same bug
            failure = budgets.reduce(session, failure, [outcome.failure, *more])  # keeps its signature
            known.add(signature(failure))
            # A failure that cannot be masked (a race no order explains, a crash) is kept, and
            # the search goes on with the next seed under the masks so far: a race that shows
            # only when one call wins must not end it before a failure the seed would meet
            # without that luck. Met again, it is a known signature and the search ends.
            if _maskable(failure):
                _mask(session, failure)
            failure.seed = seed
            first = unmasked(
                session, functools.partial(replay_or_none, session, steps_of_trace(failure.steps), probe_each=True)
            )
            if first is not None and signature(first) in known - {signature(failure)}:
                met[id(failure)] = {signature(first)}  # a consequence of a failure found already: its symptom
                failure.message += (
                    f"\n(found with seed {seed} while the exploration accepted the failure(s) found before it; "
                    f"its steps, with them no longer accepted, first fail as one of them)"
                )
            else:
                distinct += 1
                failure.message += (
                    f"\n(a distinct failure, found with seed {seed} while the exploration accepted the "
                    f"{distinct} failure(s) found before it)"
                )
            more.append(failure)
            phase("looking for more")
    finally:
        session.known_failures.clear()
    return more


def met_again(
    spec: Spec,
    session: Session,
    outcome: Any,
    settings: HuntSettings,
    *,
    capabilities: dict,
    on_example: Callable | None = None,
    guard: CallGuard | None = None,
) -> Failure | None:
    """The part's first failure met again, reduced: for a failure whose steps,
    replayed, did not fail again (``ReplayBudget.unreplayed``: a race won by
    luck, a crash that comes and goes), which no reduction could shorten. The
    exploration runs once more, with the next seed and the examples it has
    left, without masks (such a failure cannot be masked, so the hunt for
    others would not start after it). A failure of the same signature it
    meets is reduced with a whole budget and returned, its message saying
    why; None when it meets none, meets another failure (left to another
    run), or the guard found the calls slow. A failure that can be masked is
    left to the hunt, which looks past it."""
    from .causes import length_of
    from .reduce import explain_race, reduce_failure

    first = outcome.failure
    examples_left = settings.examples - outcome.explored
    if _maskable(first) or examples_left <= 0 or (guard is not None and guard.slow()):
        return None
    seed = settings.seed + 1
    again = _explore_on(spec, session, settings, seed, examples_left, capabilities, on_example)
    outcome.explored += again.explored
    if again.verdict != "fail" or again.failure is None or not again.failure.steps:
        return None
    if signature(again.failure) != signature(first):
        return None
    budget = ReplayBudget(settings.replays, guard if guard is not None else CallGuard())
    reduced = reduce_failure(session, explain_race(session, again.failure), budget)
    reduced.seed = seed
    reduced.message += (
        f"\n(met again with seed {seed}: the failure the exploration met first, with seed {settings.seed}, "
        f"in {length_of(first)} step(s), did not fail again when its steps were replayed, so it could "
        "not be reduced)"
    )
    return reduced


def shorter_met(
    session: Session, failure: Failure, first_seed: int, replays: int, guard: CallGuard | None = None
) -> Failure | None:
    """``failure`` in fewer steps, as the hunt met it: while it was masked, an
    example of a later exploration met it in fewer steps than it was reduced
    to (``Session.mask_hits``). A bug can show in faces no reduction turns
    into one another: a queue ordered by (instant, id) shows in two finishes
    at one instant, or in ten bodies ending at one clock move, where ids cross
    a digit (``bg-10`` before ``bg-9``); removing steps from the long face
    never gives the short one. Only for a failure longer than faces'
    LONG_ENOUGH: the examples that met it in the fewest steps (at most
    MASK_HITS), with fewer calls that create records than its steps make,
    replayed unmasked, must fail with the same signature; each
    is reduced on half of what is left of a quarter of the first failure's
    replays, and the first shorter than ``failure`` is returned. None
    otherwise."""
    from .causes import length_of
    from .faces import LONG_ENOUGH
    from .reduce import reduce_failure, replay_or_none, steps_of_trace

    if not _maskable(failure) or (guard is not None and guard.slow()):
        return None
    if length_of(failure) <= LONG_ENOUGH:
        return None
    _, operation, path = signature(failure)
    # A quarter of the first failure's replays for all of them, each half of what is left:
    # a failing run stays within a small multiple of a passing one whatever it meets.
    budget = ReplayBudget(replays // 4, guard if guard is not None else CallGuard())
    # A shorter face needs fewer records: met where as many were made as in the
    # failure (a thread filled past its retention limit), it would reduce no further.
    creating = creating_operations(session.spec)
    made = _calls_of(steps_of_trace(failure.steps or []), creating)
    for seed, trace in session.mask_hits.get((operation, path), []):
        steps = steps_of_trace(trace)
        if _calls_of(steps, creating) >= made:
            continue
        again = unmasked(session, functools.partial(replay_or_none, session, steps, probe_each=True, budget=budget))
        if again is None or signature(again) != signature(failure):
            continue
        reduced = reduce_failure(session, again, budget.share(0.5))
        if length_of(reduced) < length_of(failure):
            reduced.seed = seed
            reduced.message += (
                f"\n(met again in {len(steps)} step(s) with seed {seed} while the exploration looked for "
                f"other failures; the instance it met first, with seed {first_seed}, was reduced to no fewer "
                f"than {length_of(failure)} step(s))"
            )
            return reduced
        if budget.guard.slow() or budget.left() < 1:
            break
    return None


def _calls_of(steps: list[dict], operations: frozenset[str]) -> int:
    """How many calls of ``operations`` ``steps`` make, one at a time or at once."""
    calls = [call for step in steps for call in step.get("concurrently") or [step]]
    return sum(call.get("call") in operations for call in calls)


def _explore_on(
    spec: Spec,
    session: Session,
    settings: HuntSettings,
    seed: int,
    examples: int,
    capabilities: dict,
    on_example: Callable | None,
) -> Any:
    """One more exploration after the part's first, with ``seed`` and at most
    ``examples``: its failure is not shrunk by Hypothesis, since replaying it
    alone reduces it further per try (HuntBudgets)."""
    from .stateful import run_stateful

    session.exploring_seed = seed  # a mask met in this exploration was met with it (Session.mask_hits)
    return run_stateful(
        spec,
        session,
        profile=settings.profile,
        seed=seed,
        capabilities=capabilities,
        on_example=on_example,
        shrink_s=settings.shrink_s,
        database=settings.database,
        max_examples=examples,
        shrink_examples=0,
        beyond_pools=settings.beyond_pools,
    )


def _mask(session: Session, failure: Failure) -> None:
    """Let the explorations that follow accept ``failure`` and look past it."""
    _, operation, path = signature(failure)
    session.known_failures.append((operation, path))


def _maskable(failure: Failure) -> bool:
    """Whether the exploration can accept ``failure`` and look past it: only a
    divergence at a path (``Session.known_failures``)."""
    return failure.kind == "divergence" and bool(failure.path)


class HuntBudgets:
    """What the failures found after the first may spend: no shrinking by
    Hypothesis (an example of it costs what a replay does, and the replay
    reduction gets further per try) and one budget of replays for all of
    them, a quarter of the first failure's, each taking half of what is left,
    so a failing run hunting for more failures stays within a small multiple
    of a passing run whatever it finds. The headline's reduction stays
    complete: a failure shorter than every one found before it (it heads the
    report unless a shorter one follows) whose share ran out is reduced again
    from its own steps with a whole budget."""

    def __init__(self, replays: int, guard: CallGuard | None = None) -> None:
        self.replays = replays
        self.guard = CallGuard() if guard is None else guard  # one for all the hunt's reductions
        self.shared = ReplayBudget(self.replays // 4, self.guard)

    def reduce(self, session: Session, failure: Failure, found: list[Failure]) -> Failure:
        from .causes import length_of
        from .reduce import reduce_failure

        share = self.shared.share(0.5)
        reduced = reduce_failure(session, failure, share)
        if (
            share.stopped
            and not self.guard.slow()  # the guard stops the whole budget as well
            and self.replays
            and all(length_of(reduced) < length_of(other) for other in found)
        ):
            return reduce_failure(session, failure, ReplayBudget(self.replays, self.guard))  # it would head the report
        return reduced


def unmasked(session: Session, run: Callable[[], Any]) -> Any:
    """``run()`` with the failures masked by --max-failures lifted (accepted
    deviations stay)."""
    masks = list(session.known_failures)
    session.known_failures.clear()
    try:
        return run()
    finally:
        session.known_failures[:] = masks
