"""A small print queue, and the adapter that lets the conformance kit drive it.

The queue is written as a real one would be, without looking at the spec's
model: jobs in a dict, ids from a counter, finished jobs trimmed to the
newest few. Run it with (from this directory):

    conformance run print-queue.yaml --adapter print_queue:PrintQueueAdapter
"""

from __future__ import annotations

from conformance import Adapter, error_response, result_response


class QueueError(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class PrintQueue:
    def __init__(self, max_copies: int = 10, history_limit: int = 3):
        self.max_copies, self.history_limit = max_copies, history_limit
        self.jobs: dict[str, dict] = {}
        self.next_id = 1
        self.finished: list[str] = []  # ids of done/cancelled jobs, oldest finish first
        self.now = 0

    def _job(self, job_id: str) -> dict:
        if job_id not in self.jobs:
            raise QueueError("unknown_job", f"no job {job_id}")
        return self.jobs[job_id]

    def submit(self, copies: int) -> dict:
        if copies > self.max_copies:
            raise QueueError("too_many_copies", f"at most {self.max_copies} copies")
        job_id = f"job-{self.next_id}"
        self.next_id += 1
        self.jobs[job_id] = {"job_id": job_id, "copies": copies, "status": "queued", "submitted_at": self.now}
        return self.jobs[job_id]

    def start(self, job_id: str) -> dict:
        job = self._job(job_id)
        if job["status"] != "queued":
            raise QueueError("not_queued", f"job {job_id} is {job['status']}")
        job["status"] = "printing"
        return job

    def finish(self, job_id: str, report_paper) -> dict:
        job = self._job(job_id)
        if job["status"] != "printing":
            raise QueueError("not_printing", f"job {job_id} is {job['status']}")
        job["status"] = "done"
        report_paper(job_id, job["copies"])
        self._finished(job_id)
        return job

    def cancel(self, job_id: str) -> dict:
        job = self._job(job_id)
        if job["status"] in ("queued", "printing"):
            job["status"] = "cancelled"
            self._finished(job_id)
        return job

    def _finished(self, job_id: str) -> None:
        self.finished.append(job_id)
        while len(self.finished) > self.history_limit:
            del self.jobs[self.finished.pop(0)]

    def list_jobs(self) -> list[dict]:
        return list(self.jobs.values())  # dicts keep insertion (submission) order


class PrintQueueAdapter(Adapter):
    queue_class = PrintQueue

    def __init__(self, max_copies: str | int = 10):
        self.max_copies = int(max_copies)
        self.queue = self.queue_class(self.max_copies)

    def describe(self) -> dict:
        return {
            "name": "tutorial-print-queue",
            "version": "1.0.0",
            "profile": None,
            "parameters": {"max_copies": self.max_copies},
            "capabilities": {},
        }

    def reset(self, now_ms: int) -> None:
        self.queue = self.queue_class(self.max_copies)
        self.queue.now = now_ms

    def set_clock(self, now_ms: int) -> list[dict]:
        self.queue.now = now_ms
        return []

    def call(self, operation: str, args: dict) -> dict:
        effects: list[dict] = []

        def report_paper(job_id: str, sheets: int) -> None:
            effects.append({"effect": "paper_used", "job_id": job_id, "sheets": sheets})

        q = self.queue
        try:
            if operation == "submit":
                job = q.submit(args["copies"])
            elif operation == "start":
                job = q.start(args["job_id"])
            elif operation == "finish":
                job = q.finish(args["job_id"], report_paper)
            elif operation == "cancel":
                job = q.cancel(args["job_id"])
            elif operation == "list_jobs":
                return result_response(
                    {"jobs": [{"job_id": j["job_id"], "status": j["status"]} for j in q.list_jobs()]}
                )
            else:
                return error_response("unknown_operation", operation)
        except QueueError as exc:
            return error_response(exc.kind, str(exc), effects)
        return result_response({"job_id": job["job_id"], "status": job["status"]}, effects)
