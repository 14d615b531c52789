"""Errors of the spec layer. ``StatemachinesError`` is the root."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "StatemachinesError",
    "Problem",
    "SpecError",
    "ExpressionError",
    "EvaluationBudgetError",
    "RunCostError",
    "ObservationError",
]


class StatemachinesError(Exception):
    """Root of every error raised by ``statemachines``."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a spec: what, where, and how to fix it."""

    message: str
    file: str | None = None
    line: int | None = None
    hint: str | None = None
    code: str | None = None  # a stable name for problems `conformance lint` also reports (e.g. terminal-exit)

    @property
    def where(self) -> str:
        if self.file is None:
            return "<spec>"
        return f"{self.file}:{self.line}" if self.line else self.file

    def __str__(self) -> str:
        text = f"{self.where}: {self.message}"
        return f"{text}\n    hint: {self.hint}" if self.hint else text


class SpecError(StatemachinesError):
    """A spec could not be loaded; carries every problem found, not just the first."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        count = len(self.problems)
        head = f"{count} problem{'s' if count != 1 else ''} in spec"
        super().__init__(head + ":\n" + "\n".join(f"  {p}" for p in self.problems))


class ExpressionError(StatemachinesError):
    """A spec expression failed while the model evaluated it."""

    def __init__(self, message: str, where: str):
        self.where = where
        super().__init__(f"{where}: {message}")


class EvaluationBudgetError(ExpressionError):
    """An expression spent the cost budget of one evaluation (iterations, CPU
    time or bytes): every later evaluation of it is likely to spend it too,
    each taking up to the budget's time, so a caller that evaluates it many
    times (a search of the spec's states) stops at the first."""


class RunCostError(EvaluationBudgetError):
    """The expressions of one command (a run, a search, a merge) spent the
    command's cost budget in all: no further expression is evaluated, so the
    command ends (exit 2, reports written) instead of going on for hours at
    up to one evaluation's budget each."""


class ObservationError(StatemachinesError):
    """The model needed a value from the implementation's observation and it was
    missing or unacceptable (e.g. a generated id that is already taken), or a
    ``check`` of the observation failed. ``result`` is, for a failed check,
    the result the operation's steps had predicted before it (None when they
    had predicted none): a harness compares the answer with it first, since a
    check's message is written for an answer that is otherwise right."""

    def __init__(self, message: str, where: str | None = None, result: Any = None):
        self.where = where
        self.result = result
        super().__init__(message)
