"""Finer coverage: pairs of consecutive transitions of one record and
(record state, operation, outcome) triples, which are reachable under the
run's parameters, which the run reached, and the rare ones it never came near.

The model counts both as it predicts (``statemachines.model.model.Coverage``:
``pairs`` "t1 then t2", ``triples`` "state: op -> outcome", the state being
that of the record the operation's first ``find`` met, ``(no record)`` when it
met none). What is reachable is derived from the spec, never from the run:

- transition pairs: from the lifecycle's transitions table, every ``a -x-> b``
  followed by a ``b -y-> c`` whose triggers some operation offered under the
  parameters (or the clock) fires. Guards that read more than the parameters
  are not followed, so a pair such a guard forbids is listed too; a gate on
  ``transition-pairs`` is set below 100 %.
- triples: those the bounded breadth-first search of ``check-spec`` reaches
  (``statemachines.tools.check.search_counts``: the spec's ``check.scope``,
  at most ``SEARCH_STATES`` states, so the answer is the same on every
  machine), of operations offered under the run's parameters, plus any the
  run reached that the small scope does not.

A pair with a transition, and a triple with a state or an error kind, that
the model cannot reach under the run's parameters
(``statemachines.tools.reach``: a guard on parameters alone that is false, a
branch never taken), or a triple whose refusal a transition always prevents
(``reach.never_answers``), is not counted: it is listed as
``not_applicable``, with why.

``run --min-coverage transition-pairs=N`` (or ``triples=N``) gates on them
(``engine/coverage.py`` checks the gates).
"""

from __future__ import annotations

import dataclasses
import weakref
from dataclasses import dataclass

from statemachines import Spec
from statemachines.model import steps as S
from statemachines.tools.check import search_counts
from statemachines.tools.reach import never_answers, unreachable_items

__all__ = [
    "PAIR_CATEGORIES",
    "SEARCH_STATES",
    "Reachable",
    "fireable_triggers",
    "reachable",
    "pair_categories",
    "never_reached",
    "pairs_report",
]

PAIR_CATEGORIES = ("transition-pairs", "triples")
SEARCH_STATES = 400
NEVER_SHOWN = 12  # "never reached" lines a report names (the rarest first)


@dataclass(frozen=True)
class Reachable:
    """What can be reached under one set of parameters, each in report order."""

    pairs: tuple[str, ...]
    triples: tuple[str, ...]
    # the pairs and triples the parameters rule out: item -> why (not counted)
    not_applicable: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)


def fireable_triggers(spec: Spec, params: dict) -> set[str]:
    """Triggers fired by an offered operation's steps or by the clock."""
    offered = spec.offered_operations(params)
    lists = [op.steps for name, op in spec.operations.items() if name in offered] + [spec.on_clock]
    return {step.trigger for steps in lists for step in S.walk_steps(steps) if isinstance(step, S.Fire)}


def _pairs(spec: Spec, params: dict, dead: dict[str, str]) -> tuple[tuple[str, ...], dict[str, str]]:
    """The pairs reachable under ``params``, and those a transition that
    never happens (``dead``: transition -> why) rules out, with why."""
    fireable = fireable_triggers(spec, params)
    moves = [(src, t.trigger, t.dest) for t in spec.lifecycle.transitions if t.trigger in fireable for src in t.sources]
    live, ruled_out = [], {}
    for a, x, b in moves:
        for b2, y, c in moves:
            if b != b2:
                continue
            first, second = f"{a} -{x}-> {b}", f"{b} -{y}-> {c}"
            never = next((f"{half} never happens: {dead[half]}" for half in (first, second) if half in dead), None)
            if never is None:
                live.append(f"{first} then {second}")
            else:
                ruled_out[f"{first} then {second}"] = never
    return tuple(live), ruled_out


def _triple_ruled_out(
    spec: Spec, params: dict, triple: str, dead_states: dict[str, str], dead_errors: dict[str, str]
) -> str | None:
    """Why the triple ``state: op -> outcome`` cannot occur, or None."""
    state, _, rest = triple.partition(": ")
    operation, _, outcome = rest.partition(" -> ")
    if state in dead_states:
        return f"state {state} is never reached: {dead_states[state]}"
    error = f"{operation}: {outcome}"
    if error in dead_errors:
        return f"{operation} never answers {outcome}: {dead_errors[error]}"
    why = never_answers(spec, params, state, operation, outcome) if outcome != "ok" else None
    return f"{operation} never answers {outcome} on a {state} record: {why}" if why else None


_SEARCHED: dict[int, tuple[weakref.ref, tuple[str, ...]]] = {}  # id(spec) -> (the spec, its triples)


def _searched_triples(spec: Spec) -> tuple[str, ...]:
    """The triples of the bounded search, once per loaded spec (a process
    that runs a spec many times, such as mutation testing, searches once)."""
    known = _SEARCHED.get(id(spec))
    if known is not None and known[0]() is spec:
        return known[1]
    found = tuple(sorted(search_counts(spec, SEARCH_STATES).get("triples") or {}))
    _SEARCHED[id(spec)] = (weakref.ref(spec), found)
    return found


def reachable(spec: Spec, params: dict, counts: dict | None = None) -> Reachable:
    """The pairs and triples reachable under ``params``; triples the run
    reached (``counts``, Coverage counts) are reachable whatever the search
    says. Those the model cannot reach under ``params`` are ``not_applicable``."""
    dead: dict[str, dict[str, str]] = {"transitions": {}, "states": {}, "error-kinds": {}}
    for item in unreachable_items(spec, params):
        dead[item.category][item.item] = item.reason
    offered = spec.offered_operations(params)
    reached = (counts or {}).get("triples") or {}
    triples, ruled_out = [], {}
    for triple in _searched_triples(spec):
        if triple.split(": ", 1)[1].split(" -> ", 1)[0] not in offered:
            continue
        why = (
            None
            if reached.get(triple)
            else _triple_ruled_out(spec, params, triple, dead["states"], dead["error-kinds"])
        )
        if why is None:
            triples.append(triple)
        else:
            ruled_out[triple] = why
    seen = set(triples)
    triples += sorted(t for t in reached if t not in seen)
    pairs, pairs_out = _pairs(spec, params, dead["transitions"])
    return Reachable(pairs, tuple(triples), {"transition-pairs": pairs_out, "triples": ruled_out})


def _category(items: tuple[str, ...], hit: dict, ruled_out: dict[str, str]) -> dict:
    missed = [name for name in items if not hit.get(name)]
    total = len(items)
    covered = total - len(missed)
    return {
        "total": total,
        "covered": covered,
        "percent": round(100.0 * covered / total, 1) if total else 100.0,
        "missed": missed,
        "not_applicable": [{"item": item, "reason": why} for item, why in ruled_out.items()],
    }


def pair_categories(spec: Spec, counts: dict, params: dict) -> dict:
    """The ``transition-pairs`` and ``triples`` categories (total, covered,
    percent, missed, not_applicable), in the shape of ``coverage.coverage_categories``."""
    found = reachable(spec, params, counts)
    return {
        "transition-pairs": _category(found.pairs, counts.get("pairs") or {}, found.not_applicable["transition-pairs"]),
        "triples": _category(found.triples, counts.get("triples") or {}, found.not_applicable["triples"]),
    }


def never_reached(spec: Spec, counts: dict, params: dict, limit: int = NEVER_SHOWN) -> list[str]:
    """Lines naming reachable pairs the run never reached, the rarest first:
    those whose two transitions the run took least (a pair of two transitions
    taken hundreds of times each was near; one of a transition never taken
    was not), each saying how often the run took each half."""
    taken = counts.get("transitions") or {}
    reached = counts.get("pairs") or {}
    lines = []
    for pair in reachable(spec, params, counts).pairs:
        if reached.get(pair):
            continue
        first, second = pair.split(" then ")
        n1, n2 = taken.get(first, 0), taken.get(second, 0)
        lines.append((min(n1, n2), n1 + n2, pair, n1, n2))
    lines.sort(key=lambda line: (line[0], line[1], line[2]))
    return [
        f"{pair}: never reached (the first transition was taken {n1} time(s), the second {n2})"
        for _, _, pair, n1, n2 in lines[:limit]
    ]


def pairs_report(spec: Spec, counts: dict, params: dict) -> dict:
    """What report.json's coverage adds: the reachable pairs and triples
    (which were reached is in the counts and the categories' ``missed``) and
    the ``never_reached`` lines."""
    found = reachable(spec, params, counts)
    return {
        "reachable": {"transition-pairs": list(found.pairs), "triples": list(found.triples)},
        "never_reached": never_reached(spec, counts, params),
    }
