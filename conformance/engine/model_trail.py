"""What the model held after each step of a failure: its trail.

A counterexample is a list of calls and answers; what its reader rebuilds in
their head is the state the model was in when the implementation parted from
it. ``model_trail`` follows a failure's recorded steps on a fresh model alone,
fed the answers the implementation gave (so the values it chose are the ones
the model adopts), and notes after each step what the model predicted, which
transitions its records took, and its records, those the step changed first.
Bounded: at most ``RECORDS_PER_STEP`` records a step, and only failures of at
most ``MAX_STEPS`` steps; the reports carry it as each step's ``model``.

Nothing here touches the implementation: the steps are not called again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from statemachines import ExpressionError, Model, ObservationError, Prediction, Spec

from ..adapters.json_values import json_safe
from .failures import Failure

__all__ = ["MAX_STEPS", "RECORDS_PER_STEP", "StepState", "model_trail", "add_model_trail"]

RECORDS_PER_STEP = 6  # records shown a step: the changed ones first, then others
MAX_STEPS = 200  # a longer failure's steps get no trail (the report stays small)


@dataclass
class StepState:
    """The model after one step: its prediction, the transitions its records
    took, the records the step changed (keys) and some records (public fields)."""

    expected: Any = None
    transitions: list[str] = field(default_factory=list)
    read: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    records: list[dict] = field(default_factory=list)
    more_records: int = 0
    note: str | None = None

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"expected": self.expected, "transitions": self.transitions}
        out.update(read=self.read, changed=self.changed)
        out["records"] = self.records
        if self.more_records:
            out["more_records"] = self.more_records
        if self.note:
            out["note"] = self.note
        return out


def _expected(prediction: Prediction) -> Any:
    if prediction.error is not None:
        return json_safe({"error": prediction.error, "effects": prediction.effects})
    return json_safe({"result": prediction.result, "effects": prediction.effects})


def _records(model: Model) -> dict[str, dict]:
    return {str(key): model.record(key) or {} for key in model.keys()}


def _transitions(model: Model) -> dict[str, int]:
    return dict(model.coverage.counts.get("transitions", {}))


def _calls(step: dict) -> Iterable[dict]:
    """The calls of a step in the order they took effect (a concurrent group's
    recorded order, when the session decided one)."""
    group = step.get("concurrently")
    if group is None:
        return [step]
    order = step.get("order")
    if isinstance(order, list) and sorted(order) == list(range(len(group))):
        return [group[i] for i in order]
    return group


def _read(model: Model, step: dict) -> list[str]:
    """Keys of the records the step's calls find (before it runs)."""
    key = model.entity.key
    keys: list[str] = []
    for call in [] if "advance_ms" in step else _calls(step):
        for record in model.addressed(call["operation"], call.get("args") or {}):
            if str(record.get(key)) not in keys:
                keys.append(str(record.get(key)))
    return keys


def _apply(model: Model, step: dict, now: int) -> tuple[Any, int]:
    """One recorded step on the model; its prediction(s) and the clock after it."""
    if "advance_ms" in step:
        now = int(step.get("now_ms") or (max(now, model.now) + int(step["advance_ms"])))
        return _expected(model.advance(now)), now
    expected = []
    for call in _calls(step):
        prediction = model.predict(call["operation"], call.get("args") or {}, call.get("observed"))
        expected.append(_expected(prediction))
    return (expected[0] if "concurrently" not in step else expected), max(now, model.now)


def _state(
    model: Model, before: dict[str, dict], moved: dict[str, int], read: list[str], expected: Any, limit: int
) -> StepState:
    after = _records(model)
    changed = [key for key, record in after.items() if before.get(key) != record]
    changed += [key for key in before if key not in after]  # removed by the step
    first = changed + [key for key in read if key not in changed]
    shown = [after[key] for key in first if key in after][:limit]
    others = [record for key, record in after.items() if key not in first]
    shown += others[: max(0, limit - len(shown))]
    now_counts = _transitions(model)
    taken = [name for name, n in sorted(now_counts.items()) if n > moved.get(name, 0)]
    return StepState(
        expected=expected,
        transitions=taken,
        read=read,
        changed=changed,
        records=json_safe(shown),
        more_records=max(0, len(after) - len(shown)),
    )


def model_trail(spec: Spec, params: dict, steps: list[dict], limit: int = RECORDS_PER_STEP) -> list[StepState]:
    """The model's state after each of ``steps`` (a failure's recorded trace);
    a step the model could not follow (its answer is not one the model can
    adopt: the failing step, often) gets a note, and the trail stops there."""
    model = Model(spec, params)
    model.reset(0)
    now, trail = 0, []
    for step in steps:
        before, moved = _records(model), _transitions(model)
        try:
            read = _read(model, step)
            expected, now = _apply(model, step, now)
        except (ObservationError, ExpressionError, KeyError, TypeError, ValueError) as exc:
            trail.append(StepState(note=f"the model could not follow this step's answer: {exc}"))
            break
        if step.get("follow_up"):  # a probe the session made to judge a group
            continue
        trail.append(_state(model, before, moved, read, expected, limit))
    return trail


def add_model_trail(failure: Failure, spec: Spec, params: dict) -> None:
    """Each of ``failure``'s steps gets ``model``: what the model held after it."""
    steps = failure.steps
    if not steps or len(steps) > MAX_STEPS:
        return
    try:
        trail = model_trail(spec, params, steps)
    except Exception:  # the trail is an aid: a failure of its own must not cost the report
        return
    index = 0
    for step in steps:
        if step.get("follow_up"):
            continue
        if index >= len(trail):
            break
        step["model"] = trail[index].to_dict()
        index += 1
