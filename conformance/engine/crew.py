"""The threads that make a concurrent group's calls race, and the line they start from.

A concurrent group's calls must really overlap: each goes to the
implementation on its own thread, and none starts before every thread is
ready. ``Crew`` keeps those threads between groups (starting a thread per
call cost more than most calls); ``StartLine`` holds them until the last one
arrives. The last to arrive goes first (it holds the interpreter while the
others wake), which is how a session picks the call that leads
(``Session.head_start``); the others go in the order they arrived.

While a group races, ``fine_switching()`` makes the interpreter hand the
processor from thread to thread every few microseconds instead of every
5 ms: on one core a Python implementation's check-then-act window (a read,
some work, a write back) is otherwise almost never cut by another thread,
so a lost-update race would pass nearly every run.

Both are built on plain locks, never on ``threading.Condition`` (which
``threading.Barrier`` and ``threading.Event`` use): a group hands the
interpreter from thread to thread several times, and the Python-level
condition variables made those hand-offs the largest cost of a group.
"""

from __future__ import annotations

import queue
import sys
import threading
from _thread import allocate_lock
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = ["RACE_SWITCH_INTERVAL_S", "Crew", "RaceWindows", "StartLine", "fine_switching", "launch_order"]

# The interpreter's thread switch interval while a concurrent group runs.
RACE_SWITCH_INTERVAL_S = 2e-5

_switching_lock = threading.Lock()
_switching_groups = 0  # groups racing now (sessions may race on several threads)
_switching_restore = 0.0


@contextmanager
def fine_switching() -> Iterator[None]:
    """Shorten the interpreter's switch interval while a group races; the
    last group to end restores the interval it found."""
    global _switching_groups, _switching_restore
    with _switching_lock:
        if _switching_groups == 0:
            _switching_restore = sys.getswitchinterval()
            sys.setswitchinterval(min(_switching_restore, RACE_SWITCH_INTERVAL_S))
        _switching_groups += 1
    try:
        yield
    finally:
        with _switching_lock:
            _switching_groups -= 1
            if _switching_groups == 0:
                sys.setswitchinterval(_switching_restore)


@dataclass
class RaceWindows:
    """How many concurrent groups ran, and how many of them met the race
    window (``StartLine.overlapped``)."""

    groups: int = 0
    met: int = 0

    def hit(self, met: bool) -> None:
        self.groups += 1
        self.met += int(met)


class Crew:
    """Daemon threads kept between concurrent groups. A thread goes back to
    the idle list only when its call has returned, so one stuck in a hung
    implementation is never handed work again (and never keeps the kit alive)."""

    def __init__(self) -> None:
        self._idle: list[queue.SimpleQueue] = []
        self._lock = threading.Lock()

    def submit(self, fn: Callable[[Callable[[], None]], None]) -> None:
        """Run ``fn(release)`` on an idle thread (a new one if none is idle).
        ``fn`` calls ``release()`` once its call has returned, before it tells
        anyone so: the thread is then idle for the next group already, which
        would otherwise often find none and start another."""
        with self._lock:
            jobs = self._idle.pop() if self._idle else None
        if jobs is None:
            jobs = queue.SimpleQueue()
            threading.Thread(target=self._loop, args=(jobs,), daemon=True, name="kit-concurrent").start()
        jobs.put(fn)

    def _loop(self, jobs: queue.SimpleQueue) -> None:
        while True:
            fn = jobs.get()
            if fn is None:
                return
            release = self._releaser(jobs)
            fn(release)  # never raises: the calls handed in keep their own outcome
            release()

    def _releaser(self, jobs: queue.SimpleQueue) -> Callable[[], None]:
        """What puts the thread that serves ``jobs`` back on the idle list:
        the first call does, any later one does nothing (one per call handed in)."""
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                with self._lock:
                    self._idle.append(jobs)

        return release

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for jobs in idle:
            jobs.put(None)


class StartLine:
    """The ``n`` calls of one group: where their threads wait for each other,
    and where their outcomes are handed back.

    ``start()`` blocks until all ``n`` threads have called it (or ``timeout``
    passed: then every thread waiting goes, as from a broken barrier).
    ``finish(i, outcome, span)`` hands back call ``i``'s outcome, ``(True, answer)``
    or ``(False, exception)``, and when it was in flight (``span``: the clock
    before the call went and after its answer came, as the kit saw them).
    ``wait(timeout)`` returns once every call has finished, or once a call
    failed and every call before it has finished (the first failure in call
    order is then known); False on timeout. ``outcomes[i]`` is None for a call
    still running. ``overlapped()``: whether the calls met the race window."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.outcomes: list[tuple[bool, Any] | None] = [None] * n
        self.spans: list[tuple[float, float] | None] = [None] * n
        self._mutex = allocate_lock()
        self._waiting: list = []  # the gates of the threads at the line, in the order they arrived
        self._open = False
        self._settled = allocate_lock()
        self._settled.acquire()
        self._said = False

    def start(self, timeout: float) -> None:
        gate = allocate_lock()
        gate.acquire()
        with self._mutex:
            if self._open:
                return  # the line opened already (a thread gave up waiting)
            if len(self._waiting) + 1 < self.n:
                self._waiting.append(gate)
                go = None
            else:  # the last to arrive: it goes first, and lets the others go
                self._open, go, self._waiting = True, self._waiting, []
        if go is not None:
            for waiting in go:
                waiting.release()
            return
        if not gate.acquire(True, timeout):  # a thread never came: go anyway, and let the others go
            with self._mutex:
                self._open, go, self._waiting = True, self._waiting, []
            for waiting in go:
                if waiting is not gate:
                    waiting.release()

    def finish(self, i: int, outcome: tuple[bool, Any], span: tuple[float, float] | None = None) -> None:
        with self._mutex:
            self.outcomes[i] = outcome
            self.spans[i] = span
            settled = False
            if not self._said:
                for each in self.outcomes:
                    if each is None:
                        break  # a call before any failure is still running
                    if not each[0]:
                        settled = True  # the first failure in call order, every call before it finished
                        break
                else:
                    settled = True  # every call finished
                self._said = settled
        if settled:
            self._settled.release()

    def wait(self, timeout: float) -> bool:
        return self._settled.acquire(True, timeout)

    def overlapped(self) -> bool:
        """Whether the race window was met: two of the group's calls were in
        flight at one instant (one went before the other had answered), as
        the kit saw them. Needed for calls to interleave inside the
        implementation, though not proof that they did; a group whose calls
        went one after another, each answered before the next went, raced
        nothing."""
        with self._mutex:
            spans = sorted(span for span in self.spans if span is not None)
        # sorted by when each went: some call went before an earlier one answered
        latest_end = None
        for went, answered in spans:
            if latest_end is not None and went < latest_end:
                return True
            latest_end = answered if latest_end is None else max(latest_end, answered)
        return False


def launch_order(n: int, head_start: int) -> list[int]:
    """The order in which the threads of ``n`` racing calls are started, so
    that call ``head_start`` (counted from the end when negative) is started
    last: -1 gives 0, 1, ..., n-1."""
    lead = head_start % n
    return [*range(lead + 1, n), *range(lead + 1)]
