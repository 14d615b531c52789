"""A shorter face of a failure that turns on one of the spec's orderings.

A bug in an ordering shows wherever that ordering decides something. A task
table that breaks completion ties by id text instead of marking order drops
the wrong job when retention evicts: a failure that needs the thread filled
past its limit, 43 steps however it is reduced. The same rule also orders
the results a turn boundary injects, where two jobs ending at one instant
show it in 5 steps. The exploration may meet the long face first, and
replaying it smaller cannot turn one face into the other.

So when a reduced failure is long and turns on an ordering
(``attribution.orderings_in_play``), its steps are replayed cut short, a
prefix followed by one call of an operation that reads records in that
ordering (a ``for_each`` or ``collect`` with ``ordering:``), its required
arguments taken from the failing call's (then the latest step's) arguments
of the same name. The shortest such prefix is found by bisection, from all
steps but the failing one; when that call fails there, turning on the same
ordering, it is a shorter face of the same bug: it is reduced in turn and
reported as the failure's headline, the long face listed under it as a
symptom (engine/causes.py). Every replay counts against a budget of replays
(engine/budgets.py); a passing run never gets here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from statemachines.model import steps as S

from .budgets import ReplayBudget
from .causes import length_of
from .failures import Failure

if TYPE_CHECKING:
    from .session import Session

__all__ = ["LONG_ENOUGH", "readers_of", "shorter_face"]

# A failure of at most this many steps gets no search for a shorter face.
LONG_ENOUGH = 8


def readers_of(spec: Any, orderings: frozenset[str]) -> list[str]:
    """The operations (in the spec's order) with a step that goes through
    records in one of ``orderings``."""
    return [
        name
        for name, op in spec.operations.items()
        if any(
            isinstance(step, S.ForEach | S.Collect) and step.ordering in orderings for step in S.walk_steps(op.steps)
        )
    ]


def shorter_face(session: Session, failure: Failure, orderings: frozenset[str], budget: ReplayBudget) -> Failure | None:
    """A failure shorter than ``failure`` that turns on one of ``orderings``,
    reduced; None when no prefix of its steps followed by a reader of them
    fails that way within ``budget``."""
    from .reduce import reduce_failure, steps_of_trace

    steps = steps_of_trace(failure.steps or [])
    if len(steps) <= LONG_ENOUGH:
        return None
    offered = session.spec.offered_operations(session.params)  # a profile may leave some out
    for operation in (op for op in readers_of(session.spec, orderings) if op in offered):
        found = _shortest_prefix_failing(session, steps, operation, orderings, budget)
        if found is None:
            continue
        cut, face = found
        if cut >= len(steps) - 1:
            continue  # only where the failure itself shows: no shorter face
        reduced = reduce_failure(session, face, budget.share(1.0))
        if length_of(reduced) >= length_of(failure):
            continue
        reduced.message += (
            f"\n(a shorter face of the exploration's failure ({length_of(failure)} steps, listed under this "
            f"one): its first {cut} step(s), then {operation}, which reads the records in the same "
            f"ordering ({', '.join(sorted(orderings))}))"
        )
        return reduced
    return None


def _shortest_prefix_failing(
    session: Session, steps: list[dict], operation: str, orderings: frozenset[str], budget: ReplayBudget
) -> tuple[int, Failure] | None:
    """(cut, failure): the fewest of ``steps`` after which a call of
    ``operation`` fails on one of ``orderings``, by bisection from all but
    the failing step (one replay when even that does not fail); None when
    none is found within ``budget``."""
    from .attribution import orderings_in_play
    from .reduce import replay_or_none

    def fails(cut: int) -> Failure | None:
        call = _reading_call(session.spec, operation, steps[:cut], steps)
        if call is None or budget.spent_out():
            return None
        found = replay_or_none(session, [*steps[:cut], call], budget=budget)
        return found if found is not None and found.kind == "divergence" and found.operation == operation else None

    high = len(steps) - 1
    best = fails(high)
    if best is None:
        return None
    low = 0  # a cut known (or taken) not to fail
    while high - low > 1:  # a shorter prefix failing the same way is likely, not certain: bisect
        middle = (low + high) // 2
        found = fails(middle)
        if found is None:
            low = middle
        else:
            high, best = middle, found
    if not orderings_in_play(session, best) & orderings:
        return None  # another bug shows there: not this failure's face
    return high, best


def _reading_call(spec: Any, operation: str, prefix: list[dict], failure_steps: list[dict]) -> dict | None:
    """A call of ``operation`` with its required arguments from the failing
    call's arguments of the same name, else from the latest step that has
    one; None when one cannot be found."""
    required = spec.operations[operation].args_schema.get("required") or []
    sources = [_arguments_of(step) for step in (*failure_steps[-1:], *reversed(prefix))]
    args = {}
    for name in required:
        value = next((given[name] for given in sources if name in given), _MISSING)
        if value is _MISSING:
            return None
        args[name] = value
    return {"call": operation, "args": args}


_MISSING = object()


def _arguments_of(step: Any) -> dict:
    """The arguments of a step's call (the first call's, for a concurrent group)."""
    if not isinstance(step, dict):
        return {}
    if "concurrently" in step:
        calls = step["concurrently"]
        return _arguments_of(calls[0]) if calls else {}
    args = step.get("args")
    return args if isinstance(args, dict) else {}
