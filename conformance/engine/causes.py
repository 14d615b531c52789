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
    """Whether one of the two was shown to first fail as the other."""
    return any(same_bug(seen, signature(other)) for seen in met.get(id(head), ())) or any(
        same_bug(seen, signature(head)) for seen in met.get(id(other), ())
    )


def group_by_cause(failures: list[Failure], met: dict[int, set[tuple]]) -> list[Failure]:
    """The causes among ``failures``, shortest first, each the shortest
    failure of its cause with the longer ones in its ``symptoms`` (shortest
    first). ``met`` maps a failure (``id()``) to the signatures of the
    failures it was shown to first fail as. Shown together is transitive: a
    symptom of a symptom joins the same cause."""
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
        f"symptoms: {shown}; their steps, replayed with this failure no longer accepted, first fail as this one)"
    )
