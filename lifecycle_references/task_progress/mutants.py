"""Faulty variants of the reference runtime, to check that the kit catches bugs.

Each mutant is one realistic bug: a runtime subclass overriding the single
method involved, behind an adapter subclass that differs from
ReferenceAdapter only in which runtime it builds.
"""

from __future__ import annotations

import posixpath
import time
from collections import deque
from dataclasses import replace

from ..mutant import Mutant
from .adapter import ReferenceAdapter
from .runtime import (
    ACTIVE_STATUSES,
    PENDING,
    RUNNING,
    AbortController,
    Progress,
    ProgressTracker,
    TaskError,
    TaskRuntime,
    TaskState,
    Usage,
)

__all__ = ["MUTANTS", "Mutant"]


# ------------------------------------------------------------- lookup


class _AbbreviatedTaskIds(TaskRuntime):
    def _known(self, task_id: str) -> TaskState:
        # ids are long and random: any unambiguous abbreviation names its task (as git's do)
        hits = [known for known in self._tasks if known.startswith(task_id)] if task_id not in self._tasks else []
        return super()._known(hits[0] if len(hits) == 1 else task_id)


class _TrimmedTaskIds(TaskRuntime):
    def _known(self, task_id: str) -> TaskState:
        # ids pasted from a log or a form come with white space: forgive it
        return super()._known(task_id.strip())


class _PathLikeTaskIds(TaskRuntime):
    def _known(self, task_id: str) -> TaskState:
        # each task's output is a file named after its id: an id given as a path names that file
        return super()._known(posixpath.basename(task_id))


# ------------------------------------------------------------- notification


class _DoubleNotifyRace(TaskRuntime):
    def notify_task(self, task_id: str) -> bool:
        task = self.get_task(task_id)  # check under the lock...
        if not self.is_terminal(task) or task.notified:
            return False
        time.sleep(0.002)  # ...a realistic pause with the lock released...
        self._update(task_id, lambda t: replace(t, notified=True))  # ...then set without re-checking
        self._notifier.enqueue(task_id, task.status)
        return True


class _CompleteCheckThenAct(TaskRuntime):
    def _finish(self, task_id: str, status: str, error: str | None) -> tuple[TaskState, bool]:
        with self._lock:
            was_running = self._known(task_id).status == RUNNING  # look under the lock...
        time.sleep(0.002)  # ...a realistic pause with the lock released...
        task, changed = super()._finish(task_id, status, error)
        return task, changed or was_running  # ..."it was running when I looked": both racers report the change


class _QueueLostUpdate(TaskRuntime):
    def queue_message(self, task_id: str, message: str) -> int:
        with self._lock:
            queued = self._known(task_id).pending_messages  # read under the lock...
        time.sleep(0.002)  # ...a pause with the lock released...
        task = self._update_known(task_id, lambda t: replace(t, pending_messages=queued + (message,)))
        return len(task.pending_messages)  # ...then write what was read: a message queued meanwhile is lost


class _MainSessionForegroundNotifies(TaskRuntime):
    def _settle_main_session(self, task_id: str, status: str, was_backgrounded: bool) -> None:
        self._notify(task_id)  # foreground or not, the XML goes out
        if not was_backgrounded:
            self._sdk.task_terminated(task_id, status)


class _CompletionIgnoresNotified(TaskRuntime):
    def _settle_main_session(self, task_id: str, status: str, was_backgrounded: bool) -> None:
        if was_backgrounded:
            # "it has only just finished: nobody can have announced it yet"
            self._update(task_id, lambda t: replace(t, notified=False))
        super()._settle_main_session(task_id, status, was_backgrounded)


# ----------------------------------------------------------------- progress


class _TokenCountSumsInputs(TaskRuntime):
    def _track_usage(self, tracker: ProgressTracker, usage: Usage) -> ProgressTracker:
        turn_input = usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens
        return replace(
            tracker,
            latest_input_tokens=tracker.latest_input_tokens + turn_input,
            cumulative_output_tokens=tracker.cumulative_output_tokens + usage.output_tokens,
        )


class _ActivitiesKeepOldest(TaskRuntime):
    def _trim(self, activities: tuple[str, ...]) -> tuple[str, ...]:
        return activities[: self.config.max_recent_activities]  # the first N kept: the newest are dropped


class _KeepsSixActivities(TaskRuntime):
    def _trim(self, activities: tuple[str, ...]) -> tuple[str, ...]:
        limit = self.config.max_recent_activities + 1  # off by one
        return activities[len(activities) - limit :] if len(activities) > limit else activities


class _StructuredOutputListed(TaskRuntime):
    def _listed_activity(self, tool_name: str) -> bool:
        return True


class _SummaryLostOnUpdate(TaskRuntime):
    def _merge_progress(self, current: Progress, fresh: Progress) -> Progress:
        return fresh


class _ProgressAfterTerminalApplies(TaskRuntime):
    def _accepts_progress(self, task: TaskState) -> bool:
        return True


# ---------------------------------------------------------------- eviction


class _EvictsBeforeNotified(TaskRuntime):
    def _evictable(self, task: TaskState, now: int) -> bool:
        return self.is_terminal(task) and not task.retain and task.evict_after is not None and task.evict_after <= now


class _EvictsRetained(TaskRuntime):
    def _evictable(self, task: TaskState, now: int) -> bool:
        # A missing deadline read as "already due", forgetting that a
        # retained task has none.
        return self.is_terminal(task) and task.notified and (task.evict_after is None or task.evict_after <= now)


class _GraceOffByOne(TaskRuntime):
    def _evictable(self, task: TaskState, now: int) -> bool:
        return (
            self.is_terminal(task)
            and task.notified
            and not task.retain
            and task.evict_after is not None
            and task.evict_after < now
        )


# --------------------------------------------------- foreground/background


class _BackgroundTwiceTrue(TaskRuntime):
    def _backgroundable(self, task: TaskState) -> bool:
        return task.status in ACTIVE_STATUSES


class _ForegroundKeepsPrevious(TaskRuntime):
    def _restore_to_background(self, task_id: str) -> None:
        pass


# --------------------------------------------------------------------- kill


class _KillFinishedChangesIt(TaskRuntime):
    def _killable(self, task: TaskState) -> bool:
        if task.status == PENDING:
            return self.config.kill_pending
        return task.status != self.config.killed_status


class _ChildNotKilled(TaskRuntime):
    def _controller_for(self, task_id: str, parent: AbortController | None) -> AbortController:
        controller = AbortController()  # a fresh controller, never linked to the parent's
        controller.on_abort(lambda: self._abort_sink.request_abort(task_id))
        return controller


class _ChildSharesParentController(TaskRuntime):
    def _controller_for(self, task_id: str, parent: AbortController | None) -> AbortController:
        if parent is None:
            return super()._controller_for(task_id, None)
        # The parent's controller handed down as the child's own (`signal: parent.signal`)
        # instead of a linked child controller: killing the parent still reaches the
        # child, but killing one child aborts the parent's controller, and so every sibling.
        parent.on_abort(lambda: self._kill(task_id, lambda t: t.status == RUNNING))
        return parent


class _CascadeStopsAtFinishedChild(TaskRuntime):
    def _on_parent_aborted(self, task_id: str, controller: AbortController) -> None:
        # "nothing to abort here": a child that is not running (finished, or
        # still pending) swallows the abort, so its own running children are never told
        self._kill(task_id, lambda t: t.status == RUNNING)


class _CascadeBreadthFirst(TaskRuntime):
    """Kills a tree a level at a time (a queue of aborts) instead of depth first."""

    _waiting: deque | None = None

    def _on_parent_aborted(self, task_id: str, controller: AbortController) -> None:
        if self._waiting is not None:  # reached by a cascade: wait for the tasks queued before it
            self._waiting.append((task_id, controller))
            return
        super()._on_parent_aborted(task_id, controller)

    def _kill(self, task_id: str, killable) -> bool:
        self._waiting = deque()
        try:
            killed = super()._kill(task_id, killable)
            while self._waiting:
                child_id, controller = self._waiting.popleft()
                if not super()._kill(child_id, lambda t: t.status == RUNNING):
                    controller.propagate()
            return killed
        finally:
            self._waiting = None


# ----------------------------------------------------------------- messages


class _DrainKeepsAfterEnd(TaskRuntime):
    def drain_messages(self, task_id: str) -> list[str]:
        with self._lock:
            task = self._known(task_id)
            if self.is_terminal(task):
                return list(task.pending_messages)  # "nothing will read an ended task's queue again"
        return super().drain_messages(task_id)


class _ProgressWritesBackStaleTask(TaskRuntime):
    def update_progress(self, task_id, usage, tool_uses):
        tool_uses = tuple(tool_uses)
        with self._lock:
            task = self._known(task_id)  # a copy of the whole task, read under the lock...
        if not self._accepts_progress(task):
            return task.progress
        tracker = self._track_tools(self._track_usage(task.tracker, usage), tool_uses)
        updated = replace(
            task, tracker=tracker, progress=self._merge_progress(task.progress, self._progress_of(tracker))
        )
        time.sleep(0.002)  # ...the tokens counted with the lock released...
        with self._lock:
            self._tasks[task_id] = updated  # ...then the whole copy written back: a completion meanwhile is undone
        return updated.progress


class _KillCheckThenAct(TaskRuntime):
    def kill_task(self, task_id: str) -> TaskState:
        with self._lock:
            task = self._known(task_id)
            if not self._killable(task):  # check under the lock...
                message = self.config.msg_not_running.replace("{task_id}", task_id)
                raise TaskError("not_running", message.replace("{status}", task.status))
        time.sleep(0.005)  # ...a pause with the lock released...
        self._kill(task_id, lambda t: True)  # ...then kill whatever it is now: a task finished meanwhile too
        return self._tasks[task_id]


class _DrainKeepsQueue(TaskRuntime):
    def _cleared_queue(self, task: TaskState) -> TaskState:
        return task


class _CascadeUsesRootRetain(TaskRuntime):
    _root_retain: bool | None = None

    def kill_task(self, task_id: str) -> TaskState:
        with self._lock:
            self._root_retain = self._known(task_id).retain  # read once for the whole cascade...
            try:
                return super().kill_task(task_id)
            finally:
                self._root_retain = None

    def _evict_after(self, task: TaskState, now: int) -> int | None:
        if self._root_retain is not None:
            task = replace(task, retain=self._root_retain)  # ...and used for every task it ends
        return super()._evict_after(task, now)


class _CascadeStopsAtEvicted(TaskRuntime):
    def _on_parent_aborted(self, task_id: str, controller: AbortController) -> None:
        if task_id not in self._tasks:
            return  # "an evicted task's work is long gone": so, wrongly, is the abort to what it started
        super()._on_parent_aborted(task_id, controller)


# ----------------------------------------------------------------- registry


class _AutoBackgroundRefires(TaskRuntime):
    """The auto-background timer is an interval, cleared only by the tick that
    backgrounds the task: one that comes due while the task is in the
    background already stays armed and backgrounds it again once it is
    brought back to the foreground."""

    def register_task(
        self,
        kind: str,
        description: str,
        mode: str,
        parent_id: str | None = None,
        auto_background_ms: int | None = None,
    ) -> TaskState:
        task = super().register_task(kind, description, mode, parent_id, auto_background_ms)
        if task.task_id in self._auto_timers and auto_background_ms is not None:
            self._intervals = {**getattr(self, "_intervals", {}), task.task_id: max(1, auto_background_ms)}
        return task

    def _auto_background(self, task_id: str) -> None:
        with self._lock:
            self._auto_timers.pop(task_id, None)
            task = self._tasks.get(task_id)
            if self._background(task_id, "auto") or task is None or task.status not in ACTIVE_STATUSES:
                return
            interval = getattr(self, "_intervals", {}).get(task_id, 1)
            self._auto_timers[task_id] = self._clock.schedule(
                self._clock.now() + interval, lambda: self._auto_background(task_id)
            )


class _AutoBackgroundTiesById(TaskRuntime):
    """Auto-background timers are swept per instant: the first timer due at a
    time backgrounds every task due then, looked up by id, so tasks whose
    timers come due together go to the background in id order instead of the
    order they were registered in."""

    def _auto_background(self, task_id: str) -> None:
        with self._lock:
            now = self._clock.now()
            due = sorted(tid for tid, timer in self._auto_timers.items() if timer.at_ms == now)
            for tid in due or [task_id]:
                timer = self._auto_timers.pop(tid, None)
                if timer is not None:
                    self._clock.cancel(timer)
                self._background(tid, "auto")


class _ForegroundReportsEvicted(TaskRuntime):
    """foreground_task trusts its foreground slot, which evict never clears:
    after the foregrounded task was evicted, the next foreground_task reports
    the evicted id as the previous task."""

    def foreground_task(self, task_id: str) -> str | None:
        with self._lock:
            previous = self._foregrounded_id
            gone = previous is not None and previous != task_id and previous not in self._tasks
            restored = super().foreground_task(task_id)
            return previous if gone else restored


def _adapter_for(runtime_class: type[TaskRuntime]) -> type[ReferenceAdapter]:
    name = runtime_class.__name__.lstrip("_") + "Adapter"
    return type(name, (ReferenceAdapter,), {"runtime_class": runtime_class, "__module__": __name__})


_TABLE = [
    (
        "double_notify_race",
        _DoubleNotifyRace,
        "notify_task checks 'already notified?' and sets notified in separate lock holds, "
        "so racing calls send the same notification twice.",
    ),
    (
        "token_count_sums_inputs",
        _TokenCountSumsInputs,
        "token_count sums the input tokens of every turn instead of keeping the latest (inputs are cumulative).",
    ),
    (
        "activities_keep_oldest",
        _ActivitiesKeepOldest,
        "Past max_recent_activities, recent_activities keeps the oldest entries and drops the newest.",
    ),
    ("keeps_six_activities", _KeepsSixActivities, "recent_activities keeps max_recent_activities + 1 entries."),
    (
        "structured_output_listed",
        _StructuredOutputListed,
        "The internal structured-output tool is listed among recent_activities.",
    ),
    (
        "summary_lost_on_update",
        _SummaryLostOnUpdate,
        "A progress update replaces the progress wholesale, dropping the existing summary.",
    ),
    (
        "progress_after_terminal_applies",
        _ProgressAfterTerminalApplies,
        "update_progress still changes the progress of a task that is no longer running.",
    ),
    (
        "evicts_before_notified",
        _EvictsBeforeNotified,
        "evict removes finished tasks past their grace period before they were notified.",
    ),
    (
        "evicts_retained",
        _EvictsRetained,
        "evict reads a missing evict_after as due, so retained finished tasks are evicted.",
    ),
    (
        "grace_off_by_one",
        _GraceOffByOne,
        "evict requires evict_after < now, keeping a task whose grace period ends exactly now.",
    ),
    (
        "background_twice_true",
        _BackgroundTwiceTrue,
        "Backgrounding an already backgrounded task reports true and releases the caller again.",
    ),
    (
        "foreground_keeps_previous",
        _ForegroundKeepsPrevious,
        "foreground_task does not put the previously foregrounded task back in the background.",
    ),
    (
        "kill_finished_changes_it",
        _KillFinishedChangesIt,
        "kill_task kills a completed or failed task instead of refusing it as not running.",
    ),
    (
        "child_not_killed",
        _ChildNotKilled,
        "A child task's abort controller is not linked to its parent's, so killing the parent leaves it running.",
    ),
    (
        "child_shares_parent_controller",
        _ChildSharesParentController,
        "A child task gets its parent's abort controller instead of a linked one of its own: killing one child also "
        "kills its running siblings and aborts the parent's work.",
    ),
    (
        "cascade_stops_at_finished_child",
        _CascadeStopsAtFinishedChild,
        "Killing a task does not reach running tasks below a child that is not running (finished, or still pending).",
    ),
    (
        "cascade_breadth_first",
        _CascadeBreadthFirst,
        "Killing a task kills its descendants a level at a time instead of depth first (siblings before grandchildren).",
    ),
    (
        "complete_check_then_act",
        _CompleteCheckThenAct,
        "complete_task and fail_task check that the task runs, release the lock, then finish it: two racing calls both report the change.",
    ),
    (
        "queue_lost_update",
        _QueueLostUpdate,
        "queue_message reads the queue, releases the lock, then writes it back with the new message: a message queued meanwhile is lost.",
    ),
    (
        "progress_writes_back_stale_task",
        _ProgressWritesBackStaleTask,
        "update_progress copies the task, counts the tokens with the lock released, then writes the whole copy back: "
        "a task that finished meanwhile is running again.",
    ),
    (
        "kill_check_then_act",
        _KillCheckThenAct,
        "kill_task checks that the task runs, releases the lock, then kills it whatever its status: a task that "
        "completed or failed meanwhile is killed too.",
    ),
    ("drain_keeps_queue", _DrainKeepsQueue, "drain_messages returns the queued messages but leaves them queued."),
    (
        "main_session_foreground_notifies",
        _MainSessionForegroundNotifies,
        "A main-session task completed while in the foreground also sends a notification.",
    ),
    (
        "auto_background_refires",
        _AutoBackgroundRefires,
        "The auto-background timer repeats until it backgrounds the task: one that comes due while the task is "
        "backgrounded already fires again after the task is brought back to the foreground.",
    ),
    (
        "auto_background_ties_by_id",
        _AutoBackgroundTiesById,
        "Foreground tasks whose auto-background timers come due at the same instant are backgrounded in task id "
        "order, not in the order they were registered.",
    ),
    (
        "abbreviated_task_ids",
        _AbbreviatedTaskIds,
        "A task id never issued that abbreviates one task's id (a proper prefix of it alone) finds that task instead "
        "of not_found.",
    ),
    (
        "completion_ignores_notified",
        _CompletionIgnoresNotified,
        "A backgrounded main session marked notified while it ran is notified again when it completes or fails "
        "(it sends nothing: it was already notified).",
    ),
    (
        "drain_keeps_after_end",
        _DrainKeepsAfterEnd,
        "Draining an ended task's queue returns its messages but leaves them queued (a second drain returns them "
        "again).",
    ),
    (
        "cascade_uses_root_retain",
        _CascadeUsesRootRetain,
        "A kill's cascade gives every task it ends the killed root's retain flag's evict_after, not the task's own.",
    ),
    (
        "cascade_stops_at_evicted",
        _CascadeStopsAtEvicted,
        "A kill's cascade stops at a child that was evicted, so the still-running tasks below it are never "
        "killed (the abort travels through the evicted child).",
    ),
    (
        "trimmed_task_ids",
        _TrimmedTaskIds,
        "A task id never issued that is an issued id with white space around it finds that task instead of "
        "not_found (the lookup trims its input).",
    ),
    (
        "path_like_task_ids",
        _PathLikeTaskIds,
        "A task id never issued that is a path ending in an issued id (./id, x/id) finds that task instead of "
        "not_found (the lookup keeps the last path part, as the task's output file is named).",
    ),
    (
        "foreground_reports_evicted",
        _ForegroundReportsEvicted,
        "After the foregrounded task is evicted, the next foreground_task reports the evicted id as previous "
        "(the evicted task is no longer known: previous is null).",
    ),
]

# Steps of the shortest counterexample for each bug (Mutant.shortest), as a
# counterexample file counts them; tests/test_mutants.py holds the kit's
# reduced counterexamples to 1.5 times these.
SHORTEST: dict[str, int] = {
    'double_notify_race': 4,
    'token_count_sums_inputs': 4,
    'keeps_six_activities': 4,
    'activities_keep_oldest': 4,
    'structured_output_listed': 3,
    'summary_lost_on_update': 4,
    'progress_after_terminal_applies': 2,
    'evicts_before_notified': 5,
    'evicts_retained': 5,
    'grace_off_by_one': 5,
    'background_twice_true': 2,
    'foreground_keeps_previous': 5,
    'kill_finished_changes_it': 4,
    'child_not_killed': 5,
    'cascade_stops_at_finished_child': 6,
    'cascade_breadth_first': 8,
    'child_shares_parent_controller': 4,
    'complete_check_then_act': 3,
    'queue_lost_update': 2,
    'drain_keeps_queue': 4,
    'progress_writes_back_stale_task': 3,
    'kill_check_then_act': 3,
    'main_session_foreground_notifies': 3,
    'auto_background_refires': 5,
    'auto_background_ties_by_id': 3,
    'foreground_reports_evicted': 8,
    'abbreviated_task_ids': 2,
    'trimmed_task_ids': 1,
    'path_like_task_ids': 1,
    'completion_ignores_notified': 4,
    'drain_keeps_after_end': 6,
    'cascade_uses_root_retain': 7,
    'cascade_stops_at_evicted': 10,
}

MUTANTS: dict[str, Mutant] = {
    name: Mutant(name, description, _adapter_for(cls), SHORTEST[name]) for name, cls, description in _TABLE
}
