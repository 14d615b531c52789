"""Faulty variants of the reference runtime, to check that the kit catches bugs.

Each mutant is one realistic bug: a runtime subclass overriding the single
method involved, behind an adapter subclass that differs from
ReferenceAdapter only in which runtime it builds.
"""

from __future__ import annotations

from collections.abc import Callable

from ..mutant import Mutant
from .adapter import ReferenceAdapter
from .runtime import RUNNING, Delivery, ProcessRuntime, Session

__all__ = ["MUTANTS", "Mutant"]


class _TerminalPollDropsLaterOutput(ProcessRuntime):
    # OpenClaw 2026.9.6's prepareSessionPoll: a staged delivery is replayed
    # (or, in its own scope, nothing is given) also when the session has
    # ended, and what the process wrote after it stays behind
    def _take_output(self, session: Session, scope: str) -> tuple[str, Delivery | None]:
        staged = session.staged
        if staged is None:
            output, session.pending = session.pending, ""
            if output:
                session.staged = Delivery(output, scope)
            return output, session.staged
        if staged.scope == scope:
            return "", None
        staged.scope = scope
        return staged.output, staged


class _SameScopeRedelivers(ProcessRuntime):
    # a poll with a delivery staged always shows it: the agent "may have missed it"
    def _take_output(self, session: Session, scope: str) -> tuple[str, Delivery | None]:
        staged = session.staged
        if staged is not None and staged.scope == scope and session.status == RUNNING:
            return staged.output, staged
        return super()._take_output(session, scope)


class _TtlNotClamped(ProcessRuntime):
    # the exec call's own cleanup time is trusted; only the default is clamped
    def start(self, session_id: str, background: bool, notify_on_exit: bool, cleanup_ms: int | None) -> Session:
        session = super().start(session_id, background, notify_on_exit, cleanup_ms)
        if cleanup_ms is not None:
            session.cleanup_ms = cleanup_ms
        return session


class _ExpiresOneLate(ProcessRuntime):
    # the sweeper keeps a session whose expiry is exactly now
    def _schedule_sweep(self) -> None:
        for session in self._finished.values():
            if session.expires_at is not None and session.expires_at == self._clock.now():
                session.expires_at += 1
        super()._schedule_sweep()


class _ForegroundEndRetained(ProcessRuntime):
    # every ended session is kept for its cleanup time, foreground ones too
    def end(self, session_id: str, outcome: str) -> Session:
        session = self._live.get(session_id)
        if session is not None and session_id in self._running:
            session.backgrounded = True
        return super().end(session_id, outcome)


class _RemovedIdFreed(ProcessRuntime):
    # an id is taken while a session is visible; a removed one's process is not looked at
    def is_taken(self, session_id: str) -> bool:
        with self._lock:
            return session_id in self._running or session_id in self._finished


class _CapDropsNewest(ProcessRuntime):
    # past the cap, the session that just finished is the one dropped
    def _retain(self, session: Session) -> None:
        if len(self._finished) >= self.config.max_finished:
            self._forget(session)
            return
        super()._retain(session)


class _NoticeWithoutAsking(ProcessRuntime):
    # every background end is announced, whether the exec call asked or not
    def end(self, session_id: str, outcome: str) -> Session:
        session = self._live.get(session_id)
        if session is not None:
            session.notify_on_exit = True
        return super().end(session_id, outcome)


class _RemovedRunningReappears(ProcessRuntime):
    # remove deletes the visible record only; the exec side still retains the session at its end
    def remove(self, session_id: str) -> bool:
        with self._lock:
            session = self.visible(session_id)
            was_background = session.backgrounded
            running = super().remove(session_id)
            if running and was_background:
                session.backgrounded = True
                self._started.append(session)
            return running


class _AckClearsAnyStaged(ProcessRuntime):
    # acknowledging a poll releases whatever delivery is staged, not the one it made
    def _acknowledgement(self, session: Session, delivery: Delivery | None) -> Callable[[], None]:
        inner = super()._acknowledgement(session, delivery)

        def acknowledge() -> None:
            if delivery is not None:
                session.staged = None
            inner()

        return acknowledge


class _ListOldestFirst(ProcessRuntime):
    # the list comes out in registration order
    def listed(self) -> list[Session]:
        return list(reversed(super().listed()))


def _mutant(runtime: type[ProcessRuntime]) -> type[ReferenceAdapter]:
    return type(f"{runtime.__name__.lstrip('_')}Adapter", (ReferenceAdapter,), {"runtime_class": runtime})


_LIST = [
    Mutant(
        "terminal_poll_drops_later_output",
        "A poll that reports the end replays the staged delivery only; output written after it is left behind (OpenClaw).",
        _mutant(_TerminalPollDropsLaterOutput),
        shortest=6,
    ),
    Mutant(
        "same_scope_redelivers",
        "A scope that already holds a staged delivery is given it again.",
        _mutant(_SameScopeRedelivers),
        shortest=4,
    ),
    Mutant(
        "ttl_not_clamped",
        "A cleanup time the exec call names is used unclamped.",
        _mutant(_TtlNotClamped),
        shortest=4,
    ),
    Mutant(
        "expires_one_late",
        "A finished session is still kept at the instant its cleanup time is over.",
        _mutant(_ExpiresOneLate),
        shortest=4,
    ),
    Mutant(
        "foreground_end_retained",
        "A foreground session that ends is retained like a background one.",
        _mutant(_ForegroundEndRetained),
        shortest=3,
    ),
    Mutant(
        "removed_id_freed",
        "A removed session's id is free again while its process still runs.",
        _mutant(_RemovedIdFreed),
        shortest=3,
    ),
    Mutant(
        "cap_drops_newest",
        "Past the cap of finished sessions, the one that just finished is dropped instead of the oldest.",
        _mutant(_CapDropsNewest),
        shortest=102,
    ),
    Mutant(
        "removed_running_reappears",
        "A background session removed while running is retained and listed again when its process ends.",
        _mutant(_RemovedRunningReappears),
        shortest=3,
    ),
    Mutant(
        "ack_clears_any_staged",
        "Acknowledging a poll releases whatever delivery is staged then, also a newer one another scope has not committed.",
        _mutant(_AckClearsAnyStaged),
        shortest=9,
    ),
    Mutant(
        "list_oldest_first",
        "The list comes out oldest started first.",
        _mutant(_ListOldestFirst),
        shortest=2,
    ),
    Mutant(
        "notice_without_asking",
        "A background session's end is announced although its exec call did not ask.",
        _mutant(_NoticeWithoutAsking),
        shortest=2,
    ),
]

MUTANTS: dict[str, Mutant] = {m.name: m for m in _LIST}
