"""A thread-jobs runtime that differs from the spec in one accepted way and
has one real bug: the demonstration of accepted deviations (docs/deviations.md).

It is the kit's bundled reference runtime with two changes, as a team's own
runtime might have them:

- **Accepted, documented difference.** Cancelling a job that has already
  finished is refused with the error ``already_finished`` (this runtime's API
  has always done so and its UI relies on it); the spec answers with the
  job's unchanged status. ``deviations.yaml`` records the difference.
- **A real bug.** A progress report on a job whose cancel was requested puts
  the job back to ``running`` (the progress handler "wakes" the job), so the
  pending cancel is lost from the job's status.

    conformance run thread-jobs --adapter runtime:DemoAdapter                      # both differences fail
    conformance run thread-jobs --adapter runtime:DemoAdapter --deviations deviations.yaml   # only the bug

(run from this directory, or with it on PYTHONPATH).
"""

from __future__ import annotations

from dataclasses import replace

from lifecycle_references.thread_jobs import ReferenceAdapter
from lifecycle_references.thread_jobs.runtime import PENDING_CANCEL, RUNNING, JobError, ThreadJobRuntime

__all__ = ["DemoAdapter", "DemoRuntime"]


class DemoRuntime(ThreadJobRuntime):
    def cancel_job(self, thread_id: str, job_id: str, requested_by: str):
        with self._lock:
            job = self._job_in_thread(thread_id, job_id)
            if job.is_terminal:  # this runtime's contract: nothing to cancel is an error
                raise JobError("already_finished", f"job {job_id} already finished ({job.status})")
        return super().cancel_job(thread_id, job_id, requested_by)

    def observe_progress(self, job_id: str, note: str):
        with self._lock:
            job = self._known_job(job_id)
            if job.status == PENDING_CANCEL:  # the bug: progress "wakes" the job, the cancel is lost
                job.status = RUNNING
            return replace(job)


class DemoAdapter(ReferenceAdapter):
    runtime_class = DemoRuntime

    def describe(self) -> dict:
        return {**super().describe(), "name": "accepted-deviation-demo"}
