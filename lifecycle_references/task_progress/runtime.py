"""Task progress runtime: local agent tasks and backgrounded main-session tasks.

A task is registered (``pending``), started (``running``) and ends
``completed``, ``failed`` or killed. While it runs it reports progress
(tokens, tool uses, recent activities, a summary) and receives queued
messages that its loop drains at each tool-round boundary. A foreground task
has a caller waiting on it; backgrounding it (on request, or when its
auto-background timer fires) releases that caller. A finished task is
announced at most once (an atomic check-and-set of ``notified``) and is
evicted once it is finished, notified, not retained and past its grace
period.

State is immutable: every task is a frozen record, replaced as a whole by
``_update(task_id, fn)`` under one re-entrant lock, the way the real system
runs ``updateTaskState(taskId, setAppState, task => ...)``. Decisions taken
inside an updater (was it running? was it already notified?) are carried
out after it returns, so nothing is sent twice.

The runtime owns no clock and no I/O: the virtual clock (which also runs
timers), the notification queue, the abort sink, the SDK event stream and the
waiting callers are collaborators passed to the constructor.
"""

from __future__ import annotations

import heapq
import itertools
import random
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Protocol

__all__ = [
    "ACTIVE_STATUSES",
    "AbortController",
    "Progress",
    "ProgressTracker",
    "TaskConfig",
    "TaskError",
    "TaskRuntime",
    "TaskState",
    "Usage",
    "VirtualClock",
]

PENDING = "pending"
RUNNING = "running"
COMPLETED = "completed"
FAILED = "failed"
ACTIVE_STATUSES = frozenset({PENDING, RUNNING})

AGENT = "agent"
MAIN_SESSION = "main_session"
KINDS = (AGENT, MAIN_SESSION)
ID_PREFIX = {AGENT: "a", MAIN_SESSION: "s"}
ID_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"
ID_LENGTH = 8

ASYNC = "async"
FOREGROUND = "foreground"
MODES = (ASYNC, FOREGROUND)


# ------------------------------------------------------------ collaborators


class Notifier(Protocol):
    def enqueue(self, task_id: str, status: str) -> None: ...


class AbortSink(Protocol):
    def request_abort(self, task_id: str) -> None: ...


class SdkEvents(Protocol):
    def task_terminated(self, task_id: str, status: str) -> None: ...


class CallerWaiter(Protocol):
    def release(self, task_id: str, reason: str) -> None: ...


class TaskError(Exception):
    """A request the runtime refuses; ``kind`` is stable, ``message`` is for humans."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


# -------------------------------------------------------------------- time


@dataclass(order=True)
class _Timer:
    at_ms: int
    seq: int
    callback: Callable[[], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)


class VirtualClock:
    """A clock the host moves, with one-shot timers on it (like fake timers).

    ``advance_to(now)`` fires every timer due by ``now`` in time order (ties
    in scheduling order), reading ``at_ms`` while each fires. Callbacks run
    outside the clock's own lock, so they may take other locks and schedule
    more timers.
    """

    def __init__(self, now_ms: int = 0) -> None:
        self._now = int(now_ms)
        self._queue: list[_Timer] = []
        self._seq = itertools.count()
        self._lock = threading.Lock()

    def now(self) -> int:
        return self._now

    def schedule(self, at_ms: int, callback: Callable[[], None]) -> _Timer:
        timer = _Timer(int(at_ms), next(self._seq), callback)
        with self._lock:
            heapq.heappush(self._queue, timer)
        return timer

    def cancel(self, timer: _Timer) -> None:
        timer.cancelled = True  # dropped lazily when it comes due

    def advance_to(self, now_ms: int) -> None:
        now_ms = int(now_ms)
        while True:
            with self._lock:
                if not self._queue or self._queue[0].at_ms > now_ms:
                    break
                timer = heapq.heappop(self._queue)
                self._now = max(self._now, timer.at_ms)
            if not timer.cancelled:
                timer.callback()
        self._now = max(self._now, now_ms)


class AbortController:
    """Like the DOM's: ``abort()`` takes effect once, then runs the listeners
    of the task's own work, then the links to child controllers (in the
    order the children were created)."""

    def __init__(self) -> None:
        self.aborted = False
        self._listeners: list[Callable[[], object]] = []  # what a listener returns is ignored
        self._children: list[Callable[[], None]] = []

    def on_abort(self, listener: Callable[[], object]) -> None:
        self._listeners.append(listener)

    def link_child(self, link: Callable[[], None]) -> None:
        self._children.append(link)

    def abort(self) -> None:
        if self.aborted:
            return
        self.aborted = True
        for listener in list(self._listeners):
            listener()
        self.propagate()

    def propagate(self) -> None:
        """Pass an abort on to the children without aborting this task's own work."""
        for link in list(self._children):
            link()


# ------------------------------------------------------------------- state


@dataclass(frozen=True)
class TaskConfig:
    grace_ms: int = 30000
    max_recent_activities: int = 5
    structured_output_tool: str = "StructuredOutput"
    killed_status: str = "killed"
    kill_pending: bool = False
    msg_not_found: str = "No task found with ID: {task_id}"
    msg_not_running: str = "Task {task_id} is not running (status: {status})"


@dataclass(frozen=True)
class Usage:
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0


@dataclass(frozen=True)
class ProgressTracker:
    """Running totals behind a task's progress.

    Input tokens are cumulative per API turn (they include all earlier
    context), so only the latest value counts; output tokens are per turn,
    so they are summed.
    """

    tool_use_count: int = 0
    latest_input_tokens: int = 0
    cumulative_output_tokens: int = 0
    recent_activities: tuple[str, ...] = ()


@dataclass(frozen=True)
class Progress:
    tool_use_count: int = 0
    token_count: int = 0
    recent_activities: tuple[str, ...] = ()
    summary: str | None = None

    def to_record(self) -> dict:
        return {
            "tool_use_count": self.tool_use_count,
            "token_count": self.token_count,
            "recent_activities": list(self.recent_activities),
            "summary": self.summary,
        }


@dataclass(frozen=True)
class TaskState:
    task_id: str
    kind: str
    description: str
    status: str
    is_backgrounded: bool
    start_time: int
    parent_id: str | None = None
    notified: bool = False
    retain: bool = False
    evict_after: int | None = None
    end_time: int | None = None
    error: str | None = None
    progress: Progress = Progress()
    pending_messages: tuple[str, ...] = ()
    tracker: ProgressTracker = field(default=ProgressTracker(), repr=False)

    def to_record(self) -> dict:
        return {
            "task_id": self.task_id,
            "kind": self.kind,
            "description": self.description,
            "status": self.status,
            "is_backgrounded": self.is_backgrounded,
            "notified": self.notified,
            "retain": self.retain,
            "evict_after": self.evict_after,
            "start_time": self.start_time,
            "end_time": self.end_time,
            "parent_id": self.parent_id,
            "error": self.error,
            "progress": self.progress.to_record(),
            "pending_messages": list(self.pending_messages),
        }


# ----------------------------------------------------------------- runtime


class TaskRuntime:
    """The task table; every public method is thread safe and returns frozen records."""

    def __init__(
        self,
        *,
        clock: VirtualClock,
        notifier: Notifier,
        abort_sink: AbortSink,
        sdk_events: SdkEvents,
        caller_waiter: CallerWaiter,
        config: TaskConfig | None = None,
        id_seed: int = 0,
    ) -> None:
        self._clock = clock
        self._notifier = notifier
        self._abort_sink = abort_sink
        self._sdk = sdk_events
        self._waiter = caller_waiter
        self.config = config or TaskConfig()
        self._terminal = frozenset({COMPLETED, FAILED, self.config.killed_status})
        self._random = random.Random(id_seed)
        # Re-entrant: a kill aborts a controller whose listeners kill children
        # through the same update path, all under one hold.
        self._lock = threading.RLock()
        self._tasks: dict[str, TaskState] = {}  # insertion order = creation order
        self._controllers: dict[str, AbortController] = {}
        self._auto_timers: dict[str, _Timer] = {}
        self._foregrounded_id: str | None = None

    # ------------------------------------------------------------ plumbing

    def _update(self, task_id: str, fn: Callable[[TaskState], TaskState]) -> TaskState | None:
        """Replace one task by ``fn(task)``; None when the task is unknown."""
        with self._lock:
            task = self._tasks.get(task_id)
            return None if task is None else self._replace(task_id, task, fn)

    def _update_known(self, task_id: str, fn: Callable[[TaskState], TaskState]) -> TaskState:
        with self._lock:
            return self._replace(task_id, self._known(task_id), fn)

    def _replace(self, task_id: str, task: TaskState, fn: Callable[[TaskState], TaskState]) -> TaskState:
        # Called with the lock held.
        updated = fn(task)
        if updated is not task:
            self._tasks[task_id] = updated
        return updated

    def _known(self, task_id: str) -> TaskState:
        task = self._tasks.get(task_id)
        if task is None:
            raise TaskError("not_found", self.config.msg_not_found.replace("{task_id}", task_id))
        return task

    def is_terminal(self, task: TaskState) -> bool:
        return task.status in self._terminal

    def _evict_after(self, task: TaskState, now: int) -> int | None:
        return None if task.retain else now + self.config.grace_ms

    def _new_id(self, kind: str) -> str:
        prefix = ID_PREFIX[kind]
        while True:  # 36^8 ids: a collision is rare, but never reuse a known id
            raw = self._random.randbytes(ID_LENGTH)
            candidate = prefix + "".join(ID_ALPHABET[b % len(ID_ALPHABET)] for b in raw)
            if candidate not in self._tasks:
                return candidate

    # -------------------------------------------------------- registration

    def register_task(
        self,
        kind: str,
        description: str,
        mode: str,
        parent_id: str | None = None,
        auto_background_ms: int | None = None,
    ) -> TaskState:
        with self._lock:
            parent = self._controllers[self._known(parent_id).task_id] if parent_id is not None else None
            task_id = self._new_id(kind)
            task = TaskState(
                task_id=task_id,
                kind=kind,
                description=description,
                status=PENDING,
                is_backgrounded=mode == ASYNC,  # async work is backgrounded at once
                start_time=self._clock.now(),
                parent_id=parent_id,
            )
            self._tasks[task_id] = task
            self._controllers[task_id] = self._controller_for(task_id, parent)
            if mode == FOREGROUND and auto_background_ms is not None:
                self._auto_timers[task_id] = self._clock.schedule(
                    task.start_time + auto_background_ms, lambda: self._auto_background(task_id)
                )
            return task

    def _controller_for(self, task_id: str, parent: AbortController | None) -> AbortController:
        controller = AbortController()
        controller.on_abort(lambda: self._abort_sink.request_abort(task_id))
        if parent is not None:  # a child controller: aborts when its parent does
            parent.link_child(lambda: self._on_parent_aborted(task_id, controller))
        return controller

    def start_task(self, task_id: str) -> TaskState:
        return self._update_known(task_id, lambda t: replace(t, status=RUNNING) if t.status == PENDING else t)

    # ----------------------------------------------------------- endings

    def complete_task(self, task_id: str) -> tuple[TaskState, bool]:
        return self._finish(task_id, COMPLETED, None)

    def fail_task(self, task_id: str, error: str) -> tuple[TaskState, bool]:
        return self._finish(task_id, FAILED, error)

    def _finish(self, task_id: str, status: str, error: str | None) -> tuple[TaskState, bool]:
        with self._lock:
            self._known(task_id)
            changed = False
            was_backgrounded = True

            def finish(task: TaskState) -> TaskState:
                nonlocal changed, was_backgrounded
                if task.status != RUNNING:
                    return task
                changed, was_backgrounded = True, task.is_backgrounded
                now = self._clock.now()
                return replace(
                    task,
                    status=status,
                    end_time=now,
                    error=error if status == FAILED else task.error,
                    evict_after=self._evict_after(task, now),
                )

            task = self._update(task_id, finish)
            if changed and task is not None:  # changed: the task was there to finish
                self._cancel_auto_background(task_id)
                if task.kind == MAIN_SESSION:
                    self._settle_main_session(task_id, status, was_backgrounded)
                # Agent tasks are announced by whoever awaited them (notify_task).
            return self._tasks[task_id], changed

    def _settle_main_session(self, task_id: str, status: str, was_backgrounded: bool) -> None:
        if was_backgrounded:
            self._notify(task_id)
            return
        # The user is watching it in the foreground: no message, but mark it
        # notified (so it can be evicted) and close the SDK's task bookend.
        self._update(task_id, lambda t: t if t.notified else replace(t, notified=True))
        self._sdk.task_terminated(task_id, status)

    def kill_task(self, task_id: str) -> TaskState:
        with self._lock:
            task = self._known(task_id)
            if not self._killable(task):
                message = self.config.msg_not_running.replace("{task_id}", task_id)
                raise TaskError("not_running", message.replace("{status}", task.status))
            self._kill(task_id, self._killable)
            return self._tasks[task_id]

    def _killable(self, task: TaskState) -> bool:
        return task.status == RUNNING or (task.status == PENDING and self.config.kill_pending)

    def _kill(self, task_id: str, killable: Callable[[TaskState], bool]) -> bool:
        """Kill one task if it can be killed; its controller cascades to children."""
        killed = False

        def kill(task: TaskState) -> TaskState:
            nonlocal killed
            if not killable(task):
                return task
            killed = True
            now = self._clock.now()
            return replace(
                task, status=self.config.killed_status, end_time=now, evict_after=self._evict_after(task, now)
            )

        with self._lock:
            self._update(task_id, kill)
            if killed:
                self._cancel_auto_background(task_id)
                self._controllers[task_id].abort()
            return killed

    def _on_parent_aborted(self, task_id: str, controller: AbortController) -> None:
        # The cascade reaches work that is running: a pending child has no
        # query to abort yet (even where a pending task may be killed by
        # request), and a finished one has nothing left to abort.
        if not self._kill(task_id, lambda t: t.status == RUNNING):
            # Its own work is left alone, but the tasks it started still hear the abort.
            controller.propagate()

    # ------------------------------------------------------- notification

    def notify_task(self, task_id: str) -> bool:
        with self._lock:
            self._known(task_id)
            return self._notify(task_id)

    def _notify(self, task_id: str) -> bool:
        should_enqueue = False

        def check_and_set(task: TaskState) -> TaskState:
            nonlocal should_enqueue
            if not self.is_terminal(task) or task.notified:
                return task
            should_enqueue = True
            return replace(task, notified=True)

        task = self._update(task_id, check_and_set)
        if should_enqueue and task is not None:  # should_enqueue: the task was there to check
            self._notifier.enqueue(task_id, task.status)
        return should_enqueue

    def mark_notified(self, task_id: str) -> TaskState:
        return self._update_known(task_id, lambda t: t if t.notified else replace(t, notified=True))

    # -------------------------------------------------- foreground/background

    def background_task(self, task_id: str) -> bool:
        with self._lock:
            self._known(task_id)
            return self._background(task_id, "request")

    def _auto_background(self, task_id: str) -> None:
        with self._lock:
            self._auto_timers.pop(task_id, None)
            self._background(task_id, "auto")

    def _background(self, task_id: str, reason: str) -> bool:
        backgrounded = False

        def flip(task: TaskState) -> TaskState:
            nonlocal backgrounded
            if not self._backgroundable(task):
                return task
            backgrounded = True
            return replace(task, is_backgrounded=True)

        self._update(task_id, flip)
        if backgrounded:
            self._waiter.release(task_id, reason)
        return backgrounded

    def _backgroundable(self, task: TaskState) -> bool:
        return task.status in ACTIVE_STATUSES and not task.is_backgrounded

    def _cancel_auto_background(self, task_id: str) -> None:
        timer = self._auto_timers.pop(task_id, None)
        if timer is not None:
            self._clock.cancel(timer)

    def foreground_task(self, task_id: str) -> str | None:
        with self._lock:
            self._known(task_id)
            previous = self._foregrounded_id
            restore = previous if previous != task_id and previous in self._tasks else None
            self._foregrounded_id = task_id
            if restore is not None:
                self._restore_to_background(restore)
            self._update(task_id, lambda t: replace(t, is_backgrounded=False))
            return restore

    def _restore_to_background(self, task_id: str) -> None:
        self._update(task_id, lambda t: replace(t, is_backgrounded=True))

    # ----------------------------------------------------------- progress

    def update_progress(self, task_id: str, usage: Usage, tool_uses: Iterable[str]) -> Progress:
        tool_uses = tuple(tool_uses)

        def apply(task: TaskState) -> TaskState:
            if not self._accepts_progress(task):
                return task
            tracker = self._track_tools(self._track_usage(task.tracker, usage), tool_uses)
            return replace(
                task, tracker=tracker, progress=self._merge_progress(task.progress, self._progress_of(tracker))
            )

        return self._update_known(task_id, apply).progress

    def _accepts_progress(self, task: TaskState) -> bool:
        return task.status == RUNNING

    def _track_usage(self, tracker: ProgressTracker, usage: Usage) -> ProgressTracker:
        latest_input = usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens
        return replace(
            tracker,
            latest_input_tokens=latest_input,
            cumulative_output_tokens=tracker.cumulative_output_tokens + usage.output_tokens,
        )

    def _track_tools(self, tracker: ProgressTracker, tool_uses: tuple[str, ...]) -> ProgressTracker:
        listed = tuple(name for name in tool_uses if self._listed_activity(name))
        return replace(
            tracker,
            tool_use_count=tracker.tool_use_count + len(tool_uses),
            recent_activities=self._trim(tracker.recent_activities + listed),
        )

    def _listed_activity(self, tool_name: str) -> bool:
        # The structured-output tool is internal: counted as a use, never shown.
        return tool_name != self.config.structured_output_tool

    def _trim(self, activities: tuple[str, ...]) -> tuple[str, ...]:
        limit = self.config.max_recent_activities
        return activities[len(activities) - limit :] if len(activities) > limit else activities

    def _progress_of(self, tracker: ProgressTracker) -> Progress:
        return Progress(
            tool_use_count=tracker.tool_use_count,
            token_count=tracker.latest_input_tokens + tracker.cumulative_output_tokens,
            recent_activities=tracker.recent_activities,
        )

    def _merge_progress(self, current: Progress, fresh: Progress) -> Progress:
        # A background summarizer writes the summary; progress from the
        # agent's own messages must not clobber it.
        return fresh if current.summary is None else replace(fresh, summary=current.summary)

    def update_summary(self, task_id: str, summary: str) -> Progress:
        return self._update_known(
            task_id,
            lambda t: replace(t, progress=replace(t.progress, summary=summary)) if t.status == RUNNING else t,
        ).progress

    # ------------------------------------------------------------ messages

    def queue_message(self, task_id: str, message: str) -> int:
        task = self._update_known(task_id, lambda t: replace(t, pending_messages=t.pending_messages + (message,)))
        return len(task.pending_messages)

    def drain_messages(self, task_id: str) -> list[str]:
        with self._lock:
            drained = self._known(task_id).pending_messages
            if drained:
                self._update(task_id, self._cleared_queue)
            return list(drained)

    def _cleared_queue(self, task: TaskState) -> TaskState:
        return replace(task, pending_messages=())

    # ----------------------------------------------------------- retention

    def set_retain(self, task_id: str, retain: bool) -> TaskState:
        def apply(task: TaskState) -> TaskState:
            if retain:
                return replace(task, retain=True, evict_after=None)
            if self.is_terminal(task):
                return replace(task, retain=False, evict_after=self._clock.now() + self.config.grace_ms)
            return replace(task, retain=False)

        return self._update_known(task_id, apply)

    def evict(self) -> list[str]:
        with self._lock:
            now = self._clock.now()
            victims = [t.task_id for t in self._tasks.values() if self._evictable(t, now)]
            for task_id in victims:
                del self._tasks[task_id]
                self._controllers.pop(task_id, None)
                self._cancel_auto_background(task_id)
            return victims

    def _evictable(self, task: TaskState, now: int) -> bool:
        return (
            self.is_terminal(task)
            and task.notified
            and not task.retain
            and task.evict_after is not None
            and task.evict_after <= now
        )

    # ------------------------------------------------------------- queries

    def get_task(self, task_id: str) -> TaskState:
        with self._lock:
            return self._known(task_id)

    def list_background(self) -> list[TaskState]:
        with self._lock:
            return [t for t in self._tasks.values() if t.status in ACTIVE_STATUSES and t.is_backgrounded]

    def list_tasks(self) -> list[TaskState]:
        with self._lock:
            return list(self._tasks.values())
