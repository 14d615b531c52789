"""Adapter: drives the background task table through the kit's JSON protocol
(the ``task-table`` profile of docs/async-jobs-contract.md)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import fields
from typing import Any, Literal, overload

from conformance.adapters.adapter import Adapter, error_response, result_response

from .. import arguments as arg
from .body import BodyPlan, KitWork, PlannedBody
from .clock import VirtualClock
from .runtime import COMPLETED, FAILED, BackgroundTasks, TaskConfig, TaskHandle

__all__ = ["TaskTableAdapter"]

NAME = "reference-task-table"
VERSION = "1.0.0"
PROFILE = "task-table"

_INT_PARAMS = {"max_finished", "id_counter_start"}
_PARAM_NAMES = {f.name for f in fields(TaskConfig)}
_OUTCOMES = (COMPLETED, FAILED)
_TYPES = ("bash", "task")
_MAX_WAIT_MS = 300000


def _coerce_params(params: dict[str, Any]) -> dict[str, Any]:
    return arg.coerce_params(params, _PARAM_NAMES, {name: 0 for name in _INT_PARAMS})


# -------------------------------------------------------------- arguments


class _NotFound(Exception):
    pass


@overload
def _millis(args: dict, name: str, optional: Literal[False] = False, maximum: int | None = None) -> int: ...
@overload
def _millis(args: dict, name: str, optional: bool, maximum: int | None = None) -> int | None: ...


def _millis(args: dict, name: str, optional: bool = False, maximum: int | None = None) -> int | None:
    return arg.whole(args, name, optional, 1, maximum)


# -------------------------------------------------------------- operations
# The kit's side of each task (its work, and a handle to wait for its end)
# lives in the adapter: the table itself knows only the body threads.


class _Session:
    def __init__(self, runtime: BackgroundTasks) -> None:
        self.runtime = runtime
        self.lock = threading.Lock()
        self.tasks: dict[str, tuple[KitWork, TaskHandle]] = {}

    def start_job(self, a: dict) -> dict:
        label = arg.text(a, "label")
        arg.choice(a, "type", _TYPES, default="bash")
        arg.text(a, "id", optional=True)  # a preferred id: this profile numbers its own
        plan = BodyPlan(
            duration_ms=_millis(a, "duration_ms", optional=True),
            outcome=arg.choice(a, "outcome", _OUTCOMES, default=COMPLETED),
            text=arg.text(a, "text", optional=True) or "",
            stop_ms=_millis(a, "stop_ms", optional=True),
        )
        work = KitWork()
        with self.lock:  # registered before anyone can look the id up
            handle = self.runtime.spawn(label, PlannedBody(plan, work))
            self.tasks[handle.task_id] = (work, handle)
        return {"job_id": handle.task_id, "status": "running"}

    def finish_job(self, a: dict) -> dict:
        job_id = arg.text(a, "job_id")
        outcome = arg.choice(a, "outcome", _OUTCOMES)
        text = arg.text(a, "text")
        with self.lock:
            task = self.tasks.get(job_id)
            if task is not None and self.runtime.peek(job_id) is None:
                del self.tasks[job_id]  # evicted from the table: forget it here too
                task = None
        if task is None:
            raise _NotFound(job_id)
        work, handle = task
        returned = work.finish(outcome, text)
        # Whether it returned now or before, report the status it returned with.
        return {"job_id": job_id, "status": handle.join().status, "returned": returned}

    def get_job(self, a: dict) -> dict:
        snapshot = self.runtime.peek(arg.text(a, "job_id"))
        return {"job": None if snapshot is None else snapshot.to_record()}

    def list_jobs(self, a: dict) -> dict:
        return {"jobs": [s.to_record() for s in self.runtime.list()]}

    def cancel_task(self, a: dict) -> dict:
        job_id = arg.text(a, "job_id")
        return {"job_id": job_id, "cancelled": self.runtime.cancel_task(job_id)}

    def cancel_all(self, a: dict) -> dict:
        self.runtime.cancel_all()
        return {}

    def drain_completed(self, a: dict) -> dict:
        return {"outcomes": self.runtime.drain_completed()}

    def has_completed(self, a: dict) -> dict:
        return {"has_completed": self.runtime.has_completed()}

    def running_count(self, a: dict) -> dict:
        return {"running": self.runtime.running_count()}

    def wait_for_completion(self, a: dict) -> dict:
        woken, waited_ms = self.runtime.wait_for_completion(_millis(a, "wait_ms", maximum=_MAX_WAIT_MS))
        return {"woken": woken, "waited_ms": waited_ms}


_OPERATIONS: dict[str, Callable[[_Session, dict], dict]] = {
    name: getattr(_Session, name)
    for name in (
        "start_job",
        "finish_job",
        "get_job",
        "list_jobs",
        "cancel_task",
        "cancel_all",
        "drain_completed",
        "has_completed",
        "running_count",
        "wait_for_completion",
    )
}


class TaskTableAdapter(Adapter):
    """The reference task table behind the kit's adapter protocol.

    call() may run on several threads at once: the table keeps its state
    behind its lock, and each task body runs on a thread of its own. The
    profile produces no effects.
    """

    # Variants swap in a faulty component; everything else stays the same.
    runtime_class: type[BackgroundTasks] = BackgroundTasks
    clock_class: type[VirtualClock] = VirtualClock

    # Named parameter sets: the real task tables this runtime can behave as.
    PROFILES: dict[str, dict[str, Any]] = {
        PROFILE: {},
        "defect": {"id_counter_start": 0, "drained_cancel_status": "body_outcome"},
    }

    def __init__(self, profile: str | None = None, **params: Any) -> None:
        self._profile = profile or PROFILE
        if self._profile not in self.PROFILES:
            raise ValueError(f"unknown profile {self._profile!r}; choose one of: {', '.join(self.PROFILES)}")
        self._overrides = _coerce_params(params)
        self._config = TaskConfig(**{**self.PROFILES[self._profile], **self._overrides})
        self._session = self._new_session(0)

    def describe(self) -> dict:
        return {
            "name": NAME,
            "version": VERSION,
            "profile": self._profile,
            # Only the values set on purpose: the rest are the task-table
            # profile's, so a spec that changes the profile demands it.
            "parameters": dict(self._overrides),
            "capabilities": {"concurrent": True},
        }

    def reset(self, now_ms: int) -> None:
        self.close()
        self._session = self._new_session(now_ms)

    def _new_session(self, now_ms: int) -> _Session:
        return _Session(self.runtime_class(self.clock_class(int(now_ms)), self._config))

    def set_clock(self, now_ms: int) -> list[dict]:
        self._session.runtime.advance(int(now_ms))
        return []

    def call(self, operation: str, args: dict) -> dict:
        handler = _OPERATIONS.get(operation)
        if handler is None:
            return error_response("unknown_operation", f"Unknown operation: {operation}")
        if args is not None and not isinstance(args, dict):
            return error_response("invalid_arguments", "arguments must be an object")
        session = self._session  # one session for the whole call, even if reset races
        try:
            return result_response(handler(session, dict(args or {})))
        except arg.BadArguments as exc:
            return error_response("invalid_arguments", str(exc))
        except _NotFound as exc:
            job_id = str(exc.args[0])
            return error_response("not_found", self._config.msg_unknown_job.replace("{job_id}", job_id))

    def close(self) -> None:
        self._session.runtime.shutdown()
