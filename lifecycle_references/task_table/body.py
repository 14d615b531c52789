"""Task bodies played by the kit.

A body follows its plan on the virtual clock: it returns ``duration_ms``
after it starts, or when the kit ends its work (``finish_job``), with the
planned outcome and text. A body with ``stop_ms`` also watches its
cancellation token: once cancelled it winds down and returns ``stop_ms``
later, unless its work ends first; without ``stop_ms`` it ignores
cancellation.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from .runtime import COMPLETED, BackgroundResult, TaskContext

__all__ = ["BodyPlan", "KitWork", "PlannedBody"]


@dataclass(frozen=True)
class BodyPlan:
    duration_ms: int | None = None
    outcome: str = COMPLETED
    text: str = ""
    stop_ms: int | None = None


class KitWork:
    """The body's work, whose end the kit may decide: a one-shot signal
    carrying the outcome, closed once the body has returned."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._result: tuple[str, str] | None = None
        self._closed = False
        self._listeners: list[Callable[[], None]] = []

    def finish(self, outcome: str, text: str) -> bool:
        """The work ends now; False if the body had already returned (or was told)."""
        with self._lock:
            if self._closed or self._result is not None:
                return False
            self._result = (outcome, text)
            listeners, self._listeners = self._listeners, []
        for listener in listeners:
            listener()
        return True

    def close(self) -> tuple[str, str] | None:
        """The body returns: no more finishing; the kit's result if it gave one."""
        with self._lock:
            self._closed = True
            return self._result

    def subscribe(self, listener: Callable[[], None]) -> bool:
        with self._lock:
            if self._result is not None:
                return True
            self._listeners.append(listener)
            return False

    def unsubscribe(self, listener: Callable[[], None]) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)


class PlannedBody:
    def __init__(self, plan: BodyPlan, work: KitWork) -> None:
        self.plan = plan
        self.work = work

    def __call__(self, ctx: TaskContext) -> BackgroundResult:
        plan = self.plan
        deadline = None if plan.duration_ms is None else ctx.now() + plan.duration_ms
        stop_ms = plan.stop_ms
        watched = (self.work, ctx.token) if stop_ms is not None else (self.work,)
        stopped = False
        # Only a watched token can wake the sleep, so it is the token only with a stop_ms.
        if ctx.sleep(deadline, *watched) is ctx.token and stop_ms is not None:
            # The work goes on while the body winds down; whichever ends first.
            stop_at = ctx.now() + stop_ms
            if deadline is None or stop_at <= deadline:
                stopped = ctx.sleep(stop_at, self.work) is None
            else:
                ctx.sleep(deadline, self.work)
        played = self.work.close()
        outcome, text = played if played is not None else (plan.outcome, plan.text)
        return BackgroundResult(outcome, text, stopped)
