"""Stopping a run on SIGINT (Ctrl-C) and SIGTERM without losing what it found.

While ``signals_stop_the_run()`` is active, the first SIGINT or SIGTERM raises
:class:`Interrupted` on the main thread, wherever the run stands (in the
kit, or inside a call into an in-process implementation). The runner catches
it, closes the implementation (stopping adapter programs and their
children) and writes every report with the verdict ``interrupted``; the exit
code is the shell's convention, 128 + the signal number (130, 143).

Only one :class:`Interrupted` is on its way up at a time: a second
signal while the first unwinds the run, or while the clean-up runs, does
not interrupt it (a raise inside an ``except`` or ``finally`` on the way up
would cut short what that block saves, and replace the exception that
carries the failures found so far); it says the run is stopping. The third
one ends the process at once, for a user who really wants out.

After its checks a run closes the implementation and writes its reports
inside :func:`deferred`: a signal then does not raise at all (it would leave
no report); it is kept, and the runner reads it with :func:`pending`.

A signal handler's exception can be lost: Python runs handlers between any
two bytecodes, also inside a garbage-collector callback, whose exceptions
are printed and dropped. So the interrupt also stays pending until the
runner acknowledges it, and :func:`checkpoint` (called before every call
into the implementation and between checks) raises it again; a signal
after a lost raise raises again too.

A KeyboardInterrupt the kit received no signal for, while its handlers own
SIGINT, was raised by the implementation itself (``raise KeyboardInterrupt``
in a call, ``describe()`` or ``close()``): that is the implementation's
failure, reported as such, and the run goes on (:func:`stops_the_run`).
Without the kit's handlers (a library run, the pytest plugin) a Ctrl-C is a
plain KeyboardInterrupt too, so there every KeyboardInterrupt stops the run.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = [
    "Interrupted",
    "signals_stop_the_run",
    "interrupt_exit_code",
    "checkpoint",
    "acknowledge",
    "deferred",
    "pending",
    "FORCE_AFTER",
    "stops_the_run",
]

FORCE_AFTER = 3  # signals: the third one exits without clean-up

_NAMES: dict[int, str] = {signal.SIGINT: "SIGINT (Ctrl-C)", signal.SIGTERM: "SIGTERM"}


class Interrupted(KeyboardInterrupt):
    """The user (or the CI runner) asked the run to stop by a signal.

    A KeyboardInterrupt, so that Hypothesis and ``except Exception`` in an
    implementation let it through as they would a Ctrl-C."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum
        self.exit_code = 128 + signum
        self.signal_name = _NAMES.get(signum, signal.Signals(signum).name)


def interrupt_exit_code(exc: BaseException) -> int:
    """130 for a Ctrl-C or a KeyboardInterrupt raised by an implementation;
    128 + N for signal N."""
    return exc.exit_code if isinstance(exc, Interrupted) else 128 + signal.SIGINT


@contextmanager
def signals_stop_the_run() -> Iterator[None]:
    """Turn SIGINT and SIGTERM into :class:`Interrupted` for the duration.

    Only the main thread can own signal handlers; elsewhere (a run started
    from a worker thread of the user's program) this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    global _pending, _acknowledged, _owned, _raised, _deferred
    received = [0]
    _pending, _acknowledged, _raised, _deferred = None, False, False, False
    try:  # stderr as it is now: a run later points fd 2 at what an in-process implementation prints
        console = os.dup(2)
    except OSError:
        console = 2

    def say(text: bytes) -> None:
        try:
            os.write(console, text)
        except OSError:
            pass

    def handler(signum, frame):
        global _pending, _raised
        received[0] += 1
        _pending = Interrupted(signum) if _pending is None else _pending
        if not (_acknowledged or _raised or _deferred):
            _raised = True
            raise Interrupted(_pending.signum)
        if received[0] >= FORCE_AFTER:
            say(b"interrupted again: exiting without writing the reports\n")
            os._exit(128 + signum)
        more = b"once more" if FORCE_AFTER - received[0] == 1 else b"twice more"
        say(b"stopping: closing the implementation and writing the reports (interrupt " + more + b" to exit at once)\n")

    previous_hook = sys.unraisablehook

    def quiet_lost_interrupts(unraisable):
        # The interrupt raised inside a gc callback is dropped there; it is
        # still pending and is raised again at the next checkpoint (or by the
        # next signal), so there is nothing to print.
        global _raised
        if isinstance(unraisable.exc_value, Interrupted):
            _raised = False
        else:
            previous_hook(unraisable)

    sys.unraisablehook = quiet_lost_interrupts
    previous = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            previous[signum] = signal.signal(signum, handler)
        except (ValueError, OSError):  # e.g. an embedded interpreter that forbids it
            pass
    was_owned, _owned = _owned, signal.SIGINT in previous
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
        sys.unraisablehook = previous_hook
        _pending, _acknowledged, _owned, _raised, _deferred = None, False, was_owned, False, False
        if console != 2:
            os.close(console)


_pending: Interrupted | None = None  # a signal received and not yet acknowledged by the runner
_acknowledged = False
_owned = False  # the kit's handler owns SIGINT now: a Ctrl-C arrives as Interrupted
_raised = False  # an Interrupted for the pending signal is on its way up (not lost)
_deferred = False  # inside deferred(): signals are kept, not raised


@contextmanager
def deferred(keep: bool = True) -> Iterator[None]:
    """Inside, a signal does not raise :class:`Interrupted`: it is kept
    (:func:`pending`), so that what runs here (closing the implementation,
    writing the reports) is never cut short; the third signal still exits
    at once. ``deferred(False)`` lets signals raise again inside it (a
    run's checks, whose clean-up and reports are deferred)."""
    global _deferred
    was, _deferred = _deferred, keep
    try:
        yield
    finally:
        _deferred = was


def pending() -> Interrupted | None:
    """The signal this run received (the first), whether it was raised or kept; None without one."""
    return _pending


def stops_the_run(exc: BaseException, *, main_thread: bool = True) -> bool:
    """Whether an exception that came out of a call into the implementation
    stops the run (an interrupt) rather than being the implementation's own
    failure. ``main_thread``: the call ran on the main thread, the only one
    a signal can interrupt."""
    if not isinstance(exc, KeyboardInterrupt):
        return False
    if isinstance(exc, Interrupted) or _pending is not None:
        return True  # a signal the kit received (its handler's raise, or one re-raised by the implementation)
    return main_thread and not _owned  # no handler of the kit's: it may be a Ctrl-C


def checkpoint() -> None:
    """Raise the interrupt again if its first raise was lost (see above)."""
    global _raised
    if _pending is not None and not (_acknowledged or _deferred):
        _raised = True
        raise Interrupted(_pending.signum)


def acknowledge() -> None:
    """The run has stopped for the interrupt: later checkpoints let clean-up run."""
    global _acknowledged
    if _pending is not None:
        _acknowledged = True
