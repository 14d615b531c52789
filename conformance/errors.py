"""Errors of the harness. ``ConformanceError`` is the root."""
from __future__ import annotations

__all__ = ["ConformanceError", "AdapterLoadError", "UsageError", "ConformanceFailure"]


class ConformanceError(Exception):
    """Root of every error raised by ``conformance``."""


class AdapterLoadError(ConformanceError):
    """The implementation's adapter could not be loaded or started."""


class UsageError(ConformanceError):
    """The kit was called with arguments that do not fit together."""


class ConformanceFailure(AssertionError, ConformanceError):
    """The implementation did not do what the spec demands. An AssertionError so
    that Hypothesis treats it as a test failure and shrinks it."""

    def __init__(self, failure):
        self.failure = failure
        super().__init__(failure.message)
