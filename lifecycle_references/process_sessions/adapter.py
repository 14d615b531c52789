"""Adapter: drives ProcessRuntime through the kit's JSON protocol."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from conformance.adapters.adapter import Adapter, EffectRecorder, error_response, result_response

from .. import arguments as arg
from .runtime import OUTCOMES, ProcessRuntime, RegistryConfig, SessionError, VirtualClock

__all__ = ["PROFILES", "ReferenceAdapter"]

NAME = "reference-process-sessions"
VERSION = "1.0.0"

# Named parameter sets: "openclaw" is the spec's defaults.
PROFILES: dict[str | None, dict[str, Any]] = {
    None: {},
    "openclaw": {},
    "codex": {
        "retention": "until_polled",
        "staged_polls": False,
        "max_sessions": 64,
        "protected_recent": 8,
        "max_finished": 100000,
    },
}

_INT_MINIMUMS = {
    "default_ttl_ms": 1,
    "min_ttl_ms": 1,
    "max_ttl_ms": 1,
    "max_finished": 1,
    "max_sessions": 0,
    "protected_recent": 0,
}
_TRUE, _FALSE = {"true", "1", "yes", "on"}, {"false", "0", "no", "off"}
_PARAM_NAMES = {f.name for f in fields(RegistryConfig)}
_SCOPES = ("s1", "s2")


def _coerce(params: dict[str, Any]) -> dict[str, Any]:
    staged = params.pop("staged_polls", None)
    coerced = arg.coerce_params(params, _PARAM_NAMES, _INT_MINIMUMS)
    if staged is not None:
        text = str(staged).strip().lower()
        if not isinstance(staged, bool) and text not in _TRUE | _FALSE:
            raise ValueError(f"staged_polls must be a boolean, not {staged!r}")
        coerced["staged_polls"] = staged if isinstance(staged, bool) else text in _TRUE
    if coerced.get("retention", "ttl") not in ("ttl", "until_polled"):
        raise ValueError("retention must be ttl or until_polled")
    return coerced


class _Notices:
    """The agent's system-event queue, as far as the kit sees it."""

    def __init__(self, effects: EffectRecorder) -> None:
        self._effects = effects

    def enqueue(self, session_id: str, status: str) -> Callable[[], None]:
        self._effects.record("exit_notice", session_id=session_id, status=status)
        queued = [True]

        def remove() -> None:
            if queued:
                queued.clear()
                self._effects.record("exit_notice_withdrawn", session_id=session_id)

        return remove


class _Supervisor:
    def __init__(self, effects: EffectRecorder) -> None:
        self._effects = effects

    def request_termination(self, session_id: str) -> None:
        self._effects.record("termination_requested", session_id=session_id)


def _start_exec(rt: ProcessRuntime, a: dict) -> dict:
    session = rt.start(
        arg.text(a, "session_id"),
        _boolean(a, "background"),
        _boolean(a, "notify_on_exit"),
        arg.whole(a, "cleanup_ms", optional=True),
    )
    return {"session_id": session.session_id, "status": session.status, "backgrounded": session.backgrounded}


def _boolean(a: dict, name: str) -> bool:
    value = a.get(name)
    if not isinstance(value, bool):
        raise arg.BadArguments(f"{name} must be true or false")
    return value


def _yield_exec(rt: ProcessRuntime, a: dict) -> dict:
    session = rt.yield_call(arg.text(a, "session_id"))
    return {"session_id": session.session_id, "backgrounded": session.backgrounded}


def _write_output(rt: ProcessRuntime, a: dict) -> dict:
    return {"session_id": rt.write(arg.text(a, "session_id"), arg.text(a, "text")).session_id}


def _end_process(rt: ProcessRuntime, a: dict) -> dict:
    session = rt.end(arg.text(a, "session_id"), arg.choice(a, "outcome", OUTCOMES))
    return {"session_id": session.session_id, "status": session.status}


def _poll(rt: ProcessRuntime, a: dict) -> dict:
    polled = rt.poll(arg.text(a, "session_id"), arg.choice(a, "scope", _SCOPES))
    session = polled.session
    return {
        "session_id": session.session_id,
        "status": session.status,
        "output": polled.output,
        "exit_code": session.exit_code,
    }


def _commit_scope(rt: ProcessRuntime, a: dict) -> dict:
    scope = arg.choice(a, "scope", _SCOPES)
    return {"scope": scope, "acknowledged": rt.commit(scope)}


def _kill(rt: ProcessRuntime, a: dict) -> dict:
    return {"session_id": rt.kill(arg.text(a, "session_id")).session_id}


def _remove(rt: ProcessRuntime, a: dict) -> dict:
    session_id = arg.text(a, "session_id")
    return {"session_id": session_id, "was_running": rt.remove(session_id)}


def _get_session(rt: ProcessRuntime, a: dict) -> dict:
    return {"session": rt.visible(arg.text(a, "session_id")).record()}


def _list_sessions(rt: ProcessRuntime, a: dict) -> dict:
    return {"sessions": [{"session_id": s.session_id, "status": s.status} for s in rt.listed()]}


def _is_taken(rt: ProcessRuntime, a: dict) -> dict:
    session_id = arg.text(a, "session_id")
    return {"session_id": session_id, "taken": rt.is_taken(session_id)}


_OPERATIONS: dict[str, Callable[[ProcessRuntime, dict], dict]] = {
    "start_exec": _start_exec,
    "yield_exec": _yield_exec,
    "write_output": _write_output,
    "end_process": _end_process,
    "poll": _poll,
    "commit_scope": _commit_scope,
    "kill": _kill,
    "remove": _remove,
    "get_session": _get_session,
    "list_sessions": _list_sessions,
    "is_taken": _is_taken,
}


class ReferenceAdapter(Adapter):
    """The reference process-sessions runtime behind the kit's adapter protocol."""

    # Mutants swap in a faulty runtime class; everything else stays the same.
    runtime_class: type[ProcessRuntime] = ProcessRuntime

    def __init__(self, profile: str | None = None, **params: Any) -> None:
        if profile not in PROFILES:
            raise ValueError(f"unknown profile: {profile!r}")
        self._profile = profile
        self._params = _coerce(params)
        self._config = RegistryConfig(**{**PROFILES[profile], **self._params})
        self._effects = EffectRecorder()
        self._clock_lock = threading.Lock()
        self._clock: VirtualClock  # both set by reset()
        self._runtime: ProcessRuntime
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
        self._effects.end()
        self._clock = VirtualClock(int(now_ms))
        self._runtime = self.runtime_class(
            clock=self._clock,
            notices=_Notices(self._effects),
            supervisor=_Supervisor(self._effects),
            config=self._config,
        )

    def set_clock(self, now_ms: int) -> list[dict]:
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
        runtime = self._runtime
        self._effects.begin()
        try:
            result = handler(runtime, dict(args or {}))
        except SessionError as exc:
            return error_response(exc.kind, exc.message, self._effects.end())
        except arg.BadArguments as exc:
            return error_response("invalid_arguments", str(exc), self._effects.end())
        except BaseException:
            self._effects.end()
            raise
        return result_response(result, self._effects.end())
