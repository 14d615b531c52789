"""Which command lines a call of the command adapter may run.

A call's arguments come from files the user may have received from someone
else: a replay or counterexample file, a spec's scenarios. They are data.
When an operation's program (argv[0]) comes from a call argument, e.g. a job
descriptor's ``status_command`` run as printed (``argv: ["{*command}"]``),
the adapter runs it only when

- the value is a command line the tool under test itself printed earlier in
  the same run (since the last ``reset``) in a *command field* of its JSON
  stdout: the value (a string, or a list of strings) of an object key named
  ``command`` or ending in ``_command`` (``status_command``,
  ``cancel_command``: the fields the bundled specs declare to carry
  commands); and no word of that printed line's program was handed to the
  tool before it printed it: the shlex-split words of every argument string
  are compared with the split words of the printed line, like with like (a
  tool echoing its input does not launder the input into a command, however
  the input was quoted); or
- the expanded command line starts with one of the operation's
  ``allowed_prefixes`` from the config (which only the config fixes).

Anything else is refused with :class:`~conformance.errors.InputRefused`
before any process starts, and so is an argument a command line cannot carry
(a NUL byte, text the operating system cannot encode). See
docs/trust-model.md.
"""

from __future__ import annotations

import os
import shlex
import threading
from collections.abc import Collection
from typing import Any

from ..errors import InputRefused
from .command_config import expand_argv, placeholders, program_element

__all__ = ["CommandTrust", "check_carriable", "is_command_field", "MAX_REMEMBERED", "MAX_ARGUMENT_BYTES"]

# At most this many printed command lines, and as many argument words, are kept
# per run (since the last reset). Nothing is ever forgotten to make room: past
# the bound the check fails closed (no further printed line is trusted), since
# a forgotten argument word would let an echoed line be trusted again.
MAX_REMEMBERED = 20_000
_MAX_COMMAND_CHARS = 16_384  # longer strings are not taken as command lines
_SHOWN = 120


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "...'"


def _strings(value: Any, depth: int = 0):
    """Every string in a JSON value (keys left out), lists of strings as tuples too."""
    if depth > 64:
        return
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        if value and all(isinstance(item, str) for item in value):
            yield tuple(value)
        for item in value:
            yield from _strings(item, depth + 1)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item, depth + 1)


def is_command_field(key: Any) -> bool:
    """Whether a JSON object key names a field that carries a command line."""
    return isinstance(key, str) and (key == "command" or key.endswith("_command"))


def _command_values(value: Any, depth: int = 0):
    """The values of command fields anywhere in a JSON value: strings, and lists
    of strings as tuples. Any other string the tool prints is not a command."""
    if depth > 64:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if is_command_field(key):
                if isinstance(item, str):
                    yield item
                elif isinstance(item, list) and item and all(isinstance(word, str) for word in item):
                    yield tuple(item)
            yield from _command_values(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            yield from _command_values(item, depth + 1)


def _split(text: str) -> list[str]:
    """The words of a string as a shell would split it; plain whitespace words
    when it does not split (unbalanced quotes), the whole string included."""
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    return [*words, text] if len(text) <= _MAX_COMMAND_CHARS else words


class CommandTrust:
    """What the tool printed during one run, and the arguments it was given."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._printed: set[Any] = set()  # strings and tuples of strings
        self._given: set[str] = set()  # words of the argument strings the tool received in this run
        self.full = False  # a store reached MAX_REMEMBERED: no printed line is trusted until the reset

    def clear(self) -> None:
        with self._lock:
            self._printed.clear()
            self._given.clear()
            self.full = False

    # -- what the tool saw and said ---------------------------------------------
    def note_arguments(self, args: dict, skip: Collection[str] = frozenset()) -> None:
        """Remember the string values handed to the tool (except ``skip``: a
        command line already trusted)."""
        with self._lock:
            for name, value in (args or {}).items():
                if name in skip or self.full:
                    continue
                for text in _strings(value):
                    words = _split(text) if isinstance(text, str) else list(text)
                    for word in words:
                        if word.strip():
                            self._remember(self._given, word)

    def note_output(self, stdout: Any) -> None:
        """Remember the command fields of the tool's JSON stdout (is_command_field)."""
        with self._lock:
            for value in _command_values(stdout):
                words = self._words(value)
                if self.full or not words or self._tainted(words):
                    continue
                self._remember(self._printed, value)
                if isinstance(value, str):
                    self._remember(self._printed, tuple(words))

    def _remember(self, store: set, value: Any) -> None:
        """Keep ``value``; a store that is full keeps nothing more and marks the
        whole check untrusting (fail closed), never forgetting an older value."""
        if value in store:
            return
        if len(store) >= MAX_REMEMBERED:
            self.full = True
            return
        store.add(value)

    @staticmethod
    def _words(value: Any) -> list[str] | None:
        if isinstance(value, tuple):
            return list(value)
        if len(value) > _MAX_COMMAND_CHARS or not value.strip():
            return None
        try:
            return shlex.split(value)
        except ValueError:
            return None

    def _tainted(self, words: list[str]) -> bool:
        """The printed line's program was handed to the tool: one of the split
        words of an argument holds it (or its file name), so the tool may be
        echoing its input and the line is not the tool's own command. Words
        are compared with words, never raw text with unquoted text."""
        program = words[0]
        name = os.path.basename(program)
        if program in self._given or (name and name in self._given):
            return True
        return any(program in given or (name and name in given) for given in self._given)

    # -- the check ----------------------------------------------------------------------
    def program_arguments(self, template: list, args: dict, base: dict) -> list[str]:
        """The call arguments the program of this invocation comes from (names
        the config defines, vars and built-ins, are never arguments)."""
        values = {**(args or {}), **base}
        element = program_element(template, values)
        if element is None:
            return []
        return sorted(name for name in placeholders(element) if name not in base and (args or {}).get(name) is not None)

    def check(
        self,
        operation: str,
        template: list,
        args: dict,
        base: dict,
        argv: list[str],
        prefixes: list[list],
        config_path: Any,
    ) -> list[str]:
        """Raise InputRefused unless the program this call would run is one the
        tool printed in this run or starts with an allowed prefix. Returns the
        names of the arguments that supplied the program."""
        names = self.program_arguments(template, args, base)
        if not names:
            return names
        with self._lock:
            printed = not self.full and all(self._was_printed(args[name]) for name in names)
        if printed:
            return names
        for prefix in prefixes:
            try:
                expanded = expand_argv(prefix, base)
            except Exception:
                continue
            if expanded and argv[: len(expanded)] == expanded:
                return names
        name = names[0]
        allowed = (
            "; the config allows only command lines starting with "
            + " or ".join(shlex.join(expand_argv(p, base)) for p in prefixes if self._fillable(p, base))
            if prefixes
            else f"; the config ({config_path}) declares no allowed_prefixes for it"
        )
        raise InputRefused(
            f"{operation}: refused to run the command line in argument `{name}` ({_short(args[name])}): "
            f"the program of this operation comes from that argument, and the value is not a command the tool "
            f"printed earlier in this run (e.g. a job descriptor's status_command){allowed}.{self._full_note()} "
            f"Nothing was run. "
            f"A replay, counterexample or scenario file is data: it may pass only commands the tool itself "
            f"prints (docs/trust-model.md)"
        )

    def _full_note(self) -> str:
        if not self.full:
            return ""
        return (
            f" This run handed the tool or had it print more than {MAX_REMEMBERED} distinct argument words "
            f"or command lines since its last reset, more than the check remembers, so from then on no "
            f"printed line is trusted (the check never forgets what it depends on)."
        )

    @staticmethod
    def _fillable(prefix: list, base: dict) -> bool:
        try:
            expand_argv(prefix, base)
            return True
        except Exception:
            return False

    def _was_printed(self, value: Any) -> bool:
        if isinstance(value, str):
            return value in self._printed
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            return tuple(value) in self._printed
        return False


def check_carriable(operation: str, argv: list[str], args: dict, env: dict | None = None) -> None:
    """Raise InputRefused when a value cannot be handed to the operating system:
    a NUL byte ends a C string, text that is not encodable (a lone surrogate)
    has no bytes, and a command line has a size limit (E2BIG)."""
    for index, element in enumerate(list(argv) + list((env or {}).values())):
        problem = _problem(element)
        if problem is None:
            continue
        culprit = next(
            (
                name
                for name, value in (args or {}).items()
                if any(isinstance(text, str) and _problem(text) for text in _strings(value))
            ),
            None,
        )
        what = (
            f"argument `{culprit}`"
            if culprit
            else f"argv element {index} ({_short(element)})"
            if index < len(argv)
            else f"an environment value ({_short(element)})"
        )
        raise InputRefused(
            f"{operation}: {what} {problem}; the invocation was not started. The value comes "
            f"from the input (a replay or scenario file, generated data or the config), not "
            f"from the implementation"
        )
    total = sum(len(os.fsencode(element)) + 1 for element in argv)
    total += sum(len(os.fsencode(k)) + len(os.fsencode(v)) + 2 for k, v in os.environ.items())
    limit = _arg_max()
    if limit and total > limit:
        raise InputRefused(
            f"{operation}: the command line is {total} bytes with the environment, more than the "
            f"operating system takes ({limit}, E2BIG); the invocation was not started. Some "
            f"argument of the input is far too long"
        )


MAX_ARGUMENT_BYTES = 131_072  # Linux: MAX_ARG_STRLEN, the most one argv element or environment string may hold


def _arg_max() -> int | None:
    try:
        value = os.sysconf("SC_ARG_MAX")
    except (ValueError, OSError, AttributeError):
        return None
    return value if value > 0 else None


def _problem(text: str) -> str | None:
    """Why this text cannot be one argv element, or None."""
    if "\x00" in text:
        return "holds a NUL byte (\\x00), which no command line can carry"
    try:
        size = len(os.fsencode(text))
    except UnicodeError:
        return "holds text the operating system cannot encode (e.g. a lone surrogate)"
    if size >= MAX_ARGUMENT_BYTES and os.uname().sysname == "Linux":
        return f"is {size} bytes, more than one command-line argument may hold ({MAX_ARGUMENT_BYTES - 1}, E2BIG)"
    return None
