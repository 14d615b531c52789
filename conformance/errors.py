"""Errors of the harness. ``ConformanceError`` is the root."""

from __future__ import annotations

__all__ = [
    "ConformanceError",
    "AdapterLoadError",
    "UsageError",
    "InputRefused",
    "ConformanceFailure",
    "HypothesisUnsupported",
]


class ConformanceError(Exception):
    """Root of every error raised by ``conformance``."""


class AdapterLoadError(ConformanceError):
    """The implementation's adapter could not be loaded or started."""


class UsageError(ConformanceError):
    """The kit was called with arguments that do not fit together."""


class InputRefused(ConformanceError):
    """An adapter refused a call's arguments before anything ran: a command the
    tool did not print, a NUL byte a command line cannot carry. The input (a
    replay, counterexample or scenario file, or generated data) is at fault,
    not the implementation: the kit reports failure kind ``input-refused``
    and the run ends with verdict ``error`` (exit 2). docs/trust-model.md."""


class HypothesisUnsupported(ConformanceError):
    """The installed Hypothesis lacks a primitive the exploration draws with
    (raised by ``engine/hypothesis_support.py``; here so that a run catches it
    without loading Hypothesis)."""


class ConformanceFailure(AssertionError, ConformanceError):
    """The implementation did not do what the spec demands. An AssertionError so
    that Hypothesis treats it as a test failure and shrinks it."""

    def __init__(self, failure):
        self.failure = failure
        super().__init__(failure.message)
