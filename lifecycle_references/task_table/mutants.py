"""Faulty variants of the reference task table, to check that the kit catches bugs.

Each mutant is one realistic bug: a subclass of one component (the table,
its wake-up signal or its clock) overriding the single method involved,
behind an adapter subclass that differs from TaskTableAdapter only in which
component it builds.
"""

from __future__ import annotations

import time
from dataclasses import replace

from ..mutant import Mutant
from .adapter import TaskTableAdapter
from .clock import VirtualClock, _Sleeper
from .runtime import RUNNING, BackgroundResult, BackgroundTasks, TaskSnapshot, _Entry
from .sync import Notify

__all__ = ["MUTANTS", "Mutant"]


# ------------------------------------------------------------------ cancel


class _CancelFlipsStatusEarly(BackgroundTasks):
    def cancel_task(self, job_id: str) -> bool | None:
        with self._lock:
            entry = self._tasks.get(job_id)
            if entry is None:
                return None
            if entry.status != RUNNING:
                return False
            entry.token.cancel()
            # Marked canceled at once, as if cancellation were immediate.
            entry.snapshot = replace(entry.snapshot, status=self.config.cancelled_status)
            return True


class _StatusFromBodyResult(BackgroundTasks):
    def _final_status(self, entry: _Entry, result: BackgroundResult) -> str:
        # Trusts the body to report its cancellation: a body that ignored its
        # token (or finished its work first) reads as completed.
        return self.config.cancelled_status if result.stopped else result.outcome


class _CancelFinishedTrue(BackgroundTasks):
    def cancel_task(self, job_id: str) -> bool | None:
        with self._lock:
            entry = self._tasks.get(job_id)
            if entry is None:
                return None
            entry.token.cancel()  # cancelling a finished task's token is harmless...
            return True  # ...but it is reported as a cancellation


class _CancelCheckThenAct(BackgroundTasks):
    def cancel_task(self, job_id: str) -> bool | None:
        with self._lock:
            entry = self._tasks.get(job_id)
            if entry is None:
                return None
            running = entry.status == RUNNING  # look under the lock...
        time.sleep(0.002)  # ...a realistic pause with the lock released...
        if running:
            entry.token.cancel()  # ...then act on what was seen: a task that finished meanwhile is "cancelled"
        return running


class _CancelAllMissesLaterTasks(BackgroundTasks):
    def cancel_all(self) -> None:
        # Cancels the tasks it sees, not the session: later spawns run normally.
        with self._lock:
            entries = [e for e in self._tasks.values() if e.status == RUNNING]
        for entry in entries:
            entry.token.cancel()


# ---------------------------------------------------------------- outcomes


class _CanceledNotQueued(BackgroundTasks):
    def _enqueue_outcome(self, snapshot: TaskSnapshot, result) -> None:
        if snapshot.status == self.config.cancelled_status:
            return  # "nobody wants the result of a cancelled task"
        super()._enqueue_outcome(snapshot, result)


class _DrainKeepsQueue(BackgroundTasks):
    def drain_completed(self) -> list[dict]:
        with self._lock:
            return list(self._completed)  # copied, never cleared


class _DrainCopyThenClear(BackgroundTasks):
    def drain_completed(self) -> list[dict]:
        with self._lock:
            drained = list(self._completed)  # copied under the lock...
        time.sleep(0.002)  # ...a pause with the lock released...
        with self._lock:
            self._completed = []  # ...then cleared: a racing drain returns the same outcomes again
        return drained


class _OutcomeTiesById(BackgroundTasks):
    """The outcome queue is kept sorted by (finish instant, id): a priority
    queue, where outcomes of one instant come out by id as a string."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._stamps: dict[str, tuple[int, str]] = {}

    def _enqueue_outcome(self, snapshot: TaskSnapshot, result: BackgroundResult) -> None:
        super()._enqueue_outcome(snapshot, result)
        outcome = self._completed.pop()
        stamp = self._stamps[outcome["job_id"]] = (self._clock.now(), outcome["job_id"])
        at = next((i for i, o in enumerate(self._completed) if self._stamps[o["job_id"]] > stamp), None)
        self._completed.insert(len(self._completed) if at is None else at, outcome)


class _EvictionDropsOutcome(BackgroundTasks):
    def _forget(self, job_id: str) -> None:
        del self._tasks[job_id]
        self._completed = [o for o in self._completed if o["job_id"] != job_id]


class _LosesWakeups(Notify):
    def notify_one(self) -> None:
        with self._lock:  # wakes current waiters only: a signal nobody waits for is lost
            for waiter in self._waiters:
                waiter.notified = True
            self._waiters.clear()


class _LostWakeup(BackgroundTasks):
    notify_class = _LosesWakeups


class _IdleWaitStaysEnrolled(BackgroundTasks):
    def wait_for_completion(self, wait_ms: int) -> tuple[bool, int]:
        start = self._clock.now()
        if self._clock._next_due(start + wait_ms) is None:
            # Nothing is due within the wait, so nothing can wake it: skip the waiting.
            # The early return enrolls the waiter and never withdraws it, so the next
            # signal wakes this finished wait instead of being stored as a permit.
            waiter = self._wake.enroll()
            if waiter.notified:
                return True, 0
            return False, self._clock.advance_to(start + wait_ms) - start
        return super().wait_for_completion(wait_ms)


# --------------------------------------------------------------- retention


class _KeepsOneFinishedTooMany(BackgroundTasks):
    def _evict_finished(self) -> None:
        while len(self._finished) > self.config.max_finished + 1:
            self._forget(self._finished.popleft())


class _EvictsRunning(BackgroundTasks):
    def _evict_finished(self) -> None:
        # Caps the whole table, oldest spawned first, running or not.
        while len(self._tasks) > self.config.max_finished:
            victim = next(iter(self._tasks))
            if victim in self._finished:
                self._finished.remove(victim)
            self._forget(victim)


class _EvictsNewest(BackgroundTasks):
    def _evict_finished(self) -> None:
        while len(self._finished) > self.config.max_finished:
            self._forget(self._finished.pop())


# ------------------------------------------------------------------ listing


class _NumericSort(BackgroundTasks):
    def list(self) -> list[TaskSnapshot]:
        prefix = len(self.config.id_prefix)
        with self._lock:
            return sorted((e.snapshot for e in self._tasks.values()), key=lambda s: int(s.job_id[prefix:]))


# --------------------------------------------------------------------- time


class _FiresInStartOrder(VirtualClock):
    def _next_due(self, target_ms: int) -> tuple[int, _Sleeper] | None:
        due = [(s.deadline, s) for s in self._sleepers if s.deadline is not None and s.deadline <= target_ms]
        return min(due, key=lambda d: d[1].order, default=None)  # forgot to order by deadline


# ----------------------------------------------------------------- registry


def _adapter_for(component: type) -> type[TaskTableAdapter]:
    name = component.__name__.lstrip("_") + "Adapter"
    slot = "clock_class" if issubclass(component, VirtualClock) else "runtime_class"
    return type(name, (TaskTableAdapter,), {slot: component, "__module__": __name__})


_TABLE = [
    (
        "cancel_flips_status_early",
        _CancelFlipsStatusEarly,
        "cancel_task marks a running task canceled at once instead of when its body returns.",
    ),
    (
        "status_from_body_result",
        _StatusFromBodyResult,
        "A task is canceled only if its body says it stopped for cancellation, not whenever its token was cancelled.",
    ),
    ("cancel_finished_true", _CancelFinishedTrue, "cancel_task answers true for a task that has already finished."),
    (
        "cancel_check_then_act",
        _CancelCheckThenAct,
        "cancel_task checks that the task runs, releases the lock, then cancels its token: "
        "a task finishing meanwhile is reported cancelled but ends completed.",
    ),
    (
        "cancel_all_misses_later_tasks",
        _CancelAllMissesLaterTasks,
        "cancel_all cancels the running tasks one by one but not the session, "
        "so tasks spawned later are not born cancelled.",
    ),
    (
        "canceled_not_queued",
        _CanceledNotQueued,
        "A canceled task's outcome is not queued (and does not fire the wake-up signal).",
    ),
    (
        "drain_keeps_queue",
        _DrainKeepsQueue,
        "drain_completed returns the queued outcomes but does not clear the queue.",
    ),
    (
        "drain_copy_then_clear",
        _DrainCopyThenClear,
        "drain_completed copies the queue, releases the lock, then clears it: two racing drains return the same outcomes.",
    ),
    (
        "outcome_ties_by_id",
        _OutcomeTiesById,
        "The outcome queue is a priority queue on (finish instant, id): outcomes of tasks that finished at one "
        "instant are drained by id as a string (bg-10 before bg-9) instead of in the order they finished.",
    ),
    (
        "eviction_drops_outcome",
        _EvictionDropsOutcome,
        "Evicting a finished task also removes its outcome from the queue before it was drained.",
    ),
    (
        "lost_wakeup",
        _LostWakeup,
        "The wake-up signal only wakes current waiters: a signal fired while nobody waits is lost.",
    ),
    (
        "idle_wait_stays_enrolled",
        _IdleWaitStaysEnrolled,
        "A wait with nothing due within it returns without withdrawing its waiter: the next wake-up goes to that "
        "finished wait instead of being stored, so the following wait is not woken.",
    ),
    ("keeps_65_finished", _KeepsOneFinishedTooMany, "Eviction keeps max_finished + 1 finished tasks."),
    (
        "evicts_running",
        _EvictsRunning,
        "Eviction caps the whole table, evicting the oldest task even if it is still running.",
    ),
    ("evicts_newest", _EvictsNewest, "Eviction removes the newest finished task instead of the oldest."),
    (
        "numeric_sort",
        _NumericSort,
        "list_jobs sorts by the id's number (bg-2 before bg-10) instead of by the id as a string.",
    ),
    (
        "fires_in_start_order",
        _FiresInStartOrder,
        "A clock move fires the due bodies in start order instead of in time order.",
    ),
]

# Steps of the shortest counterexample for each bug (Mutant.shortest), as a
# counterexample file counts them; tests/test_mutants.py holds the kit's
# reduced counterexamples to 1.5 times these.
SHORTEST: dict[str, int] = {
    'cancel_all_misses_later_tasks': 3,
    'cancel_check_then_act': 2,
    'cancel_finished_true': 3,
    'cancel_flips_status_early': 3,
    'canceled_not_queued': 3,
    'drain_copy_then_clear': 3,
    'drain_keeps_queue': 4,
    'eviction_drops_outcome': 67,
    'evicts_newest': 67,
    'evicts_running': 67,
    'fires_in_start_order': 4,
    'keeps_65_finished': 67,
    'lost_wakeup': 3,
    'idle_wait_stays_enrolled': 3,
    'numeric_sort': 11,
    'outcome_ties_by_id': 5,
    'status_from_body_result': 2,
}

MUTANTS: dict[str, Mutant] = {
    name: Mutant(name, description, _adapter_for(cls), SHORTEST[name]) for name, cls, description in _TABLE
}
