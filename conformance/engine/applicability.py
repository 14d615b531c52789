"""Which coverage items cannot occur in this run, and why: the items
``run --min-coverage`` does not count (docs/running.md, "Not applicable").

Three sources, each decided from the spec, never from a list:

- the model (``statemachines.tools.reach``): error kinds, transitions and
  states that no live step reaches under the parameters, within the most
  records a test of this run can create (``run_bound``);
- limits (``exploration.limits``) whose ``assumes`` is false under the
  parameters: none of their edges is explored;
- races (declared and derived concurrent groups) whose ``assumes`` is false
  or that call an operation the parameters do not offer, and every race when
  the implementation does not take concurrent calls.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from statemachines import (
    CallStep,
    ConcurrentStep,
    ExpressionError,
    RepeatStep,
    Spec,
    derived_races,
    exploration_applies,
    render,
)
from statemachines.tools.reach import Bound, creates_per_call, unreachable_items

__all__ = ["NotApplicableItem", "not_applicable_items", "run_bound", "bound_from_dict", "bound_to_dict"]


@dataclass(frozen=True)
class NotApplicableItem:
    category: str  # one of coverage.CATEGORIES
    item: str  # as coverage names it
    reason: str

    def to_dict(self) -> dict:
        return {"item": self.item, "reason": self.reason}


# -- the most records a test can create ---------------------------------------------------------
def _scenario_calls(steps: list, env: dict) -> int | None:
    """The calls a scenario's steps make at most (None: a repeat count depends on the run)."""
    total = 0
    for step in steps:
        if isinstance(step, ConcurrentStep):
            total += len(step.calls)
        elif isinstance(step, RepeatStep):
            try:
                times = step.times if isinstance(step.times, int) else int(render(step.times, env))
            except (ExpressionError, TypeError, ValueError):
                return None
            inner = _scenario_calls(step.steps, env)
            if inner is None:
                return None
            total += max(0, times) * inner
        elif isinstance(step, CallStep):
            total += 1
    return total


def _count_max(batch: dict, params: dict) -> int | None:
    try:
        return int(batch["count"]["max"].evaluate({"params": params}))
    except (ExpressionError, TypeError, ValueError):
        return None


def _calls_per_step(spec: Spec, params: dict, concurrent: bool) -> int | None:
    """The most calls one step of the exploration makes: a call, a batch
    (its largest count times its phases) or a concurrent group."""
    offered = spec.offered_operations(params)
    most = 1
    for batch in spec.exploration.batches:
        if exploration_applies(batch, params, offered):
            count = _count_max(batch, params)
            if count is None:
                return None
            most = max(most, count * len(batch["phases"]))
    if concurrent:
        for group in (*spec.exploration.concurrent, *derived_races(spec)):
            most = max(most, len(group["calls"]))
    return most


def run_bound(spec: Spec, params: dict, *, step_count: int | None, scenarios: list, concurrent: bool = True) -> Bound:
    """The most records one test of this run creates: an exploration example
    (``step_count`` steps, None when there is no exploration) or one run of a
    scenario (``scenarios``: those that apply), each call creating at most
    what its operation's steps create."""
    per_call = creates_per_call(spec, params)
    if per_call is None:
        return Bound(None, "an operation or the clock creates records in a loop")
    calls, most = 0, "no test makes a call"
    if step_count:
        per_step = _calls_per_step(spec, params, concurrent)
        if per_step is None:
            return Bound(None, "a batch's count depends on the run")
        calls = step_count * per_step
        most = f"an exploration example makes at most {step_count} steps × {per_step} call(s)"
    env = {"params": params}
    for scenario in scenarios:
        made = _scenario_calls(scenario.steps, env)
        if made is None:
            return Bound(None, f"scenario {scenario.id} repeats a number of times only the run knows")
        if made > calls:
            calls, most = made, f"scenario {scenario.id}, the longest, makes {made} call(s)"
    return Bound(calls * per_call, f"{most}, each creating at most {per_call} record(s)")


def bound_to_dict(bound: Bound) -> dict:
    return {"max_records": bound.max_records, "why": bound.why}


def bound_from_dict(data: dict | None) -> Bound | None:
    if not isinstance(data, dict):
        return None
    most = data.get("max_records")
    return Bound(most if isinstance(most, int) else None, str(data.get("why") or ""))


# -- the items -------------------------------------------------------------------------------------
def _shown(text: str, params: dict) -> str:
    names = sorted(set(re.findall(r"params\.(\w+)", text)))
    here = ", ".join(f"{n} = {json.dumps(params.get(n))}" for n in names if n in params)
    return f"`{text}` is false here" + (f" ({here})" if here else "")


def _limits(spec: Spec, params: dict) -> list[NotApplicableItem]:
    out = []
    for limit in spec.exploration.limits:
        assumes = limit["assumes"]
        try:
            holds = assumes is None or assumes.evaluate_bool({"params": params}, role="an `assumes`")
        except ExpressionError:
            continue
        if not holds:
            reason = f"the limit is not explored: its assumes {_shown(assumes.source, params)}"
            out.append(NotApplicableItem("boundary-classes", f"{limit['name']}: every edge", reason))
    return out


def _race_reason(group: dict, params: dict, offered: frozenset[str], concurrent: bool) -> str | None:
    if not concurrent:
        return "the implementation does not declare the concurrent capability (describe() -> capabilities)"
    absent = sorted(set(group["calls"]) - offered)
    if absent:
        return f"it calls {', '.join(absent)}, which these parameters do not offer"
    assumes = group.get("assumes")
    if assumes is not None and not exploration_applies(group, params, offered):
        return f"its assumes {_shown(assumes.source, params)}"
    return None


def _races(spec: Spec, params: dict, concurrent: bool) -> list[NotApplicableItem]:
    offered = spec.offered_operations(params)
    out = []
    for group in (*spec.exploration.concurrent, *derived_races(spec)):
        try:
            reason = _race_reason(group, params, offered, concurrent)
        except ExpressionError:
            continue
        if reason is not None:
            item = f"{group['name']}: {' | '.join(group['calls'])}"
            out.append(NotApplicableItem("races", item, reason))
    return out


def not_applicable_items(spec: Spec, params: dict, concurrent: bool, bound: Bound | None) -> list[NotApplicableItem]:
    """Every coverage item that cannot occur in this run, with why."""
    model = [NotApplicableItem(u.category, u.item, u.reason) for u in unreachable_items(spec, params, bound)]
    return model + _limits(spec, params) + _races(spec, params, concurrent)
