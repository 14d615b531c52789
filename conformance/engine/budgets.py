"""How long shrinking and reduction may go on: counts, not seconds.

Hypothesis's shrinking is bounded by examples and the replay reduction
(engine/reduce.py) by replays, so for a given seed and implementation the
counterexample is the same on an idle and on a busy machine. Time is only a
guard against an implementation that is slow per call: it ends the work
early only when the calls into the implementation took more than
``SLOW_CALL_S`` each on average (and the failure's message says so), never
because the machine was busy with something else.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

__all__ = ["SLOW_CALL_S", "REDUCE_REPLAYS", "MAX_FAILURES", "CallGuard", "ReplayBudget"]

# Seconds per call into the implementation above which it counts as slow: a
# process per call on a loaded machine takes a few tenths of a second.
SLOW_CALL_S = 1.0
# Calls to see before judging: the first include starting the implementation.
_GUARD_MIN_CALLS = 20

# Replays a failure's reduction may spend, per exploration profile.
REDUCE_REPLAYS = {"quick": 300, "ci": 1000, "deep": 4000}

# Distinct exploration failures `conformance run` and the pytest plugin look for by
# default (--max-failures): one bug's shortest symptom may be the second found.
MAX_FAILURES = 3


@dataclass
class CallGuard:
    """Wall time per call into the implementation, over the calls it is told
    of; ``slow()`` once they averaged over ``limit_s`` each."""

    limit_s: float = SLOW_CALL_S
    calls: int = 0
    seconds: float = 0.0

    def add(self, calls: int, seconds: float) -> None:
        self.calls += calls
        self.seconds += seconds

    def per_call(self) -> float:
        return self.seconds / self.calls if self.calls else 0.0

    def slow(self) -> bool:
        return self.calls >= _GUARD_MIN_CALLS and self.per_call() > self.limit_s

    def why(self) -> str:
        return f"the implementation took {self.per_call():.2f} s per call, over the {self.limit_s:g} s guard"


@dataclass
class ReplayBudget:
    """Replays a reduction may spend. One budget may be shared by several
    reductions (the failures found after the first share one): each spends
    from what the others left. ``share(fraction)`` gives a reduction part of
    what is left, counted against this budget too."""

    replays: int
    guard: CallGuard = field(default_factory=CallGuard)
    spent: int = 0
    parent: ReplayBudget | None = None
    stopped: str | None = None  # why a reduction on this budget stopped early (engine/reduce.py)

    def left(self) -> int:
        return max(0, self.replays - self.spent)

    def spent_out(self) -> bool:
        return self.left() <= 0 or self.guard.slow() or (self.parent is not None and self.parent.spent_out())

    def replayed(self, calls: int, started: float) -> None:
        """One replay done: ``calls`` calls since ``started`` (perf_counter)."""
        self.guard.add(calls, time.perf_counter() - started)  # one guard for a budget and its shares
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
