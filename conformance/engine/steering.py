"""Steering the exploration toward what it has reached least.

Each choice below is off by default but two (``SteeringChoices``: measured
on the shipped mutants, only races on contested records and fresh examples
helped);
``benchmarks/seed_kills.py --ablation`` measures them again.

Every value of a step stays a Hypothesis choice, so a failing example is
replayed, shrunk and stored as before. What steers is how those choices are
read, and only in ways that never change which choices a step makes next
(Hypothesis checks that a replayed prefix draws the same kinds of choices):

- **Swarm testing** (``Swarm``): each example first draws which kinds of
  action it leaves out (an operation, a batch, a concurrent group, clock
  moves), each one with odds of one in three, and a step whose drawn action
  is left out takes the next kept one in the weighted list instead. An
  example without some operations goes deeper with the others (a record
  left alone long enough to time out, a thread filled to its retention
  limit with nothing cancelled). The choice shrinks to "leave nothing out".
- **Rare records first** (``Steering.rarest``): part of the key draws
  (``Explorer._resolve``) take the record whose latest transition (or, with
  none yet, its state) the run has taken least, instead of any record.
- **Rare examples kept** (``Steering.score``): each example tells Hypothesis
  (``hypothesis.target``) how many pairs and triples (``engine/pairs.py``)
  it reached that earlier examples reached rarely; Hypothesis then mutates
  the examples that scored highest.
- **Fresh examples** (on; ``hypothesis_support.fresh_examples_only``):
  Hypothesis's generation runs no near copies of an example (one step
  written over another), so every example of the budget is drawn afresh.
- **Races on contested records** (on; ``Explorer.contested``): three racing
  groups in four move onto a live record that each of their calls, made
  alone on a copy of the model, would change; the fourth keeps the drawn
  record. It reads the model's state as it is, no counts, so it needs no
  snapshot and splits nothing between ``--workers`` parts.

The counts steering reads are a snapshot taken as each example starts, so a
step reads them the same way for its whole example, and they are frozen at
the first failure: every example Hypothesis runs to shrink it reads its
choices as the failing example did. The snapshot depends only on the
examples run before (the seed's choices and the implementation's answers),
so the same seed gives the same run. Each ``--workers N`` part explores with
its own seed and steers by its own counts (the steering state is split, not
shared: sharing would make a part's examples depend on the others' timing).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Swarm", "Steering", "SteeringChoices", "CHOICES", "RARE_PICK"]


@dataclass
class SteeringChoices:
    """Which steering an exploration uses. The first three are off by default: measured
    on the shipped mutants (benchmarks/seed_kills.py --ablation, 2026-11-26,
    12 mutants x seeds 1-5 at the ci profile) every one of them killed fewer
    (seed, mutant) pairs than the exploration without steering (none: 59 of
    60; all three: 53; without swarm: 55; without rare keys: 49; without
    target: 51; rare keys alone: 56); the losses were the race mutants,
    whose check-then-act windows need the concurrent groups that swarm
    testing leaves out of a third of the examples. Swarm testing that never
    leaves them out (as now) still lost: 56 of 60 against 59 without it
    (2026-11-27: kill_check_then_act and queue_lost_update need operations
    beside the race, list_not_acknowledging a sequence of one operation).
    ``benchmarks/seed_kills.py --ablation`` measures them again; switching one
    on is a one-line change here once it helps.

    ``contested_races`` is on: three racing groups in four move onto a
    record each of their calls would change (``Explorer.contested``). On
    24 mutants (the race mutants and issue 36's classes) at seeds 1-5 it
    killed 117-119 of 120 (seed, mutant) pairs in three runs, against
    116-117 in two runs without it (2026-11-27; race kills vary with
    thread scheduling; progress_writes_back_stale_task at seed 1 was
    killed in every run with it and missed in every run without), in
    50-54 s against 65-74 s; the steps per second of a passing run stayed
    within the noise.

    ``fresh_examples`` is on: every example is drawn afresh, without
    Hypothesis's generation-time mutator
    (``hypothesis_support.fresh_examples_only``), which ran up to six near
    copies of each new example (one step written over another), so that a
    run of 100 examples held about 15 independent draws: at seed 3, of
    task-progress's 43 derived races the most drawn came up in 28 of the
    100 examples and queue_message's in none. On every in-process mutant at
    seeds 1-5 (92 x 5, kills only, 2026-11-28) the exploration with fresh
    examples killed 460 of 460 (mutant, seed) pairs, against 457 with the
    mutator (task-progress queue_lost_update at seeds 3 and 4, job-manager
    list_not_acknowledging at seed 1, the same misses as the seed gate's);
    on the 12 mutants of seed_kills.py's subset it took 1 min 40 s
    against 2 min 5 s with the mutator, measured back to back."""

    swarm: bool = False
    rare_keys: bool = False
    target: bool = False
    contested_races: bool = True
    fresh_examples: bool = True


CHOICES = SteeringChoices()  # read as each exploration's Explorer is built

# A key draw's ``pick`` (0-255) at or above this takes the rarest record;
# below it, any record as before. Shrinking goes towards 0, so a shrunk
# example picks records by position.
RARE_PICK = 192
_LEAVE_OUT_ONE_IN = 3  # each kind of action is left out of an example with odds of 1 in 3


class Swarm:
    """Which kinds of action an example leaves out, read against the
    weighted action list: ``kept(index)`` is the slot a drawn index becomes."""

    def __init__(self, labels: Sequence[Any], enabled: bool = True, always: frozenset = frozenset()):
        self.labels = list(labels)
        # each kind once, in list order (none: swarm testing switched off, nothing drawn);
        # the kinds in ``always`` are never left out
        self.kinds = [kind for kind in dict.fromkeys(self.labels) if kind not in always] if enabled else []
        self.left_out: frozenset = frozenset()

    def draw(self, data) -> None:
        """Draw this example's kinds left out (one choice per kind, each
        shrinking towards "kept"); never all of them."""
        if len(self.kinds) < 2:
            self.left_out = frozenset()
            return
        out = frozenset(kind for kind in self.kinds if data.draw_integer(0, _LEAVE_OUT_ONE_IN - 1) == 1)
        self.left_out = frozenset() if len(out) == len(self.kinds) else out

    def kept(self, index: int) -> int:
        """The slot a drawn index stands for: itself when its kind is kept,
        else the next slot (cyclically) whose kind is."""
        if not self.left_out:
            return index
        labels, n = self.labels, len(self.labels)
        for offset in range(n):
            slot = (index + offset) % n
            if labels[slot] not in self.left_out:
                return slot
        return index


class Steering:
    """The counts the exploration steers by: a snapshot of the model's
    coverage as each example starts, frozen at the first failure."""

    def __init__(self, choices: SteeringChoices | None = None) -> None:
        self.choices = choices or SteeringChoices()
        self.frozen = False
        self.transitions: dict[str, int] = {}
        self.states: dict[str, int] = {}
        self.rare: dict[str, dict[str, int]] = {"pairs": {}, "triples": {}}

    def begin_example(self, coverage) -> None:
        """Take the snapshot this example reads (none while frozen)."""
        if self.frozen or coverage is None or not (self.choices.rare_keys or self.choices.target):
            return
        counts = coverage.counts
        self.transitions = dict(counts["transitions"])
        self.states = dict(counts["states"])
        self.rare = {"pairs": dict(counts["pairs"]), "triples": dict(counts["triples"])}

    def freeze(self) -> None:
        self.frozen = True

    def rarity(self, key: Any, model) -> int:
        """How often the run had taken this record's latest transition (its
        state, before it took any) when the example started."""
        last = model.coverage.last.get(key)
        if last is not None:
            return self.transitions.get(last, 0)
        record = model.store.records.get(key)
        return self.states.get(record[model.field], 0) if record is not None else 0

    def rarest(self, keys: Sequence[Any], model) -> Any:
        """The key whose record's recent history is rarest (the first such)."""
        return min(keys, key=lambda key: self.rarity(key, model))

    def score(self, coverage) -> float:
        """What this example reached that earlier ones reached rarely: per
        pair and triple it reached, 1 / (1 + the times reached before)."""
        total = 0.0
        for category, before in self.rare.items():
            for name, n in coverage.counts[category].items():
                seen = before.get(name, 0)
                if n > seen:
                    total += 1.0 / (1 + seen)
        return total
