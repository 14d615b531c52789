"""Adapter: drives the async job manager and its ``job`` tool through the kit's JSON protocol.

The kit plays the jobs' work: a started job's body follows a plan (return
after ``duration_ms``, or when ``finish_job`` says so; notice an abort after
``stop_ms``, or never). The follow-up channel accepts or refuses deliveries
as ``set_delivery`` says. The event loop runs on the thread of whichever
call holds the adapter's lock, so what its timers do is that call's effects.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from conformance.adapters.adapter import Adapter, EffectRecorder, error_response, result_response

from .. import arguments as arg
from .loop import BODY, Future, VirtualLoop
from .runtime import COMPLETED, FAILED, AsyncJobManager, BodyFailed, DeliveryRefused, Job, JobError, JobManagerConfig
from .tool import WAIT_CHOICES_MS, JobTool
from .wait import Reported, WaitTool

__all__ = ["JobManagerAdapter"]

NAME = "reference-job-manager"
VERSION = "1.0.0"
PROFILE = "job-manager"

_PARAM_NAMES = {f.name for f in fields(JobManagerConfig)}
_INT_MINIMUM = {
    "max_running": 1,
    "retention_ms": -1,
    "retry_base_ms": 1,
    "retry_max_ms": 1,
    "retry_max_doublings": 0,
    "retry_jitter_ms": 0,
    "poll_wait_ms": 1,
    "consumed_retention_ms": -1,
    "wait_limit_ms": 1,
}
JOB_TYPES = ("bash", "task")
OUTCOMES = (COMPLETED, FAILED)


def _coerce_params(params: dict[str, Any]) -> dict[str, Any]:
    coerced = arg.coerce_params(params, _PARAM_NAMES, _INT_MINIMUM)
    if "preferred_ids" in coerced:  # a flag: true or false, as given or as text
        text = coerced["preferred_ids"].lower()
        if text not in ("true", "false"):
            raise ValueError(f"preferred_ids must be true or false, not {params['preferred_ids']!r}")
        coerced["preferred_ids"] = text == "true"
    return coerced


# -------------------------------------------------------------- arguments


def _millis(args: dict, name: str, optional: bool = False, minimum: int = 1) -> int | None:
    return arg.whole(args, name, optional, minimum)


def _ids(args: dict, name: str) -> list[str] | None:
    value = args.get(name)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise arg.BadArguments(f"{name} must be a list of job ids")
    return value


# ------------------------------------------------------------ environment


class _PlayedWork:
    """A job's body as the kit plays it on the virtual clock."""

    def __init__(self, adapter: JobManagerAdapter, plan: dict, order: int) -> None:
        self._adapter = adapter
        self._plan = plan
        self._order = order  # start order: ties between bodies returning together
        self._future: Future | None = None

    def __call__(self, job_id: str, signal) -> Future:
        loop = self._adapter.loop
        self._future = loop.create_future()
        plan = self._plan
        if plan["duration_ms"] is not None:
            loop.call_later(plan["duration_ms"], BODY, self._return_as_planned, self._order)
        signal.add_listener(lambda: self._on_abort(job_id))
        return self._future

    def _on_abort(self, job_id: str) -> None:
        self._adapter.effects.record("abort_signalled", job_id=job_id)
        if self._plan["stop_ms"] is not None:
            self._adapter.loop.call_later(self._plan["stop_ms"], BODY, self._return_as_planned, self._order)

    def _return_as_planned(self) -> None:
        self.finish(self._plan["outcome"], self._plan["text"])

    def finish(self, outcome: str, text: str) -> bool:
        """The body returns now; False if it had already returned."""
        if self._future is None or self._future.done():
            return False
        if outcome == FAILED:
            return self._future.set_exception(BodyFailed(text))
        return self._future.set_result(text)


class _FollowUpChannel:
    """Where automatic completion follow-ups go (the agent's next turn)."""

    def __init__(self, effects: EffectRecorder) -> None:
        self._effects = effects
        self.accepting = True

    def deliver(self, job: Job, text: str) -> None:
        if not self.accepting:
            raise DeliveryRefused(job.id)
        self._effects.record("delivered", job_id=job.id, status=job.status, text=text)

    def delivery_failed(self, job_id: str, attempt: int) -> None:
        self._effects.record("delivery_failed", job_id=job_id, attempt=attempt)


def _snapshot(job: Job, omit_empty: bool = False) -> dict:
    # A tool that leaves empty texts out of its snapshots shows them as absent (null).
    def shown(text: str | None) -> str | None:
        return None if omit_empty and text == "" else text

    return {
        "job_id": job.id,
        "type": job.type,
        "label": job.label,
        "status": job.status,
        "result_text": shown(job.result_text),
        "error_text": shown(job.error_text),
    }


# ------------------------------------------------------------ the adapter


class JobManagerAdapter(Adapter):
    """The reference job-manager runtime behind the kit's adapter protocol.

    The runtime is single-threaded, like the event loop it imitates:
    concurrent calls are serialised by one lock, each running to completion
    (a poll runs the virtual clock while it holds the lock).
    """

    # Mutants swap in faulty classes; everything else stays the same.
    manager_class: type[AsyncJobManager] = AsyncJobManager
    tool_class: type[JobTool] = JobTool
    wait_class: type[WaitTool] = WaitTool
    work_class: type[_PlayedWork] = _PlayedWork  # how a job's body is played (mutants vary it)
    loop_class: type[VirtualLoop] = VirtualLoop

    default_profile = PROFILE  # the profile described when none is asked for
    # Named parameter sets: the real job tools this runtime can behave as.
    PROFILES: dict[str, dict[str, Any]] = {
        PROFILE: {},
        "oh-my-pi": {
            "empty_poll": "nothing",
            "empty_text": "omitted_by_tool",
            "evicted_in_wait": "last_state",
            "evicted_delivery": "last_attempt",
            "msg_list_combined": "`list` cannot be combined with `poll` or `cancel`.",
        },
        "oh-my-pi-18": {
            "ids": "counter",
            "empty_text": "omitted_by_tool",
            "evicted_delivery": "last_attempt",
            "consumed_retention_ms": 30000,
            "consumed_text": "omitted",
            "delivery_order": "due_time",
            "cancel_eviction": "on_return",
        },
    }

    def __init__(self, profile: str | None = None, **params: Any) -> None:
        self._profile = profile or self.default_profile
        if self._profile not in self.PROFILES:
            raise ValueError(f"unknown profile {self._profile!r}; choose one of: {', '.join(self.PROFILES)}")
        self._params = _coerce_params(params)
        self._config = JobManagerConfig(**{**self.PROFILES[self._profile], **self._params})
        self.effects = EffectRecorder()
        self._lock = threading.RLock()
        self._operations: dict[str, Callable[[dict], dict]] = {
            "start_job": self._start_job,
            "finish_job": self._finish_job,
            "get_job": self._get_job,
            "list_jobs": self._list_jobs,
            "job_tool": self._job_tool,
            "wait_tool": self._wait_tool,
            "cancel_jobs": self._cancel_jobs,
            "set_delivery": self._set_delivery,
        }
        self.reset(0)

    def describe(self) -> dict:
        # Only the values set on purpose: for everything else the runtime's
        # defaults are the spec's, so a spec that changes a default demands it.
        return {
            "name": NAME,
            "version": VERSION,
            "profile": self._profile,
            "parameters": dict(self._params),
            "capabilities": {"concurrent": True},
        }

    def reset(self, now_ms: int) -> None:
        with self._lock:
            self.effects.end()  # drop anything recorded outside a call
            self.loop = self.loop_class(int(now_ms))
            self._channel = _FollowUpChannel(self.effects)
            self._manager = self.manager_class(
                self.loop, self._config, self._channel.deliver, self._channel.delivery_failed
            )
            self._tool = self.tool_class(self._manager, self.loop)
            self._wait = self.wait_class(self._manager, self.loop)
            self._bodies: dict[int, _PlayedWork] = {}  # by job serial
            self._starts = 0

    def set_clock(self, now_ms: int) -> list[dict]:
        with self._lock:
            self.effects.begin()
            try:
                self.loop.advance_to(int(now_ms))
            finally:
                effects = self.effects.end()
            return effects

    def call(self, operation: str, args: dict) -> dict:
        handler = self._operations.get(operation)
        if handler is None:
            return error_response("unknown_operation", f"Unknown operation: {operation}")
        if args is not None and not isinstance(args, dict):
            return error_response("invalid_arguments", "arguments must be an object")
        with self._lock:
            self.effects.begin()
            try:
                result = handler(dict(args or {}))
                self.loop.run_due()  # what the operation left for now (deliveries, evictions)
            except JobError as exc:
                return error_response(exc.kind, exc.message, self.effects.end())
            except arg.BadArguments as exc:
                return error_response("invalid_arguments", str(exc), self.effects.end())
            except BaseException:
                self.effects.end()
                raise
            return result_response(result, self.effects.end())

    # ---------------------------------------------------------- operations

    def _start_job(self, a: dict) -> dict:
        label = arg.text(a, "label")
        type_ = arg.choice(a, "type", JOB_TYPES, default="bash")
        preferred = arg.text(a, "id", optional=True)
        plan = {
            "duration_ms": _millis(a, "duration_ms", optional=True),
            "outcome": arg.choice(a, "outcome", OUTCOMES, default=COMPLETED),
            "text": arg.text(a, "text", optional=True) or "",
            "stop_ms": _millis(a, "stop_ms", optional=True),
        }
        body = self.work_class(self, plan, self._starts + 1)
        job = self._manager.register(type_, label, body, preferred)
        self._starts += 1
        self._bodies[job.serial] = body
        return {"job_id": job.id, "status": job.status}

    def _finish_job(self, a: dict) -> dict:
        job_id = arg.text(a, "job_id")
        outcome = arg.choice(a, "outcome", OUTCOMES)
        text = arg.text(a, "text")
        job = self._known(job_id)
        returned = self._bodies[job.serial].finish(outcome, text)
        self.loop.run_due()  # the manager reacts to the body's return, as to any due timer
        return {"job_id": job_id, "status": job.status, "returned": returned}

    def _get_job(self, a: dict) -> dict:
        job = self._manager.get(arg.text(a, "job_id"))
        return {"job": None if job is None else _snapshot(job, self._omit_empty)}

    def _list_jobs(self, a: dict) -> dict:
        return {
            "jobs": [_snapshot(job, self._omit_empty) for job in sorted(self._manager.all_jobs(), key=lambda j: j.id)]
        }

    def _job_tool(self, a: dict) -> dict:
        poll, cancel, list_all = _ids(a, "poll"), _ids(a, "cancel"), arg.flag(a, "list")
        wait_ms = a.get("wait_ms")
        if wait_ms is not None and (type(wait_ms) is not int or wait_ms not in WAIT_CHOICES_MS):
            raise arg.BadArguments(f"wait_ms must be one of {list(WAIT_CHOICES_MS)}")
        outcome = self._tool.execute(poll=poll, cancel=cancel, list_all=list_all, wait_ms=wait_ms)
        return {
            "message": outcome.message,
            "cancelled": outcome.cancelled,
            "jobs": [_snapshot(job, self._config.empty_text != "returned") for job in outcome.jobs],
            "waited_ms": outcome.waited_ms,
        }

    def _wait_tool(self, a: dict) -> dict:
        if a:
            raise arg.BadArguments("wait takes no arguments")
        outcome = self._wait.wait()
        return {"message": outcome.message, "jobs": self._reported(outcome.jobs), "waited_ms": outcome.waited_ms}

    def _cancel_jobs(self, a: dict) -> dict:
        ids = _ids(a, "ids")
        if not ids:
            raise arg.BadArguments("ids must name at least one job")
        outcome = self._wait.cancel(ids)
        return {"cancelled": outcome.cancelled, "jobs": self._reported(outcome.jobs)}

    def _reported(self, jobs: list[Reported]) -> list[dict]:
        """The wait and cancel snapshots: no empty text, and no text of a result consumed before."""
        out = []
        for entry in jobs:
            snapshot = _snapshot(entry.job, self._config.empty_text != "returned")
            if entry.consumed_before and self._config.consumed_text == "omitted":
                snapshot["result_text"] = snapshot["error_text"] = None
            out.append(snapshot)
        return out

    def _set_delivery(self, a: dict) -> dict:
        value = a.get("accept")
        if not isinstance(value, bool):
            raise arg.BadArguments("accept must be true or false")
        self._channel.accepting = value
        return {"accepting": value}

    @property
    def _omit_empty(self) -> bool:
        """Whether the job's record, as get_job and list_jobs show it, leaves an empty text out."""
        return self._config.empty_text == "omitted"

    def _known(self, job_id: str) -> Job:
        job = self._manager.get(job_id)
        if job is None:
            raise JobError("not_found", self._config.msg_unknown_job.replace("{job_id}", job_id))
        return job
