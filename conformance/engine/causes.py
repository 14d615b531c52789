"""Which of an exploration's failures share a cause, and the order they are
reported in.

The exploration hunts for distinct failures (``--max-failures``): after the
first, it goes on with the failures found masked. One bug often shows as
several signatures (kind, operation, path): a tie broken the wrong way first
shows as a list in the wrong order, and later as the wrong job evicted. The
kit treats two failures as one cause when it has shown it: while the replay
reduction shortened one failure's steps, a shorter part of them ended in the
other failure. The failures are then one, headed by the shortest, with the
others listed under it as its symptoms (each keeps its own counterexample).

Failures and causes are ordered by the length of their counterexample,
shortest first: the headline is always the shortest counterexample.
"""

from __future__ import annotations

from .failures import Failure, same_bug, signature

__all__ = ["length_of", "group_by_cause", "cause_note"]


def length_of(failure: Failure) -> int:
    """Steps of a failure's counterexample, as its file counts them."""
    from .reduce import steps_of_trace

    return len(steps_of_trace(failure.steps or []))


def _shown_together(head: Failure, other: Failure, met: dict[int, set[tuple]]) -> bool:
    """Whether the reduction of one of the two met the other's signature."""
    return any(same_bug(seen, signature(other)) for seen in met.get(id(head), ())) or any(
        same_bug(seen, signature(head)) for seen in met.get(id(other), ())
    )


def group_by_cause(failures: list[Failure], met: dict[int, set[tuple]]) -> list[Failure]:
    """The causes among ``failures``, shortest first, each the shortest
    failure of its cause with the longer ones in its ``symptoms`` (shortest
    first). ``met`` maps a failure (``id()``) to the signatures of other
    failures its reduction's candidates ended in (``reduce_failure(others=...)``).
    Shown together is transitive: a failure that met one that met a third
    joins the third's cause too."""
    ordered = sorted(failures, key=length_of)  # stable: equal lengths keep the order found
    cause = list(range(len(ordered)))  # union-find over positions in ``ordered``

    def root(i: int) -> int:
        while cause[i] != i:
            cause[i] = cause[cause[i]]
            i = cause[i]
        return i

    for i, one in enumerate(ordered):
        for j in range(i):
            if _shown_together(ordered[j], one, met):
                a, b = root(i), root(j)
                cause[max(a, b)] = min(a, b)  # the shorter heads
    heads: list[Failure] = []
    for i, failure in enumerate(ordered):
        if root(i) == i:
            heads.append(failure)
        else:
            ordered[root(i)].symptoms.append(failure)
    for head in heads:
        if head.symptoms:
            head.message += "\n" + cause_note(head)
    return heads


def cause_note(head: Failure) -> str:
    """The line a failure's message gets when others share its cause."""
    shown = "; ".join(
        f"{s.kind} at {s.operation or '-'} {s.path or ''}".rstrip() + f" ({length_of(s)} steps)" for s in head.symptoms
    )
    return (
        f"(the same cause also showed as {len(head.symptoms)} longer failure(s), listed under this one as "
        f"symptoms: {shown}; a shorter part of their steps ended in this failure, or the reverse)"
    )
