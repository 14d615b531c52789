"""Reading a call's arguments and an adapter's parameter overrides, for the
reference adapters: wrong shapes become ``BadArguments`` (answered as an
``invalid_arguments`` error), never a crash."""

from __future__ import annotations

from typing import Any, Literal, overload

__all__ = ["BadArguments", "choice", "coerce_params", "flag", "text", "whole"]


class BadArguments(Exception):
    """A call's arguments do not have the shape the operation takes."""


@overload
def text(args: dict, name: str, optional: Literal[False] = False) -> str: ...
@overload
def text(args: dict, name: str, optional: bool) -> str | None: ...


def text(args: dict, name: str, optional: bool = False) -> str | None:
    value = args.get(name)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise BadArguments(f"{name} must be a string")
    return value


@overload
def whole(
    args: dict, name: str, optional: Literal[False] = False, minimum: int = 1, maximum: int | None = None
) -> int: ...
@overload
def whole(args: dict, name: str, optional: bool, minimum: int = 1, maximum: int | None = None) -> int | None: ...


def whole(args: dict, name: str, optional: bool = False, minimum: int = 1, maximum: int | None = None) -> int | None:
    """A whole number within [minimum, maximum] (booleans are not numbers)."""
    value = args.get(name)
    if value is None and optional:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < minimum
        or (maximum is not None and value > maximum)
    ):
        bound = f"{minimum}..{maximum}" if maximum is not None else f">= {minimum}"
        raise BadArguments(f"{name} must be a whole number {bound}")
    return value


def choice(args: dict, name: str, choices: tuple, default: Any = None) -> Any:
    value = args.get(name)
    if value is None and default is not None:
        return default
    if value not in choices:
        raise BadArguments(f"{name} must be one of {list(choices)}")
    return value


def flag(args: dict, name: str) -> bool:
    value = args.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise BadArguments(f"{name} must be true or false")
    return value


def coerce_params(params: dict[str, Any], names: set[str], minimums: dict[str, int]) -> dict[str, Any]:
    """Parameter overrides as given to an adapter (strings, from a command
    line, or values): integers for the names in ``minimums`` (each at least its
    minimum), strings for the rest. Unknown names are a TypeError."""
    unknown = set(params) - names
    if unknown:
        raise TypeError(f"unknown parameters: {sorted(unknown)}")
    coerced: dict[str, Any] = {}
    for name, value in params.items():
        if name in minimums:
            if isinstance(value, bool):
                raise ValueError(f"{name} must be a whole number, not {value!r}")
            coerced[name] = int(value)
            if coerced[name] < minimums[name]:
                raise ValueError(f"{name} must be >= {minimums[name]}")
        else:
            coerced[name] = str(value)
    return coerced
