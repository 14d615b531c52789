"""A spec's declared limits (``exploration.limits``) and their edge values.

A limit is a number the spec's rules turn on: a retention window, a cap, a
length. Bugs sit next to it (``>`` written for ``>=``), so the exploration
draws values one below, at and one above each limit where the limit says:
clock moves (milliseconds), arguments (an integer as the value; a string as
its length in characters, bytes or lines, each also with a trailing newline
and with multi-byte characters), and batch counts. Only values the
argument's schema accepts are drawn, and only edges some target can take are
declared for coverage ("boundary-classes").

Pure data: no Hypothesis here; the engine builds its strategies from this.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jsonschema

from ..errors import ExpressionError
from ..load.spec import Spec

__all__ = ["EDGE_CLASSES", "LimitEdges", "limit_edges", "exploration_applies", "strip_hints", "text_edges"]

EDGE_CLASSES = ("below", "at", "above")


@dataclass
class LimitEdges:
    """One limit under one set of parameters: its value and, per target, the
    edge values (by class) that target can take."""

    name: str
    value: int
    clock: dict[str, int] = field(default_factory=dict)  # class -> milliseconds
    args: dict[tuple[str, str], dict[str, list]] = field(default_factory=dict)  # (op, arg) -> class -> values
    batches: dict[str, dict[str, int]] = field(default_factory=dict)  # batch -> class -> item count

    def classes(self) -> list[str]:
        """The edge classes some target can take, in order."""
        taken = set(self.clock).union(*self.args.values(), *self.batches.values())
        return [c for c in EDGE_CLASSES if c in taken]

    def edge_value(self, edge: str) -> int:
        return self.value + EDGE_CLASSES.index(edge) - 1


def exploration_applies(item: dict, params: dict, offered) -> bool:
    """Whether an exploration item (a batch, a concurrent group) runs under
    ``params``: its ``assumes`` holds and every operation it calls is offered."""
    calls = [phase["call"] for phase in item["phases"]] if "phases" in item else list(item.get("calls") or ())
    holds = item.get("assumes") is None or item["assumes"].evaluate_bool({"params": params}, role="an `assumes`")
    return holds and all(call in offered for call in calls)


def text_edges(size: int, unit: str) -> list[str]:
    """Strings of ``size`` in ``unit``: plain ASCII, ending in a newline, and
    with multi-byte characters (as many characters or bytes as the unit counts);
    in lines, also with a carriage return inside each line."""
    if size < 0:
        return []
    if unit == "lines":
        if size == 0:
            return [""]
        # ... and lines holding a lone carriage return: no line break to the spec's count
        # (line_count: newlines + 1), one to universal-newline counting (str.splitlines, \r|\r?\n).
        return ["\n".join(["x"] * size), "x\n" * size, "\n".join(["é"] * size), "\n".join(["x\ry"] * size)]
    plain = "a" * size
    out = [plain]
    if size >= 1:
        out.append("a" * (size - 1) + "\n")
    if unit == "bytes":
        if size >= 2:
            out.append("é" * (size // 2) + "a" * (size % 2))  # fewer characters, the same bytes
    elif size >= 1:
        out.append("é" * size)  # the same characters, twice the bytes
    return out


def _accepts(schema: dict, value: Any) -> bool:
    try:
        jsonschema.Draft202012Validator(schema).validate(value)
    except jsonschema.ValidationError:
        return False
    return True


def strip_hints(schema: Any) -> Any:
    """A JSON Schema without the kit's ``x-`` hints (``x-draw``), as validators and generators read it."""
    if isinstance(schema, dict):
        return {k: strip_hints(v) for k, v in schema.items() if not k.startswith("x-")}
    if isinstance(schema, list):
        return [strip_hints(v) for v in schema]
    return schema


def limit_edges(spec: Spec, params: dict) -> list[LimitEdges]:
    """Every limit that applies under ``params`` with its edge values per
    target; limits whose ``assumes`` fails, or whose value is not an integer,
    are left out (the spec linter reports the latter)."""
    ex = spec.exploration
    offered = spec.offered_operations(params)
    batches = {b["name"]: b for b in ex.batches if exploration_applies(b, params, offered)}
    out = []
    for limit in ex.limits:
        env = {"params": params}
        value = _limit_value(limit, env)
        if value is None:
            continue
        edges = LimitEdges(limit["name"], value)
        wanted = {edge: value + offset for edge, offset in zip(EDGE_CLASSES, (-1, 0, 1))}
        if limit["clock"]:
            edges.clock = {edge: ms for edge, ms in wanted.items() if ms >= 0}
        edges.args = _argument_edges(spec, limit, offered, wanted)
        edges.batches = _batch_edges(limit, batches, env, wanted)
        if edges.classes():
            out.append(edges)
    return out


def _limit_value(limit: dict, env: dict) -> int | None:
    """The limit's integer value under ``env``, or None when its ``assumes``
    fails or its value is not an integer (or cannot be evaluated)."""
    if limit["assumes"] is not None and not limit["assumes"].evaluate_bool(env, role="an `assumes`"):
        return None
    value = limit["value"]
    try:
        value = value if isinstance(value, int) else value.evaluate(env)
    except ExpressionError:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _argument_edges(
    spec: Spec, limit: dict, offered: frozenset[str], wanted: dict[str, int]
) -> dict[tuple[str, str], dict[str, list]]:
    """Per (operation, argument) the limit names: the values of each edge the argument's schema accepts."""
    out: dict[tuple[str, str], dict[str, list]] = {}
    for op, arg in limit["args"]:
        if op not in offered:
            continue
        schema = strip_hints((spec.operations[op].args_schema.get("properties") or {}).get(arg) or {})
        table: dict[str, list] = {}
        for edge, n in wanted.items():
            candidates = [n] if schema.get("type") != "string" else text_edges(n, limit["unit"])
            values = [v for v in candidates if _accepts(schema, v)]
            if values:
                table[edge] = values
        if table:
            out[(op, arg)] = table
    return out


def _batch_edges(limit: dict, batches: dict[str, dict], env: dict, wanted: dict[str, int]) -> dict[str, dict[str, int]]:
    """Per batch the limit names (that applies): the edge item counts within the batch's count range."""
    out: dict[str, dict[str, int]] = {}
    for name in limit["batches"]:
        batch = batches.get(name)
        if batch is None:
            continue
        low = int(batch["count"]["min"].evaluate(env))
        high = max(low, int(batch["count"]["max"].evaluate(env)))
        table = {edge: n for edge, n in wanted.items() if low <= n <= high}
        if table:
            out[name] = table
    return out
