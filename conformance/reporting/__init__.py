"""Report writers: report.json, junit.xml, summary.md and a console summary.

Everything is rendered from one JSON-compatible report dict (the shape is
``conformance/schemas/report.schema.json``); nothing here imports other kit
modules, so the writers can re-render a stored report.json on their own.
"""
from __future__ import annotations

import os
from pathlib import Path

from .console import render_console_summary
from .errors import InvalidReportError, ReportingError
from .json_report import SCHEMA_PATH, load_report, render_json, validate_report
from .junit import render_junit_xml
from .markdown import render_summary_markdown
from .mermaid import mermaid_state_diagram

__all__ = [
    "SCHEMA_PATH",
    "InvalidReportError",
    "ReportingError",
    "load_report",
    "mermaid_state_diagram",
    "render_console_summary",
    "render_json",
    "render_junit_xml",
    "render_summary_markdown",
    "validate_report",
    "clear_reports",
    "write_reports",
]

FILE_NAMES = {"json": "report.json", "junit": "junit.xml", "markdown": "summary.md"}


def _write_atomic(path: Path, text: str) -> None:
    # Write-then-rename: a CI step reading the reports never sees half a
    # file. A plain open (not mkstemp) keeps the usual umask-based mode.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8", newline="\n")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def clear_reports(report_dir: str | os.PathLike) -> None:
    """Remove the reports (and counterexample files) an earlier run left in
    ``report_dir``, so a run that ends early never shows an old verdict."""
    out_dir = Path(report_dir)
    if not out_dir.is_dir():
        return
    for path in [out_dir / name for name in FILE_NAMES.values()] + sorted(out_dir.glob("counterexample-*.yaml")):
        if path.is_file() or path.is_symlink():
            path.unlink(missing_ok=True)


def write_reports(report: dict, report_dir: str | os.PathLike, *, validate: bool = True) -> dict[str, Path]:
    """Write report.json, junit.xml and summary.md into ``report_dir``.

    Returns ``{"json": ..., "junit": ..., "markdown": ...}``. With
    ``validate`` (the default) a report that does not match the schema raises
    ``InvalidReportError`` before anything is written. All three documents are
    rendered before the first write, so a rendering error leaves no mixed set.
    """
    if validate:
        errors = validate_report(report)
        if errors:
            raise InvalidReportError(errors)
    texts = {"json": render_json(report), "junit": render_junit_xml(report), "markdown": render_summary_markdown(report)}
    out_dir = Path(report_dir)
    paths = {kind: out_dir / FILE_NAMES[kind] for kind in texts}
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for kind, text in texts.items():
            _write_atomic(paths[kind], text)
    except OSError as exc:
        raise ReportingError(f"cannot write reports to {out_dir}: {exc}") from exc
    return paths
