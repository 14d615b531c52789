"""A print queue with a bug the spec must catch: a job the printer has started
cannot be cancelled (the request is ignored).

    conformance run print-queue.yaml --adapter print_queue_mutant:StubbornQueueAdapter
"""

from __future__ import annotations

from print_queue import PrintQueue, PrintQueueAdapter


class StubbornQueue(PrintQueue):
    def cancel(self, job_id: str) -> dict:
        job = self._job(job_id)
        if job["status"] == "printing":
            return job  # the bug: printing jobs run to the end
        return super().cancel(job_id)


class StubbornQueueAdapter(PrintQueueAdapter):
    queue_class = StubbornQueue
