"""The record every shipped mutant is described by."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from conformance.adapters.adapter import Adapter

__all__ = ["Mutant"]


@dataclass(frozen=True)
class Mutant:
    """A faulty variant of a reference implementation: one realistic bug."""

    name: str
    description: str  # one sentence: the bug
    factory: Callable[..., Adapter]  # (**adapter options) -> Adapter
    # Steps of the shortest counterexample that shows the bug, counted as a
    # counterexample file counts them (calls, clock moves, concurrent groups,
    # and the state probes the exploration runs after a group). The kit's
    # reduced counterexample must stay within 1.5 times this (tests/test_mutants.py).
    shortest: int | None = None
