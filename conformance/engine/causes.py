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
the headline names the ordering. So are two operations that run the same
steps of the spec (a YAML alias: async-command's ``run_cancel_command``
"must act like" ``cancel_job``) when their answers differ at the same path
the same way: one rule of the spec, broken once. And so are a race (calls
at once that match no sequential order) and a divergence when the order that
came closest to the race's answers first differs at the divergence's
operation, at its path, the same way: one bug, seen once alone and once in a
race.

The parts of one exploration (``--workers``, shards) each group their own
failures; ``join_parts`` joins the parts' lists by the rules that need no
replay: the same failure found by two parts, a failure one part found as
another's symptom, one answer, the same steps, a race's closest order.

Failures and causes are ordered by the length of their counterexample,
shortest first: the headline is always the shortest counterexample.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .failures import Failure, same_bug, signature

__all__ = ["length_of", "group_by_cause", "cause_note", "steps_by_operation", "join_parts"]

# The line a failure's message gets when others share its cause (cause_note).
_NOTE_START = "\n(the same cause also showed as "
# The hunt's note on a failure it found past others (hunt.py); "distinct" no
# longer holds once the failure is joined to another as one cause.
_DISTINCT_NOTE = re.compile(
    r"\n\(a distinct failure, (found with seed \S+ while the exploration accepted the )\d+ (failure\(s\) found before it)\)"
)


def length_of(failure: Failure | dict) -> int:
    """Steps of a failure's counterexample, as its file counts them."""
    from .reduce import steps_of_trace

    return len(steps_of_trace(_field(failure, "steps") or []))


def _field(failure: Failure | dict, name: str) -> Any:
    """A field of a failure, or of a failure as a report lists it."""
    return failure.get(name) if isinstance(failure, dict) else getattr(failure, name)


def steps_by_operation(spec: Any) -> dict[str, tuple]:
    """Per operation, where its steps are written in the spec: two operations
    with the same (non-empty) tuple run the same steps (a YAML alias)."""
    return {name: tuple(getattr(step, "where", None) for step in op.steps) for name, op in spec.operations.items()}


def _same_steps(head: Failure | dict, other: Failure | dict, steps_of: dict[str, tuple]) -> str | None:
    """Why two divergences are one broken rule of the spec: two operations
    running the same steps, their answers differing at the same path the same
    way (the same expected and observed values); None when they are not."""
    one, two = _field(head, "operation"), _field(other, "operation")
    if (
        not one
        or not two
        or one == two
        or "divergence" != _field(head, "kind")
        or "divergence" != _field(other, "kind")
    ):
        return None
    if not _run_same_steps(one, two, steps_of) or not _differ_alike(head, other):
        return None
    first, second = sorted((one, two))
    return (
        f"`{first}` and `{second}` run the same steps of the spec, and their answers differ at "
        f"{_field(head, 'path')} the same way (one rule, broken once)"
    )


def _race_closest_fails_as(head: Failure | dict, other: Failure | dict, steps_of: dict[str, tuple]) -> str | None:
    """Why a race and a plain divergence are one cause: the sequential order
    that came closest to the racing calls' answers first differs at the
    divergence's operation (or one running the same steps), at its path, the
    same way. None when they are not shown to be."""
    race, plain = (head, other) if _field(head, "kind") == "linearizability" else (other, head)
    closest = _field(race, "closest") or {}
    operation, at = closest.get("operation"), _field(plain, "operation")
    if _field(race, "kind") != "linearizability" or _field(plain, "kind") != "divergence" or not operation or not at:
        return None
    if operation != at and not _run_same_steps(operation, at, steps_of):
        return None
    if not _differ_alike(plain, race):
        return None
    return (
        f"the race's closest sequential order first differs at `{operation}` {_field(plain, 'path')} the way "
        f"`{at}` does (one bug, also seen in a race)"
    )


def _run_same_steps(one: str, two: str, steps_of: dict[str, tuple]) -> bool:
    """Whether two operations run the same (non-empty) steps of the spec."""
    return bool(steps_of.get(one)) and steps_of.get(one) == steps_of.get(two)


def _differ_alike(one: Failure | dict, two: Failure | dict) -> bool:
    """Whether two failures differ at the same path with the same expected
    and observed values."""
    path = signature(one)[2]
    if path is None or path != signature(two)[2]:
        return False
    return all(_text(_field(one, name)) == _text(_field(two, name)) for name in ("expected", "observed"))


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _shown_together(head: Failure | dict, other: Failure | dict, met: dict[int, set[tuple]]) -> bool:
    """Whether one of the two was shown to first fail as the other."""
    return any(same_bug(seen, signature(other)) for seen in met.get(id(head), ())) or any(
        same_bug(seen, signature(head)) for seen in met.get(id(other), ())
    )


def _inputs(failure: Failure | dict) -> str:
    """A failure's steps as calls and clock moves only (no answers, no ids chosen)."""
    from .reduce import steps_of_trace, without_choices

    return json.dumps(
        without_choices(steps_of_trace(_field(failure, "steps") or [])),
        sort_keys=True,
        default=str,
    )


def _one_answer(head: Failure | dict, other: Failure | dict) -> bool:
    """Whether both are differences in one answer: the same steps, failing at the same step's call."""
    where = (_field(head, "step"), _field(head, "operation"))
    if where[0] is None or not _field(head, "steps") or where != (_field(other, "step"), _field(other, "operation")):
        return False  # a probe after the step is another answer than the step's own
    return _inputs(head) == _inputs(other)


def _one_rule(head: Failure | dict, other: Failure | dict, terms: dict[int, frozenset[str]]) -> frozenset[str]:
    """The orderings both failures turn on (empty: none in common)."""
    return terms.get(id(head), frozenset()) & terms.get(id(other), frozenset())


def group_by_cause(
    failures: list[Failure],
    met: dict[int, set[tuple]],
    terms: dict[int, frozenset[str]] | None = None,
    steps_of: dict[str, tuple] | None = None,
) -> list[Failure]:
    """The causes among ``failures``, shortest first, each the shortest
    failure of its cause with the longer ones in its ``symptoms`` (shortest
    first). ``met`` maps a failure (``id()``) to the signatures of the
    failures it was shown to first fail as; ``terms``, to the orderings it
    turns on (``attribution.orderings_in_play``); ``steps_of``, each
    operation to where its steps are written (``steps_by_operation``).
    Shown together, turning on one ordering, one answer, one rule of the
    same steps or a race whose closest order fails as a divergence does
    joins two failures; it is transitive: a symptom of a symptom
    joins the same cause."""
    terms, steps_of = terms or {}, steps_of or {}
    why: dict[int, set[str]] = {}  # per head position: why others joined it (cause_note)
    ordered = sorted(failures, key=length_of)  # stable: equal lengths keep the order found
    cause = list(range(len(ordered)))  # union-find over positions in ``ordered``

    for i, one in enumerate(ordered):
        for j in range(i):
            reasons = _joined_because(ordered[j], one, met, terms, steps_of)
            if reasons:
                a, b = sorted((_root(cause, i), _root(cause, j)))
                cause[b] = a  # the shorter heads
                joined = why.pop(b, set()) if b != a else set()
                why.setdefault(a, set()).update(reasons, joined)
    heads: list[Failure] = []
    for i, failure in enumerate(ordered):
        if _root(cause, i) == i:
            heads.append(failure)
        else:
            ordered[_root(cause, i)].symptoms.append(failure)
            failure.message = _joined_note(failure.message)
    for i, head in enumerate(ordered):
        if _root(cause, i) == i and head.symptoms:
            head.message = _joined_note(head.message) + "\n" + cause_note(head, sorted(why.get(i, ())))
    return heads


def _joined_note(message: str) -> str:
    """``message`` with the hunt's "(a distinct failure, found with seed N
    ...)" said without "distinct": the failure is one cause with others."""
    return _DISTINCT_NOTE.sub(r"\n(\1\2; one cause with the others listed with it)", message)


def _root(cause: list[int], i: int) -> int:
    """The head of ``i``'s cause in a union-find over positions (paths halved)."""
    while cause[i] != i:
        cause[i] = cause[cause[i]]
        i = cause[i]
    return i


def _joined_because(
    head: Failure | dict,
    other: Failure | dict,
    met: dict[int, set[tuple]],
    terms: dict[int, frozenset[str]],
    steps_of: dict,
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
    for rule in (_same_steps(head, other, steps_of), _race_closest_fails_as(head, other, steps_of)):
        if rule:
            reasons.add(rule)
    return reasons


def _symptom_text(symptom: Failure | dict) -> str:
    """A symptom in a few words: its kind, where it showed (an operation's
    answer, or what a clock move returned) and its path."""
    kind, operation, path = _field(symptom, "kind"), _field(symptom, "operation"), _field(symptom, "path")
    if operation:
        return f"{kind} at {operation}" + (f" {path}" if path else "")
    if (_field(symptom, "message") or "").startswith("after the clock"):
        return f"{kind} after a clock move" + (f", in {path}" if path else "")
    return f"{kind} in {path}" if path else kind


def cause_note(head: Failure | dict, reasons: list[str] | None = None) -> str:
    """The line a failure's message gets when others share its cause
    (``reasons``: why they were joined, ``_joined_because``)."""
    symptoms = _field(head, "symptoms") or []
    shown = "; ".join(f"{_symptom_text(s)} ({length_of(s)} steps)" for s in symptoms)
    why = "; ".join(reasons or ["their steps, replayed with this failure no longer accepted, first fail as this one"])
    return (
        f"{_NOTE_START[1:]}{len(symptoms)} longer failure(s), listed under this one as "
        f"symptoms: {shown}. Why one cause: {why})"
    )


def join_parts(heads: list[dict], steps_of: dict[str, tuple] | None = None) -> list[dict]:
    """One list of causes from the failures the parts of one exploration
    reported (each part's causes, shortest first, with their symptoms), as
    report entries: shortest first, each the shortest failure of its cause
    with the longer ones as its symptoms. Two failures are one cause when
    they have one signature (the same bug found twice: only the shortest is
    kept), when a part listed one under the other, or when, with no replay,
    ``group_by_cause``'s rules say so (one answer; the same steps; a race's
    closest order)."""
    members: list[dict] = []
    cause: list[int] = []
    why: dict[int, set[str]] = {}
    for head in heads:
        top = len(members)
        for failure in [head, *(head.get("symptoms") or [])]:
            member = {k: v for k, v in failure.items() if k != "symptoms"}
            members.append(member)
            cause.append(top)
        if len(members) > top + 1:
            why.setdefault(top, set()).update(_reasons_given(head))

    for i, one in enumerate(members):
        for j in range(i):
            reasons = _joined_because(members[j], one, {}, {}, steps_of or {})  # the rules needing no replay
            if signature(one) == signature(members[j]):
                reasons.add("")  # the same bug found twice: nothing to say in the note
            a, b = _root(cause, i), _root(cause, j)
            if reasons and a != b:
                a, b = min(a, b), max(a, b)
                cause[b] = a
                why.setdefault(a, set()).update(reasons, why.pop(b, set()))
    groups: dict[int, list[int]] = {}
    for i in range(len(members)):
        groups.setdefault(_root(cause, i), []).append(i)
    out = [_one_cause([members[i] for i in group], why.get(top, set())) for top, group in groups.items()]
    return sorted(out, key=length_of)


def _one_cause(group: list[dict], reasons: set[str]) -> dict:
    """A cause's entry from its members: the shortest heads, the shortest of
    each other signature follows as a symptom, its note written anew."""
    shortest: dict[tuple, dict] = {}
    for member in sorted(group, key=length_of):  # stable: equal lengths keep the order found
        shortest.setdefault(signature(member), member)
    head, *rest = shortest.values()
    head = {**head, "message": _without_note(head.get("message") or "")}
    for symptom in rest:
        symptom["message"] = _joined_note(_without_note(symptom.get("message") or ""))
    if rest:
        head["message"] = _joined_note(head["message"])
    if rest:
        head["symptoms"] = rest
        head["message"] += "\n" + cause_note(head, sorted(r for r in reasons if r) or None)
    return head


def _reasons_given(head: dict) -> list[str]:
    """The reasons the note under a part's cause gave for its symptoms."""
    message = head.get("message") or ""
    at = message.find(_NOTE_START)
    if at < 0:
        return []
    note = message[at + len(_NOTE_START) :].split("\n", 1)[0]
    marker = ". Why one cause: "
    if marker not in note or not note.endswith(")"):
        return []
    return note.split(marker, 1)[1][:-1].split("; ")


def _without_note(message: str) -> str:
    at = message.find(_NOTE_START)
    if at < 0:
        return message
    end = message.find("\n", at + 1)
    return message[:at] + ("" if end < 0 else message[end:])
