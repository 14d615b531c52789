"""A virtual clock that real threads sleep on.

Task bodies run on their own threads and wait with ``sleep(deadline, order,
*signals)``: until the clock reaches ``deadline`` or one of the signals fires
(a cancellation token, the end of the work). Only ``advance_to`` moves time.
It wakes the sleepers due by the target one at a time, each at its own
instant, earliest deadline first (ties: lowest ``order``, the body's start
order), and after each wake waits until every body thread is parked again or
has ended (quiescence). So what time does is deterministic although the
bodies are real threads.

The clock counts *runnable* body threads: a thread is runnable from
``enter()`` (before it starts) until it parks in ``sleep`` or calls
``leave()``; whoever wakes a parked thread counts it runnable again before
waking it, so there is no instant at which a woken body looks quiet.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Protocol

__all__ = ["ClockClosed", "Signal", "VirtualClock"]

_DUE = object()  # a sleeper's wake reason when its deadline came
_CLOSED = object()


class ClockClosed(Exception):
    """The clock was shut down while a thread slept on it: the thread must end."""


class Signal(Protocol):
    """Something a sleeper can be woken by (fires at most once)."""

    def subscribe(self, listener: Callable[[], None]) -> bool:
        """Register ``listener``; True (and nothing registered) if already fired."""

    def unsubscribe(self, listener: Callable[[], None]) -> None: ...


class _Sleeper:
    __slots__ = ("deadline", "order", "reason", "parked")

    def __init__(self, deadline: int | None, order: int) -> None:
        self.deadline = deadline
        self.order = order
        self.reason: object | None = None
        self.parked = False


class VirtualClock:
    def __init__(self, now_ms: int = 0) -> None:
        self._now = int(now_ms)
        self._cond = threading.Condition()
        self._mover = threading.Lock()  # one clock move at a time
        self._sleepers: list[_Sleeper] = []
        self._runnable = 0
        self._closed = False

    def now(self) -> int:
        return self._now

    # -------------------------------------------------------- body threads

    def enter(self) -> None:
        """A body thread is about to start: count it runnable."""
        with self._cond:
            self._runnable += 1

    def leave(self) -> None:
        """A body thread ended."""
        with self._cond:
            self._runnable -= 1
            self._cond.notify_all()

    def sleep(self, deadline: int | None, order: int, *signals: Signal) -> object | None:
        """Park until ``deadline`` (None: no deadline) or a signal fires.

        Returns the signal that fired, or None when the deadline came.
        Raises ClockClosed if the clock is shut down meanwhile.
        """
        sleeper = _Sleeper(deadline, order)
        subscribed: list[tuple[Signal, Callable[[], None]]] = []
        try:
            for signal in signals:
                listener = functools.partial(self._interrupt, sleeper, signal)
                if signal.subscribe(listener):
                    return signal
                subscribed.append((signal, listener))
            with self._cond:
                if sleeper.reason is None and not self._closed:
                    sleeper.parked = True
                    self._sleepers.append(sleeper)
                    self._runnable -= 1
                    self._cond.notify_all()
                    while sleeper.reason is None and not self._closed:
                        self._cond.wait()
                if self._closed and (sleeper.reason is None or sleeper.reason is _CLOSED):
                    raise ClockClosed()
                reason = sleeper.reason
        finally:
            for signal, registered in subscribed:
                signal.unsubscribe(registered)
        return None if reason is _DUE else reason

    def _interrupt(self, sleeper: _Sleeper, signal: Signal) -> None:
        with self._cond:
            self._wake(sleeper, signal)

    def _wake(self, sleeper: _Sleeper, reason: object) -> None:
        # Called with the condition held.
        if sleeper.reason is not None:
            return
        sleeper.reason = reason
        if sleeper.parked:
            sleeper.parked = False
            self._sleepers.remove(sleeper)
            self._runnable += 1
            self._cond.notify_all()

    # ---------------------------------------------------------------- time

    def advance_to(self, target_ms: int, stop: Callable[[], bool] | None = None) -> int:
        """Move time to ``target_ms``, waking sleepers at their own instants.

        With ``stop``, the move ends early at the first instant after which
        ``stop()`` holds (every sleeper due at that instant woken first).
        Returns the time reached.
        """
        with self._mover, self._cond:
            self._quiesce()
            while not self._closed:
                due = self._next_due(int(target_ms))
                if stop is not None and (due is None or due[0] > self._now) and stop():
                    return self._now
                if due is None:
                    break
                deadline, sleeper = due
                self._now = max(self._now, deadline)
                self._wake(sleeper, _DUE)
                self._quiesce()
            self._now = max(self._now, int(target_ms))
            return self._now

    def _next_due(self, target_ms: int) -> tuple[int, _Sleeper] | None:
        """The first sleeper due by ``target_ms``, with its deadline."""
        due = [(s.deadline, s) for s in self._sleepers if s.deadline is not None and s.deadline <= target_ms]
        return min(due, key=lambda d: (d[0], d[1].order), default=None)

    def _quiesce(self) -> None:
        while self._runnable > 0 and not self._closed:
            self._cond.wait()

    def close(self) -> None:
        """Shut down: every sleeper (now and later) raises ClockClosed."""
        with self._cond:
            self._closed = True
            for sleeper in list(self._sleepers):
                self._wake(sleeper, _CLOSED)
            self._cond.notify_all()
