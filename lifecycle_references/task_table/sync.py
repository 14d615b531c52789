"""Synchronisation primitives of the task table, for threads.

``CancellationToken`` is a tree of cancellation flags: cancelling a token
cancels its children, and a child taken from a cancelled token is born
cancelled. ``Notify`` is a wake-up signal that keeps at most one permit: a
``notify_one`` with nobody waiting is stored, not lost.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

__all__ = ["CancellationToken", "Notify", "Waiter"]


class CancellationToken:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._listeners: list[Callable[[], None]] = []
        self._children: list[CancellationToken] = []
        self._parent: CancellationToken | None = None

    def child_token(self) -> CancellationToken:
        child = CancellationToken()
        with self._lock:
            if self._cancelled:
                child._cancelled = True
            else:
                child._parent = self
                self._children.append(child)
        return child

    def is_cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
            listeners, self._listeners = self._listeners, []
            children, self._children = self._children, []
        for listener in listeners:  # outside the lock: listeners take their own locks
            listener()
        for child in children:
            child.cancel()

    def detach(self) -> None:
        """The token's holder is gone: stop being reachable from the parent."""
        parent = self._parent
        if parent is not None:
            with parent._lock:
                if self in parent._children:
                    parent._children.remove(self)
            self._parent = None

    # A token is a signal a sleeping thread can be woken by (see clock.Signal).

    def subscribe(self, listener: Callable[[], None]) -> bool:
        with self._lock:
            if self._cancelled:
                return True
            self._listeners.append(listener)
            return False

    def unsubscribe(self, listener: Callable[[], None]) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)


class Waiter:
    """One registered wait on a Notify."""

    __slots__ = ("notified",)

    def __init__(self) -> None:
        self.notified = False


class Notify:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._permit = False
        self._waiters: deque[Waiter] = deque()

    def notify_one(self) -> None:
        """Wake the oldest waiter; with nobody waiting, store the permit."""
        with self._lock:
            if self._waiters:
                self._waiters.popleft().notified = True
            else:
                self._permit = True

    def enroll(self) -> Waiter:
        """Start waiting: a stored permit is consumed at once (the waiter is notified)."""
        waiter = Waiter()
        with self._lock:
            if self._permit:
                self._permit = False
                waiter.notified = True
            else:
                self._waiters.append(waiter)
        return waiter

    def withdraw(self, waiter: Waiter) -> bool:
        """Stop waiting; returns whether the waiter was notified."""
        with self._lock:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            return waiter.notified
