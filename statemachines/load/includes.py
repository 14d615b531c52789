"""Where a spec's ``include:`` may read from (docs/trust-model.md).

A spec names its fragments by relative path. A name is looked up under the
including spec's directory, then under each directory the user names in the
environment variable ``CONFORMANCE_INCLUDE_PATH`` (separated like PATH). The
fragment's real path (symlinks followed) must lie inside the directory it was
found under, and it must be a regular file: absolute paths, ``../`` escapes,
symlinks pointing elsewhere, FIFOs and devices are refused (the last two
without being opened). A file that is not a spec fragment (none of its
top-level keys belongs to the spec format) is refused without quoting any of
its content: a spec someone sent you cannot read your files into a report.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import yaml

__all__ = ["INCLUDE_PATH_ENV", "IncludeRefused", "include_roots", "resolve_include", "is_spec_fragment"]

INCLUDE_PATH_ENV = "CONFORMANCE_INCLUDE_PATH"
_SafeBase = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class IncludeRefused(Exception):
    """An include entry that may not be read; ``hint`` says what to do instead."""

    def __init__(self, message: str, hint: str):
        self.hint = hint
        super().__init__(message)


def include_roots(spec_dir: Path) -> list[Path]:
    """The directories includes of a spec in ``spec_dir`` may come from, in lookup order."""
    roots = [Path(spec_dir)]
    for entry in os.environ.get(INCLUDE_PATH_ENV, "").split(os.pathsep):
        if entry.strip():
            roots.append(Path(entry.strip()))
    return roots


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


_HINT_PATH = (
    "name a fragment by its path relative to the spec's directory, "
    f"or put it in a directory named in {INCLUDE_PATH_ENV}"
)


def resolve_include(spec_dir: Path, name: str) -> tuple[Path, Path]:
    """``(shown, real)`` for an include entry: the path problems name and the
    verified real path to read. Raises IncludeRefused (FileNotFoundError when
    no allowed directory holds it)."""
    _check_name(name)
    roots = include_roots(spec_dir)
    escaped = None
    for root in roots:
        found = _look_in(root, name)
        if isinstance(found, IncludeRefused):
            escaped = escaped or found
        elif found is not None:
            return found
    if escaped is not None:
        raise escaped
    looked = ", ".join(str(root) for root in roots)
    raise IncludeRefused(
        f"cannot read included file {name}: no such file (looked in {looked})",
        "check the file name in `include:`; paths are relative to the spec's directory",
    )


def _check_name(name: str) -> None:
    """Refuse an entry that names no file, or names one by an absolute path."""
    if not name or "\x00" in name:
        raise IncludeRefused("an include entry must be a non-empty file name", _HINT_PATH)
    if os.path.isabs(name) or name.startswith("~"):
        raise IncludeRefused(
            f"include {name!r} is an absolute path; includes are read only from the spec's "
            f"directory (or a directory named in {INCLUDE_PATH_ENV})",
            _HINT_PATH,
        )


def _look_in(root: Path, name: str) -> tuple[Path, Path] | IncludeRefused | None:
    """``(shown, real)`` when ``root`` holds the fragment; None when it does
    not; the refusal to report when ``name`` leads out of ``root`` (reported
    only if no other root holds it). Raises IncludeRefused for a file found
    that may not be read."""
    real_root = os.path.realpath(root)
    shown = root / name
    lexical = os.path.normpath(os.path.join(os.path.abspath(root), name))
    real = os.path.realpath(shown)
    if not _inside(lexical, os.path.abspath(root)):
        return IncludeRefused(
            f"include {name!r} leads outside the spec's directory ({root}); it was not read", _HINT_PATH
        )
    if not _inside(real, real_root):
        if not os.path.lexists(lexical):
            return None
        return IncludeRefused(
            f"include {name!r} is a symbolic link to a file outside the directory it is in ({root}); it was not read",
            "copy the fragment beside the spec instead of linking to it",
        )
    try:
        status = os.stat(real)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise IncludeRefused(
            f"cannot read included file {name}: {exc.strerror or exc}", "check the path and permissions"
        ) from None
    if not stat.S_ISREG(status.st_mode):
        raise IncludeRefused(
            f"include {name!r} is {_file_kind(status.st_mode)}, not a regular file; it was not opened",
            "include regular spec files only",
        )
    return shown, Path(real)


# What a path that is not a regular file is, by the first test its mode passes.
_FILE_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
    (stat.S_ISSOCK, "a socket"),
)


def _file_kind(mode: int) -> str:
    return next((kind for test, kind in _FILE_KINDS if test(mode)), "not a regular file")


def is_spec_fragment(text: str, known_keys: frozenset[str] | set[str]) -> bool | None:
    """Whether YAML text is a mapping with at least one top-level key of the
    spec format; None when it is not valid YAML (the real load reports that,
    with its line). Reads the event stream only: nothing is built."""
    depth = 0
    expecting_key = False
    try:
        for event in yaml.parse(text, Loader=_SafeBase):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                if depth == 0 and isinstance(event, yaml.SequenceStartEvent):
                    return False
                if depth == 1 and expecting_key:
                    return False  # a complex key at the top: not a spec
                depth += 1
                expecting_key = depth == 1 and isinstance(event, yaml.MappingStartEvent)
                continue
            if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
                if depth == 0:
                    return False  # the whole top-level mapping without one known key
                expecting_key = depth == 1  # a nested value ended: the next top-level item is a key
                continue
            if isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent)):
                if depth == 0:
                    return False  # a plain value, not a mapping
                if depth == 1:
                    if expecting_key and isinstance(event, yaml.ScalarEvent) and event.value in known_keys:
                        return True
                    expecting_key = not expecting_key
    except yaml.YAMLError:
        return None
    return False
