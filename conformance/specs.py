"""Specs by name: the specs this package ships and those other installed
packages contribute.

A package contributes specs with an entry point in the group
``lifecycle_conformance.specs`` whose value names a Python package holding
spec files (``*.yaml`` with a ``format:`` key at the top)::

    [project.entry-points."lifecycle_conformance.specs"]
    my-team = "my_team_specs"

Each such file can then be named by its file name without ``.yaml``
(``conformance run my-lifecycle``). The kit's own specs come in the same way
(entry point ``bundled``, package ``lifecycle_specs``). Fragments (files
meant for another spec's ``include:``) and scenario matrices are not listed.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
from dataclasses import dataclass
from importlib import metadata, resources
from pathlib import Path
from typing import Any

from .errors import ConformanceError

__all__ = [
    "ENTRY_POINT_GROUP",
    "BundledSpec",
    "SpecNotFound",
    "bundled_specs",
    "resolve_spec",
    "is_spec_name",
    "spec_target_problem",
    "CHANGELOG_SUFFIX",
    "changelog_path",
    "changelog_versions",
    "changelog_problems",
]

ENTRY_POINT_GROUP = "lifecycle_conformance.specs"


class SpecNotFound(ConformanceError):
    """Neither a readable spec file nor the name of an installed spec."""


@dataclass(frozen=True)
class BundledSpec:
    name: str  # what a user types: thread-jobs
    path: Path  # a real file (extracted if the package is zipped)
    source: str  # the entry point that contributed it, e.g. "bundled (lifecycle_specs)"


_files = contextlib.ExitStack()
atexit.register(_files.close)


def _is_spec_text(head: str) -> bool:
    """A whole spec (not a fragment or a scenario matrix): a top-level ``format:`` key."""
    return any(line.startswith("format:") for line in head.splitlines())


def _specs_of(package: str, source: str) -> list[BundledSpec]:
    try:
        root = resources.files(package)
    except (ModuleNotFoundError, TypeError) as exc:
        raise SpecNotFound(f"entry point {source} names package {package!r}, which cannot be imported: {exc}") from None
    found = []
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".yaml") or not entry.is_file():
            continue
        with entry.open("r", encoding="utf-8", errors="replace") as handle:
            head = handle.read(65536)
        if _is_spec_text(head):
            path = _files.enter_context(resources.as_file(entry))
            found.append(BundledSpec(entry.name.removesuffix(".yaml"), Path(path), source))
    return found


def bundled_specs() -> list[BundledSpec]:
    """Every spec installed packages offer by name, in name order. A name
    offered twice keeps the first package's spec (entry points in name order)."""
    seen: dict[str, BundledSpec] = {}
    points = sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: (ep.name != "bundled", ep.name))
    for point in points:
        for spec in _specs_of(point.value.split(":")[0], f"{point.name} ({point.value})"):
            seen.setdefault(spec.name, spec)
    return sorted(seen.values(), key=lambda s: s.name)


def is_spec_name(text: str) -> bool:
    """Looks like a name (``thread-jobs``), not a path (``spec/x.yaml``)."""
    return bool(text) and os.sep not in text and "/" not in text and not text.endswith((".yaml", ".yml", ".json"))


def resolve_spec(name_or_path: str, *, relative_to: str | os.PathLike | None = None) -> str:
    """The file to load for ``name_or_path``: an existing file (as given, or
    relative to ``relative_to``), else an installed spec of that name. A
    name that is neither raises SpecNotFound saying what exists; a path that
    does not exist comes back as it is, for the loader to report."""
    candidates = [Path(name_or_path)]
    if relative_to is not None and not Path(name_or_path).is_absolute():
        candidates.insert(0, Path(relative_to) / name_or_path)
    for candidate in candidates:
        if candidate.is_file():
            return str(candidate)
    if is_spec_name(name_or_path):
        specs = bundled_specs()
        for spec in specs:
            if spec.name == name_or_path:
                return str(spec.path)
        names = ", ".join(s.name for s in specs) or "none"
        raise SpecNotFound(
            f"{name_or_path!r} is neither a spec file nor the name of an installed spec "
            f"(installed: {names}; `conformance specs` lists them)"
        )
    return name_or_path  # a path: loading it says what is wrong with it, with the file's name


KIT_REFERENCES = "lifecycle_references"  # the kit's own reference implementations and mutants


def spec_target_problem(target: str, key: str = "reference", spec: Any = None) -> str | None:
    """Why a spec may not choose ``target`` (``module:attr``, its
    ``implementations.<key>``) as code for the kit to import and run, or None.

    A spec is data (docs/trust-model.md): it may name only the kit's own
    references (``lifecycle_references``) or code of an installed package
    that contributes specs through the ``lifecycle_conformance.specs`` entry
    point, and only a plain attribute of that module (never a ``__main__``
    module: importing one runs its program). Any other code runs
    only when the user names it (``--adapter``)."""
    module, _, attr = str(target).partition(":")
    top = module.split(".", 1)[0]
    trusted = {KIT_REFERENCES}
    try:
        trusted |= {
            point.value.split(":")[0].split(".", 1)[0] for point in metadata.entry_points(group=ENTRY_POINT_GROUP)
        }
    except Exception:
        pass
    parts = module.split(".")
    plain = all(part.isidentifier() and part != "__main__" for part in parts)  # a library, not a program
    if top in trusted and plain and attr.isidentifier():
        return None
    fix = (
        f"if you trust that code, name it yourself: --adapter {target}"
        if key == "reference"
        else "if you trust that code, ship the spec from a package with that entry point"
    )
    file, line = spec.source_map.locate(("implementations", key)) if spec is not None else (None, None)
    where = f"{file}:{line}: " if file else ""
    return (
        f"{where}the spec names {target!r} as its {key} implementation, but a spec cannot choose code for the kit to "
        f"run (only the kit's own references or a package that ships specs through the "
        f"{ENTRY_POINT_GROUP} entry point); {fix}"
    )


# A spec's changelog sits beside it: thread-jobs.yaml -> thread-jobs.changelog.md (Markdown,
# one `## VERSION` heading per version, newest first; a major one says what to re-check).
CHANGELOG_SUFFIX = ".changelog.md"
_VERSION_HEADING = re.compile(r"^## (\d+\.\d+\.\d+)(.*)$", re.MULTILINE)


def changelog_path(spec_path: str | os.PathLike) -> Path | None:
    """The changelog beside the spec file ``spec_path``, or None if it has none."""
    path = Path(spec_path)
    candidate = path.with_name(path.name.removesuffix(".yaml").removesuffix(".yml") + CHANGELOG_SUFFIX)
    return candidate if candidate.is_file() else None


def changelog_versions(text: str) -> list[tuple[str, str]]:
    """(version, the rest of its heading) of each ``## VERSION`` section, in file order."""
    return [(m.group(1), m.group(2).strip()) for m in _VERSION_HEADING.finditer(text)]


def _major(version: str) -> str:
    return version.split(".", 1)[0]


def changelog_problems(text: str, spec_version: str) -> list[str]:
    """What a changelog lacks: the spec's own version first, versions newest
    first, and for each major version after the first a `Re-check` paragraph."""
    versions = changelog_versions(text)
    if not versions:
        return ["it has no `## VERSION` section"]
    problems = []
    if versions[0][0] != spec_version:
        problems.append(f"its newest section is {versions[0][0]}, the spec is {spec_version}")
    numbers = [tuple(int(part) for part in v.split(".")) for v, _ in versions]
    if numbers != sorted(numbers, reverse=True):
        problems.append("its sections are not newest first")
    sections = _VERSION_HEADING.split(text)[1:]  # version, heading rest, body, ...
    bodies = {sections[i]: sections[i + 2] for i in range(0, len(sections), 3)}
    for (version, _), older in zip(versions, versions[1:]):
        if _major(version) != _major(older[0]) and "Re-check" not in bodies[version]:
            problems.append(f"{version} is a major change but does not say what to re-check (a `Re-check` paragraph)")
    return problems
