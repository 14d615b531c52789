"""Comparing a model prediction with an implementation's answer: the first
difference, explained (lists of records by membership). Used by the session
and by the linearizability check alike."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from statemachines import Matcher, ObservationError, Prediction, first_difference, to_jsonable

__all__ = ["compare", "observation_problem", "without_path", "records_left"]

# How many accepted differences one answer may carry before the rest is
# reported anyway (each accepted one is masked and the answer compared again).
_MAX_ACCEPTED = 32
# Other differing fields of the same object a failure's reason names.
_SIBLINGS_SHOWN = 3
_SIBLING_REASON = 80  # characters of a sibling's reason shown (longer: only its path)
_ANYTHING = Matcher((("any", None),))
_PATH_PART = re.compile(r"[^.\[\]]+|\[[0-9]{1,18}\]")  # ASCII indexes: int() never fails


def _list_at(root: Any, path: str) -> tuple[str, Any] | None:
    """The innermost list on ``path`` (e.g. ``result.jobs[3].status`` -> the
    ``jobs`` list) and its own path."""
    node, walked, found = root, "", None
    for part in _path_parts(path):
        if part.startswith("["):
            if not isinstance(node, list):
                break
            found = (walked, node)
            index = int(part[1:-1])
            if index >= len(node):
                break
            node, walked = node[index], f"{walked}{part}"
        else:
            if not isinstance(node, dict) or part not in node:
                break
            node, walked = node[part], f"{walked}.{part}" if walked else part
    else:
        if isinstance(node, list):  # the path names the list itself
            found = (walked, node)
    return found


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _membership(expected_root: Any, observed_root: Any, path: str, key: str | None) -> tuple[str, Any, Any, str] | None:
    """For lists of entity records: which records are missing or unexpected,
    or that the right ones come in the wrong order, as (the list's path, the
    expected list, the observed list, what is wrong)."""
    if not key:
        return None
    exp, obs = _list_at(expected_root, path), _list_at(observed_root, path)
    if not exp or not obs or exp[0] != obs[0]:
        return None

    def keys_of(items: list) -> list:
        if items and all(isinstance(i, str) for i in items):
            return list(items)  # a list of strings (ids, messages): the items themselves
        return [i.get(key) for i in items if isinstance(i, dict)]

    strings = all(isinstance(i, str) for i in exp[1] + obs[1])
    label = "item" if strings else key  # a message queue's strings are not the entity's keys

    exp_keys, obs_keys = keys_of(exp[1]), keys_of(obs[1])
    if len(exp_keys) != len(exp[1]) or len(obs_keys) != len(obs[1]) or None in exp_keys + obs_keys:
        return None
    missing, extra = _unmatched(exp_keys, obs_keys), _unmatched(obs_keys, exp_keys)
    if not missing and not extra:
        if exp_keys != obs_keys:
            return (
                exp[0],
                exp[1],
                obs[1],
                f"the right {label}s in the wrong order: expected {_json(exp_keys)}, got {_json(obs_keys)}",
            )
        return None
    parts = [
        f"expected {len(exp_keys)} item(s), got {len(obs_keys)}"
        if len(exp_keys) != len(obs_keys)
        else f"{len(exp_keys)} item(s) as expected, but not the same ones"
    ]
    if missing:
        parts.append(f"missing {label} {', '.join(map(_json, missing))}")
    if extra:
        parts.append(f"unexpected {label} {', '.join(map(_json, extra))}")
    return exp[0], exp[1], obs[1], "; ".join(parts)


def _unmatched(items: list, others: list) -> list:
    """The items of ``items`` that ``others`` has no match for, one for one:
    five "Bash" against four leaves one "Bash" unmatched. Values that cannot
    be hashed (records, effects) on either side are matched by equality."""
    try:
        left = Counter(others)
        unmatched = []
        for item in items:
            if left[item] > 0:
                left[item] -= 1
            else:
                unmatched.append(item)
        return unmatched
    except TypeError:  # a dict or list among them
        rest, unmatched = list(others), []
        for item in items:
            if item in rest:
                rest.remove(item)
            else:
                unmatched.append(item)
        return unmatched


def records_left(prediction, observation: dict, path: str, key: str | None) -> str | None:
    """For a difference at ``path`` inside a list of records (or strings) of
    the result: which records the observation lacks or adds against the
    prediction, or that they come in another order (``result.jobs: expected
    12 item(s), got 11; missing job_id "job-7"``); None when ``path`` is in
    no such list or the lists hold the same records in the same order."""
    if not prediction.ok or not isinstance(observation, dict) or "result" not in observation:
        return None
    found = _membership({"result": to_jsonable(prediction.result)}, {"result": observation["result"]}, path, key)
    return None if found is None else f"{found[0]}: {found[3]}"


def _path_parts(path: str) -> list[str]:
    """A difference's path as its keys and ``[n]`` indexes."""
    return _PATH_PART.findall(path)


def _answer_of(prediction) -> dict:
    """A prediction as the answer it stands for: result, error and effects."""
    return {"result": prediction.result, "error": prediction.error, "effects": prediction.effects}


def compare(prediction, observation: dict, key: str | None = None, accept=None, *, siblings: bool = False):
    """The first difference between a model prediction and an observation, as
    (path, expected, observed, reason), or None. ``key`` names the entity key,
    so differing lists of records are explained by membership. ``accept``
    (path, expected, observed) -> bool says which differences an accepted
    deviation covers: those are masked and the answer compared again, so a
    difference the team did not accept is still found behind them. With
    ``siblings`` the reason also names the other fields of the same object
    that differ (a record whose status and text both differ says both; the
    path stays the first field's, so the failure's signature is unchanged)."""
    diff = _first(prediction, observation, key)
    for _ in range(_MAX_ACCEPTED):
        if diff is None or accept is None or not accept(diff[0], diff[1], diff[2]):
            break
        prediction = _masked(prediction, diff[0])
        if prediction is None:  # the whole answer was accepted
            return None
        diff = _first(prediction, observation, key)
    if diff is None or not siblings:
        return diff
    also = _sibling_differences(prediction, observation, diff[0], accept)
    if not also:
        return diff
    return (diff[0], diff[1], diff[2], f"{diff[3]}; also {'; '.join(also)}")


def _sibling_differences(prediction, observation: dict, path: str, accept) -> list[str]:
    """The other keys of the object holding ``path``'s last key whose values
    differ too (the first few, in sorted order), each with its reason; none
    when ``path`` does not end in an object's key."""
    parts = _path_parts(path)
    if len(parts) < 2 or parts[-1].startswith("["):
        return []
    expected = _at(_answer_of(prediction), parts[:-1])
    observed = _at(observation, parts[:-1])
    if not isinstance(expected, dict) or not isinstance(observed, dict):
        return []
    found: list[str] = []
    for name in sorted(expected, key=str):
        if name == parts[-1] or name not in observed:
            continue
        where = f"{path[: len(path) - len(parts[-1])]}{name}"
        diff = first_difference(expected[name], observed[name], where)
        if diff is None or (accept is not None and accept(diff.path, diff.expected, diff.observed)):
            continue
        if len(found) == _SIBLINGS_SHOWN:
            found.append("more fields differ")
            break
        short = diff.path == where and len(diff.reason) <= _SIBLING_REASON
        found.append(f"{diff.path}: {diff.reason}" if short else f"{diff.path} differs")
    return found


def _at(node: Any, parts: list[str]) -> Any:
    """The value at ``parts`` (keys and ``[n]`` indexes) below ``node``; None
    when it is not there."""
    for part in parts:
        if part.startswith("["):
            index = int(part[1:-1])
            node = node[index] if isinstance(node, list) and index < len(node) else None
        else:
            node = node.get(part) if isinstance(node, dict) else None
    return node


def _masked(prediction, path: str):
    """The prediction with nothing demanded at ``path`` (a key dropped, a list
    item or a whole list accepted as it is), or None when the path is the
    whole answer."""
    parts = _path_parts(path)
    if len(parts) < 2 or parts[0] not in ("result", "error", "effects"):
        return None
    root = _answer_of(prediction)
    root = without_path(root, path)
    return Prediction(result=root["result"], error=root["error"], effects=root["effects"])


def without_path(node, path: str):
    """A copy of ``node`` demanding nothing at ``path`` (``result.jobs[2].status``):
    a key there is dropped, a list item there matches anything."""
    parts = _path_parts(path)
    return _without(node, parts) if parts else node


def _without(node, parts: list):
    head, rest = parts[0], parts[1:]
    if head.startswith("["):
        index = int(head[1:-1])
        if not isinstance(node, list) or index >= len(node):
            return node
        copy = list(node)
        copy[index] = _ANYTHING if not rest else _without(node[index], rest)
        return copy
    if not isinstance(node, dict) or head not in node:
        return node
    trimmed = dict(node)
    if rest:
        trimmed[head] = _without(node[head], rest)
    else:
        del trimmed[head]
    return trimmed


def _first(prediction, observation: dict, key: str | None):
    if prediction.ok and "error" in observation:
        err = observation["error"]
        return (
            "error",
            {"result": to_jsonable(prediction.result)},
            err,
            f"expected success, got error {err['kind']}: {err['message']}",
        )
    if not prediction.ok and "result" in observation:
        return (
            "result",
            {"error": prediction.error},
            observation["result"],
            f"expected error {prediction.error['kind']}, got a result",
        )
    if not prediction.ok:
        diff = first_difference(prediction.error, observation["error"], "error")
    else:
        diff = first_difference(prediction.result, observation["result"], "result")
        if diff:
            wrapped_exp, wrapped_obs = {"result": to_jsonable(prediction.result)}, {"result": observation["result"]}
            membership = _membership(wrapped_exp, wrapped_obs, diff.path, key)
            if membership:  # the records themselves differ: that is the news, not the first field to differ
                where, expected, observed, what = membership
                first = "" if diff.path == where else f" (first difference at {diff.path}: {diff.reason})"
                return (where, expected, observed, what + first)
    if diff:
        return (diff.path, diff.expected, diff.observed, diff.reason)
    expected_effects, observed_effects = prediction.effects, observation.get("effects", [])
    diff = first_difference(expected_effects, observed_effects, "effects")
    if diff is None:
        return None
    reason = _effects_reason(expected_effects, observed_effects, diff)
    if len(expected_effects) != len(observed_effects):  # an effect more or less: that is the news, at the list
        return ("effects", expected_effects, observed_effects, reason)
    return (diff.path, diff.expected, diff.observed, reason)


_EFFECTS_NAMED = 3  # missing or unexpected effects written out in a reason; the rest are counted
_FIELD_SHOWN = 40  # characters of one field's value in an effect written out


def _effects_reason(expected: list, observed: list, diff: Any) -> str:
    """Why two effect lists differ. Alike in kinds and number: the first
    differing field. Otherwise which effects are missing and which are
    unexpected, each written out with its fields (a list of kinds alone,
    ``delivery_failed`` five times against four, does not say which one is
    missing), then the first difference by position (the failure's path). The
    same effects in another order are written out in both orders."""
    names, got = [_kind(e) for e in expected], [_kind(e) for e in observed]
    missing, unexpected = _unmatched(expected, observed), _unmatched(observed, expected)
    if names == got:
        if missing or unexpected or len(expected) < 2:
            return diff.reason
        return f"{diff.reason}; the right effects in the wrong order: expected {_written(expected)}, got {_written(observed)}"
    if len(expected) != len(observed):
        head = f"expected {len(expected)} effect(s), got {len(observed)}"
    else:
        head = f"expected effects {_json(names)}, got {_json(got)}"
    if missing or unexpected:
        parts = [
            f"{what} {_written(items)}" for what, items in (("missing", missing), ("unexpected", unexpected)) if items
        ]
    else:
        parts = ["the right effects in the wrong order"]
    return f"{head}; {'; '.join(parts)}; by position: {diff.reason}"


def _kind(effect: Any) -> Any:
    return effect.get("effect") if isinstance(effect, dict) else effect


def _written(effects: list) -> str:
    """Effects written out, ``delivery_failed(job_id="bg_2", attempt=1)``, the
    first few of them, with how many more there are."""
    shown = [_effect_text(e) for e in effects[:_EFFECTS_NAMED]]
    more = len(effects) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more else "")


def _effect_text(effect: Any) -> str:
    if not isinstance(effect, dict):
        return _json(effect)
    fields = []
    for name, value in effect.items():
        if name == "effect":
            continue
        text = _json(value)
        fields.append(f"{name}={text if len(text) <= _FIELD_SHOWN else text[: _FIELD_SHOWN - 1] + '…'}")
    return f"{effect.get('effect', '?')}({', '.join(fields)})"


def observation_problem(exc: ObservationError, response: Any) -> str:
    """What the model missed in an answer, said as what differs: an error
    answer where the model, predicting success, needed a value from the
    result or its effects is "expected success, got error ..." first, as
    every other wrong error is (``_first``)."""
    error = response.get("error") if isinstance(response, dict) else None
    if isinstance(error, dict) and "kind" in error:
        return f"expected success, got error {error['kind']}: {error.get('message', '')}; {exc}"
    return str(exc)
