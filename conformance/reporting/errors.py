"""Exceptions raised by the report writers."""

from __future__ import annotations

__all__ = ["InvalidReportError", "ReportWriteError", "ReportingError"]


class ReportingError(Exception):
    """Root of every error the reporting package raises."""


class InvalidReportError(ReportingError):
    """The report dict does not match ``report.schema.json``.

    ``errors`` holds the ``"path: message"`` strings of ``validate_report``
    so a caller can print them without re-validating.
    """

    def __init__(self, errors: list[str]):
        self.errors = list(errors)
        shown = "\n".join(f"  {e}" for e in self.errors[:20])
        more = f"\n  ... and {len(self.errors) - 20} more" if len(self.errors) > 20 else ""
        super().__init__(f"report does not match report.schema.json:\n{shown}{more}")


class ReportWriteError(ReportingError):
    """A report file could not be written (the directory cannot be created,
    a directory stands where the file should, a full disk, a file-size
    limit). ``path`` is where writing failed; the message says it in one line."""

    def __init__(self, path, message: str):
        self.path = str(path)
        super().__init__(message)
