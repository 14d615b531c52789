"""A failing step list as a file that replays in another process: the values
the implementation chose, bound to the step that chose them.

A session's trace records what the implementation chose in each call (its
``chosen`` values: generated ids, tokens, paths, as the model read them from
the answer). An implementation that draws them at random, from a clock or
from a counter that survives ``reset`` chooses others when the steps run
again, so a file that names the recorded values sends calls about records
that do not exist, and the model, which never saw them either, agrees with
every ``not_found``. Here every such value is saved from the answer of the
step that chose it (``save: {task_id_1: result.task_id}``, the scenario
language's own) and every later mention becomes ``${task_id_1}``; a near
miss of it (engine/key_shapes.py: the id less its last character, in upper
case, inside a path or with white space) becomes the same near miss of the
value saved in this run.

Each call but the failing one also records the kind of answer it got
(``answered: result`` or ``answered: {error: not_found}``). A replay whose
call answers in another kind while the model agrees (a start now refused,
a lookup now found) did not reach the state the failure was in: the scenario
runner reports that as ``not-reproducing`` (engine/scenarios.py), never as a
pass that looks like a fix. A file written before these keys existed
replays as it did: its values are sent as written.
"""

from __future__ import annotations

import re
from typing import Any

from .reduce import group_checks, mentions, steps_of_trace

__all__ = ["answered", "bind_recorded", "bound_steps", "bind_steps", "describe_answer", "regression_scenario"]

_NAME_PART = re.compile(r"[^A-Za-z0-9_]+")
_MIN_INSIDE = 3  # a chosen value this long or longer is renamed where another string holds it


def bound_steps(trace: list[dict]) -> list[dict]:
    """The trace's replayable steps (``reduce.steps_of_trace``) in a
    counterexample file's form: bindings instead of chosen values, each
    call's answer kind but the last call's, no order of a group's calls."""
    return bind_steps(steps_of_trace(trace), _answers_of_trace(trace))


def bind_steps(steps: list[dict], answers: list[Any], *, record_answers: bool = True) -> list[dict]:
    """``steps`` (with their ``chosen`` values) and each step's answer (a
    list of answers for a concurrent group, None for a clock move) as file
    steps: chosen values saved and named (see the module's docstring); with
    ``record_answers``, the kind of each call's answer but the last call's."""
    names: dict[str, str] = {}  # recorded value -> its binding's name
    last_call = max((i for i, s in enumerate(steps) if "advance_ms" not in s), default=-1)
    out: list[dict] = []
    for index, (step, answer) in enumerate(zip(steps, answers)):
        if "advance_ms" in step:
            out.append({"advance_ms": step["advance_ms"]})
        elif "concurrently" in step:
            group = step["concurrently"]
            replies = answer if isinstance(answer, list) else [None] * len(group)
            bound = {"concurrently": [_bound_call(c, r, names) for c, r in zip(group, replies)]}
            out.append({**bound, "expect": step["expect"]} if "expect" in step else bound)
        else:
            call = _bound_call(step, answer, names)
            kind = answered(answer)
            if record_answers and index != last_call and kind is not None:
                call["answered"] = kind
            out.append(call)
    return out


def bind_recorded(steps: list[dict]) -> list[dict]:
    """Scenario steps written from a recording (``check-trace --to-scenario``:
    each call's ``expect`` is the answer it got) with the same bindings: a
    string an answer holds and a later call passes, which the call that got
    it did not pass itself, is a value the implementation chose there."""
    mentioned: list[set[str]] = []  # strings the calls after step i pass
    later: set[str] = set()
    for step in reversed(steps):
        mentioned.append(set(later))
        for call in step.get("concurrently") or [step]:
            _strings(call.get("args"), later)
    mentioned.reverse()
    answers, marked = [], []
    for step, after in zip(steps, mentioned):
        answer = step.get("expect") if "call" in step else None
        answers.append(answer)
        if "call" not in step or not isinstance(answer, dict):
            marked.append(step)
            continue
        held: set[str] = set()
        _strings({k: answer.get(k) for k in ("result", "effects")}, held)
        chosen = sorted(v for v in held & after if not mentions(step.get("args"), v))
        marked.append({**step, "chosen": chosen})
    return bind_steps(marked, answers, record_answers=False)


def _strings(value: Any, out: set[str]) -> None:
    if isinstance(value, str) and value:
        out.add(value)
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, out)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out)


def _without_values(value: Any, gone: set[str]) -> Any:
    """``value`` without the object entries whose value is one of ``gone``
    (an expectation lists keys it checks: one left out is not checked)."""
    if isinstance(value, dict):
        return {k: _without_values(v, gone) for k, v in value.items() if not (isinstance(v, str) and v in gone)}
    if isinstance(value, list):
        return [_without_values(v, gone) for v in value]
    return value


def answered(answer: Any) -> Any:
    """The kind of an answer as a file records it: ``"result"``,
    ``{"error": KIND}``, or None for an answer that is neither."""
    if not isinstance(answer, dict):
        return None
    if "error" in answer and isinstance(answer["error"], dict) and isinstance(answer["error"].get("kind"), str):
        return {"error": answer["error"]["kind"]}
    return "result" if "result" in answer else None


def describe_answer(kind: Any) -> str:
    """An answer kind (``answered``) in words: "a result", "error not_found"."""
    if isinstance(kind, dict):
        return f"error {kind.get('error')}"
    return "a result" if kind == "result" else "an answer that is neither a result nor an error"


def _answers_of_trace(trace: list[dict]) -> list[Any]:
    """Each replayable step's answer, aligned with ``steps_of_trace``."""
    checks = group_checks(trace)
    out: list[Any] = []
    for index, step in enumerate(trace):
        if index in checks:
            continue
        if "advance_ms" in step:
            out.append(None)
        elif "concurrently" in step:
            out.append([c.get("observed") for c in step["concurrently"]])
        elif "operation" in step:
            out.append(step.get("observed"))
    return out


def _bound_call(step: dict, answer: Any, names: dict[str, str]) -> dict:
    """One call: its arguments naming earlier bindings, and a ``save:`` for
    each value it chose that its answer holds and its arguments did not give."""
    args = step.get("args")
    call: dict = {"call": step["call"], "args": _templated(args, names) if names else args}
    if "expect" in step:  # a recording's answer as the step's expectation (check-trace's scenarios)
        call["expect"] = _templated(step["expect"], names) if names else step["expect"]
    save: dict[str, str] = {}
    names_before = dict(names)
    for value in step.get("chosen") or ():
        if not isinstance(value, str) or not value or value in names or mentions(args, value):
            continue
        path = _path_to(answer, value)
        if path is None:
            continue
        name = _name(path, len(names) + 1)
        names[value], save[name] = name, path
    if save:
        call["save"] = save
        if "expect" in call:  # a value chosen here cannot be expected here: the next run chooses another
            call["expect"] = _without_values(call["expect"], set(names) - set(names_before))
    return call


def _path_to(answer: Any, value: str) -> str | None:
    """Where ``answer`` holds ``value``, as a ``save:`` path (the result's
    first, then the effects', then the error's), shallowest first."""
    if not isinstance(answer, dict):
        return None
    for top in ("result", "effects", "error"):
        if top in answer:
            found = _find(answer[top], value, top)
            if found is not None:
                return found
    return None


def _find(node: Any, value: str, where: str) -> str | None:
    level: list[tuple[Any, str]] = [(node, where)]
    while level:
        deeper: list[tuple[Any, str]] = []
        for item, path in level:
            if item == value and isinstance(item, str):
                return path
            if isinstance(item, dict):
                deeper += [(v, f"{path}.{k}") for k, v in item.items() if isinstance(k, str) and _plain_key(k)]
            elif isinstance(item, list):
                deeper += [(v, f"{path}.{i}") for i, v in enumerate(item)]
        level = deeper
    return None


def _plain_key(key: str) -> bool:
    """A key a ``save:`` path can name (its parts are split at dots; a part of digits is a list index)."""
    return bool(key) and "." not in key and not key.isdigit()


def _name(path: str, number: int) -> str:
    """A binding's name: the last named part of its path and a number (``task_id_1``)."""
    parts = [p for p in path.split(".") if not p.isdigit()]
    base = _NAME_PART.sub("_", parts[-1]).strip("_") or "value"
    if not base[0].isalpha():
        base = f"v_{base}"
    return f"{base}_{number}"


def _templated(value: Any, names: dict[str, str]) -> Any:
    """``value`` with each bound value (and each near miss of one) written
    through its binding."""
    if isinstance(value, str):
        return _string_template(value, names)
    if isinstance(value, dict):
        return {k: _templated(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_templated(v, names) for v in value]
    return value


def _string_template(value: str, names: dict[str, str]) -> Any:
    if value in names:
        return "${" + names[value] + "}"
    for before, name in names.items():
        if len(before) > 1 and value == before[:-1]:  # an abbreviation: the id less its last character
            return {"$expr": f"{name}.substring(0, size({name}) - 1)"}
        if value == before.upper() and value != before:
            return {"$expr": f"{name}.upperAscii()"}
    for before, name in sorted(names.items(), key=lambda item: -len(item[0])):
        if len(before) >= _MIN_INSIDE and before in value and "${" not in value:
            return value.replace(before, "${" + name + "}")  # inside a path, with white space around it
    return value


def regression_scenario(counterexample: dict, scenario_id: str, source: str, assumes: str | None) -> dict:
    """A counterexample file's contents (``counterexample``, read from
    ``source``) as a scenario of a matrix: its steps as they are, bindings
    and recorded answer kinds included, so that it fails wherever the
    failure is still there and passes once it is fixed; ``assumes`` (over
    params) limits it to the parameters it was found under."""
    failure = str(counterexample.get("failure") or "a failure of the stateful exploration").splitlines()[0]
    scenario: dict = {
        "id": scenario_id,
        "title": f"Regression: {failure[:100]}" + ("…" if len(failure) > 100 else ""),
        "category": "edge",
        "description": (
            f"Kept from {source} ({counterexample.get('title') or 'a counterexample'}). It failed with: "
            f"{failure}. Each value the implementation chose is saved from the step that chose it; "
            "`answered` is the kind of answer a step got when it was recorded (another kind means the "
            "scenario did not reach the failure's state)."
        ),
    }
    if counterexample.get("requires"):
        scenario["requires"] = list(counterexample["requires"])
    if assumes:
        scenario["assumes"] = assumes
        scenario["not_applicable"] = "found under other parameters: it holds only where these parameter values do"
    scenario["steps"] = counterexample["steps"]
    return scenario
