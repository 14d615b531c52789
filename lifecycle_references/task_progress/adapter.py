"""Adapter: drives TaskRuntime through the kit's JSON protocol."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from conformance.adapters.adapter import Adapter, EffectRecorder, error_response, result_response

from .. import arguments as arg
from .runtime import KINDS, MODES, TaskConfig, TaskError, TaskRuntime, Usage, VirtualClock

__all__ = ["PROFILES", "ReferenceAdapter"]

NAME = "reference-task-progress"
VERSION = "1.0.0"

# Named parameter sets. "job-tool" is the per-task progress of the job tool
# (seed 000): a killed task reads "aborted", and a pending task can be killed.
PROFILES: dict[str | None, dict[str, Any]] = {
    None: {},
    "job-tool": {"killed_status": "aborted", "kill_pending": True},
}

_INT_PARAMS = {"grace_ms", "max_recent_activities"}
_BOOL_PARAMS = {"kill_pending"}
_PARAM_NAMES = {f.name for f in fields(TaskConfig)}
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def _coerce_params(params: dict[str, Any]) -> dict[str, Any]:
    unknown = set(params) - _PARAM_NAMES
    if unknown:
        raise TypeError(f"unknown parameters: {sorted(unknown)}")
    # Options given on a command line arrive as strings.
    coerced: dict[str, Any] = {}
    for name, value in params.items():
        if name in _INT_PARAMS:
            coerced[name] = int(value)
            if coerced[name] < 0:
                raise ValueError(f"{name} must not be negative")
        elif name in _BOOL_PARAMS:
            coerced[name] = _coerce_bool(name, value)
        else:
            coerced[name] = str(value)
    return coerced


def _coerce_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"{name} must be a boolean, not {value!r}")


# -------------------------------------------------------------- arguments


_MISSING = object()


def _flag(args: dict, name: str) -> bool:
    value = args.get(name)
    if not isinstance(value, bool):
        raise arg.BadArguments(f"{name} must be true or false")
    return value


def _names(args: dict, name: str) -> list[str]:
    value = args.get(name)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise arg.BadArguments(f"{name} must be a list of strings")
    return value


def _present(args: dict, name: str) -> Any:
    value = args.get(name, _MISSING)
    if value is _MISSING:
        raise arg.BadArguments(f"{name} is required")
    return value


# ------------------------------------------------------------ environment
# The runtime's collaborators. Here they only record what the runtime asked
# of its environment; EffectRecorder attributes each record to the calling
# thread's current call (or to the clock move that fired a timer).


class _Notifier:
    """The message queue a task-notification is enqueued on."""

    def __init__(self, effects: EffectRecorder) -> None:
        self._effects = effects

    def enqueue(self, task_id: str, status: str) -> None:
        self._effects.record("notification", task_id=task_id, status=status)


class _AbortSink:
    """What a task's abort signal reaches: the query it runs."""

    def __init__(self, effects: EffectRecorder) -> None:
        self._effects = effects

    def request_abort(self, task_id: str) -> None:
        self._effects.record("abort_requested", task_id=task_id)


class _SdkEvents:
    def __init__(self, effects: EffectRecorder) -> None:
        self._effects = effects

    def task_terminated(self, task_id: str, status: str) -> None:
        self._effects.record("terminated_event", task_id=task_id, status=status)


class _CallerWaiter:
    """The caller blocked on a foreground task's background signal."""

    def __init__(self, effects: EffectRecorder) -> None:
        self._effects = effects

    def release(self, task_id: str, reason: str) -> None:
        self._effects.record("caller_released", task_id=task_id, reason=reason)


# ------------------------------------------------------------ operations
# Each takes (runtime, args) and returns the JSON result.


def _register_task(rt: TaskRuntime, a: dict) -> dict:
    kind = arg.choice(a, "kind", KINDS)
    description = arg.text(a, "description")
    mode = arg.choice(a, "mode", MODES)
    parent_id = arg.text(a, "parent_id", optional=True)
    # Only a foreground task has a caller to release; for async it is moot.
    auto_background_ms = arg.whole(a, "auto_background_ms", optional=True, minimum=0)
    task = rt.register_task(kind, description, mode, parent_id, auto_background_ms)
    return {"task_id": task.task_id, "status": task.status, "is_backgrounded": task.is_backgrounded}


def _start_task(rt: TaskRuntime, a: dict) -> dict:
    task = rt.start_task(arg.text(a, "task_id"))
    return {"task_id": task.task_id, "status": task.status}


def _complete_task(rt: TaskRuntime, a: dict) -> dict:
    task_id = arg.text(a, "task_id")
    _present(a, "result")  # any JSON value; the record keeps no result
    task, changed = rt.complete_task(task_id)
    return {"task_id": task_id, "status": task.status, "changed": changed}


def _fail_task(rt: TaskRuntime, a: dict) -> dict:
    task_id = arg.text(a, "task_id")
    task, changed = rt.fail_task(task_id, arg.text(a, "error"))
    return {"task_id": task_id, "status": task.status, "changed": changed}


def _kill_task(rt: TaskRuntime, a: dict) -> dict:
    task = rt.kill_task(arg.text(a, "task_id"))
    return {"task_id": task.task_id, "status": task.status}


def _notify_task(rt: TaskRuntime, a: dict) -> dict:
    task_id = arg.text(a, "task_id")
    return {"task_id": task_id, "sent": rt.notify_task(task_id)}


def _mark_notified(rt: TaskRuntime, a: dict) -> dict:
    task = rt.mark_notified(arg.text(a, "task_id"))
    return {"task_id": task.task_id, "notified": task.notified}


def _background_task(rt: TaskRuntime, a: dict) -> dict:
    task_id = arg.text(a, "task_id")
    return {"task_id": task_id, "backgrounded": rt.background_task(task_id)}


def _foreground_task(rt: TaskRuntime, a: dict) -> dict:
    task_id = arg.text(a, "task_id")
    return {"task_id": task_id, "previous": rt.foreground_task(task_id)}


def _update_progress(rt: TaskRuntime, a: dict) -> dict:
    task_id = arg.text(a, "task_id")
    usage = Usage(
        input_tokens=arg.whole(a, "input_tokens", minimum=0),
        output_tokens=arg.whole(a, "output_tokens", minimum=0),
        cache_creation_input_tokens=arg.whole(a, "cache_creation_input_tokens", optional=True, minimum=0) or 0,
        cache_read_input_tokens=arg.whole(a, "cache_read_input_tokens", optional=True, minimum=0) or 0,
    )
    progress = rt.update_progress(task_id, usage, _names(a, "tool_uses"))
    return {"task_id": task_id, "progress": progress.to_record()}


def _update_summary(rt: TaskRuntime, a: dict) -> dict:
    task_id = arg.text(a, "task_id")
    return {"task_id": task_id, "progress": rt.update_summary(task_id, arg.text(a, "summary")).to_record()}


def _queue_message(rt: TaskRuntime, a: dict) -> dict:
    task_id = arg.text(a, "task_id")
    return {"task_id": task_id, "queued": rt.queue_message(task_id, arg.text(a, "message"))}


def _drain_messages(rt: TaskRuntime, a: dict) -> dict:
    task_id = arg.text(a, "task_id")
    return {"task_id": task_id, "messages": rt.drain_messages(task_id)}


def _set_retain(rt: TaskRuntime, a: dict) -> dict:
    task = rt.set_retain(arg.text(a, "task_id"), _flag(a, "retain"))
    return {"task_id": task.task_id, "retain": task.retain, "evict_after": task.evict_after}


def _evict(rt: TaskRuntime, a: dict) -> dict:
    return {"evicted": rt.evict()}


def _get_task(rt: TaskRuntime, a: dict) -> dict:
    return {"task": rt.get_task(arg.text(a, "task_id")).to_record()}


def _list_background(rt: TaskRuntime, a: dict) -> dict:
    return {"tasks": [t.task_id for t in rt.list_background()]}


def _list_tasks(rt: TaskRuntime, a: dict) -> dict:
    return {
        "tasks": [
            {
                "task_id": t.task_id,
                "kind": t.kind,
                "status": t.status,
                "is_backgrounded": t.is_backgrounded,
                "notified": t.notified,
            }
            for t in rt.list_tasks()
        ]
    }


_OPERATIONS: dict[str, Callable[[TaskRuntime, dict], dict]] = {
    "register_task": _register_task,
    "start_task": _start_task,
    "complete_task": _complete_task,
    "fail_task": _fail_task,
    "kill_task": _kill_task,
    "notify_task": _notify_task,
    "mark_notified": _mark_notified,
    "background_task": _background_task,
    "foreground_task": _foreground_task,
    "update_progress": _update_progress,
    "update_summary": _update_summary,
    "queue_message": _queue_message,
    "drain_messages": _drain_messages,
    "set_retain": _set_retain,
    "evict": _evict,
    "get_task": _get_task,
    "list_background": _list_background,
    "list_tasks": _list_tasks,
}


class ReferenceAdapter(Adapter):
    """The reference task-progress runtime behind the kit's adapter protocol.

    call() may run on several threads at once: all shared state lives in the
    runtime behind its lock, and EffectRecorder keeps effects per thread.
    """

    # Mutants swap in a faulty runtime class; everything else stays the same.
    runtime_class: type[TaskRuntime] = TaskRuntime
    # Task ids come from a random source seeded afresh at every reset, so a
    # replayed scenario sees the same ids.
    id_seed: int = 0

    def __init__(self, profile: str | None = None, **params: Any) -> None:
        if profile not in PROFILES:
            raise ValueError(f"unknown profile: {profile!r}")
        self._profile = profile
        self._params = _coerce_params(params)
        self._config = TaskConfig(**{**PROFILES[profile], **self._params})
        self._effects = EffectRecorder()
        self._clock_lock = threading.Lock()
        self._clock: VirtualClock  # both set by reset()
        self._runtime: TaskRuntime
        self.reset(0)

    def describe(self) -> dict:
        return {
            "name": NAME,
            "version": VERSION,
            "profile": self._profile,
            "parameters": dict(self._params),
            "capabilities": {"concurrent": True},
        }

    def reset(self, now_ms: int) -> None:
        self._effects.end()  # drop anything recorded outside a call
        self._clock = VirtualClock(int(now_ms))
        self._runtime = self.runtime_class(
            clock=self._clock,
            notifier=_Notifier(self._effects),
            abort_sink=_AbortSink(self._effects),
            sdk_events=_SdkEvents(self._effects),
            caller_waiter=_CallerWaiter(self._effects),
            config=self._config,
            id_seed=self.id_seed,
        )

    def set_clock(self, now_ms: int) -> list[dict]:
        # Timers fire on this thread, so what they do is this move's effects.
        with self._clock_lock:
            self._effects.begin()
            try:
                self._clock.advance_to(int(now_ms))
            finally:
                effects = self._effects.end()
        return effects

    def call(self, operation: str, args: dict) -> dict:
        handler = _OPERATIONS.get(operation)
        if handler is None:
            return error_response("unknown_operation", f"Unknown operation: {operation}")
        if args is not None and not isinstance(args, dict):
            return error_response("invalid_arguments", "arguments must be an object")
        runtime = self._runtime  # one runtime for the whole call, even if reset races
        self._effects.begin()
        try:
            result = handler(runtime, dict(args or {}))
        except TaskError as exc:
            return error_response(exc.kind, exc.message, self._effects.end())
        except arg.BadArguments as exc:
            return error_response("invalid_arguments", str(exc), self._effects.end())
        except BaseException:
            self._effects.end()
            raise
        return result_response(result, self._effects.end())
