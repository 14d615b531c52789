"""Thread jobs runtime: background tool jobs scoped to a chat thread.

A tool call either returns its result synchronously or starts exactly one
background job. Jobs live in process memory only. When a job reaches a
terminal outcome its payload is kept inline or spilled to a temp file, the
thread is woken if idle, and at the next turn boundary one synthetic
assistant message per finished job is appended to the thread's
conversation, oldest completion first, at most once per job.

The runtime owns no clock and no I/O channel of its own: the clock, the tool
runtime, the scheduler and the conversation store are collaborators passed
to the constructor, so a host (or a test) decides what time it is and where
cancellations, turn requests and messages go.
"""

from __future__ import annotations

import itertools
import json
import os
import tempfile
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Protocol

__all__ = [
    "ACTIVE_STATUSES",
    "TERMINAL_STATUSES",
    "Job",
    "JobError",
    "ThreadJobConfig",
    "ThreadJobRuntime",
]

RUNNING = "running"
PENDING_CANCEL = "pending_cancel"
ACTIVE_STATUSES = frozenset({RUNNING, PENDING_CANCEL})
TERMINAL_STATUSES = frozenset({"completed", "failed", "cancelled", "timed_out"})
TURN_REASON = "background-job-terminal"

# Marks a tool call that was resolved by a synchronous result (no job).
_SYNC = object()


class ToolRuntime(Protocol):
    def request_cancel(self, job_id: str, requested_by: str) -> None: ...


class Scheduler(Protocol):
    def request_turn(self, thread_id: str, reason: str) -> None: ...


class Conversation(Protocol):
    def append_assistant_message(self, thread_id: str, job_id: str, text: str) -> None: ...


class JobError(Exception):
    """A request the runtime refuses; ``kind`` is stable, ``message`` is for humans."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass(frozen=True)
class ThreadJobConfig:
    retention_limit: int = 20
    max_lines: int = 1000
    max_bytes: int = 25600
    spill_file_name: str = "job-{job_id}-terminal.json"
    msg_tool_call_resolved: str = "Tool invocation already resolved"
    msg_job_exists_for_tool_call: str = "Background job already exists for tool_call_id"
    msg_duplicate_job_id: str = "Duplicate job-id"
    msg_job_not_found: str = "Job not found"
    msg_not_found_in_thread: str = "Job not found in this thread: {job_id}"
    msg_retry_not_supported: str = "Manual retry is not supported for background jobs"
    spill_message: str = "Terminal payload exceeded output limits. See temp file: {path}"
    # Where real runtimes differ (see docs/real-systems.md):
    second_start_error: str = "job_exists_for_tool_call"  # or "tool_call_resolved"
    unknown_job_text: str = "not_found_in_thread"  # or "job_not_found"
    spill_at: str = "outcome"  # or "injection"
    keep_payload: bool = False
    payload_size: str = "raw"  # or "serialised"
    spill_file_content: str = "payload"  # or "json"


@dataclass
class Job:
    job_id: str
    thread_id: str
    tool_call_id: str
    tool_name: str
    status: str
    started_at: int
    completed_at: int | None = None
    cancel_requested_at: int | None = None
    terminal_payload: str | None = None
    terminal_payload_file: str | None = None
    terminal_message_emitted: bool = False
    terminal_message_emitted_at: int | None = None
    # Bookkeeping, not part of the public record: creation order breaks
    # started_at ties; completed_seq (assigned when the job is marked
    # terminal) breaks completed_at ties.
    created_seq: int = field(default=0, repr=False)
    completed_seq: int | None = field(default=None, repr=False)

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    def to_record(self) -> dict:
        return {
            "job_id": self.job_id,
            "thread_id": self.thread_id,
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "status": self.status,
            "started_at": self.started_at,
            "completed_at": self.completed_at,
            "cancel_requested_at": self.cancel_requested_at,
            "terminal_payload": self.terminal_payload,
            "terminal_payload_file": self.terminal_payload_file,
            "terminal_message_emitted": self.terminal_message_emitted,
            "terminal_message_emitted_at": self.terminal_message_emitted_at,
        }


def _start_key(job: Job) -> tuple:
    return (job.started_at, job.created_seq)


class ThreadJobRuntime:
    """Tracks background jobs per thread; every public method is thread safe.

    Public methods return snapshots (copies) of job records, taken under the
    lock, so callers never observe a record while another thread mutates it.
    """

    def __init__(
        self,
        *,
        clock: Callable[[], int],
        tool_runtime: ToolRuntime,
        scheduler: Scheduler,
        conversation: Conversation,
        spill_dir: str | None = None,
        config: ThreadJobConfig | None = None,
        on_spill: Callable[[str, str], None] | None = None,
    ) -> None:
        self._clock = clock
        self._tool_runtime = tool_runtime
        self._scheduler = scheduler
        self._conversation = conversation
        self._spill_dir = spill_dir or tempfile.mkdtemp(prefix="thread-jobs-")
        self.config = config or ThreadJobConfig()
        self._on_spill = on_spill
        # Re-entrant: internal helpers that take the lock may be called from
        # public methods already holding it.
        self._lock = threading.RLock()
        self._init_state()

    def _init_state(self) -> None:
        """Everything a process restart loses."""
        self._jobs: dict[str, Job] = {}
        self._by_thread: dict[str, dict[str, None]] = {}  # ordered set of job ids
        self._tool_calls: dict[str, object] = {}  # tool_call_id -> job_id | _SYNC
        self._busy: set[str] = set()  # threads with a turn in progress
        self._outbox: dict[str, dict[str, None]] = {}  # thread -> jobs awaiting injection
        self._created = itertools.count(1)
        self._terminal_marks = itertools.count(1)
        self._next_generated_id = 1

    # ----------------------------------------------------------- tool calls

    def complete_sync(self, thread_id: str, tool_call_id: str, tool_name: str, result: str) -> str:
        with self._lock:
            if tool_call_id in self._tool_calls:
                raise JobError("tool_call_resolved", self.config.msg_tool_call_resolved)
            self._tool_calls[tool_call_id] = _SYNC
            return result

    def start_job(self, thread_id: str, tool_call_id: str, tool_name: str, job_id: str | None = None) -> Job:
        with self._lock:
            self._check_can_start(tool_call_id, job_id)
            if job_id is None:
                job_id = self._generate_job_id()
            job = Job(
                job_id=job_id,
                thread_id=thread_id,
                tool_call_id=tool_call_id,
                tool_name=tool_name,
                status=RUNNING,
                started_at=self._clock(),
                created_seq=next(self._created),
            )
            self._jobs[job_id] = job
            self._by_thread.setdefault(thread_id, {})[job_id] = None
            self._tool_calls[tool_call_id] = job_id
            return replace(job)

    def _check_can_start(self, tool_call_id: str, job_id: str | None) -> None:
        resolution = self._tool_calls.get(tool_call_id)
        if resolution is _SYNC:
            raise JobError("tool_call_resolved", self.config.msg_tool_call_resolved)
        if resolution is not None:
            if self.config.second_start_error == "tool_call_resolved":
                # The resolved-call table answers first: a started job resolves its call.
                raise JobError("tool_call_resolved", self.config.msg_tool_call_resolved)
            raise JobError("job_exists_for_tool_call", self.config.msg_job_exists_for_tool_call)
        if job_id is not None and job_id in self._jobs:
            raise JobError("duplicate_job_id", self.config.msg_duplicate_job_id)

    def _generate_job_id(self) -> str:
        # A caller may have chosen "job-<n>" itself, so skip ids in use.
        while True:
            candidate = f"job-{self._next_generated_id}"
            self._next_generated_id += 1
            if candidate not in self._jobs:
                return candidate

    # ------------------------------------------------------ job observations

    def observe_outcome(self, job_id: str, outcome: str, payload: str) -> Job:
        if outcome not in TERMINAL_STATUSES:
            raise ValueError(f"not a terminal outcome: {outcome!r}")
        with self._lock:
            job = self._known_job(job_id)
            if job.is_terminal:  # late duplicate report: first outcome wins
                return replace(job)
            return self._record_outcome(job, outcome, payload)

    def _record_outcome(self, job: Job, outcome: str, payload: str) -> Job:
        """Settle ``job`` (held under the lock) with its terminal outcome."""
        # A pending_cancel job may still complete: cancel is best effort.
        job.status = outcome
        job.completed_at = self._clock()
        job.completed_seq = next(self._terminal_marks)
        job.terminal_payload = payload
        if self.config.spill_at == "outcome":
            self._spill_if_oversized(job)
        self._enqueue_injection(job)
        self._wake_if_idle(job.thread_id)
        self._enforce_retention(job.thread_id)
        return replace(job)

    def observe_progress(self, job_id: str, note: str) -> Job:
        # Progress is informational: it neither changes the job nor queues
        # anything for the conversation.
        with self._lock:
            return replace(self._known_job(job_id))

    def observe_llm_error(self, job_id: str) -> Job:
        # A retryable internal LLM HTTP error is retried by the job itself;
        # nothing is visible from the outside.
        with self._lock:
            return replace(self._known_job(job_id))

    def _known_job(self, job_id: str) -> Job:
        job = self._jobs.get(job_id)
        if job is None:
            raise JobError("job_not_found", self.config.msg_job_not_found)
        return job

    # -------------------------------------------------------------- payloads

    def _spill_if_oversized(self, job: Job) -> None:
        payload = job.terminal_payload if job.terminal_payload is not None else ""
        if self._fits_inline(payload):
            return
        path = self._spill(job, payload)
        job.terminal_payload_file = path
        if not self.config.keep_payload:
            job.terminal_payload = None  # the file holds it now
        if self._on_spill is not None:
            self._on_spill(job.job_id, path)

    def _measured(self, payload: str) -> str:
        # A runtime that serialises payloads measures what it would send.
        return json.dumps(payload, ensure_ascii=False) if self.config.payload_size == "serialised" else payload

    def _fits_inline(self, payload: str) -> bool:
        text = self._measured(payload)
        lines = text.count("\n") + 1
        size = len(text.encode("utf-8"))
        return lines <= self.config.max_lines and size <= self.config.max_bytes

    def _spill(self, job: Job, payload: str) -> str:
        name = self.config.spill_file_name.format(job_id=job.job_id, tool_name=job.tool_name)
        # Ids and tool names come from callers: never let them leave the dir.
        name = name.replace("/", "_").replace("\\", "_")
        path = os.path.abspath(os.path.join(self._spill_dir, name))
        content = json.dumps(payload, ensure_ascii=False) if self.config.spill_file_content == "json" else payload
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(content)
        return path

    # ------------------------------------------------------------- injection

    def _enqueue_injection(self, job: Job) -> None:
        self._outbox.setdefault(job.thread_id, {})[job.job_id] = None

    def _wake_if_idle(self, thread_id: str) -> None:
        # A busy thread reaches a boundary on its own; an idle one needs a turn.
        if thread_id not in self._busy:
            self._scheduler.request_turn(thread_id, TURN_REASON)

    def begin_turn(self, thread_id: str) -> None:
        with self._lock:
            self._busy.add(thread_id)

    def turn_boundary(self, thread_id: str) -> list[str]:
        # Check ("already emitted?") and act ("mark emitted, persist") happen
        # under one lock hold, so racing boundaries inject each job once.
        with self._lock:
            self._busy.discard(thread_id)
            injected = []
            for job in self._pending_injections(thread_id):
                self._emit(job)
                injected.append(job.job_id)
            return injected

    def _pending_injections(self, thread_id: str) -> list[Job]:
        queued = self._outbox.get(thread_id, {})
        jobs = [self._jobs[j] for j in queued if j in self._jobs]
        return self._injection_order([j for j in jobs if not j.terminal_message_emitted])

    def _injection_order(self, jobs: Iterable[Job]) -> list[Job]:
        return sorted(jobs, key=self._completion_key)

    def _completion_key(self, job: Job) -> tuple:
        # Same-millisecond completions are ordered by when they were marked
        # terminal, never by id: ids say nothing about time.
        return (job.completed_at, job.completed_seq)

    def _emit(self, job: Job) -> None:
        # Mark first, then persist: if persisting fails the job is not
        # retried, which keeps the at-most-once promise.
        job.terminal_message_emitted = True
        job.terminal_message_emitted_at = self._clock()
        if self.config.spill_at == "injection" and job.terminal_payload_file is None:
            self._spill_if_oversized(job)
        self._outbox.get(job.thread_id, {}).pop(job.job_id, None)
        self._conversation.append_assistant_message(job.thread_id, job.job_id, self._message_text(job))

    def _message_text(self, job: Job) -> str:
        if job.terminal_payload_file is not None:
            body = self.config.spill_message.format(path=job.terminal_payload_file)
        else:
            body = self._measured(job.terminal_payload if job.terminal_payload is not None else "")
        return f"Background job {job.job_id} ({job.tool_name}) {job.status}:\n{body}"

    # ------------------------------------------------------------- retention

    def _enforce_retention(self, thread_id: str) -> None:
        for job in self._eviction_victims(thread_id):
            self._forget(job)

    def _eviction_victims(self, thread_id: str) -> list[Job]:
        finished = sorted((j for j in self._thread_jobs(thread_id) if j.is_terminal), key=self._completion_key)
        excess = len(finished) - self.config.retention_limit
        return finished[:excess] if excess > 0 else []

    def _forget(self, job: Job) -> None:
        """Drop every trace of a job, so its id and tool call become unknown."""
        self._jobs.pop(job.job_id, None)
        self._by_thread.get(job.thread_id, {}).pop(job.job_id, None)
        self._outbox.get(job.thread_id, {}).pop(job.job_id, None)
        if self._tool_calls.get(job.tool_call_id) == job.job_id:
            del self._tool_calls[job.tool_call_id]

    def _thread_jobs(self, thread_id: str) -> list[Job]:
        return [self._jobs[j] for j in self._by_thread.get(thread_id, {})]

    # -------------------------------------------------------- thread controls

    def list_jobs(self, thread_id: str, statuses: Iterable[str] | None = None) -> list[Job]:
        wanted = ACTIVE_STATUSES if statuses is None else frozenset(statuses)
        with self._lock:
            jobs = [j for j in self._thread_jobs(thread_id) if j.status in wanted]
            return [replace(j) for j in sorted(jobs, key=_start_key)]

    def inspect_job(self, thread_id: str, job_id: str) -> Job:
        with self._lock:
            return replace(self._job_in_thread(thread_id, job_id))

    def cancel_job(self, thread_id: str, job_id: str, requested_by: str) -> Job:
        with self._lock:
            job = self._job_in_thread(thread_id, job_id)
            if self._cancellable(job):
                job.status = PENDING_CANCEL
                job.cancel_requested_at = self._clock()
                self._tool_runtime.request_cancel(job.job_id, requested_by)
            return replace(job)

    def _cancellable(self, job: Job) -> bool:
        # Already pending, or already finished: nothing left to cancel.
        return job.status == RUNNING

    def retry_job(self, thread_id: object, job_id: object) -> None:
        """Always refused, whatever it is asked to retry (the ids are not even read)."""
        raise JobError("retry_not_supported", self.config.msg_retry_not_supported)

    def _job_in_thread(self, thread_id: str, job_id: str) -> Job:
        job = self._jobs.get(job_id)
        if job is None and self.config.unknown_job_text == "job_not_found":
            raise JobError("not_found_in_thread", self.config.msg_job_not_found)
        if job is None or job.thread_id != thread_id:
            raise JobError("not_found_in_thread", self._not_found_in_thread(job_id))
        return job

    def _not_found_in_thread(self, job_id: str) -> str:
        template = self.config.msg_not_found_in_thread
        return template.replace("{job_id}", job_id)

    # --------------------------------------------------------------- process

    def restart(self) -> None:
        """The process restarted: in-memory tracking is gone (spill files stay)."""
        with self._lock:
            self._init_state()
