"""A single-threaded event loop on a virtual clock, in the manner of a JS runtime.

The loop has two queues, like a browser or Node event loop:

* **timers** (macrotasks): one-shot callbacks due at a virtual instant. They
  fire only while the host moves the clock (``advance_to``) or while an
  operation waits for a future (``run_until``); each fires at its own
  instant, in time order. Timers due at the same instant fire by *phase*
  (bodies returning, then deliveries, then evictions, then wake-ups), then
  by an order key (a job's start order), then in scheduling order.
* **microtasks**: callbacks queued by settling a :class:`Future`. They run to
  exhaustion after every timer, and whenever the host drains them at the
  end of an operation (``run_microtasks``), the way promise reactions run
  before control returns to the event loop.

Nothing here is thread-safe: like the runtime it imitates, the loop belongs
to one thread at a time, and its host serialises access.
"""

from __future__ import annotations

import functools
import heapq
import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BODY",
    "DELIVERY",
    "EVICTION",
    "WAKE",
    "AbortController",
    "AbortSignal",
    "Future",
    "Timer",
    "VirtualLoop",
]

# Phases of timers due at the same instant, in firing order.
BODY = 0
DELIVERY = 1
EVICTION = 2
WAKE = 3

_PENDING = object()


@dataclass(order=True)
class Timer:
    at_ms: int
    phase: int
    order: int
    seq: int
    callback: Callable[[], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self.cancelled = True  # dropped lazily when it comes due


class Future:
    """A promise: settled once, with a value or an exception; reactions run as microtasks."""

    def __init__(self, loop: VirtualLoop) -> None:
        self._loop = loop
        self._value: Any = _PENDING
        self._exception: BaseException | None = None
        self._callbacks: list[Callable[[Future], None]] = []

    def done(self) -> bool:
        return self._value is not _PENDING or self._exception is not None

    def result(self) -> Any:
        if self._exception is not None:
            raise self._exception
        if self._value is _PENDING:
            raise RuntimeError("future is still pending")
        return self._value

    def exception(self) -> BaseException | None:
        return self._exception

    def set_result(self, value: Any) -> bool:
        """Resolve; False (and nothing changes) if already settled."""
        if self.done():
            return False
        self._value = value
        self._schedule_callbacks()
        return True

    def set_exception(self, exception: BaseException) -> bool:
        """Reject; False (and nothing changes) if already settled."""
        if self.done():
            return False
        self._exception = exception
        self._schedule_callbacks()
        return True

    def add_done_callback(self, callback: Callable[[Future], None]) -> None:
        if self.done():
            self._loop.call_soon(lambda: callback(self))
        else:
            self._callbacks.append(callback)

    def _schedule_callbacks(self) -> None:
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            self._loop.call_soon(functools.partial(callback, self))


class AbortSignal:
    """The read side of an abort controller: listeners hear the abort once."""

    def __init__(self) -> None:
        self.aborted = False
        self._listeners: list[Callable[[], None]] = []

    def add_listener(self, listener: Callable[[], None]) -> None:
        if self.aborted:
            listener()
        else:
            self._listeners.append(listener)

    def _fire(self) -> None:
        if self.aborted:
            return
        self.aborted = True
        listeners, self._listeners = self._listeners, []
        for listener in listeners:
            listener()


class AbortController:
    def __init__(self) -> None:
        self.signal = AbortSignal()

    def abort(self) -> None:
        self.signal._fire()


class VirtualLoop:
    """Timers and microtasks on a clock that only the host moves."""

    def __init__(self, now_ms: int = 0) -> None:
        self._now = int(now_ms)
        # Where the current clock move is heading (the host's target while
        # advancing, the deadline while an operation waits).
        self.horizon = self._now
        self._timers: list[Timer] = []
        self._seq = itertools.count()
        self._microtasks: deque[Callable[[], None]] = deque()

    def now(self) -> int:
        return self._now

    def create_future(self) -> Future:
        return Future(self)

    def call_soon(self, callback: Callable[[], None]) -> None:
        self._microtasks.append(callback)

    def call_at(self, at_ms: int, phase: int, callback: Callable[[], None], order: int = 0) -> Timer:
        timer = Timer(max(int(at_ms), self._now), phase, order, next(self._seq), callback)
        heapq.heappush(self._timers, timer)
        return timer

    def call_later(self, delay_ms: int, phase: int, callback: Callable[[], None], order: int = 0) -> Timer:
        return self.call_at(self._now + int(delay_ms), phase, callback, order)

    def run_microtasks(self) -> None:
        while self._microtasks:
            self._microtasks.popleft()()

    def advance_to(self, now_ms: int) -> None:
        """Fire every timer due by ``now_ms``, each at its own instant."""
        now_ms = max(int(now_ms), self._now)
        self.horizon = now_ms
        self.run_microtasks()
        while self._fire_next(now_ms):
            pass
        self._now = now_ms

    def run_due(self) -> None:
        """Fire what is due at the current instant (work an operation left for now)."""
        self.advance_to(self._now)

    def run_until(self, future: Future, horizon_ms: int) -> None:
        """Run timers until ``future`` settles, then finish that instant.

        ``horizon_ms`` is the latest instant the wait may reach; a timer
        bound to settle the future by then (a timeout) must exist, since a
        wait with nothing left to fire is a bug in the caller.
        """
        self.horizon = int(horizon_ms)
        self.run_microtasks()
        while not future.done():
            if not self._fire_next(None):
                raise RuntimeError("waiting on a future that nothing will settle")
        self.advance_to(self._now)

    def _fire_next(self, limit_ms: int | None) -> bool:
        while self._timers and self._timers[0].cancelled:
            heapq.heappop(self._timers)
        if not self._timers or (limit_ms is not None and self._timers[0].at_ms > limit_ms):
            return False
        timer = heapq.heappop(self._timers)
        self._now = timer.at_ms
        timer.callback()
        self.run_microtasks()
        return True
