"""Faulty variants of the reference runtime, to check that the kit catches bugs.

Each mutant is one realistic bug: a runtime subclass overriding the single
method involved, behind an adapter subclass that differs from
ReferenceAdapter only in which runtime it builds.
"""

from __future__ import annotations

import re
import time
from dataclasses import replace

from ..mutant import Mutant
from .adapter import ReferenceAdapter
from .runtime import _SYNC, ACTIVE_STATUSES, PENDING_CANCEL, Job, JobError, ThreadJobRuntime, _start_key

__all__ = ["MUTANTS", "Mutant"]


# ---------------------------------------------------------------- retention


class _EvictAtLimit(ThreadJobRuntime):
    def _eviction_victims(self, thread_id: str) -> list[Job]:
        finished = sorted((j for j in self._thread_jobs(thread_id) if j.is_terminal), key=self._completion_key)
        excess = len(finished) - self.config.retention_limit + 1  # off by one
        return finished[:excess] if excess > 0 else []


class _EvictsRunning(ThreadJobRuntime):
    def _eviction_victims(self, thread_id: str) -> list[Job]:
        everything = sorted(self._thread_jobs(thread_id), key=_start_key)  # no terminal filter
        excess = len(everything) - self.config.retention_limit
        return everything[:excess] if excess > 0 else []


class _EvictByStartTime(ThreadJobRuntime):
    def _eviction_victims(self, thread_id: str) -> list[Job]:
        finished = sorted((j for j in self._thread_jobs(thread_id) if j.is_terminal), key=_start_key)
        excess = len(finished) - self.config.retention_limit
        return finished[:excess] if excess > 0 else []


class _EvictionKeepsToolCall(ThreadJobRuntime):
    def _forget(self, job: Job) -> None:
        tool_calls = dict(self._tool_calls)
        super()._forget(job)
        self._tool_calls = tool_calls  # the evicted job's tool call stays resolved


# ----------------------------------------------------------------- ordering


class _UnstableTieOrder(ThreadJobRuntime):
    def _completion_key(self, job: Job) -> tuple:
        return (job.completed_at, job.job_id)


class _InjectionNewestFirst(ThreadJobRuntime):
    def _injection_order(self, jobs) -> list[Job]:
        return sorted(jobs, key=self._completion_key, reverse=True)


# ---------------------------------------------------------------- injection


class _EmittedAtTurnStart(ThreadJobRuntime):
    """A turn remembers when it began, and everything its boundary injects is
    stamped with that time: the message belongs to the turn, so the runtime
    dates it by the turn rather than by the moment it was injected."""

    def _init_state(self) -> None:
        super()._init_state()
        self._turn_began: dict[str, int] = {}  # thread -> when its turn in progress began

    def begin_turn(self, thread_id: str) -> None:
        with self._lock:
            super().begin_turn(thread_id)
            self._turn_began[thread_id] = self._clock()

    def _emit(self, job: Job) -> None:
        super()._emit(job)
        began = self._turn_began.get(job.thread_id)
        if began is not None:
            job.terminal_message_emitted_at = began

    def turn_boundary(self, thread_id: str) -> list[str]:
        with self._lock:
            injected = super().turn_boundary(thread_id)
            self._turn_began.pop(thread_id, None)  # the turn is over
            return injected


class _DoubleInjectRace(ThreadJobRuntime):
    def turn_boundary(self, thread_id: str) -> list[str]:
        with self._lock:
            self._busy.discard(thread_id)
            pending = self._pending_injections(thread_id)  # check...
        time.sleep(0.002)  # ...a realistic I/O pause with the lock released...
        injected = []
        for job in pending:
            with self._lock:
                self._emit(job)  # ...then act without re-checking
            injected.append(job.job_id)
        return injected


class _ProgressInjects(ThreadJobRuntime):
    def observe_progress(self, job_id: str, note: str) -> Job:
        with self._lock:
            job = self._known_job(job_id)
            self._enqueue_injection(job)  # progress treated like a terminal report
            return replace(job)


class _NoIdleWakeup(ThreadJobRuntime):
    def _wake_if_idle(self, thread_id: str) -> None:
        pass  # relies on some other turn coming along


# ---------------------------------------------------------- thread scoping


class _ListCrossThread(ThreadJobRuntime):
    def list_jobs(self, thread_id, statuses=None) -> list[Job]:
        wanted = ACTIVE_STATUSES if statuses is None else frozenset(statuses)
        with self._lock:
            jobs = [j for j in self._jobs.values() if j.status in wanted]  # thread ignored
            return [replace(j) for j in sorted(jobs, key=_start_key)]


class _InspectCrossThread(ThreadJobRuntime):
    def inspect_job(self, thread_id: str, job_id: str) -> Job:
        with self._lock:
            job = self._jobs.get(job_id)  # owner thread never compared
            if job is None:
                raise JobError("not_found_in_thread", self._not_found_in_thread(job_id))
            return replace(job)


# ------------------------------------------------------------------ misc


class _SpillOffByOne(ThreadJobRuntime):
    def _fits_inline(self, payload: str) -> bool:
        lines = payload.count("\n") + 1
        size = len(payload.encode("utf-8"))
        return lines <= self.config.max_lines and size < self.config.max_bytes


class _LinesBySplitlines(ThreadJobRuntime):
    def _fits_inline(self, payload: str) -> bool:
        # splitlines() does not count the empty line after a final newline, so a
        # payload of max_lines lines ending in "\n" (max_lines + 1 by the rule) stays inline
        lines = len(payload.splitlines()) or 1
        size = len(payload.encode("utf-8"))
        return lines <= self.config.max_lines and size <= self.config.max_bytes


class _LinesByUniversalNewlines(ThreadJobRuntime):
    def _fits_inline(self, payload: str) -> bool:
        # "\r\n", a lone "\r" and "\n" each end a line, as universal-newline readers count:
        # a payload of max_lines lines holding carriage returns counts more lines and is spilled
        lines = len(re.split(r"\r\n|\r|\n", payload))
        size = len(payload.encode("utf-8"))
        return lines <= self.config.max_lines and size <= self.config.max_bytes


class _SizeInCharacters(ThreadJobRuntime):
    def _fits_inline(self, payload: str) -> bool:
        lines = payload.count("\n") + 1
        size = len(payload)  # characters, not UTF-8 bytes: multi-byte text slips under the limit
        return lines <= self.config.max_lines and size <= self.config.max_bytes


class _LinesLimitExclusive(ThreadJobRuntime):
    def _fits_inline(self, payload: str) -> bool:
        text = self._measured(payload)
        lines = text.count("\n") + 1
        size = len(text.encode("utf-8"))
        return lines < self.config.max_lines and size <= self.config.max_bytes  # a payload of exactly max_lines spills


class _SizeIgnoresTrailingNewline(ThreadJobRuntime):
    def _fits_inline(self, payload: str) -> bool:
        text = self._measured(payload)
        lines = text.count("\n") + 1
        size = len(text.rstrip("\n").encode("utf-8"))  # "the final newline is not content": one byte over fits
        return lines <= self.config.max_lines and size <= self.config.max_bytes


class _OutcomeCheckThenAct(ThreadJobRuntime):
    def observe_outcome(self, job_id: str, outcome: str, payload: str) -> Job:
        with self._lock:
            finished = self._known_job(job_id).is_terminal  # look under the lock...
        if finished:
            with self._lock:
                return replace(self._known_job(job_id))
        time.sleep(0.002)  # ...a realistic pause with the lock released (the payload is read)...
        with self._lock:  # ...then record it without looking again: racing reports both take effect
            return self._record_outcome(self._known_job(job_id), outcome, payload)


class _CancelCheckThenAct(ThreadJobRuntime):
    def cancel_job(self, thread_id: str, job_id: str, requested_by: str) -> Job:
        with self._lock:
            job = self._job_in_thread(thread_id, job_id)
            cancellable = self._cancellable(job)  # look under the lock...
        time.sleep(0.01)  # ...a realistic pause with the lock released...
        with self._lock:
            if cancellable:  # ...then act on what was seen: two racing cancels both ask the tool to stop
                job.status = PENDING_CANCEL
                job.cancel_requested_at = self._clock()
                self._tool_runtime.request_cancel(job.job_id, requested_by)
            return replace(job)


class _CancelFinishedJob(ThreadJobRuntime):
    def _cancellable(self, job: Job) -> bool:
        return job.status != PENDING_CANCEL  # forgets that finished jobs are done


class _LlmErrorClearsCancel(ThreadJobRuntime):
    """A retried LLM error resets the job's cancellation bookkeeping: the
    request time of a pending cancel is lost (only inspect_job shows it)."""

    def observe_llm_error(self, job_id: str) -> Job:
        with self._lock:
            job = self._known_job(job_id)
            job.cancel_requested_at = None
            return replace(job)


class _RestartKeepsJobs(ThreadJobRuntime):
    def restart(self) -> None:
        with self._lock:
            self._busy.clear()  # registry and tool-call map survive


class _DuplicateIdAccepted(ThreadJobRuntime):
    def _check_can_start(self, tool_call_id: str, job_id: str | None) -> None:
        resolution = self._tool_calls.get(tool_call_id)
        if resolution is _SYNC:
            raise JobError("tool_call_resolved", self.config.msg_tool_call_resolved)
        if resolution is not None:
            raise JobError("job_exists_for_tool_call", self.config.msg_job_exists_for_tool_call)
        if job_id is not None and job_id in self._jobs:
            self._forget(self._jobs[job_id])  # overwritten by the new start


class _GeneratedIdCollides(ThreadJobRuntime):
    """The id counter never looks at ids callers chose: after an explicit
    "job-2", the next generated id is "job-2" again and replaces that job."""

    def _generate_job_id(self) -> str:
        candidate = f"job-{self._next_generated_id}"
        self._next_generated_id += 1
        return candidate


class _IdUniquePerThread(ThreadJobRuntime):
    """Explicit ids are checked against the caller's thread only; the job table
    is global, so an id another thread holds is taken over."""

    def start_job(self, thread_id, tool_call_id, tool_name, job_id=None) -> Job:
        with self._lock:
            if job_id is not None and job_id not in self._by_thread.get(thread_id, {}):
                held = self._jobs.pop(job_id, None)  # "not one of this thread's jobs": free to use
                if held is not None:
                    self._by_thread.get(held.thread_id, {}).pop(job_id, None)
            return super().start_job(thread_id, tool_call_id, tool_name, job_id)


class _SecondStartAllowed(ThreadJobRuntime):
    def _check_can_start(self, tool_call_id: str, job_id: str | None) -> None:
        if self._tool_calls.get(tool_call_id) is _SYNC:  # only the sync case checked
            raise JobError("tool_call_resolved", self.config.msg_tool_call_resolved)
        if job_id is not None and job_id in self._jobs:
            raise JobError("duplicate_job_id", self.config.msg_duplicate_job_id)


# --------------------------------------------- bugs real runtimes shipped


class _LateReportReopens(ThreadJobRuntime):
    """psi: a second terminal report overwrites the first and re-arms injection."""

    def observe_outcome(self, job_id: str, outcome: str, payload: str) -> Job:
        with self._lock:
            job = self._known_job(job_id)
            if job.is_terminal and job.terminal_message_emitted:
                job.status = outcome  # "the latest report is the truth"
                job.terminal_message_emitted = False
                job.terminal_message_emitted_at = None
                self._enqueue_injection(job)
                return replace(job)
        return super().observe_outcome(job_id, outcome, payload)


class _LostUpdateStarts(ThreadJobRuntime):
    """psi: resolving a tool call reads the tables, works, then writes its copy
    back without compare-and-swap, so a concurrent resolution is overwritten."""

    def start_job(self, thread_id, tool_call_id, tool_name, job_id=None) -> Job:
        with self._lock:
            jobs, by_thread, calls = (
                dict(self._jobs),
                {k: dict(v) for k, v in self._by_thread.items()},
                dict(self._tool_calls),
            )
            created = next(self._created)
        time.sleep(0.003)  # building the job record: the lock is not held
        if calls.get(tool_call_id) is _SYNC:
            raise JobError("tool_call_resolved", self.config.msg_tool_call_resolved)
        if tool_call_id in calls:
            raise JobError("job_exists_for_tool_call", self.config.msg_job_exists_for_tool_call)
        if job_id is not None and job_id in jobs:
            raise JobError("duplicate_job_id", self.config.msg_duplicate_job_id)
        with self._lock:
            if job_id is None:
                job_id = self._generate_job_id()
            job = Job(
                job_id=job_id,
                thread_id=thread_id,
                tool_call_id=tool_call_id,
                tool_name=tool_name,
                status="running",
                started_at=self._clock(),
                created_seq=created,
            )
            jobs[job_id] = job
            by_thread.setdefault(thread_id, {})[job_id] = None
            calls[tool_call_id] = job_id
            self._jobs, self._by_thread, self._tool_calls = jobs, by_thread, calls  # overwrite, no CAS
            return replace(job)

    def complete_sync(self, thread_id, tool_call_id, tool_name, result) -> str:
        with self._lock:
            calls = dict(self._tool_calls)
        time.sleep(0.003)
        if tool_call_id in calls:
            raise JobError("tool_call_resolved", self.config.msg_tool_call_resolved)
        calls[tool_call_id] = _SYNC
        with self._lock:
            self._tool_calls = calls  # overwrite, no CAS
        return result


# ----------------------------------------------------------------- registry


def _adapter_for(runtime_class: type[ThreadJobRuntime]) -> type[ReferenceAdapter]:
    name = runtime_class.__name__.lstrip("_") + "Adapter"
    return type(name, (ReferenceAdapter,), {"runtime_class": runtime_class, "__module__": __name__})


_TABLE = [
    (
        "eviction_keeps_tool_call",
        _EvictionKeepsToolCall,
        "Retention evicts a job but keeps its tool call's mapping, so the tool call stays resolved: a sync result "
        "or a new start for it is refused.",
    ),
    (
        "evict_at_limit",
        _EvictAtLimit,
        "Retention evicts as soon as the thread holds retention_limit terminal jobs, keeping limit-1.",
    ),
    ("evicts_running", _EvictsRunning, "Retention counts and evicts non-terminal jobs too, oldest by start."),
    (
        "evict_by_start_time",
        _EvictByStartTime,
        "Retention evicts the terminal job that started first instead of the one that finished first.",
    ),
    (
        "unstable_tie_order",
        _UnstableTieOrder,
        "Ties in completed_at are broken by job_id string order instead of terminal-marking order.",
    ),
    (
        "double_inject_race",
        _DoubleInjectRace,
        "turn_boundary checks 'already emitted?' and marks emitted in separate lock holds, "
        "so concurrent boundaries inject the same job twice.",
    ),
    ("list_cross_thread", _ListCrossThread, "list_jobs ignores thread_id and lists every thread's jobs."),
    ("inspect_cross_thread", _InspectCrossThread, "inspect_job returns jobs owned by other threads."),
    ("spill_off_by_one", _SpillOffByOne, "A payload of exactly max_bytes bytes is spilled instead of kept inline."),
    (
        "lines_by_splitlines",
        _LinesBySplitlines,
        "A payload's lines are counted with splitlines(), so max_lines lines ending in a newline stay inline.",
    ),
    (
        "lines_by_universal_newlines",
        _LinesByUniversalNewlines,
        "A lone carriage return ends a line too, so max_lines lines holding one are spilled.",
    ),
    (
        "size_in_characters",
        _SizeInCharacters,
        "A payload's size is measured in characters, so multi-byte text over max_bytes bytes stays inline.",
    ),
    (
        "cancel_check_then_act",
        _CancelCheckThenAct,
        "cancel_job checks that the job runs, releases the lock, then cancels: two racing cancels both request the cancellation.",
    ),
    (
        "cancel_finished_job",
        _CancelFinishedJob,
        "Cancelling a finished job moves it to pending_cancel and stamps cancel_requested_at.",
    ),
    (
        "progress_injects",
        _ProgressInjects,
        "A non-terminal progress update queues an injection, so the running job is announced at the next boundary.",
    ),
    (
        "restart_keeps_jobs",
        _RestartKeepsJobs,
        "A restart clears thread busy flags but keeps every job and tool-call resolution.",
    ),
    ("no_idle_wakeup", _NoIdleWakeup, "A terminal outcome on an idle thread never requests a turn."),
    (
        "llm_error_clears_cancel",
        _LlmErrorClearsCancel,
        "A retried LLM error clears a pending cancel's cancel_requested_at (seen only through inspect_job).",
    ),
    (
        "duplicate_id_accepted",
        _DuplicateIdAccepted,
        "start_job with an existing job_id replaces the old job instead of rejecting.",
    ),
    (
        "lines_limit_exclusive",
        _LinesLimitExclusive,
        "A payload of exactly max_lines lines is spilled to a file: the line limit is treated as exclusive.",
    ),
    (
        "size_ignores_trailing_newline",
        _SizeIgnoresTrailingNewline,
        "The byte limit leaves out a final newline, so a payload one byte over the limit that ends in one stays inline.",
    ),
    (
        "outcome_check_then_act",
        _OutcomeCheckThenAct,
        "observe_outcome checks that the job is not finished, releases the lock, then records the outcome: two racing "
        "reports both take effect, and the second overwrites the first one's payload.",
    ),
    (
        "generated_id_collides",
        _GeneratedIdCollides,
        "A generated job id does not skip ids callers chose explicitly, so it replaces the job that holds it.",
    ),
    ("injection_newest_first", _InjectionNewestFirst, "turn_boundary injects the newest completion first."),
    (
        "emitted_at_turn_start",
        _EmittedAtTurnStart,
        "turn_boundary stamps each injected job's terminal_message_emitted_at with the time its turn began, "
        "not the time it was injected.",
    ),
    (
        "id_unique_per_thread",
        _IdUniquePerThread,
        "An explicit job id is checked against the caller's thread only, so a start in another thread takes over "
        "the job that holds it.",
    ),
    ("second_start_allowed", _SecondStartAllowed, "A second start_job for the same tool_call_id creates another job."),
    # Bugs the real runtime behind seed 003 shipped (docs/real-systems.md).
    (
        "late_report_reopens",
        _LateReportReopens,
        "A second terminal report for an injected job overwrites its status and clears the emitted flag, "
        "so the next turn boundary injects it again.",
    ),
    (
        "lost_update_starts",
        _LostUpdateStarts,
        "Concurrent starts read the tables, then write their copy back without compare-and-swap: a start "
        "succeeds but its job never appears, and a concurrent sync result and start both succeed.",
    ),
]

# Steps of the shortest counterexample for each bug (Mutant.shortest), as a
# counterexample file counts them; tests/test_mutants.py holds the kit's
# reduced counterexamples to 1.5 times these.
SHORTEST: dict[str, int] = {
    'cancel_finished_job': 3,
    'double_inject_race': 3,
    'duplicate_id_accepted': 2,
    'generated_id_collides': 2,
    'evict_at_limit': 41,
    'evict_by_start_time': 43,
    'evicts_running': 23,
    'injection_newest_first': 5,
    'emitted_at_turn_start': 6,
    'inspect_cross_thread': 2,
    'late_report_reopens': 4,
    # start, cancel, the LLM error, then inspect_job (the probe does not show the field)
    'llm_error_clears_cancel': 4,
    'list_cross_thread': 2,
    'lost_update_starts': 1,
    'no_idle_wakeup': 2,
    'progress_injects': 3,
    'restart_keeps_jobs': 3,
    'lines_by_splitlines': 2,
    'lines_by_universal_newlines': 2,
    'lines_limit_exclusive': 2,
    'outcome_check_then_act': 2,
    'size_ignores_trailing_newline': 2,
    'cancel_check_then_act': 2,
    'size_in_characters': 2,
    'second_start_allowed': 2,
    'id_unique_per_thread': 2,
    'spill_off_by_one': 2,
    'unstable_tie_order': 5,
    # 21 starts and finishes fill the thread one past retention_limit (20), then the sync result
    'eviction_keeps_tool_call': 43,
}

MUTANTS: dict[str, Mutant] = {
    name: Mutant(name, description, _adapter_for(cls), SHORTEST[name]) for name, cls, description in _TABLE
}
