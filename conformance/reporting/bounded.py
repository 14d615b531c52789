"""Keeping report files proportionate when an implementation answers a lot.

An answer of 10 MB appears in a failure several times over (the observed
value, the step list, the message), and every report file would carry each
copy. :func:`bound_report` truncates, in place, every large value a report
holds: a failure's ``expected``, ``observed``, ``args`` and its steps'
answers. A truncated value keeps its beginning and says its size and its
SHA-256 digest, and the whole value is stored once (by digest) next to the
reports (``values/sha256-<hex>.txt`` for a string, ``.json`` for any other
value), however often it appears; a value that cannot be stored (a full
disk, a file-size limit) is named by its size and digest only. Any other text in the report (messages) is cut past
:data:`TEXT_LIMIT` characters. The limits keep every report file within a
few megabytes whatever the implementation answers.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .safe_files import real_directory, write_atomic

__all__ = [
    "STRING_LIMIT",
    "VALUE_LIMIT",
    "STEPS_LIMIT",
    "TEXT_LIMIT",
    "STORE_LIMIT",
    "VALUES_DIR",
    "bound_report",
    "is_truncated",
]

STRING_LIMIT = 8 * 1024  # a string value longer than this (characters) is truncated...
STRING_KEEP = 2 * 1024  # ...to its first this many characters
VALUE_LIMIT = 64 * 1024  # a list/object whose JSON is longer than this is replaced by a summary
STEPS_LIMIT = 1024 * 1024  # a failure's steps: past this much JSON, earlier steps' answers are summarised
TEXT_LIMIT = 16 * 1024  # any other string of the report (messages)
STORE_LIMIT = 64 * 1024 * 1024  # the whole values stored next to the reports, at most
VALUES_DIR = "values"
_MARK = "[truncated:"


def is_truncated(value: Any) -> bool:
    """True for a string this module made in place of a large value."""
    return isinstance(value, str) and _MARK in value


class _Store:
    """Writes each whole value once into ``directory`` (None: nowhere)."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self.kept: dict[str, str] = {}  # file name -> what the report says about it
        self.size = 0

    def keep(self, name: str, data: bytes) -> str:
        """Where the whole value is (relative to the report directory), or why it is not kept."""
        if name in self.kept:
            return self.kept[name]
        if self.directory is None:
            said = "not stored (no report directory)"
        elif self.size + len(data) > STORE_LIMIT:
            said = f"not stored: the values kept with a report are limited to {STORE_LIMIT // (1024 * 1024)} MB"
        else:
            said = self._write(self.directory, name, data)
        self.kept[name] = said
        return said

    def _write(self, directory: Path, name: str, data: bytes) -> str:
        try:
            write_atomic(real_directory(directory) / name, data)
        except OSError as exc:
            return f"not stored: {exc.strerror or exc}"
        self.size += len(data)
        return f"whole value: {VALUES_DIR}/{name}"


def _encoded(text: str) -> tuple[bytes, str]:
    data = text.encode("utf-8", "backslashreplace")
    return data, hashlib.sha256(data).hexdigest()


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=False, default=repr)


def _truncate_string(value: str, store: _Store) -> str:
    data, digest = _encoded(value)
    where = store.keep(f"sha256-{digest}.txt", data)
    return (
        f"{value[:STRING_KEEP]}… {_MARK} {len(value):,} characters, {len(data):,} bytes as UTF-8, "
        f"sha256 {digest}; {where}]"
    )


def _summarise(value: Any, text: str, store: _Store | None) -> str:
    data, digest = _encoded(text)
    what = "object" if isinstance(value, dict) else "array" if isinstance(value, list) else "value"
    where = store.keep(f"sha256-{digest}.json", data) if store is not None else "not stored"
    head = text[:STRING_KEEP]
    return f"{_MARK} a JSON {what} of {len(data):,} bytes, sha256 {digest}; {where}] it begins: {head}…"


def _bound(value: Any, store: _Store, replaceable: bool = True) -> Any:
    """``value`` with its large parts truncated (a new value where something changed)."""
    if isinstance(value, str):
        return _truncate_string(value, store) if len(value) > STRING_LIMIT else value
    if not isinstance(value, (dict, list)):
        return value
    text = _json(value)
    if len(text) <= STRING_LIMIT:
        return value  # no string inside can be over the limit either
    if isinstance(value, dict):
        bounded: Any = {k: _bound(v, store) for k, v in value.items()}
    else:
        bounded = [_bound(v, store) for v in value]
    if replaceable and len(_json(bounded)) > VALUE_LIMIT:
        return _summarise(value, text, store)
    return bounded


def _bound_steps(steps: list, store: _Store, keep_index: Any) -> list:
    out = []
    for step in steps:
        if not isinstance(step, dict):
            out.append(step)
            continue
        step = dict(step)
        if "observed" in step:
            step["observed"] = _bound(step["observed"], store)
        if isinstance(step.get("args"), dict):
            step["args"] = _bound(step["args"], store, replaceable=False)
        if isinstance(step.get("concurrently"), list):
            step["concurrently"] = [_bound_call(c, store) for c in step["concurrently"]]
        out.append(step)
    # A long sequence of moderately large answers: keep the last ones (the
    # failing step above all) whole, summarise earlier answers.
    sizes = [len(_json(s)) for s in out]
    total = sum(sizes)
    for i, step in enumerate(out):
        if total <= STEPS_LIMIT:
            break
        if not isinstance(step, dict) or step.get("index") == keep_index or "observed" not in step:
            continue
        if isinstance(step["observed"], str) and _MARK in step["observed"]:
            continue
        text = _json(step["observed"])
        if len(text) < 256:
            continue
        step["observed"] = _summarise(step["observed"], text, None)
        new = len(_json(step))
        total -= sizes[i] - new
    return out


def _bound_call(call: Any, store: _Store) -> Any:
    if not isinstance(call, dict):
        return call
    call = dict(call)
    if "observed" in call:
        call["observed"] = _bound(call["observed"], store)
    if isinstance(call.get("args"), dict):
        call["args"] = _bound(call["args"], store, replaceable=False)
    return call


def _failures(report: dict) -> Iterator[dict]:
    for scenario in report.get("scenarios") or []:
        if isinstance(scenario, dict) and isinstance(scenario.get("failure"), dict):
            yield scenario["failure"]
    for part in ("stateful", "coverage"):
        section = report.get(part)
        if isinstance(section, dict) and isinstance(section.get("failure"), dict):
            yield section["failure"]


def _cut_texts(node: Any) -> Any:
    """Every remaining string past TEXT_LIMIT cut (messages, notes)."""
    if isinstance(node, str):
        if len(node) > TEXT_LIMIT and _MARK not in node[-600:]:
            return f"{node[:TEXT_LIMIT]}… {_MARK} {len(node):,} characters in all]"
        return node
    if isinstance(node, dict):
        for key, value in node.items():
            new = _cut_texts(value)
            if new is not value:
                node[key] = new
        return node
    if isinstance(node, list):
        for i, value in enumerate(node):
            new = _cut_texts(value)
            if new is not value:
                node[i] = new
        return node
    return node


def bound_report(report: dict, values_dir: str | os.PathLike | None = None) -> dict[str, str]:
    """Truncate the large values of ``report`` in place, storing each whole
    value once in ``values_dir`` (when given; normally ``<report
    dir>/values``). Returns ``{file name: what the report says about it}``
    (``whole value: values/...`` or why it was not stored)."""
    store = _Store(Path(values_dir) if values_dir is not None else None)
    for failure in _failures(report):
        for key in ("expected", "observed"):
            if key in failure:
                failure[key] = _bound(failure[key], store)
        if isinstance(failure.get("args"), dict):
            failure["args"] = _bound(failure["args"], store, replaceable=False)
        if isinstance(failure.get("steps"), list):
            failure["steps"] = _bound_steps(failure["steps"], store, failure.get("step"))
    _cut_texts(report)
    return store.kept
