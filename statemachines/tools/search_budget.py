"""What one search of a spec's states may spend (``check-spec``, ``lint``,
``diff``), whatever scope the spec declares (docs/trust-model.md).

A spec's ``check.scope`` says how much to explore, but a spec is a file
someone sent: its scope cannot raise the kit's own ceilings (``CEILINGS``:
pool sizes, depth, records, states), only the user can, by naming a bound on
the command line. And whatever the scope, a search stops when its command's
budget runs out: its time, the memory it has grown by, or the cost of the
expressions it evaluated (``statemachines.language.expressions.RunCost``).
The budget is checked at every move, inside the expansion of a single state
too (one state of a wide scope has millions of moves), and a search that
goes on for more than a few seconds says how far it is, through
``progress``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..language.expressions import run_cost_spent

__all__ = ["CEILINGS", "DEFAULT_MEMORY_MIB", "PROGRESS_EVERY_S", "SearchBudget", "ceiling_note"]

# The most a spec's check.scope may ask for; a command-line option asks for more.
CEILINGS = {
    "max_depth": 10,
    "max_records": 6,
    "max_states": 200_000,
    "values": 32,  # values of one pool, one argument (check.scope.args), advance_ms, unknown_keys, generated
}
DEFAULT_MEMORY_MIB = 2048  # how much a search may grow the kit's memory (its peak resident size)
PROGRESS_EVERY_S = 5.0
_MEMORY_EVERY = 1024  # moves between two readings of the process's peak memory


def ceiling_note(name: str, asked: int, option: str) -> str:
    """What a scope over the kit's ceiling is told."""
    return (
        f"check.scope.{name} {asked:,} is over the kit's ceiling of {CEILINGS[name]:,} for a received spec; "
        f"searched with {CEILINGS[name]:,} (name a larger bound yourself with {option})"
    )


def _peak_mib() -> float | None:
    try:
        import resource
    except ImportError:  # pragma: no cover - not on POSIX
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


@dataclass
class SearchBudget:
    """The time, memory and expression cost one search may spend, and the
    progress line it owes. ``spent`` says what ran out (None: nothing)."""

    time_limit_s: float | None = None
    memory_mib: float = DEFAULT_MEMORY_MIB
    max_moves: int | None = None  # a bound in moves, the same on every machine (a search inside a run)
    progress: Callable[[str], None] | None = None
    progress_every_s: float = PROGRESS_EVERY_S
    started: float = field(default_factory=time.perf_counter)
    spent: str | None = None
    _moves: int = 0
    _next_progress: float = 0.0
    _memory_base: float | None = None

    def __post_init__(self) -> None:
        self._next_progress = self.started + self.progress_every_s
        self._memory_base = _peak_mib()

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.started

    def over(self, states: int, depth: int) -> bool:
        """Whether the budget is spent, checked after each move (``states``
        found so far, at ``depth``); prints the progress line when due."""
        if self.spent is not None:
            return True
        self._moves += 1
        now = time.perf_counter()
        if self.time_limit_s is not None and now - self.started > self.time_limit_s:
            self.spent = f"its time limit of {self.time_limit_s:g} s"
        elif self.max_moves is not None and self._moves > self.max_moves:
            self.spent = f"its {self.max_moves:,} moves"
        elif run_cost_spent() is not None:
            self.spent = f"the expression cost budget of the command ({run_cost_spent()})"
        elif self._moves % _MEMORY_EVERY == 0 and self._grown_too_much():
            self.spent = f"its memory budget of {self.memory_mib:,.0f} MiB"
        if self.progress is not None and now >= self._next_progress:
            self._next_progress = now + self.progress_every_s
            self.progress(f"{states:,} states, {self._moves:,} moves, depth {depth}, {now - self.started:.0f} s")
        return self.spent is not None

    def _grown_too_much(self) -> bool:
        peak = _peak_mib()
        return peak is not None and self._memory_base is not None and peak - self._memory_base > self.memory_mib
