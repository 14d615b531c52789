"""Specs loaded once per process: `conformance mutants`, shards and test
suites run the same spec file many times in one process, and loading it
(parsing, the structure check, compiling) costs more than a short run.

A loaded spec is reused while its file and every fragment it includes are
unchanged (the same bytes at the same real paths, the includes still found
at the same places); any change loads it again. Bytes, not modification
times: an edit within the file system's clock tick keeps the time. The reused
``Spec`` is shared, so callers must not change it (``spec_revision``, which
does, loads its own)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from statemachines import Spec, load_spec
from statemachines.load.includes import IncludeRefused, resolve_include

__all__ = ["load_spec_once", "forget_loaded_specs"]

_Stamp = tuple[tuple[str, str], ...]
_LOADED: dict[str, tuple[_Stamp, Spec]] = {}
_KEEP = 16  # specs kept at most (a campaign uses one or two)


def load_spec_once(path: str | Path) -> Spec:
    """The spec at ``path``, loaded now or reused from an earlier load of the
    same, unchanged files; raises what ``load_spec`` raises."""
    real = os.path.realpath(path)
    kept = _LOADED.get(real)
    if kept is not None and _stamp(real, kept[1]) == kept[0]:
        return kept[1]
    spec = load_spec(path)
    stamp = _stamp(real, spec)
    if stamp:
        if len(_LOADED) >= _KEEP:
            _LOADED.pop(next(iter(_LOADED)))
        _LOADED[real] = (stamp, spec)
    return spec


def forget_loaded_specs() -> None:
    _LOADED.clear()


def _stamp(real: str, spec: Spec) -> _Stamp:
    """Where the spec's files are and how they look now; empty when one of
    them cannot be found (nothing is then reused)."""
    try:
        files = [real] + [
            str(resolve_include(Path(real).parent, name)[1])
            for name in (spec.raw.get("include") or [])
            if isinstance(name, str)
        ]
        return tuple((f, hashlib.sha256(Path(f).read_bytes()).hexdigest()) for f in files)
    except (OSError, IncludeRefused):
        return ()
