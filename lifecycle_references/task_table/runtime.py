"""A session's background task table.

``spawn`` starts a task body on its own thread with a cancellation token of
its own, a child of the session's token, and returns its id (``bg-<n>``)
at once. Cancellation is cooperative: ``cancel_task`` only cancels the
task's token; the body notices (or not) and returns when it is done. When a
body returns, its entry becomes ``canceled`` if its token was cancelled by
then (whatever the body returned), else ``completed``/``failed``; its
outcome is queued for the session driver, the wake-up signal fires, and the
oldest finished entries beyond ``max_finished`` are evicted (running ones
never are). The driver drains the outcome queue, and waits on the wake-up
signal, whose stored permit makes a signal fired while nobody waits count.

Entries live behind one lock. Time is the injected virtual clock's: bodies
sleep on it, and only moving it (``advance``, ``wait_for_completion``) makes
their timers fire.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from .clock import ClockClosed, VirtualClock
from .sync import CancellationToken, Notify

__all__ = [
    "COMPLETED",
    "FAILED",
    "RUNNING",
    "BackgroundResult",
    "BackgroundTasks",
    "TaskConfig",
    "TaskContext",
    "TaskHandle",
    "TaskSnapshot",
]

RUNNING = "running"
COMPLETED = "completed"
FAILED = "failed"

JOIN_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class TaskConfig:
    max_finished: int = 64
    id_prefix: str = "bg-"
    id_counter_start: int = 1
    cancelled_status: str = "canceled"
    # What a drained outcome of a cancelled task says: the table's status, or
    # ("body_outcome") only what the body returned, as some tables do.
    drained_cancel_status: str = "table_status"
    msg_unknown_job: str = "Job not found: {job_id}"


@dataclass(frozen=True)
class BackgroundResult:
    """What a body returns: its outcome and text, and whether it stopped
    because it noticed its cancellation."""

    outcome: str
    text: str
    stopped: bool = False


@dataclass(frozen=True)
class TaskSnapshot:
    job_id: str
    label: str
    status: str
    result_text: str | None
    error_text: str | None

    def to_record(self) -> dict:
        return {
            "job_id": self.job_id,
            "label": self.label,
            "status": self.status,
            "result_text": self.result_text,
            "error_text": self.error_text,
        }

    def to_outcome(self) -> dict:
        return {
            "job_id": self.job_id,
            "status": self.status,
            "result_text": self.result_text,
            "error_text": self.error_text,
        }


class TaskContext:
    """What a body gets: its token, and sleeping on the session's clock."""

    def __init__(self, clock: VirtualClock, token: CancellationToken, order: int) -> None:
        self.token = token
        self._clock = clock
        self._order = order

    def now(self) -> int:
        return self._clock.now()

    def sleep(self, deadline: int | None, *signals) -> object | None:
        return self._clock.sleep(deadline, self._order, *signals)


Body = Callable[[TaskContext], BackgroundResult]


class _Entry:
    def __init__(self, job_id: str, label: str, token: CancellationToken) -> None:
        self.snapshot = TaskSnapshot(job_id, label, RUNNING, None, None)
        self.token = token
        self.ended = threading.Event()  # the body thread is over (returned or shut down)
        self.thread: threading.Thread | None = None

    @property
    def status(self) -> str:
        return self.snapshot.status


class TaskHandle:
    """The spawner's handle on one task: its id, and waiting for its end."""

    def __init__(self, entry: _Entry) -> None:
        self._entry = entry
        self.task_id = entry.snapshot.job_id

    def join(self, timeout: float | None = None) -> TaskSnapshot:
        self._entry.ended.wait(timeout)
        return self._entry.snapshot


class BackgroundTasks:
    # Collaborator classes, swapped by variants.
    notify_class: type[Notify] = Notify

    def __init__(self, clock: VirtualClock, config: TaskConfig | None = None) -> None:
        self.config = config or TaskConfig()
        self._clock = clock
        self._lock = threading.Lock()
        self._session = CancellationToken()
        self._tasks: dict[str, _Entry] = {}
        self._finished: deque[str] = deque()  # ids of finished entries, in finish order
        self._completed: list[dict] = []  # the outcome queue
        self._wake = self.notify_class()
        self._counter = itertools.count(self.config.id_counter_start)
        self._order = itertools.count()
        self._threads: list[threading.Thread] = []

    # -------------------------------------------------------------- spawn

    def spawn(self, label: str, body: Body) -> TaskHandle:
        with self._lock:
            job_id = f"{self.config.id_prefix}{next(self._counter)}"
            entry = _Entry(job_id, label, self._session.child_token())
            self._tasks[job_id] = entry
            context = TaskContext(self._clock, entry.token, next(self._order))
            entry.thread = threading.Thread(
                target=self._run, args=(entry, body, context), name=f"task-table {job_id}", daemon=True
            )
            self._threads = [t for t in self._threads if t.is_alive()] + [entry.thread]
            self._clock.enter()
            entry.thread.start()
            return TaskHandle(entry)

    def _run(self, entry: _Entry, body: Body, context: TaskContext) -> None:
        try:
            result = body(context)
        except ClockClosed:
            return
        else:
            self._finish(entry, result)
        finally:
            entry.token.detach()
            entry.ended.set()
            self._clock.leave()

    # ------------------------------------------------------------- finish

    def _finish(self, entry: _Entry, result: BackgroundResult) -> None:
        with self._lock:
            status = self._final_status(entry, result)
            text = result.text
            failed = result.outcome == FAILED
            entry.snapshot = TaskSnapshot(
                entry.snapshot.job_id, entry.snapshot.label, status, None if failed else text, text if failed else None
            )
            self._finished.append(entry.snapshot.job_id)
            self._enqueue_outcome(entry.snapshot, result)
            self._evict_finished()

    def _final_status(self, entry: _Entry, result: BackgroundResult) -> str:
        return self.config.cancelled_status if entry.token.is_cancelled() else result.outcome

    def _enqueue_outcome(self, snapshot: TaskSnapshot, result: BackgroundResult) -> None:
        outcome = snapshot.to_outcome()
        if self.config.drained_cancel_status == "body_outcome":
            outcome["status"] = result.outcome  # outcomes carry what the body returned
        self._completed.append(outcome)
        self._wake.notify_one()

    def _evict_finished(self) -> None:
        while len(self._finished) > self.config.max_finished:
            self._forget(self._finished.popleft())

    def _forget(self, job_id: str) -> None:
        del self._tasks[job_id]

    # ------------------------------------------------------------- cancel

    def cancel_task(self, job_id: str) -> bool | None:
        with self._lock:
            entry = self._tasks.get(job_id)
            if entry is None:
                return None
            if entry.status != RUNNING:
                return False
            entry.token.cancel()
            return True

    def cancel_all(self) -> None:
        self._session.cancel()

    # ------------------------------------------------------------ outcomes

    def drain_completed(self) -> list[dict]:
        with self._lock:
            drained, self._completed = self._completed, []
            return drained

    def has_completed(self) -> bool:
        with self._lock:
            return bool(self._completed)

    def wait_for_completion(self, wait_ms: int) -> tuple[bool, int]:
        """Wait on the wake-up signal for at most ``wait_ms`` of virtual time,
        moving the clock meanwhile; returns (woken, waited_ms)."""
        waiter = self._wake.enroll()
        if waiter.notified:
            return True, 0
        start = self._clock.now()
        try:
            reached = self._clock.advance_to(start + wait_ms, stop=lambda: waiter.notified)
        finally:
            woken = self._wake.withdraw(waiter)
        return woken, reached - start

    # ------------------------------------------------------------- queries

    def running_count(self) -> int:
        with self._lock:
            return sum(1 for e in self._tasks.values() if e.status == RUNNING)

    def list(self) -> list[TaskSnapshot]:
        with self._lock:
            return sorted((e.snapshot for e in self._tasks.values()), key=lambda s: s.job_id)

    def peek(self, job_id: str) -> TaskSnapshot | None:
        with self._lock:
            entry = self._tasks.get(job_id)
            return None if entry is None else entry.snapshot

    # ---------------------------------------------------------------- time

    def advance(self, now_ms: int) -> None:
        """The host moved the clock: bodies due by then return, in time order."""
        self._clock.advance_to(now_ms)

    def shutdown(self) -> None:
        """Stop every body thread (they end without finishing) and wait for them."""
        self._clock.close()
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(JOIN_TIMEOUT_S)
