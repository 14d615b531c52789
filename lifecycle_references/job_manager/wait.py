"""The ``wait`` tool and the cancel call on top of the manager (the control
surface of a job manager whose agent waits with one argument-less call).

``wait`` returns at once with the settled results the agent has not
received yet (neither delivered nor reported), followed by the running jobs;
with none, it watches every running job (their deliveries held back) and
waits for the first to settle, or its fixed limit. ``cancel`` cancels the
named jobs at once and reports them. Every settled job either reports is
consumed: acknowledged (never delivered afterwards) and, with a text, handed
to the manager as consumed (a shorter retention).
"""

from __future__ import annotations

from dataclasses import dataclass

from .loop import WAKE, Future, VirtualLoop
from .runtime import COMPLETED, FAILED, RUNNING, AsyncJobManager, Job

__all__ = ["Reported", "WaitResult", "CancelResult", "WaitTool"]


@dataclass
class Reported:
    """A job as a call reports it, and whether its result was consumed before the call."""

    job: Job
    consumed_before: bool


@dataclass
class WaitResult:
    message: str | None
    jobs: list[Reported]
    waited_ms: int


@dataclass
class CancelResult:
    cancelled: list[dict]
    jobs: list[Reported]


class WaitTool:
    def __init__(self, manager: AsyncJobManager, loop: VirtualLoop) -> None:
        self._manager = manager
        self._loop = loop

    def wait(self) -> WaitResult:
        manager = self._manager
        running = manager.running_jobs()
        unreceived = [
            job
            for job in manager.all_jobs()
            if job.status in (COMPLETED, FAILED) and not job.consumed and not manager.is_suppressed(job.id)
        ]
        if unreceived:
            return WaitResult(None, self._report(unreceived + running), 0)
        if not running:
            return WaitResult(manager.config.msg_none_running, [], 0)
        ids = [job.id for job in running]
        started = self._loop.now()
        settled: Future = self._loop.create_future()

        def settle(how: str) -> None:
            settled.set_result(how)  # the first one wins; later ones change nothing

        for job in running:
            job.done.add_done_callback(lambda _: settle("settled"))
        limit = self._loop.call_later(manager.config.wait_limit_ms, WAKE, lambda: settle("limit"))
        manager.watch(ids)
        try:
            self._loop.run_until(settled, started + manager.config.wait_limit_ms)
            return WaitResult(None, self._report(running), self._loop.now() - started)
        finally:
            manager.unwatch(ids)
            limit.cancel()

    def cancel(self, ids: list[str]) -> CancelResult:
        outcomes = []
        for job_id in ids:
            job = self._manager.get(job_id)
            if job is None:
                outcomes.append({"id": job_id, "status": "not_found"})
            elif job.status != RUNNING or not self._manager.cancel(job_id):
                outcomes.append({"id": job_id, "status": "already_completed"})
            else:
                outcomes.append({"id": job_id, "status": "cancelled"})
        named = [job for job in (self._manager.get(i) for i in dict.fromkeys(ids)) if job is not None]
        return CancelResult(outcomes, self._report(named))

    def _report(self, jobs: list[Job]) -> list[Reported]:
        """The jobs as reported now; the settled ones are consumed after."""
        reported = [Reported(job, job.consumed) for job in jobs]
        settled = [job for job in jobs if job.status != RUNNING]
        self._manager.acknowledge(job.id for job in settled)
        for job in settled:
            self._manager.consume(job)
        return reported
