"""Safe YAML loading that remembers where every value came from.

Specs are data: they are loaded with PyYAML's safe constructor only, and each
mapping key and sequence item is mapped to its file and line so that every
later error can say ``file:line``.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml

from ..errors import Problem, SpecError

__all__ = [
    "SourceMap",
    "WholeSpec",
    "load_yaml_file",
    "load_yaml_text",
    "read_spec_text",
    "list_index",
    "MAX_SPEC_BYTES",
    "MAX_WHOLE_SPEC_BYTES",
    "MAX_WHOLE_SPEC_NODES",
    "MAX_INCLUDES",
]

MAX_SPEC_BYTES = 2_000_000  # a lifecycle spec is a few hundred lines; refuse runaway files
# ... and a spec with all its fragments: what one `include:` list may add up to.
MAX_WHOLE_SPEC_BYTES = 8_000_000
MAX_WHOLE_SPEC_NODES = 400_000
MAX_INCLUDES = 256  # entries of one `include:` list (a spec has a handful)


def list_index(part: str, size: int) -> int | None:
    """The index that ``part`` (a path or pointer part from a received file)
    names in a list of ``size`` items, or None: only ASCII digits, at most 18
    of them (``str.isdigit`` also accepts ``²``, and ``int()`` refuses it or
    thousands of digits with ValueError), and below ``size``."""
    if not (0 < len(part) <= 18 and part.isascii() and part.isdigit()):
        return None
    index = int(part)
    return index if index < size else None


class SourceMap:
    """Maps a path inside loaded data (a tuple of keys and indexes) to file:line."""

    def __init__(self) -> None:
        self._lines: dict[tuple, tuple[str, int]] = {}

    def add(self, path: tuple, file: str, line: int) -> None:
        self._lines.setdefault(path, (file, line))

    def merge(self, other: SourceMap, prefix: tuple = ()) -> None:
        for path, where in other._lines.items():
            self._lines.setdefault(prefix + path, where)

    def locate(self, path) -> tuple[str | None, int | None]:
        """The file and line of ``path``, or of its nearest located ancestor."""
        path = tuple(path)
        while True:
            if path in self._lines:
                return self._lines[path]
            if not path:
                return None, None
            path = path[:-1]

    def problem(self, path, message: str, hint: str | None = None, code: str | None = None) -> Problem:
        file, line = self.locate(path)
        return Problem(message=message, file=file, line=line, hint=hint, code=code)


try:  # libyaml when present: same safety, faster
    from yaml import CSafeLoader as _SafeBase
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml import SafeLoader as _SafeBase  # type: ignore[assignment]  # the same loader API, in pure Python


class _Builder(_SafeBase):
    """Composes nodes safely; values are built by ``_build`` below."""


MAX_NODES = 200_000  # values a spec may expand to (guards against alias bombs)
_STANDARD_TAGS = {"tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"}


class WholeSpec:
    """What a spec and all its fragments may add up to, read file by file."""

    def __init__(self) -> None:
        self.bytes_left = MAX_WHOLE_SPEC_BYTES
        self.nodes_left = MAX_WHOLE_SPEC_NODES

    def take_text(self, text: str, file: str) -> None:
        """Count a file's text against the whole spec's bytes (SpecError past them)."""
        self.bytes_left -= len(text.encode("utf-8"))
        if self.bytes_left < 0:
            raise SpecError(
                [
                    Problem(
                        f"with this file the spec and its fragments are over {MAX_WHOLE_SPEC_BYTES:,} bytes in all",
                        file,
                        hint="a spec with its fragments is a few hundred kilobytes at most; remove generated content",
                    )
                ]
            )


class _Budget:
    def __init__(self, whole: WholeSpec | None = None) -> None:
        self.left = MAX_NODES
        self.whole = whole


def _over_budget(budget: _Budget, file: str, line: int) -> SpecError | None:
    """The error once a file, or the whole spec, expands to too many values."""
    budget.left -= 1
    if budget.whole is not None:
        budget.whole.nodes_left -= 1
    if budget.left < 0:
        what = f"the document expands to more than {MAX_NODES} values"
    elif budget.whole is not None and budget.whole.nodes_left < 0:
        what = f"the spec and its fragments expand to more than {MAX_WHOLE_SPEC_NODES} values in all"
    else:
        return None
    return SpecError(
        [
            Problem(
                f"{what} (YAML aliases repeated over and over?)",
                file,
                line,
                "a spec needs no more than a few thousand values; remove the alias chain",
            )
        ]
    )


def _build(
    node: yaml.Node, path: tuple, file: str, smap: SourceMap, loader: _Builder, problems: list[Problem], budget: _Budget
) -> Any:
    over = _over_budget(budget, file, node.start_mark.line + 1)
    if over is not None:
        raise over
    smap.add(path, file, node.start_mark.line + 1)
    if not isinstance(node, yaml.ScalarNode) and node.tag not in _STANDARD_TAGS:
        problems.append(
            Problem(
                f"unsupported YAML tag {node.tag!r}",
                file,
                node.start_mark.line + 1,
                "specs are plain data: remove the tag",
            )
        )
        return None
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)
        out: dict = {}
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                key = _scalar(key_node, file, loader, problems)
            else:
                key = loader.construct_object(key_node, deep=True)
            if isinstance(key, bool) and isinstance(key_node, yaml.ScalarNode):
                key = key_node.value  # YAML 1.1 reads `on:`/`yes:` keys as booleans; keep the word
            if not isinstance(key, (str, int, float, bool)) or key is None:
                problems.append(
                    Problem(f"mapping key {key!r} is not a plain scalar", file, key_node.start_mark.line + 1)
                )
                continue
            key = str(key) if not isinstance(key, str) else key
            if key in out:
                problems.append(
                    Problem(
                        f"duplicate key {key!r}",
                        file,
                        key_node.start_mark.line + 1,
                        "each key may appear once in a mapping; remove or rename one",
                    )
                )
            smap.add(path + (key,), file, key_node.start_mark.line + 1)  # point at the key, not the block under it
            out[key] = _build(value_node, path + (key,), file, smap, loader, problems, budget)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(item, path + (i,), file, smap, loader, problems, budget) for i, item in enumerate(node.value)]
    return _scalar(node, file, loader, problems)


INT_MIN, INT_MAX = -(2**63), 2**63 - 1  # integers a received file may hold: 64-bit, as JSON tools and CEL
_INT_TAG, _TIMESTAMP_TAG = "tag:yaml.org,2002:int", "tag:yaml.org,2002:timestamp"


def _scalar(node: yaml.Node, file: str, loader: _Builder, problems: list[Problem]) -> Any:
    """A scalar's value; a Problem at its line for an integer outside the
    64-bit range (Python refuses more than 4,300 digits) or an impossible
    date (``2026-02-30``)."""
    line = node.start_mark.line + 1
    if node.tag == _INT_TAG and len(str(node.value).replace("_", "").lstrip("+-")) > 40:
        problems.append(_int_problem(str(node.value), file, line))
        return None
    try:
        value = loader.construct_object(node, deep=True)
    except (ValueError, OverflowError) as exc:
        what = "date" if node.tag == _TIMESTAMP_TAG else "value"
        problems.append(
            Problem(
                f"{node.value!r} is not a valid {what} ({str(exc)[:120]})",
                file,
                line,
                "write a real calendar date as YYYY-MM-DD" if what == "date" else "fix or quote the value",
            )
        )
        return None
    if isinstance(value, int) and not isinstance(value, bool) and not INT_MIN <= value <= INT_MAX:
        problems.append(_int_problem(str(node.value), file, line))
        return None
    return value


def _int_problem(text: str, file: str, line: int) -> Problem:
    shown = text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"
    return Problem(
        f"the integer {shown} is outside the 64-bit range ({INT_MIN} to {INT_MAX})",
        file,
        line,
        "use a smaller number, or quote it to make it a string",
    )


MAX_DEPTH = 64  # a spec nests a dozen levels; far deeper input is a mistake or an attack


def _too_deep(text: str, file: str) -> Problem | None:
    """Nesting depth checked on the event stream (no recursion), before building."""
    depth = 0
    try:
        for event in yaml.parse(text, Loader=_SafeBase):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    return Problem(
                        f"values are nested more than {MAX_DEPTH} levels deep",
                        file,
                        event.start_mark.line + 1 if event.start_mark else None,
                        "flatten the structure",
                    )
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
    except yaml.YAMLError:
        return None  # the real load reports syntax errors with their line
    return None


def read_spec_text(path: str | Path, *, shown: str | None = None, regular_only: bool = False) -> str:
    """The text of one spec file, read at most one byte past the size limit.
    ``regular_only`` (an included fragment): anything but a regular file (a
    FIFO, a device) is refused without waiting on it. ``shown`` is the name
    problems give the file (default: ``path``)."""
    file = shown or str(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) if regular_only else os.O_RDONLY
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise SpecError(
            [Problem(f"cannot read spec: {exc.strerror or exc}", file, hint="check the path and permissions")]
        ) from None
    try:
        status = os.fstat(fd)
        if regular_only and not stat.S_ISREG(status.st_mode):
            raise SpecError(
                [
                    Problem(
                        "is not a regular file (a FIFO, device or directory); it was not read",
                        file,
                        hint="name a regular file (a spec, fragment, replay or deviations file)",
                    )
                ]
            )
        with os.fdopen(fd, "rb", closefd=False) as handle:  # never a whole huge file
            raw = handle.read(MAX_SPEC_BYTES + 1)
    except OSError as exc:
        raise SpecError(
            [Problem(f"cannot read spec: {exc.strerror or exc}", file, hint="check the path and permissions")]
        ) from None
    finally:
        os.close(fd)
    if len(raw) > MAX_SPEC_BYTES:
        size = status.st_size
        how_big = f"{size} bytes, over" if size > MAX_SPEC_BYTES else "over"  # devices and pipes report 0
        raise SpecError(
            [
                Problem(
                    f"file is {how_big} the {MAX_SPEC_BYTES}-byte limit for a spec",
                    file,
                    hint="split the spec with `include:` or remove generated content",
                )
            ]
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError([Problem(f"file is not UTF-8 text (byte {exc.start})", file)]) from None


def load_yaml_file(path: str | Path) -> tuple[Any, SourceMap]:
    """Load one YAML file safely; raise SpecError with file:line on any problem
    (a FIFO or device is refused without being opened for reading, so nothing
    blocks)."""
    return load_yaml_text(read_spec_text(path, regular_only=True), str(path))


def load_yaml_text(text: str, file: str, whole: WholeSpec | None = None) -> tuple[Any, SourceMap]:
    """Load the YAML text of ``file`` safely; raise SpecError with file:line on
    any problem. ``whole``: what the spec it belongs to may still add up to."""
    if not text.strip():
        raise SpecError([Problem("file is empty", file, 1, "a spec needs at least `format`, `id` and `version`")])
    deep = _too_deep(text, file)
    if deep:
        raise SpecError([deep])
    loader = _Builder(text)
    try:
        node = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        what = " ".join(str(p) for p in (exc.context, exc.problem) if p)
        raise SpecError(
            [Problem(f"YAML syntax error: {what}", file, line, "fix the indentation or quoting near this line")]
        ) from None
    except yaml.YAMLError as exc:
        raise SpecError([Problem(f"YAML error: {exc}", file)]) from None
    except RecursionError:
        raise SpecError(
            [Problem("the document is nested too deeply to be a spec", file, None, "flatten the structure")]
        ) from None
    finally:
        loader.dispose()
    if node is None:
        raise SpecError([Problem("file holds no YAML document", file, 1)])
    smap = SourceMap()
    problems: list[Problem] = []
    try:
        data = _build(node, (), file, smap, _Builder(""), problems, _Budget(whole))
    except RecursionError:
        raise SpecError(
            [Problem("the document is nested too deeply to be a spec", file, None, "flatten the structure")]
        ) from None
    except yaml.constructor.ConstructorError as exc:
        mark = exc.problem_mark
        raise SpecError([Problem(f"YAML value error: {exc.problem}", file, mark.line + 1 if mark else None)]) from None
    if problems:
        raise SpecError(problems)
    return data, smap
