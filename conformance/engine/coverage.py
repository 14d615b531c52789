"""What a run exercised, per category, against what the spec declares; the
``--min-coverage`` gates; and which states and transitions a failure is about
(highlighted in the summary's state diagram).

The categories: transitions, states, operations, error kinds, policies (each
act of ``POLICY_ACTS``), boundary classes (``BOUNDARY_CLASSES``, and one
below, at and one above each declared ``exploration.limits`` edge, from
``statemachines.tools.limits``) and races (declared concurrent groups and
those ``statemachines.tools.races`` derives, each counted when its calls met
the race window, ``crew.StartLine.overlapped``; and each scenario that races
calls and ran, covered when one of its runs met the window), and transition pairs and
(state, operation, outcome) triples (``engine/pairs.py``). ``run --min-coverage
CATEGORY=PERCENT`` fails the run with failure kind ``coverage``.

Items that cannot occur in the run (``engine/applicability.py``: the model
never reaches them under the parameters, a limit or race does not apply)
are listed per category as ``not_applicable``, with why, and do not count.
"""

from __future__ import annotations

from typing import Any

from statemachines import Spec, derived_races, exploration_applies, limit_edges
from statemachines.model import steps as S
from statemachines.model.model import BOUNDARY_CLASSES, POLICY_ACTS
from statemachines.tools.reach import Bound

from .applicability import not_applicable_items
from .failures import Failure
from .pairs import PAIR_CATEGORIES, pair_categories
from .scenarios import race_coverage_key

__all__ = ["CATEGORIES", "parse_min_coverage", "coverage_categories", "check_gates", "failure_focus"]

CATEGORIES = (
    "transitions",
    "states",
    "operations",
    "error-kinds",
    "policies",
    "boundary-classes",
    "races",
    *PAIR_CATEGORIES,  # engine/pairs.py
)
_ALIASES = {
    "errors": "error-kinds",
    "error_kinds": "error-kinds",
    "boundaries": "boundary-classes",
    "boundary_classes": "boundary-classes",
    "boundary": "boundary-classes",
    "pairs": "transition-pairs",
    "transition_pairs": "transition-pairs",
}


def parse_min_coverage(values) -> dict[str, float]:
    """``["transitions=90", "operations=100"]`` -> {category: percent}; ValueError says what is wrong."""
    out: dict[str, float] = {}
    for value in values or ():
        name, sep, number = str(value).partition("=")
        name = _ALIASES.get(name.strip(), name.strip())
        if not sep or name not in CATEGORIES:
            raise ValueError(
                f"--min-coverage {value!r}: write CATEGORY=PERCENT with a category among {', '.join(CATEGORIES)}"
            )
        try:
            percent = float(number.strip().rstrip("%"))
        except ValueError:
            raise ValueError(f"--min-coverage {value!r}: {number!r} is not a number") from None
        if not 0 <= percent <= 100:
            raise ValueError(f"--min-coverage {value!r}: the percentage must be between 0 and 100")
        out[name] = percent
    return out


def _declared(spec: Spec, params: dict, concurrent: bool) -> dict[str, list[tuple[str, Any]]]:
    """Per category: (item as reports name it, how to tell it was hit).
    ``concurrent``: the implementation takes concurrent calls, so the
    exploration's concurrent groups (races) are there to be reached."""
    offered = spec.offered_operations(params)
    items: dict[str, list] = {c: [] for c in CATEGORIES}
    for t in spec.lifecycle.transitions:
        for src in t.sources:
            name = f"{src} -{t.trigger}-> {t.dest}"
            items["transitions"].append((name, ("transitions", [name])))
    for name in spec.lifecycle.states:
        items["states"].append((name, ("states", [name])))
    for name, op in spec.operations.items():
        if name not in offered:
            continue
        items["operations"].append((name, ("operations", [name])))
        for kind in op.errors:
            items["error-kinds"].append((f"{name}: {kind}", ("outcomes", [f"{name}: {kind}"])))
    for name, policy in spec.policies.items():
        events = POLICY_ACTS.get(policy.kind, ())
        if events:
            items["policies"].append((name, ("policies", [f"{name}.{e}" for e, _ in events])))
        for event, what in BOUNDARY_CLASSES.get(policy.kind, ()):
            items["boundary-classes"].append((f"{name}: {what}", ("policies", [f"{name}.{event}"])))
    for name, ordering in spec.orderings.items():
        if len(ordering.by) > 1:
            items["boundary-classes"].append((f"{name}: tie broken by {ordering.by[1]}", ("policies", [f"{name}.tie"])))
    for limit in limit_edges(spec, params):
        for edge in limit.classes():
            items["boundary-classes"].append(
                (f"{limit.name}: {edge} ({limit.edge_value(edge)})", ("limits", [f"{limit.name}.{edge}"]))
            )
    for group in (*spec.exploration.concurrent, *derived_races(spec)) if concurrent else ():
        if exploration_applies(group, params, offered):
            items["races"].append((f"{group['name']}: {' | '.join(group['calls'])}", ("races", [group["name"]])))
    return items


def _racing_scenarios(counts: dict) -> list[tuple[str, Any]]:
    """The scenarios that race calls and ran in this run (scenarios.race_coverage_key):
    each an item of ``races``, covered when a run met the race window."""
    prefix = race_coverage_key("")
    return [
        (f"{key} (races calls)", ("races", [key]))
        for key in sorted(counts.get("races") or {})
        if key.startswith(prefix)
    ]


def coverage_categories(
    spec: Spec, counts: dict, params: dict, concurrent: bool = True, bound: Bound | None = None
) -> dict:
    """Per category: total, covered, percent and what was missed, and the
    items that cannot occur in this run (not counted), each with why.
    ``concurrent``: whether the implementation takes concurrent calls (races
    are declared only then); ``bound``: the most records a test of the run
    creates (``applicability.run_bound``; None: unknown)."""
    out = {}
    excluded = _not_applicable_by_category(spec, params, concurrent, bound)
    declared_items = _declared(spec, params, concurrent)
    declared_items["races"] += _racing_scenarios(counts)
    for category, declared in declared_items.items():
        items = [item for item in declared if item[0] not in excluded[category]]
        missed = [name for name, (where, keys) in items if not all((counts.get(where) or {}).get(k) for k in keys)]
        total = len(items)
        covered = total - len(missed)
        out[category] = {
            "total": total,
            "covered": covered,
            "percent": round(100.0 * covered / total, 1) if total else 100.0,
            "missed": missed,
            "not_applicable": [{"item": k, "reason": v} for k, v in excluded[category].items()],
        }
    out.update(pair_categories(spec, counts, params))
    return out


def _not_applicable_by_category(spec: Spec, params: dict, concurrent: bool, bound: Bound | None) -> dict:
    """Per category: {item: why it cannot occur in this run}."""
    out: dict[str, dict[str, str]] = {c: {} for c in CATEGORIES}
    for entry in not_applicable_items(spec, params, concurrent, bound):
        out[entry.category].setdefault(entry.item, entry.reason)
    return out


def check_gates(categories: dict, minimums: dict[str, float]) -> tuple[list[dict], Failure | None]:
    gates, short = [], []
    for category, minimum in minimums.items():
        entry = categories[category]
        passed = entry["percent"] >= minimum
        gates.append({"category": category, "minimum": minimum, "percent": entry["percent"], "passed": passed})
        if not passed:
            missed = entry["missed"]
            listed = ", ".join(missed[:8]) + (f", … ({len(missed) - 8} more)" if len(missed) > 8 else "")
            skipped = len(entry.get("not_applicable") or ())
            uncounted = f", {skipped} not applicable" if skipped else ""
            short.append(
                f"{category} {entry['percent']:g}% < {minimum:g}% ({entry['covered']}/{entry['total']}{uncounted}; "
                f"missed: {listed})"
            )
    if not short:
        return gates, None
    failure = Failure(
        kind="coverage",
        message="the run exercised less than --min-coverage asks: " + "; ".join(short),
        expected={g["category"]: g["minimum"] for g in gates},
        observed={g["category"]: g["percent"] for g in gates},
    )
    return gates, failure


def _strings(value: Any, depth: int = 0):
    if depth > 6:
        return
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v, depth + 1)
    elif isinstance(value, list):
        for v in value[:50]:
            yield from _strings(v, depth + 1)


def failure_focus(spec: Spec, failure: dict | None) -> dict:
    """The states and transitions a failure is about: states named in what the
    model expected or the implementation did at the divergence, and the
    transitions its operation can fire (those touching such states, if any)."""
    if not failure:
        return {"states": [], "transitions": []}
    states = spec.lifecycle.states
    named = [
        s
        for s in dict.fromkeys(v for key in ("expected", "observed") for v in _strings(failure.get(key)))
        if s in states
    ]
    op = spec.operations.get(failure.get("operation") or "")
    fired = {step.trigger for step in S.walk_steps(op.steps) if isinstance(step, S.Fire)} if op else set()
    moves = [(src, t.trigger, t.dest) for t in spec.lifecycle.transitions if t.trigger in fired for src in t.sources]
    near = [m for m in moves if m[0] in named or m[2] in named]
    chosen = near or (moves if len(moves) <= 2 else [])
    return {"states": named, "transitions": [f"{s} -{t}-> {d}" for s, t, d in chosen]}
