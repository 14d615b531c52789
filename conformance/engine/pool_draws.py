"""Pools seed the draw; the argument's JSON Schema bounds it.

An argument with ``x-draw: {pool: NAME}`` mostly takes one of the pool's
values (``exploration.pools``). A share of its draws (``BeyondPools``,
``--beyond-pools``, 12 % by default) leaves the pool: two thirds as near
misses (engine/key_shapes.py ``value_variants``) of a value the example
already sent for the pool, one third as values of the argument's own JSON
Schema (engine/schema_draws.py). Each value is checked against that schema
and is one a caller can send, so a correct implementation still passes;
the report counts the draws that took each way. A draw stays raw
(``NearMiss``: a pick, resolved against what the example sent), so its
shape never depends on the state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from statemachines.tools.limits import strip_hints

from . import choices, schema_draws
from .key_shapes import LONGEST, value_variants

__all__ = ["FILE_NAME_CHARS", "BeyondPools", "FromSchema", "NearMiss", "PoolArgument"]

# A value of an argument that may end up in a file name stays this short when drawn beyond its pool.
FILE_NAME_CHARS = 32


@dataclass(frozen=True, eq=False)
class PoolArgument:
    """What a draw beyond its pool needs to know of one pool-drawn argument."""

    allowed: Callable[[Any], bool]  # its JSON Schema's check (hints stripped)
    file_name: bool  # it may end up in a file name (statemachines.tools.naming)
    patterned: bool  # its schema has a pattern: a final newline would pass Python's `$`
    schema: dict
    values: tuple  # the pool's
    bounds: tuple = ()  # the schema's minimum and maximum, for a number


@dataclass(frozen=True)
class NearMiss:
    pick: int  # which value the example used (or pool value), and which of its near misses


@dataclass(frozen=True)
class FromSchema:
    value: Any


class BeyondPools:
    """Pools seed the draw; the argument's schema bounds it. Of 256 draws of a
    pool-drawn argument, ``near`` are a near miss (engine/key_shapes.py
    ``value_variants``) of a value this example sent for the pool (of a pool
    value before it sent any) and ``drawn`` a value of the argument's JSON
    Schema; each stays inside that schema and is one a caller can send (no
    NUL, no leading dash, a file name part no path and at most
    FILE_NAME_CHARS long), so a correct implementation still passes. With a
    share of 0 the draw is the pool's alone, as before. ``counts`` is what the
    report shows: how many draws of pool-drawn arguments took each way."""

    def __init__(self, share: float, file_named: frozenset[tuple[str, str]]):
        self.share = share
        self.near = round(256 * share / 100 * 2 / 3)
        self.drawn = min(256 - self.near, round(256 * share / 100 / 3))
        self.file_named = file_named
        self.used: dict[str, list] = {}  # per pool, the values this example sent, newest last
        self.counts = {"pool": 0, "near_miss": 0, "schema": 0}
        self._variants: dict[tuple, list] = {}

    def report(self) -> dict:
        """The share set and the draws of each way (none when the spec draws nothing from a pool)."""
        return {"share": self.share, **self.counts} if any(self.counts.values()) else {}

    def argument(self, op: str, prop: str, schema: dict, values: list) -> PoolArgument:
        plain = strip_hints(schema)
        file_name = (op, prop) in self.file_named
        bounds = tuple(plain[k] for k in ("minimum", "maximum") if isinstance(plain.get(k), int))
        return PoolArgument(schema_draws.allows(plain), file_name, "pattern" in plain, plain, tuple(values), bounds)

    def drawer(self, argument: PoolArgument) -> choices.Drawer:
        values = argument.values
        if not (self.near or self.drawn):
            return choices.sampled(values)
        keep = 256 - self.near - self.drawn
        n, near_end = len(values), keep + self.near
        from_schema = self._schema_drawer(argument) if self.drawn else None

        def draw(data):
            x = data.draw_integer(0, 255)  # 0, where shrinking goes, is the pool's first value
            if x < keep:
                return values[x % n]
            if x < near_end or from_schema is None:
                return NearMiss(data.draw_integer(0, 255))
            return FromSchema(from_schema(data))

        return draw

    def _schema_drawer(self, argument: PoolArgument) -> choices.Drawer | None:
        try:
            strategy = schema_draws.from_schema(argument.schema)
        except schema_draws.UnsupportedSchema:
            return None  # its pool stands for values the kit cannot draw
        return choices.nested(strategy.filter(lambda value: self._sendable(value, argument)))

    @staticmethod
    def _sendable(value: Any, argument: PoolArgument) -> bool:
        """Whether a caller can send ``value`` as it is (a program's argv holds no NUL and takes
        a leading dash for an option; a file name part holds no path and stays short)."""
        if not isinstance(value, str):
            return True
        if "\x00" in value or value.startswith("-") or (argument.patterned and "\n" in value):
            return False
        return not argument.file_name or ("/" not in value and "\\" not in value and len(value) <= FILE_NAME_CHARS)

    def resolve(self, raw: Any, pool: str, argument: PoolArgument) -> Any:
        """The value a raw draw stands for, in this example (counted)."""
        if isinstance(raw, NearMiss):
            value, way = self._near_miss(raw.pick, pool, argument), "near_miss"
        elif isinstance(raw, FromSchema):
            value, way = raw.value, "schema"
        else:
            value, way = raw, "pool"
        self.counts[way] += 1
        used = self.used.setdefault(pool, [])
        if not used or used[-1] != value:
            used.append(value)
            del used[:-4]
        return value

    def _near_miss(self, pick: int, pool: str, argument: PoolArgument) -> Any:
        """Of the values this example sent for the pool (newest first), or the pool's
        values, the one ``pick`` selects, as the near miss it selects (itself when
        it has none)."""
        bases = self.used.get(pool) or argument.values
        base = bases[-1 - (pick >> 4) % len(bases)]
        variants = self._variants_of(base, argument)
        return variants[pick % len(variants)] if variants else base

    def _variants_of(self, base: Any, argument: PoolArgument) -> list:
        key = (base, id(argument)) if isinstance(base, (str, int)) else None
        found = self._variants.get(key) if key is not None else None
        if found is None:
            found = self._variants_for(base, argument)
            if key is not None:
                if len(self._variants) > 4096:
                    self._variants.clear()
                self._variants[key] = found
        return found

    def _variants_for(self, base: Any, argument: PoolArgument) -> list:
        if isinstance(base, bool) or not isinstance(base, (str, int)):
            return []
        if isinstance(base, int):  # a number's near misses: the bounds its schema allows
            return [v for v in argument.bounds if v != base and argument.allowed(v)]
        limit = argument.schema.get("maxLength")
        lengths: tuple[int, ...] = (int(limit),) if isinstance(limit, int) else LONGEST
        if argument.file_name:
            lengths = tuple(n for n in lengths if n <= FILE_NAME_CHARS)

        def allowed(value: str) -> bool:
            return argument.allowed(value) and self._sendable(value, argument)

        return value_variants(base, allowed, paths=not argument.file_name, lengths=lengths)
