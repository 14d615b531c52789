"""How long shrinking and reduction may go on: counts, not seconds.

Hypothesis's shrinking is bounded by examples and the replay reduction
(engine/reduce.py) by replays, so for a given seed and implementation the
counterexample is the same on an idle and on a busy machine. Time is only a
guard against an implementation that is slow per call, and it ends the work
early (the failure's message then says so, and that a faster implementation
may get further) in two cases, never because the machine was busy with
something else:

- the calls into the implementation took more than ``SLOW_CALL_S`` each on
  average (an implementation slow at every call);
- the calls that took more than ``SLOW_CALL_S`` each took more than the
  guard's allowance in all (``CallGuard.allowance_s``: the profile's
  ``shrink_s`` for shrinking, once more for all of a run's reductions
  together). This is an implementation whose cost per call grows, e.g. with
  what it has kept (a queue that doubles at every retry): most of its calls
  stay fast, so their average never says so, while a few calls, each slower
  than the one before, would hold shrinking for hours.

A call's time is the wall time of one call into the implementation (a clock
move, a probe call, a concurrent group divided by its calls) together with
the kit's checking of its answer (``Session``, ``SlowCalls``): a huge answer
costs the kit as much as it cost the implementation. A machine two or three
times slower than usual leaves the calls of an implementation that answers
in milliseconds far below ``SLOW_CALL_S``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

__all__ = [
    "SLOW_CALL_S",
    "SLOW_CALLS_S",
    "REDUCE_REPLAYS",
    "MAX_FAILURES",
    "CallGuard",
    "SlowCalls",
    "ReplayBudget",
]

# Seconds per call into the implementation above which it counts as slow: a
# process per call on a loaded machine takes a few tenths of a second.
SLOW_CALL_S = 1.0
# Calls to see before judging the average: the first include starting the implementation.
_GUARD_MIN_CALLS = 20
# Seconds the calls slower than SLOW_CALL_S may take in all before the guard ends the
# work, unless said otherwise (the profile's shrink_s: engine/stateful.py, engine/runner.py).
SLOW_CALLS_S = 60.0

# Replays a failure's reduction may spend, per exploration profile.
REDUCE_REPLAYS = {"quick": 300, "ci": 1000, "deep": 4000}

# Distinct exploration failures `conformance run` and the pytest plugin look for by
# default (--max-failures): one bug's shortest symptom may be the second found.
MAX_FAILURES = 3


@dataclass
class SlowCalls:
    """The calls into the implementation that took more than ``limit_s``
    each, with the kit's checking of their answers: how many, and their
    seconds in all. A session counts them as it goes (``Session.slow_calls``);
    a guard reads how many more there are since it started watching."""

    limit_s: float = SLOW_CALL_S
    calls: int = 0
    seconds: float = 0.0

    def record(self, calls: int, seconds: float) -> None:
        """``calls`` calls made together (a concurrent group: one) took ``seconds``."""
        if calls > 0 and seconds > self.limit_s * calls:
            self.calls += calls
            self.seconds += seconds

    def now(self) -> tuple[int, float]:
        """(slow calls, their seconds) so far: ``since`` subtracts one from another."""
        return self.calls, self.seconds

    @staticmethod
    def since(now: tuple[int, float], then: tuple[int, float]) -> tuple[int, float]:
        return now[0] - then[0], now[1] - then[1]


@dataclass
class CallGuard:
    """Wall time per call into the implementation, over the calls it is told
    of; ``slow()`` once they averaged over ``limit_s`` each, or once the calls
    slower than ``limit_s`` each took more than ``allowance_s`` in all."""

    limit_s: float = SLOW_CALL_S
    calls: int = 0
    seconds: float = 0.0
    allowance_s: float = SLOW_CALLS_S
    slow_calls: int = 0  # the calls that took over limit_s each (SlowCalls)...
    slow_seconds: float = 0.0  # ...and their seconds in all

    def add(self, calls: int, seconds: float, slow: tuple[int, float] = (0, 0.0)) -> None:
        """``calls`` calls took ``seconds``; ``slow``: (how many of them were slow, their seconds)."""
        self.calls += calls
        self.seconds += seconds
        self.slow_calls += slow[0]
        self.slow_seconds += slow[1]

    def per_call(self) -> float:
        return self.seconds / self.calls if self.calls else 0.0

    def slow_on_average(self) -> bool:
        return self.calls >= _GUARD_MIN_CALLS and self.per_call() > self.limit_s

    def slow_too_long(self) -> bool:
        return self.slow_calls > 0 and self.slow_seconds > self.allowance_s

    def slow(self) -> bool:
        return self.slow_on_average() or self.slow_too_long()

    def why(self) -> str:
        if self.slow_on_average():
            return f"the implementation took {self.per_call():.2f} s per call, over the {self.limit_s:g} s guard"
        return (
            f"{self.slow_calls} call(s) into the implementation took over the {self.limit_s:g} s guard each "
            f"(with the kit's checking of their answers), {self.slow_seconds:.1f} s in all, over the "
            f"{self.allowance_s:g} s the guard allows them: the implementation's cost per call grew"
        )


@dataclass
class ReplayBudget:
    """Replays a reduction may spend. One budget may be shared by several
    reductions (the failures found after the first share one): each spends
    from what the others left. ``share(fraction)`` gives a reduction part of
    what is left, counted against this budget too. A run gives every budget
    of its reductions one guard (engine/runner.py), so that slow calls end
    them all once they took the guard's allowance."""

    replays: int
    guard: CallGuard = field(default_factory=CallGuard)
    spent: int = 0
    parent: ReplayBudget | None = None
    stopped: str | None = None  # why a reduction on this budget stopped early (engine/reduce.py)
    # A reduction on this budget found that its failure's steps, replayed, did not fail again
    # (a race won by luck, an implementation that behaves nondeterministically): nothing was reduced.
    unreplayed: bool = False

    def left(self) -> int:
        return max(0, self.replays - self.spent)

    def spent_out(self) -> bool:
        return self.left() <= 0 or self.guard.slow() or (self.parent is not None and self.parent.spent_out())

    def replayed(self, calls: int, started: float, slow: tuple[int, float] = (0, 0.0)) -> None:
        """One replay done: ``calls`` calls since ``started`` (perf_counter),
        ``slow`` of them slow (``SlowCalls.since``: how many, their seconds)."""
        self.guard.add(calls, time.perf_counter() - started, slow)  # one guard for a budget and its shares
        budget: ReplayBudget | None = self
        while budget is not None:
            budget.spent += 1
            budget = budget.parent

    def share(self, fraction: float) -> ReplayBudget:
        """A budget of ``fraction`` of what is left here (at least one replay),
        whose replays count here too."""
        return ReplayBudget(max(1, int(self.left() * fraction)), guard=self.guard, parent=self)

    def stop_reason(self) -> str | None:
        """Why replays stopped (None while they may go on)."""
        if self.guard.slow():
            return f"reduction stopped after {self.spent} replays: {self.guard.why()}"
        if self.spent_out():
            return f"reduction stopped at its budget of {self.replays} replays, so a step may still be removable"
        return None
