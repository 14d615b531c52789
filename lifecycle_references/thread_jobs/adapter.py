"""Adapter: drives ThreadJobRuntime through the kit's JSON protocol."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from conformance.adapters.adapter import Adapter, EffectRecorder, error_response, result_response

from .. import arguments as arg
from .runtime import TERMINAL_STATUSES, JobError, ThreadJobConfig, ThreadJobRuntime

__all__ = ["PROFILES", "ReferenceAdapter"]

NAME = "reference-thread-jobs"
VERSION = "1.0.0"

# Named parameter sets. "runtime-code" is what the real runtime's code does,
# where it departs from its written spec (the defaults).
PROFILES: dict[str | None, dict[str, Any]] = {
    None: {},
    "runtime-code": {
        "max_bytes": 51200,
        "spill_file_name": "{tool_name}-{job_id}.log",
        "msg_not_found_in_thread": "Job not found in this thread",
    },
    # The Clojure runtime behind seed 003, as observed running it.
    "psi-runtime": {
        "max_bytes": 51200,
        "spill_file_name": "{tool_name}-{job_id}.log",
        "msg_not_found_in_thread": "Job not found in this thread",
        "second_start_error": "tool_call_resolved",
        "unknown_job_text": "job_not_found",
        "spill_at": "injection",
        "keep_payload": True,
        "payload_size": "serialised",
        "spill_file_content": "json",
    },
}

_INT_PARAMS = {"retention_limit", "max_lines", "max_bytes"}
_BOOL_PARAMS = {"keep_payload"}
_PARAM_NAMES = {f.name for f in fields(ThreadJobConfig)}


def _coerce_params(params: dict[str, Any]) -> dict[str, Any]:
    unknown = set(params) - _PARAM_NAMES
    if unknown:
        raise TypeError(f"unknown parameters: {sorted(unknown)}")
    # Options given on a command line arrive as strings.
    return {k: int(v) if k in _INT_PARAMS else _flag(k, v) if k in _BOOL_PARAMS else str(v) for k, v in params.items()}


def _flag(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if str(value).lower() in ("true", "false"):
        return str(value).lower() == "true"
    raise ValueError(f"{name} must be true or false, not {value!r}")


# ------------------------------------------------------------ environment
# The runtime's collaborators. Here they only record what the runtime asked
# of its environment; EffectRecorder attributes each record to the calling
# thread's current call.


class _ToolRuntime:
    def __init__(self, effects: EffectRecorder) -> None:
        self._effects = effects

    def request_cancel(self, job_id: str, requested_by: str) -> None:
        self._effects.record("cancellation_requested", job_id=job_id, requested_by=requested_by)


class _Scheduler:
    def __init__(self, effects: EffectRecorder) -> None:
        self._effects = effects

    def request_turn(self, thread_id: str, reason: str) -> None:
        self._effects.record("turn_requested", thread_id=thread_id, reason=reason)


class _Conversation:
    def __init__(self, effects: EffectRecorder) -> None:
        self._effects = effects

    def append_assistant_message(self, thread_id: str, job_id: str, text: str) -> None:
        self._effects.record("message_injected", thread_id=thread_id, job_id=job_id, role="assistant", text=text)


# ------------------------------------------------------------ operations
# Each takes (runtime, args) and returns the JSON result.


def _job_status(job) -> dict:
    return {"job_id": job.job_id, "status": job.status}


def _complete_sync(rt: ThreadJobRuntime, a: dict) -> dict:
    result = rt.complete_sync(
        arg.text(a, "thread_id"), arg.text(a, "tool_call_id"), arg.text(a, "tool_name"), arg.text(a, "result")
    )
    return {"mode": "synchronous", "result": result}


def _start_job(rt: ThreadJobRuntime, a: dict) -> dict:
    job = rt.start_job(
        arg.text(a, "thread_id"),
        arg.text(a, "tool_call_id"),
        arg.text(a, "tool_name"),
        arg.text(a, "job_id", optional=True),
    )
    return {"mode": "background", "job_id": job.job_id, "status": job.status}


def _observe_outcome(rt: ThreadJobRuntime, a: dict) -> dict:
    outcome = arg.text(a, "outcome")
    if outcome not in TERMINAL_STATUSES:
        raise arg.BadArguments(f"outcome must be one of {sorted(TERMINAL_STATUSES)}")
    return _job_status(rt.observe_outcome(arg.text(a, "job_id"), outcome, arg.text(a, "payload")))


def _observe_progress(rt: ThreadJobRuntime, a: dict) -> dict:
    return _job_status(rt.observe_progress(arg.text(a, "job_id"), a.get("note", "")))


def _observe_llm_error(rt: ThreadJobRuntime, a: dict) -> dict:
    return _job_status(rt.observe_llm_error(arg.text(a, "job_id")))


def _begin_turn(rt: ThreadJobRuntime, a: dict) -> dict:
    rt.begin_turn(arg.text(a, "thread_id"))
    return {}


def _turn_boundary(rt: ThreadJobRuntime, a: dict) -> dict:
    return {"injected": rt.turn_boundary(arg.text(a, "thread_id"))}


def _list_jobs(rt: ThreadJobRuntime, a: dict) -> dict:
    statuses = a.get("statuses")
    if statuses is not None and not (isinstance(statuses, list) and all(isinstance(s, str) for s in statuses)):
        raise arg.BadArguments("statuses must be a list of strings or null")
    jobs = rt.list_jobs(arg.text(a, "thread_id"), statuses)
    return {
        "jobs": [
            {"job_id": j.job_id, "tool_call_id": j.tool_call_id, "tool_name": j.tool_name, "status": j.status}
            for j in jobs
        ]
    }


def _inspect_job(rt: ThreadJobRuntime, a: dict) -> dict:
    return {"job": rt.inspect_job(arg.text(a, "thread_id"), arg.text(a, "job_id")).to_record()}


def _cancel_job(rt: ThreadJobRuntime, a: dict) -> dict:
    requested_by = arg.text(a, "requested_by")
    if requested_by not in ("user", "agent"):
        raise arg.BadArguments("requested_by must be 'user' or 'agent'")
    return _job_status(rt.cancel_job(arg.text(a, "thread_id"), arg.text(a, "job_id"), requested_by))


def _retry_job(rt: ThreadJobRuntime, a: dict) -> dict:
    # Always refused, whatever the arguments: don't validate them first.
    rt.retry_job(a.get("thread_id"), a.get("job_id"))
    return {}


def _restart(rt: ThreadJobRuntime, a: dict) -> dict:
    rt.restart()
    return {}


_OPERATIONS: dict[str, Callable[[ThreadJobRuntime, dict], dict]] = {
    "complete_sync": _complete_sync,
    "start_job": _start_job,
    "observe_outcome": _observe_outcome,
    "observe_progress": _observe_progress,
    "observe_llm_error": _observe_llm_error,
    "begin_turn": _begin_turn,
    "turn_boundary": _turn_boundary,
    "list_jobs": _list_jobs,
    "inspect_job": _inspect_job,
    "cancel_job": _cancel_job,
    "retry_job": _retry_job,
    "restart": _restart,
}


class ReferenceAdapter(Adapter):
    """The reference thread-jobs runtime behind the kit's adapter protocol.

    call() may run on several threads at once: all shared state lives in the
    runtime behind its lock, and EffectRecorder keeps effects per thread.
    """

    # Mutants swap in a faulty runtime class; everything else stays the same.
    runtime_class: type[ThreadJobRuntime] = ThreadJobRuntime

    def __init__(self, profile: str | None = None, **params: Any) -> None:
        if profile not in PROFILES:
            raise ValueError(f"unknown profile: {profile!r}")
        self._profile = profile
        self._params = _coerce_params(params)
        self._config = ThreadJobConfig(**{**PROFILES[profile], **self._params})
        self._effects = EffectRecorder()
        self._now = 0
        self._spill_dir: str | None = None
        self._runtime: ThreadJobRuntime  # set by reset()
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
        self._now = int(now_ms)
        self._remove_spill_dir()
        self._spill_dir = tempfile.mkdtemp(prefix="thread-jobs-")
        self._effects.end()  # drop anything recorded outside a call
        self._runtime = self.runtime_class(
            clock=lambda: self._now,
            tool_runtime=_ToolRuntime(self._effects),
            scheduler=_Scheduler(self._effects),
            conversation=_Conversation(self._effects),
            spill_dir=self._spill_dir,
            config=self._config,
            on_spill=lambda job_id, path: self._effects.record("payload_spilled", job_id=job_id, path=path),
        )

    def set_clock(self, now_ms: int) -> list[dict]:
        self._now = int(now_ms)
        # Nothing here is driven by time; return whatever was recorded
        # outside a call on this thread (normally nothing).
        return self._effects.end()

    def call(self, operation: str, args: dict) -> dict:
        handler = _OPERATIONS.get(operation)
        if handler is None:
            return error_response("unknown_operation", f"Unknown operation: {operation}")
        runtime = self._runtime  # one runtime for the whole call, even if reset races
        self._effects.begin()
        try:
            result = handler(runtime, dict(args or {}))
        except JobError as exc:
            return error_response(exc.kind, exc.message, self._effects.end())
        except arg.BadArguments as exc:
            return error_response("invalid_arguments", str(exc), self._effects.end())
        except BaseException:
            self._effects.end()
            raise
        return result_response(result, self._effects.end())

    def close(self) -> None:
        self._remove_spill_dir()

    def _remove_spill_dir(self) -> None:
        if self._spill_dir is not None:
            shutil.rmtree(self._spill_dir, ignore_errors=True)
            self._spill_dir = None
