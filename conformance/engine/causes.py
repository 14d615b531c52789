"""Which of an exploration's failures share a cause, and the order they are
reported in.

The exploration hunts for distinct failures (``--max-failures``): after the
first, it goes on with the failures found masked. A masked bug leaves the
implementation's state apart from the model's, so later answers differ too:
such a failure is a symptom of the cause found before it. The kit treats a
failure as a symptom when it has shown it: the failure's reduced steps,
replayed with the masks lifted, first fail as the earlier failure. The two
are then one failure, headed by the shortest, with the others listed under
it as its symptoms (each keeps its own counterexample file). Two failures of
which each shows first as itself are two causes, even when one trace holds
both: the kit cannot tell two bugs from one there, and says nothing it did
not show.

Two differences in one answer (the same steps, failing at the same step) are
one failure as well: they are one observation.

One fix in the spec's terms may explain two failures where no replay shows
one as the other: both turn on one ordering of the spec (each differs on
records whose order that ordering decided while the model's state changed,
``engine/attribution.py``). Those are one failure too, and the note under
the headline names the ordering.

Failures and causes are ordered by the length of their counterexample,
shortest first: the headline is always the shortest counterexample.
"""

from __future__ import annotations

import json

from .failures import Failure, same_bug, signature

__all__ = ["length_of", "group_by_cause", "cause_note"]


def length_of(failure: Failure) -> int:
    """Steps of a failure's counterexample, as its file counts them."""
    from .reduce import steps_of_trace

    return len(steps_of_trace(failure.steps or []))


def _shown_together(head: Failure, other: Failure, met: dict[int, set[tuple]]) -> bool:
    """Whether one of the two was shown to first fail as the other."""
    return any(same_bug(seen, signature(other)) for seen in met.get(id(head), ())) or any(
        same_bug(seen, signature(head)) for seen in met.get(id(other), ())
    )


def _inputs(failure: Failure) -> str:
    """A failure's steps as calls and clock moves only (no answers, no ids chosen)."""
    from .reduce import steps_of_trace, without_choices

    return json.dumps(
        without_choices(steps_of_trace(failure.steps or [])),
        sort_keys=True,
        default=str,
    )


def _one_answer(head: Failure, other: Failure) -> bool:
    """Whether both are differences in one answer: the same steps, failing at the same step's call."""
    if head.step is None or not head.steps or (head.step, head.operation) != (other.step, other.operation):
        return False  # a probe after the step is another answer than the step's own
    return _inputs(head) == _inputs(other)


def _one_rule(head: Failure, other: Failure, terms: dict[int, frozenset[str]]) -> frozenset[str]:
    """The orderings both failures turn on (empty: none in common)."""
    return terms.get(id(head), frozenset()) & terms.get(id(other), frozenset())


def group_by_cause(
    failures: list[Failure], met: dict[int, set[tuple]], terms: dict[int, frozenset[str]] | None = None
) -> list[Failure]:
    """The causes among ``failures``, shortest first, each the shortest
    failure of its cause with the longer ones in its ``symptoms`` (shortest
    first). ``met`` maps a failure (``id()``) to the signatures of the
    failures it was shown to first fail as; ``terms``, to the orderings it
    turns on (``attribution.orderings_in_play``). Shown together, or turning
    on one ordering, joins two failures; it is transitive: a symptom of a
    symptom joins the same cause."""
    terms = terms or {}
    why: dict[int, set[str]] = {}  # per head position: why others joined it (cause_note)
    ordered = sorted(failures, key=length_of)  # stable: equal lengths keep the order found
    cause = list(range(len(ordered)))  # union-find over positions in ``ordered``

    def root(i: int) -> int:
        while cause[i] != i:
            cause[i] = cause[cause[i]]
            i = cause[i]
        return i

    for i, one in enumerate(ordered):
        for j in range(i):
            reasons = _joined_because(ordered[j], one, met, terms)
            if reasons:
                a, b = sorted((root(i), root(j)))
                cause[b] = a  # the shorter heads
                joined = why.pop(b, set()) if b != a else set()
                why.setdefault(a, set()).update(reasons, joined)
    heads: list[Failure] = []
    for i, failure in enumerate(ordered):
        if root(i) == i:
            heads.append(failure)
        else:
            ordered[root(i)].symptoms.append(failure)
    for i, head in enumerate(ordered):
        if root(i) == i and head.symptoms:
            head.message += "\n" + cause_note(head, sorted(why.get(i, ())))
    return heads


def _joined_because(
    head: Failure, other: Failure, met: dict[int, set[tuple]], terms: dict[int, frozenset[str]]
) -> set[str]:
    """Why two failures are one cause, in words (empty: they are not shown to be)."""
    reasons = {
        f"each differs on records whose order the spec's ordering `{name}` decided (one fix, following it, "
        f"explains both)"
        for name in _one_rule(head, other, terms)
    }
    if _shown_together(head, other, met):
        reasons.add("its steps, replayed with the other no longer accepted, first fail as the other")
    if _one_answer(head, other):
        reasons.add("both are differences in one answer to the same steps")
    return reasons


def cause_note(head: Failure, reasons: list[str] | None = None) -> str:
    """The line a failure's message gets when others share its cause
    (``reasons``: why they were joined, ``_joined_because``)."""
    shown = "; ".join(
        f"{s.kind} at {s.operation or '-'} {s.path or ''}".rstrip() + f" ({length_of(s)} steps)" for s in head.symptoms
    )
    why = "; ".join(reasons or ["their steps, replayed with this failure no longer accepted, first fail as this one"])
    return (
        f"(the same cause also showed as {len(head.symptoms)} longer failure(s), listed under this one as "
        f"symptoms: {shown}. Why one cause: {why})"
    )
