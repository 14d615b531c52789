"""A spec as it was at a git revision: ``git show COMMIT:path`` for the file
and the fragments it includes, written to a temporary directory and loaded
there. Git runs only because the user asked for a revision (``--rev``).

What the user typed is verified as a revision before anything else reaches
git: it may not start with ``-`` (git would take it as an option), and
``git rev-parse --verify --end-of-options REV^{commit}`` must name a commit;
only the commit's hexadecimal id is passed on. Every file read from git is
read within the caps of a file on disk (``MAX_SPEC_BYTES``) before it is
parsed, and its `include:` list too (``MAX_INCLUDES`` entries, each
distinct path read once), so an old version cannot exhaust the kit either."""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path, PurePosixPath

from statemachines import Problem, Spec, SpecError, load_spec
from statemachines.load.source import MAX_INCLUDES, MAX_SPEC_BYTES, MAX_WHOLE_SPEC_BYTES, load_yaml_text

__all__ = ["load_spec_at_revision", "verified_commit"]

GIT_TIMEOUT_S = 30
_COMMIT = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")  # SHA-1 or SHA-256


def _git(directory: Path, args: list[str], what: str) -> tuple[int, bytes, str]:
    """Run git in ``directory``: (exit code, at most MAX_SPEC_BYTES + 1 bytes of
    its output, the last line of its errors)."""
    try:
        with subprocess.Popen(
            ["git", "-C", str(directory), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        ) as process:
            try:
                out, err = _bounded(process)
            finally:
                process.kill()
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
        raise SpecError([Problem(f"git took over {GIT_TIMEOUT_S} s for {what}")]) from None
    lines = err.decode("utf-8", "replace").strip().splitlines()
    return process.returncode if process.returncode is not None else -1, out, lines[-1] if lines else "git failed"


def _bounded(process: subprocess.Popen) -> tuple[bytes, bytes]:
    """The process's output, read up to one byte past the cap (then it is
    stopped), and its errors; TimeoutExpired past GIT_TIMEOUT_S."""
    import threading

    out = bytearray()

    def read() -> None:
        assert process.stdout is not None
        while len(out) <= MAX_SPEC_BYTES:
            chunk = process.stdout.read1(1 << 16)  # type: ignore[attr-defined]  # a BufferedReader
            if not chunk:
                break
            out.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(GIT_TIMEOUT_S)
    if reader.is_alive():
        process.kill()
        raise subprocess.TimeoutExpired(process.args, GIT_TIMEOUT_S)
    if len(out) > MAX_SPEC_BYTES:
        process.kill()
    assert process.stderr is not None
    try:
        process.wait(GIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    return bytes(out[: MAX_SPEC_BYTES + 1]), process.stderr.read(64 << 10)


def verified_commit(directory: Path, rev: str) -> str:
    """The commit id ``rev`` names in the repository of ``directory``; a
    SpecError for anything that is not a revision of a commit there."""
    hint = "name a commit, branch or tag, e.g. --rev HEAD~1 or --rev main"
    if not rev or rev.startswith("-") or any(c in rev for c in "\x00\n\r"):
        raise SpecError([Problem(f"--rev {rev!r} is not a revision (it may not start with '-')", hint=hint)])
    code, out, err = _git(
        directory, ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"], f"--rev {rev!r}"
    )
    commit = out.decode("ascii", "replace").strip()
    if code != 0 or not _COMMIT.fullmatch(commit):
        said = "" if code != 0 and err == "git failed" else f" ({err})"
        raise SpecError([Problem(f"--rev {rev!r} names no commit of the repository at {directory}{said}", hint=hint)])
    return commit


def _show(directory: Path, commit: str, rev: str, name: str) -> bytes:
    code, out, err = _git(directory, ["show", "--end-of-options", f"{commit}:./{name}"], f"{name} at {rev!r}")
    if code != 0 and len(out) <= MAX_SPEC_BYTES:
        raise SpecError(
            [
                Problem(
                    f"cannot read {name} at revision {rev!r}: {err}",
                    str(directory / name),
                    hint="check the revision (a commit, branch or tag) and that the file existed there",
                )
            ]
        )
    if len(out) > MAX_SPEC_BYTES:
        raise SpecError(
            [
                Problem(
                    f"{name} at revision {rev!r} is over the {MAX_SPEC_BYTES}-byte limit for a spec; it was not read",
                    f"{directory / name}@{rev}",
                    hint="split the spec with `include:` or remove generated content",
                )
            ]
        )
    return out


def _includes(main: bytes, shown: str) -> list[str]:
    """The distinct `include:` entries of the main file (read under the caps
    of any spec file: size, values, nesting); [] when it does not load (the
    full load reports why, with its line)."""
    try:
        data, _ = load_yaml_text(main.decode("utf-8"), shown)
    except (SpecError, UnicodeDecodeError):
        return []
    includes = data.get("include") if isinstance(data, dict) else None
    names = list(dict.fromkeys(str(n) for n in includes)) if isinstance(includes, list) else []
    if len(names) > MAX_INCLUDES:
        raise SpecError(
            [
                Problem(
                    f"`include:` lists {len(names):,} files, over the limit of {MAX_INCLUDES}; none was read",
                    shown,
                    hint="a spec includes a handful of fragments; list each once",
                )
            ]
        )
    return names


def load_spec_at_revision(path: str | Path, rev: str) -> Spec:
    """Load ``path`` as it was at ``rev`` (its `include:` fragments from the same revision)."""
    path = Path(path)
    directory, name = path.parent, path.name
    commit = verified_commit(directory, rev)
    main = _show(directory, commit, rev, name)
    with tempfile.TemporaryDirectory(prefix="conformance-rev-") as tmp:
        root = Path(tmp)
        (root / name).write_bytes(main)
        total = len(main)
        for fragment in _includes(main, f"{path}@{rev}"):
            rel = PurePosixPath(fragment)
            if rel.is_absolute() or ".." in rel.parts or not rel.parts or "\x00" in fragment:
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
            text = _show(directory, commit, rev, str(rel))
            total += len(text)
            if total > MAX_WHOLE_SPEC_BYTES:
                raise SpecError(
                    [
                        Problem(
                            f"with {fragment} the spec and its fragments at revision {rev!r} are over "
                            f"{MAX_WHOLE_SPEC_BYTES:,} bytes in all; nothing more was read",
                            f"{path}@{rev}",
                        )
                    ]
                )
            target.write_bytes(text)
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
