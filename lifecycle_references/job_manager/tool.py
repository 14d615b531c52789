"""The ``job`` tool on top of the manager: cancel, poll (wait) and list.

A poll watches jobs (suppressing their automatic deliveries) and waits on a
race between the watched running jobs' completion futures and a timeout
timer; the event loop runs the clock meanwhile. Every non-running job the
tool reports is acknowledged, so it will not also be delivered as a
follow-up.
"""

from __future__ import annotations

from dataclasses import dataclass

from .loop import WAKE, Future, VirtualLoop
from .runtime import RUNNING, AsyncJobManager, Job, JobError

__all__ = ["WAIT_CHOICES_MS", "JobTool", "JobToolResult"]

WAIT_CHOICES_MS = (5000, 10000, 30000, 60000, 300000)

NOT_FOUND = "not_found"
ALREADY_COMPLETED = "already_completed"
CANCELLED = "cancelled"


@dataclass
class JobToolResult:
    message: str | None
    cancelled: list[dict] | None
    jobs: list[Job]
    waited_ms: int


def _distinct(ids: list[str]) -> list[str]:
    return list(dict.fromkeys(ids))


class JobTool:
    def __init__(self, manager: AsyncJobManager, loop: VirtualLoop) -> None:
        self._manager = manager
        self._loop = loop

    def execute(
        self,
        poll: list[str] | None = None,
        cancel: list[str] | None = None,
        list_all: bool = False,
        wait_ms: int | None = None,
    ) -> JobToolResult:
        config = self._manager.config
        watch_nothing = poll == [] and config.empty_poll == "nothing"
        poll = poll or None  # an empty list counts as absent (unless it watches nothing)
        cancel = cancel or []
        if list_all:
            if poll is not None or cancel:
                raise JobError("invalid_arguments", config.msg_list_combined)
            return self._list()
        if watch_nothing and not cancel:
            return JobToolResult(config.msg_none_running, None, [], 0)

        outcomes = [{"id": job_id, "status": self._cancel_one(job_id)} for job_id in cancel]
        cancelled = outcomes if cancel else None
        self._loop.run_due()  # yield to the loop: a retention of 0 evicts the cancelled now
        if poll is None and cancel:
            return self._build(self._existing(cancel), cancelled, 0)

        watched = self._existing(poll) if poll is not None else self._manager.running_jobs()
        if not watched:
            if cancel:
                return self._build(self._existing(cancel), cancelled, 0)
            message = (
                config.msg_no_matching.replace("{ids}", ", ".join(poll))
                if poll is not None
                else config.msg_none_running
            )
            return JobToolResult(message, None, [], 0)

        tracked = self._existing(cancel + [job.id for job in watched])  # the records to report, taken now
        waited = self._wait(watched, config.poll_wait_ms if wait_ms is None else wait_ms)
        return self._build(self._after_wait(tracked, cancel), cancelled, waited)

    def _cancel_one(self, job_id: str) -> str:
        job = self._manager.get(job_id)
        if job is None:
            return NOT_FOUND
        if job.status != RUNNING:
            return ALREADY_COMPLETED
        return CANCELLED if self._manager.cancel(job_id) else ALREADY_COMPLETED

    def _after_wait(self, tracked: list[Job], cancel: list[str]) -> list[Job]:
        """The tracked jobs as they are now; one evicted while the call waited
        is left out, or reported as it was (evicted_in_wait: last_state),
        whether or not this call cancelled it (``cancel``)."""
        keep_evicted = self._manager.config.evicted_in_wait == "last_state"
        now = ((self._manager.get(job.id), job) for job in tracked)
        return [current or job for current, job in now if current is not None or keep_evicted]

    def _existing(self, ids: list[str]) -> list[Job]:
        jobs = (self._manager.get(job_id) for job_id in _distinct(ids))
        return [job for job in jobs if job is not None]

    def _wait(self, watched: list[Job], wait_ms: int) -> int:
        running = [job for job in watched if job.status == RUNNING]
        if not running:
            return 0
        started = self._loop.now()
        settled: Future = self._loop.create_future()

        def settle(how: str) -> None:
            settled.set_result(how)  # the first one wins; later ones change nothing

        for job in running:
            job.done.add_done_callback(lambda _: settle("settled"))
        timeout = self._loop.call_later(wait_ms, WAKE, lambda: settle("timeout"))
        ids = [job.id for job in watched]
        self._manager.watch(ids)
        try:
            self._loop.run_until(settled, started + wait_ms)
        finally:
            self._manager.unwatch(ids)
            timeout.cancel()
        return self._loop.now() - started

    def _list(self) -> JobToolResult:
        jobs = self._manager.all_jobs()
        self._acknowledge_listed(jobs)
        return JobToolResult(None, None, jobs, 0)

    def _acknowledge_listed(self, jobs: list[Job]) -> None:
        self._manager.acknowledge(job.id for job in jobs if job.status != RUNNING)

    def _build(self, jobs: list[Job], cancelled: list[dict] | None, waited_ms: int) -> JobToolResult:
        self._acknowledge_reported(jobs)
        return JobToolResult(None, cancelled, jobs, waited_ms)

    def _acknowledge_reported(self, jobs: list[Job]) -> None:
        self._manager.acknowledge(job.id for job in jobs if job.status != RUNNING)
