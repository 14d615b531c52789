"""Showing that a run is alive: a live bar on a terminal, plain lines
elsewhere (every CI log), nothing with ``--quiet``.

Without a terminal a line is printed when a phase starts and at least every
``interval_s`` seconds (10 by default; ``CONFORMANCE_PROGRESS_INTERVAL``
changes it) by a ticker thread, so a step that hangs until its timeout still
shows the run is alive."""

from __future__ import annotations

import os
import threading
import time
from typing import IO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from .engine.runner import Progress as RunnerProgress
from .reporting._format import visible

__all__ = ["QUIET", "NORMAL", "VERBOSE", "progress_for", "PlainProgress", "BarProgress"]

QUIET, NORMAL, VERBOSE = 0, 1, 2
DEFAULT_INTERVAL_S = 10.0


def _interval() -> float:
    try:
        value = float(os.environ.get("CONFORMANCE_PROGRESS_INTERVAL", DEFAULT_INTERVAL_S))
    except ValueError:
        return DEFAULT_INTERVAL_S
    return value if value > 0 else DEFAULT_INTERVAL_S


class _Counts:
    def __init__(self) -> None:
        self.started = time.monotonic()
        self.scenarios_total = self.scenarios_done = 0
        self.examples_total = self.examples_done = 0
        self.failures = 0  # the scenarios'
        self.stateful_failures = 0  # the exploration's, found so far
        self.not_applicable = 0
        self.phase = "starting"

    def line(self) -> str:
        parts = [f"[{self.phase}]"]
        if self.scenarios_total:
            parts.append(f"scenarios {self.scenarios_done}/{self.scenarios_total}")
        if self.examples_total:
            parts.append(f"examples {self.examples_done}/{self.examples_total}{self._past_the_profile()}")
        parts.append(f"failures {self.failures + self.stateful_failures}")
        parts.append(f"elapsed {time.monotonic() - self.started:.0f}s")
        return "progress: " + ", ".join(parts)

    def _past_the_profile(self) -> str:
        """Why the examples counted pass the profile's: after a failure,
        shrinking and the search for more failures run examples of their own."""
        if self.examples_done <= self.examples_total:
            return ""
        return f" (past {self.examples_total}: shrinking a failure and looking for more)"


class PlainProgress(RunnerProgress):
    """Plain progress lines for logs; a ticker thread keeps them coming."""

    def __init__(self, stream: IO[str], verbosity: int = NORMAL, interval_s: float | None = None):
        self.stream, self.verbosity = stream, verbosity
        self.interval_s = interval_s or _interval()
        self.counts = _Counts()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def _say(self, text: str) -> None:
        with self._lock:
            try:
                self.stream.write(visible(text, keep="") + "\n")  # received names show escaped
                self.stream.flush()
            except (OSError, ValueError):  # a closed log must not end the run
                pass

    def _tick(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._say(self.counts.line())

    def __enter__(self) -> PlainProgress:
        self._ticker = threading.Thread(target=self._tick, name="conformance-progress", daemon=True)
        self._ticker.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()

    def start(self, total_scenarios: int, stateful: bool) -> None:
        self.counts.scenarios_total = total_scenarios
        self.counts.phase = "scenarios" if total_scenarios else "exploration"
        self._say(self.counts.line())

    def scenario_done(self, outcome) -> None:
        self.counts.scenarios_done += 1
        if outcome.verdict in ("fail", "error"):
            self.counts.failures += 1
        if self.verbosity >= VERBOSE:
            self._say(
                f"scenario {outcome.scenario.id}: {outcome.verdict}" + (f" ({outcome.note})" if outcome.note else "")
            )

    def stateful_started(self, max_examples: int) -> None:
        self.counts.examples_total = max_examples
        self.counts.phase = "exploration"
        self._say(self.counts.line())

    def stateful_example(self, count: int) -> None:
        self.counts.examples_done = count

    def stateful_phase(self, phase: str, failures: int) -> None:
        self.counts.phase, self.counts.stateful_failures = phase, failures
        self._say(self.counts.line())


class BarProgress(RunnerProgress):
    """rich's live bars, for a terminal."""

    def __init__(self, console: Console, verbosity: int = NORMAL):
        self.verbosity = verbosity
        self.progress = Progress(
            TextColumn("{task.description:<22}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            # sys.stdout/stderr are the implementation's (captured), not the bar's
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self.scenarios_task: TaskID | None = None
        self.stateful_task: TaskID | None = None

    def __enter__(self) -> BarProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.__exit__(*exc)

    def start(self, total_scenarios: int, stateful: bool) -> None:
        if total_scenarios:
            self.scenarios_task = self.progress.add_task("scenarios", total=total_scenarios)

    def scenario_done(self, outcome) -> None:
        if self.scenarios_task is not None:
            self.progress.advance(self.scenarios_task)
        if self.verbosity >= VERBOSE:
            self.progress.console.print(f"scenario {outcome.scenario.id}: {outcome.verdict}", markup=False)

    def stateful_started(self, max_examples: int) -> None:
        self.stateful_task = self.progress.add_task("stateful exploration", total=max_examples)

    def stateful_example(self, count: int) -> None:
        if self.stateful_task is not None:
            self.progress.update(self.stateful_task, completed=count)

    def stateful_phase(self, phase: str, failures: int) -> None:
        if self.stateful_task is not None:
            found = f", {failures} failure{'s' if failures != 1 else ''}" if failures else ""
            self.progress.update(self.stateful_task, description=f"stateful: {phase}{found}")


class _Silent(RunnerProgress):
    def __enter__(self) -> _Silent:
        return self

    def __exit__(self, *exc) -> None:
        return None


def progress_for(console: Console, errors: Console, verbosity: int):
    """The progress display fitting where output goes and how much is wanted."""
    if verbosity <= QUIET:
        return _Silent()
    if console.is_terminal:
        return BarProgress(console, verbosity)
    return PlainProgress(errors.file, verbosity)
