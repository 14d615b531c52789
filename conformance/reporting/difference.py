"""What differs between a failure's expected and observed values, in a few lines.

A failure carries both whole values (report.json, ``values/``); a reader of
summary.md needs what differs: the counts of two lists, the items missing,
unexpected or reordered (matched by an identifying key when the items have
one), the keys one object lacks or adds, and the first fields that differ,
each with its path. :func:`describe_difference` says that in at most
``limit`` lines, whatever the size of the values.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Difference", "describe_difference", "identity_key", "MAX_DIFFERENCE_LINES", "SHOWN_KEYS"]

MAX_DIFFERENCE_LINES = 24  # lines of one difference at most
SHOWN_KEYS = 8  # keys (or items) named in one line; the rest are counted
_FIELDS_SHOWN = 8  # differing fields listed
_TEXT = 120  # characters of one value shown


@dataclass
class Difference:
    """What differs, as lines (each one fact) and whether some were left out."""

    lines: list[str] = field(default_factory=list)
    left_out: int = 0

    def add(self, line: str, limit: int) -> None:
        if len(self.lines) < limit:
            self.lines.append(line)
        else:
            self.left_out += 1


def _brief(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= _TEXT else text[: _TEXT - 1] + "…"


def _named(values: list) -> str:
    shown = ", ".join(_brief(v) for v in values[:SHOWN_KEYS])
    more = len(values) - SHOWN_KEYS
    return shown + (f", … {more} more" if more > 0 else "")


def _scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool)) or value is None


def identity_key(*lists: list) -> str | None:
    """The field that identifies the items of these lists of objects: present
    in every item, a plain value, unique within each list; a name ending in
    ``id`` or ``key`` is preferred. None when there is no such field."""
    items = [item for values in lists for item in values]
    if not items or not all(isinstance(item, dict) for item in items):
        return None
    common = set(items[0]).intersection(*items[1:])
    candidates = [
        name
        for name in sorted(common)
        if all(_scalar(item[name]) for item in items)
        and all(len({json.dumps(i[name]) for i in values}) == len(values) for values in lists)
    ]
    preferred = [name for name in candidates if name.lower().endswith(("id", "key"))]
    return (preferred or candidates or [None])[0]


def _identities(values: list, key: str | None) -> list | None:
    """Each item's identity (the key's value, or a plain item itself), or
    None when the items cannot be told apart that way."""
    if key is not None:
        return [item[key] for item in values]
    if all(_scalar(item) for item in values) and len(set(map(_brief, values))) == len(values):
        return list(values)
    return None


def _lists(expected: list, observed: list, path: str, out: Difference, limit: int) -> None:
    counts = (
        f"{len(expected)} item(s) on both sides"
        if len(expected) == len(observed)
        else f"expected {len(expected)} item(s), observed {len(observed)}"
    )
    out.add(f"{path or 'the list'}: {counts}", limit)
    key = identity_key(expected, observed)
    exp_ids, obs_ids = _identities(expected, key), _identities(observed, key)
    if exp_ids is None or obs_ids is None:
        _items_in_order(expected, observed, path, out, limit)
        return
    label = f" ({key})" if key else ""
    exp_text, obs_text = [_brief(i) for i in exp_ids], [_brief(i) for i in obs_ids]
    missing = [i for i, t in zip(exp_ids, exp_text) if t not in set(obs_text)]
    extra = [i for i, t in zip(obs_ids, obs_text) if t not in set(exp_text)]
    if missing:
        out.add(f"missing{label}: {_named(missing)}", limit)
    if extra:
        out.add(f"unexpected{label}: {_named(extra)}", limit)
    common_exp = [t for t in exp_text if t in set(obs_text)]
    common_obs = [t for t in obs_text if t in set(exp_text)]
    if common_exp != common_obs:
        at = next(n for n, (a, b) in enumerate(zip(common_exp, common_obs)) if a != b)
        out.add(
            f"reordered{label}: from the {_ordinal(at + 1)} item they share, expected "
            f"{_clip(common_exp[at:])}, observed {_clip(common_obs[at:])}",
            limit,
        )
    if key is not None:
        by_key = {_brief(item[key]): item for item in observed}
        for item in expected:
            other = by_key.get(_brief(item[key]))
            if other is not None and other != item:
                _fields(item, other, f"{path}[{key}={_brief(item[key])}]", out, limit)


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _clip(texts: list[str]) -> str:
    shown = ", ".join(texts[:SHOWN_KEYS])
    return f"[{shown}{', …' if len(texts) > SHOWN_KEYS else ''}]"


def _items_in_order(expected: list, observed: list, path: str, out: Difference, limit: int) -> None:
    for n, (a, b) in enumerate(zip(expected, observed)):
        if a != b:
            _fields(a, b, f"{path}[{n}]", out, limit)
            return
    if len(expected) > len(observed):
        out.add(f"missing at the end: {_named(expected[len(observed) :])}", limit)
    elif len(observed) > len(expected):
        out.add(f"unexpected at the end: {_named(observed[len(expected) :])}", limit)


def _fields(expected: Any, observed: Any, path: str, out: Difference, limit: int) -> None:
    """The differing fields below ``path`` (the first few), the keys one side lacks."""
    if isinstance(expected, dict) and isinstance(observed, dict):
        _objects(expected, observed, path, out, limit)
    elif isinstance(expected, list) and isinstance(observed, list):
        _lists(expected, observed, path, out, limit)
    elif expected != observed:
        out.add(f"{path or 'the value'}: expected {_brief(expected)}, observed {_brief(observed)}", limit)


def _objects(expected: dict, observed: dict, path: str, out: Difference, limit: int) -> None:
    missing = [k for k in expected if k not in observed]
    extra = [k for k in observed if k not in expected]
    where = f"{path}: " if path else ""
    if missing:
        out.add(f"{where}missing key(s) {_named(missing)}", limit)
    if extra:
        out.add(f"{where}unexpected key(s) {_named(extra)}", limit)
    differing = [k for k in expected if k in observed and expected[k] != observed[k]]
    for k in differing[:_FIELDS_SHOWN]:
        _fields(expected[k], observed[k], f"{path}.{k}" if path else str(k), out, limit)
    if len(differing) > _FIELDS_SHOWN:
        out.add(f"{where}… {len(differing) - _FIELDS_SHOWN} more differing field(s)", limit)


def describe_difference(
    expected: Any, observed: Any, path: str = "", *, limit: int = MAX_DIFFERENCE_LINES
) -> Difference:
    """What differs between ``expected`` and ``observed`` (the values at
    ``path``), at most ``limit`` lines; ``left_out`` counts the facts past it."""
    out = Difference()
    _fields(expected, observed, path, out, limit)
    if not out.lines:
        out.add("the values are equal as JSON (the difference is in how they were judged)", limit)
    return out
