"""An async job manager: background jobs of a coding agent's session.

A job is registered with a body (a callable given the job id and an abort
signal, returning a :class:`~.loop.Future` of the result text; a rejected
future is a failure carrying the error text). The manager keeps the job's
record while the body runs, and when the body settles it marks the job
``completed`` or ``failed``, enqueues a follow-up delivery of the text and
schedules the record's eviction. Cancelling flips a running job to
``cancelled`` at once and fires its abort signal; the body may still settle
later, which only stores its text.

Deliveries go through one FIFO queue worked by a delivery pump: the head is
dropped when its job is watched (a poll is waiting on it) or acknowledged (a
poll or list already reported it), blocks the queue while its next attempt
lies in the future (a wake-up timer is armed for then), and is otherwise
handed to the follow-up channel; a refused attempt goes to the back of the
queue with an exponential backoff.

Work the manager triggers "now" (working the queue after a change, evicting
with a retention of 0) is a timer due at the current instant, so it runs in
its phase: when the host next runs what is due (at the end of an operation,
or as the clock moves).

The manager owns no clock and no channel: the event loop (timers, futures),
the follow-up channel and the delivery-failure log are passed in.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from .loop import DELIVERY, EVICTION, AbortController, Future, Timer, VirtualLoop

__all__ = [
    "CANCELLED",
    "COMPLETED",
    "FAILED",
    "RUNNING",
    "AsyncJobManager",
    "BodyFailed",
    "DeliveryRefused",
    "Job",
    "JobError",
    "JobManagerConfig",
]

RUNNING = "running"
COMPLETED = "completed"
FAILED = "failed"
CANCELLED = "cancelled"


@dataclass(frozen=True)
class JobManagerConfig:
    max_running: int = 15
    retention_ms: int = 300000
    retry_base_ms: int = 500
    retry_max_ms: int = 30000
    retry_max_doublings: int = 8
    retry_jitter_ms: int = 0  # a fixed jitter: the real one is random below 200 ms
    poll_wait_ms: int = 30000
    msg_limit_reached: str = "Background job limit reached ({max}). Wait for running jobs to finish or cancel one."
    msg_no_matching: str = "No matching jobs found for IDs: {ids}"
    msg_none_running: str = "No running background jobs to wait for."
    msg_list_combined: str = "list cannot be combined with poll or cancel"
    msg_unknown_job: str = "Job not found: {job_id}"
    # Where real job tools differ (see docs/real-systems.md):
    empty_poll: str = "absent"  # `poll: []` is no poll; "nothing": a poll watching nothing
    empty_text: str = "returned"  # "omitted": snapshots leave an empty text out; "omitted_by_tool": the tool's only
    evicted_in_wait: str = "dropped"  # "last_state": the tool reports a job evicted while it waited as it was
    evicted_delivery: str = "dropped"  # "last_attempt": an evicted job's queued delivery is tried once more
    ids: str = "smallest_free"  # "counter": generated numbers count up and are never reused
    preferred_ids: bool = True  # False: a start's own id is ignored
    consumed_retention_ms: int = -1  # a consumed result (delivered or reported) is kept this long; -1: retention
    consumed_text: str = "kept"  # "omitted": the wait/cancel snapshots leave out a text consumed before
    delivery_order: str = "queue"  # "due_time": the earliest due entry first, never held back by a later one
    cancel_eviction: str = "on_cancel"  # "on_return": only the body's return starts a cancelled job's retention
    wait_limit_ms: int = 1800000  # the wait tool's fixed limit


class JobError(Exception):
    """A request the runtime refuses; ``kind`` is stable, ``message`` is for humans."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class BodyFailed(Exception):
    """How a body reports failure: its future is rejected with the error text."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class DeliveryRefused(Exception):
    """Raised by the follow-up channel when it does not take a delivery."""


@dataclass(eq=False)
class Job:
    id: str
    type: str
    label: str
    serial: int  # registration order, across the manager's life
    started_at: int
    abort: AbortController
    status: str = RUNNING
    result_text: str | None = None
    error_text: str | None = None
    consumed: bool = False  # its result reached the agent (delivered, or reported settled)
    done: Future = field(kw_only=True)  # settles once the body's outcome was handled


@dataclass(eq=False)
class _Delivery:
    job_id: str
    text: str
    next_attempt_at: int
    attempt: int = 0
    position: int = 0  # when it last joined the queue, across the manager's life


Body = Callable[[str, "object"], Future]  # (job_id, abort signal) -> Future[text]
Deliver = Callable[[Job, str], None]  # raises DeliveryRefused when refused
DeliveryFailed = Callable[[str, int], None]  # (job_id, attempt)


@dataclass
class _Registry:
    jobs: dict[str, Job] = field(default_factory=dict)  # registration order
    watched: set[str] = field(default_factory=set)
    acknowledged: set[str] = field(default_factory=set)
    eviction_timers: dict[str, Timer] = field(default_factory=dict)


class AsyncJobManager:
    def __init__(
        self, loop: VirtualLoop, config: JobManagerConfig, deliver: Deliver, on_delivery_failed: DeliveryFailed
    ) -> None:
        self.config = config
        self._loop = loop
        self._deliver = deliver
        self._on_delivery_failed = on_delivery_failed
        self._registry = _Registry()
        self._queue: deque[_Delivery] = deque()
        # Deliveries of evicted jobs, due once more, each with the job as it was evicted.
        self._last_attempts: list[tuple[_Delivery, Job]] = []
        self._wake: Timer | None = None
        self._serial = 0
        self._queued = 0  # deliveries that joined the queue so far
        self._next_number = 1  # the next generated number tried (ids: counter)

    # ------------------------------------------------------------ register

    def register(self, type_: str, label: str, body: Body, preferred_id: str | None = None) -> Job:
        self._check_capacity()
        job_id = self._resolve_id(preferred_id)
        self._registry.acknowledged.discard(job_id)  # a reused id starts clean
        self._registry.watched.discard(job_id)
        self._serial += 1
        job = Job(
            job_id, type_, label, self._serial, self._loop.now(), AbortController(), done=self._loop.create_future()
        )
        self._registry.jobs[job_id] = job
        outcome = body(job_id, job.abort.signal)
        outcome.add_done_callback(lambda settled: self._body_settled(job, settled))
        return job

    def _check_capacity(self) -> None:
        if len(self.running_jobs()) >= self.config.max_running:
            message = self.config.msg_limit_reached.replace("{max}", str(self.config.max_running))
            raise JobError("limit_reached", message)

    def _resolve_id(self, preferred_id: str | None) -> str:
        base = (preferred_id or "").strip() if self.config.preferred_ids else ""
        if not base:
            return self._free_generated_id()
        if base not in self._registry.jobs:
            return base
        return self._free_suffixed_id(base)

    def _free_generated_id(self) -> str:
        counting = self.config.ids == "counter"
        n = self._next_number if counting else 1
        while f"bg_{n}" in self._registry.jobs:
            n += 1
        if counting:
            self._next_number = n + 1  # never handed out again, even once it is free
        return f"bg_{n}"

    def _free_suffixed_id(self, base: str) -> str:
        suffix = 2
        while f"{base}-{suffix}" in self._registry.jobs:
            suffix += 1
        return f"{base}-{suffix}"

    # ------------------------------------------------------ body settling

    def _body_settled(self, job: Job, settled: Future) -> None:
        try:
            if self._registry.jobs.get(job.id) is not job:
                return  # evicted meanwhile: a late body changes nothing
            error = settled.exception()
            if error is None:
                self._finish(job, COMPLETED, settled.result())
            else:
                self._finish(job, FAILED, error.text if isinstance(error, BodyFailed) else str(error))
        finally:
            job.done.set_result(None)

    def _finish(self, job: Job, outcome: str, text: str) -> None:
        if job.status == CANCELLED:
            self._store_text(job, outcome, text)  # cancel is sticky; the text is kept
            self._schedule_eviction(job.id)
            return
        job.status = outcome
        self._store_text(job, outcome, text)
        self._enqueue_delivery(job.id, text)
        self._schedule_eviction(job.id)

    @staticmethod
    def _store_text(job: Job, outcome: str, text: str) -> None:
        if outcome == COMPLETED:
            job.result_text = text
        else:
            job.error_text = text

    # ------------------------------------------------------------- cancel

    def cancel(self, job_id: str) -> bool:
        job = self._registry.jobs.get(job_id)
        if job is None or job.status != RUNNING:
            return False
        job.status = CANCELLED
        job.abort.abort()
        if self.config.cancel_eviction == "on_cancel":
            self._schedule_eviction(job_id)
        return True

    # ------------------------------------------------------------ queries

    def get(self, job_id: str) -> Job | None:
        return self._registry.jobs.get(job_id)

    def all_jobs(self) -> list[Job]:
        return list(self._registry.jobs.values())

    def running_jobs(self) -> list[Job]:
        return [job for job in self._registry.jobs.values() if job.status == RUNNING]

    # ---------------------------------------------------- suppression sets

    def watch(self, job_ids: Iterable[str]) -> None:
        self._registry.watched.update(job_ids)
        self._kick()

    def unwatch(self, job_ids: Iterable[str]) -> None:
        self._registry.watched.difference_update(job_ids)

    def acknowledge(self, job_ids: Iterable[str]) -> None:
        self._registry.acknowledged.update(job_ids)
        self._drop_queued(lambda d: self.is_suppressed(d.job_id))

    def consume(self, job: Job) -> None:
        """The job's result reached the agent: with a consumed retention, it
        is kept only that long (unless its delivery is still queued)."""
        if job.status == RUNNING or job.consumed or (job.result_text is None and job.error_text is None):
            return
        job.consumed = True
        if self.config.consumed_retention_ms >= 0 and not any(d.job_id == job.id for d in self._queue):
            self._schedule_eviction(job.id, self.config.consumed_retention_ms)

    def is_suppressed(self, job_id: str) -> bool:
        return job_id in self._registry.acknowledged or job_id in self._registry.watched

    # ----------------------------------------------------------- delivery

    def _enqueue_delivery(self, job_id: str, text: str) -> None:
        if self.is_suppressed(job_id):
            return
        self._join_queue(_Delivery(job_id, text, self._loop.now()))
        self._kick()

    def _join_queue(self, delivery: _Delivery) -> None:
        self._queued += 1
        delivery.position = self._queued
        if self.config.delivery_order == "due_time":
            # behind every entry due no later than it, ahead of those due later
            later = next((i for i, d in enumerate(self._queue) if d.next_attempt_at > delivery.next_attempt_at), None)
            if later is not None:
                self._queue.insert(later, delivery)
                return
        self._queue.append(delivery)

    def _kick(self) -> None:
        """Have the queue worked in the delivery phase of the current instant.

        Like a runtime's set-immediate callback: bodies returning at this
        instant all settle first, then the queue is worked once.
        """
        self._arm_wake(self._loop.now())

    def _pump(self) -> None:
        """Make the last attempts that are due, then work the queue from its
        head until it is empty or its head must wait."""
        self._make_last_attempts()
        while self._queue:
            head = self._queue[0]
            if self.is_suppressed(head.job_id):
                self._queue.popleft()
                continue
            if head.next_attempt_at > self._loop.now():
                self._arm_wake(self._next_wake(head.next_attempt_at))
                return
            self._queue.popleft()
            self._attempt(head)
        self._arm_wake(self._next_wake(None))

    def _make_last_attempts(self) -> None:
        now = self._loop.now()
        due = sorted(
            (kept for kept in self._last_attempts if kept[0].next_attempt_at <= now), key=lambda k: k[0].position
        )
        self._last_attempts = [kept for kept in self._last_attempts if kept[0].next_attempt_at > now]
        for delivery, record in due:
            try:
                self._deliver(record, delivery.text)
            except DeliveryRefused:
                self._on_delivery_failed(delivery.job_id, delivery.attempt + 1)  # and it is gone

    def _next_wake(self, head_at: int | None) -> int | None:
        """The earliest of the queue head's retry and the pending last attempts."""
        instants = [delivery.next_attempt_at for delivery, _ in self._last_attempts]
        if head_at is not None:
            instants.append(head_at)
        return min(instants, default=None)

    def _attempt(self, delivery: _Delivery) -> None:
        job = self._registry.jobs[delivery.job_id]
        try:
            self._deliver(job, delivery.text)
            self.consume(job)
        except DeliveryRefused:
            delivery.attempt += 1
            self._on_delivery_failed(delivery.job_id, delivery.attempt)
            delivery.next_attempt_at = self._retry_at(delivery.attempt)
            self._join_queue(delivery)

    def _retry_at(self, attempt: int) -> int:
        return self._loop.now() + self._retry_delay(attempt)

    def _retry_delay(self, attempt: int) -> int:
        c = self.config
        exponent = min(attempt - 1, c.retry_max_doublings)
        return min(c.retry_max_ms, c.retry_base_ms * 2**exponent + c.retry_jitter_ms)

    def _arm_wake(self, at_ms: int | None) -> None:
        if self._wake is not None and not self._wake.cancelled and self._wake.at_ms == at_ms:
            return
        if self._wake is not None:
            self._wake.cancel()
        self._wake = None if at_ms is None else self._loop.call_at(at_ms, DELIVERY, self._on_wake)

    def _on_wake(self) -> None:
        self._wake = None
        self._pump()

    def _drop_queued(self, drop: Callable[[_Delivery], bool]) -> None:
        kept = [d for d in self._queue if not drop(d)]
        if len(kept) != len(self._queue):
            self._queue = deque(kept)
            self._kick()

    # ----------------------------------------------------------- eviction

    def _schedule_eviction(self, job_id: str, delay_ms: int | None = None) -> None:
        """(Re)arm the job's eviction: after retention_ms, or after ``delay_ms``
        when that is shorter (a consumed result)."""
        previous = self._registry.eviction_timers.pop(job_id, None)
        if previous is not None:
            previous.cancel()
        retention = self.config.retention_ms
        if delay_ms is not None:
            retention = delay_ms if retention < 0 else min(retention, delay_ms)
        if retention < 0:
            return  # kept for good
        self._registry.eviction_timers[job_id] = self._loop.call_at(
            self._eviction_at(job_id, retention), EVICTION, lambda: self._evict(job_id)
        )

    def _eviction_at(self, job_id: str, retention_ms: int) -> int:
        return self._loop.now() + retention_ms

    def _evict(self, job_id: str) -> None:
        registry = self._registry
        timer = registry.eviction_timers.pop(job_id, None)
        if timer is not None:
            timer.cancel()
        job = registry.jobs.pop(job_id, None)
        suppressed = self.is_suppressed(job_id)
        registry.acknowledged.discard(job_id)
        registry.watched.discard(job_id)
        if self.config.evicted_delivery == "last_attempt" and job is not None and not suppressed:
            self._keep_last_attempt(job)
        self._drop_queued(lambda d: d.job_id == job_id)

    def _keep_last_attempt(self, job: Job) -> None:
        """Move the evicted job's queued delivery aside, with a copy of its
        record, for one last attempt when its retry is due."""
        for delivery in self._queue:
            if delivery.job_id == job.id:
                self._last_attempts.append((delivery, replace(job)))
