"""Accepted deviations: what an implementation team knowingly does differently.

A deviations file (YAML, ``conformance/schemas/deviations.schema.json``,
docs/deviations.md) lists entries, each with an ``id``, a ``reason``, an
optional ``expires`` date and one of

- ``accept``: a divergence or a schema failure at an operation and a JSON
  path (and, optionally, where a CEL condition over ``args``, ``expected``,
  ``observed`` and ``failure`` holds) is recorded as "accepted deviation D"
  and the run goes on as if the answer had matched there;
- ``avoid``: inputs the kit must not send (an operation, optionally only
  where a CEL condition over ``args`` and the model's ``record`` the call
  addresses holds): the exploration skips them and a scenario that would
  send one is skipped, naming the entry.

Nothing is accepted silently: every entry is counted, with its first example,
in every report. An entry past its ``expires`` date is not applied and fails
the run.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from statemachines import ExpressionError, RunCostError, SpecError, compile_expression
from statemachines.load.source import load_yaml_file

from ..errors import ConformanceError

__all__ = ["Deviation", "Deviations", "DeviationsError", "load_deviations", "path_matches", "SCHEMA_NAME"]

SCHEMA_NAME = "deviations.schema.json"

# What a `when` may read besides `args` and `operation`: an ``accept`` the
# difference (``failure`` is "divergence", "expectation" or "schema"), an
# ``avoid`` the model's records the call addresses (``record``: the first).
_ACCEPT_NAMES = frozenset({"expected", "observed", "path", "failure"})
_AVOID_NAMES = frozenset({"record", "records"})
# CEL's own type names (``type(observed) == list``): not names of the run.
_CEL_TYPES = frozenset({"list", "map", "string", "int", "uint", "double", "bool", "bytes", "null_type", "type"})


class DeviationsError(ConformanceError):
    """A deviations file that cannot be used: each line says file:line, what
    is wrong and how to fix it."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


def _pattern(path: str) -> re.Pattern:
    """A path pattern as a regex. ``*`` stands for one key, ``[*]`` for any
    index, ``**`` for any run of keys and indexes; a pattern also covers every
    path below the one it names (``result.jobs`` covers ``result.jobs[3].status``)."""
    out = []
    for token in re.findall(r"\*\*|\[\*\]|\*|\[\d+\]|[^.\[\]*]+|\.", path):
        if token == "**":
            out.append(r".*")
        elif token == "[*]":
            out.append(r"\[\d+\]")
        elif token == "*":
            out.append(r"[^.\[\]]+")
        else:
            out.append(re.escape(token))
    return re.compile("".join(out) + r"(?:$|[.\[].*)", re.S)


def path_matches(pattern: str, path: str) -> bool:
    """Whether a divergence at ``path`` (as the kit prints it) falls under ``pattern``."""
    return _pattern(pattern).match(path) is not None


@dataclass
class Deviation:
    id: str
    reason: str
    kind: str  # accept | avoid
    where: str  # file:line of the entry
    operation: str | None = None
    path: str | None = None
    when: Any = None  # a compiled CEL Expression, or None
    expires: dt.date | None = None
    count: int = 0
    example: dict | None = None
    schema_count: int = 0  # of ``count``: schema failures accepted
    schema_example: dict | None = None
    errors: list = field(default_factory=list)
    _regex: re.Pattern | None = None

    def expired(self, today: dt.date) -> bool:
        return self.expires is not None and today > self.expires

    def _holds(self, env: dict) -> bool:
        if self.when is None:
            return True
        try:
            return self.when.evaluate_bool(env, role="a deviation's `when`")
        except RunCostError:
            raise  # the command's budget: the run ends (a spec error), never silently goes on
        except ExpressionError as exc:
            if len(self.errors) < 3:
                self.errors.append(str(exc))
            return False

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "kind": self.kind,
            "reason": self.reason,
            "where": self.where,
            "operation": self.operation,
            "path": self.path,
            "when": self.when.source if self.when is not None else None,
            "expires": self.expires.isoformat() if self.expires else None,
            "count": self.count,
            "example": self.example,
            "schema_count": self.schema_count,
            "schema_example": self.schema_example,
            "errors": list(self.errors),
        }


class Deviations:
    """The entries of one deviations file, with what the run matched."""

    def __init__(self, entries: list[Deviation], file: str, *, today: dt.date | None = None):
        self.file = file
        self.today = today or dt.datetime.now(dt.UTC).date()
        self.entries = entries
        self.expired = [d for d in entries if d.expired(self.today)]
        self._accepts = [d for d in entries if d.kind == "accept" and not d.expired(self.today)]
        self._avoids = [d for d in entries if d.kind == "avoid" and not d.expired(self.today)]

    def accept(
        self,
        operation: str,
        args: Any,
        path: str,
        expected: Any,
        observed: Any,
        where: str | None = None,
        failure: str = "divergence",
    ) -> Deviation | None:
        """The entry that accepts this difference (counted), or None.
        ``failure`` says what kind it is: a ``divergence`` from the model, a
        scenario's ``expectation``, or a ``schema`` failure (``expected`` is
        then the schema's message); schema failures are also counted apart."""
        env = {
            "args": args,
            "expected": expected,
            "observed": observed,
            "path": path,
            "operation": operation,
            "failure": failure,
        }
        for d in self._accepts:
            if d.operation not in (None, operation) or d._regex is None or not d._regex.match(path):
                continue
            if not d._holds(env):
                continue
            d.count += 1
            example = {
                "operation": operation,
                "args": args,
                "path": path,
                "expected": expected,
                "observed": observed,
                "where": where,
            }
            if d.example is None:
                d.example = example
            if failure == "schema":
                d.schema_count += 1
                if d.schema_example is None:
                    d.schema_example = example
            return d
        return None

    def avoid(
        self,
        operation: str,
        args: Any,
        where: str | None = None,
        addressed: Callable[[], list[dict]] | None = None,
        *,
        count: bool = True,
    ) -> Deviation | None:
        """The entry that says not to send this call (counted, unless
        ``count`` is False: a replay that reduces a failure asks, it does not
        explore), or None. ``addressed`` gives the model's records the call
        addresses (read only when an entry's ``when`` needs them): its
        ``record`` (the first, or null) and ``records``."""
        env: dict = {"args": args, "operation": operation}
        for d in self._avoids:
            if d.operation != operation:
                continue
            if d.when is not None and "records" not in env:
                records = addressed() if addressed is not None else []
                env.update(record=records[0] if records else None, records=records)
            if not d._holds(env):
                continue
            if not count:
                return d
            d.count += 1
            if d.example is None:
                d.example = {"operation": operation, "args": args, "where": where}
                if env.get("record") is not None:
                    d.example["record"] = env["record"]
            return d
        return None

    def avoids_by_arguments(self, operation: str, args: Any) -> Deviation | None:
        """The entry that says not to send this call whatever the state (its
        ``when`` reads no ``record``), not counted; None when no such entry
        applies (one that reads ``record`` may still, at the time of the call)."""
        for d in self._avoids:
            if d.operation != operation:
                continue
            if d.when is not None and d.when.variables & _AVOID_NAMES:
                continue
            if d._holds({"args": args, "operation": operation}):
                return d
        return None

    def expired_problems(self) -> list[dict]:
        return [
            {
                "kind": "deviation-expired",
                "where": d.where,
                "message": f"accepted deviation {d.id} expired on {d.expires.isoformat()} and is no longer "
                f"applied ({d.reason.strip()}); fix the difference, or renew the entry with a new "
                f"`expires` date if the team still accepts it",
            }
            for d in self.expired
            if d.expires is not None  # an expired entry has a date
        ]

    def to_report(self) -> dict:
        return {
            "file": self.file,
            "today": self.today.isoformat(),
            "accepted": sum(d.count for d in self._accepts),
            "avoided": sum(d.count for d in self._avoids),
            "schema_accepted": sum(d.schema_count for d in self._accepts),
            "expired": [d.id for d in self.expired],
            "entries": [d.to_dict() for d in self.entries],
        }


def _schema() -> dict:
    text = resources.files("conformance").joinpath("schemas", SCHEMA_NAME).read_text(encoding="utf-8")
    return json.loads(text)


def _dates_as_text(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _dates_as_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_dates_as_text(v) for v in value]
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return value


def load_deviations(path: str | Path, *, spec: Any = None, today: dt.date | None = None) -> Deviations:
    """Load and check a deviations file; raise DeviationsError with file:line
    for everything wrong with it at once. With ``spec``, operations are
    checked against the spec's and a ``spec:`` the file names must be its id."""
    path = Path(path)
    try:
        data, smap = load_yaml_file(path)
    except SpecError as exc:
        raise DeviationsError([str(p) for p in exc.problems]) from None
    data = _dates_as_text(data)

    def at(where: tuple) -> str:
        file, line = smap.locate(where)
        return f"{file or path}:{line}" if line else str(file or path)

    _check_shape(data, at)
    if spec is not None and data.get("spec") not in (None, spec.id):
        raise DeviationsError(
            [
                f"{at(('spec',))}: the file is for spec {data['spec']!r}, this run checks "
                f"{spec.id!r}; name the right file or fix `spec:`"
            ]
        )
    problems: list[str] = []
    entries: list[Deviation] = []
    seen: dict[str, str] = {}
    for i, raw in enumerate(data["entries"]):
        where = at(("entries", i))
        if raw["id"] in seen:
            problems.append(f"{where}: id {raw['id']!r} is used twice (also at {seen[raw['id']]}); ids must be unique")
        seen[raw["id"]] = where
        entries.append(_entry(raw, ("entries", i), spec, at, problems))
    if problems:
        raise DeviationsError(problems)
    return Deviations(entries, str(path), today=today)


def _check_shape(data: Any, at: Callable[[tuple], str]) -> None:
    """Raise DeviationsError naming every place where ``data`` breaks the
    deviations schema."""
    problems = []
    validator = jsonschema.Draft202012Validator(_schema(), format_checker=jsonschema.FormatChecker())
    for error in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
        where = tuple(error.absolute_path)
        problems.append(
            f"{at(where)}: {'/'.join(map(str, where)) or 'the file'}: {error.message} "
            f"(docs/deviations.md describes every key)"
        )
    if problems:
        raise DeviationsError(problems)


def _entry(raw: dict, place: tuple, spec: Any, at: Callable[[tuple], str], problems: list[str]) -> Deviation:
    """The entry at ``place`` (schema-checked), its problems added to ``problems``."""
    kind = "accept" if "accept" in raw else "avoid"
    body = raw[kind]
    operation = body.get("operation")
    if spec is not None and operation is not None and operation not in spec.operations and operation != "set_clock":
        problems.append(
            f"{at((*place, kind, 'operation'))}: the spec has no operation {operation!r} "
            f"(it has: {', '.join(spec.operations)})"
        )
    when = _condition(body["when"], kind, at((*place, kind, "when")), problems) if "when" in body else None
    deviation = Deviation(
        id=raw["id"],
        reason=raw["reason"],
        kind=kind,
        where=at(place),
        operation=operation,
        path=body.get("path"),
        when=when,
        expires=dt.date.fromisoformat(raw["expires"]) if raw.get("expires") else None,
    )
    if kind == "accept":
        deviation._regex = _pattern(body["path"])
    return deviation


def _condition(source: Any, kind: str, where: str, problems: list[str]) -> Any:
    """An entry's compiled ``when`` (None when it does not compile), its
    problems added to ``problems``: it may read ``args`` and ``operation``,
    and an ``accept`` also ``expected``, ``observed`` and ``path``."""
    try:
        when = compile_expression(source, where)
    except ExpressionError as exc:
        problems.append(str(exc))
        return None
    allowed = {"args", "operation"} | (_ACCEPT_NAMES if kind == "accept" else _AVOID_NAMES)
    unknown = [name for name in when.unknown_names(allowed) if not name.endswith("()") and name not in _CEL_TYPES]
    if unknown:
        problems.append(f"{where}: `when` reads {', '.join(unknown)}; it may read {', '.join(sorted(allowed))}")
    return when
