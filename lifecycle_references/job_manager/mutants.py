"""Faulty variants of the reference job manager, to check that the kit catches bugs.

Each mutant is one realistic bug: a manager (or tool) subclass overriding the
single method involved, behind an adapter subclass that differs from
JobManagerAdapter only in which class it builds.
"""

from __future__ import annotations

import unicodedata
from collections import deque

from ..mutant import Mutant
from .adapter import JobManagerAdapter, _PlayedWork
from .loop import BODY, AbortController, Future
from .runtime import CANCELLED, COMPLETED, RUNNING, AsyncJobManager, DeliveryRefused, Job, JobError
from .tool import JobTool
from .wait import Reported, WaitResult, WaitTool

__all__ = ["MUTANTS", "Mutant"]


# ------------------------------------------------------------------ capacity


class _CapOffByOne(AsyncJobManager):
    def _check_capacity(self) -> None:
        if len(self.running_jobs()) > self.config.max_running:  # one job too many gets in
            super()._check_capacity()


class _OverCapAccepted(AsyncJobManager):
    def _check_capacity(self) -> None:
        pass  # "the body will just wait its turn": nothing is rejected


class _CapCountsNewJob(AsyncJobManager):
    def _check_capacity(self) -> None:
        if len(self.running_jobs()) + 1 >= self.config.max_running:  # the new job counted as if already running
            message = self.config.msg_limit_reached.replace("{max}", str(self.config.max_running))
            raise JobError("limit_reached", message)


class _CancelledCountAsRunning(AsyncJobManager):
    def running_jobs(self) -> list[Job]:
        # Counts by "has its body returned?", so cancelled jobs still running their body count.
        return [job for job in self.all_jobs() if job.status == RUNNING or not job.done.done()]


# ----------------------------------------------------------------------- ids


class _IdsFromCounter(AsyncJobManager):
    _next_generated = 0

    def _free_generated_id(self) -> str:
        while True:
            self._next_generated += 1  # never goes back: evicted numbers are not reused
            if f"bg_{self._next_generated}" not in self._registry.jobs:
                return f"bg_{self._next_generated}"


class _SuffixStartsAtOne(AsyncJobManager):
    def _free_suffixed_id(self, base: str) -> str:
        suffix = 1
        while f"{base}-{suffix}" in self._registry.jobs:
            suffix += 1
        return f"{base}-{suffix}"


class _GeneratedIdSkipsOwnOnly(AsyncJobManager):
    def _free_generated_id(self) -> str:
        # Skips only the bg_N ids it handed out itself: a job that asked for "bg_1" is not seen.
        handed_out = self.__dict__.setdefault("_handed_out", set())
        n = 1
        while f"bg_{n}" in handed_out and f"bg_{n}" in self._registry.jobs:
            n += 1
        handed_out.add(f"bg_{n}")
        return f"bg_{n}"


class _PreferredIdChecksRunningOnly(AsyncJobManager):
    def _resolve_id(self, preferred_id: str | None) -> str:
        base = (preferred_id or "").strip()
        if base and base not in {job.id for job in self.running_jobs()}:
            return base  # a finished job still held under that id is not seen, and is replaced
        return super()._resolve_id(preferred_id)


class _PreferredIdsIgnoreCase(AsyncJobManager):
    def _resolve_id(self, preferred_id: str | None) -> str:
        # One file per job on a case-insensitive file system: "BUILD" is taken once "build" is.
        base = (preferred_id or "").strip()
        taken = {job_id.casefold() for job_id in self._registry.jobs}
        if not base or base.casefold() not in taken:
            return super()._resolve_id(preferred_id)
        suffix = 2
        while f"{base}-{suffix}".casefold() in taken:
            suffix += 1
        return f"{base}-{suffix}"


class _LabelNormalisedNfc(AsyncJobManager):
    def register(self, type_: str, label: str, body, preferred_id: str | None = None) -> Job:
        # The label is stored as its NFC form: "e" + a combining accent comes back as one "é".
        return super().register(type_, unicodedata.normalize("NFC", label), body, preferred_id)


class _SuffixPerNameCounter(AsyncJobManager):
    def _free_suffixed_id(self, base: str) -> str:
        # The next copy of a name comes from a counter per name, never checked against the held ids.
        counters = self.__dict__.setdefault("_suffix_counters", {})
        counters[base] = counters.get(base, 1) + 1
        return f"{base}-{counters[base]}"


# -------------------------------------------------------------------- cancel


class _CancelNotSticky(AsyncJobManager):
    def _finish(self, job: Job, outcome: str, text: str) -> None:
        if job.status == CANCELLED:
            job.status = RUNNING  # the body's outcome wins over the cancellation
        super()._finish(job, outcome, text)


class _CancelledDelivered(AsyncJobManager):
    def cancel(self, job_id: str) -> bool:
        if not super().cancel(job_id):
            return False
        self._enqueue_delivery(job_id, "")  # announces the cancellation as a completion
        return True


# ------------------------------------------------------------------ delivery


class _WatchNotSuppressing(AsyncJobManager):
    def is_suppressed(self, job_id: str) -> bool:
        return job_id in self._registry.acknowledged


class _RetryFromClockTarget(AsyncJobManager):
    def _retry_at(self, attempt: int) -> int:
        # Reads "now" as where the clock is heading, not the instant the timer fired.
        return self._loop.horizon + self._retry_delay(attempt)


class _FirstRetryDoubled(AsyncJobManager):
    def _retry_delay(self, attempt: int) -> int:
        c = self.config
        exponent = min(attempt, c.retry_max_doublings)  # doubles before the first retry too
        return min(c.retry_max_ms, c.retry_base_ms * 2**exponent + c.retry_jitter_ms)


class _BackoffNotDoubling(AsyncJobManager):
    def _retry_delay(self, attempt: int) -> int:
        c = self.config
        return min(c.retry_max_ms, c.retry_base_ms + c.retry_jitter_ms)


# ------------------------------------------------------------ acknowledgement


class _ListNotAcknowledging(JobTool):
    def _acknowledge_listed(self, jobs: list[Job]) -> None:
        pass


class _PollNotAcknowledging(JobTool):
    def _acknowledge_reported(self, jobs: list[Job]) -> None:
        pass


class _CancelReportOutlivesEviction(JobTool):
    """The cancel list's records are taken before the wait and reported as
    taken, even one that retention evicted while the tool waited."""

    def _after_wait(self, tracked: list[Job], cancel: list[str]) -> list[Job]:
        now = ((self._manager.get(job.id), job) for job in tracked)
        return [current or job for current, job in now if current is not None or job.id in cancel]


# ------------------------------------------------------------------ eviction


class _EvictionOneMsLate(AsyncJobManager):
    def _eviction_at(self, job_id: str, retention_ms: int) -> int:
        return self._loop.now() + retention_ms + 1


class _EvictionOneMsEarly(AsyncJobManager):
    def _eviction_at(self, job_id: str, retention_ms: int) -> int:
        return self._loop.now() + retention_ms - 1  # "kept for less than retention_ms"


class _EvictionFromStart(AsyncJobManager):
    def _eviction_at(self, job_id: str, retention_ms: int) -> int:
        return self._registry.jobs[job_id].started_at + retention_ms


# ------------------------------------------- bugs a real job manager shipped


class _AckDoesNotWake(AsyncJobManager):
    """oh-my-pi 14.9.9: acknowledging drops the entry but leaves the pump's
    wake-up where the removed head wanted it."""

    def acknowledge(self, job_ids) -> None:
        self._registry.acknowledged.update(job_ids)
        self._queue = deque(d for d in self._queue if not self.is_suppressed(d.job_id))  # no kick


class _EvictedStillDelivered(AsyncJobManager):
    """oh-my-pi 14.9.9: eviction forgets the record but not its queued delivery,
    which is still attempted with no job (here a stand-in record that always
    says completed) and, while refused, requeued without end."""

    def _evict(self, job_id: str) -> None:
        registry = self._registry
        timer = registry.eviction_timers.pop(job_id, None)
        if timer is not None:
            timer.cancel()
        registry.jobs.pop(job_id, None)
        registry.acknowledged.discard(job_id)
        registry.watched.discard(job_id)

    def _attempt(self, delivery) -> None:
        if delivery.job_id not in self._registry.jobs:
            ghost = Job(
                delivery.job_id,
                "bash",
                "",
                0,
                self._loop.now(),
                AbortController(),
                status=COMPLETED,
                done=self._loop.create_future(),  # never settled: its body never ran
            )
            self._registry.jobs[delivery.job_id] = ghost  # looked up for the follow-up...
            try:
                super()._attempt(delivery)
            finally:
                self._registry.jobs.pop(delivery.job_id, None)  # ...and gone again
            return
        super()._attempt(delivery)


class _LateBodyReschedulesEviction(AsyncJobManager):
    """oh-my-pi: a cancelled job's body returning after its record was evicted
    schedules eviction again by id, which later evicts a new job with that id."""

    def _body_settled(self, job: Job, settled) -> None:
        if job.status == CANCELLED and self._registry.jobs.get(job.id) is not job:
            self._schedule_eviction(job.id)  # by id: whoever holds it then is evicted
            job.done.set_result(None)
            return
        super()._body_settled(job, settled)


# -------------------------------------------------------------- job bodies


class _StopDelayIgnoresEarlierEnd(_PlayedWork):
    """On cancel, the body's return is rescheduled to the stop delay: a
    natural end that would have come first is dropped."""

    def __call__(self, job_id: str, signal) -> Future:
        loop = self._adapter.loop
        self._future = loop.create_future()
        plan = self._plan
        self._natural_end = None
        if plan["duration_ms"] is not None:
            self._natural_end = loop.call_later(plan["duration_ms"], BODY, self._return_as_planned, self._order)
        signal.add_listener(lambda: self._on_abort(job_id))
        return self._future

    def _on_abort(self, job_id: str) -> None:
        if self._plan["stop_ms"] is not None and self._natural_end is not None:
            self._natural_end.cancel()  # "the stop delay replaces the remaining run time"
        super()._on_abort(job_id)


class _TiesByJobId(_PlayedWork):
    """Bodies due at the same instant return in job id order (as strings),
    not in start order."""

    def __call__(self, job_id: str, signal) -> Future:
        self._order = job_id  # type: ignore[assignment]  # every body's timer is ordered by id
        return super().__call__(job_id, signal)


# ------------------------------------------------------------------ registry


# --------------------------------------------- oh-my-pi 18.x's designed rules


class _CounterIgnoresPreferred(AsyncJobManager):
    """Under counter ids a preferred id is ignored: every start gets the next number."""

    def _resolve_id(self, preferred_id: str | None) -> str:
        if self.config.ids == "counter":
            return self._free_generated_id()
        return super()._resolve_id(preferred_id)


class _ConsumedKeepsRetention(AsyncJobManager):
    """A consumed result is marked consumed but keeps the whole retention."""

    def consume(self, job: Job) -> None:
        if job.status != RUNNING and (job.result_text is not None or job.error_text is not None):
            job.consumed = True


class _DueTimeInQueueOrder(AsyncJobManager):
    """Deliveries join the back of the queue whatever their due time: an entry
    due now waits behind a head waiting for its retry."""

    def _join_queue(self, delivery) -> None:
        self._queued += 1
        delivery.position = self._queued
        self._queue.append(delivery)


class _CancelArmsEviction(AsyncJobManager):
    """A cancel starts the cancelled job's retention even when only the body's return should."""

    def cancel(self, job_id: str) -> bool:
        cancelled = super().cancel(job_id)
        if cancelled:
            self._schedule_eviction(job_id)
        return cancelled


class _ConsumedTextShown(WaitTool):
    """The wait and cancel snapshots show a result's text though it was consumed before."""

    def _report(self, jobs: list[Job]) -> list[Reported]:
        return [Reported(entry.job, False) for entry in super()._report(jobs)]


class _WaitSkipsUndelivered(WaitTool):
    """A wait does not return the settled results not delivered yet: it waits on the running jobs."""

    def wait(self) -> WaitResult:
        unreceived = [job for job in self._manager.all_jobs() if job.status != RUNNING and not job.consumed]
        for job in unreceived:
            job.consumed = True  # hidden from the check below
        try:
            return super().wait()
        finally:
            for job in unreceived:
                job.consumed = False


class _LastAttemptFollowsId(AsyncJobManager):
    """oh-my-pi 18.3.4: an evicted job's queued delivery looks its record up
    by id at each attempt; once a new job has taken the id, the attempt
    carries the new job's record and, refused, is requeued for as long as
    that job exists (retried without end)."""

    def _make_last_attempts(self) -> None:
        now = self._loop.now()
        due = sorted((k for k in self._last_attempts if k[0].next_attempt_at <= now), key=lambda k: k[0].position)
        self._last_attempts = [k for k in self._last_attempts if k[0].next_attempt_at > now]
        for delivery, record in due:
            holder = self._registry.jobs.get(delivery.job_id)
            try:
                self._deliver(holder or record, delivery.text)
            except DeliveryRefused:
                delivery.attempt += 1
                self._on_delivery_failed(delivery.job_id, delivery.attempt)
                if holder is not None:  # "the job still exists": tried again
                    delivery.next_attempt_at = self._retry_at(delivery.attempt)
                    self._last_attempts.append((delivery, record))


def _adapter_for(cls: type) -> type[JobManagerAdapter]:
    if issubclass(cls, _PlayedWork):
        return type(
            cls.__name__.lstrip("_") + "Adapter", (JobManagerAdapter,), {"work_class": cls, "__module__": __name__}
        )
    slot = "tool_class" if issubclass(cls, JobTool) else "wait_class" if issubclass(cls, WaitTool) else "manager_class"
    name = cls.__name__.lstrip("_") + "Adapter"
    attributes: dict = {slot: cls, "__module__": __name__}
    profiles = _ONLY_UNDER.get(cls)
    if profiles:  # a bug only these profiles' readings can show: the mutant offers them alone
        attributes["default_profile"] = profiles[-1]
        attributes["PROFILES"] = {p: JobManagerAdapter.PROFILES[p] for p in profiles}
    return type(name, (JobManagerAdapter,), attributes)


# Mutants of rules only some profiles read: oh-my-pi 18.x's design, and the
# last attempt of an evicted job's delivery (evicted_delivery: last_attempt).
_ONLY_UNDER: dict[type, tuple[str, ...]] = {
    **{
        cls: ("oh-my-pi-18",)
        for cls in (
            _CounterIgnoresPreferred,
            _ConsumedKeepsRetention,
            _DueTimeInQueueOrder,
            _CancelArmsEviction,
            _ConsumedTextShown,
            _WaitSkipsUndelivered,
        )
    },
    _LastAttemptFollowsId: ("oh-my-pi", "oh-my-pi-18"),
}


_TABLE = [
    (
        "cap_off_by_one",
        _CapOffByOne,
        "The running-job limit check uses > instead of >=, so max_running + 1 jobs can run.",
    ),
    (
        "over_cap_accepted",
        _OverCapAccepted,
        "A start over the running-job limit is accepted instead of rejected with limit_reached.",
    ),
    (
        "cap_counts_new_job",
        _CapCountsNewJob,
        "The running-job limit check counts the job being started as already running, so only max_running - 1 jobs can run.",
    ),
    (
        "cancelled_count_as_running",
        _CancelledCountAsRunning,
        "Cancelled jobs whose body is still running count against the running-job limit.",
    ),
    (
        "ids_from_counter",
        _IdsFromCounter,
        "Generated bg_N ids come from a counter, so numbers freed by eviction are never reused.",
    ),
    ("suffix_starts_at_one", _SuffixStartsAtOne, "A taken preferred id gets the suffix -1 first instead of -2."),
    (
        "generated_id_skips_own_only",
        _GeneratedIdSkipsOwnOnly,
        "A generated bg_N id skips only the ids the manager generated itself, so it replaces a job that asked for that id.",
    ),
    (
        "preferred_id_checks_running_only",
        _PreferredIdChecksRunningOnly,
        "A preferred id is checked against the running jobs only, so a start replaces a finished job still held under that id.",
    ),
    (
        "preferred_ids_ignore_case",
        _PreferredIdsIgnoreCase,
        "A preferred id is compared with the held ids case-insensitively, so BUILD gets BUILD-2 while build is held.",
    ),
    (
        "label_normalised_nfc",
        _LabelNormalisedNfc,
        "A job's label is stored in Unicode normalisation form NFC, so a decomposed accent comes back composed.",
    ),
    (
        "suffix_per_name_counter",
        _SuffixPerNameCounter,
        "A taken preferred id gets its suffix from a counter per name, so it replaces a job that asked for that suffixed id.",
    ),
    (
        "cancel_not_sticky",
        _CancelNotSticky,
        "A cancelled job whose body later returns becomes completed or failed (and is delivered).",
    ),
    (
        "cancelled_delivered",
        _CancelledDelivered,
        "Cancelling a job enqueues a follow-up delivery for it, so the cancelled job is delivered.",
    ),
    (
        "watch_not_suppressing",
        _WatchNotSuppressing,
        "Watching a job during a poll does not suppress its delivery, so it is delivered while watched.",
    ),
    (
        "retry_from_clock_target",
        _RetryFromClockTarget,
        "The next delivery retry is computed from the clock's target time instead of the instant the retry ran.",
    ),
    (
        "first_retry_doubled",
        _FirstRetryDoubled,
        "The first delivery retry already waits twice retry_base_ms: the backoff doubles before the first retry.",
    ),
    (
        "backoff_not_doubling",
        _BackoffNotDoubling,
        "Delivery retries always wait retry_base_ms instead of doubling after each failure.",
    ),
    (
        "list_not_acknowledging",
        _ListNotAcknowledging,
        "The job tool's list does not acknowledge the finished jobs it reports, so they are still delivered.",
    ),
    (
        "poll_not_acknowledging",
        _PollNotAcknowledging,
        "A poll or cancel result does not acknowledge the finished jobs it reports, so they are still delivered.",
    ),
    (
        "cancel_report_outlives_eviction",
        _CancelReportOutlivesEviction,
        "The job tool reports the jobs it was asked to cancel as it found them before its wait, even one that"
        " retention evicted while it waited.",
    ),
    (
        "eviction_one_ms_late",
        _EvictionOneMsLate,
        "A terminal job is evicted retention_ms + 1 after it became terminal, one millisecond late.",
    ),
    (
        "eviction_one_ms_early",
        _EvictionOneMsEarly,
        "A terminal job is evicted retention_ms - 1 after it became terminal, one millisecond early.",
    ),
    (
        "eviction_from_start",
        _EvictionFromStart,
        "Retention is measured from the job's start instead of from when it became terminal.",
    ),
    # Bugs the real job manager behind seed 000 shipped (docs/real-systems.md).
    (
        "ack_does_not_wake",
        _AckDoesNotWake,
        "Acknowledging a refused delivery at the head of the queue does not wake the delivery pump, so the "
        "next entry waits until the removed head's retry time.",
    ),
    (
        "evicted_still_delivered",
        _EvictedStillDelivered,
        "Evicting a job leaves its queued delivery in the queue: it is attempted with no record of the job "
        "(a stand-in that always says completed) and, while refused, retried without end.",
    ),
    (
        "late_body_reschedules_eviction",
        _LateBodyReschedulesEviction,
        "A cancelled job's body returning after its record was evicted schedules eviction again by id, "
        "which later evicts a new, still running job that reused the id.",
    ),
    (
        "stop_delay_ignores_earlier_end",
        _StopDelayIgnoresEarlierEnd,
        "Cancelling a job whose body stops after a delay reschedules its return to that delay: a natural end "
        "that comes first is ignored, and the cancelled job's text arrives late.",
    ),
    (
        "ties_by_job_id",
        _TiesByJobId,
        "Bodies due at the same instant return in job id order (as strings) instead of start order.",
    ),
    (
        "last_attempt_follows_id",
        _LastAttemptFollowsId,
        "An evicted job's last delivery attempt looks the record up by id: once a new job took the id, it carries "
        "the new job's record and, refused, is retried for as long as that job exists.",
    ),
    # Rules of oh-my-pi 18.x's design (profile oh-my-pi-18), one mutant each.
    (
        "counter_ignores_preferred",
        _CounterIgnoresPreferred,
        "Under counter ids a preferred id is ignored: a start that names its id gets the next number.",
    ),
    (
        "consumed_keeps_retention",
        _ConsumedKeepsRetention,
        "A delivered or reported result keeps the whole retention instead of consumed_retention_ms.",
    ),
    (
        "due_time_in_queue_order",
        _DueTimeInQueueOrder,
        "Deliveries are worked first in, first out: a result due now waits behind a head waiting for its retry.",
    ),
    (
        "cancel_arms_eviction",
        _CancelArmsEviction,
        "A cancel starts the job's retention, so a cancelled job whose body never returns is evicted.",
    ),
    (
        "consumed_text_shown",
        _ConsumedTextShown,
        "The wait and cancel snapshots show the text of a result consumed before the call.",
    ),
    (
        "wait_skips_undelivered",
        _WaitSkipsUndelivered,
        "A wait does not return settled results not delivered yet first: it waits on the running jobs.",
    ),
]

# Steps of the shortest counterexample for each bug (Mutant.shortest), as a
# counterexample file counts them; tests/test_mutants.py holds the kit's
# reduced counterexamples to 1.5 times these.
SHORTEST: dict[str, int] = {
    'ack_does_not_wake': 6,
    'backoff_not_doubling': 3,
    # a start, then the job tool's cancel racing the job's finish_job (tool_cancel_races_finish):
    # when the cancel wins, no order of the two explains a completed job (async-jobs 2.2.5's draw
    # found these 2 steps at seed 1). Without the race's luck it takes 3, a cancel then a finish,
    # which is what the exploration most often reports: 1.5 times 2 still admits it.
    'cancel_not_sticky': 2,
    # two starts, then job_tool {cancel: [the first], poll: [the second], wait_ms: 300000}:
    # the cancelled job is evicted as the wait ends and must be left out of the report
    'cancel_report_outlives_eviction': 3,
    'cancelled_count_as_running': 3,
    'cancelled_delivered': 2,
    'cap_counts_new_job': 15,
    'cap_off_by_one': 16,
    'evicted_still_delivered': 3,
    # start_job {duration_ms: 300000}, then job_tool {wait_ms: 300000}: the job ends as the
    # retention, counted from its start, runs out, and the wait's answer no longer lists it.
    'eviction_from_start': 2,
    'eviction_one_ms_early': 3,
    'eviction_one_ms_late': 3,
    'first_retry_doubled': 3,
    'generated_id_skips_own_only': 2,
    'ids_from_counter': 3,
    'late_body_reschedules_eviction': 6,
    'list_not_acknowledging': 5,
    'over_cap_accepted': 16,
    'poll_not_acknowledging': 6,
    'preferred_id_checks_running_only': 3,
    'retry_from_clock_target': 3,
    'suffix_per_name_counter': 3,
    # start_job {id: build}, then start_job {id: BUILD}: the second gets BUILD-2
    'preferred_ids_ignore_case': 2,
    # start_job {label: "builde\u0301"}, then get_job: the label comes back composed
    'label_normalised_nfc': 2,
    'suffix_starts_at_one': 2,
    'watch_not_suppressing': 2,
    'stop_delay_ignores_earlier_end': 3,
    'ties_by_job_id': 3,
    # refuse, start x, finish x, retention, start x again, the last attempt's retry, the next
    'last_attempt_follows_id': 7,
    # oh-my-pi-18's rules
    'counter_ignores_preferred': 1,  # a start naming its id
    'consumed_keeps_retention': 3,  # start, finish (delivered), the clock past consumed_retention_ms
    'due_time_in_queue_order': 6,  # refuse, start, finish (refused), accept, start, finish
    'cancel_arms_eviction': 3,  # start, cancel, the clock past retention_ms
    'consumed_text_shown': 3,  # start, finish (delivered), cancel reporting it
    'wait_skips_undelivered': 4,  # refuse, start, finish (refused), wait
}

MUTANTS: dict[str, Mutant] = {
    name: Mutant(name, description, _adapter_for(cls), SHORTEST[name]) for name, cls, description in _TABLE
}
