"""The adapter protocol: how the kit drives an implementation.

An adapter wraps one implementation of one lifecycle spec. The kit talks to
it in JSON-compatible data only, so the same protocol can be carried over a
subprocess (JSON lines on stdio) by a thin transport.

Messages, in the order the kit sends them:

``describe()``
    Who the implementation is and what it declares::

        {"name": "my-runtime", "version": "1.2.0",
         "profile": "runtime-code" | None,        # a profile named by the spec
         "parameters": {"retention_limit": 20},   # values it declares (within
                                                  # the spec's bounds)
         "capabilities": {"concurrent": True}}    # may `call` run in parallel?

``reset(now_ms)``
    Forget everything; the virtual clock reads ``now_ms``. Called before
    every scenario and every generated example.

``set_clock(now_ms)``
    The kit moved the virtual clock forward. Returns the effects the
    implementation produced because time passed (a list, often empty).

``call(operation, args)``
    Run one operation named by the spec. Returns exactly one of::

        {"result": <json>, "effects": [...]}
        {"error": {"kind": "<stable kind>", "message": "<text>"}, "effects": [...]}

    An operation not implemented yet answers the error kind
    ``not_implemented``; the kit reports "operation X is not implemented".

    ``effects`` lists what the implementation did to its environment during
    the call, in order, each ``{"effect": "<name>", ...fields}`` (a
    cancellation request sent to a tool runtime, a turn requested, a message
    injected, a payload spilled to a file).

``close()``
    The run is over.

Implementations never read the wall clock for lifecycle decisions: the kit
owns time so that ties and retention are deterministic.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from typing import Any

__all__ = ["Adapter", "EffectRecorder", "error_response", "result_response"]


def result_response(result: Any, effects: list[dict] | None = None) -> dict:
    """A successful call's response."""
    return {"result": result, "effects": list(effects or [])}


def error_response(kind: str, message: str, effects: list[dict] | None = None) -> dict:
    """A rejected call's response: a stable kind plus a human message."""
    return {"error": {"kind": kind, "message": message}, "effects": list(effects or [])}


class EffectRecorder:
    """Collects the effects one call produces, per calling thread.

    Concurrent calls each see only their own effects: an environment callback
    running on thread T is attributed to the call running on thread T.
    """

    def __init__(self) -> None:
        self._local = threading.local()

    def begin(self) -> None:
        self._local.effects = []

    def record(self, effect: str, **fields: Any) -> None:
        effects = getattr(self._local, "effects", None)
        if effects is None:  # outside any call (e.g. a timer): keep for set_clock
            effects = self._local.effects = []
        effects.append({"effect": effect, **fields})

    def end(self) -> list[dict]:
        effects = getattr(self._local, "effects", None) or []
        self._local.effects = None
        return effects


class Adapter(ABC):
    """Base class for in-process Python adapters.

    A Python implementation plugs into the kit as ``module:attribute``, where
    the attribute is an Adapter subclass (or any callable returning an
    Adapter). Keyword options given on the command line with
    ``--adapter-opt KEY=VALUE`` are passed to that callable.
    """

    @abstractmethod
    def describe(self) -> dict:
        """Name, version, declared profile and parameters, capabilities."""

    @abstractmethod
    def reset(self, now_ms: int) -> None:
        """Start from nothing, with the virtual clock at ``now_ms``."""

    def set_clock(self, now_ms: int) -> list[dict]:
        """The virtual clock moved forward; return effects caused by time."""
        return []

    @abstractmethod
    def call(self, operation: str, args: dict) -> dict:
        """Run one spec operation; see the module docstring for the shape."""

    def close(self) -> None:  # noqa: B027  # optional: an adapter with nothing to release keeps this no-op
        """Release resources (temp files, processes)."""
