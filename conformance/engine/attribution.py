"""Which rule of the spec a failure turns on: the orderings whose decisions
placed the records it differs on.

Two failures of one bug need not look alike. A task table that fires due
bodies in start order instead of time order shows it as a drain in the wrong
order, and elsewhere as a job still running beside one that ended at the same
instant; replaying one never first fails as the other. In the spec's terms
they have one cause: the ordering ``body_order`` decided the order of the
records each one differs on, and one fix (follow that ordering) explains both.

``orderings_in_play`` replays a failure's steps with the model noting each
decision an ordering made while its state changed (``Coverage.record_orders``:
bodies returning in one clock move, an eviction choosing whom to drop, a
queue taking its order; a read that only lists records decides nothing). The
failure turns on an ordering when it shows one of those decisions going the
other way (``evidence``): two of the records it ordered out of place in a
list; one of them missing where another is extra (the policy kept the other);
or one of them with the value of a field the model gave the other (the other
ended first). A record merely present in both a decision and a failure is
no evidence. ``engine/causes.py`` joins failures turning on a common
ordering.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ..errors import AdapterLoadError
from .failures import Failure

__all__ = ["orderings_in_play", "evidence"]

_PART = re.compile(r"([^.\[\]]+)|\[([0-9]{1,18})\]")  # ASCII indexes: int() never fails


def orderings_in_play(session: Any, failure: Failure) -> frozenset[str]:
    """The orderings whose decisions ``failure`` shows going another way,
    found by replaying its steps (masks lifted) with the model noting its
    orderings' decisions; empty when the replay does not fail as it did."""
    from statemachines.model.model import Coverage

    from .reduce import replay_steps, steps_of_trace

    model = session.model
    counted, model.coverage = model.coverage, Coverage().record_orders()
    masks = list(session.known_failures)
    session.known_failures.clear()
    try:
        replayed = replay_steps(session, steps_of_trace(failure.steps or []))
        decisions = list(model.coverage.orders or [])
    except AdapterLoadError:
        return frozenset()
    finally:
        model.coverage = counted
        session.known_failures[:] = masks
    if replayed is None or (replayed.operation, replayed.path) != (failure.operation, failure.path):
        return frozenset()
    shows = evidence(replayed, _observed_at_failure(session), session.spec.entity.key)
    return frozenset(ordering for ordering, ordered in decisions if shows(ordered))


def _observed_at_failure(session: Any) -> Any:
    """The whole answer of the replay's failing step (None for a concurrent one)."""
    last = session.trace[-1] if session.trace else {}
    return last.get("observed") if isinstance(last, dict) else None


def evidence(failure: Failure, answer: Any, key: str) -> Callable[[frozenset], bool]:
    """Whether a decision that ordered the records of these keys shows in the
    failure as having gone another way: two of them out of place in a list;
    one missing where another is extra (a policy kept the other one); or the
    record holding the differing field beside one of them that has, in the
    same answer, the value this one was expected to have."""
    expected, observed = _list_keys(failure.expected, key), _list_keys(failure.observed, key)
    if expected is not None and observed is not None:
        out_of_place = _out_of_place(expected, observed)
        missing, extra = set(expected) - set(observed), set(observed) - set(expected)
        return lambda ordered: len(out_of_place & ordered) >= 2 or bool(missing & ordered and extra & ordered)
    holder, siblings = _record_holding(answer, failure.path or "", key)
    if holder is None:
        return lambda ordered: False
    field = (failure.path or "").rsplit(".", 1)[-1]
    took = {
        s[key] for s in siblings if s.get(key) not in (None, holder) and field in s and s[field] == failure.expected
    }
    return lambda ordered: holder in ordered and bool(took & ordered)


def _out_of_place(expected: list, observed: list) -> set:
    """Keys both lists hold that they hold in another order."""
    common = set(expected) & set(observed)
    mine, theirs = [k for k in expected if k in common], [k for k in observed if k in common]
    return {a for a, b in zip(mine, theirs) if a != b} | {b for a, b in zip(mine, theirs) if a != b}


def _list_keys(value: Any, key: str) -> list | None:
    """The keys of a list of records, or the list itself when it lists keys
    (a turn boundary's injected job ids); None for anything else."""
    if not isinstance(value, list):
        return None
    if all(isinstance(item, str | int) and not isinstance(item, bool) for item in value):
        return list(value)
    if not all(isinstance(item, dict) and key in item for item in value):
        return None
    return [item[key] for item in value]


def _record_holding(answer: Any, path: str, key: str) -> tuple[Any, list]:
    """The key of the innermost record on ``path`` in ``answer`` (None if
    none), and the records of the list holding it (its siblings)."""
    node, holder, siblings = answer, None, []
    for name, index in _PART.findall(path):
        if isinstance(node, dict) and isinstance(node.get(key), (str, int)):
            holder = node[key]
        if name and isinstance(node, dict):
            node = node.get(name)
        elif index and isinstance(node, list) and int(index) < len(node):
            siblings = [item for item in node if isinstance(item, dict)]
            node = node[int(index)]
        else:
            break
    if isinstance(node, dict) and isinstance(node.get(key), (str, int)):
        holder = node[key]
    return holder, siblings
