"""Unknown keys worth trying: the shapes an implementation's lookup gets wrong.

A call naming a record the implementation never issued must find nothing.
Most unknown keys the exploration draws are its own names (``k1`` to
``k4``) or the next ids the implementation will hand out (``shaped_key``:
after ``job-3``, ``job-4``). A lookup that is too lenient accepts neither of
those, but does accept a *near miss* of an issued key (``near_miss``): a
proper prefix (``build-`` for ``build-0001``, as git and docker resolve
abbreviations), the number alone (``1``), the number padded otherwise
(``build-1``, ``build-00001``), the key in another case, the key with
white space around it (`` build-1``, as a lookup that trims its input
takes it) or the key as a path (``./build-1``, ``x/build-1``, as a tool
keeping a file per record takes it when it joins the id to its directory
or keeps the id's last path part). Each of those is
an id never issued, so the spec's answer is "not found"; an implementation
that parses or abbreviates ids answers with someone else's record.

Values drawn from a pool (``exploration.pools``) get near misses of their
own (``value_variants``): the value in another case, in another Unicode
normalisation form (for a value that has none, with an accented letter in
its composed and decomposed forms), in full-width letters (what NFKC folds
back), with white space around it, as a path, and at the longest length the
argument allows. An implementation comparing names case-insensitively or
normalising them stores or finds another value than the one it was given.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterator

__all__ = ["OWN_FRESH", "LONGEST", "near_miss", "reshaped", "shaped_key", "value_variants"]

_NUMBERED = re.compile(r"^(.*?)([0-9]{1,18})$")  # ASCII, int() of it never fails
OWN_FRESH = frozenset(f"k{n}" for n in range(1, 5))  # the fresh keys the kit names itself


def shaped_key(keys: list, pick: int) -> str | None:
    """A key not seen yet, in the shape of the newest numbered key seen (not
    one of the kit's own fresh names): its prefix, and a number one to three
    past the highest seen with that prefix (digits padded as they were).
    None when no key seen ends in a number."""
    numbered = [m for m in (_NUMBERED.match(k) for k in keys if isinstance(k, str) and k not in OWN_FRESH) if m]
    if not numbered:
        return None
    prefix, digits = numbered[-1].group(1), numbered[-1].group(2)
    highest = max(int(m.group(2)) for m in numbered if m.group(1) == prefix)
    return f"{prefix}{str(highest + 1 + pick % 3).zfill(len(digits))}"


def near_miss(keys: list, pick: int, *, paths: bool = True) -> str | None:
    """A key never seen that a lenient lookup takes for one seen: of the
    newest keys (the implementation's own first, the kit's fresh names only
    when there are no others), the one and the shape ``pick`` selects, or
    the next shape that gives a key not seen. None when no key seen is a
    string or none of its shapes is new. Without ``paths``, never the key
    as a path: the name of a new record (an explicit id at a start) ends up
    where the implementation keeps the record, and ``./job-2`` there is a
    name no implementation can keep as it is (statemachines.tools.naming)."""
    named = [k for k in keys if isinstance(k, str) and k]
    own = [k for k in named if k not in OWN_FRESH]
    bases = (own or named)[-4:]
    if not bases:
        return None
    base = bases[-1 - (pick // len(_SHAPES)) % len(bases)]
    variant = pick // len(_SHAPES) // len(bases)  # which form of a shape that has several comes first
    seen = set(named)
    start = pick % len(_SHAPES)
    for offset in range(len(_SHAPES)):
        for candidate in _SHAPES[(start + offset) % len(_SHAPES)](base, seen, variant):
            if candidate and candidate not in seen and (paths or candidate not in _as_paths(base)):
                return candidate
    return None


def reshaped(value: str, before: str, now: str) -> str | None:
    """``value`` as the same near miss of ``now`` that it is of ``before``
    (None when it is none of ``before``'s shapes). A replay that renames the
    id a record got (``job-5`` is ``job-4`` now that an earlier start was
    dropped) renames the near misses of it along: ``job-`` stays ``job-``,
    ``5`` becomes ``4``. An abbreviation is always the id less its last
    character (the longest prefix, unique once any is)."""
    if value == before or not before or not now:
        return None
    if value == before[:-1]:
        return now[:-1] or None
    if value in (before.upper(), before.swapcase()):
        return now.upper() if value == before.upper() else now.swapcase()
    if value.strip() == before and value != before:
        return value.replace(before, now, 1)  # the same white space around the new id
    if value in _as_paths(before):
        return value[: -len(before)] + now  # the same path to the new id
    again = _revariant(value, before, now)
    if again is not None:
        return again
    old, new = _NUMBERED.match(before), _NUMBERED.match(now)
    if old is None or new is None:
        return None
    forms = (
        lambda m: m.group(2),
        lambda m: str(int(m.group(2))),
        lambda m: f"{m.group(1)}{int(m.group(2))}",
        lambda m: f"{m.group(1)}0{m.group(2)}",
    )
    return next((form(new) for form in forms if form(old) == value), None)


# Lengths a lengthened value is tried at, longest first, when the schema sets no maxLength
# (the schema check keeps the longest that fits: a pattern's {1,16} keeps 16).
LONGEST = (64, 32, 16, 12, 8)
# An accented letter after the value, composed (NFC) and decomposed (NFD): a value of plain
# letters has no other normalisation form, so these give it one.
_ACCENTS = ("\u00e9", "e\u0301")


def value_variants(
    value: str, allowed: Callable[[str], bool], *, paths: bool = True, lengths: tuple[int, ...] = LONGEST
) -> list[str]:
    """Near misses of a pool value that ``allowed`` keeps, each other than
    ``value``, in this order: other case, other normalisation forms, full
    width, white space around, the value as a path (with ``paths``), and the
    value repeated to the longest of ``lengths`` that ``allowed`` keeps."""
    forms = [value.upper(), value.swapcase()]
    forms += [unicodedata.normalize(form, value) for form in ("NFC", "NFD", "NFKC")]
    forms += [value + accent for accent in _ACCENTS]
    forms += [_full_width(value), f" {value}", f"{value} ", f"\t{value}"]
    if paths:
        forms += _as_paths(value)
    out = [form for form in dict.fromkeys(forms) if form and form != value and allowed(form)]
    longer = (_lengthened(value, n) for n in sorted(lengths, reverse=True) if n > len(value))
    longest = next((form for form in longer if allowed(form)), None)
    return out + [longest] if longest is not None and longest not in out else out


def _full_width(value: str) -> str:
    """``value`` with its printable ASCII characters in their full-width forms (NFKC folds them back)."""
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in value)


def _lengthened(value: str, size: int) -> str:
    """``value`` repeated to ``size`` characters (``value`` itself when it is as long already)."""
    return (value * (size // len(value) + 1))[:size] if value and len(value) < size else value


def _revariant(value: str, before: str, now: str) -> str | None:
    """``value`` as the same variant of ``now`` (value_variants) that it is of ``before``."""
    for accent in _ACCENTS:
        if value == before + accent:
            return now + accent
    if value == _full_width(before) and value != before:
        return _full_width(now)
    for form in ("NFC", "NFD", "NFKC"):
        if value == unicodedata.normalize(form, before) != before:
            return unicodedata.normalize(form, now)
    if len(value) > len(before) and value == _lengthened(before, len(value)):
        return _lengthened(now, len(value))
    return None


def _prefixes(key: str, seen: set[str], variant: int = 0) -> Iterator[str]:
    """Proper prefixes no other key seen starts with, longest first: an
    abbreviation a lenient lookup resolves to this key alone (one another
    key shares is ambiguous, so every lookup finds nothing: no news)."""
    for end in range(len(key) - 1, 0, -1):
        if not any(other != key and other.startswith(key[:end]) for other in seen):
            yield key[:end]


def _number_alone(key: str, seen: set[str], variant: int = 0) -> Iterator[str]:
    match = _NUMBERED.match(key)
    if match and match.group(1):
        yield match.group(2)
        yield str(int(match.group(2)))


def _padded_otherwise(key: str, seen: set[str], variant: int = 0) -> Iterator[str]:
    match = _NUMBERED.match(key)
    if match:
        prefix, digits = match.group(1), match.group(2)
        yield f"{prefix}{int(digits)}"  # build-0001 -> build-1
        yield f"{prefix}0{digits}"  # build-1 -> build-01


def _other_case(key: str, seen: set[str], variant: int = 0) -> Iterator[str]:
    yield key.upper()
    yield key.swapcase()


def _surrounded(key: str, seen: set[str], variant: int = 0) -> Iterator[str]:
    """White space around the key, or the key as a path: every other
    ``variant`` leads with a path (the first variant, white space)."""
    forms = [f" {key}", f"{key} "]
    paths = _as_paths(key)
    ordered = [forms[0], paths[0], forms[1], paths[1]]
    yield from ordered[variant % len(ordered) :] + ordered[: variant % len(ordered)]


def _as_paths(key: str) -> tuple[str, str]:
    """The key as a path to the same name: a tool that joins the id to its
    directory finds ``./id``; one that keeps the last path part, ``x/id``."""
    return f"./{key}", f"x/{key}"


# Half of the near misses are abbreviations: they tell only while one record
# has a prefix of its own (with sequential ids, while it is the only one).
_SHAPES: tuple[Callable[[str, set[str], int], Iterator[str]], ...] = (
    _prefixes,
    _number_alone,
    _prefixes,
    _padded_otherwise,
    _prefixes,
    _other_case,
    _prefixes,
    _surrounded,
)
