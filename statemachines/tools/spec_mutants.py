"""Spec mutants: a bundled spec with one rule changed, which ``check-spec`` must catch.

A spec names its mutants file in ``check.mutants`` (a path beside the spec,
read under the same rules as ``include:``, docs/trust-model.md). The file is
data: each mutant is a name, one sentence saying the bug, the finding that
must catch it (``caught_by``: a kind and optionally a subject), the length of
the shortest operation sequence that shows it (``shortest``), and a few edits
of the spec's data (after its includes are merged), each addressed by a JSON
pointer::

    - at: /policies/retention/limit      # replace: the value must be `was` now
      was: params.retention_limit
      becomes: params.retention_limit + 1
    - at: /operations/turn_boundary/steps/2/for_each/do/2
      was: {set: ...}                     # remove: `was` only
    - at: /lifecycle/transitions/0/source/-
      becomes: completed                  # add (to a list: an index, or `-` to append)

``was`` guards each edit: when the spec changes under a mutant, the mutant
fails to apply with its file:line instead of silently testing something
else. A mutated spec is compiled like any spec (nothing in the file runs) and
checked over the spec's declared scope; breadth first, the path found is a
shortest one, so it must be exactly ``shortest`` long.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import Problem, SpecError
from ..load.includes import IncludeRefused, resolve_include
from ..load.schema_check import check_structure
from ..load.source import SourceMap, list_index, load_yaml_text, read_spec_text
from ..load.spec import Spec
from ..model.compiler import compile_spec, load_spec_data
from .check import VIOLATIONS, CheckFinding, CheckReport, check_spec
from .search_budget import SearchBudget

__all__ = ["MUTANTS_SCHEMA", "MutantOutcome", "SpecEdit", "SpecMutant", "load_spec_mutants", "run_spec_mutants"]

_MISSING = object()

_EDIT = {
    "type": "object",
    "additionalProperties": False,
    "required": ["at"],
    "anyOf": [{"required": ["was"]}, {"required": ["becomes"]}],
    "properties": {
        "at": {"type": "string", "pattern": "^/", "description": "A JSON pointer into the spec's data."},
        "was": {"description": "The value there now (replace, or remove when `becomes` is absent)."},
        "becomes": {"description": "The value it becomes (add, when `was` is absent)."},
    },
}
MUTANTS_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["mutants"],
    "properties": {
        "spec": {"type": "string", "description": "The id of the spec these mutants change."},
        "mutants": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name", "description", "caught_by", "shortest", "edits"],
                "properties": {
                    "name": {"type": "string", "pattern": "^[a-z][a-z0-9_]*$"},
                    "description": {"type": "string", "minLength": 1},
                    "caught_by": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["kind"],
                        "properties": {"kind": {"enum": list(VIOLATIONS)}, "subject": {"type": "string"}},
                    },
                    "shortest": {"type": "integer", "minimum": 1},
                    "edits": {"type": "array", "minItems": 1, "items": _EDIT},
                },
            },
        },
    },
}


@dataclass(frozen=True)
class SpecEdit:
    at: str
    was: Any = _MISSING
    becomes: Any = _MISSING
    where: str = ""  # file:line of the edit in the mutants file


@dataclass(frozen=True)
class SpecMutant:
    name: str
    description: str
    kind: str  # the finding kind that must catch it
    subject: str | None  # ... and its subject, when given
    shortest: int
    edits: tuple[SpecEdit, ...]
    where: str = ""


@dataclass
class MutantOutcome:
    mutant: SpecMutant
    finding: CheckFinding | None  # the shortest finding of the expected kind (and subject)
    complete: bool  # the scope was explored completely
    problems: list[str] = field(default_factory=list)  # the mutant did not apply, or the scope is unusable
    max_depth: int | None = None  # the depth the scope searched to

    @property
    def caught(self) -> bool:
        return self.finding is not None

    @property
    def length(self) -> int | None:
        return None if self.finding is None else len(self.finding.path)

    @property
    def why_missed(self) -> str | None:
        """Why a missed mutant may have been missed, when the search says."""
        if self.caught or self.problems:
            return None
        # A stuck record is judged on what the rest of the bound can still do: it needs twice its path.
        needed = self.mutant.shortest * (2 if self.mutant.kind == "stuck" else 1)
        if self.max_depth is not None and self.max_depth < needed:
            return f"the scope searched to depth {self.max_depth}; showing it needs depth {needed}"
        if not self.complete:
            return "the search stopped at a bound"
        return None

    @property
    def as_declared(self) -> bool:
        """Caught, by a path exactly as long as the mutant declares."""
        return self.length == self.mutant.shortest

    def to_dict(self) -> dict:
        return {
            "name": self.mutant.name,
            "description": self.mutant.description,
            "caught": self.caught,
            "caught_by": self.finding.to_dict() if self.finding else None,
            "expected": {"kind": self.mutant.kind, "subject": self.mutant.subject},
            "shortest_declared": self.mutant.shortest,
            "shortest_found": self.length,
            "complete": self.complete,
            "why_missed": self.why_missed,
            "problems": list(self.problems),
        }


# -- the mutants file -------------------------------------------------------------------
def _mutants_file(spec: Spec) -> str | None:
    check = spec.raw.get("check") or {}
    name = check.get("mutants") if isinstance(check, dict) else None
    return name if isinstance(name, str) else None


def load_spec_mutants(spec: Spec) -> list[SpecMutant]:
    """The mutants the spec names in ``check.mutants`` ([] when it names none);
    SpecError with file:line when the file cannot be read or is malformed."""
    name = _mutants_file(spec)
    if name is None:
        return []
    file, line = spec.source_map.locate(("check", "mutants"))
    try:
        shown, real = resolve_include(Path(spec.path).parent, name)
    except IncludeRefused as exc:
        raise SpecError([Problem(str(exc), file, line, exc.hint)]) from None
    data, smap = load_yaml_text(read_spec_text(real, shown=str(shown), regular_only=True), str(shown))
    problems = check_structure(data, smap, MUTANTS_SCHEMA)
    if problems:
        raise SpecError(problems)
    return [_mutant(item, smap, ("mutants", i)) for i, item in enumerate(data["mutants"])]


def _at(smap: SourceMap, path: tuple) -> str:
    file, line = smap.locate(path)
    return f"{file}:{line}" if file else ""


def _mutant(item: dict, smap: SourceMap, path: tuple) -> SpecMutant:
    edits = tuple(
        SpecEdit(edit["at"], edit.get("was", _MISSING), edit.get("becomes", _MISSING), _at(smap, path + ("edits", j)))
        for j, edit in enumerate(item["edits"])
    )
    caught = item["caught_by"]
    return SpecMutant(
        item["name"],
        item["description"],
        caught["kind"],
        caught.get("subject"),
        item["shortest"],
        edits,
        _at(smap, path),
    )


# -- applying edits -------------------------------------------------------------------------
def _pointer(at: str) -> list[str]:
    return [part.replace("~1", "/").replace("~0", "~") for part in at.split("/")[1:]]


def _index(container: list, part: str, edit: SpecEdit, adding: bool) -> int:
    if adding and part == "-":
        return len(container)
    index = list_index(part, len(container) + (1 if adding else 0))
    if index is None:
        shown = part if len(part) <= 40 else part[:40] + "..."
        raise _EditFailed(edit, f"{shown!r} is no index of the list there (it has {len(container)} items)")
    return index


class _EditFailed(Exception):
    def __init__(self, edit: SpecEdit, message: str):
        at = edit.at if len(edit.at) <= 200 else edit.at[:200] + "..."
        super().__init__(f"{edit.where}: edit at {at}: {message}")


def _apply(data: dict, edit: SpecEdit) -> None:
    parts = _pointer(edit.at)
    node: Any = data
    for part in parts[:-1]:
        if isinstance(node, list):
            node = node[_index(node, part, edit, False)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            raise _EditFailed(edit, f"the spec has nothing at {part!r}")
    last = parts[-1] if parts else ""
    adding = edit.was is _MISSING
    if isinstance(node, list):
        key: Any = _index(node, last, edit, adding)
    elif isinstance(node, dict):
        key = last
    else:
        raise _EditFailed(edit, "the value there is neither a mapping nor a list")
    current = (
        node[key] if (isinstance(node, dict) and key in node) or (isinstance(node, list) and not adding) else _MISSING
    )
    if adding:
        if current is not _MISSING:
            raise _EditFailed(edit, f"the spec already has {current!r} there; give `was` to replace it")
        if isinstance(node, list):
            node.insert(key, copy.deepcopy(edit.becomes))
        else:
            node[key] = copy.deepcopy(edit.becomes)
        return
    if current != edit.was:
        raise _EditFailed(edit, f"the spec has {current!r} there, not {edit.was!r}: update the mutant")
    if edit.becomes is _MISSING:
        del node[key]
    else:
        node[key] = copy.deepcopy(edit.becomes)


def mutated_spec(spec: Spec, mutant: SpecMutant) -> Spec:
    """The spec with the mutant's edits applied (SpecError when one does not apply)."""
    data, smap = load_spec_data(spec.path)
    data.pop("__load_problems__", None)
    for edit in mutant.edits:
        try:
            _apply(data, edit)
        except _EditFailed as exc:
            raise SpecError([Problem(f"mutant {mutant.name}: {exc}")]) from None
    return compile_spec(data, smap, spec.path)


# -- running them ---------------------------------------------------------------------------
def _matches(finding: CheckFinding, mutant: SpecMutant) -> bool:
    return finding.kind == mutant.kind and (mutant.subject is None or finding.subject == mutant.subject)


def _outcome(mutant: SpecMutant, report: CheckReport) -> MutantOutcome:
    found = sorted((f for f in report.violations if _matches(f, mutant)), key=lambda f: len(f.path))
    first = found[0] if found else None
    problems = list(report.problems)
    if report.stats.exhausted:
        problems.append(f"the search ran out of {report.stats.exhausted}")
    return MutantOutcome(mutant, first, report.stats.complete, problems, report.scope.max_depth)


def run_spec_mutants(
    spec: Spec, overrides: dict | None = None, budget: SearchBudget | None = None
) -> list[MutantOutcome]:
    """Each mutant the spec names, checked over the spec's declared scope
    (with ``overrides``), all within one ``budget``: once it has run out,
    the mutants left are not checked (a problem of each says why)."""
    out = []
    for mutant in load_spec_mutants(spec):
        if budget is not None and budget.spent is not None:
            out.append(MutantOutcome(mutant, None, False, [f"not checked: the search ran out of {budget.spent}"]))
            continue
        try:
            changed = mutated_spec(spec, mutant)
        except SpecError as exc:
            out.append(MutantOutcome(mutant, None, False, [str(p) for p in exc.problems]))
            continue
        out.append(_outcome(mutant, check_spec(changed, overrides, budget=budget)))
    return out
