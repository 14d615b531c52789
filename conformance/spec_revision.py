"""A spec as it was at a git revision: ``git show REV:path`` for the file and
the fragments it includes, written to a temporary directory and loaded there.
Git runs only because the user asked for a revision (``--rev``)."""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path, PurePosixPath

import yaml

from statemachines import Problem, Spec, SpecError, load_spec

__all__ = ["load_spec_at_revision"]

GIT_TIMEOUT_S = 30


def _show(directory: Path, rev: str, name: str) -> bytes:
    try:
        done = subprocess.run(
            ["git", "-C", str(directory), "show", f"{rev}:./{name}"],
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError:
        raise SpecError(
            [
                Problem(
                    "git is not installed, so --rev cannot read an old version",
                    hint="pass the old file instead: conformance diff OLD NEW",
                )
            ]
        ) from None
    except subprocess.TimeoutExpired:
        raise SpecError([Problem(f"git show {rev}:{name} took over {GIT_TIMEOUT_S} s")]) from None
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise SpecError(
            [
                Problem(
                    f"cannot read {name} at revision {rev!r}: {detail[-1] if detail else 'git failed'}",
                    str(directory / name),
                    hint="check the revision (a commit, branch or tag) and that the file existed there",
                )
            ]
        )
    return done.stdout


def load_spec_at_revision(path: str | Path, rev: str) -> Spec:
    """Load ``path`` as it was at ``rev`` (its `include:` fragments from the same revision)."""
    path = Path(path)
    directory, name = path.parent, path.name
    main = _show(directory, rev, name)
    with tempfile.TemporaryDirectory(prefix="conformance-rev-") as tmp:
        root = Path(tmp)
        (root / name).write_bytes(main)
        try:
            data = yaml.safe_load(main)
        except (yaml.YAMLError, ValueError, RecursionError):  # a 5,000-digit integer, 2026-02-30, deep nesting
            data = None  # the load below reports it with its line
        includes = data.get("include") if isinstance(data, dict) else None
        for fragment in includes if isinstance(includes, list) else []:
            rel = PurePosixPath(str(fragment))
            if rel.is_absolute() or ".." in rel.parts:
                raise SpecError(
                    [
                        Problem(
                            f"include {fragment!r} leaves the spec's directory; --rev reads only files beside the spec",
                            str(path),
                        )
                    ]
                )
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(_show(directory, rev, str(rel)))
        try:
            spec = load_spec(root / name)
        except SpecError as exc:  # say where the problem is in the repository, not in the temporary copy
            raise SpecError([replace(p, file=_at(p.file, root, directory, rev)) for p in exc.problems]) from None
    spec.path = f"{path}@{rev}"
    return spec


def _at(file: str | None, root: Path, directory: Path, rev: str) -> str | None:
    if file is None or not file.startswith(str(root)):
        return file
    return f"{directory / Path(file).relative_to(root)}@{rev}"
