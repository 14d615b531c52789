"""Report writers: report.json, junit.xml, summary.md, report.html and a console summary.

Everything is rendered from one JSON-compatible report dict (the shape is
``conformance/schemas/report.schema.json``); nothing here imports other kit
modules, so the writers can re-render a stored report.json on their own.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from .bounded import VALUES_DIR, bound_report
from .console import render_console_summary
from .errors import InvalidReportError, ReportingError, ReportWriteError
from .html_report import render_html_report
from .json_report import SCHEMA_PATH, load_report, render_json, validate_report
from .junit import render_junit_xml
from .markdown import render_summary_markdown
from .mermaid import mermaid_state_diagram
from .safe_files import UnsafeFile, open_new, read_regular, real_directory, refuse_symlinks, write_atomic

__all__ = [
    "SCHEMA_PATH",
    "VALUES_DIR",
    "bound_report",
    "InvalidReportError",
    "ReportingError",
    "ReportWriteError",
    "load_report",
    "mermaid_state_diagram",
    "render_console_summary",
    "render_html_report",
    "render_json",
    "render_junit_xml",
    "render_summary_markdown",
    "validate_report",
    "clear_reports",
    "write_reports",
    "write_documents",
    "FILE_NAMES",
    "STALE_NAME",
    "mark_stale",
    "UnsafeFile",
    "open_new",
    "read_regular",
    "real_directory",
    "refuse_symlinks",
    "write_atomic",
]

FILE_NAMES = {"json": "report.json", "junit": "junit.xml", "markdown": "summary.md", "html": "report.html"}
STALE_NAME = "STALE"  # written beside reports that are not the last run's, when they could not be replaced


def _write_atomic(path: Path, text: str) -> None:
    # Write-then-rename through a fresh mkstemp file (safe_files): a CI step
    # reading the reports never sees half a file, and a link planted at any
    # name in a shared directory is never written through.
    write_atomic(path, text)


def mark_stale(report_dir: str | os.PathLike) -> str:
    """After the reports could not be written: remove the previous verdict
    (report.json), else leave a STALE marker, else overwrite the old
    report.json in place with a stale notice. Returns one line saying what
    the directory now holds."""
    out_dir = Path(report_dir)
    old = out_dir / FILE_NAMES["json"]
    if not (old.is_symlink() or old.is_file()):
        return f"{out_dir} holds no report.json"
    try:
        old.unlink()
        return f"the previous report.json in {out_dir} was removed: it was not this run's"
    except OSError:
        pass
    note = "these reports are NOT the last run's: writing its reports failed; ignore them\n"
    try:
        write_atomic(out_dir / STALE_NAME, note)
        return f"{out_dir} still holds an older report: {out_dir / STALE_NAME} marks it stale"
    except OSError:
        pass
    try:
        fd = os.open(old, os.O_WRONLY | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(
                '{"verdict": "stale", "exit_code": 2, "problems": [{"kind": "report-error", '
                '"where": null, "message": "not the last run\'s report: writing it failed"}]}\n'
            )
        return f"{out_dir} held an older report.json; it was overwritten with a stale notice"
    except OSError:
        return f"{out_dir} still holds an older report.json (of an earlier run) that could not be removed: ignore it"


def clear_reports(report_dir: str | os.PathLike, keep: Iterable[str | os.PathLike] = ()) -> None:
    """Remove the reports (and counterexample files) an earlier run left in
    ``report_dir``, so a run that ends early never shows an old verdict.
    The files in ``keep`` (the run's own inputs: the counterexample it
    replays, its spec, its deviations) are never removed."""
    out_dir = Path(report_dir)
    if not out_dir.is_dir():
        return
    inputs = {os.path.realpath(path) for path in keep}
    names = [*FILE_NAMES.values(), STALE_NAME]
    for path in [out_dir / name for name in names] + sorted(out_dir.glob("counterexample-*.yaml")):
        if (path.is_file() or path.is_symlink()) and os.path.realpath(path) not in inputs:
            path.unlink(missing_ok=True)
    values = out_dir / VALUES_DIR
    if values.is_dir() and not values.is_symlink():
        for path in values.glob("sha256-*"):
            if path.is_file() or path.is_symlink():
                path.unlink(missing_ok=True)
        try:
            values.rmdir()
        except OSError:
            pass  # something else is in there: not ours to remove


def write_reports(report: dict, report_dir: str | os.PathLike, *, validate: bool = True) -> dict[str, Path]:
    """Write report.json, junit.xml, summary.md and report.html into ``report_dir``.

    Returns ``{"json": ..., "junit": ..., "markdown": ..., "html": ...}``. With
    ``validate`` (the default) a report that does not match the schema raises
    ``InvalidReportError`` before anything is written. All three documents are
    rendered before the first write, so a rendering error leaves no mixed set.

    Large values are truncated in the report first, in place
    (:func:`bound_report`), and each is stored once, whole, under
    ``values/`` (``sha256-<hex>.txt|json``); a value that cannot be stored
    (a full disk, a file-size limit) is only named by its digest.
    """
    out_dir = Path(report_dir)
    report = _public(report, out_dir)
    if validate:
        errors = validate_report(report)
        if errors:
            raise InvalidReportError(errors)
    texts = {
        "json": render_json(report),
        "junit": render_junit_xml(report),
        "markdown": render_summary_markdown(report),
        "html": render_html_report(report),
    }
    return _write_texts(out_dir, texts)


def _public(report: dict, out_dir: Path) -> dict:
    """The report as written: large values bounded (in place, stored once
    under ``values/``), without the top-level keys starting with ``_`` that
    front doors keep for their console (written paths, a scenario file...)."""
    bound_report(report, out_dir / VALUES_DIR)
    return {key: value for key, value in report.items() if not key.startswith("_")}


def write_documents(report: dict, report_dir: str | os.PathLike) -> tuple[dict[str, Path], dict[str, str]]:
    """What can be written when :func:`write_reports` failed for a reason
    other than the disk (a bug in one writer): each document rendered and
    written on its own, report.json first. Returns the paths written and,
    per document that could not be, why. Raises ReportWriteError as
    :func:`write_reports` does."""
    out_dir = Path(report_dir)
    report = _public(report, out_dir)
    texts, failed = {}, {}
    renders = (
        ("json", render_json),
        ("junit", render_junit_xml),
        ("markdown", render_summary_markdown),
        ("html", render_html_report),
    )
    for kind, render in renders:
        try:
            texts[kind] = render(report)
        except Exception as exc:
            failed[kind] = f"{type(exc).__name__}: {exc}"
    return _write_texts(out_dir, texts), failed


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _write_texts(out_dir: Path, texts: dict[str, str]) -> dict[str, Path]:
    paths = {kind: out_dir / FILE_NAMES[kind] for kind in texts}
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportWriteError(out_dir, f"cannot create the report directory {out_dir}: {_reason(exc)}") from exc
    for kind, text in texts.items():
        try:
            _write_atomic(paths[kind], text)
        except OSError as exc:
            raise ReportWriteError(paths[kind], f"cannot write {paths[kind]}: {_reason(exc)}") from exc
    return paths
