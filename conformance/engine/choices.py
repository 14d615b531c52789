"""Drawing the exploration's raw values straight from Hypothesis's choices.

A step of the exploration needs a dozen or more small values: which action,
which operation's arguments, an index into a pool, a key pick, a clock move.
Drawn through nested strategies (``st.tuples``, ``st.one_of``,
``st.sampled_from``), each value costs Hypothesis a span, a validation and a
strategy lookup: about 30 us, which made generation cost more than the
implementation and the model together. Drawn as Hypothesis's own primitive
choices (``draw_integer``, ``draw_string``) inside one strategy per step,
each costs about a third of that. Hypothesis still records, replays, mutates
and shrinks every choice (integers towards their lower bound, strings
towards shorter and simpler), and the step as a whole stays one span
(``stateful.exploration_test``), which the shrinker deletes or keeps.

Every drawer here is a plain function ``drawer(data) -> value`` built once per
spec and parameter set, called with Hypothesis's ``ConjectureData``. Whatever
has no primitive (arguments drawn from a JSON Schema) is drawn through its
strategy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import strategies as st

from .hypothesis_support import string_intervals

__all__ = [
    "Drawer",
    "integers",
    "sampled",
    "either",
    "nested",
    "text",
    "permutation",
    "optional",
    "list_of",
    "tuple_of",
    "ABSENT",
]

Drawer = Callable[[Any], Any]

ABSENT = object()  # an optional argument not sent


def integers(low: int, high: int) -> Drawer:
    """An integer in [low, high]; it shrinks towards ``low``."""
    return lambda data: data.draw_integer(low, high)


def sampled(values: Sequence) -> Drawer:
    """One of ``values``; it shrinks towards the first."""
    values = tuple(values)
    if len(values) == 1:
        only = values[0]
        return lambda data: only
    last = len(values) - 1
    return lambda data: values[data.draw_integer(0, last)]


def either(*drawers: Drawer) -> Drawer:
    """One of several drawers, picked with equal odds; it shrinks towards the first."""
    if len(drawers) == 1:
        return drawers[0]
    last = len(drawers) - 1
    return lambda data: drawers[data.draw_integer(0, last)](data)


def nested(strategy) -> Drawer:
    """A value of a strategy that has no primitive (e.g. one built from a JSON Schema)."""
    _settle_emptiness(strategy)
    return lambda data: data.draw(strategy)


def _settle_emptiness(strategy) -> None:
    """Work out once whether a strategy (and the one a lazy strategy wraps)
    can draw anything, and pin the answer: Hypothesis asks before every
    draw, and its cached answer costs a failed attribute lookup each time.
    The same answer either way, so the draws are the same."""
    for each in (strategy, getattr(strategy, "wrapped_strategy", None)):
        if isinstance(each, st.SearchStrategy):
            each.force_is_empty = bool(each.is_empty)  # type: ignore[attr-defined]  # read by Hypothesis (force_<property>), undeclared


def text(alphabet: str, max_size: int) -> Drawer:
    """A string of up to ``max_size`` characters of ``alphabet`` (one choice)."""
    intervals = string_intervals(alphabet)
    if intervals is None:  # a Hypothesis without interval sets: the public strategy, nested
        return nested(st.text(alphabet, max_size=max_size))
    return lambda data: data.draw_string(intervals, min_size=0, max_size=max_size)


def permutation(data, n: int) -> list[int]:
    """A permutation of range(n) (Fisher-Yates); it shrinks towards the identity."""
    order = list(range(n))
    for i in range(n - 1):
        j = data.draw_integer(i, n - 1)
        order[i], order[j] = order[j], order[i]
    return order


def optional(drawer: Drawer) -> Drawer:
    """``ABSENT`` half of the time, else a value; it shrinks towards ``ABSENT``."""
    return lambda data: drawer(data) if data.draw_integer(0, 1) else ABSENT


def list_of(drawer: Drawer, min_size: int, max_size: int) -> Drawer:
    """A list of ``min_size`` to ``max_size`` values; it shrinks towards fewer."""
    return lambda data: [drawer(data) for _ in range(data.draw_integer(min_size, max_size))]


def tuple_of(drawers: Sequence[Drawer]) -> Drawer:
    drawers = tuple(drawers)
    return lambda data: tuple(drawer(data) for drawer in drawers)
