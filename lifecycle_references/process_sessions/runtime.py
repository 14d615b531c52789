"""A shell tool's background exec sessions: a process registry with the exec
and process tools around it, written as a runtime would be.

The registry keeps running sessions and finished background sessions (each
kept for its clamped cleanup time, at most ``max_finished`` of them, the one
that finished first dropped first), plus the set of live processes, which
keeps a removed session's id taken until its process ends. A sweeper timer
on the clock forgets finished sessions when their time has come.

Polls are made in a scope and acknowledged when that scope's transcript
commits. Draining new output stages a ``Delivery`` until acknowledged: the
same scope gets nothing new, another scope gets the staged output replayed.
A poll that reports the end carries every output the scope was not given
(what is staged for another scope, and what came since), and acknowledging
it withdraws the session's queued exit notice.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..task_progress.runtime import VirtualClock

__all__ = [
    "COMPLETED",
    "FAILED",
    "OUTCOMES",
    "RUNNING",
    "Delivery",
    "Notices",
    "PollResult",
    "ProcessRuntime",
    "RegistryConfig",
    "Session",
    "SessionError",
    "Supervisor",
    "VirtualClock",
]

RUNNING = "running"
COMPLETED = "completed"
FAILED = "failed"
OUTCOMES = ("completed", "failed", "killed", "timed_out")

# outcome -> (status, exit code, exit reason)
_ENDINGS: dict[str, tuple[str, int | None, str]] = {
    "completed": (COMPLETED, 0, "exit"),
    "failed": (FAILED, 1, "exit"),
    "killed": (FAILED, None, "signal"),
    "timed_out": (FAILED, None, "overall-timeout"),
}


@dataclass(frozen=True)
class RegistryConfig:
    default_ttl_ms: int = 1_800_000
    min_ttl_ms: int = 60_000
    max_ttl_ms: int = 10_800_000
    max_finished: int = 50
    retention: str = "ttl"  # or "until_polled": kept until a poll reports the end
    staged_polls: bool = True
    max_sessions: int = 0  # 0: no cap on kept sessions
    protected_recent: int = 0
    msg_id_taken: str = "Session id {session_id} is taken"
    msg_no_session: str = "No session found for {session_id}"
    msg_no_active_session: str = "No active session found for {session_id}"
    msg_not_backgrounded: str = "Session {session_id} is not backgrounded."
    msg_not_running: str = "Session {session_id} has exited"

    def clamp_ttl(self, value: int | None) -> int:
        wanted = self.default_ttl_ms if value is None else value
        return min(max(wanted, self.min_ttl_ms), self.max_ttl_ms)


class SessionError(Exception):
    """A request the runtime refuses; ``kind`` is stable, ``message`` is for humans."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class Notices(Protocol):
    """The agent's system-event queue: an exit notice goes in, and can be taken back."""

    def enqueue(self, session_id: str, status: str) -> Callable[[], None]: ...


class Supervisor(Protocol):
    """What ends a process when asked (the process keeps running until it does)."""

    def request_termination(self, session_id: str) -> None: ...


@dataclass(eq=False)
class Delivery:
    """Output drained by a poll, held until the scope that has it commits."""

    output: str
    scope: str


@dataclass(eq=False)
class Session:
    session_id: str
    started_at: int
    cleanup_ms: int
    notify_on_exit: bool
    backgrounded: bool = False
    status: str = RUNNING
    exit_code: int | None = None
    exit_reason: str | None = None
    ended_at: int | None = None
    expires_at: int | None = None
    pending: str = ""  # written, not yet drained
    staged: Delivery | None = None
    notice_removal: Callable[[], None] | None = None
    terminal_poll_seen: bool = False
    last_used: int = 0  # a use count: later uses are larger

    def record(self) -> dict:
        return {
            "session_id": self.session_id,
            "status": self.status,
            "backgrounded": self.backgrounded,
            "exit_code": self.exit_code,
            "exit_reason": self.exit_reason,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "expires_at": self.expires_at,
        }


@dataclass(frozen=True)
class PollResult:
    session: Session
    output: str


@dataclass
class _Scope:
    """The acknowledgements a scope's commit will make, in poll order."""

    acks: list[Callable[[], None]] = field(default_factory=list)


class ProcessRuntime:
    """The registry and the tools' use of it; every public method holds the lock."""

    def __init__(self, clock: VirtualClock, notices: Notices, supervisor: Supervisor, config: RegistryConfig) -> None:
        self._clock = clock
        self._notices = notices
        self._supervisor = supervisor
        self.config = config
        self._lock = threading.RLock()
        self._running: dict[str, Session] = {}  # visible running sessions
        self._finished: dict[str, Session] = {}  # insertion order = finishing order
        self._live: dict[str, Session] = {}  # every process not yet ended, visible or not
        self._started: list[Session] = []  # start order, for the list
        self._scopes: dict[str, _Scope] = {}
        self._uses = 0
        self._sweeper: Any = None  # the clock's timer handle

    # ------------------------------------------------------------ lookups

    def _fill(self, template: str, session_id: str) -> str:
        return template.replace("{session_id}", session_id)

    def _error(self, kind: str, template: str, session_id: str) -> SessionError:
        return SessionError(kind, self._fill(template, session_id))

    def is_taken(self, session_id: str) -> bool:
        with self._lock:
            return session_id in self._running or session_id in self._finished or session_id in self._live

    def visible(self, session_id: str) -> Session:
        with self._lock:
            session = self._running.get(session_id) or self._finished.get(session_id)
            if session is None:
                raise self._error("not_found", self.config.msg_no_session, session_id)
            return session

    def _live_session(self, session_id: str) -> Session:
        session = self._live.get(session_id)
        if session is not None:
            return session
        if session_id in self._finished:
            raise self._error("not_running", self.config.msg_not_running, session_id)
        raise self._error("not_found", self.config.msg_no_session, session_id)

    # ------------------------------------------------------------ exec side

    def start(self, session_id: str, background: bool, notify_on_exit: bool, cleanup_ms: int | None) -> Session:
        with self._lock:
            if self.is_taken(session_id):
                raise self._error("id_taken", self.config.msg_id_taken, session_id)
            self._prune_if_full()
            session = Session(
                session_id=session_id,
                started_at=self._clock.now(),
                cleanup_ms=self.config.clamp_ttl(cleanup_ms),
                notify_on_exit=notify_on_exit,
                backgrounded=background,
            )
            self._touch(session)
            self._running[session_id] = session
            self._live[session_id] = session
            self._started.append(session)
            return session

    def _touch(self, session: Session) -> None:
        self._uses += 1
        session.last_used = self._uses

    def _prune_if_full(self) -> None:
        """At the cap, drop one kept session: never one of the most recently
        used few; an ended one first, the least recently used of each kind."""
        kept = self._started
        if self.config.max_sessions == 0 or len(kept) < self.config.max_sessions:
            return
        by_recency = sorted(kept, key=lambda s: s.last_used, reverse=True)
        protected = {id(s) for s in by_recency[: self.config.protected_recent]}
        candidates = sorted((s for s in kept if id(s) not in protected), key=lambda s: s.last_used)
        ended = [s for s in candidates if s.status != RUNNING]
        if candidates:
            self._drop((ended or candidates)[0])

    def _drop(self, session: Session) -> None:
        if session.status == RUNNING:
            self._supervisor.request_termination(session.session_id)
            self._live.pop(session.session_id, None)
            self._running.pop(session.session_id, None)
        else:
            self._finished.pop(session.session_id, None)
        self._forget(session)

    def yield_call(self, session_id: str) -> Session:
        with self._lock:
            session = self._running.get(session_id)
            if session is None:
                if session_id in self._finished:
                    raise self._error("not_running", self.config.msg_not_running, session_id)
                raise self._error("not_found", self.config.msg_no_session, session_id)
            session.backgrounded = True
            return session

    def write(self, session_id: str, text: str) -> Session:
        with self._lock:
            session = self._live_session(session_id)
            session.pending += text
            return session

    def end(self, session_id: str, outcome: str) -> Session:
        with self._lock:
            session = self._live_session(session_id)
            session.status, session.exit_code, session.exit_reason = _ENDINGS[outcome]
            session.ended_at = self._clock.now()
            del self._live[session_id]
            self._running.pop(session_id, None)
            if session.backgrounded:
                self._retain(session)
                if session.notify_on_exit:
                    removal = self._notices.enqueue(session_id, session.status)
                    if session.terminal_poll_seen:
                        removal()
                    else:
                        session.notice_removal = removal
            else:
                self._forget(session)
            return session

    def _retain(self, session: Session) -> None:
        assert session.ended_at is not None
        if self.config.retention == "ttl":
            session.expires_at = session.ended_at + session.cleanup_ms
        self._finished[session.session_id] = session
        while len(self._finished) > self.config.max_finished:
            oldest = next(iter(self._finished))
            self._forget(self._finished.pop(oldest))
        self._schedule_sweep()

    def _forget(self, session: Session) -> None:
        if session in self._started:
            self._started.remove(session)

    # ----------------------------------------------------------- retention

    def _schedule_sweep(self) -> None:
        if self._sweeper is not None:
            self._clock.cancel(self._sweeper)
            self._sweeper = None
        now = self._clock.now()
        for session_id, session in list(self._finished.items()):
            if session.expires_at is not None and session.expires_at <= now:
                self._forget(self._finished.pop(session_id))
        upcoming = [s.expires_at for s in self._finished.values() if s.expires_at is not None]
        if upcoming:
            self._sweeper = self._clock.schedule(min(upcoming), self._sweep)

    def _sweep(self) -> None:
        with self._lock:
            self._sweeper = None
            self._schedule_sweep()

    # ---------------------------------------------------------- process tool

    def poll(self, session_id: str, scope: str) -> PollResult:
        with self._lock:
            session = self.visible(session_id)
            if session.status == RUNNING and not session.backgrounded:
                raise self._error("not_backgrounded", self.config.msg_not_backgrounded, session_id)
            self._touch(session)
            if not self.config.staged_polls:
                output, session.pending = session.pending, ""
            else:
                output, delivery = self._take_output(session, scope)
                acks = self._scopes.setdefault(scope, _Scope()).acks
                acks.append(self._acknowledgement(session, delivery))
            if session.status != RUNNING and self.config.retention == "until_polled":
                self._drop(session)  # the end is reported: nothing more to keep
            return PollResult(session, output)

    def _take_output(self, session: Session, scope: str) -> tuple[str, Delivery | None]:
        """What this poll shows, and the staged delivery its commit releases."""
        finished = session.status != RUNNING
        staged = session.staged
        if staged is None:
            output, session.pending = session.pending, ""
            if output:
                session.staged = Delivery(output, scope)
            return output, session.staged
        if finished:  # the end is reported: nothing may stay behind
            fresh, session.pending = session.pending, ""
            earlier = "" if staged.scope == scope else staged.output
            staged.output += fresh
            staged.scope = scope
            return earlier + fresh, staged
        if staged.scope == scope:
            return "", None  # this scope's transcript already holds it
        staged.scope = scope
        return staged.output, staged

    def _acknowledgement(self, session: Session, delivery: Delivery | None) -> Callable[[], None]:
        terminal = session.status != RUNNING

        def acknowledge() -> None:
            if delivery is not None and session.staged is delivery:
                session.staged = None
            if terminal:
                session.terminal_poll_seen = True
                removal, session.notice_removal = session.notice_removal, None
                if removal is not None:
                    removal()

        return acknowledge

    def commit(self, scope: str) -> int:
        with self._lock:
            acks = self._scopes.pop(scope, _Scope()).acks
            for acknowledge in acks:
                acknowledge()
            return len(acks)

    def kill(self, session_id: str) -> Session:
        with self._lock:
            session = self._running.get(session_id)
            if session is None:
                raise self._error("not_found", self.config.msg_no_active_session, session_id)
            if not session.backgrounded:
                raise self._error("not_backgrounded", self.config.msg_not_backgrounded, session_id)
            self._supervisor.request_termination(session_id)
            return session

    def remove(self, session_id: str) -> bool:
        """Forget a finished session, or hide a running background one and ask it to end; True if it ran."""
        with self._lock:
            session = self.visible(session_id)
            if session.status != RUNNING:
                self._forget(self._finished.pop(session_id))
                self._schedule_sweep()
                return False
            if not session.backgrounded:
                raise self._error("not_backgrounded", self.config.msg_not_backgrounded, session_id)
            self._supervisor.request_termination(session_id)
            session.backgrounded = False  # its end is not kept: nobody can see it
            del self._running[session_id]
            self._forget(session)
            return True

    def listed(self) -> list[Session]:
        """Background running sessions and finished ones, newest started first."""
        with self._lock:
            shown = [s for s in self._started if s.status != RUNNING or s.backgrounded]
            return list(reversed(shown))
